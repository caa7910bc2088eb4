//! Following the host's device list: the monitor reads its [`DeviceSource`]
//! (when its fd says the list may have changed, or on a timer when it has
//! no fd) and hands the list to the machine, which decides who appeared and
//! who left; opening and closing are then the machine's actions.

use std::borrow::Cow;
use std::io;
use std::time::Duration;

use mio::unix::SourceFd;
use mio::{Interest, Token};
use railwatch_core::{Clock, DeviceMode, Handled, Input, Millis, Selector, VerbsPort};

use super::Monitor;
use crate::hotplug::{DeviceSource, Rescan};
use crate::observe::Observed;

/// The token of the device source's fd (uevents).
pub(super) const HOTPLUG: Token = Token(usize::MAX - 1);

/// The token of the device source's carrier fd (rtnetlink link messages).
pub(super) const CARRIERS: Token = Token(usize::MAX - 2);

/// How soon a failed listing is tried again.
const LIST_RETRY_MS: u64 = 1000;

/// The monitor's device source and its rescan timer.
pub(super) struct Hotplug<P> {
    pub(super) source: Box<dyn DeviceSource<Device = P>>,
    /// Rescan period when the source has no fd.
    every_ms: u64,
    next_rescan: Option<Millis>,
}

impl<P: VerbsPort, S: Selector, C: Clock> Monitor<P, S, C> {
    /// Takes the host's devices from `source` from now on: every device it
    /// lists that the monitor does not have is opened and added, and the
    /// list is followed as it changes (through the source's fd where it has
    /// one, so an idle host still never wakes; otherwise by rescanning every
    /// `rescan_every`). A device that will not open is tried again by the
    /// machine, with backoff. Returns what the first scan did.
    pub fn watch_devices(
        &mut self,
        source: Box<dyn DeviceSource<Device = P>>,
        rescan_every: Duration,
    ) -> io::Result<Rescan> {
        if let Some(fd) = source.fd() {
            self.poll.registry().register(&mut SourceFd(&fd), HOTPLUG, Interest::READABLE)?;
        }
        if let Some(fd) = source.carrier_fd() {
            self.poll.registry().register(&mut SourceFd(&fd), CARRIERS, Interest::READABLE)?;
        }
        let every_ms = u64::try_from(rescan_every.as_millis()).unwrap_or(u64::MAX).max(1);
        self.hotplug = Some(Hotplug { source, every_ms, next_rescan: None });
        Ok(self.rescan())
    }

    /// Reads the source's device list and hands it to the machine: devices
    /// that left are removed (closed at once), those that appeared are
    /// opened and added.
    pub fn rescan(&mut self) -> Rescan {
        let now = self.clock.now();
        let Some(hp) = self.hotplug.as_mut() else { return Rescan::default() };
        let listed = hp.source.list();
        hp.next_rescan = match (&listed, hp.source.fd()) {
            (Err(_), _) => Some(now.plus(LIST_RETRY_MS.min(hp.every_ms))),
            (Ok(_), None) => Some(now.plus(hp.every_ms)),
            (Ok(_), Some(_)) => None,
        };
        let names = match listed {
            Ok(names) => names,
            Err(e) => {
                log::warn!("listing the devices failed ({e}); trying again");
                return Rescan::default();
            }
        };
        let names = names.iter().map(|n| Cow::Borrowed(n.as_str())).collect();
        let Handled::Listed(change) = self.feed(now, Input::DeviceList { names }) else {
            unreachable!("a device list is answered Listed")
        };
        for &device in &change.left {
            self.observe(now, Observed::Left { device });
        }
        self.carry_out(now);
        let name = |d: u32| self.machine.device(d).map(|v| v.name.to_string()).unwrap_or_default();
        let mut found = Rescan { removed: change.left.iter().map(|&d| name(d)).collect(), ..Rescan::default() };
        for &device in &change.appeared {
            let opened = self.machine.device(device).is_some_and(|d| !matches!(d.mode, DeviceMode::Opening { .. }));
            if opened { found.added.push(name(device)) } else { found.failed.push(name(device)) }
        }
        found
    }

    /// After a wake-up whose carrier fd was ready: drains it and, if a
    /// carrier may have changed, reads them all once.
    pub(super) fn follow_carriers(&mut self, now: Millis) {
        let Some(hp) = self.hotplug.as_mut() else { return };
        let changed = hp.source.drain_carriers().unwrap_or_else(|e| {
            log::warn!("reading carrier notifications failed ({e}); reading the carriers");
            true
        });
        if changed {
            self.read_carriers(now);
        }
    }

    /// When the device list is read next without its fd saying so.
    pub(super) fn next_rescan(&self) -> Option<Millis> {
        self.hotplug.as_ref().and_then(|h| h.next_rescan)
    }

    /// After a wake-up: reads the source's fd if it was ready, and rescans
    /// when the list may have changed or the rescan timer is due.
    pub(super) fn follow_device_list(&mut self, fd_ready: bool, now: Millis) {
        let Some(hp) = self.hotplug.as_mut() else { return };
        let mut changed = false;
        if fd_ready {
            changed = hp.source.drain().unwrap_or_else(|e| {
                log::warn!("reading device notifications failed ({e}); rescanning");
                true
            });
        }
        if changed || hp.next_rescan.is_some_and(|t| t <= now) {
            self.rescan();
        }
    }
}
