//! # railwatch-core
//!
//! The pure heart of railwatch: no I/O, no libc, no threads, no clock. It
//! holds
//!
//! - the rail state word ([`RailCell`]): active, paused or inert, with the
//!   pause reason and a generation, changed only by compare-and-swap
//!   transitions that return an explicit [`Outcome`];
//! - the [`Gate`] workers check before each transfer (one acquire load);
//! - async events ([`AsyncEvent`], [`EventKind`]) with unknown codes kept as
//!   values, port states ([`PortState`]) and link-rate math ([`LinkAttrs`]);
//! - the decision table ([`decide_event`], [`decide_poll`],
//!   [`decide_reseed`]);
//! - the ports the runtime is written against: [`VerbsPort`] (a device)
//!   and [`Selector`] (the engine's rail picker).
//!
//! Time is passed in ([`Millis`]) and outputs are values, in the sans-I/O
//! style of quinn-proto, so engines can property-test event orderings
//! against this crate alone.
//!
//! ```
//! use std::sync::Arc;
//! use railwatch_core::*;
//!
//! let cell = Arc::new(RailCell::new(Millis(0)));
//! let gate = Gate::new(cell.clone());
//! assert_eq!(cell.attach(PortState::Active, Millis(0)), Outcome::Changed);
//! let ticket = gate.check().expect("an active rail admits");
//!
//! // PORT_ERR for port 1 pauses rail 1; the gate now says why.
//! let err = AsyncEvent::port(EventKind::PortErr, 1);
//! assert_eq!(decide_event(&err, 1, cell.load().state), RailDecision::Pause(PauseReason::PortErr));
//! assert_eq!(cell.pause(PauseReason::PortErr, Millis(100)), Outcome::Changed);
//! let refusal = gate.check().unwrap_err();
//! assert_eq!((refusal.reason, refusal.since), (PauseReason::PortErr, Millis(100)));
//!
//! // The recovery tick reads the port: exactly ACTIVE activates.
//! assert_eq!(decide_poll(PortState::Armed, RailState::Paused), PollDecision::Wait);
//! assert_eq!(decide_poll(PortState::Active, RailState::Paused), PollDecision::Activate);
//! assert_eq!(cell.resume(Millis(1000)), Outcome::Changed);
//! assert_eq!(cell.resume(Millis(1001)), Outcome::AlreadyThere);
//!
//! // Endpoints built under the old generation are stale.
//! assert!(gate.check().unwrap().generation > ticket.generation);
//! ```

#![cfg_attr(not(test), deny(missing_docs))]

mod address;
mod breaker;
mod counters;
mod damping;
mod decide;
mod declare;
mod device_name;
mod event;
mod identity;
mod input;
mod machine;
mod owner;
mod port;
mod ports;
mod rail;
mod setting;
mod settings;
mod shown;
mod sync;
mod time;
mod wc;
mod witness;

pub use address::{AddressRequirement, Gid, GidType, LinkLayer, PortAddress};
pub use breaker::{DataPathConfig, MAX_MIN_PEERS};
pub use counters::{Counter, PortCounters, SILENT_FLAP_CONFIRM_MS, saturated_width};
pub use damping::{DampingConfig, FlapPenalty};
pub use decide::{
    EventClass, PollDecision, RailDecision, classify, decide_event, decide_poll, decide_reading, decide_reseed,
};
pub use device_name::{MAX_DEVICE_NAME_BYTES, device_name_problem};
pub use event::{AsyncEvent, Element, EventKind, ObjectHandle, Scope};
pub use identity::{RailIdentity, guid_text, is_netdev_name, is_pci_address};
pub use input::{Handled, Input};
pub use machine::{
    Action, Cause, DeviceMode, DeviceStats, DeviceView, Errno, Evidence, Happening, ListChange, Log, MAX_DEVICES,
    Machine, Notification, RailView, RecoveredBy, SlotError, TransferReport, WorkScope,
};
pub use owner::DeviceOwner;
pub use port::{
    Carrier, LinkAttrs, LinkRate, PortState, SPEEDS, SpeedCode, WIDTHS, WidthCode, speed_by_code, speed_by_name,
    width_by_code, width_by_name,
};
pub use ports::{DeviceSource, NoSelector, RailId, Selector, VerbsPort};
pub use rail::{
    Gate, Outcome, PauseReason, ProbeTicket, RailCell, RailState, RailWord, Rejection, Ticket, layout as word_layout,
};
pub use settings::{AGENT_AUDIT_MS, ConfigError, MachineConfig, Problem, Setting, SettingKind, SettingValue};
pub use shown::{MAX_ERROR_LINE_CHARS, MAX_SHOWN_NAME_CHARS, error_line, shown_name};
pub use time::{Clock, MAX_DELAY_MS, Millis};
pub use wc::{WC_STATUSES, WcClass, WcStatus, classify_wc, wc_name, wc_status};
pub use witness::PortWitness;
