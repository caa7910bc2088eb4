//! Scripted devices: [`SimDevice`] (what the monitor owns) and [`SimHandle`]
//! (what a script or test keeps to make things happen to it).

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use railwatch_core::{
    AsyncEvent, Carrier, Element, EventKind, Gid, GidType, LinkAttrs, LinkLayer, PortAddress, PortCounters, PortState,
    VerbsPort,
};

use crate::fd::{self, EventPipe};

/// One port of a simulated device: its number, the state a port query
/// returns and its link attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortSpec {
    /// Port number (1-based, as libibverbs numbers them).
    pub port: u8,
    /// What [`VerbsPort::port_state`] returns.
    pub state: PortState,
    /// What [`VerbsPort::link`] returns.
    pub link: LinkAttrs,
}

impl PortSpec {
    /// NDR (speed code 128).
    pub const NDR: u32 = 128;
    /// 4x (width code 2).
    pub const WIDTH_4X: u8 = 2;

    /// A port with the given state and link attributes.
    pub const fn new(port: u8, state: PortState, link: LinkAttrs) -> PortSpec {
        PortSpec { port, state, link }
    }

    /// An ACTIVE NDR 4x (400 Gb/s) port.
    pub fn active(port: u8) -> PortSpec {
        PortSpec::new(port, PortState::Active, LinkAttrs::new(Self::NDR, Self::WIDTH_4X))
    }

    /// The same port in another state.
    pub const fn with_state(self, state: PortState) -> PortSpec {
        PortSpec { state, ..self }
    }
}

/// What happened to one simulated device so far. All counts are cumulative
/// over the device's life, across closes and re-opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SimCounters {
    /// Events accepted into the device's queue ([`SimHandle::queue`] and
    /// friends), counting every repeat.
    pub queued: u64,
    /// Events [`VerbsPort::get_event`] returned.
    pub read: u64,
    /// Events acknowledged. The simulator acknowledges inside `get_event`
    /// right after copying the event out, as the real backend does, so this
    /// equals `read`; an error acknowledges nothing.
    pub acked: u64,
    /// Every [`VerbsPort::get_event`] call, including those that returned an
    /// error (`WouldBlock` included).
    pub gets: u64,
    /// Every [`VerbsPort::port_state`] call, including failed ones.
    pub port_queries: u64,
    /// Every [`VerbsPort::link`] call, including failed ones.
    pub link_queries: u64,
    /// Events that were never read: queued while the device was removed or
    /// closed, or still queued when it was removed, closed or re-opened.
    pub dropped: u64,
    /// Successful [`VerbsPort::reopen`] calls.
    pub reopens: u64,
}

/// A read fault that persists until the fd is replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReadFault {
    Eio,
    Ebadf,
}

#[derive(Debug)]
struct Shared {
    ports: BTreeMap<u8, (PortState, LinkAttrs)>,
    /// `None` while the device is closed.
    pipe: Option<EventPipe>,
    /// Removed and not restored yet.
    removed: bool,
    /// The context held when the device was removed is dead, restored or
    /// not, until it is closed and opened again (a re-open): the kernel's
    /// held context keeps failing with `ENODEV`.
    dead: bool,
    eintr_pending: u64,
    read_fault: Option<ReadFault>,
    counters: SimCounters,
    /// In the host's device list ([`SimHandle::unplug`] takes it out).
    listed: bool,
    /// Bumped each time a [`SimHost`](crate::SimHost) opens the device
    /// anew: a `SimDevice` of an older epoch is stale and its close does
    /// nothing to the new one.
    epoch: u64,
    /// The notification fds of the hosts that list this device; one that
    /// was dropped is skipped and forgotten.
    notify: Vec<Weak<HostFds>>,
    /// Scripted GID tables: (port, index) → GID. `None` until a script sets
    /// one: the device then reads no address (`Unsupported`).
    gids: Option<BTreeMap<(u8, u32), [u8; 16]>>,
    /// Scripted flap counters by port; a port without any answers
    /// `Unsupported` (as an older driver's does).
    flap_counters: BTreeMap<u8, PortCounters>,
    /// Scripted netdev carriers by port; a port without one has no netdev
    /// (`Unsupported`).
    carriers: BTreeMap<u8, Carrier>,
}

