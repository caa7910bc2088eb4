//! What each input the monitor fed its machine becomes in the recording:
//! the replay's simulated devices ([`DeviceView`]: what their ports will
//! answer), and the steps that change them, placed by the rules of
//! `place.rs`.

use std::collections::{BTreeMap, HashMap};

use railwatch_core::{
    AsyncEvent, Carrier, Element, Errno, EventKind, LinkAttrs, ObjectHandle, PortAddress, PortCounters, PortState,
    Scope, TransferReport,
};
use railwatch_sim_backend::PortSpec;

use super::place::Change;
use super::{MAX_NAMED_OBJECTS, OTHER_ADDRESS_INDEX, Recorder};
use crate::scenario::{
    CarrierChange, CountersChange, DeviceDecl, Fault, GidChange, LinkChange, MAX_TOTAL_EVENTS, PortStateChange,
    ProbeOutcome, ProbeStep, StepEvent, TransferStep,
};

/// The carrier notifications' fd, as [`Wakes`](super::wake::Wakes) counts
/// reads: a source of its own beside the devices.
const CARRIER_FD: u32 = u32::MAX;

/// One port as the replay's simulated device will answer it.
#[derive(Debug, Default)]
pub(super) struct PortView {
    port: u8,
    state: Option<PortState>,
    link: Option<LinkAttrs>,
    /// `None` until an address was read (or ever, on a device that cannot).
    gids: Option<BTreeMap<u32, [u8; 16]>>,
    /// The distinct non-GID parts of the address seen, in order.
    others: Vec<u64>,
    /// When the port's state, link and address were last read (each its
    /// own: an attach reads all three in one instant, and each is the
    /// first since the re-open).
    last_query: Asked,
    last_link: Asked,
    last_address: Asked,
    /// The flap counters as last read (`None`: never read, or unreadable).
    counters: Option<PortCounters>,
    last_counters: Asked,
    /// The netdev's carrier as last read (`None`: no netdev seen).
    carrier: Option<Carrier>,
    /// What the first answers said: the declaration (what the replay's
    /// device starts with), whatever changed before it was written.
    first: PortFirst,
    /// When a `PORT_ERR` for the port was read since its last query.
    err_at: Option<u64>,
}

/// When a port was last asked one thing (its state, link, address or
/// counters), and in which opening of its device: the order of re-opens
/// and queries, not their times, says whether a query is the first since
/// a re-open (a device closed and back twice in one millisecond).
#[derive(Debug, Default, Clone, Copy)]
struct Asked {
    at: Option<u64>,
    opening: u32,
    /// The monitor's wake-up it was asked in (`wake.rs`), and how many
    /// events had been read then.
    wake: u64,
    events: u64,
}

/// What placing a change a query saw needs to know of the query before it.
#[derive(Debug, Clone, Copy)]
struct Seen {
    /// When the port was last asked the same, in which wake-up and after
    /// how many events.
    previous: Option<u64>,
    previous_wake: u64,
    previous_events: u64,
    /// This is the port's first such query since its device came back.
    first_since_reopen: bool,
    /// The timers asked (they run late on a busy host), not an event.
    late: bool,
    /// The event that asked, if one did: its device and number.
    event: Option<(u32, u64)>,
}

impl Asked {
    /// The port is asked again now (`now`: as `Asked`, the device's
    /// opening, the wake-up and the events read), the device `back` (open
    /// again after a close).
    fn again(&mut self, now: Asked, back: bool) -> Seen {
        let before = std::mem::replace(self, now);
        Seen {
            previous: before.at,
            previous_wake: before.wake,
            previous_events: before.events,
            first_since_reopen: back && before.opening < now.opening,
            late: false,
            event: None,
        }
    }
}

/// A port's first answers, as declared.
#[derive(Debug, Default)]
struct PortFirst {
    state: Option<PortState>,
    link: Option<LinkAttrs>,
    gids: Option<BTreeMap<u32, [u8; 16]>>,
    counters: Option<PortCounters>,
    carrier: Option<Carrier>,
}

