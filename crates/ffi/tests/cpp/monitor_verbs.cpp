// Embedding 2 through the C++ wrapper over libibverbs: a monitor started
// with railwatch::monitor::start_verbs (rw_monitor_start_verbs), run with
// LD_LIBRARY_PATH pointing at the fake libibverbs.so.1, whose control
// functions (fake_*) are looked up with dlsym. The same behaviours as over
// the simulator, seen from outside: a flap, a PORT_ACTIVE behind a burst of
// COMM_EST, a silent recovery by the poll, EINTR retried, a read error
// (polling instead), RAII unsubscribe, a callback calling back in.
//
// Prints `ok - NAME` / `not ok - NAME: why` per check, then a summary;
// exits 0 iff every check passed. Every wait is a bounded deadline loop.

#include "railwatch.hpp"

#include "check.hpp"

#include <dlfcn.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace rw = railwatch;
namespace ev = railwatch::event_code;
namespace ps = railwatch::port_state;

// ---- the harness ---------------------------------------------------------------

template <class F>
static bool eventually(F done, std::chrono::milliseconds limit = std::chrono::milliseconds(20000)) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!done()) {
        if (std::chrono::steady_clock::now() > end) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
}

[[noreturn]] static void give_up(const char *why) {
    std::printf("# %d passed, %d failed (gave up: %s)\n", passed, failed, why);
    std::fflush(stdout);
    std::_Exit(1);
}

// ---- the fake libibverbs' control functions ------------------------------------------

struct fake_ibverbs {
    int (*set_devices)(int n) = nullptr;
    int (*set_ports)(int dev, int nports) = nullptr;
    int (*set_port_state)(int dev, int port, uint32_t state) = nullptr;
    int (*push_event)(int dev, uint32_t code, uint64_t element) = nullptr;
    int (*set_get_fault)(int dev, int err, long after, long count) = nullptr;
    long long (*counter)(const char *name) = nullptr;

    template <class T>
    static bool find(T &fn, const char *name) {
        fn = reinterpret_cast<T>(dlsym(RTLD_DEFAULT, name));
        return fn != nullptr;
    }
    bool load() {
        return find(set_devices, "fake_set_devices") && find(set_ports, "fake_set_ports") &&
               find(set_port_state, "fake_set_port_state") && find(push_event, "fake_push_event") &&
               find(set_get_fault, "fake_set_get_fault") && find(counter, "fake_counter");
    }
};

struct notes {
    std::mutex mu;
    std::vector<rw_notification> seen;
    void add(const rw_notification &n) {
        std::lock_guard<std::mutex> l(mu);
        seen.push_back(n);
    }
    size_t size() {
        std::lock_guard<std::mutex> l(mu);
        return seen.size();
    }
    template <class P>
    bool any(size_t from, P pred) {
        std::lock_guard<std::mutex> l(mu);
        for (size_t i = from; i < seen.size(); ++i)
            if (pred(seen[i])) return true;
        return false;
    }
};

static bool admits(const rw::gate &g) { return g.check().has_value(); }

static std::optional<rw_rail_info> rail(const rw::monitor &m, const std::string &name) {
    for (const rw_rail_info &r : m.snapshot())
        if (name == r.name) return r;
    return std::nullopt;
}

