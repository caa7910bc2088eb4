// rails.cpp: see rails.hpp.
#include "rails.hpp"

#include <unistd.h>

#include <chrono>

namespace traffic {

// How long a worker may keep writes in flight on a set that was replaced
// (then they are abandoned): a rebuild, and a device that is leaving (the
// kernel's removal waits for our close).
static constexpr uint64_t rebuild_grace_ns = 200'000'000;
static constexpr uint64_t leaving_grace_ns = 20'000'000;
// A build that failed is tried again this often while the gates stay.
static constexpr auto retry_every = std::chrono::milliseconds(200);
// ...but at once, this many times, after ETIMEDOUT: the kernel resolved
// the peer's address while the RTR waited (rdma_resolve_ip gives up after
// 1 s when the neighbour was still being solicited, as after a pull with
// writes in flight), so the next try usually connects in milliseconds.
static constexpr int retries_at_once = 2;

// ---- the tally ----------------------------------------------------------------------

void completion_tally::count(uint32_t status) {
    by_status_[status < statuses ? status : statuses - 1].fetch_add(1, std::memory_order_relaxed);
    const bool failure = status != IBV_WC_SUCCESS;
    if (failure) failed_.store(true, std::memory_order_release);
    // The flags first, then the wake-up: the loop that wakes sees them.
    const bool first = !dirty_.exchange(true, std::memory_order_acq_rel);
    if ((first || failure) && wake_ >= 0) {
        const uint64_t one = 1;
        if (write(wake_, &one, sizeof one) < 0) {
            // EAGAIN: the counter is full, the loop is awake already.
        }
    }
}

void completion_tally::probed(bool ok) {
    probe_.store(ok ? 1 : 2, std::memory_order_release);
    const uint64_t one = 1;
    if (wake_ >= 0 && write(wake_, &one, sizeof one) < 0) {
        // EAGAIN: the counter is full, the loop is awake already.
    }
}

std::optional<bool> completion_tally::take_probe() {
    const int p = probe_.exchange(0, std::memory_order_acq_rel);
    if (p == 0) return std::nullopt;
    return p == 1;
}

completion_tally::counts completion_tally::take() {
    dirty_.store(false, std::memory_order_release);  // a count from now on wakes again
    counts since{};
    for (size_t s = 0; s < statuses; ++s) {
        const uint64_t now = by_status_[s].load(std::memory_order_relaxed);
        since[s] = now - taken_[s];
        taken_[s] = now;
    }
    return since;
}

// ---- the reaper ---------------------------------------------------------------------

reaper::reaper() : thread_([this] { loop(); }) {}

reaper::~reaper() {
    {
        std::lock_guard<std::mutex> l(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

void reaper::take(std::shared_ptr<qp_set> set, const std::string &rail) {
    {
        std::lock_guard<std::mutex> l(mu_);
        queue_.emplace_back(std::move(set), rail);
    }
    cv_.notify_all();
}

void reaper::loop() {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
        cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, nothing left
        auto [set, rail] = std::move(queue_.front());
        queue_.pop_front();
        l.unlock();
        // Workers let go of a retired set within its grace period.
        const uint64_t t0 = now_ns();
        while (set.use_count() > 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        const uint64_t t1 = now_ns();
        const uint64_t serial = set->serial();
        const size_t qps = set->pairs().size() * 2;
        set.reset();  // destroys the QPs (and a device no one else holds)
        const uint64_t t2 = now_ns();
        line("destroyed").str("rail", rail).num("set", serial).num("qps", qps).num("t_ns", t2)
            .fixed("waited_ms", double(t1 - t0) / 1e6).fixed("destroy_ms", double(t2 - t1) / 1e6).emit();
        l.lock();
    }
}

// ---- the rail -----------------------------------------------------------------------

rail::rail(std::string n, std::string l, std::string p, const set_options &o, reaper &r, std::string responder)
    : name(std::move(n)), options(o), reaper_(r), responder_(std::move(responder)) {
    local.device = std::move(l);
    peer.device = std::move(p);
    peer.is_local = false;
    if (remote()) {
        // Nothing here watches the far end: its gate always admits, as a
        // remote NIC's does for an engine that cannot see it.
        peer.own_word = rw_word_encode(RW_RAIL_ACTIVE, RW_REASON_NONE, IBV_PORT_ACTIVE, 1);
        peer.gate = rail_gate(&peer.own_word);
        peer.available = true;
        peer.rate_mbps = ~uint64_t{0};  // the local end's rate decides
    }
}

rail::~rail() {
    {
        std::lock_guard<std::mutex> l(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    if (builder_.joinable()) builder_.join();
    publish(nullptr, leaving_grace_ns);
}

void rail::start() { builder_ = std::thread([this] { build_loop(); }); }

void rail::set_device(rail_end &end, std::shared_ptr<verbs_device> dev) {
    const bool leaving = !dev;
    {
        std::lock_guard<std::mutex> l(mu_);
        (end.is_local ? dev_local_ : dev_peer_) = std::move(dev);
        ++pokes_;
    }
    if (leaving) publish(nullptr, leaving_grace_ns);
    cv_.notify_all();
}

std::shared_ptr<verbs_device> rail::device(const rail_end &end) const {
    std::lock_guard<std::mutex> l(mu_);
    return end.is_local ? dev_local_ : dev_peer_;
}

void rail::poke() {
    {
        std::lock_guard<std::mutex> l(mu_);
        ++pokes_;
    }
    cv_.notify_all();
}

std::optional<generations> rail::admitted() const {
    auto gl = local.gate.check();
    auto gp = peer.gate.check();
    if (!gl || !gp) return std::nullopt;
    return generations{*gl, *gp};
}

std::shared_ptr<qp_set> rail::current() const {
    std::lock_guard<std::mutex> l(mu_);
    return current_;
}

// The builder: whenever poked (or every retry_every), if both gates admit
// under generations the current set was not built for, build a new one.
void rail::build_loop() {
    std::unique_lock<std::mutex> l(mu_);
    uint64_t seen = 0;
    int timeouts = 0;  // builds in a row that failed with ETIMEDOUT
    while (!stop_) {
        if (timeouts == 0 || timeouts > retries_at_once)
            cv_.wait_for(l, retry_every, [&] { return stop_ || pokes_ != seen; });
        seen = pokes_;
        if (stop_) return;
        const auto want = admitted();
        auto dl = dev_local_, dp = dev_peer_;
        const bool ends = dl && (dp || remote());
        const auto peer_gen = peer.gate.check();
        if (!want && peer_gen && ends && local.gate.load().reason() == RW_REASON_HALF_OPEN) {
            // The breaker is half-open on our end: the workers stay off it;
            // one write on QPs of its own tests the path.
            l.unlock();
            send_probe(*peer_gen, std::move(dl), std::move(dp));
            l.lock();
            continue;
        }
        if (!want || (current_ && current_->gens() == *want) || !ends) {
            timeouts = 0;
            continue;
        }
        l.unlock();
        const int err = rebuild(*want, std::move(dl), std::move(dp));
        l.lock();
        timeouts = err == ETIMEDOUT ? timeouts + 1 : 0;
    }
}

// A set to the far end: opened here, or served by the responder.
std::unique_ptr<qp_set> rail::make_set(const set_options &o, generations want, uint64_t serial,
                                       std::shared_ptr<verbs_device> l, std::shared_ptr<verbs_device> p) {
    if (remote()) return qp_set::build_remote(std::move(l), responder_, peer.device, o, want, serial);
    return qp_set::build(std::move(l), std::move(p), o, want, serial);
}

// 0, or the errno of the build that failed.
int rail::rebuild(generations want, std::shared_ptr<verbs_device> l, std::shared_ptr<verbs_device> p) {
    const uint64_t t0 = now_ns();
    const uint64_t serial = ++serial_;
    std::shared_ptr<qp_set> fresh;
    try {
        fresh = make_set(options, want, serial, l, p);
    } catch (const verbs_error &e) {
        line("build_failed").str("rail", name).num("set", serial).num("t_ns", now_ns()).str("error", e.what()).emit();
        return e.err();  // tried again when poked, or after retry_every
    }
    const uint64_t t1 = now_ns();
    line("set").str("rail", name).num("set", serial).num("t_ns", t1).num("generation_local", want.local)
        .num("generation_peer", want.peer).num("gid_index_local", fresh->gid_index_local())
        .num("gid_index_peer", fresh->gid_index_peer()).num("qp_pairs", fresh->pairs().size())
        .fixed("build_ms", double(t1 - t0) / 1e6).fixed("path_ms", fresh->path_to_peer().waited_ms)
        .str("path", fresh->path_to_peer().state).num("path_nudges", fresh->path_to_peer().nudges)
        .fixed("peer_path_ms", fresh->path_to_local().waited_ms).str("peer_path", fresh->path_to_local().state)
        .emit();
    // A device that left (or came back) while we built: the set is stale.
    if (device(local) != l || device(peer) != p) {
        fresh->retire(0);
        reaper_.take(std::move(fresh), name);
        return 0;
    }
    publish(std::move(fresh), rebuild_grace_ns);
    return 0;
}

// How long the probe's write may take: longer than the QPs' own retries
// (4.096 us * 2^timeout, retry_cnt + 1 times: about 0.5 s at the defaults).
static constexpr uint64_t probe_wait_ns = 5'000'000'000;

// One signaled RDMA write on the set's first QP; whether it completed
// with success within probe_wait_ns.
static bool write_once(const qp_set &set) {
    ibv_sge sge{};
    sge.addr = set.local().slot_addr(0);
    sge.length = uint32_t(write_bytes);
    sge.lkey = set.local().lkey();
    ibv_send_wr wr{}, *bad = nullptr;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = set.target_addr(0);
    wr.wr.rdma.rkey = set.target_rkey();
    const qp_set::pair &p = set.pairs().at(0);
    if (ibv_post_send(p.qp, &wr, &bad) != 0) return false;
    const uint64_t until = now_ns() + probe_wait_ns;
    ibv_wc wc{};
    while (now_ns() < until) {
        const int n = ibv_poll_cq(p.cq, 1, &wc);
        if (n < 0) return false;
        if (n == 1) return wc.status == IBV_WC_SUCCESS;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return false;  // never completed: the machine's probe timeout would say the same, later
}

// The half-open breaker's probe: taken from the gate (one at a time, of
// every thread that asks), one write on a QP pair of its own built under
// the probe's generation, its outcome to the loop (which reports it to the
// machine: success closes the breaker, failure re-opens it).
void rail::send_probe(uint64_t peer_generation, std::shared_ptr<verbs_device> l, std::shared_ptr<verbs_device> p) {
    const auto gen = local.gate.probe();
    if (!gen) return;  // no longer half-open, or a probe is out
    const uint64_t t0 = now_ns();
    bool ok = false;
    std::string error;
    set_options one = options;
    one.pairs = 1;
    try {
        std::shared_ptr<qp_set> set = make_set(one, generations{*gen, peer_generation}, ++serial_, l, p);
        ok = write_once(*set);
        set->retire(0);
        reaper_.take(std::move(set), name);
    } catch (const verbs_error &e) {
        error = e.what();
    }
    line probe("probe");
    probe.str("rail", name).num("t_ns", now_ns()).boolean("ok", ok).fixed("probe_ms", double(now_ns() - t0) / 1e6);
    if (!error.empty()) probe.str("error", error);
    probe.emit();
    tally.probed(ok);
}

bool rail::lose(uint64_t handle) {
    bool ours = false;
    std::lock_guard<std::mutex> l(mu_);
    for (const std::weak_ptr<qp_set> &w : published_)
        if (std::shared_ptr<qp_set> set = w.lock()) ours |= set->lose(handle);
    return ours;
}

// Makes `fresh` current (nullptr: none) and hands the old set to the reaper.
void rail::publish(std::shared_ptr<qp_set> fresh, uint64_t grace_ns) {
    std::shared_ptr<qp_set> old;
    {
        std::lock_guard<std::mutex> l(mu_);
        std::erase_if(published_, [](const std::weak_ptr<qp_set> &w) { return w.expired(); });
        if (fresh) published_.push_back(fresh);
        old = std::exchange(current_, std::move(fresh));
        if (old) old->retire(grace_ns);
        version_.fetch_add(1, std::memory_order_release);
    }
    if (old) reaper_.take(std::move(old), name);
}

}  // namespace traffic
