// railwatch_loop.cpp: the engine's own epoll loop driving railwatch's rail
// machine through the C++ wrapper (embedding 1). The parts an engine copies:
//
//   attach_all  the kernel's device uevents into the epoll set
//               (railwatch::uevents; where the kernel refuses the socket,
//               a rescan of the device list every second instead), the
//               device list to the machine (handle_device_list), then its
//               OPEN actions answered (handle_opened) and the attach
//               carried out (start reading, query the port, read link,
//               address and flap counters); each rail end gets its gate;
//   drain       a device's async fd woke the loop: machine::drain reads
//               to EAGAIN, and each event is acknowledged before the
//               machine sees it, so a QP destroy never waits on one;
//   act         the machine's actions, answered with libibverbs and sysfs;
//   report      the workers' completions, per rail, to the machine
//               (report_transfers: the data-path breaker), batched: at
//               once after a failure, else every report_every_ms;
//   uevents     a device left or came back: the device list again. rxe
//               says nothing on the async fd of a device being deleted and
//               its removal waits for our close, which the machine asks for
//               (RW_ACTION_CLOSE) as soon as the list lacks the device.
//
// What the engine does with a generation bump (a new set of QPs, then the
// old one destroyed) is in rails.cpp; this loop only notices the gate
// words changing and wakes the rail's builder.
#include "evidence.hpp"
#include "loop.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace traffic {

namespace {

// Successes are reported in batches this far apart (a failure at once).
constexpr uint64_t report_every_ms = 100;
// The device list is read this often when there are no uevents.
constexpr uint64_t rescan_every_ms = 1000;

// The libibverbs device names now (none when the kernel has no RDMA).
std::vector<std::string> device_names() {
    std::vector<std::string> names;
    int n = 0;
    ibv_device **devs = ibv_get_device_list(&n);
    if (!devs) return names;
    for (int i = 0; i < n; ++i) names.emplace_back(ibv_get_device_name(devs[i]));
    ibv_free_device_list(devs);
    return names;
}

// The uevent socket, or none (the engine then rescans on a timer).
std::optional<railwatch::uevents> open_uevents() {
    try {
        return railwatch::uevents::open();
    } catch (const railwatch::error &e) {
        note("no device uevents (%s): the device list is read every %llu ms instead", e.what(),
             (unsigned long long)rescan_every_ms);
        return std::nullopt;
    }
}

class railwatch_loop final : public loop_base {
public:
    railwatch_loop(std::vector<rail *> rails, std::function<void()> on_burst, const breaker_settings &b)
        : loop_base(std::move(rails), std::move(on_burst)), machine_(settings(b)), uevents_(open_uevents()) {
        report_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (report_fd_ < 0) throw verbs_error("eventfd", errno);
        for (rail *r : rails_) r->tally.wake_with(report_fd_);
    }
    ~railwatch_loop() override {
        for (rail *r : rails_) r->tally.wake_with(-1);
        close(report_fd_);
    }

    const char *engine_name() const override { return "railwatch"; }

    // The machine learns the devices from the list and asks to open each;
    // all of ours must open now (their gates go to the workers).
    void attach_all() override {
        if (uevents_) watch(uevents_->fd(), uevent_key, true);
        watch(report_fd_, report_key, true);
        list_devices();
        for (device_slot &s : slots_)
            if (!s.dev) throw std::runtime_error(s.name + ": not opened (is it in the device list?)");
    }

private:
    static railwatch::config settings(const breaker_settings &b) {
        railwatch::config c = railwatch::default_config();
        c.set("tick_ms", 250);  // the recovery poll, while a rail is paused
        c.set("data_path.failures", b.failures);
        c.set("data_path.min_peers", b.min_peers);
        return c;
    }

    // The device list, as far as this engine's devices go (the machine
    // would ask to open any device it is told of).
    void list_devices() {
        std::vector<std::string> ours;
        for (const std::string &name : device_names())
            if (std::any_of(slots_.begin(), slots_.end(), [&](const device_slot &s) { return s.name == name; }))
                ours.push_back(name);
        machine_.handle_device_list(ours, now_ms());
        if (!uevents_) next_rescan_ = now_ms() + rescan_every_ms;
        carry_out();
    }

