//! The host's RDMA devices as a monitor's [`DeviceSource`]: the device
//! list, re-read when the kernel's device uevents say it may have changed.

use std::io;
use std::os::fd::RawFd;

use railwatch_core::DeviceSource;

use crate::{UeventSocket, VerbsDevice, list_devices};

/// The device list (restricted to one name if asked), with the uevent
/// socket's fd when it could be opened; without it the monitor rescans on
/// its timer.
pub struct HostDevices {
    uevents: Option<UeventSocket>,
    only: Option<String>,
}

impl HostDevices {
    /// Every device (or only the one called `only`). The error says why
    /// there are no uevents, if there are none (the source still works, by
    /// rescans).
    pub fn new(only: Option<String>) -> (HostDevices, Option<io::Error>) {
        match UeventSocket::open() {
            Ok(s) => (HostDevices { uevents: Some(s), only }, None),
            Err(e) => (HostDevices { uevents: None, only }, Some(e)),
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