/// A simulated host's two notification eventfds, which its devices add to:
/// the twin of the kernel's device uevents, and of rtnetlink's link
/// messages.
#[derive(Debug)]
pub(crate) struct HostFds {
    pub(crate) devices: std::fs::File,
    pub(crate) carriers: std::fs::File,
}

impl Shared {
    fn port(&mut self, name: &str, port: u8) -> &mut (PortState, LinkAttrs) {
        match self.ports.get_mut(&port) {
            Some(p) => p,
            None => panic!("simulated device {name} has no port {port}"),
        }
    }

    fn queue(&mut self, event: AsyncEvent, repeat: u64) -> u64 {
        let accepted = match self.pipe.as_mut() {
            Some(pipe) if !self.removed => match pipe.push(fd::encode(&event), repeat) {
                Ok(accepted) => accepted,
                // The pipe is ours and non-blocking: a write error other than
                // EAGAIN means something is badly wrong with the process.
                Err(e) => panic!("simulated event pipe failed: {e}"),
            },
            _ => false,
        };
        if accepted {
            self.counters.queued += repeat;
            repeat
        } else {
            self.counters.dropped += repeat;
            0
        }
    }
}

struct Inner {
    name: String,
    state: Mutex<Shared>,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Shared> {
        // A panic elsewhere never leaves Shared half-updated in a way that
        // matters to a test: keep going with the data.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A simulated RDMA device behind a real non-blocking pipe.
///
/// The monitor owns it through [`VerbsPort`]; a script keeps a [`SimHandle`]
/// (from [`SimDevice::handle`]) to queue events, change port states and
/// inject faults. Both share one state under a mutex, so the handle may be
/// used from another thread.
///
/// Read order of the checks in [`get_event`](VerbsPort::get_event): a closed
/// device fails with `EBADF`; a removed device (its fd is dead) with `EIO`;
/// then pending `EINTR`s are consumed one per call; then an `eio`/`ebadf`
/// fault fails every read; otherwise one record is read from the pipe
/// (`WouldBlock` when it is empty).
pub struct SimDevice {
    inner: Arc<Inner>,
    epoch: u64,
}

/// The script's side of a [`SimDevice`]: cheap to clone, shares the
/// device's state.
#[derive(Clone)]
pub struct SimHandle {
    inner: Arc<Inner>,
}

impl fmt::Debug for SimDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimDevice").field("name", &self.inner.name).finish_non_exhaustive()
    }
}

impl fmt::Debug for SimHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimHandle").field("name", &self.inner.name).finish_non_exhaustive()
    }
}

fn os_err(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}

impl SimDevice {
    /// A device named `name` with the given ports, opened (its pipe exists).
    ///
    /// Errors: `InvalidInput` for no ports, port 0 or a duplicate port
    /// number; the OS error if the pipe cannot be created.
    pub fn new(name: impl Into<String>, ports: &[PortSpec]) -> io::Result<SimDevice> {
        let name = name.into();
        if ports.is_empty() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("device {name} has no ports")));
        }
        let mut map = BTreeMap::new();
        for p in ports {
            if p.port == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("device {name}: port 0 does not exist"),
                ));
            }
            if map.insert(p.port, (p.state, p.link)).is_some() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("device {name}: port {} declared twice", p.port),
                ));
            }
        }
        let shared = Shared {
            ports: map,
            pipe: Some(EventPipe::new()?),
            removed: false,
            dead: false,
            eintr_pending: 0,
            read_fault: None,
            counters: SimCounters::default(),
            listed: true,
            epoch: 0,
            notify: Vec::new(),
            gids: None,
            flap_counters: BTreeMap::new(),
            carriers: BTreeMap::new(),
        };
        Ok(SimDevice { inner: Arc::new(Inner { name, state: Mutex::new(shared) }), epoch: 0 })
    }

    /// A handle to script this device.
    pub fn handle(&self) -> SimHandle {
        SimHandle { inner: self.inner.clone() }
    }

    /// The device's counters.
    pub fn counters(&self) -> SimCounters {
        self.inner.lock().counters
    }

    /// Whether the device was opened anew since this one was (by a host,
    /// or [`SimHandle::open`]): this one then reads and closes nothing of
    /// the new one's.
    pub fn is_stale(&self) -> bool {
        self.inner.lock().epoch != self.epoch
    }

    /// A duplicate of the async fd (same pipe, same readiness), for an
    /// engine that waits on it with its own epoll and reads events through
    /// [`get_event`](VerbsPort::get_event). `EBADF` while closed.
    pub fn try_clone_async_fd(&self) -> io::Result<std::os::fd::OwnedFd> {
        self.inner.lock().pipe.as_ref().ok_or_else(|| os_err(libc::EBADF))?.try_clone_read()
    }
}

