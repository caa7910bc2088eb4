// Embedding 1 through the C++ wrapper: the engine keeps its loop and drives
// railwatch::machine itself. Attach, carrying out actions, the five drain
// cases of the original fix (through rw_machine_drain, over a scripted
// queue), the three transport cases, the inline gate, and errors.
//
// Prints `ok - NAME` / `not ok - NAME: why` per check, then a summary;
// exits 0 iff every check passed.

#include "railwatch.hpp"

#include "check.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace rw = railwatch;
namespace ev = railwatch::event_code;
namespace ps = railwatch::port_state;

// ---- the harness ---------------------------------------------------------------

template <class A, class B>
static void check_eq(const A &got, const B &want, const std::string &name) {
    check(got == want, name, "got " + std::to_string(got) + ", want " + std::to_string(want));
}

// ---- an engine loop around the machine -------------------------------------------

// A host the test controls: port states, and a record of every action.
struct rig {
    rw::machine m;
    uint64_t now = 0;
    std::map<std::pair<uint32_t, uint32_t>, uint32_t> ports;  // absent: ACTIVE
    std::set<uint32_t> reading;                                // devices whose fd is watched
    std::vector<rw_action> actions;                            // everything carried out

    explicit rig(const rw::config &cfg) : m(cfg) {}

    uint32_t port_of(uint32_t d, uint32_t p) const {
        auto it = ports.find({d, p});
        return it == ports.end() ? ps::active : it->second;
    }

    // Carries out every queued action, answering each at once.
    void run() {
        for (int guard = 0; guard < 100000; ++guard) {
            auto a = m.poll_action();
            if (!a) return;
            actions.push_back(*a);
            switch (a->kind) {
            case RW_ACTION_START_READING: reading.insert(a->device); break;
            case RW_ACTION_STOP_READING: reading.erase(a->device); break;
            case RW_ACTION_QUERY_PORT: m.handle_port_state(a->device, a->port, 0, port_of(a->device, a->port), now); break;
            case RW_ACTION_READ_LINK: m.handle_link(a->device, a->port, 0, 128, 2, 0, now); break;  // NDR 4x
            case RW_ACTION_READ_ADDRESS: m.handle_address_error(a->device, a->port, EOPNOTSUPP, now); break;
            case RW_ACTION_REOPEN: m.handle_reopen(a->device, 0, now); break;
            default: break;
            }
        }
        throw std::runtime_error("the machine never ran out of actions");
    }

    // Lets time pass up to `to`, calling handle_timeout at each deadline.
    void advance_to(uint64_t to) {
        for (int guard = 0; guard < 100000; ++guard) {
            auto d = m.poll_timeout();
            if (!d || *d > to) {
                now = to;
                return;
            }
            now = std::max(now, *d);
            m.handle_timeout(now);
            run();
        }
        throw std::runtime_error("a deadline that never moves");
    }

    size_t mark() const { return actions.size(); }

    // Actions of `kind` since `from` (device/port: ~0u for any).
    std::vector<rw_action> since(size_t from, uint32_t kind, uint32_t device = ~0u, uint32_t port = ~0u) const {
        std::vector<rw_action> out;
        for (size_t i = from; i < actions.size(); ++i) {
            const rw_action &a = actions[i];
            if (a.kind != kind) continue;
            if ((device == ~0u || a.device == device) && (port == ~0u || a.port == port)) out.push_back(a);
        }
        return out;
    }

    // Transitions of a rail notified since `from`.
    std::vector<rw_notification> transitions(size_t from, uint32_t device, uint32_t port) const {
        std::vector<rw_notification> out;
        for (const rw_action &a : since(from, RW_ACTION_NOTIFY, device, port))
            if (a.notification.kind == RW_HAPPENING_TRANSITION) out.push_back(a.notification);
        return out;
    }
};

// A scripted async-event queue for rw_machine_drain: each entry is an event
// or the errno of a failed read; an empty queue reads EAGAIN.
struct scripted_queue {
    struct entry {
        int err;
        uint32_t code;
        uint64_t element;
    };
    std::deque<entry> q;
    uint64_t acked = 0;

    void event(uint32_t code, uint64_t element = 0) { q.push_back({0, code, element}); }
    void fail(int err) { q.push_back({err, 0, 0}); }

