// The C++ wrapper's device lifecycle and evidence calls on a machine the
// test drives itself: machine::handle_device_list, handle_opened and
// device_name; report_transfers (the data-path breaker, half-open and its
// probe; failures through one peer only); handle_counters (a silent
// flap; counters that cannot be read); gid_index (require_address); and
// railwatch::uevents.
//
// Prints `ok - NAME` / `not ok - NAME: why` per check, then a summary;
// exits 0 iff every check passed.

#include "railwatch.hpp"

#include "check.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace rw = railwatch;
namespace ev = railwatch::event_code;
namespace ps = railwatch::port_state;

// `rw_address_requirement`'s RoCE v2 IPv4 (its enum is not in railwatch.h).

// A host whose every device opens with port 1 ACTIVE; the counters and the
// address it answers with are the test's to set.
struct rig {
    rw::machine m;
    uint64_t now = 0;
    uint32_t port_state = ps::active;
    uint64_t link_downed = 3;
    int counters_error = 0;
    std::vector<rw_gid> gids;
    std::vector<rw_action> actions;

    explicit rig(const rw::config &cfg) : m(cfg) {}

    void run() {
        for (int guard = 0; guard < 100000; ++guard) {
            auto a = m.poll_action();
            if (!a) return;
            actions.push_back(*a);
            answer(*a);
        }
        throw std::runtime_error("the machine never ran out of actions");
    }

    void answer(const rw_action &a) {
        static constexpr uint8_t one_port[] = {1};
        switch (a.kind) {
        case RW_ACTION_OPEN: m.handle_opened(a.device, one_port, now); break;
        case RW_ACTION_QUERY_PORT: m.handle_port_state(a.device, a.port, 0, port_state, now); break;
        case RW_ACTION_READ_LINK: m.handle_link(a.device, a.port, 0, 128, 2, 0, now); break;
        case RW_ACTION_READ_ADDRESS: {
            rw_port_address addr{};
            addr.link_layer = 2;
            addr.gids = gids.data();
            addr.ngids = gids.size();
            addr.netdev = "eth0";
            m.handle_address(a.device, a.port, addr, now);
            break;
        }
        case RW_ACTION_READ_COUNTERS:
            if (counters_error)
                m.handle_counters(a.device, a.port, counters_error, RW_COUNTER_NONE, RW_COUNTER_NONE, RW_COUNTER_NONE,
                                  now);
            else
                m.handle_counters(a.device, a.port, 0, link_downed, 10, RW_COUNTER_NONE, now);
            break;
        default: break;
        }
    }

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

    std::vector<rw_action> since(size_t from, uint32_t kind) const {
        std::vector<rw_action> out;
        for (size_t i = from; i < actions.size(); ++i)
            if (actions[i].kind == kind) out.push_back(actions[i]);
        return out;
    }

    std::vector<rw_notification> happened(size_t from, uint32_t kind) const {
        std::vector<rw_notification> out;
        for (const rw_action &a : since(from, RW_ACTION_NOTIFY))
            if (a.notification.kind == kind) out.push_back(a.notification);
        return out;
    }

    // The devices listed, opened and attached; their indices by name order.
    std::vector<uint32_t> list(std::vector<std::string> names) {
        size_t from = mark();
        m.handle_device_list(names, now);
        run();
        std::vector<uint32_t> opened;
        for (const rw_action &a : since(from, RW_ACTION_OPEN)) opened.push_back(a.device);
        return opened;
    }
};

static rw::config test_config() {
    rw::config c = rw::default_config();
    c.set("tick_ms", 100);
    c.set("reopen_jitter_pct", 0);
    c.set("seed", 1);
    return c;
}

static rw_gid gid(uint32_t index, std::initializer_list<uint8_t> tail, uint32_t type) {
    rw_gid g{};
    g.index = index;
    const size_t at = sizeof g.raw - tail.size();
    std::copy(tail.begin(), tail.end(), g.raw + at);
    g.gid_type = type;
    return g;
}

