// old_loop.cpp: the loops railwatch is compared with, without its machine.
//
// --one-event-per-wakeup: the loop before the fix.
// As the seed describes the old engine: each device's async fd in an
// edge-triggered epoll set, and on every wake-up exactly one
// ibv_get_async_event; PORT_ERR pauses the rail, PORT_ACTIVE resumes it
// (a new generation), nothing else is acted on, and there is no recovery
// poll. Events queued behind the one read wait for the next wake-up, which
// only a new event brings: a burst queued ahead of a PORT_ACTIVE strands
// the rail while its port reads ACTIVE. The workers, rails and records
// are the same as railwatch's; only the gate words are this loop's own.
//
// --seed-fix: the fix railwatch descends from, as the seed's fixed engine
// has it: every wake-up reads to EAGAIN, and a 1 Hz poll queries the port
// of each paused rail and resumes it when ACTIVE. No breaker, no carrier,
// no failing of work in flight: the comparison for what railwatch added.
#include "loop.hpp"

#include <algorithm>

namespace traffic {

namespace {

// The seed's fixed engine polls paused rails this often.
constexpr uint64_t seed_poll_ms = 1000;

class old_loop final : public loop_base {
public:
    old_loop(std::vector<rail *> rails, std::function<void()> on_burst, bool seed_fix)
        : loop_base(std::move(rails), std::move(on_burst)), seed_fix_(seed_fix) {}

    const char *engine_name() const override { return seed_fix_ ? "seed_fix" : "one_event_per_wakeup"; }

    void attach_all() override {
        for (size_t i = 0; i < slots_.size(); ++i) {
            device_slot &s = slots_[i];
            s.dev = verbs_device::open(s.name, s.owner->options.pairs);
            s.owner->set_device(*s.end, s.dev);
            ibv_port_attr attr{};
            const int rc = ibv_query_port(s.dev->context(), s.owner->options.port, &attr);
            const bool up = rc == 0 && attr.state == IBV_PORT_ACTIVE;
            s.end->gate = rail_gate(&s.end->own_word);
            store(s, up, up ? RW_REASON_NONE : RW_REASON_PORT_NOT_ACTIVE, rc == 0 ? attr.state : RW_WORD_PORT_NONE, 1);
            s.end->rate_mbps = 1;  // no selector: every rail weighs the same
            s.end->available = true;
            watch(s.dev->async_fd(), i, true);
            s.reading = true;
        }
        notice_gates();
    }

private:
    void store(device_slot &s, bool active, uint32_t reason, uint32_t port_state, uint64_t generation) {
        const uint64_t w = rw_word_encode(active ? RW_RAIL_ACTIVE : RW_RAIL_PAUSED, reason, port_state, generation);
        std::atomic_ref<uint64_t>(s.end->own_word).store(w, std::memory_order_release);
    }

    // One wake-up, one event: the defect under test; or, the seed's fix,
    // every event queued.
    void on_ready(uint64_t key, uint32_t) override {
        if (key >= slots_.size()) return;
        device_slot &s = slots_[key];
        while (read_one(s) && seed_fix_) {
        }
        notice_gates();
    }

    // Whether an event was read.
    bool read_one(device_slot &s) {
        ibv_async_event ev{};
        if (ibv_get_async_event(s.dev->context(), &ev) != 0) return false;  // EAGAIN: empty
        const uint32_t code = ev.event_type;
        ibv_ack_async_event(&ev);
        line("read").num("t_ns", now_ns()).str("device", s.name).num("event", code).emit();
        const railwatch::word w = s.end->gate.load();
        if (code == IBV_EVENT_PORT_ERR && w.admits()) {
            store(s, false, RW_REASON_PORT_ERR, IBV_PORT_DOWN, w.generation());
        } else if (code == IBV_EVENT_PORT_ACTIVE && !w.admits()) {
            store(s, true, RW_REASON_NONE, IBV_PORT_ACTIVE, w.generation() + 1);
        }
        return true;
    }

    // The seed's 1 Hz poll, while a rail is paused.
    int timeout_ms() override {
        if (!seed_fix_) return -1;
        const bool paused = std::any_of(slots_.begin(), slots_.end(), [](const device_slot &s) {
            return !s.end->gate.load().admits();
        });
        if (!paused) return -1;
        const uint64_t now = now_ms();
        if (!next_poll_ms_) next_poll_ms_ = now + seed_poll_ms;
        return int(next_poll_ms_ > now ? next_poll_ms_ - now : 0);
    }

    void on_timeout() override {
        if (!next_poll_ms_ || now_ms() < next_poll_ms_) return;
        next_poll_ms_ = 0;
        for (device_slot &s : slots_) {
            const railwatch::word w = s.end->gate.load();
            ibv_port_attr attr{};
            if (w.admits() || ibv_query_port(s.dev->context(), s.owner->options.port, &attr) != 0) continue;
            line("poll").num("t_ns", now_ns()).str("device", s.name).str("port_state", port_state_name(attr.state))
                .emit();
            if (attr.state == IBV_PORT_ACTIVE) store(s, true, RW_REASON_NONE, IBV_PORT_ACTIVE, w.generation() + 1);
        }
        notice_gates();
    }

    const bool seed_fix_;
    uint64_t next_poll_ms_ = 0;  // 0: not armed
};

}  // namespace

std::unique_ptr<loop_base> make_old_loop(std::vector<rail *> rails, std::function<void()> on_burst, bool seed_fix) {
    return std::make_unique<old_loop>(std::move(rails), std::move(on_burst), seed_fix);
}

}  // namespace traffic