/// One device as the replay's simulator will have it.
#[derive(Debug)]
pub(super) struct DeviceView {
    /// The name written to the file.
    pub(super) name: String,
    ports: Vec<PortView>,
    /// Its `[[device]]` is written (after that, a first answer is a change).
    pub(super) declared: bool,
    /// In the host's list at the start; otherwise declared `present =
    /// false` and plugged in when it appeared.
    present: bool,
    /// The simulated device is removed (after `remove`, until `restore`).
    removed: bool,
    last_reopen: Option<u64>,
    /// When a `DEVICE_FATAL`, a hang-up or a failed query last closed it,
    /// or it left the host's list, and when it was last opened again:
    /// what the first queries after that saw changed in between.
    closed_at: Option<u64>,
    reopened_at: Option<u64>,
    /// Closed (since `closed_at`) and not opened again yet.
    closed: bool,
    /// How many times it was opened again (its ports' [`Asked`] say in
    /// which opening they were last asked).
    opening: u32,
    reads_addresses: Option<bool>,
}

impl DeviceView {
    fn port(&mut self, port: u8) -> Option<&mut PortView> {
        self.ports.iter_mut().find(|p| p.port == port)
    }

    /// Open again after a close: the first queries of its ports since then
    /// saw what changed while it was away.
    fn back(&self) -> bool {
        !self.closed && self.reopened_at.is_some()
    }

    /// It is open again at `t`.
    fn opened_again(&mut self, t: u64) {
        self.closed = false;
        self.opening += 1;
        self.reopened_at = Some(t);
    }

    /// The `[[device]]` for what the device's ports answered first (a port
    /// never asked reads as declared by default: active, NDR 4x).
    pub(super) fn declaration(&self) -> DeviceDecl {
        let ports = self
            .ports
            .iter()
            .map(|p| {
                let default = PortSpec::active(p.port);
                PortSpec::new(p.port, p.first.state.unwrap_or(default.state), p.first.link.unwrap_or(default.link))
            })
            .collect();
        let gids = (self.reads_addresses == Some(true)).then(|| {
            self.ports
                .iter()
                .flat_map(|p| {
                    p.first.gids.iter().flatten().map(|(&index, &raw)| GidChange {
                        port: p.port,
                        index,
                        gid: Some(raw),
                    })
                })
                .collect()
        });
        let counters = self
            .ports
            .iter()
            .filter_map(|p| Some(CountersChange { port: p.port, counters: p.first.counters? }))
            .collect();
        let carriers = self
            .ports
            .iter()
            .filter_map(|p| Some(CarrierChange { port: p.port, carrier: p.first.carrier?, notify: false }))
            .collect();
        DeviceDecl { line: 0, name: self.name.clone(), ports, gids, present: self.present, counters, carriers }
    }
}

/// `fe80::N`, N counting the distinct GIDs seen; an IPv4-mapped GID stays
/// one (`::ffff:198.18.x.y`, the benchmarking range), so a replay under
/// `require_address = "roce_v2_ipv4"` sees the same kinds of address.
fn anonymous_gid(names: &mut HashMap<[u8; 16], u32>, raw: [u8; 16]) -> [u8; 16] {
    let next = names.len() as u32 + 1;
    let n = *names.entry(raw).or_insert(next);
    let mut out = [0u8; 16];
    if raw[..10].iter().all(|&b| b == 0) && raw[10..12] == [0xff, 0xff] {
        out[10..12].copy_from_slice(&[0xff, 0xff]);
        out[12..].copy_from_slice(&(0xc612_0000 | (n & 0x1_ffff)).to_be_bytes());
        return out;
    }
    out[0] = 0xfe;
    out[1] = 0x80;
    out[12..].copy_from_slice(&n.to_be_bytes());
    out
}

