// verbs.cpp: see verbs.hpp.
#include "verbs.hpp"

#include "remote.hpp"

#include <fcntl.h>
#include <net/if.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace traffic {

verbs_error::verbs_error(const std::string &what, int err)
    : std::runtime_error(what + ": " + std::strerror(err)), err_(err) {}

// ---- the device -------------------------------------------------------------------

std::shared_ptr<verbs_device> verbs_device::open(const std::string &name, size_t slots) {
    std::shared_ptr<verbs_device> d(new verbs_device());
    d->name_ = name;
    int n = 0;
    ibv_device **list = ibv_get_device_list(&n);
    if (!list) throw verbs_error("ibv_get_device_list", errno ? errno : ENODEV);
    ibv_device *found = nullptr;
    for (int i = 0; i < n && !found; ++i)
        if (name == ibv_get_device_name(list[i])) found = list[i];
    errno = 0;
    if (found) d->ctx_ = ibv_open_device(found);
    const int err = errno ? errno : EIO;
    ibv_free_device_list(list);
    if (!found) throw verbs_error("no device " + name, ENODEV);
    if (!d->ctx_) throw verbs_error("ibv_open_device(" + name + ")", err);
    const int flags = fcntl(d->ctx_->async_fd, F_GETFL);
    if (flags < 0 || fcntl(d->ctx_->async_fd, F_SETFL, flags | O_NONBLOCK) < 0)
        throw verbs_error(name + ": O_NONBLOCK on the async fd", errno);
    d->pd_ = ibv_alloc_pd(d->ctx_);
    if (!d->pd_) throw verbs_error("ibv_alloc_pd(" + name + ")", errno);
    d->buffer_.assign(slots * write_bytes, 0x5a);
    d->mr_ = ibv_reg_mr(d->pd_, d->buffer_.data(), d->buffer_.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!d->mr_) throw verbs_error("ibv_reg_mr(" + name + ")", errno);
    return d;
}

verbs_device::~verbs_device() {
    if (mr_) ibv_dereg_mr(mr_);
    if (pd_) ibv_dealloc_pd(pd_);
    if (ctx_) {
        ibv_close_device(ctx_);
        // A Soft-RoCE removal waits for this moment.
        line("context_closed").str("device", name_).num("t_ns", now_ns()).emit();
    }
}

// ---- addresses ----------------------------------------------------------------------

static bool link_local(const ibv_gid &g) { return g.raw[0] == 0xfe && (g.raw[1] & 0xc0) == 0x80; }

// Calls `f(entry)` for every non-empty GID entry of the port; an errno.
template <class F>
static int each_gid(ibv_context *ctx, uint8_t port, F f) {
    ibv_port_attr attr{};
    if (int rc = ibv_query_port(ctx, port, &attr)) return rc;
    for (int i = 0; i < attr.gid_tbl_len; ++i) {
        ibv_gid_entry e{};
        const int rc = ibv_query_gid_ex(ctx, port, uint32_t(i), &e, 0);
        if (rc == ENODATA || (rc != 0 && errno == ENODATA)) continue;  // an empty slot
        if (rc != 0) return rc > 0 ? rc : errno;
        f(e);
    }
    return 0;
}

uint8_t pick_gid_index(ibv_context *ctx, uint8_t port) {
    int found = -1;
    const int rc = each_gid(ctx, port, [&](const ibv_gid_entry &e) {
        if (found < 0 && e.gid_type == IBV_GID_TYPE_ROCE_V2 && link_local(e.gid)) found = int(e.gid_index);
    });
    if (rc != 0) throw verbs_error("reading the GID table", rc);
    if (found < 0 || found > 255) throw verbs_error("no RoCE v2 link-local GID", ENOENT);
    return uint8_t(found);
}

