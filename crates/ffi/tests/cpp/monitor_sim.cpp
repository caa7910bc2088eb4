// Embedding 2 through the C++ wrapper: railwatch owns a thread, over the
// simulator (railwatch::sim). The behaviours of the original fix seen from
// outside (a flap, a PORT_ACTIVE behind a burst, a silent recovery by the
// poll, EINTR, EIO), the selector, snapshots, RAII subscriptions,
// callbacks that call back into the API, and teardown races: a reset while
// the callback runs, a callback that stops the monitor while another
// thread resets its subscription, a callback that destroys its monitor, a
// selector that destroys its monitor.
//
// Prints `ok - NAME` / `not ok - NAME: why` per check, then a summary;
// exits 0 iff every check passed. Every wait is a bounded deadline loop.

#include "railwatch.hpp"

#include "check.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace rw = railwatch;
namespace ev = railwatch::event_code;
namespace ps = railwatch::port_state;

// ---- the harness ---------------------------------------------------------------

// Polls `done` until it holds or the deadline passes (generous: the tests
// also run under valgrind).
template <class F>
static bool eventually(F done, std::chrono::milliseconds limit = std::chrono::milliseconds(20000)) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!done()) {
        if (std::chrono::steady_clock::now() > end) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
}

// A check that, failing, means a thread is stuck: report and leave now
// rather than hang in a destructor that joins it.
static void check_or_exit(bool ok, const std::string &name, const std::string &why) {
    check(ok, name, why);
    if (!ok) {
        std::printf("# %d passed, %d failed (gave up: a thread is stuck)\n", passed, failed);
        std::fflush(stdout);
        std::_Exit(1);
    }
}

// ---- recorders ---------------------------------------------------------------------

// The engine's selector: what it was told, per rail, in order.
struct recording_selector : rw::selector {
    std::mutex mu;
    std::vector<std::string> calls;  // "0/1 reseed 400000", "0/1 available 1"
    std::map<std::pair<uint32_t, uint32_t>, bool> available;

    void set_available(uint32_t d, uint32_t p, bool a) override {
        std::lock_guard<std::mutex> l(mu);
        available[{d, p}] = a;
        calls.push_back(std::to_string(d) + "/" + std::to_string(p) + " available " + std::to_string(a));
    }
    void reseed(uint32_t d, uint32_t p, uint64_t rate) override {
        std::lock_guard<std::mutex> l(mu);
        calls.push_back(std::to_string(d) + "/" + std::to_string(p) + " reseed " + std::to_string(rate));
    }
    bool is_available(uint32_t d, uint32_t p) {
        std::lock_guard<std::mutex> l(mu);
        auto it = available.find({d, p});
        return it != available.end() && it->second;
    }
    std::vector<std::string> snapshot() {
        std::lock_guard<std::mutex> l(mu);
        return calls;
    }
};

// Every notification a subscription saw.
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

static std::optional<rw_rail_info> rail(const rw::monitor &m, const std::string &name) {
    for (const rw_rail_info &r : m.snapshot())
        if (name == r.name) return r;
    return std::nullopt;
}

static bool admits(const rw::gate &g) { return g.check().has_value(); }

// ---- the checks ---------------------------------------------------------------------