impl Recorder {
    pub(super) fn attached(&mut self, t: u64, device: u32, name: &str, ports: &[u8]) {
        let idx = device as usize;
        if idx < self.devices.len() {
            // The same name came back (it had left the host's list): what
            // its first queries see changed while it was away.
            let d = &mut self.devices[idx];
            d.removed = false;
            d.opened_again(t);
            self.push_plug(t, device);
            return;
        }
        if idx > self.devices.len() {
            // The monitor numbers devices in order; a gap means attaches
            // this recorder never saw.
            self.comment(t, format!("device {idx} attached, but not the ones before it: not recorded"));
            return;
        }
        // A device that appears after the start is declared absent at the
        // start (`present = false`) and plugged in when it appeared.
        // Before the first flush is the start: the monitor attaches the
        // host's devices before its first wait.
        let present = !self.flushed && !self.started;
        let shown = if self.anonymize { format!("dev{idx}") } else { name.to_owned() };
        self.devices.push(DeviceView {
            name: shown,
            ports: ports.iter().map(|&port| PortView { port, ..PortView::default() }).collect(),
            declared: false,
            present,
            removed: false,
            last_reopen: None,
            closed_at: None,
            reopened_at: None,
            closed: false,
            opening: 0,
            reads_addresses: None,
        });
        if !present {
            self.push_plug(t, device);
        }
    }

    fn live(&mut self, device: u32) -> Option<&mut DeviceView> {
        self.devices.get_mut(device as usize)
    }

    /// Where a change a query of `device` saw at `t` goes
    /// ([`Timeline::placed_for`](super::place::Timeline::placed_for)): at
    /// the device's close if the query is the port's first since it came
    /// back.
    fn placed_for(&self, device: u32, seen: Seen, t: u64) -> u64 {
        let reopen = self.devices.get(device as usize).and_then(|d| d.closed_at.zip(d.reopened_at));
        self.timeline.placed_for(reopen.filter(|_| seen.first_since_reopen), seen.previous, t, seen.late)
    }

    /// Places `change`, which a query of `device` saw at `t`, as
    /// [`placed_for`](Self::placed_for) says.
    fn push_seen(&mut self, device: u32, seen: Seen, t: u64, change: Change) {
        let at = self.placed_for(device, seen, t);
        self.push_seen_at(device, seen, at, change);
    }

    /// Places `change`, seen by a query of `device`, at `at`: before the
    /// re-open's step if it is the first since a re-open in that very
    /// instant (after it, the replay's attach would read the old state).
    fn push_seen_at(&mut self, device: u32, seen: Seen, at: u64, change: Change) {
        self.drain_before_change(device, seen, at);
        let reopened = self.devices.get(device as usize).and_then(|d| d.reopened_at);
        if seen.first_since_reopen && reopened == Some(at) {
            self.timeline.push_before_reopen(at, device, change);
        } else {
            self.push_step(at, device, change);
        }
    }

    /// A change placed at `at` that a query of `device` saw, where a query
    /// of the port earlier in the instant read the old value: the replay
    /// must read what came before first. A `drain` step goes before the
    /// wake-up when the earlier query was in an earlier one (`wake.rs`);
    /// when it was in this one (a `PORT_ACTIVE`'s address read found the
    /// old GID, the `GID_CHANGE` read after it in the same drain the new
    /// one), just before the event that asked, if only this device was
    /// read in the wake-up so far (splitting another device's reads, or a
    /// drain's budget, would change which are read first).
    fn drain_before_change(&mut self, device: u32, seen: Seen, at: u64) {
        if seen.previous != Some(at) || !self.wakes.is_now(at) {
            return;
        }
        let this_wake = seen.previous_wake == self.wakes.current();
        match seen.event {
            Some((d, n)) if d == device && seen.previous_events < n && this_wake => {
                if !self.wakes.only_read_now(device) {
                    return;
                }
                if self.timeline.drain_before_last_event(at, device) {
                    self.wakes.drain_placed();
                }
            }
            _ if self.wakes.change_needs_drain(at, seen.previous, seen.previous_wake) => {
                self.drain_before_wake(at, device);
            }
            _ => {}
        }
    }