impl VerbsPort for SimDevice {
    fn name(&self) -> &str {
        &self.inner.name
    }

    fn ports(&self) -> Vec<u8> {
        self.inner.lock().ports.keys().copied().collect()
    }

    /// The pipe's read end, or -1 while the device is closed.
    fn async_fd(&self) -> RawFd {
        self.inner.lock().pipe.as_ref().map_or(-1, EventPipe::read_fd)
    }

    fn get_event(&mut self) -> io::Result<AsyncEvent> {
        let mut s = self.inner.lock();
        s.counters.gets += 1;
        let s = &mut *s;
        let Some(pipe) = s.pipe.as_mut() else { return Err(os_err(libc::EBADF)) };
        if !pipe.is_live() {
            return Err(os_err(libc::EIO));
        }
        if s.eintr_pending > 0 {
            s.eintr_pending -= 1;
            return Err(os_err(libc::EINTR));
        }
        match s.read_fault {
            Some(ReadFault::Eio) => return Err(os_err(libc::EIO)),
            Some(ReadFault::Ebadf) => return Err(os_err(libc::EBADF)),
            None => {}
        }
        let record = pipe.read_one()?;
        let event = fd::decode(&record)?;
        // Copied out: acknowledge now, exactly once.
        s.counters.read += 1;
        s.counters.acked += 1;
        Ok(event)
    }

    /// The port's state. Errors: `ENODEV` while the device is removed (and
    /// on the context held since, restored or not, until a re-open),
    /// `EBADF` while it is closed, `EINVAL` for a port it does not have.
    fn port_state(&mut self, port: u8) -> io::Result<PortState> {
        let mut s = self.inner.lock();
        s.counters.port_queries += 1;
        check_queryable(&s, port)?;
        Ok(s.ports[&port].0)
    }

    /// The port's link attributes; the same errors as `port_state`.
    fn link(&mut self, port: u8) -> io::Result<LinkAttrs> {
        let mut s = self.inner.lock();
        s.counters.link_queries += 1;
        check_queryable(&s, port)?;
        Ok(s.ports[&port].1)
    }

    /// The scripted GID table of the port (RoCE v2 entries on an Ethernet
    /// link); `Unsupported` while the script set no GID on the device.
    fn address(&mut self, port: u8) -> io::Result<PortAddress> {
        let s = self.inner.lock();
        check_queryable(&s, port)?;
        let Some(table) = &s.gids else { return Err(io::ErrorKind::Unsupported.into()) };
        let gids = table
            .range((port, 0)..=(port, u32::MAX))
            .map(|(&(_, index), &raw)| Gid { index, raw, kind: GidType::RoceV2 })
            .collect();
        Ok(PortAddress { link_layer: Some(LinkLayer::Ethernet), lid: 0, gids, netdev: None })
    }

    /// The scripted flap counters of the port; `Unsupported` while the
    /// script set none on it.
    fn flap_counters(&mut self, port: u8) -> io::Result<PortCounters> {
        let s = self.inner.lock();
        check_queryable(&s, port)?;
        s.flap_counters.get(&port).copied().ok_or_else(|| io::ErrorKind::Unsupported.into())
    }

    /// The scripted carrier of the port's netdev; `Unsupported` while the
    /// script set none on it (no netdev).
    fn carrier(&mut self, port: u8) -> io::Result<Carrier> {
        let s = self.inner.lock();
        check_queryable(&s, port)?;
        s.carriers.get(&port).copied().ok_or_else(|| io::ErrorKind::Unsupported.into())
    }

    /// Closes the fd; events still queued are dropped. Idempotent, and a
    /// no-op on a stale device (the host opened the device anew since).
    fn close(&mut self) {
        let mut s = self.inner.lock();
        if s.epoch != self.epoch {
            return;
        }
        if let Some(mut pipe) = s.pipe.take() {
            s.counters.dropped += pipe.discard();
        }
        // No context is held any more: none is dead.
        s.dead = false;
    }