int read_address(ibv_context *ctx, uint8_t port, std::vector<rw_gid> &gids, std::string &netdev,
                 rw_port_address &out) {
    ibv_port_attr attr{};
    if (int rc = ibv_query_port(ctx, port, &attr)) return rc;
    gids.clear();
    netdev.clear();
    const int rc = each_gid(ctx, port, [&](const ibv_gid_entry &e) {
        rw_gid g{};
        g.index = e.gid_index;
        std::memcpy(g.raw, e.gid.raw, sizeof g.raw);
        g.gid_type = e.gid_type == IBV_GID_TYPE_ROCE_V2 ? 1 : 0;
        gids.push_back(g);
        char name[IF_NAMESIZE] = {};
        if (netdev.empty() && e.ndev_ifindex && if_indextoname(e.ndev_ifindex, name)) netdev = name;
    });
    if (rc != 0) return rc;
    out = rw_port_address{};
    out.link_layer = attr.link_layer;
    out.lid = attr.lid;
    out.gids = gids.data();
    out.ngids = gids.size();
    out.netdev = netdev.empty() ? nullptr : netdev.c_str();
    return 0;
}

// ---- RC QP pairs ---------------------------------------------------------------------

static void modify(ibv_qp *qp, ibv_qp_attr &a, int mask, const char *what, const std::string &dev) {
    if (int rc = ibv_modify_qp(qp, &a, mask)) throw verbs_error(std::string("ibv_modify_qp(") + what + ") on " + dev, rc);
}

void to_init(ibv_qp *qp, uint8_t port, const std::string &dev) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = port;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    modify(qp, a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "INIT", dev);
}

void to_rtr(ibv_qp *qp, uint32_t dest_qpn, const ibv_gid &dgid, uint8_t sgid_index, ibv_mtu mtu, uint8_t port,
            const std::string &dev) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = mtu;
    a.dest_qp_num = dest_qpn;
    a.rq_psn = 0;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = dgid;
    a.ah_attr.grh.sgid_index = sgid_index;
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.port_num = port;
    modify(qp, a,
           IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
               IBV_QP_MIN_RNR_TIMER,
           "RTR", dev);
}

// Ready to send: `retry_cnt` tries of 4.096 us * 2^timeout each, then the
// write fails with IBV_WC_RETRY_EXC_ERR (a pulled cable: no async event).
static void to_rts(ibv_qp *qp, const set_options &o, const std::string &dev) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = o.timeout;
    a.retry_cnt = o.retry_cnt;
    a.rnr_retry = 7;
    a.sq_psn = 0;
    a.max_rd_atomic = 1;
    modify(qp, a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
           "RTS", dev);
}

ibv_qp *create_rc(const verbs_device &d, ibv_cq *cq, uint32_t depth) {
    ibv_qp_init_attr init{};
    init.send_cq = cq;
    init.recv_cq = cq;
    init.cap.max_send_wr = depth;
    init.cap.max_recv_wr = 1;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    init.qp_type = IBV_QPT_RC;
    ibv_qp *qp = ibv_create_qp(d.pd(), &init);
    if (!qp) throw verbs_error("ibv_create_qp(" + d.name() + ")", errno);
    return qp;
}

ibv_cq *create_cq(const verbs_device &d, int cqe) {
    ibv_cq *cq = ibv_create_cq(d.context(), cqe, nullptr, nullptr, 0);
    if (!cq) throw verbs_error("ibv_create_cq(" + d.name() + ")", errno);
    return cq;
}

// The set's local half: a CQ and a QP per pair on `local`.
std::unique_ptr<qp_set> qp_set::with_local(std::shared_ptr<verbs_device> local, const set_options &o,
                                           generations gens, uint64_t serial) {
    std::unique_ptr<qp_set> s(new qp_set());
    s->local_ = std::move(local);
    s->gens_ = gens;
    s->serial_ = serial;
    for (size_t i = 0; i < o.pairs; ++i) {
        pair &p = s->pairs_.emplace_back();
        p.cq = create_cq(*s->local_, int(o.depth));
        p.qp = create_rc(*s->local_, p.cq, o.depth);
    }
    s->lost_ = std::make_unique<std::atomic<bool>[]>(o.pairs);
    return s;
}

std::unique_ptr<qp_set> qp_set::build(std::shared_ptr<verbs_device> local, std::shared_ptr<verbs_device> peer,
                                      const set_options &o, generations gens, uint64_t serial) {
    std::unique_ptr<qp_set> s = with_local(std::move(local), o, gens, serial);
    s->peer_ = std::move(peer);
    s->target_ = {s->peer_->slot_addr(0), s->peer_->slots(), s->peer_->rkey()};
    s->peer_cq_ = create_cq(*s->peer_, 1);
    for (pair &p : s->pairs_) p.peer_qp = create_rc(*s->peer_, s->peer_cq_, 1);
    s->connect(o);
    return s;
}

