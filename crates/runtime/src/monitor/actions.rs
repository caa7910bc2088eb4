//! Carrying out the machine's actions: each answer is fed back at once, and
//! every input passes the observer first.

use std::borrow::Cow;
use std::os::fd::RawFd;

use mio::unix::SourceFd;
use mio::{Interest, Token};
use railwatch_core::{Action, Clock, Errno, Happening, Input, Millis, RailId, Selector, VerbsPort};

use super::{Monitor, errno_of, log_line};
use crate::device::DeviceSlot;
use crate::observe::Observed;

/// What a device without a handle answers (it was never opened).
const ENODEV: Errno = Errno(19);

impl<P: VerbsPort, S: Selector, C: Clock> Monitor<P, S, C> {
    /// Carries out every action the machine asks for, feeding each answer
    /// back at once.
    pub(super) fn carry_out(&mut self, now: Millis) {
        while let Some(action) = self.machine.poll_action() {
            if self.transitioned && reads(&action) {
                self.tell_transition();
            }
            match action {
                Action::StartReading { device } => self.start_reading(device, now),
                Action::StopReading { device } => self.stop_reading(device),
                Action::Close { device } => self.close(device),
                Action::Open { device } => self.open(device, now),
                // Refused by `Monitor::new`: the monitor owns its devices.
                Action::Revalidate { device, .. } => {
                    self.feed(now, Input::Reopened { device, result: Err(ENODEV) });
                }
                Action::Reopen { device } => {
                    let result = match self.port(device) {
                        Some(port) => port.reopen().map_err(|e| errno_of(&e)),
                        None => Err(ENODEV),
                    };
                    if result.is_ok() {
                        self.read_identity(device);
                    }
                    self.feed(now, Input::Reopened { device, result });
                }
                Action::QueryPort { device, port } => self.query_port(device, port, now),
                Action::ReadAddress { device, port } => self.read_address(device, port, now),
                Action::ReadCounters { device, port } => {
                    let answer = match self.port(device) {
                        Some(p) => p.flap_counters(port).map_err(|e| errno_of(&e)),
                        None => Err(ENODEV),
                    };
                    self.feed(now, Input::Counters { device, port, answer });
                }
                Action::ReadLink { device, port } => {
                    let answer = match self.port(device) {
                        Some(p) => p.link(port).map_err(|e| errno_of(&e)),
                        None => Err(ENODEV),
                    };
                    self.feed(now, Input::Link { device, port, answer });
                }
                Action::SetAvailable { rail, available } => self.selector.set_available(rail, available),
                Action::Reseed { rail, rate } => self.selector.reseed(rail, rate),
                Action::Notify(note) => {
                    self.transitioned |=
                        matches!(note.what, Happening::Transition { .. } | Happening::Available { .. });
                    log_line::note(&self.machine, &note);
                    self.notifier.send(note);
                }
                Action::Log(line) => log_line::log(&self.machine, &line),
            }
        }
    }

    /// A snapshot to the `on_transition` hook, if set.
    pub(super) fn tell_transition(&mut self) {
        self.transitioned = false;
        if let Some(mut publish) = self.on_transition.take() {
            publish(&self.snapshot());
            self.on_transition = Some(publish);
        }
    }

    /// The backend of device `device`, if it has one (a device the device
    /// list named has none until it opens).
    fn port(&mut self, device: u32) -> Option<&mut P> {
        self.devices.get_mut(device as usize).and_then(|slot| slot.port.as_mut())
    }

    /// A port query, with the netdev's carrier read beside it (none when
    /// the query failed or the port has no netdev).
    fn query_port(&mut self, device: u32, port: u8, now: Millis) {
        let (answer, carrier) = match self.port(device) {
            Some(p) => {
                let answer = p.port_state(port).map_err(|e| errno_of(&e));
                (answer, answer.ok().and_then(|_| p.carrier(port).ok()))
            }
            None => (Err(ENODEV), None),
        };
        self.feed(now, Input::PortState { device, port, answer, carrier });
    }