static void lifecycle() {
    rig r(test_config());
    const std::vector<uint32_t> opened = r.list({"mlx5_0", "mlx5_1"});
    check(opened.size() == 2, "lifecycle: each listed device is asked to be opened",
          std::to_string(opened.size()) + " opens");
    if (opened.size() != 2) return;
    const auto n0 = r.m.device_name(opened[0]), n1 = r.m.device_name(opened[1]);
    check(n0 == "mlx5_0" && n1 == "mlx5_1", "lifecycle: device_name names what RW_ACTION_OPEN opens",
          n0.value_or("?") + ", " + n1.value_or("?"));
    check(!r.m.device_name(99).has_value(), "lifecycle: device_name of an index the machine lacks is nullopt");
    rw::gate g = r.m.gate(opened[0], 1);
    check(g.check().has_value() && !r.since(0, RW_ACTION_START_READING).empty(),
          "lifecycle: handle_opened attaches the device (read, port ACTIVE, gate admits)");
    const size_t from = r.mark();
    r.list({"mlx5_1"});
    auto closes = r.since(from, RW_ACTION_CLOSE);
    check(closes.size() == 1 && closes[0].device == opened[0] && !g.check(),
          "lifecycle: a device no longer listed is closed and its gate refuses");
    // An open that fails is asked for again later.
    rig f(test_config());
    f.m.handle_device_list(std::vector<std::string>{"mlx5_9"}, 0);
    auto open = f.m.poll_action();
    check(open && open->kind == RW_ACTION_OPEN, "lifecycle: a listed device is asked to be opened");
    if (!open) return;
    f.m.handle_open_failed(open->device, ENODEV, 0);
    f.run();
    const size_t before = f.mark();
    f.advance_to(5000);
    check(!f.since(before, RW_ACTION_OPEN).empty(), "lifecycle: an open that failed is asked for again");
}

static void breaker_and_probe() {
    rw::config c = test_config();
    c.set("data_path.min_peers", 1);
    c.set("data_path.failures", 2);
    rig r(c);
    const uint32_t d = r.list({"rxe0"}).at(0);
    rw::gate g = r.m.gate(d, 1);
    const uint64_t before = g.load().generation();
    size_t from = r.mark();
    const rw_transfer_report failures[] = {{7, 12, 2}};  // two IBV_WC_RETRY_EXC_ERR through peer 7
    r.m.report_transfers(d, 1, failures, r.now);
    r.run();
    auto tr = r.happened(from, RW_HAPPENING_TRANSITION);
    check(tr.size() == 1 && tr[0].to_state == RW_RAIL_PAUSED && tr[0].cause == RW_CAUSE_REASON &&
              tr[0].cause_code == RW_REASON_DATA_PATH && !g.check(),
          "breaker: local-path failures through min_peers peers pause the rail (data_path)");
    from = r.mark();
    r.advance_to(r.now + 5000);
    auto half_open = r.happened(from, RW_HAPPENING_HALF_OPEN);
    check(half_open.size() == 1 && !g.check() && g.load().reason() == RW_REASON_HALF_OPEN,
          "breaker: after the backoff it is half-open, and still refuses ordinary work");
    check(r.happened(from, RW_HAPPENING_TRANSITION).size() == 1,
          "breaker: half-open is a reason change, not an activation");
    auto probe = g.probe();
    check(probe && *probe == before && !g.probe(), "breaker: one probe is granted, a second is not");
    from = r.mark();
    r.m.report_probe(d, 1, true, r.now);
    r.run();
    tr = r.happened(from, RW_HAPPENING_TRANSITION);
    auto gen = g.check();
    check(tr.size() == 1 && tr[0].cause == RW_CAUSE_BY && tr[0].cause_code == RW_BY_PROBE && gen &&
              *gen == before + 1,
          "breaker: the probe's success closes it, the rail back with the next generation");
    check(std::strcmp(rw::recovered_by_name(RW_BY_PROBE), "probe") == 0 &&
              std::strcmp(rw::reason_name(RW_REASON_DATA_PATH), "data_path") == 0 &&
              std::strcmp(rw::reason_name(RW_REASON_NO_ADDRESS), "no_address") == 0 &&
              std::strcmp(rw::reason_name(RW_REASON_HALF_OPEN), "half_open") == 0 &&
              std::strcmp(rw::reason_name(RW_REASON_PROBING), "probing") == 0,
          "names: the breaker's and the address's reasons, and the probe, are named as in JSON");
    const rw_transfer_report ok[] = {{7, 0, 5}};
    // Reported lines the machine does not take are errors, not crashes.
    try {
        r.m.report_transfers(d, 9, ok, r.now);
        check(false, "breaker: a report for a port the device lacks throws", "no exception");
    } catch (const rw::error &e) {
        check(e.status() == RW_ERR_RANGE, "breaker: a report for a port the device lacks throws", e.what());
    }
}