std::unique_ptr<qp_set> qp_set::build_remote(std::shared_ptr<verbs_device> local, const std::string &responder,
                                             const std::string &peer, const set_options &o, generations gens,
                                             uint64_t serial) {
    std::unique_ptr<qp_set> s = with_local(std::move(local), o, gens, serial);
    s->connect_remote(responder, peer, o);
    return s;
}

void qp_set::connect(const set_options &o) {
    gid_local_ = pick_gid_index(local_->context(), o.port);
    gid_peer_ = pick_gid_index(peer_->context(), o.port);
    ibv_gid local_gid{}, peer_gid{};
    if (int rc = ibv_query_gid(local_->context(), o.port, gid_local_, &local_gid)) throw verbs_error("ibv_query_gid", rc);
    if (int rc = ibv_query_gid(peer_->context(), o.port, gid_peer_, &peer_gid)) throw verbs_error("ibv_query_gid", rc);
    ibv_port_attr la{}, pa{};
    if (int rc = ibv_query_port(local_->context(), o.port, &la)) throw verbs_error("ibv_query_port", rc);
    if (int rc = ibv_query_port(peer_->context(), o.port, &pa)) throw verbs_error("ibv_query_port", rc);
    const ibv_mtu mtu = std::min(la.active_mtu, pa.active_mtu);
    // Both directions' neighbours resolved first (path.hpp says why): the
    // peer's RTRs go from its netdev to the local GID, ours the other way.
    if (o.path_wait_ms) {
        path_to_local_ = resolve_path(local_gid, gid_ifindex(peer_->context(), o.port, gid_peer_), o.path_wait_ms);
        path_to_peer_ = resolve_path(peer_gid, gid_ifindex(local_->context(), o.port, gid_local_), o.path_wait_ms);
    }
    for (pair &p : pairs_) {
        to_init(p.qp, o.port, local_->name());
        to_init(p.peer_qp, o.port, peer_->name());
        to_rtr(p.peer_qp, p.qp->qp_num, local_gid, gid_peer_, mtu, o.port, peer_->name());
        to_rtr(p.qp, p.peer_qp->qp_num, peer_gid, gid_local_, mtu, o.port, local_->name());
        to_rts(p.qp, o, local_->name());
    }
}

void qp_set::connect_remote(const std::string &responder, const std::string &peer, const set_options &o) {
    auto req = std::make_unique<remote_request>();
    if (peer.size() >= sizeof req->device || pairs_.size() > max_remote_pairs)
        throw verbs_error("the far end " + peer + " with " + std::to_string(pairs_.size()) + " pairs", EINVAL);
    std::memcpy(req->device, peer.c_str(), peer.size() + 1);
    gid_local_ = pick_gid_index(local_->context(), o.port);
    ibv_gid local_gid{}, peer_gid{};
    if (int rc = ibv_query_gid(local_->context(), o.port, gid_local_, &local_gid)) throw verbs_error("ibv_query_gid", rc);
    ibv_port_attr la{};
    if (int rc = ibv_query_port(local_->context(), o.port, &la)) throw verbs_error("ibv_query_port", rc);
    req->port = o.port;
    std::memcpy(req->gid, local_gid.raw, sizeof req->gid);
    req->mtu = la.active_mtu;
    req->path_wait_ms = o.path_wait_ms;
    req->pairs = uint32_t(pairs_.size());
    for (size_t i = 0; i < pairs_.size(); ++i) {
        to_init(pairs_[i].qp, o.port, local_->name());
        req->qpn[i] = pairs_[i].qp->qp_num;
    }
    auto ans = std::make_unique<remote_answer>();
    responder_fd_ = ask_responder(responder, *req, *ans);
    gid_peer_ = ans->gid_index;
    target_ = {ans->addr, std::max<uint64_t>(ans->slots, 1), ans->rkey};
    std::memcpy(peer_gid.raw, ans->gid, sizeof peer_gid.raw);
    path_to_local_.waited_ms = ans->path_ms;
    path_to_local_.state = "responder's";
    if (o.path_wait_ms)
        path_to_peer_ = resolve_path(peer_gid, gid_ifindex(local_->context(), o.port, gid_local_), o.path_wait_ms);
    for (size_t i = 0; i < pairs_.size(); ++i) {
        to_rtr(pairs_[i].qp, ans->qpn[i], peer_gid, gid_local_, ibv_mtu(ans->mtu), o.port, local_->name());
        to_rts(pairs_[i].qp, o, local_->name());
    }
}

