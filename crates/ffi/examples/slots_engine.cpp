// slots_engine.cpp: railwatch inside an engine of Mooncake TENT's kind, in
// as few lines as the C API allows (embedding 1: the engine keeps its
// monitor thread and its epoll).
//
// The engine owns its device contexts (memory registrations, CQs and
// endpoints hang off them: it never closes one to recover), keeps one slot
// per NIC, empty slots included, checks a four-value status before posting
// (uninitialised, disabled, enabled, paused) and logs through its own
// logger. What railwatch adds is between the "railwatch: begin" and
// "railwatch: end" lines: the drain, the actions, the timers and the
// logging, counted by tests/example_lines.rs (at most 100 lines of code;
// crates/ffi/README.md says how many).
//
// Run with no arguments under the fake libibverbs of railwatch's tests
// (`cargo xtask ffi` does): it plays the network (a flap, a PORT_ACTIVE
// hidden behind a burst of COMM_EST, a DEVICE_FATAL the engine recovers
// from by re-initialising its own context) and checks the status the
// engine reads at each step; exit 0 when every check held.

#include "railwatch_verbs.h"  // libibverbs, railwatch.h and the glue
#include "railwatch.hpp"       // for railwatch::gate: the word's atomic load in C++

#include <dlfcn.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

// ---- the engine's own code, as it was before railwatch ------------------------

// The engine's status, in TENT's order (so railwatch's maps onto it as is).
enum class device_status { uninit, disabled, enabled, paused };

static const char *status_name(device_status s) {
    static const char *const names[] = {"uninit", "disabled", "enabled", "paused"};
    return names[static_cast<int>(s)];
}

// One slot per NIC: an empty slot has no context.
struct nic {
    std::string name;
    ibv_context *ctx = nullptr;
    railwatch::gate gate;  // the rail's gate (added for railwatch)
    int reinits = 0;

    // The engine's own recovery after DEVICE_FATAL: here, just count it
    // (a real engine re-creates its PD, CQs and endpoints on `ctx`).
    int reinitialise() {
        ++reinits;
        return 0;
    }
};

static uint64_t now_ms() {
    static const auto t0 = std::chrono::steady_clock::now();
    return uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count());
}

// The engine's logger (glog in TENT).
__attribute__((format(printf, 2, 3))) static void engine_log(unsigned level, const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    std::fprintf(stdout, "%7.3fs %c %s\n", double(now_ms()) / 1000.0, "?EWIDT"[std::min(level, 5u)], line);
    std::fflush(stdout);
}

// railwatch: begin

// The machine's log requests, in words, to the engine's logger.
static void log_to_engine(void *, uint32_t level, const char *, const char *message) {
    engine_log(level, "%s", message);
}

// A machine for the engine's devices: it owns them (never closed by
// railwatch, only re-validated), each at its own slot.
static rw_machine *watch(std::vector<nic> &nics, uint64_t now) {
    rw_config *c = nullptr;
    rw_machine *m = nullptr;
    rw_config_new(&c);
    rw_config_set_str(c, "device_owner", "engine");
    rw_status st = rw_machine_new(c, &m);
    rw_config_free(&c);
    if (st != RW_OK) return nullptr;
    rw_machine_set_log_callback(m, log_to_engine, nullptr, RW_LOG_LEVEL_INFO);
    const uint8_t port = 1;
    for (uint32_t slot = 0; slot < nics.size(); ++slot) {
        nic &n = nics[slot];
        if (!n.ctx) continue;  // an empty slot stays empty
        rw_gate *g = nullptr;
        if (rw_verbs_make_nonblocking(n.ctx) != 0 ||
            rw_machine_add_device_at(m, slot, n.name.c_str(), &port, 1, now) != RW_OK ||
            rw_machine_gate(m, slot, port, &g) != RW_OK) {
            engine_log(1, "railwatch: %s: %s", n.name.c_str(), rw_last_error());
            rw_machine_free(&m);
            return nullptr;
        }
        n.gate = railwatch::gate(g);
    }
    return m;
}

// Every event of a device's async fd, read and acknowledged, to EAGAIN.
static void drain(rw_machine *m, nic &n, uint32_t slot, uint64_t now) {
    rw_drain_report r{};
    do {
        rw_machine_drain(m, slot, rw_verbs_get_event, n.ctx, 0, now, &r);
    } while (r.end == -1);  // -1: the budget ran out first
}

// What the machine asks, after every input.
static void carry_out(rw_machine *m, int epfd, std::vector<nic> &nics, uint64_t now) {
    rw_action a;
    while (rw_machine_poll_action(m, &a) == RW_OK && a.kind != RW_ACTION_NONE) {
        nic &n = nics[a.device];
        epoll_event ev{};
        switch (a.kind) {
        case RW_ACTION_START_READING:
            ev.events = EPOLLIN | EPOLLET;
            ev.data.u32 = a.device;
            epoll_ctl(epfd, EPOLL_CTL_ADD, n.ctx->async_fd, &ev);
            drain(m, n, a.device, now);  // events may predate the add
            break;
        case RW_ACTION_STOP_READING: epoll_ctl(epfd, EPOLL_CTL_DEL, n.ctx->async_fd, nullptr); break;
        case RW_ACTION_REVALIDATE:
            if (a.reason == RW_REASON_DEVICE_FATAL && n.reinitialise() != 0) {
                rw_machine_handle_reopen(m, a.device, EAGAIN, now);  // asked again after a backoff
                break;
            }
            rw_verbs_answer(m, n.ctx, &a, now);  // checks that the device answers
            break;
        default:  // port queries answered over the context; the rest the status says
            if (rw_action_is_query(a.kind)) rw_verbs_answer(m, n.ctx, &a, now);
        }
    }
}

