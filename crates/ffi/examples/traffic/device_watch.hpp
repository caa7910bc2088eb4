// device_watch.hpp: the kernel's device uevents, for the loop's epoll set.
//
// A Soft-RoCE device that leaves (`rdma link delete`) says nothing on its
// async fd, keeps answering port queries, and the kernel's removal waits
// until every handle on it is closed: the engine learns of it from the
// `infiniband_verbs` remove uevent, rescans the device list and tells the
// machine (rw_machine_handle_removed), which asks to close the device.
//
// railwatch's C API is gaining the same (rw_uevents_open, rw_uevents_fd,
// rw_machine_handle_uevents: the machine then lists the devices itself and
// asks to open one that appeared); switching to it replaces this file and
// railwatch_loop::rescan.
#pragma once

#include <string>
#include <vector>

namespace traffic {

class device_watch {
public:
    device_watch();  // throws verbs_error
    ~device_watch();
    device_watch(const device_watch &) = delete;
    device_watch &operator=(const device_watch &) = delete;

    int fd() const { return fd_; }
    // Reads every pending uevent (to EAGAIN); true when the device list may
    // have changed: an infiniband or infiniband_verbs one, or some were
    // lost (ENOBUFS).
    bool read_changed();
    // The libibverbs device names now.
    static std::vector<std::string> list();

private:
    int fd_ = -1;
};

}  // namespace traffic