    /// Fails with `ENODEV` while the device is removed (until
    /// [`SimHandle::restore`]). Otherwise replaces the fd with a fresh pipe
    /// (dropping whatever the old one still held) and clears pending
    /// `EINTR`s and `eio`/`ebadf` faults, which belonged to the old fd.
    fn reopen(&mut self) -> io::Result<()> {
        let mut s = self.inner.lock();
        if s.removed {
            return Err(os_err(libc::ENODEV));
        }
        let fresh = EventPipe::new()?;
        if let Some(mut old) = s.pipe.replace(fresh) {
            s.counters.dropped += old.discard();
        }
        s.dead = false;
        s.eintr_pending = 0;
        s.read_fault = None;
        s.counters.reopens += 1;
        Ok(())
    }
}

impl Drop for SimDevice {
    /// The monitor's side owns the fd: dropping the device closes it even
    /// while handles live on (they then see a closed device).
    fn drop(&mut self) {
        self.close();
    }
}

/// Wakes every host that lists the device through the fd `which` picks
/// (adds 1 to an eventfd: never blocks, and, unlike a pipe whose reader is
/// gone, never raises SIGPIPE, which would kill a C host that freed its
/// monitor before unplugging).
fn notify(s: &mut Shared, which: fn(&HostFds) -> &std::fs::File) {
    s.notify.retain(|host| match host.upgrade() {
        Some(fds) => {
            let _ = std::io::Write::write(&mut which(&fds), &1u64.to_ne_bytes());
            true
        }
        None => false,
    });
}

fn check_queryable(s: &Shared, port: u8) -> io::Result<()> {
    if s.removed || s.dead {
        Err(os_err(libc::ENODEV))
    } else if s.pipe.is_none() {
        Err(os_err(libc::EBADF))
    } else if !s.ports.contains_key(&port) {
        Err(os_err(libc::EINVAL))
    } else {
        Ok(())
    }
}

impl SimHandle {
    /// The device's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The device's port numbers, ascending.
    pub fn ports(&self) -> Vec<u8> {
        self.inner.lock().ports.keys().copied().collect()
    }

    /// The device's counters.
    pub fn counters(&self) -> SimCounters {
        self.inner.lock().counters
    }

    /// Events queued and not read yet (0 while the device is closed).
    pub fn pending(&self) -> u64 {
        self.inner.lock().pipe.as_ref().map_or(0, EventPipe::pending)
    }

    /// Capacity of the current pipe in bytes (what `F_GETPIPE_SZ` says; 0
    /// while the device is closed). Events beyond it wait in memory.
    pub fn pipe_capacity(&self) -> usize {
        self.inner.lock().pipe.as_ref().map_or(0, EventPipe::capacity_bytes)
    }

    /// True while the device is removed (between [`remove`](Self::remove)
    /// and [`restore`](Self::restore)).
    pub fn is_removed(&self) -> bool {
        self.inner.lock().removed
    }

    /// True while the device is open (between creation or a successful
    /// re-open and [`VerbsPort::close`]).
    pub fn is_open(&self) -> bool {
        self.inner.lock().pipe.is_some()
    }

    /// Queues `repeat` copies of `event` into the device's pipe, behind
    /// everything already queued. Never blocks and loses nothing: what does
    /// not fit the pipe waits in memory and is moved in as the reader makes
    /// room.
    ///
    /// Returns how many were queued: `repeat`, or 0 when the device is
    /// removed, closed, or removed and not re-opened yet (those events are
    /// counted as dropped).
    pub fn queue(&self, event: AsyncEvent, repeat: u64) -> u64 {
        self.inner.lock().queue(event, repeat)
    }

    /// Sets what a port query returns from now on, without any event (the
    /// missed-event case).
    ///
    /// # Panics
    ///
    /// If the device has no such port.
    pub fn set_port_state(&self, port: u8, state: PortState) {
        self.inner.lock().port(&self.inner.name, port).0 = state;
    }

    /// Sets the port's link attributes from now on, without any event.
    ///
    /// # Panics
    ///
    /// If the device has no such port.
    pub fn set_link(&self, port: u8, link: LinkAttrs) {
        self.inner.lock().port(&self.inner.name, port).1 = link;
    }