    // The machine's device index is its own: the slot goes by name.
    // nullptr for an index the machine does not know (yet).
    device_slot *find_slot(uint32_t device) {
        if (device >= slot_of_.size()) slot_of_.resize(device + 1, nullptr);
        if (!slot_of_[device]) {
            const std::optional<std::string> name = machine_.device_name(device);
            for (device_slot &s : slots_)
                if (name == s.name) {
                    slot_of_[device] = &s;
                    s.index = device;
                }
        }
        return slot_of_[device];
    }

    // The slot of a device the machine asks about: one of ours (only ours
    // are in the lists it is given).
    device_slot &slot_of(uint32_t device) {
        device_slot *s = find_slot(device);
        if (!s) throw std::logic_error("the machine asked about device " + std::to_string(device) + ", not one of ours");
        return *s;
    }

    // RW_ACTION_OPEN: open it, answer with its ports, take its gate.
    void open(device_slot &s, uint32_t device) {
        const uint8_t port[] = {s.owner->options.port};
        int err = 0;
        try {
            s.dev = verbs_device::open(s.name, s.owner->options.pairs);
        } catch (const verbs_error &e) {
            note("%s: %s", s.name.c_str(), e.what());
            err = e.err();
        }
        if (err) return machine_.handle_open_failed(device, err, now_ms());
        machine_.handle_opened(device, port, now_ms());
        line("device").num("t_ns", now_ns()).str("device", s.name).str("what", "open").emit();
        // The rail keeps its gate when the device comes back (same index).
        if (!s.end->gate.bound()) s.end->gate = rail_gate(machine_.gate(device, port[0]));
        s.owner->set_device(*s.end, s.dev);
    }

    // ---- wake-ups ----

    // Keys: the machine's device index, uevent_key or report_key.
    void on_ready(uint64_t key, uint32_t events) override {
        if (key == uevent_key) {
            if (!uevents_->drain()) return;
            line("uevent").num("t_ns", now_ns()).emit();
            return list_devices();
        }
        if (key == report_key) return on_completions();
        const uint32_t dev = uint32_t(key);
        if (!slot_of(dev).reading) return;
        if (events & EPOLLIN) drain(dev);  // first whatever is queued
        if (slot_of(dev).reading && (events & (EPOLLHUP | EPOLLERR))) {
            machine_.handle_hangup(dev, now_ms());
            carry_out();
        }
    }