    // What the engine's reader does: read one, ack it, hand it over.
    int operator()(uint32_t &code, uint64_t &element) {
        if (q.empty()) return EAGAIN;
        entry e = q.front();
        q.pop_front();
        if (e.err) return e.err;
        code = e.code;
        element = e.element;
        ++acked;  // ibv_ack_async_event, before the machine sees it
        return 0;
    }
};

static rw::config test_config() {
    rw::config c = rw::default_config();
    c.set("tick_ms", 100);
    c.set("reopen_jitter_pct", 0);
    c.set("seed", 1);
    return c;
}

// A machine with one device, mlx5_0, ports 1 and 2, attached.
static uint32_t attach(rig &r, const char *name, std::vector<uint8_t> ports) {
    uint32_t d = r.m.add_device(name, ports, r.now);
    r.run();
    return d;
}

// ---- the checks --------------------------------------------------------------------

static void words_and_layout() {
    check_eq(rw_word_layout_version(), uint32_t{RW_WORD_LAYOUT_VERSION}, "layout: the library's word layout is the header's");
    struct {
        uint32_t state, reason, port;
        uint64_t gen;
    } cases[] = {{RW_RAIL_ACTIVE, RW_REASON_NONE, ps::active, 1},
                 {RW_RAIL_PAUSED, RW_REASON_PORT_ERR, ps::down, 77},
                 {RW_RAIL_INERT, RW_REASON_NOT_OPENED, RW_WORD_PORT_NONE, 0},
                 {RW_RAIL_PAUSED, RW_REASON_SETTLING, ps::armed, RW_WORD_GEN_MASK}};
    bool all = true;
    std::string why;
    for (auto &c : cases) {
        rw::word w{rw_word_encode(c.state, c.reason, c.port, c.gen)};
        rw_ticket t{};
        rw_word_decode(w.raw, &t);
        bool same = w.state() == t.state && w.reason() == t.reason && w.port_state() == t.port_state &&
                    w.generation() == t.generation && w.admits() == t.admitted && w.state() == c.state &&
                    w.generation() == c.gen;
        if (!same) {
            all = false;
            why += "word " + std::to_string(w.raw) + " decodes differently; ";
        }
    }
    check(all, "layout: the inline decoders agree with rw_word_decode", why);
}