int main() {
    try {
        rw::sim host;
        const uint32_t d0 = host.add_device("mlx5_0", 2);
        const uint32_t d1 = host.add_device("mlx5_1", 1);
        // Part 1, events: a tick too slow to ever run here, so a rail can
        // only come back by its event (no poll racing it).
        rw::config slow = rw::default_config();
        slow.set("tick_ms", 600000);
        // Part 2, the poll: a fast tick and fast re-opens.
        rw::config cfg = rw::default_config();
        cfg.set("tick_ms", 20);
        cfg.set("reopen_initial_ms", 20);
        cfg.set("reopen_max_ms", 100);
        auto sel = std::make_shared<recording_selector>();
        rw::monitor mon = rw::monitor::start_sim(host, &slow, sel);
        check(bool(mon), "start: the monitor runs over the simulated host");

        notes all;
        rw::subscription sub_all = mon.subscribe([&](const rw_notification &n) { all.add(n); });
        check(bool(sub_all) && sub_all.id() != 0, "subscribe: a subscription has an id");

        // Attach: every rail comes up.
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
        check_or_exit(up, "attach: every rail's gate admits", "timed out");
        try {
            (void)mon.gate("mlx5_7/1");
            check(false, "gate: an unknown rail throws", "no exception");
        } catch (const rw::error &e) {
            check(e.status() == RW_ERR_NOT_FOUND, "gate: an unknown rail throws RW_ERR_NOT_FOUND", e.what());
        }
        check(!mon.try_gate("mlx5_7/1").has_value(), "gate: try_gate of an unknown rail is nullopt");
        {
            check(eventually([&] { return sel->is_available(d0, 1) && sel->is_available(d0, 2) && sel->is_available(d1, 1); }),
                  "selector: every rail is made available");
            auto calls = sel->snapshot();
            bool order = true;
            for (std::string r : {"0/1", "0/2", "1/1"}) {
                int reseed = -1, avail = -1;
                for (size_t i = 0; i < calls.size(); ++i) {
                    if (calls[i] == r + " reseed 400000" && reseed < 0) reseed = int(i);
                    if (calls[i] == r + " available 1" && avail < 0) avail = int(i);
                }
                order = order && reseed >= 0 && avail > reseed;
            }
            check(order, "selector: each rail is re-seeded at 400 Gb/s before it is available");
        }

        // Snapshots, into a span and a vector, and as JSON.
        {
            rw_rail_info one[1];
            try {
                mon.snapshot(rw::span<rw_rail_info>(one));
                check(false, "snapshot: a short buffer throws", "no exception");
            } catch (const rw::error &e) {
                check(e.status() == RW_ERR_BUFFER, "snapshot: a short buffer throws RW_ERR_BUFFER", e.what());
            }
            std::vector<rw_rail_info> buf(4);
            size_t n = mon.snapshot(buf);
            auto r = rail(mon, "mlx5_0/2");
            check(n == 3 && r && r->state == RW_RAIL_ACTIVE && r->available && r->rate_mbps == 400000 &&
                      r->recovered_by == RW_BY_ATTACH,
                  "snapshot: three rails, mlx5_0/2 active, available, 400 Gb/s, by attach");
            rw::owned_string json = mon.snapshot_json();
            check(json.view().find("\"mlx5_1/1\"") != std::string_view::npos && json.view().front() == '{',
                  "snapshot: the JSON names the rails", json.str());
        }

        // A flap: PORT_ERR pauses port 1 only.
        rw::gate &g01 = gates.at("mlx5_0/1");
        const uint64_t gen0 = g01.load().generation();
        size_t mark = all.size();
        host.port_down(d0, 1);
        check(eventually([&] { return !admits(g01); }), "flap: PORT_ERR makes the gate refuse");
        // The state changes before the selector is told (the monitor's
        // order): the selector's side is waited for, not raced.
        check(g01.load().reason() == RW_REASON_PORT_ERR && eventually([&] { return !sel->is_available(d0, 1); }),
              "flap: paused for port_err, the selector told");
        check(admits(gates.at("mlx5_0/2")), "flap: port 2 of the same device is untouched");
        check(eventually([&] {
                  return all.any(mark, [&](const rw_notification &n) {
                      return n.kind == RW_HAPPENING_TRANSITION && n.device == d0 && n.port == 1 &&
                             n.to_state == RW_RAIL_PAUSED && n.cause == RW_CAUSE_REASON &&
                             n.cause_code == RW_REASON_PORT_ERR;
                  });
              }),
              "flap: the subscription sees active -> paused because port_err");

        // A PORT_ACTIVE behind a burst of 64 COMM_EST: one drain reads all.
        mark = all.size();
        host.push_event(d0, ev::comm_est, 0x1000, 64);
        host.port_up(d0, 1);
        check(eventually([&] { return admits(g01); }), "burst: the PORT_ACTIVE behind 64 COMM_EST is seen");
        check(g01.load().generation() == gen0 + 1, "burst: the rail is back with the next generation");
        check(eventually([&] {
                  return all.any(mark, [&](const rw_notification &n) {
                      return n.kind == RW_HAPPENING_TRANSITION && n.device == d0 && n.port == 1 &&
                             n.to_state == RW_RAIL_ACTIVE && n.cause_code == RW_BY_EVENT;
                  });
              }),
              "burst: recovered by the event");
        {
            uint64_t drained = 0;
            all.any(mark, [&](const rw_notification &n) {
                if (n.kind == RW_HAPPENING_DRAIN && n.device == d0 && n.error == 0) drained += n.events;
                return false;
            });
            rw_sim_counters c = host.counters(d0);
            check(drained >= 65, "burst: drained to EAGAIN (drain notifications count 65 events)",
                  std::to_string(drained) + " events drained");
            check(c.read == c.acked && c.read == c.queued, "burst: every event read was acknowledged once",
                  "queued " + std::to_string(c.queued) + ", read " + std::to_string(c.read) + ", acked " +
                      std::to_string(c.acked));
        }

        // EINTR is retried: the next reads of mlx5_1 are interrupted, the
        // event behind them still arrives.
        rw::gate &g11 = gates.at("mlx5_1/1");
        host.eintr(d1, 3);
        host.port_down(d1, 1);
        check(eventually([&] { return !admits(g11); }), "eintr: the event behind three EINTRs is read");
        host.port_up(d1, 1);
        check(eventually([&] { return admits(g11); }), "eintr: and the next one too");

        // RAII unsubscribe: a scoped subscription stops at its end.
        {
            auto token = std::make_shared<int>(0);
            std::atomic<uint64_t> scoped_calls{0};
            {
                rw::subscription s = mon.subscribe([&scoped_calls, token](const rw_notification &) { ++scoped_calls; });
                check(token.use_count() == 2, "raii: the subscription holds its function");
                host.port_down(d0, 2);
                check(eventually([&] { return scoped_calls.load() > 0; }), "raii: the scoped subscription is called");
            }
            check(token.use_count() == 1, "raii: its end releases the function");
            const uint64_t frozen = scoped_calls.load();
            mark = all.size();
            host.port_up(d0, 2);
            check(eventually([&] { return admits(gates.at("mlx5_0/2")) && all.size() > mark; }),
                  "raii: the other subscription still sees notifications");
            check(scoped_calls.load() == frozen, "raii: after its end the callback never runs again",
                  std::to_string(scoped_calls.load() - frozen) + " calls after unsubscribing");
        }

        // A callback that calls back into the API, without deadlock: a
        // snapshot, a gate, JSON, a new subscription, and destroying its
        // own subscription.
        {
            struct reentry {
                std::atomic<bool> done{false};
                bool snapshot_ok = false, gate_ok = false, json_ok = false;
                std::atomic<uint64_t> inner_calls{0};
                rw::subscription self, inner;
            };
            auto st = std::make_shared<reentry>();
            st->self = mon.subscribe([&mon, st](const rw_notification &n) {
                if (st->done.load() || n.kind != RW_HAPPENING_TRANSITION) return;
                st->snapshot_ok = mon.snapshot().size() == 3;
                st->gate_ok = mon.gate("mlx5_0/1").load().generation() > 0;
                st->json_ok = !mon.snapshot_json().view().empty();
                st->inner = mon.subscribe([st](const rw_notification &) { ++st->inner_calls; });
                st->self.reset();  // destroys this very callback once it returns
                st->done.store(true);
            });
            host.port_down(d1, 1);
            check_or_exit(eventually([&] { return st->done.load(); }), "reentry: the callback ran to its end",
                          "timed out: deadlock inside a callback?");
            check(st->snapshot_ok && st->gate_ok && st->json_ok,
                  "reentry: snapshot, gate and JSON from inside a callback");
            check(!st->self, "reentry: a callback destroyed its own subscription");
            host.port_up(d1, 1);
            check(eventually([&] { return st->inner_calls.load() > 0; }),
                  "reentry: a subscription made inside a callback is called");
            st->inner.reset();  // from this thread: waits for a call in flight
        }

        sub_all.reset();
        mon = rw::monitor();
        check(!mon, "stop: the monitor stops and joins its thread");

        // Part 2: the poll, over a second host with a fast tick.
        rw::sim host_b;
        const uint32_t b0 = host_b.add_device("mlx5_0", 1);
        const uint32_t b1 = host_b.add_device("mlx5_1", 1);
        mon = rw::monitor::start_sim(host_b, &cfg);
        std::optional<rw::gate> gb0, gb1;
        check_or_exit(eventually([&] {
                          if (!gb0) gb0 = mon.try_gate("mlx5_0/1");
                          if (!gb1) gb1 = mon.try_gate("mlx5_1/1");
                          return gb0 && gb1 && admits(*gb0) && admits(*gb1);
                      }),
                      "part 2: a second monitor's rails admit", "timed out");
        // A port that comes back silently: the poll recovers it.
        host_b.port_down(b0, 1);
        check(eventually([&] { return !admits(*gb0); }), "poll: the rail pauses");
        host_b.set_port_state(b0, 1, ps::active);  // no PORT_ACTIVE
        check(eventually([&] { return admits(*gb0); }), "poll: the rail comes back without an event");
        {
            auto r = rail(mon, "mlx5_0/1");
            check(eventually([&] {
                      r = rail(mon, "mlx5_0/1");
                      return r && r->recovered_by == RW_BY_POLL;
                  }),
                  "poll: the snapshot says recovered by poll",
                  r ? rw::recovered_by_name(r->recovered_by) : "no rail");
        }

        // EIO: reads stop, the device is polled instead.
        host_b.eio(b1);
        host_b.port_down(b1, 1);  // its PORT_ERR cannot be read
        check(eventually([&] { return !admits(*gb1); }), "eio: the poll sees the port down after the read error");
        check(eventually([&] {
                  return mon.snapshot_json().view().find("\"read_errors\":1") != std::string_view::npos;
              }),
              "eio: one read error is counted", mon.snapshot_json().str());
        host_b.set_port_state(b1, 1, ps::active);
        check(eventually([&] { return admits(*gb1); }), "eio: the poll brings it back");

        // Unplug and plug: inert while gone, attached anew after.
        host_b.unplug(b1);
        check(eventually([&] { return gb1->load().state() == RW_RAIL_INERT; }), "unplug: the rail goes inert");
        check(!admits(*gb1) && gb1->load().reason() == RW_REASON_DEVICE_REMOVED, "unplug: its gate refuses, removed");
        host_b.plug(b1);
        check(eventually([&] { return admits(*gb1); }), "plug: the device is attached again");

        // A selector that throws: the exception stays on the C++ side.
        {
            rw::sim host2;
            host2.add_device("mlx5_9", 1);
            const uint64_t before = rw::callback_exceptions();
            auto thrower = std::make_shared<rw::function_selector>(
                [](uint32_t, uint32_t, bool) { throw std::runtime_error("selector failed"); }, nullptr);
            rw::monitor m2 = rw::monitor::start_sim(host2, &cfg, thrower);
            std::optional<rw::gate> g;
            check(eventually([&] {
                      if (!g) g = m2.try_gate("mlx5_9/1");
                      return g && admits(*g) && rw::callback_exceptions() > before;
                  }),
                  "selector: an exception thrown by it is caught and counted; the monitor goes on");
            rw::subscription outliving = m2.subscribe([](const rw_notification &) {});
            m2 = rw::monitor();  // stops it
            check(!m2 && g && g->load().state() == RW_RAIL_ACTIVE,
                  "stop: a gate outlives its monitor (its word no longer changes)");
            outliving.reset();  // after its monitor: nothing left to unsubscribe from
            check(!outliving, "stop: a subscription may outlive its monitor");
        }

        // A callback that stops its own monitor: allowed; nothing is called
        // after it, and the monitor thread is joined for it.
        {
            rw::sim host3;
            const uint32_t d = host3.add_device("mlx5_8", 1);
            rw::monitor m3 = rw::monitor::start_sim(host3, &cfg);
            std::atomic<int> calls{0};
            std::atomic<bool> stopped{false};
            rw::subscription s3 = m3.subscribe([&](const rw_notification &) {
                if (calls.fetch_add(1) == 0) {
                    m3.stop();
                    stopped.store(true);
                }
            });
            check(eventually([&] { return host3.counters(d).open; }), "self-stop: the device is opened");
            host3.port_down(d, 1);
            host3.port_up(d, 1);
            check(eventually([&] { return stopped.load(); }), "self-stop: stop() returns inside the callback");
            check(eventually([&] { return !host3.counters(d).open; }),
                  "self-stop: the monitor stopped and closed its device");
            check(calls.load() == 1 && !m3, "self-stop: no call after the stop, and the handle is empty");
        }

        // A subscription reset from another thread (here, this one) while
        // its callback runs: the reset waits for the call, which finishes,
        // and nothing is called after it.
        {
            rw::sim host4;
            const uint32_t d = host4.add_device("mlx5_7", 1);
            rw::monitor m4 = rw::monitor::start_sim(host4, &cfg);
            struct state {
                std::atomic<int> calls{0};
                std::atomic<bool> entered{false}, resetting{false}, finished{false};
            };
            auto st = std::make_shared<state>();
            auto token = std::make_shared<int>(0);
            notes witness;
            rw::subscription w = m4.subscribe([&](const rw_notification &n) { witness.add(n); });
            rw::subscription s4 = m4.subscribe([st, token](const rw_notification &) {
                if (st->calls.fetch_add(1) != 0) return;
                st->entered.store(true);
                // Still running when the other thread is inside reset().
                eventually([&] { return st->resetting.load(); });
                std::this_thread::sleep_for(std::chrono::milliseconds(150));
                st->finished.store(true);
            });
            check(eventually([&] { return host4.counters(d).open; }), "reset-in-call: the device is opened");
            host4.port_down(d, 1);
            check_or_exit(eventually([&] { return st->entered.load(); }), "reset-in-call: the callback is entered",
                          "timed out");
            st->resetting.store(true);
            s4.reset();
            check(st->finished.load(), "reset-in-call: reset() waits for the call in flight to finish");
            check(token.use_count() == 1, "reset-in-call: then the function is released");
            const int frozen = st->calls.load();
            const size_t mark = witness.size();
            host4.port_up(d, 1);
            check(eventually([&] {
                      return witness.any(mark, [&](const rw_notification &n) {
                          return n.kind == RW_HAPPENING_TRANSITION && n.to_state == RW_RAIL_ACTIVE;
                      });
                  }),
                  "reset-in-call: the monitor goes on notifying");
            check(st->calls.load() == frozen, "reset-in-call: no call after the reset",
                  std::to_string(st->calls.load() - frozen) + " calls after it");
            w.reset();
        }

        // A callback stops its monitor and keeps running while another
        // thread resets that subscription, the reset coming after the stop
        // (the handle is already null) or before it (waiting for the
        // call): either way the reset waits for the call, whose function
        // stays alive to its end, then frees it.
        for (const bool stop_first : {true, false}) {
            const std::string name = stop_first ? "stop-then-reset: " : "reset-then-stop: ";
            rw::sim host5;
            const uint32_t d = host5.add_device("mlx5_6", 1);
            rw::monitor m5 = rw::monitor::start_sim(host5, &cfg);
            struct state {
                std::atomic<int> calls{0};
                std::atomic<bool> entered{false}, resetting{false}, stopped{false}, finished{false};
                std::atomic<bool> reset_done{false}, reset_after_finish{false}, payload_ok{false};
            };
            auto st = std::make_shared<state>();
            auto payload = std::make_shared<std::string>("still here, after the stop");
            rw::subscription s5 = m5.subscribe([st, payload, stop_first, &m5](const rw_notification &) {
                if (st->calls.fetch_add(1) != 0) return;
                st->entered.store(true);
                if (stop_first) {
                    m5.stop();
                    st->stopped.store(true);
                    eventually([&] { return st->resetting.load(); });
                    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the reset is under way
                } else {
                    eventually([&] { return st->resetting.load(); });
                    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the reset is waiting
                    m5.stop();
                    st->stopped.store(true);
                }
                std::this_thread::sleep_for(std::chrono::milliseconds(150));
                // Its captures must still be alive: read them.
                st->payload_ok.store(*payload == "still here, after the stop");
                st->finished.store(true);
            });
            check(eventually([&] { return host5.counters(d).open; }), name + "the device is opened");
            host5.port_down(d, 1);
            check_or_exit(eventually([&] { return stop_first ? st->stopped.load() : st->entered.load(); }),
                          name + "the callback is entered", "timed out");
            std::thread other([&] {
                st->resetting.store(true);
                s5.reset();
                st->reset_after_finish.store(st->finished.load());
                st->reset_done.store(true);
            });
            check_or_exit(eventually([&] { return st->reset_done.load(); }), name + "the reset returns",
                          "timed out: deadlock between stop() and reset()?");
            other.join();
            check(st->stopped.load() && !m5, name + "the callback stopped the monitor");
            check(st->reset_after_finish.load(), name + "the reset returned only after the call finished");
            check(st->payload_ok.load(), name + "the function was alive to the end of its call");
            check(eventually([&] { return !host5.counters(d).open; }),
                  name + "the monitor stopped and closed its device");
            check(st->calls.load() == 1, name + "no call after the stop", std::to_string(st->calls.load()) + " calls");
            check(payload.use_count() == 1, name + "the function is released");
        }

        // A callback destroys its monitor, which has a selector: the
        // selector is released then and there and never called again
        // (under valgrind: no read of the freed selector state).
        {
            struct counting_selector : rw::selector {
                std::atomic<uint64_t> calls{0}, after_free{0};
                std::atomic<bool> freed{false};
                void set_available(uint32_t, uint32_t, bool) override { count(); }
                void reseed(uint32_t, uint32_t, uint64_t) override { count(); }
                void count() {
                    ++calls;
                    if (freed.load()) ++after_free;
                }
            };
            rw::sim host6;
            const uint32_t d = host6.add_device("mlx5_5", 2);
            auto sel6 = std::make_shared<counting_selector>();
            std::optional<rw::monitor> m6 = rw::monitor::start_sim(host6, &cfg, sel6);
            std::optional<rw::gate> g;
            check_or_exit(eventually([&] {
                              if (!g) g = m6->try_gate("mlx5_5/1");
                              return g && admits(*g) && sel6->calls.load() >= 4;
                          }),
                          "destroy-in-callback: the rails come up, the selector told", "timed out");
            struct state {
                std::atomic<bool> done{false};
                bool released = false, empty = false;
                rw::subscription self;
            };
            auto st = std::make_shared<state>();
            st->self = m6->subscribe([st, &m6, sel6](const rw_notification &n) {
                if (st->done.load() || n.kind != RW_HAPPENING_TRANSITION) return;
                st->self.reset();  // its own: freed when this call returns
                m6.reset();        // ~monitor, from its own callback
                sel6->freed.store(true);
                // The monitor let go of the selector: the only references
                // left are this function's and the test's.
                st->released = sel6.use_count() == 2;
                st->empty = !m6.has_value();
                st->done.store(true);
            });
            host6.port_down(d, 1);  // port 2 stays available
            check_or_exit(eventually([&] { return st->done.load(); }),
                          "destroy-in-callback: the callback destroyed its monitor", "timed out");
            check(st->empty && st->released, "destroy-in-callback: the monitor let go of the selector at once");
            check(eventually([&] { return !host6.counters(d).open; }),
                  "destroy-in-callback: the monitor stopped and closed its device");
            check(eventually([&] { return st.use_count() == 1; }),
                  "destroy-in-callback: its subscription was freed after its call");
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
            check(sel6->after_free.load() == 0, "destroy-in-callback: the selector is not called after the free",
                  std::to_string(sel6->after_free.load()) + " calls after it");
        }

        // The selector destroys its monitor, in the attach's calls the
        // monitor thread makes after start (the engine's lock, held around
        // start, keeps it waiting for the handle): the calls for the other
        // rails are not made (they would read the freed monitor's state).
        for (int first_call = 1; first_call <= 3; ++first_call) {
            const std::string name = "destroy-in-selector (call " + std::to_string(first_call) + "): ";
            struct destroying_selector : rw::selector {
                std::mutex mu;  // the engine's, held around start
                std::optional<rw::monitor> *mon = nullptr;
                int destroy_at = 0;
                std::atomic<int> calls{0}, after{0};
                std::atomic<bool> destroyed{false};
                void set_available(uint32_t, uint32_t, bool) override { call(); }
                void reseed(uint32_t, uint32_t, uint64_t) override { call(); }
                void call() {
                    if (destroyed.load()) {
                        ++after;
                        return;
                    }
                    if (++calls != destroy_at) return;
                    std::lock_guard<std::mutex> l(mu);
                    mon->reset();  // ~monitor, from its selector
                    destroyed.store(true);
                }
            };
            rw::sim host7;
            const uint32_t d = host7.add_device("mlx5_6", 4);
            auto sel7 = std::make_shared<destroying_selector>();
            std::optional<rw::monitor> m7;
            sel7->mon = &m7;
            sel7->destroy_at = first_call;
            {
                std::lock_guard<std::mutex> l(sel7->mu);
                m7 = rw::monitor::start_sim(host7, &cfg, sel7);
            }
            check_or_exit(eventually([&] { return sel7->destroyed.load(); }),
                          name + "the selector destroyed its monitor", "timed out");
            check(eventually([&] { return !host7.counters(d).open; }),
                  name + "the monitor stopped and closed its device");
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            check(sel7->after.load() == 0, name + "no selector call after the destroy",
                  std::to_string(sel7->after.load()) + " calls after it");
            check(sel7.use_count() == 1, name + "the monitor let go of the selector",
                  std::to_string(sel7.use_count()) + " references");
        }

        mon = rw::monitor();
        check(!mon, "stop: the second monitor stops too");
    } catch (const std::exception &e) {
        check(false, "no unexpected exception", e.what());
    }
    std::printf("# %d passed, %d failed\n", passed, failed);
    return failed == 0 && passed > 0 ? 0 : 1;
}