int main() {
    fake_ibverbs fake;
    const bool found = fake.load();
    const char *why = dlerror();
    check(found, "fake: the fake libibverbs' control functions are found (LD_LIBRARY_PATH)",
          why ? why : "fake_* not found");
    if (failed) give_up("not running over the fake libibverbs");

    try {
        // Two devices: mlx5_0 with ports 1 and 2, mlx5_1 with port 1; all
        // ACTIVE at NDR 4x.
        fake.set_devices(2);
        fake.set_ports(0, 2);

        // Part 1, events: a tick too slow to ever run here, so a rail can
        // only come back by its event (no poll racing it). Part 2, the
        // poll: a second monitor with a fast tick.
        rw::config slow = rw::default_config();
        slow.set("tick_ms", 600000);
        rw::config cfg = rw::default_config();
        cfg.set("tick_ms", 20);
        std::mutex sel_mu;
        std::map<std::pair<uint32_t, uint32_t>, uint64_t> rates;
        std::map<std::pair<uint32_t, uint32_t>, bool> avail;
        auto sel = std::make_shared<rw::function_selector>(
            [&](uint32_t d, uint32_t p, bool a) {
                std::lock_guard<std::mutex> l(sel_mu);
                avail[{d, p}] = a;
            },
            [&](uint32_t d, uint32_t p, uint64_t r) {
                std::lock_guard<std::mutex> l(sel_mu);
                rates[{d, p}] = r;
            });
        auto available = [&](uint32_t d, uint32_t p) {
            std::lock_guard<std::mutex> l(sel_mu);
            return avail.count({d, p}) && avail[{d, p}];
        };

        rw::monitor mon = rw::monitor::start_verbs(&slow, sel);
        notes all;
        rw::subscription sub = mon.subscribe([&](const rw_notification &n) { all.add(n); });

        std::map<std::string, rw::gate> gates;
        bool up = eventually([&] {
            for (const char *name : {"mlx5_0/1", "mlx5_0/2", "mlx5_1/1"}) {
                if (!gates.count(name)) {
                    auto g = mon.try_gate(name);
                    if (!g) return false;
                    gates.emplace(name, std::move(*g));
                }
                if (!admits(gates.at(name))) return false;
            }
            return true;
        });
        check(up, "attach: the monitor opens both fake devices and every rail admits");
        if (!up) give_up("the rails never came up");
        check(eventually([&] { return available(0, 1) && available(0, 2) && available(1, 1); }),
              "attach: the selector is told every rail is available");
        {
            std::lock_guard<std::mutex> l(sel_mu);
            check(rates[{0, 1}] == 400000 && rates[{1, 1}] == 400000, "attach: re-seeded at 400 Gb/s (NDR 4x)");
        }
        check(fake.counter("opens") == 2, "attach: each device opened once",
              std::to_string(fake.counter("opens")) + " opens");

        // A flap with PORT_ERR.
        rw::gate &g01 = gates.at("mlx5_0/1");
        const uint64_t gen0 = g01.load().generation();
        fake.set_port_state(0, 1, ps::down);
        fake.push_event(0, ev::port_err, 1);
        check(eventually([&] { return !admits(g01); }), "flap: PORT_ERR makes the gate refuse");
        check(g01.load().reason() == RW_REASON_PORT_ERR && admits(gates.at("mlx5_0/2")),
              "flap: paused for port_err, port 2 untouched");
        check(eventually([&] { return !available(0, 1); }), "flap: the selector is told");

        // A PORT_ACTIVE hidden behind a burst of 64 COMM_EST.
        size_t mark = all.size();
        fake.set_port_state(0, 1, ps::active);
        for (int i = 0; i < 64; ++i) fake.push_event(0, ev::comm_est, 0x1000);
        fake.push_event(0, ev::port_active, 1);
        check(eventually([&] { return admits(g01); }), "burst: the PORT_ACTIVE behind 64 COMM_EST is seen");
        check(g01.load().generation() == gen0 + 1, "burst: back with the next generation");
        check(eventually([&] {
                  return all.any(mark, [&](const rw_notification &n) {
                      return n.kind == RW_HAPPENING_TRANSITION && n.device == 0 && n.port == 1 &&
                             n.to_state == RW_RAIL_ACTIVE && n.cause_code == RW_BY_EVENT;
                  });
              }),
              "burst: recovered by the event");
        check(eventually([&] { return fake.counter("acks") == fake.counter("gets_ok") && fake.counter("acks") >= 66; }),
              "burst: every event read was acknowledged exactly once",
              std::to_string(fake.counter("gets_ok")) + " read, " + std::to_string(fake.counter("acks")) + " acked");

        // EINTR: the next two reads of mlx5_1 are interrupted.
        rw::gate &g11 = gates.at("mlx5_1/1");
        fake.set_get_fault(1, EINTR, 0, 2);
        fake.set_port_state(1, 1, ps::down);
        fake.push_event(1, ev::port_err, 1);
        check(eventually([&] { return !admits(g11); }), "eintr: the event behind two EINTRs is read");
        fake.set_port_state(1, 1, ps::active);
        fake.push_event(1, ev::port_active, 1);
        check(eventually([&] { return admits(g11); }), "eintr: and the next one too");

        // RAII unsubscribe and a callback that calls back into the API.
        {
            std::atomic<uint64_t> scoped{0};
            std::atomic<bool> reentered{false};
            {
                rw::subscription s = mon.subscribe([&](const rw_notification &n) {
                    ++scoped;
                    if (n.kind == RW_HAPPENING_TRANSITION && !reentered.load()) {
                        bool ok = mon.snapshot().size() == 3 && mon.try_gate("mlx5_0/2").has_value() &&
                                  !mon.snapshot_json().view().empty();
                        reentered.store(ok);
                    }
                });
                fake.set_port_state(0, 2, ps::down);
                fake.push_event(0, ev::port_err, 2);
                if (!eventually([&] { return reentered.load(); })) {
                    check(false, "reentry: a callback calls snapshot, gate and JSON", "timed out: deadlock?");
                    give_up("a callback is stuck");
                }
                check(true, "reentry: a callback calls snapshot, gate and JSON");
            }
            const uint64_t frozen = scoped.load();
            mark = all.size();
            fake.set_port_state(0, 2, ps::active);
            fake.push_event(0, ev::port_active, 2);
            check(eventually([&] { return admits(gates.at("mlx5_0/2")) && all.size() > mark; }),
                  "raii: the other subscription still sees notifications");
            check(scoped.load() == frozen, "raii: after the scope the callback never runs again");
        }

        sub.reset();
        mon = rw::monitor();
        check(!mon && fake.counter("closes") == fake.counter("opens"),
              "stop: the monitor stops and closes every device it opened",
              std::to_string(fake.counter("opens")) + " opens, " + std::to_string(fake.counter("closes")) + " closes");
        check(g01.load().generation() >= gen0 + 1, "stop: gates stay readable after their monitor");

        // Part 2: the poll, with a second monitor (fast tick) over the
        // same fake devices, re-opened.
        mon = rw::monitor::start_verbs(&cfg, nullptr, "mlx5_0");
        std::optional<rw::gate> p01;
        check(eventually([&] {
                  if (!p01) p01 = mon.try_gate("mlx5_0/1");
                  return p01 && admits(*p01);
              }),
              "only: a monitor of one device attaches it");
        check(!mon.try_gate("mlx5_1/1").has_value() && mon.snapshot().size() == 2,
              "only: and no other device");
        mon = rw::monitor();
        mon = rw::monitor::start_verbs(&cfg);
        std::optional<rw::gate> q01, q11;
        check(eventually([&] {
                  if (!q01) q01 = mon.try_gate("mlx5_0/1");
                  if (!q11) q11 = mon.try_gate("mlx5_1/1");
                  return q01 && q11 && admits(*q01) && admits(*q11);
              }),
              "part 2: a second monitor's rails admit");
        if (!q01 || !q11) give_up("the second monitor's rails never came up");
        rw::gate &g01b = *q01;
        rw::gate &g11b = *q11;
        // A port that comes back silently: the poll recovers it.
        fake.set_port_state(0, 1, ps::down);
        fake.push_event(0, ev::port_err, 1);
        check(eventually([&] { return !admits(g01b); }), "poll: the rail pauses");
        fake.set_port_state(0, 1, ps::active);
        check(eventually([&] { return admits(g01b); }), "poll: it comes back without an event");
        {
            std::optional<rw_rail_info> r;
            check(eventually([&] {
                      r = rail(mon, "mlx5_0/1");
                      return r && r->recovered_by == RW_BY_POLL;
                  }),
                  "poll: the snapshot says recovered by poll");
        }

        // A read error (EIO on every read of mlx5_1 from now on): no more
        // reads, the poll watches the port instead.
        fake.set_get_fault(1, EIO, 0, -1);
        fake.push_event(1, ev::comm_est, 0x1000);  // wakes the monitor; the read fails
        check(eventually([&] {
                  return mon.snapshot_json().view().find("\"read_errors\":1") != std::string_view::npos;
              }),
              "eio: the read error is counted");
        const long long gets_after = fake.counter("gets");
        fake.push_event(1, ev::comm_est, 0x1000);  // would be read if the fd were still watched
        fake.set_port_state(1, 1, ps::down);
        check(eventually([&] { return !admits(g11b); }), "eio: the poll sees the port go down");
        fake.set_port_state(1, 1, ps::active);
        check(eventually([&] { return admits(g11b); }), "eio: and come back");
        // The monitor has been through ticks since the event was queued.
        check(fake.counter("gets") == gets_after, "eio: the failed fd is not read again",
              std::to_string(fake.counter("gets") - gets_after) + " more reads");

        mon = rw::monitor();
        check(!mon && fake.counter("closes") == fake.counter("opens"),
              "stop: the second monitor closes every device it opened too");
    } catch (const std::exception &e) {
        check(false, "no unexpected exception", e.what());
    }
    std::printf("# %d passed, %d failed\n", passed, failed);
    return failed == 0 && passed > 0 ? 0 : 1;
}