    int timeout_ms() override {
        std::optional<uint64_t> due = machine_.poll_timeout();
        for (uint64_t own : {report_due_, next_rescan_})
            if (own) due = std::min(due.value_or(own), own);
        if (!due) return -1;
        const uint64_t now = now_ms();
        return int(std::min<uint64_t>(*due > now ? *due - now : 0, 60'000));
    }

    void on_timeout() override {
        const uint64_t now = now_ms();
        if (report_due_ && report_due_ <= now) report();
        if (next_rescan_ && next_rescan_ <= now) list_devices();
        const auto due = machine_.poll_timeout();
        if (due && *due <= now) {
            machine_.handle_timeout(now);
            carry_out();
        }
    }

    // Edge-triggered: everything queued, now. The budget only bounds one
    // call; the loop goes on until the fd is empty.
    void drain(uint32_t dev) {
        device_slot &s = slot_of(dev);
        for (;;) {
            ibv_context *ctx = s.dev->context();
            const rw_drain_report r = machine_.drain(
                dev,
                [ctx](uint32_t &code, uint64_t &element) -> int {
                    ibv_async_event ev{};
                    if (ibv_get_async_event(ctx, &ev) != 0) return errno;  // EAGAIN: empty
                    code = ev.event_type;
                    element = element_of(ev);
                    ibv_ack_async_event(&ev);  // before the machine (or a destroy) needs it
                    return 0;
                },
                now_ms());
            line("drain").num("t_ns", now_ns()).str("device", s.name).num("events", r.events).signed_num("end", r.end)
                .emit();
            notice_gates();
            carry_out();
            if (r.end != -1 || !s.reading) return;  // emptied, or stopped reading
        }
    }

    static uint64_t element_of(const ibv_async_event &ev) {
        switch (ev.event_type) {
        case IBV_EVENT_CQ_ERR: return uint64_t(uintptr_t(ev.element.cq));
        case IBV_EVENT_SRQ_ERR:
        case IBV_EVENT_SRQ_LIMIT_REACHED: return uint64_t(uintptr_t(ev.element.srq));
        case IBV_EVENT_WQ_FATAL: return uint64_t(uintptr_t(ev.element.wq));
        case IBV_EVENT_PORT_ACTIVE:
        case IBV_EVENT_PORT_ERR:
        case IBV_EVENT_LID_CHANGE:
        case IBV_EVENT_PKEY_CHANGE:
        case IBV_EVENT_SM_CHANGE:
        case IBV_EVENT_CLIENT_REREGISTER:
        case IBV_EVENT_GID_CHANGE: return uint64_t(ev.element.port_num);
        case IBV_EVENT_DEVICE_FATAL: return 0;
        default: return uint64_t(uintptr_t(ev.element.qp));  // the QP events
        }
    }

    // ---- transfer reports ----

    // A worker counted the first completion since the last report, or a
    // failure: a failure is reported now, successes with the next batch.
    void on_completions() {
        uint64_t n = 0;
        while (read(report_fd_, &n, sizeof n) == ssize_t(sizeof n)) {
        }
        bool failed = false;
        for (rail *r : rails_) failed |= r->tally.take_failed();
        for (rail *r : rails_) failed |= report_probe(*r);
        if (failed) return report();
        if (!report_due_) report_due_ = now_ms() + report_every_ms;
    }

    // Each rail's completions since the last report, to the rail of its
    // local end (the QPs that completed them are there), through its peer:
    // the far-end device (one peer a rail, so the breaker's min_peers is 1
    // here; evidence.hpp).
    void report() {
        report_due_ = 0;
        const uint64_t now = now_ms();
        for (size_t i = 0; i < rails_.size(); ++i) {
            rail *r = rails_[i];
            const device_slot *local = slot_of_end(&r->local);
            if (local->index == ~0u || !r->tally.dirty()) continue;
            const std::vector<rw_transfer_report> lines = report_lines(r->tally, i);
            try {
                machine_.report_transfers(local->index, r->options.port, lines, now);
            } catch (const railwatch::error &e) {
                note("rail %s: the report was refused: %s", r->name.c_str(), e.what());
            }
        }
        notice_gates();
        carry_out();
        // Completions counted while reporting wake the loop again.
    }

    // A probe's outcome the builder left (rails.cpp), to the machine at
    // once: whether there was one.
    bool report_probe(rail &r) {
        const auto ok = r.tally.take_probe();
        const device_slot *local = slot_of_end(&r.local);
        if (!ok || local->index == ~0u) return false;
        try {
            machine_.report_probe(local->index, r.options.port, *ok, now_ms());
        } catch (const railwatch::error &e) {
            note("rail %s: the probe's report was refused: %s", r.name.c_str(), e.what());
        }
        notice_gates();
        carry_out();
        return true;
    }

    const device_slot *slot_of_end(const rail_end *end) const {
        for (const device_slot &s : slots_)
            if (s.end == end) return &s;
        throw std::logic_error("a rail end without a slot");
    }

    // ---- the machine's actions ----

    // After every input: carry out the actions until there are none.
    void carry_out() {
        while (auto a = machine_.poll_action()) {
            act(*a);
            notice_gates();
        }
        while (!to_drain_.empty()) {
            const uint32_t dev = to_drain_.back();
            to_drain_.pop_back();
            if (slot_of(dev).reading) drain(dev);
        }
    }

    void act(const rw_action &a) {
        if (a.kind == RW_ACTION_NOTIFY) return notify(a.notification);
        if (a.kind == RW_ACTION_LOG) return log(a.log);
        device_slot &s = slot_of(a.device);
        const uint64_t now = now_ms();
        switch (a.kind) {
        case RW_ACTION_START_READING:
            watch(s.dev->async_fd(), a.device, true);
            s.reading = true;
            to_drain_.push_back(a.device);  // events may predate the add
            break;
        case RW_ACTION_STOP_READING:
            if (s.reading) unwatch(s.dev->async_fd());
            s.reading = false;
            break;
        case RW_ACTION_CLOSE: close_slot(s); break;
        case RW_ACTION_OPEN: open(s, a.device); break;
        case RW_ACTION_REOPEN: reopen(s, a.device); break;
        case RW_ACTION_QUERY_PORT: {
            ibv_port_attr attr{};
            const int rc = s.dev ? ibv_query_port(s.dev->context(), uint8_t(a.port), &attr) : ENODEV;
            machine_.handle_port_state(a.device, a.port, rc, attr.state, now);
            break;
        }
        case RW_ACTION_READ_LINK: {
            ibv_port_attr attr{};
            const int rc = s.dev ? ibv_query_port(s.dev->context(), uint8_t(a.port), &attr) : ENODEV;
            machine_.handle_link(a.device, a.port, rc, attr.active_speed, attr.active_width, 0, now);
            break;
        }
        case RW_ACTION_READ_ADDRESS: answer_address(s, a); break;
        case RW_ACTION_READ_COUNTERS: answer_counters(s, a); break;
        case RW_ACTION_SET_AVAILABLE: s.end->available = a.available; break;
        case RW_ACTION_RESEED: s.end->rate_mbps = a.rate_mbps; break;
        default: break;
        }
    }

    // The device is closed: out of the epoll set, its rail's QPs retired.
    // The context itself closes when the reaper has destroyed them.
    void close_slot(device_slot &s) {
        if (s.reading && s.dev) unwatch(s.dev->async_fd());
        s.reading = false;
        s.owner->set_device(*s.end, nullptr);
        s.dev.reset();
        line("device").num("t_ns", now_ns()).str("device", s.name).str("what", "close").emit();
    }

    // RW_ACTION_REOPEN (after DEVICE_FATAL or a hang-up): the same device.
    void reopen(device_slot &s, uint32_t dev) {
        int err = 0;
        try {
            s.dev = verbs_device::open(s.name, s.owner->options.pairs);
            s.owner->set_device(*s.end, s.dev);
        } catch (const verbs_error &e) {
            err = e.err();
        }
        machine_.handle_reopen(dev, err, now_ms());
    }

    void answer_address(device_slot &s, const rw_action &a) {
        std::vector<rw_gid> gids;
        std::string netdev;
        rw_port_address addr{};
        const int rc = s.dev ? read_address(s.dev->context(), uint8_t(a.port), gids, netdev, addr) : ENODEV;
        if (rc == 0)
            machine_.handle_address(a.device, a.port, addr, now_ms());
        else
            machine_.handle_address_error(a.device, a.port, rc, now_ms());
    }

    // The flap counters from sysfs (a closed device's are not read).
    void answer_counters(device_slot &s, const rw_action &a) {
        const flap_counters c = s.dev ? read_flap_counters(s.name, uint8_t(a.port)) : flap_counters{ENODEV};
        machine_.handle_counters(a.device, a.port, c.error, c.link_downed, c.carrier_changes, c.carrier_down, now_ms());
        line("counters").num("t_ns", now_ns()).str("device", s.name).signed_num("error", c.error)
            .signed_num("link_downed", counter(c.link_downed)).signed_num("carrier_changes", counter(c.carrier_changes))
            .signed_num("carrier_down", counter(c.carrier_down)).emit();
    }
    static int64_t counter(uint64_t v) { return v == RW_COUNTER_NONE ? -1 : int64_t(v); }

    void notify(const rw_notification &n) {
        const device_slot *s = find_slot(n.device);
        if (!s) return;
        if (n.kind == RW_HAPPENING_WORK_LOST) return lose_work(*s, n);
        const char *kind = nullptr;
        switch (n.kind) {
        case RW_HAPPENING_TRANSITION: kind = "transition"; break;
        case RW_HAPPENING_ADDRESS_CHANGED: kind = "address_changed"; break;
        case RW_HAPPENING_PEER_FAILING: kind = "peer_failing"; break;
        case RW_HAPPENING_HALF_OPEN: kind = "half_open"; break;
        case RW_HAPPENING_PROBE_FAILED: kind = "probe_failed"; break;
        case RW_HAPPENING_GID_INDEX: kind = "gid_index"; break;
        default: return;
        }
        line l(kind);
        l.num("t_ns", now_ns()).str("device", s->name).str("rail", s->owner->name).num("generation", n.generation);
        if (n.kind == RW_HAPPENING_TRANSITION) {
            l.str("from", railwatch::state_name(n.from_state)).str("to", railwatch::state_name(n.to_state));
            if (n.cause == RW_CAUSE_REASON) l.str("reason", railwatch::reason_name(n.cause_code));
            if (n.cause == RW_CAUSE_BY) l.str("by", railwatch::recovered_by_name(int32_t(n.cause_code)));
            if (n.cause == RW_CAUSE_BUMP) l.num("bump_event", n.cause_code);
            if (n.cause == RW_CAUSE_SILENT_FLAP) l.str("reason", "silent_flap");
        }
        // The engine's id of a peer: its rail's position (one peer a rail).
        if (n.kind == RW_HAPPENING_PEER_FAILING && n.peer < rails_.size()) l.str("peer", rails_[n.peer]->peer.device);
        if (n.kind == RW_HAPPENING_PROBE_FAILED) l.boolean("timed_out", n.timed_out);
        if (n.kind == RW_HAPPENING_GID_INDEX) l.num("gid_index", n.gid_index);
        l.emit();
    }

    // RW_HAPPENING_WORK_LOST, told first in its wake-up: the ledger fails
    // what was posted in the scope (workers.cpp, fail_lost) instead of
    // waiting for completions that will never come.
    void lose_work(const device_slot &s, const rw_notification &n) {
        line l("work_lost");
        l.num("t_ns", now_ns()).str("device", s.name).str("rail", s.owner->name);
        if (n.work_scope == RW_WORK_DEVICE) {
            if (s.dev) s.dev->lose();
            l.str("scope", "device").str("reason", railwatch::reason_name(n.cause_code));
        } else {
            bool ours = false;
            for (rail *r : rails_) ours |= r->lose(n.object_handle);
            l.str("scope", n.work_scope == RW_WORK_CQ ? "cq" : n.work_scope == RW_WORK_WQ ? "wq" : "qp")
                .num("event_code", n.event_code).boolean("ours", ours);
        }
        l.emit();
    }

    void log(const rw_log &l) {
        const device_slot *s = find_slot(l.device);
        const char *dev = s ? s->name.c_str() : "?";
        switch (l.kind) {
        case RW_LOG_READ_FAILED: note("%s: reading its events failed (%s): polling", dev, std::strerror(l.error)); break;
        case RW_LOG_QUERY_FAILED: note("%s/%u: port query failed (%s)", dev, l.port, std::strerror(l.error)); break;
        case RW_LOG_REMOVED: note("%s: left the host", dev); break;
        case RW_LOG_ATTACHED: note("%s: attached", dev); break;
        case RW_LOG_OPEN_FAILED:
            note("%s: would not open (%s), again at %llu ms", dev, std::strerror(l.error), (unsigned long long)l.until_ms);
            break;
        case RW_LOG_COUNTERS_UNAVAILABLE: note("%s/%u: no flap counters (%s)", dev, l.port, std::strerror(l.error)); break;
        case RW_LOG_SILENT_FLAP: note("%s/%u: a flap no event said (its counters rose)", dev, l.port); break;
        case RW_LOG_BREAKER_OPEN:
            line("breaker_open").num("t_ns", now_ns()).str("device", dev).num("probes_failed", l.code)
                .num("half_open_at_ms", l.until_ms).emit();
            break;
        default: break;
        }
    }

    railwatch::machine machine_;
    std::optional<railwatch::uevents> uevents_;
    int report_fd_ = -1;
    uint64_t report_due_ = 0, next_rescan_ = 0;  // ms; 0: none
    std::vector<device_slot *> slot_of_;         // by the machine's device index
    std::vector<uint32_t> to_drain_;
};

}  // namespace

std::unique_ptr<loop_base> make_railwatch_loop(std::vector<rail *> rails, std::function<void()> on_burst,
                                               const breaker_settings &breaker) {
    return std::make_unique<railwatch_loop>(std::move(rails), std::move(on_burst), breaker);
}

}  // namespace traffic
