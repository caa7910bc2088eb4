// Embedding 1 through the C++ wrapper, without a NIC: an engine's own
// edge-triggered epoll loop drives railwatch::machine over simulated
// devices it opens itself (railwatch::sim::open, a railwatch::sim_context
// in place of an ibv_context), follows the device list through the sim's
// uevent twin, answers port, link, address and counter reads from the
// contexts, and reports transfers. Also the wrapper's lifecycle, evidence,
// uevents and log_to.
//
// Prints `ok - NAME` / `not ok - NAME: why` per check, then a summary;
// exits 0 iff every check passed. Virtual time: every wait is bounded.

#include "railwatch.hpp"

#include "check.hpp"

#include <fcntl.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace rw = railwatch;

template <class A, class B>
static void check_eq(const A &got, const B &want, const std::string &name) {
    check(got == want, name, "got " + std::to_string(got) + ", want " + std::to_string(want));
}

// ---- the engine -------------------------------------------------------------------

constexpr uint64_t uevents_key = ~uint64_t{0};

class engine {
public:
    engine(const rw::sim &s, const rw::config &cfg) : sim_(s), m_(cfg), uevents_(s.uevents()) {
        epfd_ = epoll_create1(EPOLL_CLOEXEC);
        watch(uevents_.fd(), uevents_key);
        list();
    }
    ~engine() {
        ctx_.clear();
        if (epfd_ >= 0) close(epfd_);
    }
    engine(const engine &) = delete;
    engine &operator=(const engine &) = delete;

    rw::machine &machine() { return m_; }
    uint64_t now() const { return now_; }
    uint64_t drained() const { return drained_; }
    unsigned silent_flaps() const { return silent_flaps_; }

    // The loop up to virtual time `t`.
    void run_until(uint64_t t) {
        for (int i = 0; i < 100000; ++i) {
            service();
            const auto d = m_.poll_timeout();
            if (!d || *d > t) break;
            now_ = std::max(now_, *d);
            m_.handle_timeout(now_);
            carry_out();
        }
        now_ = std::max(now_, t);
        service();
    }

    bool admits(uint32_t dev, uint32_t port) { return m_.gate(dev, port).check().has_value(); }
    rw::word word(uint32_t dev, uint32_t port) { return m_.gate(dev, port).load(); }

private:
    void watch(int fd, uint64_t key) {
        epoll_event e{};
        e.events = EPOLLIN | EPOLLET;
        e.data.u64 = key;
        epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &e);
    }

    void list() {
        m_.handle_device_list(sim_.device_list(), now_);
        carry_out();
    }

    void service() {
        epoll_event evs[8];
        int n;
        while ((n = epoll_wait(epfd_, evs, 8, 0)) > 0) {
            for (int i = 0; i < n; ++i) {
                if (evs[i].data.u64 == uevents_key) {
                    if (uevents_.drain()) list();
                    continue;
                }
                const auto dev = static_cast<uint32_t>(evs[i].data.u64);
                if (evs[i].events & EPOLLIN) drain(dev);
            }
        }
    }

    void drain(uint32_t dev) {
        for (int round = 0; round < 64; ++round) {
            auto it = ctx_.find(dev);
            if (it == ctx_.end()) return;
            rw::sim_context &c = it->second;
            const rw_drain_report r =
                m_.drain(dev, [&c](uint32_t &code, uint64_t &element) { return c.next_event(code, element); }, now_);
            drained_ += r.events;
            carry_out();
            if (r.end != -1) return;
        }
    }

    void open(uint32_t dev) {
        rw::sim_context c;
        int32_t err = sim_.open(m_.device_name(dev).value_or(""), c);
        uint32_t nports = 0;
        if (err == 0) {
            const int flags = fcntl(c.fd(), F_GETFL);
            err = flags < 0 || fcntl(c.fd(), F_SETFL, flags | O_NONBLOCK) < 0 ? errno : c.query_device(nports);
        }
        if (err != 0) return m_.handle_open_failed(dev, err, now_);
        std::vector<uint8_t> ports;
        for (uint32_t p = 1; p <= nports; ++p) ports.push_back(static_cast<uint8_t>(p));
        ctx_[dev] = std::move(c);
        m_.handle_opened(dev, ports, now_);
    }

    void act(const rw_action &a) {
        auto it = ctx_.find(a.device);
        rw::sim_context *c = it == ctx_.end() ? nullptr : &it->second;
        switch (a.kind) {
        case RW_ACTION_OPEN: open(a.device); break;
        case RW_ACTION_START_READING:
            if (c) {
                watch(c->fd(), a.device);
                pending_.push_back(a.device);  // events may predate the add
            }
            break;
        case RW_ACTION_STOP_READING:
            if (c) epoll_ctl(epfd_, EPOLL_CTL_DEL, c->fd(), nullptr);
            break;
        case RW_ACTION_CLOSE: ctx_.erase(a.device); break;
        case RW_ACTION_QUERY_PORT:
        case RW_ACTION_READ_LINK: {
            rw_sim_port_attr attr{};
            const int32_t err = c ? c->query_port(a.port, attr) : ENODEV;
            if (a.kind == RW_ACTION_QUERY_PORT)
                m_.handle_port_state(a.device, a.port, err, attr.state, now_);
            else
                m_.handle_link(a.device, a.port, err, attr.active_speed, attr.active_width, 0, now_);
            break;
        }
        case RW_ACTION_READ_ADDRESS: {
            rw_port_address addr{};
            const int32_t err = c ? c->query_address(a.port, addr) : ENODEV;
            if (err == 0)
                m_.handle_address(a.device, a.port, addr, now_);
            else
                m_.handle_address_error(a.device, a.port, err, now_);
            break;
        }
        case RW_ACTION_READ_COUNTERS: {
            rw_sim_port_counters pc{};
            const int32_t err = c ? c->query_counters(a.port, pc) : ENODEV;
            m_.handle_counters(a.device, a.port, err, pc.link_downed, pc.carrier_changes, pc.carrier_down, now_);
            break;
        }
        case RW_ACTION_NOTIFY:
            if (a.notification.kind == RW_HAPPENING_TRANSITION && a.notification.cause == RW_CAUSE_SILENT_FLAP)
                ++silent_flaps_;
            break;
        default: break;
        }
    }

    void carry_out() {
        std::array<rw_action, 16> batch{};
        for (int i = 0; i < 100000; ++i) {
            const size_t n = m_.poll_actions(batch);
            for (size_t k = 0; k < n; ++k) act(batch[k]);
            if (n > 0) continue;
            if (pending_.empty()) return;
            const uint32_t dev = pending_.back();
            pending_.pop_back();
            drain(dev);
        }
    }

    const rw::sim &sim_;
    rw::machine m_;
    rw::uevents uevents_;
    std::map<uint32_t, rw::sim_context> ctx_;
    std::vector<uint32_t> pending_;
    int epfd_ = -1;
    uint64_t now_ = 0;
    uint64_t drained_ = 0;
    unsigned silent_flaps_ = 0;
};