    /// Sets the port's state and queues one port event (`kind` for `port`),
    /// atomically with respect to the reader. Returns how many were queued
    /// (see [`queue`](Self::queue)).
    ///
    /// # Panics
    ///
    /// If the device has no such port.
    pub fn set_port_state_with_event(&self, port: u8, state: PortState, kind: EventKind) -> u64 {
        let mut s = self.inner.lock();
        s.port(&self.inner.name, port).0 = state;
        s.queue(AsyncEvent::port(kind, u32::from(port)), 1)
    }

    /// The port goes DOWN and `PORT_ERR` is queued for it.
    ///
    /// # Panics
    ///
    /// If the device has no such port.
    pub fn port_down(&self, port: u8) -> u64 {
        self.set_port_state_with_event(port, PortState::Down, EventKind::PortErr)
    }

    /// The port goes ACTIVE and `PORT_ACTIVE` is queued for it.
    ///
    /// # Panics
    ///
    /// If the device has no such port.
    pub fn port_up(&self, port: u8) -> u64 {
        self.set_port_state_with_event(port, PortState::Active, EventKind::PortActive)
    }

    /// Sets the port's link attributes and queues `DEVICE_SPEED_CHANGE`
    /// (a device event: no element).
    ///
    /// # Panics
    ///
    /// If the device has no such port.
    pub fn set_link_with_event(&self, port: u8, link: LinkAttrs) -> u64 {
        let mut s = self.inner.lock();
        s.port(&self.inner.name, port).1 = link;
        s.queue(AsyncEvent::new(EventKind::DeviceSpeedChange.code(), Element::None), 1)
    }

    /// The next `n` reads fail with `EINTR` (added to any still pending).
    pub fn eintr(&self, n: u64) {
        let mut s = self.inner.lock();
        s.eintr_pending = s.eintr_pending.saturating_add(n);
    }

    /// From now on reads fail with `EIO`; the device itself lives (port
    /// queries still work, queued events stay queued). Cleared by a re-open.
    pub fn eio(&self) {
        self.inner.lock().read_fault = Some(ReadFault::Eio);
    }

    /// From now on reads fail with `EBADF`; otherwise like [`eio`](Self::eio).
    pub fn ebadf(&self) {
        self.inner.lock().read_fault = Some(ReadFault::Ebadf);
    }

    /// The device goes away: queued events are dropped and the pipe's write
    /// end is closed, so epoll reports a hang-up (`EPOLLHUP`; a pipe cannot
    /// raise `EPOLLERR` on its read end) and reads fail with `EIO`; port
    /// queries fail with `ENODEV` and [`VerbsPort::reopen`] with `ENODEV`
    /// until [`restore`](Self::restore). Events queued meanwhile are dropped.
    pub fn remove(&self) {
        let mut s = self.inner.lock();
        s.removed = true;
        s.dead = s.pipe.is_some();
        if let Some(pipe) = s.pipe.as_mut() {
            let dropped = pipe.close_write();
            s.counters.dropped += dropped;
        }
    }

    /// The device leaves the host's device list, silently, as a Soft-RoCE
    /// device does on `rdma link delete` while a handle is open: its fd says
    /// nothing, port queries keep answering, and only the list (and the
    /// host's notification, the twin of the kernel's uevent) tells.
    pub fn unplug(&self) {
        let mut s = self.inner.lock();
        s.listed = false;
        notify(&mut s, |h| &h.devices);
    }

    /// The device is in the host's device list again: a new device of the
    /// same name, which the host opens with a fresh fd.
    pub fn plug(&self) {
        let mut s = self.inner.lock();
        s.listed = true;
        s.removed = false;
        notify(&mut s, |h| &h.devices);
    }

    /// Sets GID table entry `index` of `port` (`None` empties it), silently:
    /// queue a `GID_CHANGE` to announce it. A device with any GID set reads
    /// addresses.
    ///
    /// # Panics
    ///
    /// If the device has no port `port`.
    pub fn set_gid(&self, port: u8, index: u32, gid: Option<[u8; 16]>) {
        let mut s = self.inner.lock();
        s.port(&self.inner.name, port);
        let table = s.gids.get_or_insert_with(BTreeMap::new);
        match gid {
            Some(raw) => table.insert((port, index), raw),
            None => table.remove(&(port, index)),
        };
    }

    /// Sets the port's flap counters from now on (silent: read with the
    /// next port query).
    ///
    /// # Panics
    ///
    /// If the device has no port `port`.
    pub fn set_flap_counters(&self, port: u8, counters: PortCounters) {
        let mut s = self.inner.lock();
        s.port(&self.inner.name, port);
        s.flap_counters.insert(port, counters);
    }

