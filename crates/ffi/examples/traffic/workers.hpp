// workers.hpp: threads that post 4 KiB RDMA writes continuously. Before
// each write a worker picks a rail by the selector's bandwidth and checks
// its gates inline; it never posts on a rail whose gate refused, nor on a
// set built under an older generation. Every write is recorded.
#pragma once

#include "rails.hpp"

#include <deque>
#include <memory>
#include <thread>
#include <vector>

namespace traffic {

// One write: when it was posted and completed, on which rail and set, and
// how it ended (an ibv_wc_status, or `pending` if it never completed).
struct record {
    uint64_t post_ns = 0, done_ns = 0;
    uint64_t set = 0;  // the set's serial (its generations are in its "set" line)
    uint8_t rail = 0;  // index into the rails
    uint8_t status = 0;
};
inline constexpr uint8_t pending = 0xff;
// The status of a write whose ibv_post_send failed (not an ibv_wc_status).
inline constexpr uint8_t post_failed = 0xfe;
// The status of a write the ledger failed: railwatch said its QP, CQ or
// device will never complete it (RW_HAPPENING_WORK_LOST).
inline constexpr uint8_t work_lost = 0xfd;
// The status of a write given up on: its set was replaced and it had not
// completed within the set's grace period (answered, not left hanging).
inline constexpr uint8_t abandoned = 0xfc;
// The most rails the workers choose among (a record keeps its rail in a byte).
inline constexpr size_t max_rails = 8;

// What every worker counted besides its records.
struct worker_counts {
    uint64_t refused = 0;    // a picked rail's gate refused: went elsewhere
    uint64_t not_ready = 0;  // the gate admitted, the set of its generation was not built yet
    uint64_t abandoned = 0;  // writes still in flight on a set given up (failed as `abandoned` while running)
    uint64_t lost = 0;       // writes the ledger failed on WORK_LOST
    bool records_full = false;
};

class workers {
public:
    // `rate`: writes per second in all (0: as fast as the QPs take them).
    workers(std::vector<rail *> rails, size_t count, size_t max_records, uint64_t rate);
    ~workers();
    void start();
    // Stops posting, waits (bounded) for what is in flight, joins.
    void stop();

    size_t count() const { return threads_.size(); }
    const std::deque<record> &records(size_t worker) const { return state_[worker]->records; }
    const worker_counts &counts(size_t worker) const { return state_[worker]->counts; }

private:
    // A set a worker posts on (or still has writes in flight on).
    struct held {
        std::shared_ptr<qp_set> set;
        std::vector<uint32_t> in_flight;  // per QP pair this worker uses
        std::vector<std::vector<record *>> posted;  // the ledger: what is in flight, per QP pair
        std::vector<bool> failed;         // a write on it failed: not used again
        size_t next = 0;                  // round robin over them
        uint64_t left_ns = 0;             // when it stopped being current
        size_t rail = 0;
    };
    struct state {
        size_t id = 0;
        std::vector<held> current;  // per rail (set null when none)
        std::vector<uint64_t> versions;
        std::vector<held> leaving;
        std::deque<record> records;
        worker_counts counts;
        uint64_t rng = 0;
        uint64_t next_post_ns = 0;  // the pace
    };

    void run(state &s);
    void refresh(state &s);
    bool poll(state &s, held &h);
    void fail_lost(state &s, held &h, size_t k, uint64_t now);
    bool post(state &s);
    bool post_on(state &s, size_t r, uint64_t now);
    size_t pick(state &s);
    void let_go(state &s, bool stopping);

    std::vector<rail *> rails_;
    size_t max_records_;
    uint64_t interval_ns_;  // between two posts of one worker (0: no pace)
    std::vector<std::unique_ptr<state>> state_;
    std::vector<std::thread> threads_;
    std::atomic<bool> stopping_{false};
};

}  // namespace traffic
