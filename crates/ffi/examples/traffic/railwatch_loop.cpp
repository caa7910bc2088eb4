// railwatch_loop.cpp: the engine's own epoll loop driving railwatch's rail
// machine through the C API (embedding 1). The parts an engine copies:
//
//   attach_all  open each device, rw_machine_add_device, carry out the
//               attach (start reading, query the port, read link and
//               address), hand each rail end its gate;
//   drain       a device's async fd woke the loop: rw_machine_drain reads
//               to EAGAIN, and each event is acknowledged before the
//               machine sees it, so a QP destroy never waits on one;
//   act         the machine's actions, answered with libibverbs;
//   rescan      the device list after a uevent: a device that left goes to
//               rw_machine_handle_removed (the machine asks to close it),
//               one that came back to rw_machine_add_device.
//
// What the engine does with a generation bump (a new set of QPs, then the
// old one destroyed) is in rails.cpp; this loop only notices the gate
// words changing and wakes the rail's builder.
#include "device_watch.hpp"
#include "loop.hpp"

#include <sys/epoll.h>

#include <algorithm>
#include <cstring>

namespace traffic {

namespace {

// A device that appeared but could not be opened yet is tried again.
constexpr uint64_t reopen_retry_ms = 100;

class railwatch_loop final : public loop_base {
public:
    railwatch_loop(std::vector<rail *> rails, std::function<void()> on_burst)
        : loop_base(std::move(rails), std::move(on_burst)), machine_(settings()) {}

    const char *engine_name() const override { return "railwatch"; }

    void attach_all() override {
        watch(uevents_.fd(), uevent_key, false);
        for (size_t i = 0; i < slots_.size(); ++i) {
            device_slot &s = slots_[i];
            open_slot(s);
            const uint8_t port = s.owner->options.port;
            if (machine_.add_device(s.name, std::span(&port, 1), now_ms()) != i)
                throw std::logic_error("the machine numbered the devices differently");
            s.end->gate = rail_gate(machine_.gate(uint32_t(i), port));
            carry_out();
        }
    }

private:
    static railwatch::config settings() {
        railwatch::config c = railwatch::default_config();
        c.tick_ms = 250;  // the recovery poll, while a rail is paused
        return c;
    }

    void open_slot(device_slot &s) {
        s.dev = verbs_device::open(s.name, s.owner->options.pairs);
        s.owner->set_device(*s.end, s.dev);
    }

    // ---- wake-ups ----

    void on_ready(uint64_t key, uint32_t events) override {
        if (key == uevent_key) {
            if (uevents_.read_changed()) rescan();
            return;
        }
        const uint32_t dev = uint32_t(key);
        if (dev >= slots_.size() || !slots_[dev].reading) return;
        if (events & EPOLLIN) drain(dev);  // first whatever is queued
        if (slots_[dev].reading && (events & (EPOLLHUP | EPOLLERR))) {
            machine_.handle_hangup(dev, now_ms());
            carry_out();
        }
    }

