// engine.cpp: a small C++ transfer engine that keeps its own loop and uses
// railwatch's rail machine (embedding 1) through railwatch.hpp.
//
//   - A monitor thread opens the libibverbs devices itself, makes each
//     async fd non-blocking, and waits on its OWN edge-triggered epoll
//     (every device's async fd, plus an eventfd to stop it) with the
//     timeout the machine asks for (rw_machine_poll_timeout).
//   - On every wake-up it drains each ready fd to EAGAIN through
//     machine::drain (ibv_get_async_event, then ibv_ack_async_event before
//     the machine sees the event) and carries out the machine's actions:
//     ibv_query_port for QUERY_PORT and READ_LINK, EOPNOTSUPP for
//     READ_ADDRESS (this engine reads no GIDs), START/STOP_READING on its
//     epoll, CLOSE/REOPEN with ibv_close_device/ibv_open_device, the
//     selector (SET_AVAILABLE, RESEED), notifications and logs.
//   - Worker threads, one per rail, check the rail's gate inline (one
//     acquire load) before each "transfer" and count what they were told.
//
// Run with no arguments under the fake libibverbs of railwatch's tests and
// it plays the network itself (a port flap, a PORT_ACTIVE hidden behind a
// burst of COMM_EST, a port that comes back silently) and checks that the
// workers were refused while rails were down and admitted after; exit 0
// when every check held. With a real libibverbs it watches the host's
// devices for the given number of seconds (default 10) and prints what
// happened.
//
// Build (see crates/ffi/README.md):
//   c++ -std=c++20 -I crates/ffi/include crates/ffi/examples/engine.cpp
//       -L target/release -lrailwatch -libverbs -lpthread -o engine

#include "railwatch_verbs.h"  // libibverbs and railwatch.h, with the glue between them
#include "railwatch.hpp"

#include <dlfcn.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace rw = railwatch;

// ---- the timeline ------------------------------------------------------------------

static const auto t0 = std::chrono::steady_clock::now();
static std::mutex print_mu;

// Milliseconds since start: the machine's clock.
static uint64_t now_ms() {
    return uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count());
}

__attribute__((format(printf, 1, 2))) static void say(const char *fmt, ...) {
    std::lock_guard<std::mutex> l(print_mu);
    std::printf("%8.3fs  ", double(now_ms()) / 1000.0);
    va_list ap;
    va_start(ap, fmt);
    std::vprintf(fmt, ap);
    va_end(ap);
    std::printf("\n");
    std::fflush(stdout);
}

// ---- the engine ----------------------------------------------------------------------

struct device {
    std::string name;
    ibv_context *ctx = nullptr;
    int nports = 0;
    bool reading = false;  // its async fd is in the epoll set
};

// One rail as the engine sees it: the selector's view, the gate the
// workers check, and the workers' counters.
struct rail {
    uint32_t device = 0, port = 0;
    std::string name;
    rw::gate gate;
    std::atomic<bool> available{false};  // what the selector was told
    std::atomic<uint64_t> rate_mbps{0};
    std::atomic<uint64_t> admitted{0}, refused{0}, rebuilt{0};
    std::atomic<int> recovered_by{-1};  // of its last activation
};

class engine {
public:
    engine() : machine_(config()) {}
    ~engine() { shutdown(); }

    // Opens every device and adds it to the machine; false if there is none.
    bool open_devices() {
        int n = 0;
        ibv_device **list = ibv_get_device_list(&n);
        if (!list) {
            say("ibv_get_device_list: %s", std::strerror(errno));
            return false;
        }
        for (int i = 0; i < n; ++i) {
            device d;
            d.name = ibv_get_device_name(list[i]);
            d.ctx = open_nonblocking(list[i]);
            if (!d.ctx) {
                say("%s: ibv_open_device: %s (skipped)", d.name.c_str(), std::strerror(errno));
                continue;
            }
            ibv_device_attr attr{};
            if (ibv_query_device(d.ctx, &attr) == 0) d.nports = attr.phys_port_cnt;
            std::vector<uint8_t> ports;
            for (int p = 1; p <= d.nports; ++p) ports.push_back(uint8_t(p));
            if (ports.empty()) {
                ibv_close_device(d.ctx);
                continue;
            }
            const uint32_t index = machine_.add_device(d.name, ports, now_ms());
            if (index != devices_.size()) throw std::runtime_error("unexpected device index");
            for (uint8_t p : ports) {
                auto r = std::make_unique<rail>();
                r->device = index;
                r->port = p;
                r->name = d.name + "/" + std::to_string(p);
                r->gate = machine_.gate(index, p);
                rails_.push_back(std::move(r));
            }
            devices_.push_back(std::move(d));
        }
        ibv_free_device_list(list);
        carry_out();  // the attach: start reading, query each port, ...
        return !devices_.empty();
    }