    /// What is asked now, in the current opening of `d` (see [`Asked`]).
    fn asked_now(&self, t: u64, d: &DeviceView) -> Asked {
        Asked { at: Some(t), opening: d.opening, wake: self.wakes.current(), events: self.wakes.events() }
    }

    /// Records that `device`'s port `port` was asked `which` at `t`; what
    /// placing a change its answer shows needs (`None`: no such port).
    fn ask(&mut self, device: u32, port: u8, t: u64, which: fn(&mut PortView) -> &mut Asked) -> Option<Seen> {
        self.wakes.saw(t);
        let (late, event) = (self.wakes.timers_asking(), self.wakes.answering());
        let now = self.asked_now(t, self.devices.get(device as usize)?);
        let d = self.live(device)?;
        let back = d.back();
        Some(Seen { late, event, ..which(d.port(port)?).again(now, back) })
    }

    /// A `drain` step for `device` at `t`, before what the current wake-up
    /// placed (`wake.rs`).
    fn drain_before_wake(&mut self, t: u64, device: u32) {
        if self.timeline.drain_before_wake(t, device) {
            self.wakes.drain_placed();
        }
    }

    /// Places a plug, after which the replay reads the devices: after a
    /// `drain` step if an earlier wake-up of the instant saw anything, and
    /// the instant starts afresh (`wake.rs`).
    fn push_plug(&mut self, at: u64, device: u32) {
        if self.wakes.list_change_needs_drain() {
            self.drain_before_wake(at, device);
        }
        self.push_step(at, device, Change::Fault { fault: Fault::Plug, wake: false });
        self.wakes.read_here();
    }

    fn push_step(&mut self, at: u64, device: u32, change: Change) {
        if self.live(device).is_none() {
            return;
        }
        self.timeline.push(at, device, change);
    }

    pub(super) fn comment(&mut self, t: u64, text: String) {
        self.timeline.comment(t, text);
    }

    pub(super) fn fault_at(&mut self, device: u32, t: u64, fault: Fault) {
        let Some(d) = self.live(device) else { return };
        if matches!(fault, Fault::Remove) {
            d.removed = true;
        }
        let at = self.timeline.fault_time(t);
        // Seen in a later wake-up of a busy instant (a read error, a
        // hang-up, a failed query, the device leaving the list): the
        // replay reads what came before first (`wake.rs`).
        let need = match fault {
            Fault::Unplug => self.wakes.list_change_needs_drain(),
            _ => self.wakes.read_needs_drain(device),
        };
        if at == t && need {
            self.drain_before_wake(t, device);
        }
        let wake = matches!(fault, Fault::Eio | Fault::Ebadf);
        if wake {
            self.comment(at, "a read failed: the event of the next step only wakes the reader (never read)".into());
        }
        self.push_step(at.max(self.timeline.floor()), device, Change::Fault { fault, wake });
    }

    /// Turns the read error this device recorded at `t` (if it did) into a
    /// removal: the fd hung up, or its port queries fail too. Returns
    /// whether there was one.
    fn read_error_was_removal(&mut self, t: u64, device: u32) -> bool {
        if !self.timeline.read_error_to_removal(device, t) {
            return false;
        }
        self.closed(device, t);
        if let Some(d) = self.live(device) {
            d.removed = true;
        }
        true
    }

    /// The device closed at `t` (a `DEVICE_FATAL`, a hang-up, a failed
    /// query, or it left the host's list), unless it was closed already:
    /// what its first queries once it is back saw changed after this.
    fn closed(&mut self, device: u32, t: u64) {
        if let Some(d) = self.live(device).filter(|d| !d.closed) {
            d.closed = true;
            d.closed_at = Some(t);
        }
    }

    /// The device left the host's list.
    pub(super) fn removed(&mut self, t: u64, device: u32) {
        self.closed(device, t);
        self.fault_at(device, t, Fault::Unplug);
        self.wakes.read_here();
    }