    int timeout_ms() override {
        uint64_t due = machine_.poll_timeout().value_or(RW_NO_DEADLINE);
        if (retry_at_ms_) due = std::min(due, retry_at_ms_);
        if (due == RW_NO_DEADLINE) return -1;
        const uint64_t now = now_ms();
        return int(std::min<uint64_t>(due > now ? due - now : 0, 60'000));
    }

    void on_timeout() override {
        const uint64_t now = now_ms();
        if (retry_at_ms_ && retry_at_ms_ <= now) rescan();
        const auto due = machine_.poll_timeout();
        if (due && *due <= now) {
            machine_.handle_timeout(now);
            carry_out();
        }
    }

    // Edge-triggered: everything queued, now. The budget only bounds one
    // call; the loop goes on until the fd is empty.
    void drain(uint32_t dev) {
        for (;;) {
            ibv_context *ctx = slots_[dev].dev->context();
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
            line("drain").num("t_ns", now_ns()).str("device", slots_[dev].name).num("events", r.events)
                .signed_num("end", r.end).emit();
            notice_gates();
            carry_out();
            if (r.end != -1 || !slots_[dev].reading) return;  // emptied, or stopped reading
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
            if (slots_[dev].reading) drain(dev);
        }
    }

    void act(const rw_action &a) {
        device_slot &s = slots_.at(a.device);
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
        case RW_ACTION_SET_AVAILABLE: s.end->available = a.available; break;
        case RW_ACTION_RESEED: s.end->rate_mbps = a.rate_mbps; break;
        case RW_ACTION_NOTIFY: notify(a.notification); break;
        case RW_ACTION_LOG: log(a.log); break;
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

    void reopen(device_slot &s, uint32_t dev) {
        int err = 0;
        try {
            open_slot(s);
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

    void notify(const rw_notification &n) {
        if (n.kind != RW_HAPPENING_TRANSITION && n.kind != RW_HAPPENING_ADDRESS_CHANGED) return;
        const device_slot &s = slots_.at(n.device);
        line l(n.kind == RW_HAPPENING_TRANSITION ? "transition" : "address_changed");
        l.num("t_ns", now_ns()).str("device", s.name).str("rail", s.owner->name).num("generation", n.generation);
        if (n.kind == RW_HAPPENING_TRANSITION) {
            l.str("from", railwatch::state_name(n.from_state)).str("to", railwatch::state_name(n.to_state));
            if (n.cause == RW_CAUSE_REASON) l.str("reason", railwatch::reason_name(n.cause_code));
            if (n.cause == RW_CAUSE_BY) l.str("by", railwatch::recovered_by_name(int32_t(n.cause_code)));
            if (n.cause == RW_CAUSE_BUMP) l.num("bump_event", n.cause_code);
        }
        l.emit();
    }

    void log(const rw_log &l) {
        if (l.device >= slots_.size()) return;
        const device_slot &s = slots_[l.device];
        switch (l.kind) {
        case RW_LOG_READ_FAILED: note("%s: reading its events failed (%s): polling", s.name.c_str(), std::strerror(l.error)); break;
        case RW_LOG_QUERY_FAILED: note("%s/%u: port query failed (%s)", s.name.c_str(), l.port, std::strerror(l.error)); break;
        case RW_LOG_REMOVED: note("%s: left the host", s.name.c_str()); break;
        case RW_LOG_ATTACHED: note("%s: attached", s.name.c_str()); break;
        default: break;
        }
    }

    // ---- devices that leave and come back ----

    void rescan() {
        retry_at_ms_ = 0;
        const std::vector<std::string> names = device_watch::list();
        for (size_t i = 0; i < slots_.size(); ++i) {
            device_slot &s = slots_[i];
            const bool listed = std::find(names.begin(), names.end(), s.name) != names.end();
            if (!listed && s.present) {
                s.present = false;
                line("device").num("t_ns", now_ns()).str("device", s.name).str("what", "removed").emit();
                machine_.handle_removed(uint32_t(i), now_ms());
                carry_out();
            } else if (listed && !s.present) {
                add_again(s, uint32_t(i));
            }
        }
    }

    // A device of a name we use appeared (a new device): open and attach it.
    void add_again(device_slot &s, uint32_t index) {
        try {
            open_slot(s);
        } catch (const verbs_error &e) {
            note("%s: listed but not openable yet (%s): again in %llu ms", s.name.c_str(), e.what(),
                 (unsigned long long)reopen_retry_ms);
            retry_at_ms_ = now_ms() + reopen_retry_ms;
            return;
        }
        s.present = true;
        line("device").num("t_ns", now_ns()).str("device", s.name).str("what", "added").emit();
        const uint8_t port = s.owner->options.port;
        if (machine_.add_device(s.name, std::span(&port, 1), now_ms()) != index)
            throw std::logic_error("a device came back under another index");
        carry_out();
    }

    railwatch::machine machine_;
    device_watch uevents_;
    std::vector<uint32_t> to_drain_;
    uint64_t retry_at_ms_ = 0;
};

}  // namespace

std::unique_ptr<loop_base> make_railwatch_loop(std::vector<rail *> rails, std::function<void()> on_burst) {
    return std::make_unique<railwatch_loop>(std::move(rails), std::move(on_burst));
}

}  // namespace traffic