    void start() {
        epfd_ = epoll_create1(EPOLL_CLOEXEC);
        wakefd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        epoll_event e{};
        e.events = EPOLLIN;
        e.data.u64 = wake_key;
        epoll_ctl(epfd_, EPOLL_CTL_ADD, wakefd_, &e);
        for (size_t i = 0; i < devices_.size(); ++i)
            if (devices_[i].reading) add_to_epoll(uint32_t(i));
        monitor_ = std::thread([this] { monitor_loop(); });
        for (auto &r : rails_) workers_.emplace_back([this, r = r.get()] { worker(*r); });
    }

    void shutdown() {
        if (stopping_.exchange(true)) return;
        for (auto &w : workers_) w.join();
        workers_.clear();
        if (monitor_.joinable()) {
            uint64_t one = 1;
            (void)!write(wakefd_, &one, sizeof(one));
            monitor_.join();
        }
        for (device &d : devices_)
            if (d.ctx) ibv_close_device(d.ctx);
        devices_.clear();
        if (epfd_ >= 0) close(epfd_);
        if (wakefd_ >= 0) close(wakefd_);
        epfd_ = wakefd_ = -1;
    }

    std::vector<std::unique_ptr<rail>> &rails() { return rails_; }
    rail *find(const std::string &name) {
        for (auto &r : rails_)
            if (r->name == name) return r.get();
        return nullptr;
    }
    uint64_t events_drained() const { return drained_.load(); }

private:
    static constexpr uint64_t wake_key = ~uint64_t{0};

    static rw::config config() {
        rw::config c = rw::default_config();
        c.set("tick_ms", 250);  // the recovery poll, while a rail is paused
        return c;
    }

    static ibv_context *open_nonblocking(ibv_device *dev) {
        ibv_context *ctx = ibv_open_device(dev);
        if (!ctx) return nullptr;
        // Before the fd goes into epoll: the drain's last read must find
        // the queue empty (EAGAIN), not block.
        if (const int err = rw_verbs_make_nonblocking(ctx)) {
            ibv_close_device(ctx);
            errno = err;
            return nullptr;
        }
        return ctx;
    }

    // ---- the monitor thread: our own epoll, the machine's timeout ----

    void monitor_loop() {
        try {
            for (;;) {
                const uint64_t now = now_ms();
                const auto deadline = machine_.poll_timeout();
                int timeout = -1;  // healthy host: sleep until an fd is readable
                if (deadline) timeout = int(std::min<uint64_t>(*deadline > now ? *deadline - now : 0, 60000));
                epoll_event evs[16];
                const int n = epoll_wait(epfd_, evs, 16, timeout);
                if (n < 0 && errno != EINTR) throw std::runtime_error(std::string("epoll_wait: ") + std::strerror(errno));
                for (int i = 0; i < n; ++i) {
                    if (evs[i].data.u64 == wake_key) return;  // shutdown
                    const uint32_t dev = uint32_t(evs[i].data.u64);
                    if (!devices_[dev].reading) continue;
                    if (evs[i].events & EPOLLIN) drain(dev);  // first whatever is queued
                    if (devices_[dev].reading && (evs[i].events & (EPOLLHUP | EPOLLERR))) {
                        machine_.handle_hangup(dev, now_ms());
                        carry_out();
                    }
                }
                const auto due = machine_.poll_timeout();
                if (due && *due <= now_ms()) {
                    machine_.handle_timeout(now_ms());
                    carry_out();
                }
            }
        } catch (const std::exception &e) {
            say("monitor thread: %s", e.what());
            std::_Exit(2);
        }
    }

    // Drains one device's fd to EAGAIN (edge-triggered: all of it, now).
    void drain(uint32_t dev) {
        for (int round = 0; round < 64 && devices_[dev].reading; ++round) {
            ibv_context *ctx = devices_[dev].ctx;
            rw_drain_report r = machine_.drain(
                dev,
                [ctx](uint32_t &code, uint64_t &element) -> int {
                    ibv_async_event ev{};
                    if (ibv_get_async_event(ctx, &ev) != 0) return errno;  // EAGAIN: empty
                    rw_verbs_event_input(&ev, &code, &element);  // the union's right member
                    ibv_ack_async_event(&ev);  // acked before the machine sees it
                    return 0;
                },
                now_ms());
            drained_ += r.events;
            if (r.events > 1) say("%s  drained %llu events in one wake-up", devices_[dev].name.c_str(),
                                  static_cast<unsigned long long>(r.events));
            carry_out();
            if (r.end != -1) return;  // emptied, or a read error the machine now handles
        }
    }