    pub(super) fn hung_up(&mut self, t: u64, device: u32) {
        self.closed(device, t);
        if !self.read_error_was_removal(t, device) {
            self.fault_at(device, t, Fault::Remove);
        }
    }

    pub(super) fn reopened(&mut self, t: u64, device: u32, result: Result<(), Errno>) {
        let Some(d) = self.live(device) else { return };
        let previous = d.last_reopen.replace(t);
        let removed = d.removed;
        if result.is_ok() {
            d.opened_again(t);
            self.wakes.reopened();
        }
        match result {
            Ok(()) if removed => {
                let at = self.timeline.placed(previous, t);
                if let Some(d) = self.live(device) {
                    d.removed = false;
                }
                self.push_step(at, device, Change::Fault { fault: Fault::Restore, wake: false });
            }
            Err(errno) if !removed => {
                // The simulator re-opens a living device; only a removed one
                // refuses, and refuses until restored.
                let at = self.timeline.placed(previous, t);
                if let Some(d) = self.live(device) {
                    d.removed = true;
                }
                self.push_step(at, device, Change::Fault { fault: Fault::Remove, wake: false });
                self.comment(t, format!("the re-open failed with errno {}: replayed as a removal", errno.0));
            }
            _ => {}
        }
    }

    pub(super) fn event(&mut self, t: u64, device: u32, event: AsyncEvent) {
        if self.live(device).is_none() {
            return;
        }
        if event.kind() == EventKind::DeviceFatal {
            self.closed(device, t);
        }
        self.events += 1;
        if self.events > MAX_TOTAL_EVENTS {
            self.stop(format!("more than {MAX_TOTAL_EVENTS} events, the scenario limit"));
            return;
        }
        // The element as a scenario can say it for the event's scope.
        let declared =
            |r: &mut Self, p: u32| u8::try_from(p).ok().and_then(|p| r.live(device).and_then(|d| d.port(p))).is_some();
        let element = match (event.kind().scope(), event.element) {
            (Scope::Port, Element::Port(p)) if declared(self, p) => Element::Port(p),
            (Scope::Port, other) => {
                self.comment(t, format!("event code {} for {other:?}, not a port of the device", event.code));
                return;
            }
            (Scope::Device, _) => Element::None,
            (Scope::Unknown, Element::Port(p)) if declared(self, p) => Element::Port(p),
            (Scope::Unknown, Element::Port(_) | Element::None) => Element::None,
            (_, Element::Object(h)) => Element::Object(ObjectHandle(self.object_number(h.0))),
            // An object event without its object: the null handle.
            (_, _) => Element::Object(ObjectHandle(0)),
        };
        let event = AsyncEvent { code: event.code, element };
        if let (EventKind::PortErr, Element::Port(p)) = (event.kind(), element) {
            if let Some(port) = u8::try_from(p).ok().and_then(|p| self.live(device)?.port(p)) {
                port.err_at.get_or_insert(t);
            }
        }
        // Read in a later wake-up of a busy instant: the replay reads what
        // came before first (`wake.rs`).
        if self.wakes.read_needs_drain(device) {
            self.drain_before_wake(t, device);
        }
        self.wakes.event_read(device);
        // A burst of the same event in one instant: one step, `repeat`.
        if !self.timeline.repeat_burst(t, device, event) {
            self.push_step(t, device, Change::Event(StepEvent { event, repeat: 1 }));
        }
        self.timeline.placed_event();
    }

    /// Reads of `device` interrupted (`EINTR`) in a drain at `t`: an
    /// `eintr` step before the events that drain read, so the replay's
    /// drain spends its budget as the live one did (the simulator fails a
    /// drain's first reads with the `EINTR`s pending).
    pub(super) fn interrupted(&mut self, t: u64, device: u32, count: u64) {
        if self.live(device).is_none() {
            return;
        }
        self.events = self.events.saturating_add(count);
        if self.events > MAX_TOTAL_EVENTS {
            self.stop(format!("more than {MAX_TOTAL_EVENTS} events and EINTRs, the scenario limit"));
            return;
        }
        self.wakes.note_read(device);
        let at = t.max(self.timeline.floor());
        if !self.timeline.more_interrupts(at, device, count) {
            self.push_step(at, device, Change::Fault { fault: Fault::Eintr { count }, wake: false });
        }
    }

