// remote.cpp: see remote.hpp.
#include "remote.hpp"

#include <poll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <map>
#include <memory>
#include <thread>

namespace traffic {

namespace {

// The longest wait for an answer: the responder's path wait (1.5 s at the
// engine's default) and an RTR that times out (~1 s) fit well inside.
constexpr int answer_wait_s = 10;

// Every byte of `len` written or read; false (errno set) when the socket
// failed, closed or timed out.
bool send_all(int fd, const void *buf, size_t len) {
    const char *p = static_cast<const char *>(buf);
    while (len) {
        const ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        p += n;
        len -= size_t(n);
    }
    return true;
}

bool recv_all(int fd, void *buf, size_t len) {
    char *p = static_cast<char *>(buf);
    while (len) {
        const ssize_t n = recv(fd, p, len, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n == 0) errno = ECONNRESET;
        if (n <= 0) return false;
        p += n;
        len -= size_t(n);
    }
    return true;
}

void set_timeouts(int fd, int seconds) {
    timeval tv{seconds, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

// The unix socket address of `path`; false when it does not fit.
bool unix_address(const std::string &path, sockaddr_un &a) {
    a = sockaddr_un{};
    a.sun_family = AF_UNIX;
    if (path.empty() || path.size() >= sizeof a.sun_path) return false;
    std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
    return true;
}

using device_map = std::map<std::string, std::shared_ptr<verbs_device>>;

// The responder's QPs of one request: created, in RTR towards the engine's.
struct served_qps {
    const verbs_device *dev = nullptr;
    ibv_cq *cq = nullptr;
    std::vector<ibv_qp *> qps;
    ~served_qps() {
        for (ibv_qp *qp : qps) ibv_destroy_qp(qp);
        if (cq) ibv_destroy_cq(cq);
    }
};

// Builds the far end's half of a set for `req` into `out`; the answer.
void build_half(const device_map &devs, const remote_request &req, served_qps &out, remote_answer &ans) {
    const auto it = devs.find(req.device);
    if (it == devs.end()) throw verbs_error(std::string("no device ") + req.device + " served", ENODEV);
    if (req.pairs == 0 || req.pairs > max_remote_pairs) throw verbs_error("a request for no pairs or too many", EINVAL);
    const verbs_device &d = *it->second;
    out.dev = &d;
    out.cq = create_cq(d, 1);
    for (uint32_t i = 0; i < req.pairs; ++i) out.qps.push_back(create_rc(d, out.cq, 1));
    ans.gid_index = pick_gid_index(d.context(), req.port);
    ibv_gid own{}, dgid{};
    if (int rc = ibv_query_gid(d.context(), req.port, ans.gid_index, &own)) throw verbs_error("ibv_query_gid", rc);
    std::memcpy(ans.gid, own.raw, sizeof ans.gid);
    std::memcpy(dgid.raw, req.gid, sizeof dgid.raw);
    ibv_port_attr pa{};
    if (int rc = ibv_query_port(d.context(), req.port, &pa)) throw verbs_error("ibv_query_port", rc);
    ans.mtu = std::min<uint32_t>(req.mtu, pa.active_mtu);
    if (req.path_wait_ms)
        ans.path_ms = resolve_path(dgid, gid_ifindex(d.context(), req.port, ans.gid_index), req.path_wait_ms).waited_ms;
    for (uint32_t i = 0; i < req.pairs; ++i) {
        to_init(out.qps[i], req.port, d.name());
        to_rtr(out.qps[i], req.qpn[i], dgid, ans.gid_index, ibv_mtu(ans.mtu), req.port, d.name());
        ans.qpn[i] = out.qps[i]->qp_num;
    }
    ans.rkey = d.rkey();
    ans.addr = d.slot_addr(0);
    ans.slots = d.slots();
}

// One connection: the request, the answer, then the QPs kept until the
// engine closes it.
void serve_one(int fd, std::shared_ptr<const device_map> devs) {
    set_timeouts(fd, answer_wait_s);
    auto req = std::make_unique<remote_request>();
    auto ans = std::make_unique<remote_answer>();
    if (!recv_all(fd, req.get(), sizeof *req)) {
        close(fd);
        return;
    }
    req->device[sizeof req->device - 1] = 0;
    const uint64_t t0 = now_ns();
    served_qps half;
    try {
        build_half(*devs, *req, half, *ans);
    } catch (const verbs_error &e) {
        ans->err = e.err() ? e.err() : EIO;
        std::snprintf(ans->what, sizeof ans->what, "%s", e.what());
    }
    line served("served");
    served.num("t_ns", now_ns()).str("device", req->device).num("pairs", req->pairs).num("error", uint64_t(ans->err))
        .fixed("build_ms", double(now_ns() - t0) / 1e6).fixed("path_ms", ans->path_ms);
    if (ans->err) served.str("what", ans->what);
    served.emit();
    if (send_all(fd, ans.get(), sizeof *ans) && !ans->err) {
        set_timeouts(fd, 0);  // held as long as the engine's set lives
        char b;
        for (;;) {
            const ssize_t n = recv(fd, &b, 1, 0);
            if (n == 0 || (n < 0 && errno != EINTR)) break;
        }
        line("released").num("t_ns", now_ns()).str("device", req->device).num("pairs", req->pairs).emit();
    }
    close(fd);
}

}  // namespace

int ask_responder(const std::string &path, const remote_request &req, remote_answer &ans) {
    sockaddr_un a{};
    if (!unix_address(path, a)) throw verbs_error("the responder's socket path " + path, ENAMETOOLONG);
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw verbs_error("socket(AF_UNIX)", errno);
    set_timeouts(fd, answer_wait_s);
    if (connect(fd, reinterpret_cast<const sockaddr *>(&a), sizeof a) != 0 || !send_all(fd, &req, sizeof req) ||
        !recv_all(fd, &ans, sizeof ans)) {
        const int err = errno ? errno : EPROTO;
        close(fd);
        throw verbs_error("the responder at " + path, err);
    }
    if (ans.err) {
        close(fd);
        ans.what[sizeof ans.what - 1] = 0;
        throw verbs_error(std::string("the responder: ") + ans.what, ans.err);
    }
    return fd;
}

void serve_peers(const std::string &path, const std::vector<std::string> &devices) {
    auto devs = std::make_shared<device_map>();
    for (const std::string &d : devices) (*devs)[d] = verbs_device::open(d, max_remote_pairs);
    sockaddr_un a{};
    if (!unix_address(path, a)) throw verbs_error("the socket path " + path, ENAMETOOLONG);
    const int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (ls < 0) throw verbs_error("socket(AF_UNIX)", errno);
    unlink(path.c_str());  // a socket a previous run left
    if (bind(ls, reinterpret_cast<const sockaddr *>(&a), sizeof a) != 0 || listen(ls, 64) != 0) {
        const int err = errno;
        close(ls);
        throw verbs_error("listening on " + path, err);
    }
    sigset_t set;
    sigemptyset(&set);
    for (int s : {SIGTERM, SIGINT}) sigaddset(&set, s);
    const int sigfd = signalfd(-1, &set, SFD_CLOEXEC);
    if (sigfd < 0) throw verbs_error("signalfd", errno);
    line l("serving");
    l.num("t_ns", now_ns()).str("path", path);
    for (const std::string &d : devices) l.str("device", d);
    l.emit();
    for (;;) {
        pollfd fds[2] = {{sigfd, POLLIN, 0}, {ls, POLLIN, 0}};
        if (poll(fds, 2, -1) < 0 && errno != EINTR) throw verbs_error("poll", errno);
        if (fds[0].revents) break;  // SIGTERM or SIGINT
        if (!fds[1].revents) continue;
        const int fd = accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) std::thread(serve_one, fd, std::shared_ptr<const device_map>(devs)).detach();
    }
    // Connections still held end with the process: the engine went first.
    close(sigfd);
    close(ls);
    unlink(path.c_str());
}

}  // namespace traffic