    void add_to_epoll(uint32_t dev) {
        epoll_event e{};
        e.events = EPOLLIN | EPOLLET;
        e.data.u64 = dev;
        if (epoll_ctl(epfd_, EPOLL_CTL_ADD, devices_[dev].ctx->async_fd, &e) != 0) {
            machine_.handle_read_error(dev, errno, now_ms());  // "a failure is a read error"
            return;
        }
        pending_.push_back(dev);  // drain once now: events may predate the add
    }

    // Carries out the machine's actions until there are none.
    void carry_out() {
        for (;;) {
            auto a = machine_.poll_action();
            if (!a) break;
            act(*a);
        }
        while (!pending_.empty()) {
            const uint32_t dev = pending_.back();
            pending_.pop_back();
            drain(dev);
        }
    }

    void act(const rw_action &a) {
        device *d = a.device < devices_.size() ? &devices_[a.device] : nullptr;
        const uint64_t now = now_ms();
        switch (a.kind) {
        case RW_ACTION_START_READING:
            d->reading = true;
            if (epfd_ >= 0) add_to_epoll(a.device);  // before start(): added there
            break;
        case RW_ACTION_STOP_READING:
            if (d->reading && epfd_ >= 0 && d->ctx) epoll_ctl(epfd_, EPOLL_CTL_DEL, d->ctx->async_fd, nullptr);
            d->reading = false;
            break;
        case RW_ACTION_CLOSE:
            if (d->ctx) {
                if (d->reading && epfd_ >= 0) epoll_ctl(epfd_, EPOLL_CTL_DEL, d->ctx->async_fd, nullptr);
                ibv_close_device(d->ctx);
            }
            d->ctx = nullptr;
            d->reading = false;
            say("%s  closed", d->name.c_str());
            break;
        case RW_ACTION_REOPEN: machine_.handle_reopen(a.device, reopen(*d), now); break;
        case RW_ACTION_QUERY_PORT: {
            ibv_port_attr attr{};
            const int rc = d->ctx ? ibv_query_port(d->ctx, uint8_t(a.port), &attr) : ENODEV;
            machine_.handle_port_state(a.device, a.port, rc, attr.state, now);
            break;
        }
        case RW_ACTION_READ_LINK: {
            ibv_port_attr attr{};
            const int rc = d->ctx ? ibv_query_port(d->ctx, uint8_t(a.port), &attr) : ENODEV;
            machine_.handle_link(a.device, a.port, rc, attr.active_speed, attr.active_width, 0, now);
            break;
        }
        case RW_ACTION_READ_ADDRESS: machine_.handle_address_error(a.device, a.port, EOPNOTSUPP, now); break;
        case RW_ACTION_SET_AVAILABLE:
            if (rail *r = rail_of(a.device, a.port)) r->available = a.available;
            break;
        case RW_ACTION_RESEED:
            if (rail *r = rail_of(a.device, a.port)) r->rate_mbps = a.rate_mbps;
            break;
        case RW_ACTION_NOTIFY: notify(a.notification); break;
        case RW_ACTION_LOG: log(a.log); break;
        default: break;
        }
    }

    int reopen(device &d) {
        int n = 0, err = ENODEV;
        ibv_device **list = ibv_get_device_list(&n);
        if (!list) return errno ? errno : ENODEV;
        for (int i = 0; i < n; ++i) {
            if (d.name != ibv_get_device_name(list[i])) continue;
            d.ctx = open_nonblocking(list[i]);
            err = d.ctx ? 0 : (errno ? errno : EIO);
            break;
        }
        ibv_free_device_list(list);
        say("%s  re-open: %s", d.name.c_str(), err ? std::strerror(err) : "ok");
        return err;
    }

    rail *rail_of(uint32_t dev, uint32_t port) {
        for (auto &r : rails_)
            if (r->device == dev && r->port == port) return r.get();
        return nullptr;
    }