static void errors_and_handles() {
    rig r(test_config());
    attach(r, "mlx5_0", {1});
    try {
        r.m.add_device("mlx5_0", std::vector<uint8_t>{1}, 0);
        check(false, "errors: a duplicate device throws", "no exception");
    } catch (const rw::error &e) {
        check(e.status() == RW_ERR_INVALID && std::string(e.what()).find("mlx5_0") != std::string::npos,
              "errors: a duplicate device throws RW_ERR_INVALID naming it", e.what());
    }
    try {
        r.m.add_device("mlx5_9", std::vector<uint8_t>{0}, 0);
        check(false, "errors: port 0 throws", "no exception");
    } catch (const rw::error &e) {
        check_eq(int(e.status()), int(RW_ERR_INVALID), "errors: port 0 throws RW_ERR_INVALID");
    }
    try {
        r.m.handle_event(42, ev::port_err, 1, 0);
        check(false, "errors: an unknown device throws", "no exception");
    } catch (const rw::error &e) {
        check_eq(int(e.status()), int(RW_ERR_RANGE), "errors: an unknown device throws RW_ERR_RANGE");
    }
    try {
        (void)r.m.gate(0, 9);
        check(false, "errors: a gate of an unknown port throws", "no exception");
    } catch (const rw::error &e) {
        check(e.status() == RW_ERR_RANGE, "errors: a gate of an unknown port throws", e.what());
    }
    // A name with a NUL inside is refused, not cut short into another name.
    using namespace std::string_literals;
    try {
        r.m.add_device("mlx5_1\0x"s, std::vector<uint8_t>{1}, 0);
        check(false, "errors: a device name with a NUL inside throws", "no exception");
    } catch (const rw::error &e) {
        check_eq(int(e.status()), int(RW_ERR_INVALID), "errors: a device name with a NUL inside throws RW_ERR_INVALID");
    }
    check(!r.m.device_name(1).has_value(), "errors: a name with a NUL inside adds no device (not its head either)");
    r.m.handle_device_list({"mlx5_0", "mlx5_7\0"s}, 0);
    check(!r.m.device_name(1).has_value(), "errors: the device list leaves out a name with a NUL inside");
    {
        rw::sim host;
        try {
            host.add_device("mlx5_2\0y"s, 1);
            check(false, "errors: a sim device name with a NUL inside throws", "no exception");
        } catch (const rw::error &e) {
            check_eq(int(e.status()), int(RW_ERR_INVALID), "errors: a sim device name with a NUL inside throws RW_ERR_INVALID");
        }
        host.add_device("mlx5_2", 1);
        rw::sim_context ctx;
        check_eq(host.open("mlx5_2\0y"s, ctx), EINVAL, "errors: sim::open of a name with a NUL inside is EINVAL");
        check(!ctx, "errors: sim::open of a name with a NUL inside opens nothing");
    }
    rw::config bad = test_config();
    try {
        bad.set("drain_budget", 0);
        check(false, "errors: a bad setting throws", "no exception");
    } catch (const rw::error &e) {
        check(e.status() == RW_ERR_RANGE && std::string(e.what()).find("drain_budget") != std::string::npos,
              "errors: a bad setting throws RW_ERR_RANGE naming it", e.what());
    }
    bad.set("reopen_initial_ms", 5000).set("reopen_max_ms", 1000);
    try {
        rw::machine m(bad);
        check(false, "errors: settings that disagree throw", "no exception");
    } catch (const rw::error &e) {
        check(e.status() == RW_ERR_INVALID && std::string(e.what()).find("reopen_max_ms") != std::string::npos,
              "errors: settings that disagree throw RW_ERR_INVALID naming one", e.what());
    }
    check(bad.get_u64("reopen_initial_ms") == 5000 && bad.get_str("port_witness") == "both",
          "errors: a config reads back by key");

    // Moves leave an empty handle behind; the moved-to one works.
    rw::gate g = r.m.gate(0, 1);
    rw::gate g2 = std::move(g);
    rw::machine moved = std::move(r.m);
    check(!g && g2 && !r.m && moved, "handles: moves leave empty handles behind");
    check(!g.check().has_value() && g.load().state() == RW_RAIL_INERT, "handles: an empty gate refuses");
    check(g2.check().has_value(), "handles: a moved gate still admits");
    moved = rw::machine(test_config());  // frees the first machine
    check(g2.check().has_value(), "handles: a gate outlives its machine");
}

static void attach_and_inert_gate() {
    rig r(test_config());
    uint32_t d = r.m.add_device("mlx5_0", std::vector<uint8_t>{1, 2}, r.now);
    rw::gate g = r.m.gate(d, 1);
    // Transport case 2: a gate check on an inert rail is refused.
    rw_ticket t = g.check_call();
    check(!g.check() && !t.admitted && t.state == RW_RAIL_INERT && t.reason == RW_REASON_NOT_OPENED,
          "transport: a gate check on an inert (not yet attached) rail is refused",
          std::string("state ") + rw::state_name(t.state) + ", reason " + rw::reason_name(t.reason));

    r.run();
    check(r.reading.count(d) == 1, "attach: the machine asks to start reading the device");
    check_eq(r.since(0, RW_ACTION_QUERY_PORT, d).size(), size_t{2}, "attach: each port is queried");
    // Re-seed before available, per rail.
    bool order = true;
    for (uint32_t p : {1u, 2u}) {
        int reseed = -1, avail = -1;
        for (size_t i = 0; i < r.actions.size(); ++i) {
            const rw_action &a = r.actions[i];
            if (a.device != d || a.port != p) continue;
            if (a.kind == RW_ACTION_RESEED && reseed < 0) reseed = int(i);
            if (a.kind == RW_ACTION_SET_AVAILABLE && a.available && avail < 0) avail = int(i);
        }
        order = order && reseed >= 0 && avail > reseed && r.actions[size_t(reseed)].rate_mbps == 400000;
    }
    check(order, "attach: each rail is re-seeded at 400 Gb/s before it is made available");
    auto tr = r.transitions(0, d, 1);
    check(tr.size() == 1 && tr[0].from_state == RW_RAIL_INERT && tr[0].to_state == RW_RAIL_ACTIVE &&
              tr[0].cause == RW_CAUSE_BY && tr[0].cause_code == RW_BY_ATTACH,
          "attach: inert -> active by attach is notified");
    auto gen = g.check();
    check(gen.has_value() && *gen == tr.at(0).generation, "attach: the gate admits with the notified generation");
    check(!r.m.poll_timeout().has_value(), "attach: a healthy host has no deadline");

    // The same attach through poll_actions (a batch at a time): the same
    // actions in the same order.
    rw::machine m2(test_config());
    m2.add_device("mlx5_0", std::vector<uint8_t>{1, 2}, 0);
    std::vector<uint32_t> kinds;
    std::vector<rw_action> batch(3);
    for (int guard = 0; guard < 1000; ++guard) {
        size_t n = m2.poll_actions(batch);
        if (n == 0) break;
        for (size_t i = 0; i < n; ++i) {
            const rw_action &a = batch[i];
            kinds.push_back(a.kind);
            if (a.kind == RW_ACTION_QUERY_PORT) m2.handle_port_state(a.device, a.port, 0, ps::active, 0);
            if (a.kind == RW_ACTION_READ_LINK) m2.handle_link(a.device, a.port, 0, 128, 2, 0, 0);
            if (a.kind == RW_ACTION_READ_ADDRESS) m2.handle_address_error(a.device, a.port, EOPNOTSUPP, 0);
        }
    }
    std::vector<uint32_t> want;
    for (const rw_action &a : r.actions) want.push_back(a.kind);
    check(kinds == want && m2.gate(0, 2).check().has_value(),
          "attach: poll_actions in batches of three carries out the same attach",
          std::to_string(kinds.size()) + " actions, want " + std::to_string(want.size()));
}

