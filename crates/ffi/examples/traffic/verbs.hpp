// verbs.hpp: the data path's libibverbs objects. A device (context,
// protection domain, registered buffer), a set of RC QP pairs between a
// rail's two devices built under one generation, the GID index to use, and
// idle QPs for the burst of SQ_DRAINED.
#pragma once

#include "common.hpp"
#include "path.hpp"

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace traffic {

// Bytes per write.
inline constexpr size_t write_bytes = 4096;

// One open device: what every QP on it shares. Its async fd is
// non-blocking (the loops read it edge-triggered). Destroyed when the last
// QP set built on it is: the context is closed after its QPs.
class verbs_device {
public:
    // Opens the device called `name` with a buffer of `slots` writes.
    static std::shared_ptr<verbs_device> open(const std::string &name, size_t slots);
    ~verbs_device();
    verbs_device(const verbs_device &) = delete;
    verbs_device &operator=(const verbs_device &) = delete;

    const std::string &name() const { return name_; }
    ibv_context *context() const { return ctx_; }
    ibv_pd *pd() const { return pd_; }
    int async_fd() const { return ctx_->async_fd; }
    // The buffer slot of write slot `i`, and the keys.
    uint64_t slot_addr(size_t i) const { return uint64_t(uintptr_t(buffer_.data() + i * write_bytes)); }
    uint32_t lkey() const { return mr_->lkey; }
    uint32_t rkey() const { return mr_->rkey; }
    size_t slots() const { return buffer_.size() / write_bytes; }

    // railwatch said the context's posted work will never complete (a
    // removal, DEVICE_FATAL): every set on it fails what it has in flight.
    void lose() { lost_ns_.store(now_ns(), std::memory_order_release); }
    bool lost() const { return lost_ns_.load(std::memory_order_acquire) != 0; }

private:
    verbs_device() = default;
    std::atomic<uint64_t> lost_ns_{0};
    std::string name_;
    ibv_context *ctx_ = nullptr;
    ibv_pd *pd_ = nullptr;
    ibv_mr *mr_ = nullptr;
    std::vector<uint8_t> buffer_;
};

// The index of the GID the engine connects with on `port`: the RoCE v2
// link-local (fe80::) entry. Re-read at every rebuild, because an index
// can move across a flap or an address change. (With both ends in one
// network namespace, as in railwatch's VM test, an IPv4 GID routes through
// `lo` and the connection fails; a real engine picks the GID its fabric
// routes.) Throws when there is none.
uint8_t pick_gid_index(ibv_context *ctx, uint8_t port);

// The port's address for rw_machine_handle_address: link layer, LID, the
// non-empty GID entries and the netdev. `gids` and `netdev` hold the
// storage the returned struct points into. An errno on failure.
int read_address(ibv_context *ctx, uint8_t port, std::vector<rw_gid> &gids, std::string &netdev,
                 rw_port_address &out);

// ---- building blocks of a QP set (the responder builds its half with them) ----

ibv_cq *create_cq(const verbs_device &d, int cqe);
ibv_qp *create_rc(const verbs_device &d, ibv_cq *cq, uint32_t depth);
void to_init(ibv_qp *qp, uint8_t port, const std::string &dev);
// Ready to receive from `dest_qpn` at `dgid`: the kernel resolves the
// peer's MAC here, blocking (path.hpp: resolve_path first).
void to_rtr(ibv_qp *qp, uint32_t dest_qpn, const ibv_gid &dgid, uint8_t sgid_index, ibv_mtu mtu, uint8_t port,
            const std::string &dev);

// Settings of a QP set.
struct set_options {
    size_t pairs = 4;      // K
    uint32_t depth = 8;    // writes in flight per QP
    uint8_t timeout = 14;  // 4.096 us * 2^timeout per try
    uint8_t retry_cnt = 6; // rxe reads 7 as "retry forever"
    uint8_t port = 1;
    // The longest wait for a path before the RTRs (0: none, as before the
    // wait existed: the RTR resolves the path itself).
    unsigned path_wait_ms = 1500;
};

// The generations a set was built under: one per end of the rail.
struct generations {
    uint64_t local = 0, peer = 0;
    bool operator==(const generations &) const = default;
};

// K RC QP pairs from `local` to `peer`, connected, each local QP with its
// own send CQ (its worker polls it). Built whole or not at all (a failure
// throws verbs_error and destroys what was made); destroyed QPs first.
class qp_set {
public:
    struct pair {
        ibv_cq *cq = nullptr;        // the local QP's CQ
        ibv_qp *qp = nullptr;        // on the local device: the writes are posted here
        ibv_qp *peer_qp = nullptr;   // on the peer: the target
    };

    static std::unique_ptr<qp_set> build(std::shared_ptr<verbs_device> local, std::shared_ptr<verbs_device> peer,
                                          const set_options &o, generations gens, uint64_t serial);
    // The same with the far end served by a responder process (remote.hpp)
    // at the unix socket `responder`: this process never opens `peer`, so
    // it sees none of its events, as with a NIC on another host. The set
    // holds the connection; the responder keeps its QPs until it closes.
    static std::unique_ptr<qp_set> build_remote(std::shared_ptr<verbs_device> local, const std::string &responder,
                                                 const std::string &peer, const set_options &o, generations gens,
                                                 uint64_t serial);
    ~qp_set();
    qp_set(const qp_set &) = delete;
    qp_set &operator=(const qp_set &) = delete;

    const std::vector<pair> &pairs() const { return pairs_; }
    generations gens() const { return gens_; }
    uint64_t serial() const { return serial_; }
    const verbs_device &local() const { return *local_; }
    // Where write slot `i` lands on the far end, and its key.
    uint64_t target_addr(size_t i) const { return target_.addr + (i % target_.slots) * write_bytes; }
    uint32_t target_rkey() const { return target_.rkey; }
    uint8_t gid_index_local() const { return gid_local_; }
    uint8_t gid_index_peer() const { return gid_peer_; }
    // How resolving each direction's path went before the RTRs.
    const path_wait &path_to_peer() const { return path_to_peer_; }
    const path_wait &path_to_local() const { return path_to_local_; }

    // Set when the set is replaced (or its device closes): workers stop
    // posting on it and let it go once their writes completed, or after
    // `grace_ns` (what is still in flight then is abandoned).
    void retire(uint64_t grace_ns) {
        grace_ns_.store(grace_ns, std::memory_order_relaxed);
        retired_ns_.store(now_ns(), std::memory_order_release);
    }
    // railwatch named `handle` (a QP or CQ, ours or the peer's) as lost
    // work: its pair is marked; whether the handle is one of this set's.
    bool lose(uint64_t handle);
    // Whether pair `i`'s posted writes will never complete: its QP, CQ or
    // peer QP was named, or either device's context was.
    bool lost(size_t i) const {
        return lost_[i].load(std::memory_order_acquire) || local_->lost() || (peer_ && peer_->lost());
    }

    // 0 while current, else when it was retired.
    uint64_t retired_ns() const { return retired_ns_.load(std::memory_order_acquire); }
    uint64_t grace_ns() const { return grace_ns_.load(std::memory_order_relaxed); }

private:
    // The far end's buffer.
    struct target {
        uint64_t addr = 0, slots = 1;
        uint32_t rkey = 0;
    };

    qp_set() = default;
    static std::unique_ptr<qp_set> with_local(std::shared_ptr<verbs_device> local, const set_options &o,
                                              generations gens, uint64_t serial);
    void connect(const set_options &o);
    void connect_remote(const std::string &responder, const std::string &peer, const set_options &o);
    std::shared_ptr<verbs_device> local_, peer_;  // peer_: none when a responder serves it
    int responder_fd_ = -1;                       // the connection holding the responder's QPs
    target target_;
    ibv_cq *peer_cq_ = nullptr;  // the peer QPs' CQ: nothing completes there
    std::vector<pair> pairs_;
    std::unique_ptr<std::atomic<bool>[]> lost_;  // per pair
    generations gens_;
    uint64_t serial_ = 0;
    uint8_t gid_local_ = 0, gid_peer_ = 0;
    path_wait path_to_peer_, path_to_local_;
    std::atomic<uint64_t> retired_ns_{0}, grace_ns_{0};
};

// `n` idle UD QPs on a device, in RTS: moving each to SQD raises one
// SQ_DRAINED on the device's async fd (rxe's requester), which is how the
// VM test queues a burst ahead of a PORT_ACTIVE. (rxe never raises
// COMM_EST, the burst of the seed's engine.)
class idle_qps {
public:
    idle_qps(std::shared_ptr<verbs_device> dev, size_t n, uint8_t port);
    ~idle_qps();
    idle_qps(const idle_qps &) = delete;
    idle_qps &operator=(const idle_qps &) = delete;
    // RTS -> SQD on every QP (then back to RTS is possible); the errors.
    size_t drain_all();
    // SQD -> RTS, for another burst.
    size_t resume_all();
    size_t size() const { return qps_.size(); }

private:
    void make(size_t n);
    void release() noexcept;
    std::shared_ptr<verbs_device> dev_;
    ibv_cq *cq_ = nullptr;
    std::vector<ibv_qp *> qps_;
    uint8_t port_;
};

}  // namespace traffic