    /// Sets the carrier of the port's netdev from now on, silently (read
    /// with the next port query, as a lost rtnetlink message leaves it); a
    /// port with a carrier has a netdev. [`carrier_change`](Self::carrier_change)
    /// also notifies.
    ///
    /// # Panics
    ///
    /// If the device has no port `port`.
    pub fn set_carrier(&self, port: u8, carrier: Carrier) {
        let mut s = self.inner.lock();
        s.port(&self.inner.name, port);
        s.carriers.insert(port, carrier);
    }

    /// Sets the carrier and wakes every host that lists the device, as the
    /// kernel's rtnetlink link message does.
    ///
    /// # Panics
    ///
    /// If the device has no port `port`.
    pub fn carrier_change(&self, port: u8, carrier: Carrier) {
        self.set_carrier(port, carrier);
        notify(&mut self.inner.lock(), |h| &h.carriers);
    }

    /// The device reads addresses from now on (an empty GID table until
    /// [`set_gid`](Self::set_gid) fills it); before, or without this, a
    /// device with no GID set answers address reads with `Unsupported`, as
    /// a backend that cannot read them does (and is then not asked again).
    pub fn read_addresses(&self) {
        self.inner.lock().gids.get_or_insert_with(BTreeMap::new);
    }

    /// Whether the device is in the host's device list.
    pub fn is_listed(&self) -> bool {
        self.inner.lock().listed
    }

    /// Opens the device anew for a host: a fresh pipe, a new epoch (older
    /// `SimDevice`s of it become stale), faults cleared.
    pub(crate) fn open_anew(&self) -> io::Result<SimDevice> {
        let mut s = self.inner.lock();
        if !s.listed || s.removed {
            return Err(os_err(libc::ENODEV));
        }
        let fresh = EventPipe::new()?;
        if let Some(mut old) = s.pipe.replace(fresh) {
            s.counters.dropped += old.discard();
        }
        s.epoch += 1;
        s.dead = false;
        s.eintr_pending = 0;
        s.read_fault = None;
        Ok(SimDevice { inner: self.inner.clone(), epoch: s.epoch })
    }

    /// Adds a host's notification eventfds (held weakly: the host owns them).
    pub(crate) fn add_notify(&self, fd: &Arc<HostFds>) {
        self.inner.lock().notify.push(Arc::downgrade(fd));
    }

    /// Opens the device anew, as a host does when the list names it: a
    /// fresh fd (a new epoch: an older [`SimDevice`] of it becomes stale),
    /// faults cleared. `ENODEV` while unplugged or removed. For an engine
    /// that keeps its own loop and opens devices itself.
    pub fn open(&self) -> io::Result<SimDevice> {
        self.open_anew()
    }

    /// The device can be opened again: the next [`VerbsPort::reopen`]
    /// succeeds with a fresh pipe. The context held since the removal
    /// stays dead until that re-open, as the kernel's does: its fd reads
    /// `EIO` and its port queries fail with `ENODEV` (so a poll-only
    /// device removed and restored between two ticks is noticed). No-op
    /// unless removed.
    pub fn restore(&self) {
        self.inner.lock().removed = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_is_send_and_handle_is_send_sync() {
        fn send<T: Send>() {}
        fn sync<T: Sync>() {}
        send::<SimDevice>();
        send::<SimHandle>();
        sync::<SimHandle>();
    }

    #[test]
    fn new_refuses_bad_port_lists() {
        assert_eq!(SimDevice::new("d", &[]).unwrap_err().kind(), io::ErrorKind::InvalidInput);
        assert_eq!(SimDevice::new("d", &[PortSpec::active(0)]).unwrap_err().kind(), io::ErrorKind::InvalidInput);
        let dup = [PortSpec::active(1), PortSpec::active(1)];
        assert!(SimDevice::new("d", &dup).unwrap_err().to_string().contains("port 1 declared twice"));
    }

    #[test]
    #[should_panic(expected = "simulated device d has no port 2")]
    fn unknown_port_panics_in_the_script() {
        let dev = SimDevice::new("d", &[PortSpec::active(1)]).unwrap();
        dev.handle().set_port_state(2, PortState::Down);
    }
}
