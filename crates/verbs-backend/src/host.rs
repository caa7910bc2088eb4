//! The host's RDMA devices as a monitor's [`DeviceSource`]: the device
//! list, re-read when the kernel's device uevents say it may have changed,
//! and the ports' carriers, read when a link message says one may have.

use std::io;
use std::os::fd::RawFd;

use railwatch_core::DeviceSource;

use crate::{LinkSocket, UeventSocket, VerbsDevice, list_devices};

/// The device list (restricted to one name if asked), with the uevent
/// socket's fd when it could be opened (without it the monitor rescans on
/// its timer) and the link socket's (without it carriers are read with
/// port queries only).
pub struct HostDevices {
    uevents: Option<UeventSocket>,
    links: Option<LinkSocket>,
    only: Option<String>,
}

impl HostDevices {
    /// Every device (or only the one called `only`). The error says why
    /// there are no uevents, if there are none (the source still works, by
    /// rescans).
    pub fn new(only: Option<String>) -> (HostDevices, Option<io::Error>) {
        let links = LinkSocket::open()
            .inspect_err(|e| log::warn!("no link messages ({e}): carriers are read with port queries only"))
            .ok();
        match UeventSocket::open() {
            Ok(s) => (HostDevices { uevents: Some(s), links, only }, None),
            Err(e) => (HostDevices { uevents: None, links, only }, Some(e)),
        }
    }
}

impl DeviceSource for HostDevices {
    type Device = VerbsDevice;

    fn fd(&self) -> Option<RawFd> {
        self.uevents.as_ref().map(UeventSocket::fd)
    }

    fn drain(&mut self) -> io::Result<bool> {
        self.uevents.as_mut().map_or(Ok(true), UeventSocket::drain)
    }

    fn carrier_fd(&self) -> Option<RawFd> {
        self.links.as_ref().map(LinkSocket::fd)
    }

    fn drain_carriers(&mut self) -> io::Result<bool> {
        self.links.as_mut().map_or(Ok(false), LinkSocket::drain)
    }

    fn list(&mut self) -> io::Result<Vec<String>> {
        let mut names = list_devices().map_err(io::Error::other)?;
        if let Some(only) = &self.only {
            names.retain(|n| n == only);
        }
        Ok(names)
    }

    fn open(&mut self, name: &str) -> io::Result<VerbsDevice> {
        VerbsDevice::open(name).map_err(io::Error::other)
    }
}
