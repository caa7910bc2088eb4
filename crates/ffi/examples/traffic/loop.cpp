// loop.cpp: see loop.hpp.
#include "loop.hpp"

#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <csignal>
#include <cstring>

namespace traffic {

const char *port_state_name(int state) {
    switch (state) {
    case IBV_PORT_NOP: return "nop";
    case IBV_PORT_DOWN: return "down";
    case IBV_PORT_INIT: return "init";
    case IBV_PORT_ARMED: return "armed";
    case IBV_PORT_ACTIVE: return "active";
    case IBV_PORT_ACTIVE_DEFER: return "active_defer";
    default: return "unknown";
    }
}

loop_base::loop_base(std::vector<rail *> rails, std::function<void()> on_burst)
    : rails_(std::move(rails)), on_burst_(std::move(on_burst)) {
    for (rail *r : rails_)
        for (rail_end *e : {&r->local, &r->peer}) {
            if (!e->is_local && r->remote()) continue;  // the responder's
            device_slot &s = slots_.emplace_back();
            s.name = e->device;
            s.owner = r;
            s.end = e;
        }
    epfd_ = epoll_create1(EPOLL_CLOEXEC);
    if (epfd_ < 0) throw verbs_error("epoll_create1", errno);
    // The signals are blocked in every thread (main does it first): they
    // arrive here, as readable data.
    sigset_t set;
    sigemptyset(&set);
    for (int s : {SIGTERM, SIGINT, SIGUSR1}) sigaddset(&set, s);
    sigfd_ = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sigfd_ < 0) throw verbs_error("signalfd", errno);
    watch(sigfd_, signal_key, false);
}

loop_base::~loop_base() {
    if (sigfd_ >= 0) close(sigfd_);
    if (epfd_ >= 0) close(epfd_);
}

void loop_base::watch(int fd, uint64_t key, bool edge) {
    epoll_event e{};
    e.events = EPOLLIN | (edge ? EPOLLET : 0u);
    e.data.u64 = key;
    if (epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &e) != 0) throw verbs_error("epoll_ctl(ADD)", errno);
}

void loop_base::unwatch(int fd) { epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr); }

void loop_base::run(uint64_t until_ns) {
    for (;;) {
        const uint64_t now = now_ns();
        if (now >= until_ns) return;
        int timeout = int(std::min<uint64_t>((until_ns - now) / 1'000'000 + 1, 60'000));
        const int own = timeout_ms();
        if (own >= 0) timeout = std::min(timeout, own);
        epoll_event evs[16];
        const int n = epoll_wait(epfd_, evs, 16, timeout);
        if (n < 0 && errno != EINTR) throw verbs_error("epoll_wait", errno);
        for (int i = 0; i < n; ++i) {
            if (evs[i].data.u64 == signal_key) {
                if (on_signal()) return;
            } else {
                on_ready(evs[i].data.u64, evs[i].events);
            }
        }
        on_timeout();
    }
}

// True when the loop is to stop.
bool loop_base::on_signal() {
    signalfd_siginfo si{};
    bool stop = false;
    while (read(sigfd_, &si, sizeof si) == ssize_t(sizeof si)) {
        if (si.ssi_signo == SIGUSR1) {
            if (on_burst_) on_burst_();
        } else {
            stop = true;
        }
    }
    return stop;
}

void loop_base::notice_gates() {
    const uint64_t now = now_ns();
    for (device_slot &s : slots_) {
        const railwatch::word w = s.end->gate.load();
        if (w.raw == s.last_word) continue;
        s.last_word = w.raw;
        line("gate").num("t_ns", now).str("rail", s.owner->name).str("device", s.name)
            .str("end", s.end->is_local ? "local" : "peer").boolean("admits", w.admits())
            .str("state", railwatch::state_name(w.state())).str("reason", railwatch::reason_name(w.reason()))
            .num("generation", w.generation()).emit();
        s.owner->poke();
    }
}

std::vector<end_state> loop_base::end_states() const {
    std::vector<end_state> out;
    for (rail *r : rails_) {
        end_state st;
        st.admits = r->admitted().has_value();
        for (const device_slot &s : slots_) {
            ibv_port_attr attr{};
            if (s.end == &r->local && s.dev && ibv_query_port(s.dev->context(), r->options.port, &attr) == 0) st.port_state = attr.state;
        }
        out.push_back(st);
    }
    return out;
}

std::shared_ptr<verbs_device> loop_base::device(const std::string &name) const {
    for (const device_slot &s : slots_)
        if (s.name == name) return s.dev;
    return nullptr;
}

}  // namespace traffic