// The monitor thread: the engine's epoll, woken by its fds or the
// machine's next deadline.
static void monitor(rw_machine *m, int epfd, std::vector<nic> &nics, const std::atomic<bool> &stop) {
    carry_out(m, epfd, nics, now_ms());
    while (!stop.load()) {
        int32_t wait = 0;
        rw_machine_poll_wait(m, now_ms(), 50, &wait);  // 50 ms at most: `stop` is checked
        epoll_event evs[16];
        const int ready = epoll_wait(epfd, evs, 16, wait);
        const uint64_t now = now_ms();
        for (int i = 0; i < ready; ++i) {
            const uint32_t slot = evs[i].data.u32;
            if (evs[i].events & (EPOLLHUP | EPOLLERR))
                rw_machine_handle_hangup(m, slot, now);
            else
                drain(m, nics[slot], slot, now);
        }
        rw_machine_handle_timeout(m, now);
        carry_out(m, epfd, nics, now);
    }
}

// The engine's status of a NIC, read from its rail's word (any thread).
static device_status status(const nic &n) {
    return n.gate ? device_status(n.gate.load().engine_status()) : device_status::uninit;
}

// railwatch: end

// ---- playing the network under the fake libibverbs --------------------------------

struct fake_ibverbs {
    int (*set_devices)(int) = nullptr;
    int (*push_event)(int, uint32_t, uint64_t) = nullptr;
    int (*set_port_state)(int, int, uint32_t) = nullptr;

    bool load() {
        set_devices = reinterpret_cast<int (*)(int)>(dlsym(RTLD_DEFAULT, "fake_set_devices"));
        push_event = reinterpret_cast<int (*)(int, uint32_t, uint64_t)>(dlsym(RTLD_DEFAULT, "fake_push_event"));
        set_port_state = reinterpret_cast<int (*)(int, int, uint32_t)>(dlsym(RTLD_DEFAULT, "fake_set_port_state"));
        return set_devices && push_event && set_port_state;
    }
};

static int failures = 0;

// Waits (at most 5 s) for `n`'s status to read `want`.
static void expect(const nic &n, device_status want, const char *what) {
    const uint64_t until = now_ms() + 5000;
    while (status(n) != want && now_ms() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const bool ok = status(n) == want;
    failures += !ok;
    engine_log(ok ? 3 : 1, "%s %s: %s is %s%s", ok ? "ok" : "FAILED", what, n.name.c_str(), status_name(status(n)),
               ok ? "" : (std::string(", want ") + status_name(want)).c_str());
}

int main() {
    fake_ibverbs fake;
    if (!fake.load()) {
        std::printf("slots_engine: run it under railwatch's fake libibverbs (cargo xtask ffi does)\n");
        return 0;
    }
    fake.set_devices(2);
    int count = 0;
    ibv_device **list = ibv_get_device_list(&count);
    // Three slots: the two NICs at 0 and 2, slot 1 empty (a NIC the engine
    // did not open).
    std::vector<nic> nics(3);
    for (int i = 0; i < count && i < 2; ++i) {
        nic &n = nics[size_t(i) * 2];
        n.name = ibv_get_device_name(list[i]);
        n.ctx = ibv_open_device(list[i]);
    }
    ibv_free_device_list(list);
    const int epfd = epoll_create1(EPOLL_CLOEXEC);
    rw_machine *m = watch(nics, now_ms());
    if (!m || !nics[0].ctx || !nics[2].ctx) return 1;
    std::atomic<bool> stop{false};
    std::thread thread(monitor, m, epfd, std::ref(nics), std::cref(stop));

    expect(nics[0], device_status::enabled, "attached");
    expect(nics[1], device_status::uninit, "the empty slot");
    expect(nics[2], device_status::enabled, "attached");
    fake.set_port_state(0, 1, IBV_PORT_DOWN);
    fake.push_event(0, IBV_EVENT_PORT_ERR, 1);
    expect(nics[0], device_status::paused, "PORT_ERR");
    // The port comes back; its PORT_ACTIVE is queued behind a burst.
    fake.set_port_state(0, 1, IBV_PORT_ACTIVE);
    for (int i = 0; i < 300; ++i) fake.push_event(0, IBV_EVENT_COMM_EST, 0x1000 + uint64_t(i));
    fake.push_event(0, IBV_EVENT_PORT_ACTIVE, 1);
    expect(nics[0], device_status::enabled, "PORT_ACTIVE behind 300 COMM_EST");
    // A fatal device: disabled until the engine re-initialised its context.
    fake.push_event(1, IBV_EVENT_DEVICE_FATAL, 0);  // the fake's device 1 is slot 2
    expect(nics[2], device_status::disabled, "DEVICE_FATAL");
    expect(nics[2], device_status::enabled, "re-validated");
    failures += nics[2].reinits != 1;
    engine_log(nics[2].reinits == 1 ? 3 : 1, "the engine re-initialised %s %d time(s)", nics[2].name.c_str(),
               nics[2].reinits);

    stop.store(true);
    thread.join();
    for (nic &n : nics) {
        n.gate = railwatch::gate();
        if (n.ctx) ibv_close_device(n.ctx);
    }
    rw_machine_free(&m);
    close(epfd);
    std::printf("slots_engine: %s\n", failures == 0 ? "every check held" : "FAILED");
    return failures == 0 ? 0 : 1;
}