static rw::config test_config() {
    rw::config c = rw::default_config();
    c.set("tick_ms", 100);
    c.set("audit_ms", 100);
    return c;
}

static void the_loop() {
    rw::sim s;
    const uint32_t d0 = s.add_device("mlx5_0", 2);
    const uint32_t d1 = s.add_device("mlx5_1", 1);
    s.set_gid(d0, 1, 3, std::array<uint8_t, 16>{0xfe, 0x80});
    s.set_flap_counters(d0, 2, 0);
    rw::config cfg = test_config();
    cfg.set("require_address", "any");
    s.set_gid(d0, 2, 0, std::array<uint8_t, 16>{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2});
    s.set_gid(d1, 1, 0, std::array<uint8_t, 16>{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3});
    engine e(s, cfg);

    e.run_until(10);
    check(e.admits(d0, 1) && e.admits(d0, 2) && e.admits(d1, 1), "loop: every rail admitted after the attach");
    check(e.machine().gid_index(d0, 1) == std::optional<uint32_t>(3), "loop: the GID index chosen is 3");
    check(e.machine().pending_actions() == 0, "loop: nothing left pending");
    check(s.counters(d0).open && s.counters(d1).open, "loop: both devices open");

    // A PORT_ACTIVE behind a burst: drained to EAGAIN.
    s.port_down(d0, 1);
    e.run_until(e.now() + 10);
    check(!e.admits(d0, 1), "loop: PORT_ERR refuses");
    const uint64_t before = e.drained();
    s.push_event(d0, rw::event_code::comm_est, 0x1000, 64);
    s.port_up(d0, 1);
    e.run_until(e.now() + 10);
    check(e.admits(d0, 1), "loop: the PORT_ACTIVE behind 64 COMM_EST admits");
    check_eq(e.drained() - before, uint64_t{65}, "loop: all 65 read");

    // A silent flap in the counters of mlx5_0/2, seen by the audit and
    // confirmed by a port read 250 ms later.
    const uint64_t gen = e.word(d0, 2).generation();
    s.set_flap_counters(d0, 2, 1);
    e.run_until(e.now() + 500);
    check_eq(e.silent_flaps(), 1u, "loop: the silent flap is a transition");
    check_eq(e.word(d0, 2).generation(), gen + 1, "loop: the silent flap moves the generation");

    // Transfers failing through two peers: the breaker pauses the rail.
    const std::vector<rw_transfer_report> lines{{1, 12, 10}, {2, 12, 10}};
    e.machine().report_transfers(d1, 1, lines, e.now());
    e.run_until(e.now() + 1);
    check_eq(e.word(d1, 1).reason(), uint32_t{RW_REASON_DATA_PATH}, "loop: the breaker's reason is data_path");
    check(std::string(rw::reason_name(e.word(d1, 1).reason())) == "data_path", "loop: reason_name says data_path");

    // Unplugged: the uevent twin wakes the loop; plugged: opened anew.
    s.unplug(d1);
    e.run_until(e.now() + 10);
    check_eq(e.word(d1, 1).state(), uint32_t{RW_RAIL_INERT}, "loop: the unplugged rail is inert");
    check(!s.counters(d1).open, "loop: the unplugged device is closed");
    s.plug(d1);
    e.run_until(e.now() + 10);
    check(e.admits(d1, 1), "loop: plugged back, admitted");

    for (uint32_t d : {d0, d1}) {
        const rw_sim_counters c = s.counters(d);
        check(c.read == c.acked && c.unacked == 0 && c.bad_acks == 0 && c.blocking_gets == 0,
              "loop: device " + std::to_string(d) + " acknowledged every event it read, none blocked");
    }
}

