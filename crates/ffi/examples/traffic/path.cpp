// path.cpp: see path.hpp.
#include "path.hpp"

#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

namespace traffic {

namespace {

// How often the entry is read while it resolves.
constexpr auto poll_every = std::chrono::milliseconds(2);
// The discard service: a datagram there is dropped by the peer.
constexpr uint16_t discard_port = 9;
// The states in which the kernel hands out the entry's address (the
// kernel's NUD_VALID; not in the uapi headers).
constexpr int nud_usable = NUD_PERMANENT | NUD_NOARP | NUD_REACHABLE | NUD_PROBE | NUD_STALE | NUD_DELAY;

// A GID as the IP address it is: IPv4 for ::ffff:a.b.c.d, else IPv6.
struct ip_address {
    int family = AF_INET6;
    uint8_t bytes[16] = {};
    size_t len = 16;
};

ip_address ip_of(const ibv_gid &g) {
    ip_address a;
    static constexpr uint8_t v4_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(g.raw, v4_prefix, sizeof v4_prefix) == 0) {
        a.family = AF_INET;
        a.len = 4;
        std::memcpy(a.bytes, g.raw + 12, 4);
    } else {
        std::memcpy(a.bytes, g.raw, 16);
    }
    return a;
}

// A descriptor closed when it goes out of scope.
struct owned_fd {
    int fd;
    explicit owned_fd(int f) : fd(f) {}
    ~owned_fd() {
        if (fd >= 0) close(fd);
    }
    owned_fd(const owned_fd &) = delete;
    owned_fd &operator=(const owned_fd &) = delete;
};

// The entry's NUD state (NUD_NONE, 0, when there is none), or -1 when the
// kernel's answer could not be read. One RTM_GETNEIGH request (what
// `ip neigh get` sends); the socket's receive timeout bounds the wait.
int neigh_state(int nl, const ip_address &a, unsigned ifindex, uint32_t seq) {
    struct {
        nlmsghdr h;
        ndmsg m;
        char attrs[RTA_SPACE(16)];
    } req{};
    req.h.nlmsg_len = NLMSG_LENGTH(sizeof(ndmsg));
    req.h.nlmsg_type = RTM_GETNEIGH;
    req.h.nlmsg_flags = NLM_F_REQUEST;
    req.h.nlmsg_seq = seq;
    req.m.ndm_family = uint8_t(a.family);
    req.m.ndm_ifindex = int(ifindex);
    auto *rta = reinterpret_cast<rtattr *>(reinterpret_cast<char *>(&req) + NLMSG_ALIGN(req.h.nlmsg_len));
    rta->rta_type = NDA_DST;
    rta->rta_len = uint16_t(RTA_LENGTH(a.len));
    std::memcpy(RTA_DATA(rta), a.bytes, a.len);
    req.h.nlmsg_len = NLMSG_ALIGN(req.h.nlmsg_len) + RTA_ALIGN(rta->rta_len);
    if (send(nl, &req, req.h.nlmsg_len, 0) < 0) return -1;
    alignas(nlmsghdr) char buf[8192];
    for (;;) {
        ssize_t n = recv(nl, buf, sizeof buf, 0);
        if (n <= 0) return -1;  // the timeout, or the socket failed
        for (auto *h = reinterpret_cast<nlmsghdr *>(buf); NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
            if (h->nlmsg_seq != seq) continue;  // an answer to an earlier request
            if (h->nlmsg_type == RTM_NEWNEIGH) return static_cast<const ndmsg *>(NLMSG_DATA(h))->ndm_state;
            if (h->nlmsg_type == NLMSG_ERROR) {
                const int err = static_cast<const nlmsgerr *>(NLMSG_DATA(h))->error;
                return err == -ENOENT ? NUD_NONE : -1;
            }
        }
    }
}

// One empty datagram to the peer's discard port, out of `ifindex`: the
// kernel resolves the neighbour to send it (a missing or FAILED entry
// starts a solicitation at once).
void nudge(const ip_address &a, unsigned ifindex) {
    owned_fd s(socket(a.family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (s.fd < 0) return;
    sockaddr_storage to{};
    socklen_t to_len = 0;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(in6_pktinfo))] = {};
    msghdr msg{};
    msg.msg_control = control;
    cmsghdr *c = nullptr;
    if (a.family == AF_INET6) {
        auto *sin6 = reinterpret_cast<sockaddr_in6 *>(&to);
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons(discard_port);
        std::memcpy(&sin6->sin6_addr, a.bytes, 16);
        sin6->sin6_scope_id = ifindex;  // a link-local address names its link
        to_len = sizeof *sin6;
        msg.msg_controllen = CMSG_SPACE(sizeof(in6_pktinfo));
        c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = IPPROTO_IPV6;
        c->cmsg_type = IPV6_PKTINFO;
        c->cmsg_len = CMSG_LEN(sizeof(in6_pktinfo));
        in6_pktinfo info{};
        info.ipi6_ifindex = ifindex;
        std::memcpy(CMSG_DATA(c), &info, sizeof info);
    } else {
        auto *sin = reinterpret_cast<sockaddr_in *>(&to);
        sin->sin_family = AF_INET;
        sin->sin_port = htons(discard_port);
        std::memcpy(&sin->sin_addr, a.bytes, 4);
        to_len = sizeof *sin;
        msg.msg_controllen = CMSG_SPACE(sizeof(in_pktinfo));
        c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = IPPROTO_IP;
        c->cmsg_type = IP_PKTINFO;
        c->cmsg_len = CMSG_LEN(sizeof(in_pktinfo));
        in_pktinfo info{};
        info.ipi_ifindex = int(ifindex);
        std::memcpy(CMSG_DATA(c), &info, sizeof info);
    }
    msg.msg_name = &to;
    msg.msg_namelen = to_len;
    (void)sendmsg(s.fd, &msg, MSG_DONTWAIT);  // a failure shows in the entry
}

const char *state_name(int state) {
    if (state < 0) return "unreadable";
    if (state & NUD_REACHABLE) return "reachable";
    if (state & NUD_STALE) return "stale";
    if (state & NUD_DELAY) return "delay";
    if (state & NUD_PROBE) return "probe";
    if (state & NUD_PERMANENT) return "permanent";
    if (state & NUD_NOARP) return "noarp";
    if (state & NUD_INCOMPLETE) return "incomplete";
    if (state & NUD_FAILED) return "failed";
    return "none";
}

}  // namespace