bool qp_set::lose(uint64_t handle) {
    // The peers' shared CQ takes every pair with it.
    const bool all = peer_cq_ && uint64_t(uintptr_t(peer_cq_)) == handle;
    bool ours = all;
    for (size_t i = 0; i < pairs_.size(); ++i) {
        const pair &p = pairs_[i];
        for (const void *object : {static_cast<const void *>(p.qp), static_cast<const void *>(p.peer_qp),
                                   static_cast<const void *>(p.cq)})
            if (all || uint64_t(uintptr_t(object)) == handle) {
                lost_[i].store(true, std::memory_order_release);
                ours = true;
            }
    }
    return ours;
}

qp_set::~qp_set() {
    for (pair &p : pairs_) {
        if (p.qp) ibv_destroy_qp(p.qp);
        if (p.peer_qp) ibv_destroy_qp(p.peer_qp);
        if (p.cq) ibv_destroy_cq(p.cq);
    }
    if (peer_cq_) ibv_destroy_cq(peer_cq_);
    if (responder_fd_ >= 0) close(responder_fd_);  // the responder destroys its QPs
}

// ---- idle QPs for the burst --------------------------------------------------------

idle_qps::idle_qps(std::shared_ptr<verbs_device> dev, size_t n, uint8_t port) : dev_(std::move(dev)), port_(port) {
    try {
        make(n);
    } catch (...) {
        release();  // no destructor runs for a throwing constructor
        throw;
    }
}

void idle_qps::make(size_t n) {
    cq_ = create_cq(*dev_, 1);
    for (size_t i = 0; i < n; ++i) {
        ibv_qp_init_attr init{};
        init.send_cq = cq_;
        init.recv_cq = cq_;
        init.cap.max_send_wr = 1;
        init.cap.max_recv_wr = 1;
        init.cap.max_send_sge = 1;
        init.cap.max_recv_sge = 1;
        init.qp_type = IBV_QPT_UD;
        ibv_qp *qp = ibv_create_qp(dev_->pd(), &init);
        if (!qp) throw verbs_error("ibv_create_qp(UD, " + dev_->name() + ")", errno);
        qps_.push_back(qp);
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_INIT;
        a.port_num = port_;
        a.qkey = 0x11111111;
        modify(qp, a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY, "UD INIT", dev_->name());
        a = ibv_qp_attr{};
        a.qp_state = IBV_QPS_RTR;
        modify(qp, a, IBV_QP_STATE, "UD RTR", dev_->name());
        a = ibv_qp_attr{};
        a.qp_state = IBV_QPS_RTS;
        modify(qp, a, IBV_QP_STATE | IBV_QP_SQ_PSN, "UD RTS", dev_->name());
    }
}

void idle_qps::release() noexcept {
    for (ibv_qp *qp : qps_) ibv_destroy_qp(qp);
    qps_.clear();
    if (cq_) ibv_destroy_cq(cq_);
    cq_ = nullptr;
}

idle_qps::~idle_qps() { release(); }

size_t idle_qps::drain_all() {
    size_t errors = 0;
    for (ibv_qp *qp : qps_) {
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_SQD;
        a.en_sqd_async_notify = 1;
        if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY)) ++errors;
    }
    return errors;
}

size_t idle_qps::resume_all() {
    size_t errors = 0;
    for (ibv_qp *qp : qps_) {
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_RTS;
        if (ibv_modify_qp(qp, &a, IBV_QP_STATE)) ++errors;
    }
    return errors;
}

}  // namespace traffic