    /// An object handle (a pointer in the live process, meaningless in
    /// another) numbered by first appearance, keeping which are equal, up
    /// to a bound (the machine never compares handles; this only keeps the
    /// file readable); past it, every new handle is one more number.
    fn object_number(&mut self, handle: u64) -> u64 {
        let next = self.objects.len() as u64 + 1;
        match self.objects.get(&handle) {
            _ if handle == 0 => 0,
            Some(&n) => n,
            None if self.objects.len() < MAX_NAMED_OBJECTS => *self.objects.entry(handle).or_insert(next),
            None => next,
        }
    }

    /// A port query's answer, and the carrier read with it: a carrier seen
    /// changed there changed silently (a notified one is read when its
    /// notification arrives), placed where the replay's query finds it.
    pub(super) fn port_reading(
        &mut self,
        t: u64,
        device: u32,
        port: u8,
        answer: Result<PortState, Errno>,
        carrier: Option<Carrier>,
    ) {
        let Some(seen) = self.ask(device, port, t, |p| &mut p.last_query) else { return };
        if let Some(carrier) = carrier {
            let change = CarrierChange { port, carrier, notify: false };
            self.carrier_seen(device, port, change, |r, change| r.push_seen(device, seen, t, change));
        }
        self.port_state(t, device, port, answer, seen);
    }

    /// A carrier notification's read found the port's carrier changed: a
    /// notified step at its own time.
    pub(super) fn carrier_notified(&mut self, t: u64, device: u32, port: u8, carrier: Carrier) {
        let at = t.max(self.timeline.floor());
        // The carrier fd is read as a device's is: in a later wake-up of
        // the instant than the timers, another read or its own last read,
        // the replay must read what came before first (`wake.rs`).
        if self.live(device).is_some() && self.wakes.state_read_needs_drain(CARRIER_FD) {
            self.drain_before_wake(at, device);
        }
        let change = CarrierChange { port, carrier, notify: true };
        self.carrier_seen(device, port, change, |r, change| r.push_step(at, device, change));
    }

    /// The port's carrier read as `carrier`: the first declares it, a
    /// change is a step, `notify`d as it came, placed by `push`.
    fn carrier_seen(&mut self, device: u32, port: u8, change: CarrierChange, push: impl FnOnce(&mut Self, Change)) {
        let Some(d) = self.live(device) else { return };
        let declared = d.declared;
        let Some(p) = d.port(port) else { return };
        match p.carrier.replace(change.carrier) {
            None if !declared => p.first.carrier = Some(change.carrier),
            Some(known) if known == change.carrier => {}
            _ => push(self, Change::Carrier(change)),
        }
    }