static void drain_cases() {
    // 1. A burst fully drained.
    {
        rig r(test_config());
        uint32_t d = attach(r, "mlx5_0", {1});
        scripted_queue q;
        for (int i = 0; i < 5; ++i) q.event(ev::comm_est, 0x1000);
        rw_drain_report rep = r.m.drain(d, q, r.now);
        r.run();
        check(rep.gets == 6 && rep.events == 5 && q.acked == 5 && rep.end == 0 && q.q.empty(),
              "drain: a burst of five drains with six reads and five acks",
              "gets " + std::to_string(rep.gets) + ", events " + std::to_string(rep.events) + ", end " +
                  std::to_string(rep.end));
    }
    // 2. A PORT_ACTIVE behind COMM_EST.
    {
        rig r(test_config());
        uint32_t d = attach(r, "mlx5_0", {1});
        rw::gate g = r.m.gate(d, 1);
        uint64_t g1 = g.check().value_or(0);
        r.ports[{d, 1}] = ps::down;
        scripted_queue q;
        q.event(ev::port_err, 1);
        r.now = 100;
        r.m.drain(d, q, r.now);
        r.run();
        rw::word w = g.load();
        check(!g.check() && w.state() == RW_RAIL_PAUSED && w.reason() == RW_REASON_PORT_ERR,
              "drain: PORT_ERR pauses the rail and the gate refuses");
        size_t from = r.mark();
        r.ports[{d, 1}] = ps::active;
        for (int i = 0; i < 7; ++i) q.event(ev::comm_est, 0x2000);
        q.event(ev::port_active, 1);
        r.now = 200;
        rw_drain_report rep = r.m.drain(d, q, r.now);
        r.run();
        check(rep.gets == 9 && rep.events == 8 && q.acked == 9 && rep.end == 0,
              "drain: a PORT_ACTIVE behind seven COMM_EST is read in the same drain, every event acked once",
              "gets " + std::to_string(rep.gets) + ", events " + std::to_string(rep.events));
        auto tr = r.transitions(from, d, 1);
        check(tr.size() == 1 && tr[0].to_state == RW_RAIL_ACTIVE && tr[0].cause_code == RW_BY_EVENT,
              "drain: the rail comes back by the event");
        auto gen = g.check();
        check(gen.has_value() && *gen == g1 + 1, "drain: the gate admits again with the next generation");
    }
    // 3. An empty queue.
    {
        rig r(test_config());
        uint32_t d = attach(r, "mlx5_0", {1});
        size_t from = r.mark();
        scripted_queue q;
        rw_drain_report rep = r.m.drain(d, q, r.now);
        r.run();
        check(rep.gets == 1 && rep.events == 0 && rep.end == 0 && r.reading.count(d) == 1 &&
                  r.since(from, RW_ACTION_STOP_READING).empty(),
              "drain: an empty queue is one read and not an error");
    }
    // 4. EINTR retried.
    {
        rig r(test_config());
        uint32_t d = attach(r, "mlx5_0", {1});
        scripted_queue q;
        q.fail(EINTR);
        q.event(ev::comm_est, 0x1000);
        rw_drain_report rep = r.m.drain(d, q, r.now);
        r.run();
        check(rep.gets == 3 && rep.interrupted == 1 && rep.events == 1 && q.acked == 1 && rep.end == 0 &&
                  r.reading.count(d) == 1,
              "drain: one EINTR is retried and the drain goes on to EAGAIN");
    }
    // 5. A read error stops the drain.
    {
        rig r(test_config());
        uint32_t d = attach(r, "mlx5_0", {1});
        rw::gate g = r.m.gate(d, 1);
        size_t from = r.mark();
        scripted_queue q;
        q.event(ev::comm_est, 0x1000);
        q.fail(EIO);
        q.event(ev::comm_est, 0x1000);
        rw_drain_report rep = r.m.drain(d, q, r.now);
        r.run();
        check(rep.gets == 2 && rep.events == 1 && q.acked == 1 && rep.end == EIO && q.q.size() == 1,
              "drain: EIO after one event stops the drain, nothing read past it",
              "gets " + std::to_string(rep.gets) + ", end " + std::to_string(rep.end));
        check(r.reading.count(d) == 0 && !r.since(from, RW_ACTION_STOP_READING, d).empty(),
              "drain: after EIO the machine stops reading the device");
        bool logged = false;
        for (auto &a : r.since(from, RW_ACTION_LOG, d)) logged = logged || a.log.kind == RW_LOG_READ_FAILED;
        check(logged, "drain: the read failure is logged");
        // The device is polled instead: a port that goes down is noticed.
        r.ports[{d, 1}] = ps::down;
        r.advance_to(r.now + 5000);
        check(!g.check(), "drain: the poll takes over and sees the port go down");
    }
    // The budget bounds one drain; an exception from the reader is rethrown.
    {
        rig r(test_config());
        uint32_t d = attach(r, "mlx5_0", {1});
        scripted_queue q;
        for (int i = 0; i < 10; ++i) q.event(ev::comm_est, 0x1000);
        rw_drain_report rep = r.m.drain(d, q, r.now, 4);
        check(rep.gets == 4 && rep.end == -1 && q.q.size() == 6, "drain: the budget bounds one drain (end -1)");
        size_t from = r.mark();
        int calls = 0;
        try {
            r.m.drain(
                d,
                [&](uint32_t &, uint64_t &) -> int {
                    ++calls;
                    throw std::runtime_error("reader failed");
                },
                r.now);
            check(false, "drain: an exception from the reader is rethrown", "no exception");
        } catch (const std::runtime_error &e) {
            r.run();
            check(calls == 1 && std::string(e.what()) == "reader failed" &&
                      !r.since(from, RW_ACTION_STOP_READING, d).empty(),
                  "drain: an exception from the reader stops the drain (read error) and is rethrown");
        }
    }
}

