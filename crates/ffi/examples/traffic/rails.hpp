// rails.hpp: a rail is a local device, its peer, their two gates and a set
// of RC QP pairs between them that a builder thread keeps current.
//
// The rule an engine author copies is here: a set is usable only while
// both gates admit with the generations it was built under. When either
// generation moves (a resume after a pull, a re-attach, an address change)
// the builder connects a new set first and only then hands the old one to
// the reaper, because destroying QPs that failed can take hundreds of
// milliseconds and must not stand between the port coming back and the
// first write on it.
#pragma once

#include "verbs.hpp"

#include <array>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

namespace traffic {

// One end of a rail: the device, its gate, what the selector was told.
struct rail_end {
    std::string device;  // "rxe0"
    bool is_local = true;
    rail_gate gate;
    std::atomic<bool> available{false};  // SET_AVAILABLE
    std::atomic<uint64_t> rate_mbps{0};  // RESEED
    // The word of an engine that keeps its own gate (the one-event-per-
    // wake-up loop), in railwatch's layout; `gate` then reads this.
    alignas(8) uint64_t own_word = 0;
};

// Completions counted per work-completion status (the peer of a rail is
// one device, so per (peer, status) too): the batch a transfer report to
// the machine is made of. Workers count; the event loop takes what was
// counted since it last took, and reports it (railwatch_loop.cpp).
class completion_tally {
public:
    static constexpr size_t statuses = 32;
    using counts = std::array<uint64_t, statuses>;

    // A worker's completion. The first one since the loop last took, and
    // every failure, wake the loop through `wake` (an eventfd) if set.
    void count(uint32_t status);
    // Set once, before the workers start.
    void wake_with(int eventfd) { wake_ = eventfd; }

    // The builder: the half-open breaker's probe came back `ok` or not;
    // wakes the loop, which reports it (take_probe).
    void probed(bool ok);
    // The loop: a probe's outcome not reported yet (cleared).
    std::optional<bool> take_probe();

    // The loop: whether a failure came since it last took (cleared).
    bool take_failed() { return failed_.exchange(false, std::memory_order_acq_rel); }
    // The loop: whether anything came since it last took.
    bool dirty() const { return dirty_.load(std::memory_order_acquire); }
    // The loop: the counts since it last took (what the next report says).
    counts take();
    // Everything taken so far: what was reported (after the loop stopped).
    const counts &taken() const { return taken_; }

private:
    std::array<std::atomic<uint64_t>, statuses> by_status_{};
    std::atomic<bool> dirty_{false}, failed_{false};
    std::atomic<int> probe_{0};  // 0 none, 1 succeeded, 2 failed
    counts taken_{};  // the loop's
    int wake_ = -1;
};

// Destroys retired QP sets on its own thread, once no worker holds them,
// and says how long each took.
class reaper {
public:
    reaper();
    ~reaper();  // destroys what is queued, then stops
    void take(std::shared_ptr<qp_set> set, const std::string &rail);

private:
    void loop();
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::pair<std::shared_ptr<qp_set>, std::string>> queue_;
    bool stop_ = false;
    std::thread thread_;
};

class rail {
public:
    // `responder`: the unix socket of the process serving the far end
    // (remote.hpp); empty when this process opens it.
    rail(std::string name, std::string local, std::string peer, const set_options &o, reaper &r,
         std::string responder = {});
    ~rail();  // stops the builder; the current set goes to the reaper
    rail(const rail &) = delete;
    rail &operator=(const rail &) = delete;

    const std::string name;  // "A"
    rail_end local, peer;
    completion_tally tally;
    const set_options options;

    // Whether the far end is served by a responder (never opened here).
    bool remote() const { return !responder_.empty(); }

    rail_end *end(const std::string &device) {
        return device == local.device ? &local : device == peer.device ? &peer : nullptr;
    }

    // The loop opened (or, with nullptr, closed) one end's device. Closing
    // retires the current set at once: its device is leaving.
    void set_device(rail_end &end, std::shared_ptr<verbs_device> dev);
    std::shared_ptr<verbs_device> device(const rail_end &end) const;

    // The gates may have moved: the builder looks again.
    void poke();

    // Both gates admit: their generations.
    std::optional<generations> admitted() const;

    // For workers: bumped whenever the current set changes, so a worker
    // re-reads current() only then.
    uint64_t version() const { return version_.load(std::memory_order_acquire); }
    std::shared_ptr<qp_set> current() const;

    // railwatch said the QP or CQ `handle` will complete nothing more: the
    // set holding it (current, or retired and still held) marks its pair,
    // and the workers fail what is in flight there. Whether one held it.
    bool lose(uint64_t handle);

    void start();

private:
    void build_loop();
    std::unique_ptr<qp_set> make_set(const set_options &o, generations want, uint64_t serial,
                                     std::shared_ptr<verbs_device> l, std::shared_ptr<verbs_device> p);
    int rebuild(generations want, std::shared_ptr<verbs_device> l, std::shared_ptr<verbs_device> p);
    void send_probe(uint64_t peer_generation, std::shared_ptr<verbs_device> l, std::shared_ptr<verbs_device> p);
    void publish(std::shared_ptr<qp_set> fresh, uint64_t grace_ns);

    reaper &reaper_;
    const std::string responder_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::shared_ptr<verbs_device> dev_local_, dev_peer_;
    std::shared_ptr<qp_set> current_;
    std::vector<std::weak_ptr<qp_set>> published_;  // every set made current, while one holds it
    uint64_t pokes_ = 0, serial_ = 0;
    bool stop_ = false;
    std::atomic<uint64_t> version_{0};
    std::thread builder_;
};

}  // namespace traffic