    fn port_state(&mut self, t: u64, device: u32, port: u8, answer: Result<PortState, Errno>, seen: Seen) {
        let Some(d) = self.live(device) else { return };
        let (removed, declared) = (d.removed, d.declared);
        let state = match answer {
            Ok(s) => s,
            // The simulator answers ENODEV itself while removed.
            Err(_) if removed => return,
            Err(e) => {
                // Reads and queries both fail: the device is gone.
                if self.read_error_was_removal(t, device) {
                    return;
                }
                // A query that fails (the kernel's ENODEV after the netdev
                // went, a poll-only device removed): the machine takes the
                // device for gone, and so will the replay, whose query at
                // the same moment fails.
                self.comment(t, format!("port {port}: the query failed with errno {}, replayed as a removal", e.0));
                self.closed(device, t);
                self.fault_at(device, t, Fault::Remove);
                return;
            }
        };
        let Some(p) = self.live(device).and_then(|d| d.port(port)) else { return };
        let err_at = p.err_at.take();

        match p.state {
            None if !declared => {
                p.state = Some(state);
                p.first.state = Some(state);
            }
            Some(PortState::Active) if state == PortState::Active && err_at.is_some() => {
                self.down_and_up(device, port, seen, err_at.unwrap_or(t), t);
            }
            Some(known) if known == state => {}
            _ => {
                p.state = Some(state);
                // A port read not ACTIVE after a PORT_ERR for it went down
                // by the time the event was read: the replay's port goes
                // down with it, whatever the replay asks in between (no
                // query followed the event live). Not before a query that
                // read it still up, though: one in the event's own instant
                // (an earlier event's, read before the PORT_ERR) would see
                // it in the replay, which applies an instant's steps first.
                let change = Change::PortState(PortStateChange { port, state });
                match err_at {
                    Some(e) if state != PortState::Active => {
                        let at = self.timeline.placed_after(seen.previous, e, t);
                        self.push_seen_at(device, seen, at, change)
                    }
                    _ => self.push_seen(device, seen, t, change),
                }
            }
        }
    }

    /// A `PORT_ERR` for `port` was read at `err`, and the port's next query
    /// (at `t`) reads it ACTIVE as before: it went down and came back,
    /// with no query between. The replay's port does too (down at the
    /// `PORT_ERR`, up where the query that saw it goes), so a query the
    /// replay makes between (a tick the live run made late, after the
    /// `PORT_ACTIVE` it found) does not find the port up early.
    fn down_and_up(&mut self, device: u32, port: u8, seen: Seen, err: u64, t: u64) {
        let down = self.timeline.placed_after(seen.previous, err, t);
        let up = self.placed_for(device, Seen { previous: Some(down), ..seen }, t);
        if down < up {
            let change = |state| Change::PortState(PortStateChange { port, state });
            self.push_seen_at(device, seen, down, change(PortState::Down));
            self.push_seen_at(device, Seen { previous: Some(down), ..seen }, up, change(PortState::Active));
        }
    }

    /// A counter read: the first declares the port's counters, a change
    /// after is a step placed where the replay's next read finds it.
    pub(super) fn counters(&mut self, t: u64, device: u32, port: u8, answer: Result<PortCounters, Errno>) {
        let Some(seen) = self.ask(device, port, t, |p| &mut p.last_counters) else { return };
        let Some(d) = self.live(device) else { return };
        let declared = d.declared;
        let Some(p) = d.port(port) else { return };
        // Unreadable: the replay's port reads none either (it is declared
        // without counters, or keeps the last it had).
        let Ok(counters) = answer else { return };
        match p.counters {
            None if !declared => {
                p.counters = Some(counters);
                p.first.counters = Some(counters);
            }
            Some(known) if known == counters => {}
            _ => {
                p.counters = Some(counters);
                self.push_seen(device, seen, t, Change::counters(CountersChange { port, counters }));
            }
        }
    }

    /// Transfer outcomes the engine reported: steps at their own time, one
    /// per line of the report.
    pub(super) fn transfers(&mut self, t: u64, device: u32, port: u8, reports: &[TransferReport]) {
        if self.live(device).and_then(|d| d.port(port)).is_none() {
            return;
        }
        let at = t.max(self.timeline.floor());
        for &report in reports.iter().filter(|r| r.count > 0) {
            self.push_step(at, device, Change::Transfers(TransferStep { port, report }));
        }
        // The replay reads the devices before a transfer report.
        self.wakes.read_here();
    }

    /// A probe taken (seen as the timers ran) or reported, replayed as a
    /// probe step: `taken` takes the gate's grant; a report takes it too
    /// unless it is out already, as the live engine's was.
    pub(super) fn probe(&mut self, t: u64, device: u32, port: u8, outcome: ProbeOutcome) {
        if self.live(device).and_then(|d| d.port(port)).is_none() {
            return;
        }
        // A probe taken was seen as the timers ran at `t`: the worker took it
        // before them (the replay's timers of an instant run before its
        // steps), so it goes a millisecond earlier.
        let t = if outcome == ProbeOutcome::Taken { t.saturating_sub(1) } else { t };
        let at = t.max(self.timeline.floor());
        self.push_step(at, device, Change::Probe(ProbeStep { port, outcome }));
        self.wakes.read_here();
    }

