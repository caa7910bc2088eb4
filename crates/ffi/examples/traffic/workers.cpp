// workers.cpp: see workers.hpp.
#include "workers.hpp"

#include <chrono>

namespace traffic {

// How long stop() waits for writes in flight.
static constexpr uint64_t wind_down_ns = 300'000'000;
// A worker with nothing to poll or post sleeps this long (a busy loop would
// take the vCPUs the kernel's Soft-RoCE work runs on).
static constexpr auto idle_pause = std::chrono::microseconds(50);

workers::workers(std::vector<rail *> rails, size_t count, size_t max_records, uint64_t rate)
    : rails_(std::move(rails)), max_records_(max_records), interval_ns_(rate ? count * 1'000'000'000 / rate : 0) {
    if (rails_.size() > max_rails) throw std::invalid_argument("at most " + std::to_string(max_rails) + " rails");
    for (size_t i = 0; i < count; ++i) {
        auto s = std::make_unique<state>();
        s->id = i;
        s->rng = 0x9e3779b97f4a7c15ull * (i + 1);
        state_.push_back(std::move(s));
    }
}

workers::~workers() { stop(); }

void workers::start() {
    for (auto &s : state_) threads_.emplace_back([this, st = s.get()] { run(*st); });
}

void workers::stop() {
    stopping_ = true;
    for (auto &t : threads_)
        if (t.joinable()) t.join();
}

void workers::run(state &s) {
    s.current.resize(rails_.size());
    s.versions.assign(rails_.size(), ~uint64_t{0});
    while (!stopping_.load(std::memory_order_relaxed)) {
        refresh(s);
        bool busy = false;
        for (held &h : s.current)
            if (h.set) busy |= poll(s, h);
        for (held &h : s.leaving) busy |= poll(s, h);
        let_go(s, false);
        busy |= post(s);
        if (!busy) std::this_thread::sleep_for(idle_pause);
    }
    // Wind down: what is in flight completes (bounded), then let go of all.
    const uint64_t now = now_ns();
    for (held &h : s.current)
        if (h.set) {
            h.left_ns = now;
            s.leaving.push_back(std::move(h));
        }
    s.current.clear();
    while (!s.leaving.empty() && now_ns() - now < wind_down_ns) {
        for (held &h : s.leaving) poll(s, h);
        let_go(s, false);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    let_go(s, true);
}

// Picks up a rail's new set when its version moved; the old one leaves.
void workers::refresh(state &s) {
    for (size_t r = 0; r < rails_.size(); ++r) {
        const uint64_t v = rails_[r]->version();
        if (v == s.versions[r]) continue;
        s.versions[r] = v;
        held &h = s.current[r];
        if (h.set) {
            h.left_ns = now_ns();
            s.leaving.push_back(std::move(h));
        }
        h = held{};
        h.rail = r;
        h.set = rails_[r]->current();
        if (h.set) {
            const size_t mine = (h.set->pairs().size() + state_.size() - 1 - s.id) / state_.size();
            h.in_flight.assign(mine, 0);
            h.posted.assign(mine, {});
            h.failed.assign(mine, false);
        }
    }
}

// Reaps completions of this worker's QPs of `h`, and fails at once what
// was posted where railwatch said no completion will come; true if either
// happened.
bool workers::poll(state &s, held &h) {
    bool any = false;
    ibv_wc wc[16];
    for (size_t k = 0; k < h.in_flight.size(); ++k) {
        if (h.in_flight[k] == 0) continue;
        const size_t pair = s.id + k * state_.size();
        if (h.set->lost(pair)) {
            fail_lost(s, h, k, now_ns());
            any = true;
            continue;
        }
        const auto &p = h.set->pairs()[pair];
        const int n = ibv_poll_cq(p.cq, 16, wc);
        if (n <= 0) continue;
        const uint64_t now = now_ns();
        for (int i = 0; i < n; ++i) {
            auto *rec = reinterpret_cast<record *>(uintptr_t(wc[i].wr_id));
            rec->status = uint8_t(wc[i].status);
            rec->done_ns = now;
            rails_[h.rail]->tally.count(wc[i].status);
            std::erase(h.posted[k], rec);  // the oldest, for an RC send queue
            --h.in_flight[k];
            // A failed write puts its QP in the error state: the rest of it
            // flushes, and nothing more is posted there until the rebuild.
            if (wc[i].status != IBV_WC_SUCCESS) h.failed[k] = true;
        }
        any = true;
    }
    return any;
}

// The ledger's answer to WORK_LOST: every write in flight on QP pair `k`
// fails now, to its caller, instead of waiting for completions that the
// kernel will never deliver. The pair is not used again (its set is
// rebuilt under the next generation). Not tallied: the machine said it.
void workers::fail_lost(state &s, held &h, size_t k, uint64_t now) {
    for (record *rec : h.posted[k]) {
        rec->status = work_lost;
        rec->done_ns = now;
    }
    s.counts.lost += h.posted[k].size();
    h.posted[k].clear();
    h.in_flight[k] = 0;
    h.failed[k] = true;
}

// Lets go of sets that left: when their writes completed, or after their
// grace period, failing what is still in flight as `abandoned` (its caller
// is answered). At the end, what the wind-down did not see complete is
// left pending: the summary counts it as hung.
void workers::let_go(state &s, bool stopping) {
    const uint64_t now = now_ns();
    std::erase_if(s.leaving, [&](held &h) {
        uint64_t in_flight = 0;
        for (uint32_t n : h.in_flight) in_flight += n;
        if (in_flight == 0) return true;
        if (!stopping && now - h.left_ns < h.set->grace_ns()) return false;
        s.counts.abandoned += in_flight;
        if (!stopping)
            for (std::vector<record *> &posted : h.posted)
                for (record *rec : posted) {
                    rec->status = abandoned;
                    rec->done_ns = now;
                }
        return true;
    });
}

// The selector's choice: a rail drawn by bandwidth among those it was told
// are available; rails.size() when none is.
size_t workers::pick(state &s) {
    uint64_t total = 0;
    std::array<uint64_t, max_rails> weight{};
    for (size_t r = 0; r < rails_.size(); ++r) {
        const rail &R = *rails_[r];
        if (R.local.available && R.peer.available) weight[r] = std::min(R.local.rate_mbps.load(), R.peer.rate_mbps.load());
        total += weight[r];
    }
    if (total == 0) return rails_.size();
    s.rng ^= s.rng << 13;
    s.rng ^= s.rng >> 7;
    s.rng ^= s.rng << 17;
    uint64_t x = s.rng % total;
    for (size_t r = 0; r < rails_.size(); ++r) {
        if (x < weight[r]) return r;
        x -= weight[r];
    }
    return rails_.size() - 1;
}

// One write on the picked rail, or on another available one if its gate
// refuses or its QPs are full; true if one was posted.
bool workers::post(state &s) {
    const uint64_t now = now_ns();
    if (now < s.next_post_ns) return false;  // paced
    const size_t first = pick(s);
    if (first == rails_.size()) return false;
    bool posted = post_on(s, first, now);
    for (size_t r = 0; r < rails_.size() && !posted; ++r) {
        const rail &R = *rails_[r];
        if (r != first && R.local.available && R.peer.available) posted = post_on(s, r, now);
    }
    // The next slot; a worker that fell behind catches up by a few posts at
    // most, not by a burst.
    const uint64_t floor = now > 4 * interval_ns_ ? now - 4 * interval_ns_ : 0;
    if (posted && interval_ns_) s.next_post_ns = std::max(s.next_post_ns + interval_ns_, floor);
    return posted;
}

bool workers::post_on(state &s, size_t r, uint64_t now) {
    const auto gens = rails_[r]->admitted();  // the gates, inline: two acquire loads
    if (!gens) {
        ++s.counts.refused;
        return false;
    }
    held &h = s.current[r];
    if (!h.set || h.set->gens() != *gens) {
        ++s.counts.not_ready;  // the builder is connecting the new generation's set
        return false;
    }
    const size_t mine = h.in_flight.size();
    const uint32_t depth = rails_[r]->options.depth;
    size_t k = 0;
    for (; k < mine; ++k) {
        const size_t q = (h.next + k) % mine;
        if (h.in_flight[q] < depth && !h.failed[q]) break;
    }
    if (k == mine) return false;  // every QP of ours is full (or failed)
    if (s.records.size() >= max_records_) {
        s.counts.records_full = true;
        return false;
    }
    k = (h.next + k) % mine;
    h.next = k + 1;
    const size_t pair = s.id + k * state_.size();
    const qp_set &set = *h.set;
    record &rec = s.records.emplace_back();
    rec.post_ns = now;
    rec.set = set.serial();
    rec.rail = uint8_t(r);
    rec.status = pending;
    ibv_sge sge{};
    sge.addr = set.local().slot_addr(pair % set.local().slots());
    sge.length = uint32_t(write_bytes);
    sge.lkey = set.local().lkey();
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = uint64_t(uintptr_t(&rec));  // a deque never moves its elements
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = set.target_addr(pair);
    wr.wr.rdma.rkey = set.target_rkey();
    if (ibv_post_send(set.pairs()[pair].qp, &wr, &bad) != 0) {
        rec.status = post_failed;
        rec.done_ns = now;
        h.failed[k] = true;
        return false;
    }
    ++h.in_flight[k];
    h.posted[k].push_back(&rec);
    return true;
}

}  // namespace traffic
