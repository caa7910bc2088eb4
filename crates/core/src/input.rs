//! The machine's inputs as one type: everything a driver tells a
//! [`Machine`], with [`Machine::handle`] the one entry that takes them.
//!
//! The runtime's monitor feeds every input through `handle`, so whatever
//! watches its inputs (the input log of `railwatch watch --record
//! x.rwlog`) sees each by construction. An input borrows what it can
//! (a device's name, an address, a transfer report), so feeding one costs
//! no copy; a log read back holds owned ones (`Input<'static>`).

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::address::PortAddress;
use crate::counters::PortCounters;
use crate::event::AsyncEvent;
use crate::machine::{Errno, ListChange, Machine, TransferReport};
use crate::port::{Carrier, LinkAttrs, PortState};
use crate::ports::RailId;
use crate::time::Millis;

/// One input of the machine, as a value (see the module doc). Each variant
/// names the `handle_*` method it stands for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Input<'a> {
    /// [`Machine::add_device`]: a device the driver opened itself.
    AddDevice {
        /// Its name.
        name: Cow<'a, str>,
        /// Its port numbers.
        ports: Cow<'a, [u8]>,
    },
    /// [`Machine::handle_device_list`]: the host's device list now.
    DeviceList {
        /// The names, as listed.
        names: Vec<Cow<'a, str>>,
    },
    /// [`Machine::handle_opened`]: the answer to an `Open`.
    Opened {
        /// The device asked.
        device: u32,
        /// Its ports, or why it would not open.
        result: Result<Cow<'a, [u8]>, Errno>,
    },
    /// [`Machine::handle_removed`]: the device left the host.
    Removed {
        /// The device.
        device: u32,
    },
    /// [`Machine::handle_reopen`]: the answer to a `Reopen` or a
    /// `Revalidate`.
    Reopened {
        /// The device asked.
        device: u32,
        /// Whether it answers again.
        result: Result<(), Errno>,
    },
    /// [`Machine::handle_event`]: one async event read (and acknowledged).
    Event {
        /// The device read.
        device: u32,
        /// The event.
        event: AsyncEvent,
    },
    /// [`Machine::handle_read_error`]: reading the device's fd failed.
    ReadError {
        /// The device read.
        device: u32,
        /// Why.
        errno: Errno,
    },
    /// [`Machine::handle_hangup`]: the device's fd hung up.
    HungUp {
        /// The device.
        device: u32,
    },
    /// [`Machine::handle_port_reading`]: the answer to a `QueryPort`.
    PortState {
        /// The device asked.
        device: u32,
        /// The port asked about.
        port: u8,
        /// What it said.
        answer: Result<PortState, Errno>,
        /// Its netdev's carrier, read with it (`None`: none, or not read).
        carrier: Option<Carrier>,
    },
    /// [`Machine::handle_carrier`]: a port's netdev carrier, notified.
    Carrier {
        /// The device.
        device: u32,
        /// The port.
        port: u8,
        /// The carrier now.
        carrier: Carrier,
    },
    /// [`Machine::handle_link`]: the answer to a `ReadLink`.
    Link {
        /// The device asked.
        device: u32,
        /// The port asked about.
        port: u8,
        /// What it said.
        answer: Result<LinkAttrs, Errno>,
    },
    /// [`Machine::handle_address`]: the answer to a `ReadAddress`.
    Address {
        /// The device asked.
        device: u32,
        /// The port asked about.
        port: u8,
        /// What it said.
        answer: Result<Cow<'a, PortAddress>, Errno>,
    },
    /// [`Machine::handle_counters`]: the answer to a `ReadCounters`.
    Counters {
        /// The device asked.
        device: u32,
        /// The port asked about.
        port: u8,
        /// What it said.
        answer: Result<PortCounters, Errno>,
    },
    /// [`Machine::handle_transfers`]: the engine's transfer outcomes.
    Transfers {
        /// The rail's device.
        device: u32,
        /// The rail's port.
        port: u8,
        /// The report.
        reports: Cow<'a, [TransferReport]>,
    },
    /// A worker took the half-open breaker's probe ([`Gate::probe`]): the
    /// rail's word is the input, not a call. Handled, it takes the probe
    /// if nobody did (what a replay needs; live, the worker did).
    ///
    /// [`Gate::probe`]: crate::Gate::probe
    ProbeTaken {
        /// The rail's device.
        device: u32,
        /// The rail's port.
        port: u8,
    },
    /// [`Machine::handle_probe`]: the outcome of a granted probe.
    Probe {
        /// The rail's device.
        device: u32,
        /// The rail's port.
        port: u8,
        /// Whether it succeeded.
        succeeded: bool,
    },
    /// [`Machine::handle_timeout`]: the timers' deadline came.
    Timeout,
}

