// path.hpp: the kernel's neighbour entry for a RoCE peer, resolved before
// a QP's modify to RTR needs it.
//
// Why: for a user QP over RoCE, ibv_modify_qp to RTR resolves the peer's
// MAC in the kernel (ib_resolve_eth_dmac -> rdma_addr_find_l2_eth_by_grh
// -> rdma_resolve_ip, a 1 s deadline) and blocks until it is done. When
// the neighbour entry is not usable yet, that resolution checks the entry,
// starts a solicitation and only then queues itself to be woken by the
// entry's update. If the answer comes back before the request is queued
// (a peer on the same host, as with veths, answers inside the solicitation's
// own softirq), the wake-up is lost and the RTR waits out the whole second
// (docs/PERFORMANCE.md). An entry left INCOMPLETE by packets sent while
// the cable was out is worse: nothing solicits it again once the link is
// back, so it has to fail first. Resolving the path first, with the
// kernel's own neighbour discovery, makes the RTR find a usable entry.
#pragma once

#include "common.hpp"

#include <infiniband/verbs.h>

namespace traffic {

// How a path resolution went: how long it waited, how many datagrams it
// sent to start the kernel's resolution, and the entry's state at the end
// ("reachable", "stale", ..., "incomplete", "failed", "none", "unreadable").
struct path_wait {
    double waited_ms = 0;
    unsigned nudges = 0;
    const char *state = "none";
    bool usable = false;
};

// Makes the kernel resolve the neighbour through which `ifindex` reaches
// `dgid` (an IPv6 GID, or an IPv4-mapped one), and waits until its entry
// is usable (REACHABLE, STALE, DELAY, PROBE, PERMANENT or NOARP), at most
// `bound_ms`. Unprivileged: the entry is read with rtnetlink (RTM_GETNEIGH)
// and a resolution is started, when the entry is missing or FAILED, by one
// empty UDP datagram to the discard port (9) of the peer's address, which
// goes through the same neighbour output as rxe's packets. Never throws:
// a path that cannot be resolved is the RTR's to report.
path_wait resolve_path(const ibv_gid &dgid, unsigned ifindex, unsigned bound_ms);

// The netdev index of GID `index` of `port` (0 when it has none).
unsigned gid_ifindex(ibv_context *ctx, uint8_t port, uint8_t index);

}  // namespace traffic