static void one_peer_only() {
    rig r(test_config());  // min_peers 2, failures 8: the defaults
    const uint32_t d = r.list({"rxe0"}).at(0);
    rw::gate g = r.m.gate(d, 1);
    const size_t from = r.mark();
    const rw_transfer_report failures[] = {{7, 12, 8}, {7, 5, 40}};  // and flushes, never counted
    r.m.report_transfers(d, 1, failures, r.now);
    r.run();
    auto peer = r.happened(from, RW_HAPPENING_PEER_FAILING);
    check(peer.size() == 1 && peer[0].peer == 7 && g.check().has_value() &&
              r.happened(from, RW_HAPPENING_TRANSITION).empty(),
          "breaker: failures through one peer are notified and the rail stays");
}

static void counters() {
    rig r(test_config());
    const uint32_t d = r.list({"rxe0"}).at(0);
    rw::gate g = r.m.gate(d, 1);
    check(!r.since(0, RW_ACTION_READ_COUNTERS).empty(), "counters: read at attach (the baseline)");
    const uint64_t before = g.load().generation();
    r.link_downed = 4;  // the link went down and came back, and no event said so
    size_t from = r.mark();
    r.m.handle_event(d, ev::client_reregister, 1, r.now);  // any port read reads the counters
    r.run();
    check(r.happened(from, RW_HAPPENING_TRANSITION).empty(), "counters: a rise waits for its confirming read");
    r.advance_to(r.now + 250);  // the port read again, with its counters: nothing explains the rise
    auto tr = r.happened(from, RW_HAPPENING_TRANSITION);
    check(tr.size() == 1 && tr[0].cause == RW_CAUSE_SILENT_FLAP && g.check() == before + 1,
          "counters: a rise with no PORT_ERR is a silent flap (the generation moves)");
    r.counters_error = ENOENT;
    r.m.handle_event(d, ev::client_reregister, 1, r.now);
    r.run();
    from = r.mark();
    r.m.handle_event(d, ev::client_reregister, 1, r.now);
    r.run();
    check(r.since(from, RW_ACTION_READ_COUNTERS).empty(),
          "counters: a port whose counters cannot be read is not asked again");
}

static void gid_index() {
    rig plain(test_config());
    const uint32_t p = plain.list({"rxe0"}).at(0);
    check(!plain.m.gid_index(p, 1).has_value(), "gid_index: none chosen without require_address");
    rw::config c = test_config();
    c.set("require_address", "roce_v2_ipv4");
    rig r(c);
    const rw_gid link_local = gid(0, {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, 1);
    const rw_gid v4 = gid(3, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 1, 1, 1}, 1);
    r.gids = {link_local};
    const uint32_t d = r.list({"rxe0"}).at(0);
    rw::gate g = r.m.gate(d, 1);
    check(!g.check() && g.load().reason() == RW_REASON_NO_ADDRESS && !r.m.gid_index(d, 1),
          "gid_index: without an IPv4 RoCE v2 GID the rail is held (no_address)");
    r.gids = {link_local, v4};
    r.m.handle_event(d, ev::gid_change, 1, r.now);
    r.run();
    auto index = r.m.gid_index(d, 1);
    check(g.check().has_value() && index == 3u, "gid_index: the address comes, the rail activates with its index",
          index ? std::to_string(*index) : "none");
}

static void uevents() {
    try {
        rw::uevents u = rw::uevents::open();
        check(u && u.fd() >= 0, "uevents: opened, its fd is for epoll");
        check(!u.drain(), "uevents: nothing pending right after opening");
        rw::uevents moved = std::move(u);
        check(!u && moved && u.fd() == -1, "uevents: a move leaves an empty handle");
    } catch (const rw::error &e) {
        // A container may refuse the socket: the engine then rescans.
        check(e.status() == RW_ERR_IO || e.status() == RW_ERR_UNSUPPORTED,
              "uevents: a refused socket throws RW_ERR_IO (or UNSUPPORTED)", e.what());
    }
}

int main() {
    try {
        lifecycle();
        breaker_and_probe();
        one_peer_only();
        counters();
        gid_index();
        uevents();
    } catch (const std::exception &e) {
        check(false, "no unexpected exception", e.what());
    }
    std::printf("# %d passed, %d failed\n", passed, failed);
    return failed == 0 && passed > 0 ? 0 : 1;
}
