// loop.hpp: what both event loops share. One thread waits on an
// edge-triggered epoll over every device's async fd (plus a signalfd),
// handles what woke it, and after every change of a gate word says so and
// wakes the rail's builder. railwatch_loop drives railwatch's machine;
// old_loop is the loop before the fix (one event per wake-up).
#pragma once

#include "rails.hpp"

#include <functional>
#include <memory>
#include <vector>

namespace traffic {

// One device the engine uses, and what the loop knows of it.
struct device_slot {
    std::string name;  // "rxe0"
    rail *owner = nullptr;
    rail_end *end = nullptr;
    std::shared_ptr<verbs_device> dev;  // null while closed
    uint32_t index = ~0u;               // the machine's device index, once known
    bool reading = false;               // its async fd is in the epoll set
    bool present = true;                // in the device list, as the loop last told
    uint64_t last_word = ~uint64_t{0};  // the gate word last noticed
};

// A rail's state at the end of a run, for the summary.
struct end_state {
    bool admits = false;
    int port_state = -1;  // ibv_port_state; -1 unreadable
};

class loop_base {
public:
    // `on_signal(SIGUSR1)` asks for a burst.
    loop_base(std::vector<rail *> rails, std::function<void()> on_burst);
    virtual ~loop_base();
    loop_base(const loop_base &) = delete;
    loop_base &operator=(const loop_base &) = delete;

    // Opens every device and readies the gates; throws when one is missing.
    virtual void attach_all() = 0;
    // Until SIGTERM or SIGINT, or `until_ns`.
    void run(uint64_t until_ns);
    // Each rail's gate and local port state, now.
    std::vector<end_state> end_states() const;
    std::shared_ptr<verbs_device> device(const std::string &name) const;
    virtual const char *engine_name() const = 0;

protected:
    static constexpr uint64_t signal_key = 1u << 20;
    static constexpr uint64_t uevent_key = signal_key + 1;
    static constexpr uint64_t report_key = signal_key + 2;

    // A device fd (key: its slot) or another fd woke the loop.
    virtual void on_ready(uint64_t key, uint32_t events) = 0;
    // Milliseconds to the next deadline of the loop's own (-1: none).
    virtual int timeout_ms() { return -1; }
    virtual void on_timeout() {}

    void watch(int fd, uint64_t key, bool edge);
    void unwatch(int fd);
    // Says which gate words changed since last time and pokes their rails.
    void notice_gates();

    std::vector<rail *> rails_;
    std::vector<device_slot> slots_;

private:
    bool on_signal();
    int epfd_ = -1, sigfd_ = -1;
    std::function<void()> on_burst_;
};

struct breaker_settings;

// The loop that drives railwatch's machine (railwatch_loop.cpp), and the
// loop before the fix or (`seed_fix`) the seed's fixed loop (old_loop.cpp).
std::unique_ptr<loop_base> make_railwatch_loop(std::vector<rail *> rails, std::function<void()> on_burst,
                                               const breaker_settings &breaker);
std::unique_ptr<loop_base> make_old_loop(std::vector<rail *> rails, std::function<void()> on_burst, bool seed_fix);

// The name of an ibv_port_state, as railwatch's JSON spells it.
const char *port_state_name(int state);

}  // namespace traffic