path_wait resolve_path(const ibv_gid &dgid, unsigned ifindex, unsigned bound_ms) {
    path_wait w;
    const ip_address a = ip_of(dgid);
    owned_fd nl(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
    if (nl.fd < 0 || ifindex == 0) {
        w.state = "unreadable";
        return w;
    }
    const timeval answer_within{0, 100'000};
    setsockopt(nl.fd, SOL_SOCKET, SO_RCVTIMEO, &answer_within, sizeof answer_within);
    const uint64_t t0 = now_ns(), until = t0 + uint64_t(bound_ms) * 1'000'000;
    for (uint32_t seq = 1;; ++seq) {
        const int state = neigh_state(nl.fd, a, ifindex, seq);
        w.state = state_name(state);
        w.usable = state > 0 && (state & nud_usable);
        if (w.usable || state < 0 || now_ns() >= until) break;
        // Missing or FAILED: start a resolution. INCOMPLETE: one is under
        // way, and a datagram would only queue behind it.
        if (!(state & NUD_INCOMPLETE)) {
            nudge(a, ifindex);
            ++w.nudges;
        }
        std::this_thread::sleep_for(poll_every);
    }
    w.waited_ms = double(now_ns() - t0) / 1e6;
    return w;
}

unsigned gid_ifindex(ibv_context *ctx, uint8_t port, uint8_t index) {
    ibv_gid_entry e{};
    if (ibv_query_gid_ex(ctx, port, index, &e, 0) != 0) return 0;
    return e.ndev_ifindex;
}

}  // namespace traffic