    /// A carrier notification arrived: every port's carrier is read once,
    /// and those that differ from the machine's are handed to it.
    pub(super) fn read_carriers(&mut self, now: Millis) {
        let open = |m: &railwatch_core::Machine, d: u32| m.device(d).is_some_and(|v| !v.mode.is_closed());
        let rails: Vec<RailId> = self.machine.rails().map(|r| r.id).filter(|r| open(&self.machine, r.device)).collect();
        for rail in rails {
            let Some(carrier) = self.port(rail.device).and_then(|p| p.carrier(rail.port).ok()) else { continue };
            if self.machine.rail(rail).is_some_and(|r| r.carrier == Some(carrier)) {
                continue;
            }
            self.feed(now, Input::Carrier { device: rail.device, port: rail.port, carrier });
            self.carry_out(now);
        }
    }

    fn read_address(&mut self, device: u32, port: u8, now: Millis) {
        let answer = match self.port(device) {
            Some(p) => p.address(port),
            None => Err(std::io::Error::from_raw_os_error(ENODEV.0)),
        };
        self.feed(now, Input::Address { device, port, answer: answer.as_ref().map(Cow::Borrowed).map_err(errno_of) });
        if let Ok(address) = answer {
            self.addresses.insert(RailId { device, port }, address);
        }
    }

    /// Opens the device the device list named, through the device source,
    /// and tells the machine what happened.
    fn open(&mut self, device: u32, now: Millis) {
        let name = self.machine.device(device).map(|d| d.name.to_string()).unwrap_or_default();
        let opened = match self.hotplug.as_mut() {
            Some(hp) => hp.source.open(&name),
            None => Err(std::io::Error::other("no device source to open it with")),
        };
        let idx = device as usize;
        if self.devices.len() <= idx {
            self.devices.resize_with(idx + 1, DeviceSlot::empty);
        }
        match opened {
            Ok(dev) => {
                let ports = dev.ports();
                self.devices[idx] = DeviceSlot::new(dev);
                self.read_identity(device);
                self.observe(now, Observed::Attached { device, name: &name, ports: &ports });
                self.feed(now, Input::Opened { device, result: Ok(Cow::Borrowed(&ports)) });
            }
            Err(e) => {
                let errno = errno_of(&e);
                self.feed(now, Input::Opened { device, result: Err(errno) });
            }
        }
    }

    fn close(&mut self, device: u32) {
        let Some(slot) = self.devices.get_mut(device as usize) else { return };
        if let Some(port) = slot.port.as_mut() {
            port.close();
        }
        slot.pending = false;
        slot.hung_up = false;
        // Events counted by budget-limited passes belong to the closed fd.
        slot.drained_in_progress = 0;
    }

    fn start_reading(&mut self, device: u32, now: Millis) {
        let Some(slot) = self.devices.get_mut(device as usize) else { return };
        let Some(port) = slot.port.as_ref() else { return };
        let fd: RawFd = port.async_fd();
        match self.poll.registry().register(&mut SourceFd(&fd), Token(device as usize), Interest::READABLE) {
            Ok(()) => slot.reading = true,
            Err(e) => {
                // An input like any other.
                self.feed(now, Input::ReadError { device, errno: errno_of(&e) });
            }
        }
    }

    fn stop_reading(&mut self, device: u32) {
        let Some(slot) = self.devices.get_mut(device as usize) else { return };
        if std::mem::take(&mut slot.reading)
            && let Some(port) = slot.port.as_ref()
        {
            let fd = port.async_fd();
            // The fd may already be closed.
            let _ = self.poll.registry().deregister(&mut SourceFd(&fd));
        }
        slot.pending = false;
    }
}

/// Whether `action` reads a device (and may take a while).
fn reads(action: &Action) -> bool {
    matches!(
        action,
        Action::QueryPort { .. }
            | Action::ReadAddress { .. }
            | Action::ReadCounters { .. }
            | Action::ReadLink { .. }
            | Action::Reopen { .. }
            | Action::Open { .. }
    )
}