static void transport_cases() {
    // 1. The poll leaves inert rails alone.
    {
        rig r(test_config());
        r.ports[{0, 1}] = ps::down;  // mlx5_0/1 stays paused: the tick runs
        uint32_t d0 = attach(r, "mlx5_0", {1});
        uint32_t d1 = attach(r, "mlx5_1", {1, 2});
        rw::gate g11 = r.m.gate(d1, 1), g12 = r.m.gate(d1, 2);
        check(g11.check() && g12.check() && !r.m.gate(d0, 1).check(), "transport: setup, mlx5_1 active, mlx5_0/1 paused");
        r.now = 10;
        r.m.handle_removed(d1, r.now);
        r.run();
        rw::word w = g11.load();
        check(w.state() == RW_RAIL_INERT && w.reason() == RW_REASON_DEVICE_REMOVED && !g11.check() && !g12.check(),
              "transport: a removed device's rails are inert and refused");
        size_t from = r.mark();
        bool refused = true;
        for (uint64_t t = 100; t <= 60000; t += 100) {
            r.advance_to(t);
            refused = refused && !g11.check() && !g12.check();
        }
        check(r.since(from, RW_ACTION_QUERY_PORT, d1).empty() && r.since(from, RW_ACTION_READ_LINK, d1).empty(),
              "transport: the poll never queries an inert rail's port");
        check(r.since(from, RW_ACTION_SET_AVAILABLE, d1).empty() && r.since(from, RW_ACTION_RESEED, d1).empty(),
              "transport: nothing is handed to the selector for an inert rail");
        check(refused, "transport: the inert rails' gates refuse throughout");
        check(r.since(from, RW_ACTION_QUERY_PORT, d0, 1).size() >= 100,
              "transport: the poll ran for the paused rail meanwhile",
              std::to_string(r.since(from, RW_ACTION_QUERY_PORT, d0, 1).size()) + " queries");
    }
    // 3. The poll activates a paused rail whose port reads ACTIVE.
    {
        rig r(test_config());
        uint32_t d = attach(r, "mlx5_0", {1});
        rw::gate g = r.m.gate(d, 1);
        r.ports[{d, 1}] = ps::down;
        r.now = 50;
        r.m.handle_event(d, ev::port_err, 1, r.now);
        r.run();
        uint64_t paused_gen = g.load().generation();
        check(!g.check() && r.m.poll_timeout().has_value(), "transport: a paused rail arms the tick");
        r.ports[{d, 1}] = ps::active;  // back, without an event: the PORT_ACTIVE was lost
        size_t from = r.mark();
        r.advance_to(r.now + 2000);
        auto tr = r.transitions(from, d, 1);
        check(tr.size() == 1 && tr[0].from_state == RW_RAIL_PAUSED && tr[0].to_state == RW_RAIL_ACTIVE &&
                  tr[0].cause == RW_CAUSE_BY && tr[0].cause_code == RW_BY_POLL,
              "transport: the poll activates the paused rail (recovered by poll)");
        auto gen = g.check();
        check(gen && *gen == paused_gen + 1 && *gen == tr.at(0).generation,
              "transport: the gate admits with the next generation");
        auto av = r.since(from, RW_ACTION_SET_AVAILABLE, d, 1);
        check(av.size() == 1 && av[0].available && r.since(from, RW_ACTION_RESEED, d, 1).empty(),
              "transport: made available again, same rate so no re-seed");
        check(!r.m.poll_timeout().has_value(), "transport: nothing needs the tick any more");
    }
}

