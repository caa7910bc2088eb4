//! A simulated host: its device list and the twin of the kernel's device
//! uevents, as a monitor's [`DeviceSource`].
//!
//! [`SimHost`] lists the devices a script has not unplugged, opens them anew
//! (a fresh pipe: a device that comes back is a new device), and owns a
//! non-blocking pipe that [`SimHandle::unplug`] and [`SimHandle::plug`]
//! write a byte into, so a monitor waiting on it wakes as it would on a
//! uevent, with zero idle wake-ups.

use std::io::{self, Read};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

use railwatch_core::DeviceSource;

use crate::device::{SimDevice, SimHandle};
use crate::fd;

/// The simulated host's device list and notifications.
pub struct SimHost {
    handles: Vec<SimHandle>,
    read: std::fs::File,
}

impl SimHost {
    /// A host with these devices (in this order); each handle's
    /// `unplug`/`plug` wakes it from now on.
    pub fn new(handles: Vec<SimHandle>) -> io::Result<SimHost> {
        let (read, write, _) = fd::record_pipe()?;
        let write = Arc::new(std::fs::File::from(write));
        for h in &handles {
            h.set_notify(write.clone());
        }
        Ok(SimHost { handles, read: std::fs::File::from(read) })
    }

    /// The notification pipe's read end (non-blocking).
    pub fn fd(&self) -> RawFd {
        self.read.as_raw_fd()
    }

    /// Reads the notification pipe to `WouldBlock`; whether anything was
    /// there.
    pub fn drain(&mut self) -> io::Result<bool> {
        let mut buf = [0u8; 64];
        let mut any = false;
        loop {
            match self.read.read(&mut buf) {
                Ok(0) => return Ok(any),
                Ok(_) => any = true,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(any),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// The names of the devices in the list.
    pub fn list(&self) -> Vec<String> {
        self.handles.iter().filter(|h| h.is_listed()).map(|h| h.name().to_string()).collect()
    }

    /// Opens the listed device called `name` anew (`ENODEV` if it is not
    /// listed).
    pub fn open(&mut self, name: &str) -> io::Result<SimDevice> {
        match self.handles.iter().find(|h| h.name() == name) {
            Some(h) => h.open_anew(),
            None => Err(io::Error::from_raw_os_error(libc::ENODEV)),
        }
    }
}

impl DeviceSource for SimHost {
    type Device = SimDevice;

    fn fd(&self) -> Option<RawFd> {
        Some(SimHost::fd(self))
    }

    fn drain(&mut self) -> io::Result<bool> {
        SimHost::drain(self)
    }

    fn list(&mut self) -> io::Result<Vec<String>> {
        Ok(SimHost::list(self))
    }

    fn open(&mut self, name: &str) -> io::Result<SimDevice> {
        SimHost::open(self, name)
    }
}