static void wrapper_calls() {
    rw::sim s;
    s.add_device("mlx5_0", 1);
    check(s.device_list() == std::vector<std::string>{"mlx5_0"}, "sim: device_list");
    rw::sim_context c;
    check_eq(s.open("mlx5_9", c), int32_t{ENODEV}, "sim: open of an unknown device is ENODEV");
    check(!c, "sim: a failed open leaves the context empty");
    check_eq(s.open("mlx5_0", c), int32_t{0}, "sim: open");
    rw::sim_context again;
    check_eq(s.open("mlx5_0", again), int32_t{EBUSY}, "sim: a second opener is EBUSY");
    uint32_t code = 0;
    uint64_t element = 0;
    check_eq(c.get_event(code, element), int32_t{EDEADLK}, "sim: an empty blocking fd is EDEADLK");
    fcntl(c.fd(), F_SETFL, fcntl(c.fd(), F_GETFL) | O_NONBLOCK);
    check_eq(c.get_event(code, element), int32_t{EAGAIN}, "sim: an empty non-blocking fd is EAGAIN");
    s.set_link(0, 1, 64, 2);
    rw_sim_port_attr attr{};
    check(c.query_port(1, attr) == 0 && attr.active_speed == 64, "sim: set_link read back");
    c = rw::sim_context();
    check(!s.counters(0).open, "sim: a context reset closes the device");

    rw::machine m;
    const std::vector<std::string> names{"mlx5_0", "mlx5_1"};
    m.handle_device_list(names, 0);
    check_eq(m.pending_actions(), size_t{2}, "machine: pending_actions counts the two OPENs");
    check(m.device_name(1) == "mlx5_1", "machine: device_name");
    try {
        m.handle_device_list(std::vector<std::string>(RW_MAX_DEVICES + 1, "x"), 0);
        check(false, "machine: a device list over RW_MAX_DEVICES throws");
    } catch (const rw::error &e) {
        check(e.status() == RW_ERR_RANGE, "machine: a device list over RW_MAX_DEVICES throws RW_ERR_RANGE");
    }

    // railwatch's own log lines, from a monitor over another sim.
    std::mutex mu;
    std::vector<std::string> heard;
    rw::log_to([&](uint32_t level, std::string_view, std::string_view message) {
        std::lock_guard<std::mutex> l(mu);
        if (level <= RW_LOG_LEVEL_WARN) heard.emplace_back(message);
    });
    {
        rw::sim s2;
        s2.add_device("mlx5_0", 1);
        rw::monitor mon = rw::monitor::start_sim(s2);
        s2.port_down(0, 1);
        bool got = false;
        for (int i = 0; i < 5000 && !got; ++i) {
            {
                std::lock_guard<std::mutex> l(mu);
                for (const std::string &h : heard) got = got || h.find("mlx5_0/1 down") != std::string::npos;
            }
            if (!got) std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
        check(got, "log_to: the monitor's warning reaches the function");
    }
    rw::log_to({});
    try {
        rw::uevents u = rw::uevents::open();
        check(u.fd() >= 0, "uevents: the kernel's socket has an fd");
    } catch (const rw::error &e) {
        check(e.status() == RW_ERR_IO, "uevents: refused by the kernel, as RW_ERR_IO");
    }
}

int main() {
    try {
        the_loop();
        wrapper_calls();
    } catch (const std::exception &e) {
        check(false, "no exception", e.what());
    }
    std::printf("# %d passed, %d failed\n", passed, failed);
    return failed == 0 && passed > 0 ? 0 : 1;
}
