// railwatch_loop.cpp: the engine's own epoll loop driving railwatch's rail
// machine through the C API (embedding 1). The parts an engine copies:
//
//   attach_all  the kernel's device uevents into the epoll set
//               (rw_uevents_open), the device list to the machine
//               (rw_machine_handle_device_list), then its OPEN actions
//               answered (rw_machine_handle_opened) and the attach carried
//               out (start reading, query the port, read link and address);
//               each rail end gets its gate;
//   drain       a device's async fd woke the loop: rw_machine_drain reads
//               to EAGAIN, and each event is acknowledged before the
//               machine sees it, so a QP destroy never waits on one;
//   act         the machine's actions, answered with libibverbs;
//   uevents     a device left or came back: the device list again. rxe
//               says nothing on the async fd of a device being deleted and
//               its removal waits for our close, which the machine asks for
//               (RW_ACTION_CLOSE) as soon as the list lacks the device.
//
// What the engine does with a generation bump (a new set of QPs, then the
// old one destroyed) is in rails.cpp; this loop only notices the gate
// words changing and wakes the rail's builder.
#include "loop.hpp"

#include <sys/epoll.h>

#include <algorithm>
#include <cstring>

namespace traffic {

namespace {

// A failed C API call: an exception naming it and saying why.
void must(rw_status s, const char *call) {
    if (s != RW_OK) throw std::runtime_error(std::string(call) + ": " + rw_last_error());
}

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

class railwatch_loop final : public loop_base {
public:
    railwatch_loop(std::vector<rail *> rails, std::function<void()> on_burst)
        : loop_base(std::move(rails), std::move(on_burst)), machine_(settings()) {
        must(rw_uevents_open(&uevents_), "rw_uevents_open");
    }
    ~railwatch_loop() override { rw_uevents_free(uevents_); }

    const char *engine_name() const override { return "railwatch"; }

    // The machine learns the devices from the list and asks to open each;
    // all of ours must open now (their gates go to the workers).
    void attach_all() override {
        watch(rw_uevents_fd(uevents_), uevent_key, true);
        list_devices();
        for (device_slot &s : slots_)
            if (!s.dev) throw std::runtime_error(s.name + ": not opened (is it in the device list?)");
    }

private:
    static railwatch::config settings() {
        railwatch::config c = railwatch::default_config();
        c.tick_ms = 250;  // the recovery poll, while a rail is paused
        return c;
    }

    // The device list, as far as this engine's devices go (the machine
    // would ask to open any device it is told of).
    void list_devices() {
        std::vector<std::string> ours;
        for (const std::string &name : device_names())
            for (const device_slot &s : slots_)
                if (s.name == name) ours.push_back(name);
        std::vector<const char *> names;
        for (const std::string &n : ours) names.push_back(n.c_str());
        must(rw_machine_handle_device_list(machine_.get(), names.data(), names.size(), now_ms()),
             "rw_machine_handle_device_list");
        carry_out();
    }

    // The machine's device index is its own: the slot goes by name.
    // nullptr for an index the machine does not know (yet).
    device_slot *find_slot(uint32_t device) {
        if (device >= slot_of_.size()) slot_of_.resize(device + 1, nullptr);
        if (!slot_of_[device]) {
            char name[64] = {};
            if (rw_machine_device_name(machine_.get(), device, name, sizeof name, nullptr) != RW_OK) return nullptr;
            for (device_slot &s : slots_)
                if (s.name == name) slot_of_[device] = &s;
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
        const uint8_t port = s.owner->options.port;
        int err = 0;
        try {
            s.dev = verbs_device::open(s.name, s.owner->options.pairs);
        } catch (const verbs_error &e) {
            note("%s: %s", s.name.c_str(), e.what());
            err = e.err();
        }
        must(rw_machine_handle_opened(machine_.get(), device, &port, 1, err, now_ms()), "rw_machine_handle_opened");
        if (err) return;
        line("device").num("t_ns", now_ns()).str("device", s.name).str("what", "open").emit();
        // The rail keeps its gate when the device comes back (same index).
        if (!s.end->gate.bound()) s.end->gate = rail_gate(machine_.gate(device, port));
        s.owner->set_device(*s.end, s.dev);
    }

    // ---- wake-ups ----

    // Keys: the machine's device index, or uevent_key.
    void on_ready(uint64_t key, uint32_t events) override {
        if (key == uevent_key) {
            bool changed = false;
            must(rw_uevents_drain(uevents_, &changed), "rw_uevents_drain");
            if (changed) list_devices();
            return;
        }
        const uint32_t dev = uint32_t(key);
        if (!slot_of(dev).reading) return;
        if (events & EPOLLIN) drain(dev);  // first whatever is queued
        if (slot_of(dev).reading && (events & (EPOLLHUP | EPOLLERR))) {
            machine_.handle_hangup(dev, now_ms());
            carry_out();
        }
    }

    int timeout_ms() override {
        const auto due = machine_.poll_timeout();
        if (!due) return -1;
        const uint64_t now = now_ms();
        return int(std::min<uint64_t>(*due > now ? *due - now : 0, 60'000));
    }

    void on_timeout() override {
        const uint64_t now = now_ms();
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

    void notify(const rw_notification &n) {
        const device_slot *s = find_slot(n.device);
        if (!s || (n.kind != RW_HAPPENING_TRANSITION && n.kind != RW_HAPPENING_ADDRESS_CHANGED)) return;
        line l(n.kind == RW_HAPPENING_TRANSITION ? "transition" : "address_changed");
        l.num("t_ns", now_ns()).str("device", s->name).str("rail", s->owner->name).num("generation", n.generation);
        if (n.kind == RW_HAPPENING_TRANSITION) {
            l.str("from", railwatch::state_name(n.from_state)).str("to", railwatch::state_name(n.to_state));
            if (n.cause == RW_CAUSE_REASON) l.str("reason", railwatch::reason_name(n.cause_code));
            if (n.cause == RW_CAUSE_BY) l.str("by", railwatch::recovered_by_name(int32_t(n.cause_code)));
            if (n.cause == RW_CAUSE_BUMP) l.num("bump_event", n.cause_code);
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
        default: break;
        }
    }

    railwatch::machine machine_;
    rw_uevents *uevents_ = nullptr;
    std::vector<device_slot *> slot_of_;  // by the machine's device index
    std::vector<uint32_t> to_drain_;
};

}  // namespace

std::unique_ptr<loop_base> make_railwatch_loop(std::vector<rail *> rails, std::function<void()> on_burst) {
    return std::make_unique<railwatch_loop>(std::move(rails), std::move(on_burst));
}

}  // namespace traffic
