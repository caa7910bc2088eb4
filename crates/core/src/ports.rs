//! The ports of the hexagon: what the monitor needs from a device backend
//! ([`VerbsPort`]) and what it drives in the engine ([`Selector`]).

use std::fmt;
use std::io;
use std::os::fd::RawFd;

use crate::address::PortAddress;
use crate::counters::PortCounters;
use crate::event::AsyncEvent;
use crate::identity::RailIdentity;
use crate::port::{Carrier, LinkAttrs, LinkRate, PortState};

/// One opened RDMA device, as the monitor sees it.
///
/// Implemented by the verbs backend over libibverbs and by the simulator.
/// The monitor is the only reader of a device's events (several readers of
/// one async fd get an unpredictable split of its events).
pub trait VerbsPort {
    /// The device name (`"mlx5_0"`).
    fn name(&self) -> &str;

    /// The physical port numbers of the device (1-based, as libibverbs
    /// numbers them).
    fn ports(&self) -> Vec<u8>;

    /// The async-event fd, already set `O_NONBLOCK`. The monitor registers
    /// it edge-triggered, so it calls [`get_event`](Self::get_event) until
    /// `WouldBlock` after every wake-up.
    fn async_fd(&self) -> RawFd;

    /// Reads one event, copies its fields out, acknowledges it exactly once
    /// and returns the owned copy.
    ///
    /// Errors: [`io::ErrorKind::WouldBlock`] when the queue is empty (the
    /// drain is over), [`io::ErrorKind::Interrupted`] for EINTR (retry), any
    /// other kind for a real failure (EIO when the device is gone): the
    /// monitor stops reading this fd and falls back to polling. No event is
    /// acknowledged when an error is returned.
    fn get_event(&mut self) -> io::Result<AsyncEvent>;

    /// Queries the port's state (`ibv_query_port`). An error (ENODEV when the
    /// device is gone) is reported, never turned into a state.
    fn port_state(&mut self, port: u8) -> io::Result<PortState>;

    /// Reads the port's link attributes (speed, width, effective speed).
    fn link(&mut self, port: u8) -> io::Result<LinkAttrs>;

    /// Reads the carrier of the port's netdev (its operstate, or the
    /// `carrier` flag where the operstate is unknown), read with every port
    /// query and after a carrier notification. The default says
    /// `Unsupported`, as a port with no netdev does: the machine then
    /// judges the port by its state alone.
    fn carrier(&mut self, port: u8) -> io::Result<Carrier> {
        let _ = port;
        Err(io::ErrorKind::Unsupported.into())
    }

    /// Reads the port's address: link layer, LID, the non-empty GID table
    /// entries with their types, the netdev. The default says
    /// `Unsupported`: the machine then treats every `LID_CHANGE` /
    /// `GID_CHANGE` as an address change.
    fn address(&mut self, port: u8) -> io::Result<PortAddress> {
        let _ = port;
        Err(io::ErrorKind::Unsupported.into())
    }

    /// Reads the port's flap counters (`link_downed`; for an Ethernet link
    /// layer the netdev's `carrier_changes` and `carrier_down_count`). The
    /// default says `Unsupported`: the machine then stops asking for the
    /// port (silent flaps are not looked for on it).
    fn flap_counters(&mut self, port: u8) -> io::Result<PortCounters> {
        let _ = port;
        Err(io::ErrorKind::Unsupported.into())
    }

    /// Reads what names the rail on `port` across boots and renames: the
    /// device's node GUID and PCI address, the port's GUID (see
    /// [`RailIdentity`]). Read when the device is attached and after a
    /// re-open, never on the event path. The default says `Unsupported`:
    /// the rail is then named by its device and port only.
    fn identity(&mut self, port: u8) -> io::Result<RailIdentity> {
        let _ = port;
        Err(io::ErrorKind::Unsupported.into())
    }

    /// Closes the device (its fd leaves the monitor first). Idempotent.
    fn close(&mut self);

    /// Opens the device again after it went away; on success
    /// [`async_fd`](Self::async_fd) is a new, non-blocking fd.
    fn reopen(&mut self) -> io::Result<()>;
}

/// Identifies a rail inside one monitor: the device's index (in the order
/// devices were added) and the port number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RailId {
    /// Index of the device in the monitor.
    pub device: u32,
    /// Port number on that device.
    pub port: u8,
}

impl fmt::Display for RailId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "dev{}/{}", self.device, self.port)
    }
}

/// What the engine's rail selector must offer the monitor.
///
/// Called only from the monitor thread, but `&self` so that the engine can
/// share one selector with its workers. The monitor's order is a contract:
/// on activation it re-seeds bandwidth *before* marking a rail available,
/// and on pause it changes the rail's state *before* marking it unavailable,
/// so no worker ever scores a rail on a stale rate.
pub trait Selector {
    /// The rail may (or may no longer) be picked.
    fn set_available(&self, rail: RailId, available: bool);

    /// The rail's link rate changed (or is seeded for the first time).
    fn reseed(&self, rail: RailId, rate: LinkRate);
}

impl<S: Selector + ?Sized> Selector for std::sync::Arc<S> {
    fn set_available(&self, rail: RailId, available: bool) {
        (**self).set_available(rail, available)
    }

    fn reseed(&self, rail: RailId, rate: LinkRate) {
        (**self).reseed(rail, rate)
    }
}

/// A selector that ignores everything, for monitors whose engine only
/// uses gates and notifications.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSelector;

impl Selector for NoSelector {
    fn set_available(&self, _rail: RailId, _available: bool) {}
    fn reseed(&self, _rail: RailId, _rate: LinkRate) {}
}

/// Where a monitor's devices come from: the host's device list, opened on
/// demand, and an fd that says when the list may have changed (the
/// runtime's hotplug).
pub trait DeviceSource: Send {
    /// The devices it opens.
    type Device: VerbsPort;

    /// An fd that becomes readable when the device list may have changed
    /// (non-blocking; registered edge-triggered, so
    /// [`drain`](Self::drain) reads it until `WouldBlock`). `None`: the
    /// monitor rescans on its timer.
    fn fd(&self) -> Option<RawFd>;

    /// Reads what made the fd readable, to `WouldBlock`. Returns whether the
    /// device list may have changed (a lost notification, such as a full
    /// socket buffer, counts as a change).
    fn drain(&mut self) -> io::Result<bool>;

    /// The names of the devices present now.
    fn list(&mut self) -> io::Result<Vec<String>>;

    /// An fd that becomes readable when a netdev's carrier may have changed
    /// (rtnetlink link messages; non-blocking, registered edge-triggered,
    /// read by [`drain_carriers`](Self::drain_carriers)). `None` (the
    /// default): carriers are read only with port queries.
    fn carrier_fd(&self) -> Option<RawFd> {
        None
    }

    /// Reads what made [`carrier_fd`](Self::carrier_fd) readable, a bounded
    /// amount per call. Returns whether a carrier may have changed (lost
    /// messages count as a change): the monitor then reads every port's
    /// carrier once.
    fn drain_carriers(&mut self) -> io::Result<bool> {
        Ok(false)
    }

    /// Opens the device called `name`.
    fn open(&mut self, name: &str) -> io::Result<Self::Device>;
}
