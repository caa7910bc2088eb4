// device_watch.cpp: see device_watch.hpp.
#include "device_watch.hpp"

#include "common.hpp"

#include <infiniband/verbs.h>
#include <linux/netlink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace traffic {

device_watch::device_watch() {
    fd_ = socket(AF_NETLINK, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_KOBJECT_UEVENT);
    if (fd_ < 0) throw verbs_error("socket(NETLINK_KOBJECT_UEVENT)", errno);
    const int size = 1 << 20;  // a burst of uevents must not overflow it
    setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    sockaddr_nl addr{};
    addr.nl_family = AF_NETLINK;
    addr.nl_groups = 1;  // the kernel's uevents
    if (bind(fd_, reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0) {
        const int err = errno;
        close(fd_);
        throw verbs_error("bind(NETLINK_KOBJECT_UEVENT)", err);
    }
}

device_watch::~device_watch() {
    if (fd_ >= 0) close(fd_);
}

bool device_watch::read_changed() {
    bool changed = false;
    char buf[8192];
    for (;;) {
        const ssize_t n = recv(fd_, buf, sizeof buf - 1, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == ENOBUFS) {  // uevents were lost: rescan
                changed = true;
                continue;
            }
            return changed;  // EAGAIN: read them all
        }
        buf[n] = '\0';  // the last string ends here even if the kernel's did not
        // "action@devpath\0KEY=value\0...": the subsystem names the kind.
        for (ssize_t at = 0; at < n; at += ssize_t(std::strlen(buf + at)) + 1) {
            if (std::strncmp(buf + at, "SUBSYSTEM=infiniband", 20) == 0) changed = true;
        }
    }
}

std::vector<std::string> device_watch::list() {
    std::vector<std::string> names;
    int n = 0;
    ibv_device **devs = ibv_get_device_list(&n);
    if (!devs) return names;  // ENOSYS: no RDMA at all, i.e. none
    for (int i = 0; i < n; ++i) names.emplace_back(ibv_get_device_name(devs[i]));
    ibv_free_device_list(devs);
    return names;
}

}  // namespace traffic