/// What [`Machine::handle`] returns beside the actions it queued.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Handled {
    /// Nothing to return.
    #[default]
    Nothing,
    /// [`Input::AddDevice`]: the device's index (`None`: past
    /// [`MAX_DEVICES`](crate::MAX_DEVICES)).
    Added(Option<u32>),
    /// [`Input::DeviceList`]: who appeared and who left.
    Listed(ListChange),
}

impl Input<'_> {
    /// The same input owning what it borrowed.
    pub fn into_owned(self) -> Input<'static> {
        fn own<T: ToOwned + ?Sized>(c: Cow<'_, T>) -> Cow<'static, T> {
            Cow::Owned(c.into_owned())
        }
        match self {
            Input::AddDevice { name, ports } => Input::AddDevice { name: own(name), ports: own(ports) },
            Input::DeviceList { names } => Input::DeviceList { names: names.into_iter().map(own).collect() },
            Input::Opened { device, result } => Input::Opened { device, result: result.map(own) },
            Input::Address { device, port, answer } => Input::Address { device, port, answer: answer.map(own) },
            Input::Transfers { device, port, reports } => Input::Transfers { device, port, reports: own(reports) },
            Input::Removed { device } => Input::Removed { device },
            Input::Reopened { device, result } => Input::Reopened { device, result },
            Input::Event { device, event } => Input::Event { device, event },
            Input::ReadError { device, errno } => Input::ReadError { device, errno },
            Input::HungUp { device } => Input::HungUp { device },
            Input::PortState { device, port, answer, carrier } => Input::PortState { device, port, answer, carrier },
            Input::Carrier { device, port, carrier } => Input::Carrier { device, port, carrier },
            Input::Link { device, port, answer } => Input::Link { device, port, answer },
            Input::Counters { device, port, answer } => Input::Counters { device, port, answer },
            Input::ProbeTaken { device, port } => Input::ProbeTaken { device, port },
            Input::Probe { device, port, succeeded } => Input::Probe { device, port, succeeded },
            Input::Timeout => Input::Timeout,
        }
    }

    /// The device the input names, if it names one (a device list and the
    /// timers name none; an added device is named by its name).
    pub fn device(&self) -> Option<u32> {
        match *self {
            Input::AddDevice { .. } | Input::DeviceList { .. } | Input::Timeout => None,
            Input::Opened { device, .. }
            | Input::Removed { device }
            | Input::Reopened { device, .. }
            | Input::Event { device, .. }
            | Input::ReadError { device, .. }
            | Input::HungUp { device }
            | Input::PortState { device, .. }
            | Input::Carrier { device, .. }
            | Input::Link { device, .. }
            | Input::Address { device, .. }
            | Input::Counters { device, .. }
            | Input::Transfers { device, .. }
            | Input::ProbeTaken { device, .. }
            | Input::Probe { device, .. } => Some(device),
        }
    }
}

impl Machine {
    /// Feeds one input at `now`: the one entry a driver calls (each
    /// `handle_*` method is this for one kind of input).
    pub fn handle(&mut self, now: Millis, input: &Input<'_>) -> Handled {
        match input {
            Input::AddDevice { name, ports } => return Handled::Added(self.add_device(name, ports, now)),
            Input::DeviceList { names } => {
                return Handled::Listed(self.handle_device_list(names.iter().map(|n| &**n), now));
            }
            Input::Opened { device, result } => self.handle_opened(*device, result.as_deref().map_err(|e| *e), now),
            Input::Removed { device } => self.handle_removed(*device, now),
            Input::Reopened { device, result } => self.handle_reopen(*device, *result, now),
            Input::Event { device, event } => self.handle_event(*device, *event, now),
            Input::ReadError { device, errno } => self.handle_read_error(*device, *errno, now),
            Input::HungUp { device } => self.handle_hangup(*device, now),
            Input::PortState { device, port, answer, carrier } => {
                self.handle_port_reading(*device, *port, *answer, *carrier, now)
            }
            Input::Carrier { device, port, carrier } => self.handle_carrier(*device, *port, *carrier, now),
            Input::Link { device, port, answer } => self.handle_link(*device, *port, *answer, now),
            Input::Address { device, port, answer } => {
                self.handle_address(*device, *port, answer.as_ref().map(|a| &**a).map_err(|e| *e), now)
            }
            Input::Counters { device, port, answer } => self.handle_counters(*device, *port, *answer, now),
            Input::Transfers { device, port, reports } => self.handle_transfers(*device, *port, reports, now),
            Input::ProbeTaken { device, port } => {
                // Live, the worker took it and this is refused; in a
                // replay, this takes it.
                if let Some(gate) = self.gate(RailId { device: *device, port: *port }) {
                    let _ = gate.probe();
                }
            }
            Input::Probe { device, port, succeeded } => self.handle_probe(*device, *port, *succeeded, now),
            Input::Timeout => self.handle_timeout(now),
        }
        Handled::Nothing
    }
}