    void notify(const rw_notification &n) {
        rail *r = rail_of(n.device, n.port);
        const char *name = r ? r->name.c_str() : "?";
        switch (n.kind) {
        case RW_HAPPENING_TRANSITION:
            if (n.cause == RW_CAUSE_BY) {
                if (r) r->recovered_by = int(n.cause_code);
                say("%-10s %s -> %s  by %s, generation %llu", name, rw::state_name(n.from_state),
                    rw::state_name(n.to_state), rw::recovered_by_name(int32_t(n.cause_code)),
                    static_cast<unsigned long long>(n.generation));
            } else if (n.cause == RW_CAUSE_REASON) {
                if (r) r->recovered_by = -1;
                say("%-10s %s -> %s  because %s, generation %llu", name, rw::state_name(n.from_state),
                    rw::state_name(n.to_state), rw::reason_name(n.cause_code), static_cast<unsigned long long>(n.generation));
            } else {
                say("%-10s generation %llu (event %u)", name, static_cast<unsigned long long>(n.generation), n.cause_code);
            }
            break;
        case RW_HAPPENING_RESEED:
            say("%-10s selector re-seeded: %llu Mb/s", name, static_cast<unsigned long long>(n.rate_to_mbps));
            break;
        case RW_HAPPENING_AVAILABLE: say("%-10s selector: %s", name, n.available ? "available" : "unavailable"); break;
        case RW_HAPPENING_WORK_LOST:
            say("device %u   work lost (scope %u, event %u, object %#llx): failed at once", n.device, n.work_scope,
                n.event_code, static_cast<unsigned long long>(n.object_handle));
            break;
        default: break;  // every event, address changes: not shown
        }
    }

    void log(const rw_log &l) {
        const char *dev = l.device < devices_.size() ? devices_[l.device].name.c_str() : "?";
        switch (l.kind) {
        case RW_LOG_READ_FAILED: say("%s  reading its events failed (%s): polling its ports", dev, std::strerror(l.error)); break;
        case RW_LOG_HUNG_UP: say("%s  event fd hung up", dev); break;
        case RW_LOG_STILL_PAUSED: say("%s/%u  still paused (%s)", dev, l.port, rw::reason_name(l.reason)); break;
        case RW_LOG_DEVICE_GONE: say("%s  gone; re-open at %llu ms", dev, static_cast<unsigned long long>(l.until_ms)); break;
        case RW_LOG_UNHANDLED: say("%s  event %u not acted on", dev, l.code); break;
        default: break;
        }
    }

    // ---- the workers: the inline gate before every transfer ----

    void worker(rail &r) {
        uint64_t endpoints_gen = 0;
        while (!stopping_.load(std::memory_order_relaxed)) {
            if (auto gen = r.gate.check()) {  // one acquire load, no call
                if (*gen != endpoints_gen) {
                    endpoints_gen = *gen;  // endpoints of an older generation are stale
                    ++r.rebuilt;
                }
                ++r.admitted;  // "transfer"
                std::this_thread::sleep_for(std::chrono::microseconds(500));
            } else {
                ++r.refused;  // try another rail, or back off
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
            }
        }
    }

    rw::machine machine_;  // touched only by the monitor thread once started
    std::vector<device> devices_;
    std::vector<std::unique_ptr<rail>> rails_;
    std::vector<uint32_t> pending_;
    int epfd_ = -1, wakefd_ = -1;
    std::thread monitor_;
    std::vector<std::thread> workers_;
    std::atomic<bool> stopping_{false};
    std::atomic<uint64_t> drained_{0};
};

// ---- the demonstration over the fake libibverbs ------------------------------------

struct fake_ibverbs {
    int (*set_devices)(int) = nullptr;
    int (*set_port_state)(int, int, uint32_t) = nullptr;
    int (*push_event)(int, uint32_t, uint64_t) = nullptr;

    bool load() {
        push_event = reinterpret_cast<int (*)(int, uint32_t, uint64_t)>(dlsym(RTLD_DEFAULT, "fake_push_event"));
        set_devices = reinterpret_cast<int (*)(int)>(dlsym(RTLD_DEFAULT, "fake_set_devices"));
        set_port_state = reinterpret_cast<int (*)(int, int, uint32_t)>(dlsym(RTLD_DEFAULT, "fake_set_port_state"));
        return push_event && set_devices && set_port_state;
    }
};

static int checks_failed = 0;

static void expect(bool ok, const char *what) {
    say("%s %s", ok ? "[ok]  " : "[FAIL]", what);
    if (!ok) ++checks_failed;
}

template <class F>
static bool within(int ms, F done) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (!done()) {
        if (std::chrono::steady_clock::now() > end) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
}

