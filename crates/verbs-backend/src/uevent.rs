//! The kernel's device uevents (netlink `NETLINK_KOBJECT_UEVENT`, group 1),
//! as a trigger to rescan the RDMA device list.
//!
//! A Soft-RoCE device deleted while a handle is open says nothing on its
//! async fd and may still answer port queries; the kernel's removal waits
//! for the last handle. The `remove@…/infiniband_verbs/uverbsN` uevent (and
//! the device list) are the only signs, so a monitor waits on this socket
//! with its devices' fds and rescans the list when an `infiniband` or
//! `infiniband_verbs` uevent arrives, or when uevents were lost (`ENOBUFS`).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// A non-blocking socket of the kernel's device uevents.
#[derive(Debug)]
pub struct UeventSocket {
    fd: OwnedFd,
}

/// Whether a uevent message concerns RDMA devices: its first line is
/// `action@devpath`, and its `SUBSYSTEM=` key is `infiniband` or
/// `infiniband_verbs`.
pub fn is_rdma_uevent(message: &[u8]) -> bool {
    message.split(|&b| b == 0).any(|field| field == b"SUBSYSTEM=infiniband" || field == b"SUBSYSTEM=infiniband_verbs")
}

impl UeventSocket {
    /// Opens and binds the socket (no privilege is needed to listen).
    pub fn open() -> io::Result<UeventSocket> {
        let fd = open_netlink(libc::SOCK_DGRAM, libc::NETLINK_KOBJECT_UEVENT, 1)?;
        Ok(UeventSocket { fd })
    }

    /// The socket, for epoll (non-blocking; read it with
    /// [`drain`](Self::drain) until it says so).
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Reads every pending uevent; returns whether one concerned RDMA
    /// devices, or some were lost (the list must be rescanned then).
    pub fn drain(&mut self) -> io::Result<bool> {
        let mut buf = [0u8; 8192];
        let mut rdma = false;
        loop {
            // SAFETY: `buf` is valid for writes of its length; recv writes
            // at most that many bytes.
            let n = unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n >= 0 {
                rdma |= is_rdma_uevent(&buf[..n as usize]);
                continue;
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EAGAIN) => return Ok(rdma),
                Some(libc::EINTR) => {}
                // The socket's buffer overflowed: uevents were lost.
                Some(libc::ENOBUFS) => rdma = true,
                _ => return Err(e),
            }
        }
    }
}

/// A non-blocking netlink socket of `protocol` (`socket_type` `SOCK_DGRAM`
/// or `SOCK_RAW`), bound to the multicast `groups`: the uevent socket's
/// and the link socket's (no privilege is needed to listen).
pub(crate) fn open_netlink(socket_type: i32, protocol: i32, groups: u32) -> io::Result<OwnedFd> {
    // SAFETY: a plain socket(2) call with integer arguments; the
    // result is checked before use.
    let raw =
        unsafe { libc::socket(libc::AF_NETLINK, socket_type | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, protocol) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a new, valid descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: sockaddr_nl is plain data; all-zero is a valid value.
    let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    addr.nl_groups = groups;
    // SAFETY: `addr` is a valid sockaddr_nl and the length is its size.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rdma_uevents_are_told_apart() {
        let uverbs = b"remove@/devices/virtual/infiniband_verbs/uverbs0\0ACTION=remove\0SUBSYSTEM=infiniband_verbs\0";
        let ib = b"add@/devices/virtual/infiniband/rxe0\0ACTION=add\0SUBSYSTEM=infiniband\0";
        let net = b"add@/devices/virtual/net/veth0\0ACTION=add\0SUBSYSTEM=net\0";
        let lookalike = b"add@/x\0SUBSYSTEM=infiniband_mad\0";
        assert!(is_rdma_uevent(uverbs) && is_rdma_uevent(ib));
        assert!(!is_rdma_uevent(net) && !is_rdma_uevent(lookalike));
    }

    #[test]
    fn the_socket_opens_and_drains_empty() {
        // Containers may forbid netlink; where it opens, an idle drain
        // reports nothing.
        if let Ok(mut s) = UeventSocket::open() {
            assert!(s.fd() >= 0);
            let _ = s.drain().expect("a drain of an idle socket");
        }
    }
}
