//! A simulated host: its device list and the twins of the kernel's device
//! uevents and rtnetlink link messages, as a monitor's [`DeviceSource`].
//!
//! [`SimHost`] lists the devices a script has not unplugged, opens them anew
//! (a fresh pipe: a device that comes back is a new device), and owns two
//! non-blocking eventfds: [`SimHandle::unplug`] and [`SimHandle::plug`] add
//! to the first, so a monitor waiting on it wakes as it would on a uevent,
//! with zero idle wake-ups; [`SimHandle::carrier_change`] adds to the
//! second, as a netdev's link message would. Several hosts may list the
//! same devices: each has its own eventfds.

use std::io::{self, Read};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

use railwatch_core::DeviceSource;

use crate::device::{HostFds, SimDevice, SimHandle};
use crate::fd;

/// The simulated host's device list and notifications.
pub struct SimHost {
    handles: Vec<SimHandle>,
    /// The eventfds the devices add to; they hold them weakly.
    notify: Arc<HostFds>,
}

impl SimHost {
    /// A host with these devices (in this order); each handle's
    /// `unplug`/`plug` wakes it from now on.
    pub fn new(handles: Vec<SimHandle>) -> io::Result<SimHost> {
        let notify = Arc::new(HostFds {
            devices: std::fs::File::from(fd::event_fd()?),
            carriers: std::fs::File::from(fd::event_fd()?),
        });
        for h in &handles {
            h.add_notify(&notify);
        }
        Ok(SimHost { handles, notify })
    }

    /// The device-list notification eventfd (non-blocking).
    pub fn fd(&self) -> RawFd {
        self.notify.devices.as_raw_fd()
    }

    /// Reads the device-list notification eventfd (which empties it);
    /// whether anything was there.
    pub fn drain(&mut self) -> io::Result<bool> {
        read_eventfd(&self.notify.devices)
    }

    /// The carrier notification eventfd (non-blocking).
    pub fn carrier_fd(&self) -> RawFd {
        self.notify.carriers.as_raw_fd()
    }

    /// Reads the carrier notification eventfd; whether anything was there.
    pub fn drain_carriers(&mut self) -> io::Result<bool> {
        read_eventfd(&self.notify.carriers)
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

/// Reads an eventfd (which empties it); whether anything was there.
fn read_eventfd(mut fd: &std::fs::File) -> io::Result<bool> {
    let mut count = [0u8; 8];
    loop {
        match fd.read(&mut count) {
            Ok(_) => return Ok(true),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
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

    fn carrier_fd(&self) -> Option<RawFd> {
        Some(SimHost::carrier_fd(self))
    }

    fn drain_carriers(&mut self) -> io::Result<bool> {
        SimHost::drain_carriers(self)
    }

    fn open(&mut self, name: &str) -> io::Result<SimDevice> {
        SimHost::open(self, name)
    }
}