// Takes `r` down with PORT_ERR and checks its worker is refused, and never
// admitted, while it is down.
static void down_and_refused(fake_ibverbs &fake, rail &r, int dev) {
    fake.set_port_state(dev, 1, IBV_PORT_DOWN);
    fake.push_event(dev, IBV_EVENT_PORT_ERR, 1);
    expect(within(2000, [&] { return !r.gate.check(); }), "the gate refuses after PORT_ERR");
    const uint64_t refused = r.refused;
    expect(within(2000, [&] { return r.refused >= refused + 3; }), "the worker is refused while the port is down");
    const uint64_t admitted = r.admitted;
    within(100, [&] { return r.refused >= refused + 20; });  // a while down
    expect(r.admitted == admitted, "and never admitted while it is down");
}

static void admitted_again(rail &r, int by, const char *what) {
    expect(within(3000, [&] { return r.gate.check().has_value(); }), what);
    // The gate flips first, the notification is carried out just after it.
    expect(within(2000, [&] { return r.recovered_by == by; }),
           by == RW_BY_EVENT ? "recovered by the event" : "recovered by the poll");
    const uint64_t admitted = r.admitted;
    expect(within(2000, [&] { return r.admitted > admitted; }), "the worker is admitted again");
}

static int demonstrate(fake_ibverbs &fake) {
    say("fake libibverbs found: playing the network (2 devices, 1 port each)");
    fake.set_devices(2);
    engine e;
    if (!e.open_devices()) return 1;
    e.start();
    rail *r0 = e.find("mlx5_0/1"), *r1 = e.find("mlx5_1/1");
    if (!r0 || !r1) return 1;
    expect(within(2000, [&] { return r0->admitted > 0 && r1->admitted > 0; }), "both rails up, workers admitted");

    say("--- a port flap: PORT_ERR, then PORT_ACTIVE ---");
    down_and_refused(fake, *r0, 0);
    fake.set_port_state(0, 1, IBV_PORT_ACTIVE);
    fake.push_event(0, IBV_EVENT_PORT_ACTIVE, 1);
    admitted_again(*r0, RW_BY_EVENT, "PORT_ACTIVE brings the rail back");

    say("--- a PORT_ACTIVE hidden behind 64 COMM_EST ---");
    down_and_refused(fake, *r0, 0);
    const uint64_t before = e.events_drained();
    for (int i = 0; i < 64; ++i) fake.push_event(0, IBV_EVENT_COMM_EST, 0x1000);
    fake.set_port_state(0, 1, IBV_PORT_ACTIVE);
    fake.push_event(0, IBV_EVENT_PORT_ACTIVE, 1);
    admitted_again(*r0, RW_BY_EVENT, "the PORT_ACTIVE behind the burst is found (drained to EAGAIN)");
    expect(e.events_drained() - before >= 65, "all 65 events read and acknowledged");

    say("--- a port that comes back silently (its PORT_ACTIVE lost) ---");
    down_and_refused(fake, *r1, 1);
    fake.set_port_state(1, 1, IBV_PORT_ACTIVE);  // no event
    admitted_again(*r1, RW_BY_POLL, "the recovery poll brings the rail back");

    e.shutdown();
    say("--- summary ---");
    for (auto &r : e.rails())
        say("%-10s admitted %llu, refused %llu, endpoints rebuilt %llu", r->name.c_str(),
            static_cast<unsigned long long>(r->admitted), static_cast<unsigned long long>(r->refused),
            static_cast<unsigned long long>(r->rebuilt));
    say(checks_failed ? "%d check(s) failed" : "every check held", checks_failed);
    return checks_failed ? 1 : 0;
}

static int watch(int seconds) {
    engine e;
    if (!e.open_devices()) {
        say("no usable RDMA device");
        return 1;
    }
    say("watching %zu rail(s) for %d s", e.rails().size(), seconds);
    e.start();
    std::this_thread::sleep_for(std::chrono::seconds(seconds));
    e.shutdown();
    for (auto &r : e.rails())
        say("%-10s %s, %llu Mb/s, admitted %llu, refused %llu, generation %llu", r->name.c_str(),
            r->gate.check() ? "active" : rw::state_name(r->gate.load().state()),
            static_cast<unsigned long long>(r->rate_mbps), static_cast<unsigned long long>(r->admitted),
            static_cast<unsigned long long>(r->refused), static_cast<unsigned long long>(r->gate.load().generation()));
    return 0;
}

int main(int argc, char **argv) {
    try {
        fake_ibverbs fake;
        if (argc < 2 && fake.load()) return demonstrate(fake);
        return watch(argc >= 2 ? std::max(1, std::atoi(argv[1])) : 10);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "engine: %s\n", e.what());
        return 2;
    }
}