    pub(super) fn link(&mut self, t: u64, device: u32, port: u8, answer: Result<LinkAttrs, Errno>) {
        let Some(seen) = self.ask(device, port, t, |p| &mut p.last_link) else { return };
        let Some(d) = self.live(device) else { return };
        let declared = d.declared;
        let Some(p) = d.port(port) else { return };
        let Ok(link) = answer else { return };
        let same = |a: &LinkAttrs, b: &LinkAttrs| {
            a.speed_code() == b.speed_code()
                && a.active_width == b.active_width
                && a.effective_100mbps == b.effective_100mbps
        };
        match &p.link {
            None if !declared => {
                p.link = Some(link);
                p.first.link = Some(link);
            }
            Some(known) if same(known, &link) => {}
            _ => {
                p.link = Some(link);
                self.push_seen(device, seen, t, Change::Link(LinkChange { port, link }));
            }
        }
    }

    pub(super) fn address(&mut self, t: u64, device: u32, port: u8, answer: Result<&PortAddress, Errno>) {
        let anonymize = self.anonymize;
        self.wakes.saw(t);
        let (late, event) = (self.wakes.timers_asking(), self.wakes.answering());
        let (wake, events) = (self.wakes.current(), self.wakes.events());
        let Some(d) = self.live(device) else { return };
        let address = match answer {
            Ok(a) => a,
            Err(Errno::EOPNOTSUPP) => {
                d.reads_addresses.get_or_insert(false);
                return;
            }
            Err(e) => {
                self.comment(t, format!("port {port}: an address read failed with errno {}", e.0));
                return;
            }
        };
        if d.reads_addresses == Some(false) || (d.declared && d.reads_addresses.is_none()) {
            // Declared without addresses: the replay cannot start reading.
            return;
        }
        d.reads_addresses = Some(true);
        let (declared, back) = (d.declared, d.back());
        let now = Asked { at: Some(t), opening: d.opening, wake, events };
        let rest = PortAddress { gids: Vec::new(), ..address.clone() }.fingerprint();
        let mut table: BTreeMap<u32, [u8; 16]> = address.gids.iter().map(|g| (g.index, g.raw)).collect();
        let Some(p) = d.port(port) else { return };
        let seen = Seen { late, event, ..p.last_address.again(now, back) };
        let other = match p.others.iter().position(|&o| o == rest) {
            Some(i) => i,
            None => {
                p.others.push(rest);
                p.others.len() - 1
            }
        };
        if other > 0 {
            let mut raw = [0u8; 16];
            raw[0] = 0xfd;
            raw[12..].copy_from_slice(&(other as u32).to_be_bytes());
            table.insert(OTHER_ADDRESS_INDEX, raw);
        }
        if anonymize {
            for raw in table.values_mut() {
                *raw = anonymous_gid(&mut self.gid_names, *raw);
            }
        }
        let Some(d) = self.live(device) else { return };
        let Some(p) = d.port(port) else { return };
        let Some(known) = p.gids.as_ref() else {
            if !declared {
                p.first.gids = Some(table.clone());
                p.gids = Some(table);
            }
            return;
        };
        let mut changes: Vec<GidChange> = Vec::new();
        for (&index, &raw) in &table {
            if known.get(&index) != Some(&raw) {
                changes.push(GidChange { port, index, gid: Some(raw) });
            }
        }
        for &index in known.keys() {
            if !table.contains_key(&index) {
                changes.push(GidChange { port, index, gid: None });
            }
        }
        p.gids = Some(table);
        for g in changes {
            self.push_seen(device, seen, t, Change::Gid(g));
        }
    }
}
