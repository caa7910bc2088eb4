//! The kernel's link messages (rtnetlink `NETLINK_ROUTE`, group
//! `RTMGRP_LINK`), as a trigger to read the ports' netdev carriers.
//!
//! Every netdev's change of operstate or carrier is told as an
//! `RTM_NEWLINK` message, after sysfs says the new state. The messages are
//! not parsed: any of them (or a lost one, `ENOBUFS`) means "read the
//! carriers", which is a few sysfs reads per port; a host whose other
//! interfaces churn costs those reads and nothing more. A drain reads at
//! most `DRAIN_BUDGET` messages, so a flood cannot hold the monitor: what
//! is left is older than the read that follows, and a new message wakes it.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// Messages read per drain, at most.
const DRAIN_BUDGET: usize = 64;

/// A non-blocking socket of the kernel's link messages.
#[derive(Debug)]
pub struct LinkSocket {
    fd: OwnedFd,
}

impl LinkSocket {
    /// Opens and binds the socket (no privilege is needed to listen).
    pub fn open() -> io::Result<LinkSocket> {
        let fd = crate::uevent::open_netlink(libc::SOCK_RAW, libc::NETLINK_ROUTE, libc::RTMGRP_LINK as u32)?;
        Ok(LinkSocket { fd })
    }

    /// The socket, for epoll (non-blocking; read it with
    /// [`drain`](Self::drain)).
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Reads pending link messages, at most `DRAIN_BUDGET` (64); returns
    /// whether any arrived or some were lost (the carriers must be read).
    pub fn drain(&mut self) -> io::Result<bool> {
        let mut buf = [0u8; 4096];
        let mut seen = false;
        for _ in 0..DRAIN_BUDGET {
            // SAFETY: `buf` is valid for writes of its length; recv writes
            // at most that many bytes (a longer message is truncated,
            // which is fine: it is not parsed).
            let n = unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), libc::MSG_TRUNC) };
            if n >= 0 {
                seen = true;
                continue;
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EAGAIN) => return Ok(seen),
                Some(libc::EINTR) => {}
                // The socket's buffer overflowed: messages were lost.
                Some(libc::ENOBUFS) => seen = true,
                _ => return Err(e),
            }
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_opens_and_drains_empty() {
        // Containers may forbid netlink; where it opens, an idle drain
        // reports nothing (a link changing meanwhile would say so).
        if let Ok(mut s) = LinkSocket::open() {
            assert!(s.fd() >= 0);
            let _ = s.drain().expect("a drain of an idle socket");
        }
    }
}