// Slots, the machine's own logger and the four-value status, through the
// wrapper: an engine of TENT's kind.
static void slots_logger_and_status() {
    rig r(test_config());
    std::vector<std::string> lines;
    r.m.set_log_callback(
        [](void *user, uint32_t, const char *, const char *message) {
            static_cast<std::vector<std::string> *>(user)->push_back(message);
        },
        &lines, RW_LOG_LEVEL_INFO);
    r.m.add_device_at(1, "mlx5_1", std::vector<uint8_t>{1}, r.now);
    r.run();
    check(r.m.gate(1, 1).load().engine_status() == RW_ENGINE_ENABLED, "slot 1 enabled");
    bool refused = false;
    try {
        r.m.gate(0, 1);
    } catch (const rw::error &e) {
        refused = e.status() == RW_ERR_RANGE;
    }
    check(refused, "empty slot 0 has no rail");
    r.m.handle_event(1, 99, 0, r.now);  // an unknown code: a warning
    r.run();
    const bool heard = std::any_of(lines.begin(), lines.end(),
                                   [](const std::string &l) { return l.find("code 99") != std::string::npos; });
    check(heard, "the logger heard the warning", std::to_string(lines.size()) + " lines");
    check(r.since(0, RW_ACTION_LOG).empty(), "no LOG actions with a logger");
}

int main() {
    try {
        words_and_layout();
        errors_and_handles();
        attach_and_inert_gate();
        drain_cases();
        transport_cases();
        slots_logger_and_status();
    } catch (const std::exception &e) {
        check(false, "no unexpected exception", e.what());
    }
    std::printf("# %d passed, %d failed\n", passed, failed);
    return failed == 0 && passed > 0 ? 0 : 1;
}
