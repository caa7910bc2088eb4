//! Property tests of the real [`Machine`] (not a copy of it) under arbitrary
//! interleavings of every input, driven by a simulated world.
//!
//! The harness plays the driver: a world of one to three devices with one to
//! three ports each holds the true port states, link attributes and
//! addresses, and per device whether it is open, whether its port queries
//! (or link and address reads) fail and whether a re-open succeeds. It
//! carries out the machine's actions in order, like the runtime's `Monitor`,
//! answering queries from the world at once, or, when an op says so, late
//! (queued and delivered by a later op) or never; it also hands in answers
//! nobody asked for. Time moves like a correct driver moves it: every
//! deadline up to the op's time is run in turn (a driver that overslept
//! calls `handle_timeout` once, late).
//!
//! A re-open is never left unanswered (late, yes): the machine waits for
//! its answer without a timer, as a driver's synchronous re-open allows.
//!
//! After every input (and every action carried out) it checks:
//! 1. no rail is active or available on a closed device; available implies
//!    active and not held (damping, settling);
//! 2. generations never decrease;
//! 3. every re-attach bumps the generation past the one the rail was
//!    detached with;
//! 4. every deadline is finite and, once an input at `t` is handled, later
//!    than `t`;
//! 5. no timer is due forever (advancing is bounded);
//! 6. the selector hears a rail's rate (since its last attach) before it is
//!    made available, and `SetAvailable(true)` is only emitted for an active
//!    rail;
//! 7. replaying the `Transition` notifications gives every rail's state and
//!    generation;
//! 8. the actions of one input are finite;
//! 9. a small reference model restated from docs/STATE-MACHINE.md: inert is
//!    left only by an attach of an opened device; `PORT_ERR` pauses an active
//!    rail of a device read for events at once; a rail activates only on a
//!    port answer reading exactly ACTIVE for it, after its settle delay and
//!    not before its damping hold ends; a re-attach with a settle delay goes
//!    through it; and liveness: with answers given at once and working
//!    queries, a rail whose port reads ACTIVE is active (and available)
//!    within a tick plus the settle delay, and one whose port reads otherwise
//!    is paused within a tick on a poll-only device (within the audit period
//!    on one read for events); a poll-only device's rates follow its links
//!    within a tick; a hang-up or DEVICE_FATAL closes an open device.
//!
//! Also: no action names a device or rail that does not exist; nothing is
//! queried, read or re-opened against the driver's view of the device
//! (open, resp. closed); a paused rail (or a polled device) keeps the tick
//! armed within one period; and at the end of each case, once every owed
//! answer arrived and the world is healed, every rail comes back.
//!
//! Then one deterministic test per policy defect the machine had, and
//! allocation checks of the event path and of transfer reports with a
//! counting allocator.
//!
//! `PROPTEST_CASES` raises the case count (`cargo xtask props`).

#![cfg(not(loom))]

use std::collections::VecDeque;

use proptest::prelude::*;
use railwatch_core::{
    Action, AddressRequirement, AsyncEvent, Carrier, Cause, Counter, DampingConfig, DataPathConfig, DeviceMode,
    DeviceOwner, Element, Errno, EventKind, Gate, Gid, GidType, Happening, LinkAttrs, LinkLayer, LinkRate, ListChange,
    Log, MAX_DELAY_MS, Machine, MachineConfig, Millis, Notification, ObjectHandle, PauseReason, PortAddress,
    PortCounters, PortState, PortWitness, RailId, RailState, RecoveredBy, SILENT_FLAP_CONFIRM_MS, TransferReport,
    WcClass, WorkScope, classify_wc,
};

// ---- the world --------------------------------------------------------------

/// Actions one input may produce, and timeouts one advance may need.
const MAX_ACTIONS: usize = 10_000;
const MAX_STEPS: usize = 10_000;
/// Errno a failing query or re-open answers with.
const ENODEV: Errno = Errno(19);

fn hdr_4x() -> LinkAttrs {
    LinkAttrs::new(64, 2)
}

fn ndr_4x() -> LinkAttrs {
    LinkAttrs::new(128, 2)
}

fn address_of(lid: u16) -> PortAddress {
    // No GIDs, no netdev: building and dropping it never allocates.
    PortAddress { link_layer: Some(LinkLayer::InfiniBand), lid, gids: Vec::new(), netdev: None }
}

/// The world's address of a port: its LID, and a RoCE v2 IPv4 GID at index
/// 3 when `v4`.
fn world_address(lid: u16, v4: bool) -> PortAddress {
    let mut a = address_of(lid);
    if v4 {
        let mut raw = [0u8; 16];
        raw[10..].copy_from_slice(&[0xff, 0xff, 10, 0, 0, 1]);
        a.gids.push(Gid { index: 3, raw, kind: GidType::RoceV2 });
    }
    a
}

/// The model's own statement of `port_witness` (docs/STATE-MACHINE.md),
/// not the machine's table: whether a port reading `state` with `carrier`
/// may carry traffic.
fn usable(witness: PortWitness, state: PortState, carrier: Option<Carrier>) -> bool {
    let port = state == PortState::Active;
    match (witness, carrier) {
        (PortWitness::Port, _) | (_, None) => port,
        (PortWitness::Both, Some(c)) => port && c == Carrier::Up,
        (PortWitness::Carrier, Some(c)) => c == Carrier::Up,
    }
}

#[derive(Debug, Clone)]
struct WorldPort {
    state: PortState,
    link: LinkAttrs,
    lid: u16,
    /// The address has a RoCE v2 IPv4 GID.
    v4: bool,
    /// `link_downed`, and its value in the last answer the machine was
    /// given (an answer asked for and dropped or deferred is not given: the
    /// machine compares with what it took).
    link_downed: u64,
    given_link_downed: Option<u64>,
    query_fails: bool,
    /// Link and address reads fail.
    attr_fails: bool,
    /// The netdev's carrier (`None`: the port has no netdev).
    carrier: Option<Carrier>,
}

#[derive(Debug, Clone)]
struct WorldDevice {
    name: String,
    ports: Vec<WorldPort>,
    /// The driver's view: closed by `Close`, opened by a re-open answered
    /// `Ok` (or by adding it again).
    open: bool,
    /// Told to the machine as removed (and not added again).
    removed: bool,
    reopen_ok: bool,
}

/// The input being handled, for the reference model.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Input {
    AddDevice,
    Event { device: u32, event: AsyncEvent },
    ReadError,
    Hangup { device: u32 },
    Removed { device: u32 },
    List,
    Opened,
    Port { device: u32, port: u8, answer: Result<PortState, Errno>, carrier: Option<Carrier> },
    Carrier { device: u32, port: u8, carrier: Carrier },
    Link,
    Address,
    Reopen,
    Timeout,
    Transfers { device: u32, port: u8, peer: u64, wc_status: u32 },
    Probe { device: u32, port: u8, succeeded: bool },
    Counters { device: u32, port: u8, moved: bool },
}

/// An answer the driver owes (or volunteers).
#[derive(Debug, Clone, Copy)]
enum Answer {
    Port { device: u32, port: u8, answer: Result<PortState, Errno>, carrier: Option<Carrier> },
    Link { device: u32, port: u8, answer: Result<LinkAttrs, Errno> },
    Address { device: u32, port: u8, answer: Result<(u16, bool), Errno> },
    Counters { device: u32, port: u8, answer: Result<u64, Errno> },
    Reopen { device: u32, answer: Result<(), Errno> },
    Open { device: u32, answer: Result<(), Errno> },
}

/// The harness's mirror of one rail and the reference model's memory of it.
#[derive(Debug, Clone)]
struct Track {
    last_generation: u64,
    /// Replay of the `Transition` notes.
    state: RailState,
    generation: u64,
    detached_at_generation: u64,
    /// Since when the notes say it is settling.
    settling_since: Option<Millis>,
    /// The latest damping release ever announced: no activation before it.
    hold_floor: Millis,
    /// The selector, as told by the actions.
    available: bool,
    rate: Option<LinkRate>,
    seeded_since_attach: bool,
    /// The `Available` notifications.
    noted_available: bool,
    /// Liveness windows: since when the conditions for "active soon" and
    /// "not active soon" held without interruption.
    up_since: Option<Millis>,
    down_since: Option<Millis>,
    /// Local-path failures reported, and through which peers, since the
    /// rail last paused or tripped (a superset of any breaker window).
    local_failures: u64,
    failing_peers: Vec<u64>,
    /// The breaker tripped and no probe's success has closed it since: the
    /// rail may activate only by a probe's success (or a re-attach).
    tripped: bool,
    /// The first counter read that rose since the rail last paused or was
    /// called a silent flap: a silent flap is confirmed only a while after.
    rose_at: Option<Millis>,
    /// The carrier last given to the machine (with a port answer, or as a
    /// change).
    carrier: Option<Carrier>,
    /// When the gate granted the probe now out, if one is: it ends only by
    /// its report, a `probe_failed`, or its device's context going.
    probe_out: Option<Millis>,
}

impl Default for Track {
    fn default() -> Self {
        Track {
            last_generation: 0,
            state: RailState::Inert,
            generation: 0,
            detached_at_generation: 0,
            settling_since: None,
            hold_floor: Millis::ZERO,
            available: false,
            rate: None,
            seeded_since_attach: false,
            noted_available: false,
            up_since: None,
            down_since: None,
            local_failures: 0,
            failing_peers: Vec::new(),
            tripped: false,
            rose_at: None,
            carrier: None,
            probe_out: None,
        }
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct DeviceTrack {
    /// `StartReading` was emitted since the last `Close`.
    started: bool,
    /// The first attach finished (`Log::Attached`): later ones are re-attaches.
    attached_once: bool,
    /// Attaches finished; 1 while the device is on its first.
    attaches: u32,
    /// An `Open` was carried out and its answer not delivered yet.
    open_asked: bool,
}

/// A copy of what a test wants to know about one rail.
#[derive(Debug, Clone, Copy, PartialEq)]
struct RailSnap {
    state: RailState,
    reason: PauseReason,
    generation: u64,
    available: bool,
    rate: Option<LinkRate>,
    damped_until: Option<Millis>,
    settling_until: Option<Millis>,
}

struct Harness {
    m: Machine,
    cfg: MachineConfig,
    now: Millis,
    world: Vec<WorldDevice>,
    ids: Vec<RailId>,
    gates: Vec<Gate>,
    tracks: Vec<Track>,
    devs: Vec<DeviceTrack>,
    /// Actions taken from the machine, not carried out yet (FIFO, as the
    /// machine's own queue: the driver's order).
    queue: VecDeque<Action>,
    deferred: VecDeque<Answer>,
    defer_next: u32,
    drop_next: u32,
    input: Input,
    /// Every action carried out, with its time (tests read it).
    record: Option<Vec<(Millis, Action)>>,
    /// The last time the harness woke later than a deadline (a timer can
    /// fire no earlier than the driver wakes).
    overslept: Option<Millis>,
}

impl Harness {
    /// Devices `dev0`, `dev1`, … with ports `1..=n`, added at `start`.
    fn new(cfg: MachineConfig, devices: &[Vec<(PortState, LinkAttrs)>], start: Millis) -> Harness {
        let m = Machine::new(cfg.clone()).expect("a valid config");
        let world = devices
            .iter()
            .enumerate()
            .map(|(i, ports)| WorldDevice {
                name: format!("dev{i}"),
                ports: ports
                    .iter()
                    .map(|&(state, link)| WorldPort {
                        state,
                        link,
                        lid: 1,
                        v4: true,
                        link_downed: 0,
                        given_link_downed: None,
                        query_fails: false,
                        attr_fails: false,
                        carrier: None,
                    })
                    .collect(),
                open: true,
                removed: false,
                reopen_ok: true,
            })
            .collect();
        let mut h = Harness {
            m,
            cfg,
            now: start,
            world,
            ids: Vec::new(),
            gates: Vec::new(),
            tracks: Vec::new(),
            devs: Vec::new(),
            queue: VecDeque::new(),
            deferred: VecDeque::new(),
            defer_next: 0,
            drop_next: 0,
            input: Input::Timeout,
            record: Some(Vec::new()),
            overslept: None,
        };
        for d in 0..h.world.len() {
            let ports: Vec<u8> = (1..=h.world[d].ports.len() as u8).collect();
            h.devs.push(DeviceTrack::default());
            h.input = Input::AddDevice;
            let index = h.m.add_device(&h.world[d].name, &ports, h.now).expect("under MAX_DEVICES");
            assert_eq!(index, d as u32);
            for &port in &ports {
                let id = RailId { device: index, port };
                h.ids.push(id);
                h.tracks.push(Track::default());
                h.gates.push(h.m.gate(id).expect("a gate per rail"));
            }
            h.take_actions();
            h.settle();
        }
        h.update_windows(true);
        h
    }

    /// A healthy host: every port ACTIVE at HDR 4x.
    fn healthy(cfg: MachineConfig, ports: &[usize]) -> Harness {
        let devices: Vec<_> = ports.iter().map(|&n| vec![(PortState::Active, hdr_4x()); n]).collect();
        Harness::new(cfg, &devices, Millis::ZERO)
    }

    fn rail_index(&self, rail: RailId) -> Option<usize> {
        self.ids.iter().position(|&id| id == rail)
    }

    fn snap(&self, device: u32, port: u8) -> RailSnap {
        let v = self.m.rail(RailId { device, port }).expect("a rail");
        RailSnap {
            state: v.word.state,
            reason: v.word.reason,
            generation: v.word.generation,
            available: v.available,
            rate: v.rate,
            damped_until: v.damped_until,
            settling_until: v.settling_until,
        }
    }

    fn mode(&self, device: u32) -> DeviceMode {
        self.m.device(device).expect("a device").mode
    }

    fn immediate(&self) -> bool {
        self.defer_next == 0 && self.drop_next == 0
    }

    fn world_port(&mut self, device: u32, port: u8) -> &mut WorldPort {
        &mut self.world[device as usize].ports[port as usize - 1]
    }

    // ---- inputs -------------------------------------------------------------

    /// Hands one input to the machine, takes its actions (checking each as
    /// emitted) and checks the invariants.
    fn input(&mut self, input: Input, f: impl FnOnce(&mut Machine)) {
        self.input = input;
        f(&mut self.m);
        self.take_actions();
    }

    fn take_actions(&mut self) {
        let input = self.input;
        let mut n = 0;
        while let Some(action) = self.m.poll_action() {
            n += 1;
            assert!(n <= MAX_ACTIONS, "input {input:?} produced more than {MAX_ACTIONS} actions");
            self.on_emit(&action);
            self.queue.push_back(action);
        }
        self.check();
    }

    /// Carries out every queued action (and what answering them asks for).
    fn settle(&mut self) {
        let mut n = 0;
        while let Some(action) = self.queue.pop_front() {
            n += 1;
            assert!(n <= 10 * MAX_ACTIONS, "the action queue does not drain");
            self.carry_out(action);
        }
        self.check_settled();
    }

    fn event(&mut self, device: u32, event: AsyncEvent) {
        // 9b: PORT_ERR pauses an active rail of a device read for events at
        // once (before any answer).
        let watched = self.m.device(device).is_some_and(|d| d.mode == DeviceMode::Events);
        let before: Vec<(usize, RailState, u64)> = (0..self.ids.len())
            .filter(|&r| self.ids[r].device == device)
            .map(|r| {
                let w = self.gates[r].word();
                (r, w.state, w.generation)
            })
            .collect();
        let now = self.now;
        let was_open = self.m.device(device).is_some_and(|d| !d.mode.is_closed());
        self.input(Input::Event { device, event }, |m| m.handle_event(device, event, now));
        if event.kind() == EventKind::DeviceFatal {
            self.check_device_lost(device, was_open);
        }
        if watched && event.kind() == EventKind::PortErr {
            for (r, state, generation) in before {
                if state == RailState::Active && event.port_num() == Some(u32::from(self.ids[r].port)) {
                    let w = self.gates[r].word();
                    assert_eq!(
                        (w.state, w.reason, w.generation),
                        (RailState::Paused, PauseReason::PortErr, generation),
                        "PORT_ERR must pause active rail {} at once",
                        self.ids[r]
                    );
                    assert!(!self.m.rail(self.ids[r]).unwrap().available);
                }
            }
        }
        self.settle();
    }

    fn port_event(&mut self, device: u32, kind: EventKind, port: u32) {
        self.event(device, AsyncEvent::port(kind, port));
    }

    /// The engine reports `count` completions with `wc_status` through
    /// `peer` on a rail.
    fn transfers(&mut self, device: u32, port: u8, peer: u64, wc_status: u32, count: u32) {
        if let Some(r) = self.rail_index(RailId { device, port })
            && classify_wc(wc_status) == WcClass::LocalPath
            && self.gates[r].word().state == RailState::Active
        {
            let t = &mut self.tracks[r];
            t.local_failures += u64::from(count);
            if !t.failing_peers.contains(&peer) {
                t.failing_peers.push(peer);
            }
        }
        let now = self.now;
        let report = [TransferReport { peer, wc_status, count }];
        self.input(Input::Transfers { device, port, peer, wc_status }, |m| {
            m.handle_transfers(device, port, &report, now)
        });
        self.settle();
    }

    /// A worker asks the gate for the probe: granted at most once per
    /// half-open (a second ask, and every ordinary admission, is refused
    /// while it is out), then the outcome is reported, or never. With
    /// `unasked`, a report comes with no grant asked for.
    fn probe(&mut self, device: u32, port: u8, outcome: Option<bool>, unasked: bool) {
        let Some(r) = self.rail_index(RailId { device, port }) else { return };
        let granted = !unasked && self.gates[r].probe().is_ok();
        if granted {
            assert!(self.gates[r].probe().is_err(), "{device}/{port}: a second probe granted while one is out");
            assert!(self.gates[r].check().is_err(), "{device}/{port}: ordinary work admitted while probing");
            self.tracks[r].probe_out = Some(self.now);
        }
        let Some(succeeded) = outcome.filter(|_| granted || unasked) else { return };
        let now = self.now;
        // A report while a probe is out is that probe's, asked or not.
        if self.gates[r].word().reason == PauseReason::Probing {
            self.tracks[r].probe_out = None;
        }
        self.input(Input::Probe { device, port, succeeded }, |m| m.handle_probe(device, port, succeeded, now));
        self.settle();
    }

    fn read_error(&mut self, device: u32, errno: Errno) {
        let now = self.now;
        self.input(Input::ReadError, |m| m.handle_read_error(device, errno, now));
        self.settle();
    }

    fn hangup(&mut self, device: u32) {
        let now = self.now;
        let was_open = self.m.device(device).is_some_and(|d| !d.mode.is_closed());
        self.input(Input::Hangup { device }, |m| m.handle_hangup(device, now));
        self.check_device_lost(device, was_open);
        self.settle();
    }

    /// 9: a hang-up or DEVICE_FATAL closes an open device, whatever its port
    /// queries would say: gone, every rail inert.
    fn check_device_lost(&self, device: u32, was_open: bool) {
        if !was_open {
            return;
        }
        assert!(
            matches!(self.mode(device), DeviceMode::Gone { .. }),
            "device {device} lost but {:?}",
            self.mode(device)
        );
        for &id in self.ids.iter().filter(|id| id.device == device) {
            assert_eq!(self.gates[self.rail_index(id).unwrap()].word().state, RailState::Inert, "{id}");
        }
    }

    fn remove(&mut self, device: u32) {
        if let Some(w) = self.world.get_mut(device as usize) {
            w.removed = true;
        }
        let now = self.now;
        self.input(Input::Removed { device }, |m| m.handle_removed(device, now));
        self.settle();
    }

    /// The device source lists the world's devices whose bit is set in
    /// `mask`: the others leave, the listed ones that had left appear.
    fn list(&mut self, mask: u8) {
        let names: Vec<String> = (0..self.world.len())
            .filter(|d| mask & (1 << d) != 0)
            .map(|d| self.world[d].name.clone())
            .chain((mask & 0x80 != 0).then(|| "not/a device".to_owned()))
            .collect();
        for (d, w) in self.world.iter_mut().enumerate() {
            w.removed = mask & (1 << d) == 0;
        }
        let now = self.now;
        let mut change = None;
        self.input(Input::List, |m| change = Some(m.handle_device_list(names.iter().map(String::as_str), now)));
        for &d in &change.expect("a change").left {
            for &id in self.ids.iter().filter(|id| id.device == d) {
                // Inert (an inert rail keeps the reason it first had).
                assert_eq!(self.gates[self.rail_index(id).unwrap()].word().state, RailState::Inert, "{id} left");
            }
        }
        self.settle();
    }

    fn readd(&mut self, device: u32) {
        let Some(w) = self.world.get_mut(device as usize).filter(|w| w.removed) else { return };
        w.removed = false;
        w.open = true;
        let name = w.name.clone();
        let ports: Vec<u8> = (1..=w.ports.len() as u8).collect();
        let now = self.now;
        let mut index = u32::MAX;
        self.input(Input::AddDevice, |m| index = m.add_device(&name, &ports, now).expect("under MAX_DEVICES"));
        assert_eq!(index, device, "a device that came back keeps its index");
        self.settle();
    }

    /// One answer, now, as if the machine had asked.
    fn deliver(&mut self, answer: Answer) {
        let now = self.now;
        match answer {
            Answer::Port { device, port, answer, carrier } => {
                self.give_carrier(device, port, carrier);
                let input = Input::Port { device, port, answer, carrier };
                self.input(input, |m| m.handle_port_reading(device, port, answer, carrier, now))
            }
            Answer::Link { device, port, answer } => {
                if answer.is_err()
                    && let Some(r) = self.rail_index(RailId { device, port })
                    && self.tracks[r].rate.is_some()
                {
                    // A failing read keeps the rate the selector has
                    // (docs: "A link read that fails keeps the cached rate").
                    self.tracks[r].seeded_since_attach = true;
                }
                self.input(Input::Link, |m| m.handle_link(device, port, answer, now))
            }
            Answer::Counters { device, port, answer } => {
                let given = &mut self.world_port(device, port).given_link_downed;
                let moved = answer.is_ok_and(|n| given.is_some_and(|g| n > g));
                if let Ok(n) = answer {
                    *given = Some(n);
                }
                let counters = answer.map(|n| PortCounters { link_downed: Some(n), ..PortCounters::default() });
                if let Some(r) = self.rail_index(RailId { device, port }).filter(|_| moved) {
                    self.tracks[r].rose_at.get_or_insert(now);
                }
                self.input(Input::Counters { device, port, moved }, |m| m.handle_counters(device, port, counters, now))
            }
            Answer::Address { device, port, answer } => {
                let address = answer.map(|(lid, v4)| world_address(lid, v4));
                self.input(Input::Address, |m| m.handle_address(device, port, address.as_ref().map_err(|e| *e), now))
            }
            Answer::Reopen { device, answer } => {
                // The device is open once the machine takes an `Ok` (an
                // unasked one it ignores opened nothing). Marked before the
                // machine's actions are checked: it queries the device at once.
                let was_closed = self.m.device(device).is_some_and(|d| d.mode.is_closed());
                self.input = Input::Reopen;
                self.m.handle_reopen(device, answer, now);
                if was_closed && self.m.device(device).is_some_and(|d| !d.mode.is_closed()) {
                    self.world[device as usize].open = true;
                }
                self.take_actions();
            }
            Answer::Open { device, answer } => {
                // The driver holds a handle once it opened one the machine
                // asked for, taken or not (a device that left meanwhile is
                // closed again by the machine).
                let asked = self.devs.get_mut(device as usize).is_some_and(|d| std::mem::take(&mut d.open_asked));
                if asked && answer.is_ok() {
                    self.world[device as usize].open = true;
                }
                let ports: Vec<u8> = match self.world.get(device as usize) {
                    Some(w) => (1..=w.ports.len() as u8).collect(),
                    None => vec![1],
                };
                self.input = Input::Opened;
                self.m.handle_opened(device, answer.map(|()| &ports[..]), now);
                self.take_actions();
            }
        }
    }

    /// The track's copy of the carrier the machine is given for a rail (it
    /// takes none for a closed device).
    fn give_carrier(&mut self, device: u32, port: u8, carrier: Option<Carrier>) {
        let open = self.m.device(device).is_some_and(|d| !d.mode.is_closed());
        if let Some(r) = self.rail_index(RailId { device, port }).filter(|_| open && carrier.is_some()) {
            self.tracks[r].carrier = carrier;
        }
    }

    /// The netdev's carrier changes and an rtnetlink message says so.
    fn carrier_message(&mut self, device: u32, port: u8, carrier: Carrier) {
        self.give_carrier(device, port, Some(carrier));
        let now = self.now;
        self.input(Input::Carrier { device, port, carrier }, |m| m.handle_carrier(device, port, carrier, now));
    }

    /// Answers as the policy says: at once, later, or (never a re-open)
    /// not at all.
    fn answer(&mut self, answer: Answer) {
        if self.defer_next > 0 {
            self.defer_next -= 1;
            self.deferred.push_back(answer);
        } else if self.drop_next > 0 && !matches!(answer, Answer::Reopen { .. } | Answer::Open { .. }) {
            self.drop_next -= 1;
        } else {
            self.deliver(answer);
        }
    }

    /// Delivers every late answer, each followed by what it leads to.
    fn flush(&mut self, reverse: bool) {
        while let Some(answer) = if reverse { self.deferred.pop_back() } else { self.deferred.pop_front() } {
            self.deliver(answer);
            self.settle();
        }
    }

    fn timeout_at(&mut self, t: Millis) {
        self.now = t;
        self.input(Input::Timeout, |m| m.handle_timeout(t));
        // 4: nothing is due any more once `handle_timeout(t)` ran.
        if let Some(d) = self.m.poll_timeout() {
            assert!(d > t, "handle_timeout({t}) left a deadline at {d}: a driver would spin");
        }
        self.settle();
    }

    /// Runs every deadline up to `to`, in turn, like a driver that wakes on
    /// time.
    fn advance_to(&mut self, to: Millis) {
        let mut steps = 0;
        while let Some(d) = self.m.poll_timeout() {
            if d > to {
                break;
            }
            assert!(d > self.now, "deadline {d} is not after now ({})", self.now);
            steps += 1;
            assert!(steps <= MAX_STEPS, "more than {MAX_STEPS} timeouts to reach {to}: a timer spins");
            self.timeout_at(d);
        }
        self.now = self.now.max(to);
    }

    fn advance(&mut self, ms: u64) {
        self.advance_to(self.now.plus(ms));
    }

    /// Steps deadline by deadline until `stop` says so (checked after each
    /// step) or `limit` is passed; returns whether it stopped.
    fn advance_until(&mut self, limit: Millis, stop: impl FnMut(&Harness) -> bool) -> bool {
        self.advance_until_within(limit, MAX_STEPS, stop)
    }

    /// [`advance_until`](Self::advance_until) with room for `budget` steps
    /// (deadlines strictly increase, so a span of `n` ms takes at most
    /// `n + 1`).
    fn advance_until_within(&mut self, limit: Millis, budget: usize, mut stop: impl FnMut(&Harness) -> bool) -> bool {
        let mut steps = 0;
        while !stop(self) {
            match self.m.poll_timeout() {
                Some(d) if d <= limit => {
                    assert!(d > self.now, "deadline {d} is not after now ({})", self.now);
                    steps += 1;
                    assert!(steps <= budget, "more than {budget} timeouts before {limit}: a timer spins");
                    self.timeout_at(d);
                }
                _ => {
                    self.now = self.now.max(limit);
                    return stop(self);
                }
            }
        }
        true
    }

    /// A driver that overslept: one late `handle_timeout`.
    fn oversleep(&mut self, ms: u64) {
        let to = self.now.plus(ms);
        self.overslept = Some(to);
        self.timeout_at(to);
        self.advance_to(to);
    }

    // ---- carrying out actions -------------------------------------------------

    fn carry_out(&mut self, action: Action) {
        if let Some(record) = self.record.as_mut() {
            record.push((self.now, action));
        }
        match action {
            Action::StartReading { .. } | Action::StopReading { .. } | Action::Log(_) => {}
            Action::Close { device } => {
                // An engine's device is closed only when it left the host.
                let w = &mut self.world[device as usize];
                assert!(self.cfg.device_owner == DeviceOwner::Railwatch || w.removed, "Close of an engine's device");
                w.open = false;
            }
            Action::Reopen { device } => {
                let w = &self.world[device as usize];
                assert_eq!(self.cfg.device_owner, DeviceOwner::Railwatch, "Reopen of a device the engine owns");
                assert!(!w.open, "Reopen of device {device}, which is open");
                let answer = if w.reopen_ok { Ok(()) } else { Err(ENODEV) };
                self.answer(Answer::Reopen { device, answer });
            }
            Action::Revalidate { device, .. } => {
                // The engine's context was never closed: it re-validates it.
                let w = &self.world[device as usize];
                assert_eq!(self.cfg.device_owner, DeviceOwner::Engine, "Revalidate of a device railwatch owns");
                assert!(w.open || w.removed, "Revalidate of device {device}, which was closed");
                let answer = if w.reopen_ok && !w.removed { Ok(()) } else { Err(ENODEV) };
                self.answer(Answer::Reopen { device, answer });
            }
            Action::Open { device } => {
                let w = &self.world[device as usize];
                assert!(!w.open, "Open of device {device}, which is open");
                assert!(!w.removed, "Open of device {device}, which is not in the device list");
                self.devs[device as usize].open_asked = true;
                let answer = if w.reopen_ok { Ok(()) } else { Err(ENODEV) };
                self.answer(Answer::Open { device, answer });
            }
            Action::QueryPort { device, port } => {
                let p = self.port_of_open_device(device, port, "QueryPort");
                let answer = if p.query_fails { Err(ENODEV) } else { Ok(p.state) };
                self.answer(Answer::Port { device, port, answer, carrier: p.carrier });
            }
            Action::ReadLink { device, port } => {
                let p = self.port_of_open_device(device, port, "ReadLink");
                let answer = if p.attr_fails { Err(Errno::EIO) } else { Ok(p.link) };
                self.answer(Answer::Link { device, port, answer });
            }
            Action::ReadAddress { device, port } => {
                let p = self.port_of_open_device(device, port, "ReadAddress");
                let answer = if p.attr_fails { Err(Errno::EIO) } else { Ok((p.lid, p.v4)) };
                self.answer(Answer::Address { device, port, answer });
            }
            Action::ReadCounters { device, port } => {
                let p = self.port_of_open_device(device, port, "ReadCounters");
                let answer = if p.attr_fails { Err(Errno(2)) } else { Ok(p.link_downed) };
                self.answer(Answer::Counters { device, port, answer });
            }
            Action::SetAvailable { rail, available } => {
                let r = self.rail_index(rail).expect("SetAvailable for a rail that exists");
                // 6: the selector was seeded (since the last attach) first.
                assert!(
                    !available || self.tracks[r].seeded_since_attach,
                    "{rail} made available before its rate was seeded"
                );
                self.tracks[r].available = available;
            }
            Action::Reseed { rail, rate } => {
                let r = self.rail_index(rail).expect("Reseed for a rail that exists");
                self.tracks[r].rate = Some(rate);
                self.tracks[r].seeded_since_attach = true;
            }
            Action::Notify(Notification { what, .. }) => match what {
                Happening::Available { rail, available } => {
                    let r = self.rail_index(rail).expect("a rail");
                    self.tracks[r].noted_available = available;
                }
                Happening::Transition { rail, from: RailState::Inert, to, .. } if to != RailState::Inert => {
                    let r = self.rail_index(rail).expect("a rail");
                    self.tracks[r].seeded_since_attach = false;
                }
                _ => {}
            },
        }
    }

    fn port_of_open_device(&self, device: u32, port: u8, what: &str) -> WorldPort {
        let w = self.world.get(device as usize).unwrap_or_else(|| panic!("{what} for device {device}"));
        assert!(w.open, "{what} for port {port} of device {device}, which is closed");
        w.ports.get(port as usize - 1).unwrap_or_else(|| panic!("{what} for port {port} of device {device}")).clone()
    }

    // ---- checks -------------------------------------------------------------

    /// Checks one action as the machine emits it (the state is the one the
    /// input left).
    fn on_emit(&mut self, action: &Action) {
        let known = |d: u32| (d as usize) < self.world.len();
        match *action {
            Action::StartReading { device }
            | Action::StopReading { device }
            | Action::Close { device }
            | Action::Reopen { device }
            | Action::Open { device }
            | Action::QueryPort { device, .. }
            | Action::ReadLink { device, .. }
            | Action::ReadAddress { device, .. }
            | Action::ReadCounters { device, .. } => {
                assert!(known(device), "{action:?} names a device that does not exist");
            }
            Action::SetAvailable { rail, .. } | Action::Reseed { rail, .. } => {
                assert!(self.rail_index(rail).is_some(), "{action:?} names a rail that does not exist");
            }
            _ => {}
        }
        match *action {
            Action::StartReading { device } => self.devs[device as usize].started = true,
            Action::Close { device } => self.devs[device as usize].started = false,
            Action::Log(Log::Attached { device }) => {
                let dev = &mut self.devs[device as usize];
                dev.attached_once = true;
                dev.attaches += 1;
            }
            Action::SetAvailable { rail, available: true } => {
                let r = self.rail_index(rail).expect("a rail");
                assert_eq!(self.gates[r].word().state, RailState::Active, "{rail} made available while not active");
            }
            Action::Notify(Notification { t, what: Happening::Transition { rail, from, to, cause, generation } }) => {
                self.on_transition(t, rail, from, to, cause, generation)
            }
            Action::Notify(Notification { t, what: Happening::ProbeFailed { rail, timed_out } }) => {
                self.on_probe_failed(t, rail, timed_out)
            }
            _ => {}
        }
    }

    /// A probe failed: one was out, and a timeout fires between
    /// `probe_timeout_ms` and a tick more after the grant (the machine
    /// learns of the grant at its next tick), unless the driver overslept.
    fn on_probe_failed(&mut self, t: Millis, rail: RailId, timed_out: bool) {
        let r = self.rail_index(rail).expect("a rail");
        if matches!(self.input, Input::Probe { device, port, succeeded: false } if rail == RailId { device, port }) {
            return; // the report of a failure
        }
        let taken = self.tracks[r].probe_out.take();
        let Some(taken) = taken else { panic!("{rail}: probe_failed with no probe out at {t}") };
        if !timed_out {
            return;
        }
        let timeout = self.cfg.data_path.expect("a breaker").probe_timeout_ms;
        assert!(t >= taken.plus(timeout), "{rail}: a probe taken at {taken} timed out early, at {t}");
        let bound = taken.plus(timeout + self.cfg.tick_ms);
        let late = self.overslept.is_some_and(|o| o > taken);
        assert!(late || t <= bound, "{rail}: a probe taken at {taken} timed out at {t}, after {bound}");
    }

    /// The reference model's view of one transition note.
    fn on_transition(
        &mut self,
        t: Millis,
        rail: RailId,
        from: RailState,
        to: RailState,
        cause: Cause,
        generation: u64,
    ) {
        let r = self.rail_index(rail).expect("a transition of a rail that exists");
        let input = self.input;
        let settle_ms = self.cfg.settle_ms;
        let dev = self.devs[rail.device as usize];
        let open = self.world[rail.device as usize].open;
        let left = self.world[rail.device as usize].removed;
        let what = format!("{rail}: {from} -> {to} ({cause:?}, generation {generation}) on {input:?} at {t}");
        let tr = &self.tracks[r];
        assert_eq!(from, tr.state, "notes out of order: {what}");
        assert!(generation >= tr.generation, "generation went back: {what}");
        let tr = &mut self.tracks[r];
        match (from, to) {
            (RailState::Inert, RailState::Inert) => panic!("inert to inert: {what}"),
            (RailState::Inert, _) => {
                // 9a, 3: only an attach of an opened device leaves inert,
                // and it bumps the generation.
                assert!(matches!(input, Input::Port { device, .. } if device == rail.device), "not an attach: {what}");
                assert!(dev.started && open, "attach of a device not (re)opened: {what}");
                assert_eq!(generation, tr.generation + 1, "{what}");
                assert!(generation > tr.detached_at_generation, "{what}");
                if to == RailState::Active {
                    assert!(settle_ms == 0 || !dev.attached_once, "a re-attach skipped the settle delay: {what}");
                    assert!(t.plus(1) >= tr.hold_floor, "attached active while damped until {}: {what}", tr.hold_floor);
                }
                // The attach judges by the witness: a port its witness calls
                // usable is never paused for not being ACTIVE.
                // (An attach ends on its last port's answer: judge only the
                // rail whose answer it is.)
                if let (Input::Port { port, answer: Ok(state), carrier, .. }, Cause::Reason(PauseReason::PortNotActive)) =
                    (input, cause)
                    && port == rail.port
                {
                    let usable_now = usable(self.cfg.port_witness, state, carrier.or(tr.carrier));
                    assert!(!usable_now, "attached paused port_not_active while usable by the witness: {what}");
                }
            }
            (_, RailState::Inert) => {
                let device_lost = match input {
                    Input::Event { device, event } => device == rail.device && event.kind() == EventKind::DeviceFatal,
                    Input::Hangup { device } | Input::Removed { device } => device == rail.device,
                    Input::Port { device, answer, .. } => device == rail.device && answer.is_err(),
                    Input::List => left,
                    _ => false,
                };
                assert!(device_lost, "detached without losing the device: {what}");
                assert_eq!(generation, tr.generation, "a detach bumps nothing: {what}");
                tr.detached_at_generation = generation;
            }
            (RailState::Paused, RailState::Active) => {
                // The one activation path: a port answer for this rail
                // reading exactly ACTIVE (or, with require_address, the
                // address read it waited for), after the settle delay and
                // the damping hold (1 ms of rounding allowed).
                let witness = self.cfg.port_witness;
                let by_port = matches!(input, Input::Port { device, port, answer: Ok(state), .. }
                        if device == rail.device && port == rail.port && usable(witness, state, tr.carrier));
                let by_address = self.cfg.require_address != AddressRequirement::None && input == Input::Address;
                let by_probe = matches!(input, Input::Probe { device, port, succeeded: true }
                        if device == rail.device && port == rail.port);
                if tr.tripped {
                    // Elapsed time is not evidence: only a probe's success
                    // closes a tripped breaker.
                    assert!(by_probe, "a tripped rail activated without a probe's success: {what}");
                    assert_eq!(cause, Cause::By(RecoveredBy::Probe), "{what}");
                    tr.tripped = false;
                } else {
                    assert!(by_port || by_address, "activated without a port answer reading ACTIVE: {what}");
                }
                assert_eq!(generation, tr.generation + 1, "a resume bumps once: {what}");
                assert!(matches!(cause, Cause::By(_)), "{what}");
                // The first attach never waits the settle delay, also when
                // it waited for its address.
                let first_attach = cause == Cause::By(RecoveredBy::Attach) && dev.attaches == 1;
                if settle_ms > 0 && !first_attach {
                    let since = tr.settling_since.unwrap_or_else(|| panic!("activated without settling: {what}"));
                    assert!(t >= since.plus(settle_ms), "activated before the settle delay (since {since}): {what}");
                }
                assert!(t.plus(1) >= tr.hold_floor, "activated while damped until {}: {what}", tr.hold_floor);
            }
            (RailState::Active, RailState::Paused) if cause == Cause::Reason(PauseReason::DataPath) => {
                // The breaker: local-path failures on this rail, enough of
                // them through enough peers; one outage, one trip.
                let cfg = self.cfg.data_path.unwrap_or_else(|| panic!("the breaker is off: {what}"));
                assert!(
                    matches!(input, Input::Transfers { device, port, wc_status, .. }
                        if device == rail.device && port == rail.port && classify_wc(wc_status) == WcClass::LocalPath),
                    "tripped without a local-path failure on the rail: {what}"
                );
                let enough = tr.local_failures >= cfg.failures && tr.failing_peers.len() as u64 >= cfg.min_peers;
                assert!(enough, "tripped on {} failure(s) through {:?}: {what}", tr.local_failures, tr.failing_peers);
                assert!(!tr.tripped, "tripped twice in one outage: {what}");
                tr.local_failures = 0;
                tr.tripped = true;
                tr.failing_peers.clear();
            }
            (RailState::Active, RailState::Paused) if cause == Cause::Reason(PauseReason::NoAddress) => {
                assert!(
                    self.cfg.require_address != AddressRequirement::None && input == Input::Address,
                    "paused for its address without an address read: {what}"
                );
            }
            (RailState::Active, RailState::Paused) => {
                tr.rose_at = None;
                tr.local_failures = 0;
                tr.failing_peers.clear();
                let why = match input {
                    Input::Event { device, event } => {
                        device == rail.device
                            && event.kind() == EventKind::PortErr
                            && event.port_num() == Some(u32::from(rail.port))
                    }
                    Input::Port { device, port, answer: Ok(state), .. } => {
                        device == rail.device && port == rail.port && !usable(self.cfg.port_witness, state, tr.carrier)
                    }
                    Input::Carrier { device, port, carrier: Carrier::Down } => {
                        device == rail.device && port == rail.port && self.cfg.port_witness != PortWitness::Port
                    }
                    _ => false,
                };
                assert!(why, "paused without PORT_ERR or a port reading not ACTIVE: {what}");
                assert_eq!(generation, tr.generation, "a pause bumps nothing: {what}");
            }
            (a, b) => {
                assert_eq!(a, b, "{what}");
                match cause {
                    Cause::Bump(_) => assert_eq!(generation, tr.generation + 1, "{what}"),
                    Cause::SilentFlap => {
                        // A counter the machine read moved, on an active
                        // rail, and a read at least SILENT_FLAP_CONFIRM_MS
                        // later still found it active.
                        assert!(
                            matches!(input, Input::Counters { device, port, .. }
                                if device == rail.device && port == rail.port),
                            "a silent flap not on a counter read: {what}"
                        );
                        let rose = tr.rose_at.take();
                        assert!(
                            rose.is_some_and(|r| t >= r.plus(SILENT_FLAP_CONFIRM_MS)),
                            "a silent flap without a counter that moved {SILENT_FLAP_CONFIRM_MS} ms before ({rose:?}): {what}"
                        );
                        assert_eq!((a, generation), (RailState::Active, tr.generation + 1), "{what}");
                    }
                    _ => assert_eq!(generation, tr.generation, "{what}"),
                }
            }
        }
        if to == RailState::Inert {
            // A re-attach is a new device context: its breaker is reset.
            (tr.local_failures, tr.tripped) = (0, false);
            tr.failing_peers.clear();
        }
        tr.settling_since = match (to, cause) {
            (RailState::Paused, Cause::Reason(PauseReason::Settling)) => Some(t),
            (
                RailState::Paused,
                Cause::Bump(_) | Cause::Reason(PauseReason::NoAddress | PauseReason::DataPath | PauseReason::HalfOpen),
            ) => tr.settling_since,
            _ => None,
        };
        tr.state = to;
        tr.generation = generation;
    }

    /// After every input.
    fn check(&mut self) {
        for r in 0..self.ids.len() {
            let id = self.ids[r];
            let v = self.m.rail(id).expect("a rail");
            let w = v.word;
            assert_eq!(self.gates[r].word(), w, "the gate and the view disagree on {id}");
            // 2
            assert!(w.generation >= self.tracks[r].last_generation, "{id}: generation went back");
            self.tracks[r].last_generation = w.generation;
            // 1
            let mode = self.m.device(id.device).expect("a device").mode;
            if mode.is_closed() {
                assert_eq!(w.state, RailState::Inert, "{id}: not inert on a closed device ({mode:?})");
            }
            if mode.is_closed() || !self.world[id.device as usize].open {
                assert!(w.state != RailState::Active && !v.available, "{id}: active or available on a closed device");
            }
            if v.available {
                assert!(
                    w.state == RailState::Active && v.damped_until.is_none() && v.settling_until.is_none(),
                    "{id}: available but {w:?}, held until {:?}/{:?}",
                    v.damped_until,
                    v.settling_until
                );
            }
            if let Some(u) = v.damped_until {
                self.tracks[r].hold_floor = self.tracks[r].hold_floor.max(u);
            }
            // No rail is available while its breaker is open, and no
            // ordinary work is admitted while it is open or half-open.
            assert!(v.breaker_until.is_none() || !v.available, "{id}: available while its breaker is open");
            if self.tracks[r].tripped {
                assert!(self.gates[r].check().is_err() && !v.available, "{id}: admits while its breaker is tripped");
            }
            // A probe out ends by its report or a `probe_failed` (also when
            // the port or the device goes), never by vanishing.
            if w.reason != PauseReason::Probing {
                assert!(self.tracks[r].probe_out.is_none(), "{id}: the probe out vanished: {w:?}");
            }
        }
        // 4
        if let Some(d) = self.m.poll_timeout() {
            assert!(d.0 < u64::MAX / 2, "deadline {d} is not finite");
        }
    }

    /// After every input and all that answering it led to.
    fn check_settled(&mut self) {
        self.check();
        if let Some(d) = self.m.poll_timeout() {
            assert!(d > self.now, "deadline {d} is not after now ({})", self.now);
        }
        let mut needs_tick = false;
        for r in 0..self.ids.len() {
            let id = self.ids[r];
            let v = self.m.rail(id).expect("a rail");
            let t = &self.tracks[r];
            // 7: the notes replay to the word; the selector heard the truth.
            assert_eq!((t.state, t.generation), (v.word.state, v.word.generation), "{id}: notes and word disagree");
            assert_eq!(t.available, v.available, "{id}: the selector's availability");
            assert_eq!(t.noted_available, v.available, "{id}: the Available notes");
            assert_eq!(t.rate, v.rate, "{id}: the selector's rate");
            let mode = self.mode(id.device);
            needs_tick |= match mode {
                DeviceMode::Events => v.word.state == RailState::Paused,
                DeviceMode::PollOnly => v.word.state != RailState::Inert,
                _ => false,
            };
        }
        // A paused rail (or a polled device) is looked at within a tick.
        if needs_tick {
            let tick = self.m.next_tick();
            assert!(
                tick.is_some_and(|t| t <= self.now.plus(self.cfg.tick_ms)),
                "a rail needs the recovery tick, but it is {tick:?} at {}",
                self.now
            );
        }
    }

    // ---- liveness (9) -------------------------------------------------------

    /// Restarts (`perturbed`) or continues the liveness windows.
    fn update_windows(&mut self, perturbed: bool) {
        let immediate = self.immediate();
        for r in 0..self.ids.len() {
            let id = self.ids[r];
            let v = self.m.rail(id).expect("a rail");
            let mode = self.mode(id.device);
            let w = &self.world[id.device as usize];
            let base = immediate
                && w.open
                && !w.ports.iter().any(|p| p.query_fails)
                && v.word.state != RailState::Inert
                && matches!(mode, DeviceMode::Events | DeviceMode::PollOnly);
            let wp = &w.ports[id.port as usize - 1];
            let port_up = usable(self.cfg.port_witness, wp.state, wp.carrier);
            // The address require_address asks for is there (and readable),
            // and no breaker holds the rail.
            let need = self.cfg.require_address;
            let address_ok = need == AddressRequirement::None
                || (!wp.attr_fails && need.gid_index(&world_address(wp.lid, wp.v4)).is_some());
            // A tripped breaker waits for a probe, not the clock.
            let up = base && port_up && address_ok && !self.tracks[r].tripped && self.cfg.damping.is_none();
            let down = base
                && !port_up
                && (mode == DeviceMode::PollOnly || (mode == DeviceMode::Events && self.cfg.audit_ms.is_some()));
            let now = self.now;
            let t = &mut self.tracks[r];
            let keep = |since: Option<Millis>, cond: bool| match (cond, perturbed) {
                (false, _) => None,
                (true, true) => Some(now),
                (true, false) => since.or(Some(now)),
            };
            t.up_since = keep(t.up_since, up);
            t.down_since = keep(t.down_since, down);
        }
    }

    fn check_liveness(&self) {
        for r in 0..self.ids.len() {
            let id = self.ids[r];
            let v = self.m.rail(id).expect("a rail");
            let t = &self.tracks[r];
            if let Some(since) = t.up_since
                && self.now >= since.plus(self.cfg.tick_ms + self.cfg.settle_ms)
            {
                assert!(
                    v.word.state == RailState::Active && v.available,
                    "{id}: its port reads ACTIVE since {since}, yet at {} it is {:?} (available {})",
                    self.now,
                    v.word,
                    v.available
                );
                // No event tells a polled device's rate changed: the tick
                // reads its links.
                let port = &self.world[id.device as usize].ports[id.port as usize - 1];
                if self.mode(id.device) == DeviceMode::PollOnly && !port.attr_fails {
                    assert_eq!(v.rate, Some(port.link.rate()), "{id}: a polled device's rate is stale at {}", self.now);
                }
            }
            if let Some(since) = t.down_since {
                let bound = match self.mode(id.device) {
                    DeviceMode::PollOnly => self.cfg.tick_ms,
                    _ => self.cfg.audit_ms.expect("an audit"),
                };
                if self.now >= since.plus(bound) {
                    assert!(
                        v.word.state != RailState::Active,
                        "{id}: its port reads {} since {since}, yet at {} it is active",
                        self.world[id.device as usize].ports[id.port as usize - 1].state,
                        self.now
                    );
                }
            }
        }
    }
}

// ---- random cases -------------------------------------------------------------

/// A device as an op names it: one of the world's (modulo its size), or one
/// that does not exist.
#[derive(Debug, Clone, Copy)]
struct Dev(u8);

const NO_SUCH_DEVICE: u8 = 99;

impl Dev {
    fn resolve(self, n: usize) -> u32 {
        if self.0 == NO_SUCH_DEVICE { 9 } else { u32::from(self.0) % n as u32 }
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// A raw event read from a device.
    Event {
        dev: Dev,
        code: u32,
        element: Element,
    },
    /// The world's port state changes, silently or with the matching event.
    SetPort {
        dev: u8,
        port: u8,
        state: PortState,
        with_event: bool,
    },
    /// The netdev's carrier changes (the port keeps its state), silently
    /// or with an rtnetlink message.
    SetCarrier {
        dev: u8,
        port: u8,
        carrier: Carrier,
        with_message: bool,
    },
    /// The port flaps `times` times: down with PORT_ERR, back up with
    /// PORT_ACTIVE `down_ms` later (what damping counts).
    Bounce {
        dev: u8,
        port: u8,
        down_ms: u64,
        times: u8,
    },
    SetLink {
        dev: u8,
        port: u8,
        link: LinkAttrs,
    },
    SetLid {
        dev: u8,
        port: u8,
        lid: u16,
    },
    ToggleQueryFail {
        dev: u8,
        port: u8,
    },
    ToggleAttrFail {
        dev: u8,
        port: u8,
    },
    ToggleReopen {
        dev: u8,
    },
    ReadError {
        dev: Dev,
        errno: Errno,
    },
    Hangup {
        dev: Dev,
    },
    Remove {
        dev: u8,
    },
    Readd {
        dev: u8,
    },
    Advance(u64),
    Oversleep(u64),
    /// An early wake-up: `handle_timeout(now)` with nothing due.
    Wake,
    DeferNext(u8),
    DropNext(u8),
    Immediate,
    Flush {
        reverse: bool,
    },
    StrayPort {
        dev: Dev,
        port: u8,
        answer: Result<PortState, Errno>,
    },
    StrayLink {
        dev: Dev,
        port: u8,
    },
    StrayAddress {
        dev: Dev,
        port: u8,
    },
    StrayReopen {
        dev: Dev,
        ok: bool,
    },
    /// The device source lists the devices whose bits are set (bit 7: a
    /// name that cannot be a device's).
    List {
        mask: u8,
    },
    /// The engine reports transfers on a rail.
    Transfers {
        dev: u8,
        port: u8,
        peer: u8,
        wc_status: u32,
        count: u32,
    },
    /// A worker asks for the half-open breaker's probe; if granted, the
    /// outcome is reported (`Some`) or never (`None`: it times out). A
    /// report may also come with no grant (a stray).
    Probe {
        dev: u8,
        port: u8,
        outcome: Option<bool>,
        unasked: bool,
    },
    /// The port's `link_downed` counter moves (a flap nobody said).
    CountersMove {
        dev: u8,
        port: u8,
    },
    /// The port's RoCE v2 IPv4 GID comes or goes.
    ToggleV4 {
        dev: u8,
        port: u8,
    },
    StrayOpen {
        dev: Dev,
        ok: bool,
    },
}

#[derive(Debug, Clone)]
struct Case {
    cfg: MachineConfig,
    devices: Vec<Vec<(PortState, LinkAttrs)>>,
    ops: Vec<Op>,
}

fn port_state() -> impl Strategy<Value = PortState> {
    prop_oneof![
        6 => Just(PortState::Active),
        3 => Just(PortState::Down),
        1 => Just(PortState::Init),
        1 => Just(PortState::Armed),
        1 => Just(PortState::ActiveDefer),
        1 => Just(PortState::Nop),
        1 => (6u32..=u32::MAX).prop_map(PortState::Unknown),
    ]
}

fn link() -> impl Strategy<Value = LinkAttrs> {
    prop_oneof![
        4 => (prop::sample::select(vec![1u32, 2, 4, 8, 16, 32, 64, 128, 256]), prop::sample::select(vec![1u8, 2, 4, 8, 16]))
            .prop_map(|(s, w)| LinkAttrs::new(s, w)),
        1 => (any::<u8>(), any::<u8>(), any::<u32>(), proptest::option::of(any::<u64>())).prop_map(
            |(active_speed, active_width, active_speed_ex, effective_100mbps)| LinkAttrs {
                active_speed,
                active_width,
                active_speed_ex,
                effective_100mbps,
            }
        ),
    ]
}

/// Valid damping configs, the default and extreme ones (tiny reuse, huge
/// penalties, holds up to a week).
fn damping() -> impl Strategy<Value = DampingConfig> {
    let extreme = (1e-3f64..1e12, 0.5f64..8.0, 1e-9f64..0.99, 1.0f64..64.0, 1u64..200_000).prop_map(
        |(penalty_per_flap, suppress_x, reuse_x, max_x, half_life_ms)| {
            let suppress = penalty_per_flap * suppress_x;
            let mut d = DampingConfig {
                penalty_per_flap,
                suppress,
                reuse: suppress * reuse_x,
                half_life_ms,
                max_penalty: suppress * max_x,
            };
            if d.longest_hold_ms() > MAX_DELAY_MS as f64 {
                // Shorten the half-life until the longest hold fits a week.
                let doublings = (d.max_penalty / d.reuse).log2();
                d.half_life_ms = ((MAX_DELAY_MS as f64 / doublings).floor() as u64).max(1);
            }
            d
        },
    );
    prop_oneof![
        2 => Just(DampingConfig::default()),
        1 => Just(DampingConfig { half_life_ms: 2_000, ..Default::default() }),
        2 => extreme,
    ]
}

/// The evidence settings: the breaker (often with small numbers, so it
/// trips), the silent-flap rule, and an address requirement.
fn evidence() -> impl Strategy<Value = (Option<DataPathConfig>, bool, AddressRequirement, PortWitness)> {
    let breaker = (1u64..=12, 1u64..=20_000, 1u64..=3, 1u64..=3000, 1u64..=8).prop_map(
        |(failures, window_ms, min_peers, backoff_initial_ms, mult)| DataPathConfig {
            failures,
            window_ms,
            min_peers,
            backoff_initial_ms,
            backoff_max_ms: backoff_initial_ms * mult,
            probe_timeout_ms: backoff_initial_ms * mult,
        },
    );
    (
        proptest::option::weighted(0.8, breaker),
        any::<bool>(),
        prop::sample::select(AddressRequirement::ALL.to_vec()),
        prop::sample::select(PortWitness::ALL.to_vec()),
    )
}

fn config() -> impl Strategy<Value = MachineConfig> {
    (
        prop_oneof![1 => 1u64..=50, 6 => 50u64..=5000],
        prop_oneof![Just(0u64), 1u64..=3000],
        proptest::option::weighted(0.35, damping()),
        proptest::option::weighted(0.3, 1u64..=10_000),
        (1u64..=2000, 1u64..=8, 0u32..=100, any::<u64>(), 0u64..=60_000),
        (prop_oneof![3 => Just(0u64), 1 => 1u64..=3], prop::sample::select(DeviceOwner::ALL.to_vec())),
    )
        .prop_flat_map(|base| (Just(base), evidence()))
        .prop_map(|((tick_ms, settle_ms, damping, audit_ms, reopen, (query_retries, device_owner)), evidence)| {
            let (initial, mult, jitter, seed, explain) = reopen;
            let (data_path, silent_flaps, require_address, port_witness) = evidence;
            MachineConfig {
                query_retries,
                device_owner,
                tick_ms,
                audit_ms,
                explain_every_ms: explain,
                reopen_initial_ms: initial,
                reopen_max_ms: initial * mult,
                reopen_jitter_pct: jitter,
                seed: Some(seed),
                settle_ms,
                damping,
                data_path,
                silent_flaps,
                require_address,
                port_witness,
            }
        })
        .prop_filter("valid configs only", |c| c.validate().is_ok())
}

fn dev() -> impl Strategy<Value = Dev> {
    prop_oneof![12 => (0u8..3).prop_map(Dev), 1 => Just(Dev(NO_SUCH_DEVICE))]
}

/// Port numbers an event or stray answer may carry: mostly real ones.
fn port_num() -> impl Strategy<Value = u32> {
    prop_oneof![10 => 1u32..=3, 1 => prop::sample::select(vec![0u32, 7, 200, 256, u32::MAX])]
}

fn event_code() -> impl Strategy<Value = u32> {
    prop_oneof![
        4 => Just(EventKind::PortErr.code()),
        4 => Just(EventKind::PortActive.code()),
        1 => Just(EventKind::DeviceFatal.code()),
        1 => Just(EventKind::CqErr.code()),
        1 => Just(EventKind::LidChange.code()),
        1 => Just(EventKind::GidChange.code()),
        1 => Just(EventKind::ClientReregister.code()),
        1 => Just(EventKind::DeviceSpeedChange.code()),
        2 => 0u32..=25,
        1 => prop::sample::select(vec![u32::MAX, 1 << 31, 1000]),
    ]
}

fn element() -> impl Strategy<Value = Element> {
    prop_oneof![
        8 => port_num().prop_map(Element::Port),
        1 => Just(Element::None),
        1 => any::<u64>().prop_map(|h| Element::Object(ObjectHandle(h))),
    ]
}

fn errno() -> impl Strategy<Value = Errno> {
    prop_oneof![2 => Just(Errno::EIO), 1 => prop::sample::select(vec![Errno(9), ENODEV, Errno(22), Errno::UNKNOWN])]
}

fn op() -> impl Strategy<Value = Op> {
    let small_port = || 0u8..3;
    prop_oneof![
        12 => (dev(), event_code(), element()).prop_map(|(dev, code, element)| Op::Event { dev, code, element }),
        12 => (0u8..3, small_port(), port_state(), any::<bool>())
            .prop_map(|(dev, port, state, with_event)| Op::SetPort { dev, port, state, with_event }),
        5 => (0u8..3, small_port(), prop::sample::select(vec![Carrier::Up, Carrier::Down]), any::<bool>())
            .prop_map(|(dev, port, carrier, with_message)| Op::SetCarrier { dev, port, carrier, with_message }),
        6 => (0u8..3, small_port(), 0u64..300, 1u8..=4)
            .prop_map(|(dev, port, down_ms, times)| Op::Bounce { dev, port, down_ms, times }),
        2 => (0u8..3, small_port(), link()).prop_map(|(dev, port, link)| Op::SetLink { dev, port, link }),
        1 => (0u8..3, small_port(), any::<u16>()).prop_map(|(dev, port, lid)| Op::SetLid { dev, port, lid }),
        2 => (0u8..3, small_port()).prop_map(|(dev, port)| Op::ToggleQueryFail { dev, port }),
        1 => (0u8..3, small_port()).prop_map(|(dev, port)| Op::ToggleAttrFail { dev, port }),
        1 => (0u8..3).prop_map(|dev| Op::ToggleReopen { dev }),
        2 => (dev(), errno()).prop_map(|(dev, errno)| Op::ReadError { dev, errno }),
        1 => dev().prop_map(|dev| Op::Hangup { dev }),
        1 => (0u8..3).prop_map(|dev| Op::Remove { dev }),
        3 => (0u8..3).prop_map(|dev| Op::Readd { dev }),
        16 => prop_oneof![4 => 0u64..5000, 1 => Just(0u64), 1 => prop::sample::select(vec![1u64, 999, 1000, 1001])]
            .prop_map(Op::Advance),
        1 => prop_oneof![5001u64..10_000_000, prop::sample::select(vec![MAX_DELAY_MS, MAX_DELAY_MS + 1, 1 << 40])]
            .prop_map(Op::Oversleep),
        1 => Just(Op::Wake),
        2 => (1u8..=3).prop_map(Op::DeferNext),
        1 => (1u8..=3).prop_map(Op::DropNext),
        2 => Just(Op::Immediate),
        2 => any::<bool>().prop_map(|reverse| Op::Flush { reverse }),
        2 => (dev(), port_num(), prop_oneof![4 => port_state().prop_map(Ok), 1 => errno().prop_map(Err)])
            .prop_map(|(dev, port, answer)| Op::StrayPort { dev, port: port as u8, answer }),
        1 => (dev(), port_num()).prop_map(|(dev, port)| Op::StrayLink { dev, port: port as u8 }),
        1 => (dev(), port_num()).prop_map(|(dev, port)| Op::StrayAddress { dev, port: port as u8 }),
        1 => (dev(), any::<bool>()).prop_map(|(dev, ok)| Op::StrayReopen { dev, ok }),
        3 => any::<u8>().prop_map(|mask| Op::List { mask }),
        10 => (0u8..3, small_port(), 0u8..4, prop::sample::select(vec![0u32, 0, 12, 12, 2, 5, 10, 13, 99]), 1u32..=6)
            .prop_map(|(dev, port, peer, wc_status, count)| Op::Transfers { dev, port, peer, wc_status, count }),
        6 => (0u8..3, small_port(), proptest::option::of(any::<bool>()), proptest::bool::weighted(0.1))
            .prop_map(|(dev, port, outcome, unasked)| Op::Probe { dev, port, outcome, unasked }),
        2 => (0u8..3, small_port()).prop_map(|(dev, port)| Op::CountersMove { dev, port }),
        1 => (0u8..3, small_port()).prop_map(|(dev, port)| Op::ToggleV4 { dev, port }),
        1 => (dev(), any::<bool>()).prop_map(|(dev, ok)| Op::StrayOpen { dev, ok }),
    ]
}

/// The data-path breaker under pressure: a breaker that trips on a failure
/// or two through one peer, short backoffs and probe timeouts, and steps
/// that are mostly failing transfers, probes (granted or not, reported,
/// failed or lost) and time passing, with some port flaps among them.
fn breaker_case() -> impl Strategy<Value = Case> {
    let small_port = || 0u8..2;
    let ops = prop_oneof![
        10 => (0u8..2, small_port(), 0u8..3, prop::sample::select(vec![0u32, 12, 12, 10, 5]), 1u32..=3)
            .prop_map(|(dev, port, peer, wc_status, count)| Op::Transfers { dev, port, peer, wc_status, count }),
        10 => (0u8..2, small_port(), proptest::option::of(any::<bool>()), proptest::bool::weighted(0.1))
            .prop_map(|(dev, port, outcome, unasked)| Op::Probe { dev, port, outcome, unasked }),
        10 => prop_oneof![0u64..3000, Just(1u64)].prop_map(Op::Advance),
        2 => (0u8..2, small_port(), port_state(), any::<bool>())
            .prop_map(|(dev, port, state, with_event)| Op::SetPort { dev, port, state, with_event }),
        1 => (0u8..2).prop_map(|dev| Op::Remove { dev }),
        1 => (0u8..2).prop_map(|dev| Op::Readd { dev }),
        1 => Just(Op::Immediate),
    ];
    let breaker = (1u64..=3, 1u64..=2, 1u64..=500, 1u64..=4, 1u64..=2000).prop_map(
        |(failures, min_peers, backoff_initial_ms, mult, probe_timeout_ms)| DataPathConfig {
            failures,
            window_ms: 10_000,
            min_peers,
            backoff_initial_ms,
            backoff_max_ms: backoff_initial_ms * mult,
            probe_timeout_ms,
        },
    );
    (config(), breaker, prop::collection::vec(prop::collection::vec((Just(PortState::Active), link()), 1..=2), 1..=2))
        .prop_flat_map(move |(cfg, data_path, devices)| {
            let cfg = MachineConfig { data_path: Some(data_path), damping: None, ..cfg };
            (Just(cfg), Just(devices), prop::collection::vec(ops.clone(), 1..150))
        })
        .prop_map(|(cfg, devices, ops)| Case { cfg, devices, ops })
}

fn case() -> impl Strategy<Value = Case> {
    (
        config(),
        prop::collection::vec(prop::collection::vec((port_state(), link()), 1..=3), 1..=3),
        prop::collection::vec(op(), 1..100),
    )
        .prop_map(|(cfg, devices, ops)| Case { cfg, devices, ops })
}

impl Harness {
    fn apply(&mut self, op: &Op) {
        let n = self.world.len();
        let world_port = |h: &Harness, dev: u8, port: u8| {
            let d = usize::from(dev) % n;
            (d as u32, port % h.world[d].ports.len() as u8 + 1)
        };
        let mut perturbed = true;
        match *op {
            Op::Event { dev, code, element } => self.event(dev.resolve(n), AsyncEvent::new(code, element)),
            Op::SetPort { dev, port, state, with_event } => {
                let (d, p) = world_port(self, dev, port);
                self.world_port(d, p).state = state;
                if with_event {
                    let kind = if state == PortState::Active { EventKind::PortActive } else { EventKind::PortErr };
                    self.port_event(d, kind, u32::from(p));
                }
            }
            Op::SetCarrier { dev, port, carrier, with_message } => {
                let (d, p) = world_port(self, dev, port);
                self.world_port(d, p).carrier = Some(carrier);
                if with_message {
                    self.carrier_message(d, p, carrier);
                }
            }
            Op::Bounce { dev, port, down_ms, times } => {
                let (d, p) = world_port(self, dev, port);
                for _ in 0..times {
                    self.world_port(d, p).state = PortState::Down;
                    self.port_event(d, EventKind::PortErr, u32::from(p));
                    self.update_windows(true);
                    self.advance(down_ms);
                    self.world_port(d, p).state = PortState::Active;
                    self.port_event(d, EventKind::PortActive, u32::from(p));
                    self.update_windows(true);
                    self.advance(down_ms);
                }
            }
            Op::SetLink { dev, port, link } => {
                let (d, p) = world_port(self, dev, port);
                self.world_port(d, p).link = link;
            }
            Op::SetLid { dev, port, lid } => {
                let (d, p) = world_port(self, dev, port);
                self.world_port(d, p).lid = lid;
            }
            Op::ToggleQueryFail { dev, port } => {
                let (d, p) = world_port(self, dev, port);
                let wp = self.world_port(d, p);
                wp.query_fails = !wp.query_fails;
            }
            Op::ToggleAttrFail { dev, port } => {
                let (d, p) = world_port(self, dev, port);
                let wp = self.world_port(d, p);
                wp.attr_fails = !wp.attr_fails;
            }
            Op::ToggleReopen { dev } => {
                let w = &mut self.world[usize::from(dev) % n];
                w.reopen_ok = !w.reopen_ok;
            }
            Op::ReadError { dev, errno } => self.read_error(dev.resolve(n), errno),
            Op::Hangup { dev } => self.hangup(dev.resolve(n)),
            Op::Remove { dev } => self.remove(u32::from(dev) % n as u32),
            Op::Readd { dev } => self.readd(u32::from(dev) % n as u32),
            Op::Advance(ms) => {
                self.advance(ms);
                perturbed = false;
            }
            Op::Oversleep(ms) => self.oversleep(ms),
            Op::Wake => self.timeout_at(self.now),
            Op::DeferNext(k) => self.defer_next = u32::from(k),
            Op::DropNext(k) => self.drop_next = u32::from(k),
            Op::Immediate => (self.defer_next, self.drop_next) = (0, 0),
            Op::Flush { reverse } => self.flush(reverse),
            Op::StrayPort { dev, port, answer } => {
                self.deliver(Answer::Port { device: dev.resolve(n), port, answer, carrier: None });
                self.settle();
            }
            Op::StrayLink { dev, port } => {
                self.deliver(Answer::Link { device: dev.resolve(n), port, answer: Ok(ndr_4x()) });
                self.settle();
            }
            Op::StrayAddress { dev, port } => {
                self.deliver(Answer::Address { device: dev.resolve(n), port, answer: Ok((7, false)) });
                self.settle();
            }
            Op::StrayReopen { dev, ok } => {
                let answer = if ok { Ok(()) } else { Err(ENODEV) };
                self.deliver(Answer::Reopen { device: dev.resolve(n), answer });
                self.settle();
            }
            Op::List { mask } => self.list(mask),
            Op::Transfers { dev, port, peer, wc_status, count } => {
                let (d, p) = world_port(self, dev, port);
                self.transfers(d, p, u64::from(peer), wc_status, count);
            }
            Op::Probe { dev, port, outcome, unasked } => {
                let (d, p) = world_port(self, dev, port);
                self.probe(d, p, outcome, unasked);
            }
            Op::CountersMove { dev, port } => {
                let (d, p) = world_port(self, dev, port);
                let wp = self.world_port(d, p);
                wp.link_downed += 1;
            }
            Op::ToggleV4 { dev, port } => {
                let (d, p) = world_port(self, dev, port);
                let wp = self.world_port(d, p);
                wp.v4 = !wp.v4;
            }
            Op::StrayOpen { dev, ok } => {
                let answer = if ok { Ok(()) } else { Err(ENODEV) };
                self.deliver(Answer::Open { device: dev.resolve(n), answer });
                self.settle();
            }
        }
        self.update_windows(perturbed);
        self.check_liveness();
    }
}

fn run_case(case: &Case) {
    let mut h = Harness::new(case.cfg.clone(), &case.devices, Millis::ZERO);
    h.record = None;
    for op in &case.ops {
        h.apply(op);
    }
    // Every owed answer arrives; then, on a healed world without damping
    // (whose holds may last a week), every rail comes back within a
    // re-open (backoff plus jitter), a settle delay and a tick or two.
    h.apply(&Op::Immediate);
    h.apply(&Op::Flush { reverse: false });
    if case.cfg.damping.is_some() {
        return;
    }
    for d in 0..h.world.len() {
        let w = &mut h.world[d];
        w.reopen_ok = true;
        for p in &mut w.ports {
            (p.state, p.query_fails, p.v4, p.lid) = (PortState::Active, false, true, 1);
            p.carrier = p.carrier.map(|_| Carrier::Up);
            // An address that cannot be read never meets require_address
            // (a link that cannot be read holds nothing).
            p.attr_fails &= case.cfg.require_address == AddressRequirement::None;
        }
        h.readd(d as u32);
    }
    let cfg = &case.cfg;
    // A tripped breaker lets the rail through once the engine's probe
    // succeeds: a probe left out times out (a tick late at most), then the
    // longest backoff (its jitter within the cap), then half-open, where
    // the engine probes at once.
    let trial = cfg.data_path.map_or(0, |d| d.probe_timeout_ms + cfg.tick_ms + d.backoff_max_ms);
    let bound = 2 * cfg.reopen_max_ms + cfg.settle_ms + 3 * cfg.tick_ms + trial + 10;
    let limit = h.now.plus(bound);
    let all_back = |h: &Harness| h.ids.iter().all(|&id| h.m.rail(id).is_some_and(|v| v.available));
    let half_open = |h: &Harness| -> Vec<RailId> {
        h.ids
            .iter()
            .copied()
            .filter(|&id| h.m.rail(id).is_some_and(|v| v.word.reason == PauseReason::HalfOpen))
            .collect()
    };
    let healed = loop {
        let stopped = h.advance_until_within(limit, bound as usize + 2, |h| all_back(h) || !half_open(h).is_empty());
        let probes = half_open(&h);
        if !stopped || probes.is_empty() {
            break all_back(&h);
        }
        for id in probes {
            h.probe(id.device, id.port, Some(true), false);
        }
    };
    assert!(
        healed,
        "not every rail came back by {limit}: {:?}",
        h.ids.iter().map(|&id| h.m.rail(id)).collect::<Vec<_>>()
    );
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(512)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn the_machine_keeps_its_invariants(case in case()) {
        run_case(&case);
    }

    /// At most one probe at a time, no ordinary admission while open or
    /// half-open, and only a probe's success closes the breaker.
    #[test]
    fn the_breaker_grants_one_probe_and_only_a_probe_closes_it(case in breaker_case()) {
        run_case(&case);
    }
}

// ---- one test per defect ------------------------------------------------------

const TICK: u64 = 1000;

fn default_damping() -> MachineConfig {
    MachineConfig { damping: Some(DampingConfig::default()), ..Default::default() }
}

fn fatal() -> AsyncEvent {
    // DEVICE_FATAL arrives with port 0.
    AsyncEvent::new(EventKind::DeviceFatal.code(), Element::Port(0))
}

impl Harness {
    /// The port goes down with a PORT_ERR now and comes back with a
    /// PORT_ACTIVE `down_ms` later.
    fn bounce(&mut self, device: u32, port: u8, down_ms: u64) {
        self.world_port(device, port).state = PortState::Down;
        self.port_event(device, EventKind::PortErr, u32::from(port));
        self.advance(down_ms);
        self.world_port(device, port).state = PortState::Active;
        self.port_event(device, EventKind::PortActive, u32::from(port));
    }

    fn take_record(&mut self) -> Vec<(Millis, Action)> {
        std::mem::take(self.record.as_mut().expect("recording"))
    }

    fn recorded(&self, what: impl Fn(&Action) -> bool) -> bool {
        self.record.as_ref().expect("recording").iter().any(|(_, a)| what(a))
    }

    /// The transitions of `rail` carried out since the record was taken.
    fn transitions(&self, rail: RailId) -> Vec<(Millis, RailState, RailState, Cause)> {
        let record = self.record.as_ref().expect("recording");
        record
            .iter()
            .filter_map(|&(_, a)| match a {
                Action::Notify(Notification { t, what: Happening::Transition { rail: r, from, to, cause, .. } })
                    if r == rail =>
                {
                    Some((t, from, to, cause))
                }
                _ => None,
            })
            .collect()
    }
}

/// a. A damping config that passes validation with a hold just under a
/// week: every deadline after `handle_timeout(t)` is later than `t`, the
/// release is within the week, and a driver stepping through it (or
/// oversleeping it) never spins, also late on a 52-bit clock.
#[test]
fn a_a_week_long_damping_hold_never_spins() {
    let huge = DampingConfig {
        penalty_per_flap: 1e12,
        suppress: 1e12,
        reuse: 1e-280,
        max_penalty: 1e15,
        half_life_ms: (MAX_DELAY_MS as f64 / (1e15f64 / 1e-280).log2()).floor() as u64,
    };
    // log2(6000 / 750) = 3 half-lives at the cap.
    let capped = DampingConfig { half_life_ms: MAX_DELAY_MS / 3 - 1, ..Default::default() };
    for damping in [capped, huge] {
        damping.validate().expect("valid");
        let hold = damping.longest_hold_ms();
        assert!(hold <= MAX_DELAY_MS as f64 && hold > MAX_DELAY_MS as f64 * 0.99, "{hold}");
        for start in [Millis::ZERO, Millis(1 << 52)] {
            for oversleep in [false, true] {
                // An hour's tick, so stepping through a week is 168 ticks.
                let cfg = MachineConfig { tick_ms: 3_600_000, damping: Some(damping), ..Default::default() };
                let mut h = Harness::new(cfg, &[vec![(PortState::Active, hdr_4x())]], start);
                for _ in 0..20 {
                    h.bounce(0, 1, 1);
                    h.advance(1);
                }
                let s = h.snap(0, 1);
                assert_eq!((s.state, s.reason), (RailState::Paused, PauseReason::Damped));
                let until = s.damped_until.expect("held");
                assert!(until > h.now && until <= h.now.plus(MAX_DELAY_MS + 1), "{until} at {}", h.now);
                assert!(until.since(h.now) as f64 > hold * 0.99, "a near week-long hold: {until} at {}", h.now);
                if oversleep {
                    // The driver sleeps through everything, twice over.
                    h.oversleep(2 * MAX_DELAY_MS);
                    assert_eq!(h.snap(0, 1).state, RailState::Active);
                } else {
                    // Deadline by deadline (the harness checks each is
                    // later than the last), released at the hold's end.
                    let released = h.advance_until(until.plus(3_600_000), |h| h.snap(0, 1).state == RailState::Active);
                    assert!(released && h.now.plus(1) >= until, "released at {} for {until}", h.now);
                }
                assert!(h.m.poll_timeout().is_none_or(|d| d > h.now));
            }
        }
    }
}

/// b. A held rail whose port bounces again is charged (RFC 2439 keeps
/// charging a suppressed route): its hold ends later than it would have.
#[test]
fn b_a_flap_while_held_by_damping_extends_the_hold() {
    let mut h = Harness::healthy(default_damping(), &[1]);
    // The worked example: three flaps 1 s apart; the third suppresses.
    for at in [100, 1100, 2100] {
        h.advance_to(Millis(at));
        h.bounce(0, 1, 100);
    }
    let s = h.snap(0, 1);
    assert_eq!((s.state, s.reason), (RailState::Paused, PauseReason::Damped));
    let first = s.damped_until.expect("held");
    assert_eq!(first, Millis(2100 + 29_016 + 1), "docs/STATE-MACHINE.md's worked example");
    // While held, the port bounces again.
    h.advance_to(Millis(3000));
    h.bounce(0, 1, 100);
    let s = h.snap(0, 1);
    assert_eq!((s.state, s.reason), (RailState::Paused, PauseReason::Damped));
    let extended = s.damped_until.expect("held again");
    assert!(extended > first, "the flap while held was not charged: released at {extended}, not after {first}");
    // Not released at the first hold's end, but at the extended one's.
    h.advance_to(first.plus(TICK));
    assert_eq!(h.snap(0, 1).state, RailState::Paused);
    assert!(h.advance_until(extended.plus(TICK), |h| h.snap(0, 1).state == RailState::Active));
    assert!(h.now >= extended);
}

/// c. A re-attached device goes through the settle delay: inert → paused
/// (settling), active only once it passed.
#[test]
fn c_a_reattach_waits_out_the_settle_delay() {
    let cfg = MachineConfig { settle_ms: 500, ..Default::default() };
    let mut h = Harness::healthy(cfg, &[1]);
    let rail = RailId { device: 0, port: 1 };
    // The first attach does not settle.
    let before = h.snap(0, 1);
    assert!(before.state == RailState::Active && before.available);
    h.advance_to(Millis(100));
    h.event(0, fatal());
    assert_eq!((h.snap(0, 1).state, h.snap(0, 1).reason), (RailState::Inert, PauseReason::DeviceFatal));
    h.take_record();
    assert!(h.advance_until(Millis(10_000), |h| h.snap(0, 1).state != RailState::Inert), "never re-opened");
    let at = h.now;
    let s = h.snap(0, 1);
    assert_eq!((s.state, s.reason, s.available), (RailState::Paused, PauseReason::Settling, false));
    assert_eq!(s.settling_until, Some(at.plus(500)));
    assert!(s.generation > before.generation);
    h.advance_to(at.plus(499));
    assert_eq!(h.snap(0, 1).state, RailState::Paused, "activated before the settle delay passed");
    h.advance_to(at.plus(500));
    let s = h.snap(0, 1);
    assert!(s.state == RailState::Active && s.available);
    assert_eq!(
        h.transitions(rail),
        vec![
            (at, RailState::Inert, RailState::Paused, Cause::Reason(PauseReason::Settling)),
            (at.plus(500), RailState::Paused, RailState::Active, Cause::By(RecoveredBy::Attach)),
        ]
    );
}

/// d. A re-open during which one port query fails attaches no rail (none
/// active, none available), the device is gone again, and the next re-open
/// that works bumps every generation.
#[test]
fn d_a_partial_reattach_attaches_nothing() {
    for failing in [1u8, 2] {
        let mut h = Harness::healthy(MachineConfig::default(), &[2]);
        let generations = [h.snap(0, 1).generation, h.snap(0, 2).generation];
        h.advance_to(Millis(100));
        h.event(0, fatal());
        h.world_port(0, failing).query_fails = true;
        h.take_record();
        assert!(h.advance_until(Millis(10_000), |h| h.recorded(|a| matches!(a, Action::Reopen { .. }))));
        assert!(matches!(h.mode(0), DeviceMode::Gone { .. }), "port {failing}: {:?}", h.mode(0));
        for port in [1, 2] {
            let s = h.snap(0, port);
            assert!(s.state == RailState::Inert && !s.available, "port {failing} failing: rail {port} is {s:?}");
            assert_eq!(s.generation, generations[port as usize - 1]);
            assert!(h.transitions(RailId { device: 0, port }).is_empty(), "something attached");
        }
        assert!(h.recorded(|a| matches!(a, Action::Close { device: 0 })), "the device was not closed again");
        h.world_port(0, failing).query_fails = false;
        let back = h.advance_until(Millis(60_000), |h| {
            [1, 2].iter().all(|&p| h.snap(0, p).state == RailState::Active && h.snap(0, p).available)
        });
        assert!(back, "not re-attached by {}", h.now);
        for port in [1, 2] {
            assert!(h.snap(0, port).generation > generations[port as usize - 1]);
        }
    }
}

/// e. A polled device with a settle delay: the port goes down during the
/// delay (a tick reads it) and up again before the delay's end; the rail is
/// not activated at the original deadline, only a full delay after it came
/// back.
#[test]
fn e_a_bounce_during_the_settle_delay_of_a_polled_device_restarts_it() {
    let cfg = MachineConfig { settle_ms: 3000, ..Default::default() };
    let mut h = Harness::healthy(cfg, &[1]);
    h.advance_to(Millis(10));
    h.read_error(0, Errno(9));
    assert_eq!(h.mode(0), DeviceMode::PollOnly);
    // Ticks at t0, t0 + 1 s, …
    let t0 = h.m.next_tick().expect("a polled device is ticked");
    let tick = |k: u64| t0.plus(k * TICK);
    h.world_port(0, 1).state = PortState::Down;
    h.advance_to(tick(0));
    assert_eq!((h.snap(0, 1).state, h.snap(0, 1).reason), (RailState::Paused, PauseReason::PortNotActive));
    h.world_port(0, 1).state = PortState::Active;
    h.advance_to(tick(1));
    let s = h.snap(0, 1);
    assert_eq!((s.state, s.reason, s.settling_until), (RailState::Paused, PauseReason::Settling, Some(tick(4))));
    h.world_port(0, 1).state = PortState::Down;
    h.advance_to(tick(2));
    let s = h.snap(0, 1);
    assert_eq!((s.state, s.reason, s.settling_until), (RailState::Paused, PauseReason::PortNotActive, None));
    h.world_port(0, 1).state = PortState::Active;
    h.advance_to(tick(3));
    assert_eq!(h.snap(0, 1).settling_until, Some(tick(6)));
    h.advance_to(tick(4));
    assert_eq!(h.snap(0, 1).state, RailState::Paused, "activated at the cancelled settle's deadline");
    h.advance_to(Millis(tick(6).0 - 1));
    assert_eq!(h.snap(0, 1).state, RailState::Paused);
    h.advance_to(tick(6));
    let s = h.snap(0, 1);
    assert!(s.state == RailState::Active && s.available);
}

/// f. A polled device gets no DEVICE_SPEED_CHANGE: the tick reads the
/// links of its active rails and re-seeds a changed rate.
#[test]
fn f_a_polled_device_learns_a_link_rate_change() {
    let mut h = Harness::healthy(MachineConfig::default(), &[1]);
    let rail = RailId { device: 0, port: 1 };
    assert_eq!(h.snap(0, 1).rate, Some(LinkRate::gbps(200)));
    h.advance_to(Millis(10));
    h.read_error(0, Errno(22));
    h.take_record();
    h.world_port(0, 1).link = ndr_4x();
    h.advance(TICK + 1);
    assert!(
        h.recorded(|a| *a == Action::Reseed { rail, rate: LinkRate::gbps(400) }),
        "no re-seed: {:?}",
        h.take_record()
    );
    let s = h.snap(0, 1);
    assert_eq!((s.state, s.available, s.rate), (RailState::Active, true, Some(LinkRate::gbps(400))));
}

/// g. A hang-up closes the device, whatever its port queries would say;
/// its rails go inert, a re-open is asked for later, and the re-attach
/// bumps every generation.
#[test]
fn g_a_hangup_closes_the_device_and_the_reopen_bumps() {
    let mut h = Harness::healthy(MachineConfig::default(), &[2]);
    let generations = [h.snap(0, 1).generation, h.snap(0, 2).generation];
    h.advance_to(Millis(100));
    h.take_record();
    h.hangup(0);
    assert!(matches!(h.mode(0), DeviceMode::Gone { .. }));
    assert!(h.recorded(|a| matches!(a, Action::Close { device: 0 })));
    for port in [1, 2] {
        let s = h.snap(0, port);
        assert_eq!((s.state, s.reason, s.available), (RailState::Inert, PauseReason::DeviceRemoved, false));
    }
    assert!(h.advance_until(Millis(10_000), |h| h.recorded(|a| matches!(a, Action::Reopen { device: 0 }))));
    for port in [1, 2] {
        let s = h.snap(0, port);
        assert!(s.state == RailState::Active && s.available, "{s:?}");
        assert!(s.generation > generations[port as usize - 1]);
    }
}

/// A breaker that held the rail is reset by the device's close, and says
/// so: the re-attach re-admits the rail without a probe.
#[test]
fn a_breaker_reset_by_a_reattach_is_said() {
    let cfg = MachineConfig {
        data_path: Some(DataPathConfig { failures: 1, min_peers: 1, ..Default::default() }),
        ..Default::default()
    };
    let mut h = Harness::healthy(cfg, &[1]);
    h.advance_to(Millis(100));
    h.transfers(0, 1, 7, 12, 1); // RETRY_EXC_ERR: the local path
    assert_eq!(h.snap(0, 1).reason, PauseReason::DataPath);
    h.take_record();
    h.hangup(0);
    assert!(h.recorded(|a| matches!(a, Action::Log(Log::BreakerReset { rail }) if rail.port == 1)));
    assert!(h.advance_until(Millis(10_000), |h| h.snap(0, 1).state == RailState::Active));
    // A device closed with no breaker held says nothing of it.
    h.take_record();
    h.hangup(0);
    assert!(!h.recorded(|a| matches!(a, Action::Log(Log::BreakerReset { .. }))));
}

/// h. Port events are confirmed by a query: a PORT_ACTIVE while the port
/// reads DOWN leaves the rail paused, and a GID_CHANGE on an active rail
/// whose port reads DOWN pauses it.
#[test]
fn h_port_events_are_confirmed_by_a_query() {
    let mut h = Harness::healthy(MachineConfig::default(), &[1]);
    h.advance_to(Millis(100));
    h.world_port(0, 1).state = PortState::Down;
    h.port_event(0, EventKind::PortErr, 1);
    h.advance_to(Millis(200));
    h.take_record();
    h.port_event(0, EventKind::PortActive, 1);
    assert!(h.recorded(|a| matches!(a, Action::QueryPort { device: 0, port: 1 })), "PORT_ACTIVE not confirmed");
    let s = h.snap(0, 1);
    assert_eq!((s.state, s.reason, s.available), (RailState::Paused, PauseReason::PortErr, false));
    // The port comes back with no event: the tick finds it.
    h.world_port(0, 1).state = PortState::Active;
    h.advance(TICK);
    assert_eq!(h.snap(0, 1).state, RailState::Active);
    // Netdev deleted under Soft-RoCE: no PORT_ERR, only GID_CHANGE.
    h.advance(500);
    h.world_port(0, 1).state = PortState::Down;
    h.port_event(0, EventKind::GidChange, 1);
    let s = h.snap(0, 1);
    assert_eq!((s.state, s.reason, s.available), (RailState::Paused, PauseReason::PortNotActive, false));
}

/// i. The opt-in audit finds a port that went down with no event within
/// its period; without it a healthy host has no deadline at all.
#[test]
fn i_the_audit_finds_a_silent_port_down_and_is_off_by_default() {
    let mut h = Harness::healthy(MachineConfig::default(), &[2, 1]);
    assert_eq!(h.m.poll_timeout(), None, "a healthy host wakes up");
    h.advance_to(Millis(100));
    h.bounce(0, 2, 100);
    assert_eq!(h.m.poll_timeout(), None, "a recovered host wakes up");
    // A silent down is not seen without the audit…
    h.world_port(1, 1).state = PortState::Down;
    h.advance(60_000);
    assert_eq!(h.snap(1, 1).state, RailState::Active);

    // … and is within one audit period with it.
    let cfg = MachineConfig { audit_ms: Some(5000), ..Default::default() };
    let mut h = Harness::healthy(cfg, &[1]);
    assert_eq!(h.m.poll_timeout(), Some(Millis(5000)));
    h.advance_to(Millis(7000));
    h.world_port(0, 1).state = PortState::Down;
    assert!(h.advance_until(Millis(12_000), |h| h.snap(0, 1).state == RailState::Paused), "not paused by 12 s");
    assert_eq!(h.snap(0, 1).reason, PauseReason::PortNotActive);
}

/// l. A flap the machine saw is no silent flap, however its counters move
/// over it: a netdev's `carrier_changes` counts the carrier going down and
/// coming back, so a read during the outage (the tick's) takes in the down
/// and the read after the PORT_ACTIVE the up (seen on the real kernel,
/// where every pull was also called a silent flap). A rise with no flap
/// seen is still one.
#[test]
fn l_a_flap_with_its_port_err_is_not_a_silent_one() {
    let mut h = Harness::healthy(MachineConfig::default(), &[1]);
    let rail = RailId { device: 0, port: 1 };
    h.advance_to(Millis(100));
    h.take_record();
    let wp = h.world_port(0, 1);
    (wp.state, wp.link_downed) = (PortState::Down, wp.link_downed + 1);
    h.port_event(0, EventKind::PortErr, 1);
    h.advance(TICK + 1);
    assert!(h.recorded(|a| *a == Action::ReadCounters { device: 0, port: 1 }), "no read during the outage");
    let wp = h.world_port(0, 1);
    (wp.state, wp.link_downed) = (PortState::Active, wp.link_downed + 1);
    h.take_record();
    h.port_event(0, EventKind::PortActive, 1);
    assert!(h.recorded(|a| *a == Action::ReadCounters { device: 0, port: 1 }), "no read after the PORT_ACTIVE");
    let causes: Vec<Cause> = h.transitions(rail).into_iter().map(|(_, _, _, c)| c).collect();
    assert_eq!(causes, [Cause::By(RecoveredBy::Event)]);
    // A rise nobody explained, read by the next port query, is one.
    let wp = h.world_port(0, 1);
    wp.link_downed += 1;
    h.advance(100);
    h.port_event(0, EventKind::ClientReregister, 1);
    assert!(!h.transitions(rail).iter().any(|&(_, _, _, c)| c == Cause::SilentFlap), "not confirmed yet");
    h.advance(SILENT_FLAP_CONFIRM_MS);
    assert!(h.transitions(rail).iter().any(|&(_, _, _, c)| c == Cause::SilentFlap), "{:?}", h.transitions(rail));
}

/// m. A counter read that races a carrier loss is no silent flap: the
/// kernel counts the loss at once, the port's state and its PORT_ERR
/// follow (64 ms later in the VM, where the agent's audit called a pull a
/// silent flap). A rise is confirmed by a port read
/// SILENT_FLAP_CONFIRM_MS later that finds the rail still active with no
/// flap seen; one that no event ever explains still is one.
#[test]
fn m_a_counter_rise_racing_its_port_err_is_no_silent_flap() {
    let cfg = MachineConfig { audit_ms: Some(1000), ..Default::default() };
    let mut h = Harness::healthy(cfg, &[1]);
    let rail = RailId { device: 0, port: 1 };
    h.take_record();
    let silent = |h: &Harness| h.transitions(rail).iter().filter(|&&(_, _, _, c)| c == Cause::SilentFlap).count();
    // The audit reads the port ACTIVE and the counter already up.
    h.world_port(0, 1).link_downed += 1;
    h.advance(1000);
    assert!(h.recorded(|a| *a == Action::ReadCounters { device: 0, port: 1 }), "the audit read no counters");
    assert_eq!(silent(&h), 0, "called a silent flap before its confirmation");
    // The port's state and its PORT_ERR follow.
    h.advance(64);
    h.world_port(0, 1).state = PortState::Down;
    h.port_event(0, EventKind::PortErr, 1);
    h.advance(2 * SILENT_FLAP_CONFIRM_MS);
    assert_eq!(silent(&h), 0, "the pull was called a silent flap: {:?}", h.transitions(rail));
    // Back, and a rise no event explains: a silent flap, once confirmed.
    h.world_port(0, 1).state = PortState::Active;
    h.port_event(0, EventKind::PortActive, 1);
    h.advance(100);
    h.world_port(0, 1).link_downed += 1;
    h.advance(1000);
    let confirmed = h.advance_until(h.now.plus(SILENT_FLAP_CONFIRM_MS + 1000), |h| silent(h) == 1);
    assert!(confirmed, "an unexplained rise was never a silent flap: {:?}", h.transitions(rail));
}

/// A flap counter stuck at its width's maximum is said once and never
/// makes a flap; the port's other counters still witness one, and a port
/// whose every counter is stuck is said to be blind.
#[test]
fn a_stuck_counter_is_said_once_and_the_others_still_witness() {
    fn serve(m: &mut Machine, counters: PortCounters, now: Millis) -> Vec<Log> {
        let mut logs = Vec::new();
        while let Some(action) = m.poll_action() {
            match action {
                Action::QueryPort { device, port } => m.handle_port_state(device, port, Ok(PortState::Active), now),
                Action::ReadLink { device, port } => m.handle_link(device, port, Ok(hdr_4x()), now),
                Action::ReadCounters { device, port } => m.handle_counters(device, port, Ok(counters), now),
                Action::Log(l) => logs.push(l),
                _ => {}
            }
        }
        logs
    }
    let stuck = |logs: &[Log]| -> Vec<(Counter, u64, bool)> {
        logs.iter()
            .filter_map(|l| match *l {
                Log::CounterStuck { counter, value, blind, .. } => Some((counter, value, blind)),
                _ => None,
            })
            .collect()
    };
    let cfg = MachineConfig { audit_ms: Some(1000), ..Default::default() };
    let mut m = Machine::new(cfg).expect("valid");
    let mut c = PortCounters { link_downed: Some(255), carrier_changes: Some(10), carrier_down: None };
    m.add_device("mlx5_0", &[1], Millis(0));
    let logs = serve(&mut m, c, Millis(0));
    assert_eq!(stuck(&logs), [(Counter::LinkDowned, 255, false)]);
    let gate = m.gate(RailId { device: 0, port: 1 }).expect("a rail");
    let generation = gate.word().generation;
    for t in 1..=3 {
        m.handle_timeout(Millis(t * 1000));
        assert_eq!(stuck(&serve(&mut m, c, Millis(t * 1000))), [], "said once");
    }
    assert_eq!(gate.word().generation, generation, "a stuck counter made a flap");
    // The carrier's counter still moves: a silent flap.
    c.carrier_changes = Some(12);
    m.handle_timeout(Millis(4000));
    serve(&mut m, c, Millis(4000));
    let confirm = Millis(4000 + SILENT_FLAP_CONFIRM_MS);
    m.handle_timeout(confirm);
    serve(&mut m, c, confirm);
    assert_eq!(gate.word().generation, generation + 1, "blind on a saturated port");
    // Every counter stuck: blind, said.
    let mut m = Machine::new(MachineConfig::default()).expect("valid");
    m.add_device("mlx5_0", &[1], Millis(0));
    let only = PortCounters { link_downed: Some(65_535), ..Default::default() };
    assert_eq!(stuck(&serve(&mut m, only, Millis(0))), [(Counter::LinkDowned, 65_535, true)]);
}

/// Work that can never complete is told first: for a QP, WQ or CQ in
/// error, and for the whole device when its context goes (DEVICE_FATAL, a
/// removal, a hang-up), ahead of every action of the inputs not yet
/// polled, in the order learnt; a device with nothing attached loses none.
#[test]
fn lost_work_is_told_before_anything_else() {
    fn serve(m: &mut Machine, now: Millis) {
        while let Some(action) = m.poll_action() {
            match action {
                Action::QueryPort { device, port } => m.handle_port_state(device, port, Ok(PortState::Active), now),
                Action::ReadLink { device, port } => m.handle_link(device, port, Ok(hdr_4x()), now),
                _ => {}
            }
        }
    }
    fn polled(m: &mut Machine) -> Vec<Happening> {
        std::iter::from_fn(|| m.poll_action())
            .filter_map(|a| match a {
                Action::Notify(n) => Some(n.what),
                _ => None,
            })
            .collect()
    }
    let mut m = Machine::new(MachineConfig::default()).expect("valid");
    m.add_device("mlx5_0", &[1, 2], Millis(0));
    serve(&mut m, Millis(0));
    // One batch, as an engine's own loop hands over a drain: a PORT_ERR,
    // a QP_FATAL, a CQ_ERR and a WQ_FATAL.
    let qp = ObjectHandle(0x10);
    m.handle_event(0, AsyncEvent::port(EventKind::PortErr, 1), Millis(10));
    m.handle_event(0, AsyncEvent::new(EventKind::QpFatal.code(), Element::Object(qp)), Millis(10));
    m.handle_event(0, AsyncEvent::new(EventKind::CqErr.code(), Element::Object(ObjectHandle(0x20))), Millis(10));
    m.handle_event(0, AsyncEvent::new(EventKind::WqFatal.code(), Element::None), Millis(10));
    let notes = polled(&mut m);
    let lost = [
        Happening::WorkLost { device: 0, scope: WorkScope::Qp { kind: EventKind::QpFatal, handle: Some(qp) } },
        Happening::WorkLost { device: 0, scope: WorkScope::Cq(Some(ObjectHandle(0x20))) },
        Happening::WorkLost { device: 0, scope: WorkScope::Wq(None) },
    ];
    assert_eq!(notes[..3], lost, "{notes:#?}");
    assert!(notes[3..].iter().all(|n| !matches!(n, Happening::WorkLost { .. })), "told once: {notes:#?}");
    // DEVICE_FATAL: the whole context, before its own event and the detach.
    m.handle_event(0, AsyncEvent::new(EventKind::DeviceFatal.code(), Element::None), Millis(20));
    let notes = polled(&mut m);
    assert_eq!(notes[0], Happening::WorkLost { device: 0, scope: WorkScope::Device(PauseReason::DeviceFatal) });
    assert_eq!(notes.iter().filter(|n| matches!(n, Happening::WorkLost { .. })).count(), 1, "{notes:#?}");
    // Closed, nothing attached: its removal loses nothing.
    m.handle_removed(0, Millis(30));
    assert!(!polled(&mut m).iter().any(|n| matches!(n, Happening::WorkLost { .. })));
    // Attached again, then removed: lost.
    let mut m = Machine::new(MachineConfig::default()).expect("valid");
    m.add_device("mlx5_0", &[1], Millis(0));
    serve(&mut m, Millis(0));
    m.handle_hangup(0, Millis(5));
    let notes = polled(&mut m);
    assert_eq!(notes[0], Happening::WorkLost { device: 0, scope: WorkScope::Device(PauseReason::DeviceRemoved) });
}

/// j. Handling a PORT_ERR and a PORT_ACTIVE, their answers and every action
/// they lead to makes no heap allocation once warmed up.
#[test]
fn j_the_event_path_makes_no_heap_allocation() {
    fn serve(m: &mut Machine, port: PortState, address: &PortAddress, now: Millis) {
        while let Some(action) = m.poll_action() {
            match action {
                Action::QueryPort { device, port: p } => m.handle_port_state(device, p, Ok(port), now),
                Action::ReadLink { device, port: p } => m.handle_link(device, p, Ok(hdr_4x()), now),
                Action::ReadAddress { device, port: p } => m.handle_address(device, p, Ok(address), now),
                _ => {}
            }
        }
    }
    fn flap(m: &mut Machine, address: &PortAddress, t: u64) {
        m.handle_event(0, AsyncEvent::port(EventKind::PortErr, 1), Millis(t));
        serve(m, PortState::Down, address, Millis(t));
        m.handle_event(0, AsyncEvent::port(EventKind::PortActive, 1), Millis(t + 100));
        serve(m, PortState::Active, address, Millis(t + 100));
    }
    let mut m = Machine::new(MachineConfig::default()).expect("valid");
    let address = address_of(1);
    m.add_device("mlx5_0", &[1, 2], Millis(0));
    serve(&mut m, PortState::Active, &address, Millis(0));
    let gate = m.gate(RailId { device: 0, port: 1 }).expect("a rail");
    // Warm-up: buffers grow to their working size.
    for k in 1..=4 {
        flap(&mut m, &address, k * 1000);
    }
    let generation = gate.word().generation;
    // allocation-counter installs its own global allocator and counts this
    // thread's allocations inside the closure.
    let allocations = allocation_counter::measure(|| flap(&mut m, &address, 10_000)).count_total;
    assert_eq!(gate.word().state, RailState::Active);
    assert_eq!(gate.word().generation, generation + 1, "the flap really happened");
    assert_eq!(allocations, 0, "the event path allocated");
}

/// m. A transfer report makes no heap allocation, but once per rail: a
/// rail that only succeeds never allocates, its first failed line creates
/// its record of failures (one allocation), and nothing after it does; the
/// counts are what was reported, through the one-line fast path and the
/// general one alike.
#[test]
fn m_a_transfer_report_allocates_only_at_a_rails_first_failure() {
    let mut m = Machine::new(MachineConfig::default()).expect("valid");
    let address = address_of(1);
    m.add_device("mlx5_0", &[1, 2], Millis(0));
    while let Some(action) = m.poll_action() {
        match action {
            Action::QueryPort { device, port } => m.handle_port_state(device, port, Ok(PortState::Active), Millis(0)),
            Action::ReadLink { device, port } => m.handle_link(device, port, Ok(hdr_4x()), Millis(0)),
            Action::ReadAddress { device, port } => m.handle_address(device, port, Ok(&address), Millis(0)),
            _ => {}
        }
    }
    let ok = [TransferReport { peer: 1, wc_status: 0, count: 64 }];
    // Successes through two peers, a peer's refusal, a flush: none of it
    // changes the rail.
    let mixed = [
        TransferReport { peer: 1, wc_status: 0, count: 64 },
        TransferReport { peer: 2, wc_status: 0, count: 3 },
        TransferReport { peer: 3, wc_status: 10, count: 1 },
        TransferReport { peer: 1, wc_status: 5, count: 7 },
    ];
    let successes = allocation_counter::measure(|| {
        for t in 0..1000 {
            m.handle_transfers(0, 1, &ok, Millis(t));
        }
    });
    assert_eq!(successes.count_total, 0, "a rail that only succeeds allocated");
    let first = allocation_counter::measure(|| m.handle_transfers(0, 1, &mixed, Millis(1000)));
    assert_eq!(first.count_total, 1, "the first failure creates the rail's record, once");
    let later = allocation_counter::measure(|| {
        for t in 1001..2000 {
            m.handle_transfers(0, 1, &mixed, Millis(t));
            m.handle_transfers(0, 1, &ok, Millis(t));
        }
    });
    assert_eq!(later.count_total, 0, "a report allocated after the rail's first failure");
    assert!(!m.has_actions(), "successes, a peer's refusal and a flush ask for nothing");
    let e = m.rail(RailId { device: 0, port: 1 }).expect("a rail").evidence;
    assert_eq!(e.transfers_ok, 64 * 1000 + 67 * 1000 + 64 * 999);
    assert_eq!((e.failed_by_status[10], e.failed_by_status[5]), (1000, 7000));
    assert_eq!(e.failed(WcClass::PeerOrApp), 1000);
    assert_eq!(e.failed(WcClass::LocalPath), 0);
    assert_eq!(m.rail(RailId { device: 0, port: 2 }).expect("a rail").evidence, Default::default());
}

#[test]
fn invalid_configs_are_refused_with_their_key() {
    let damping = |d: DampingConfig| MachineConfig { damping: Some(d), ..Default::default() };
    let bad = [
        ("tick_ms", MachineConfig { tick_ms: 0, ..Default::default() }),
        ("tick_ms", MachineConfig { tick_ms: MAX_DELAY_MS + 1, ..Default::default() }),
        ("audit_ms", MachineConfig { audit_ms: Some(0), ..Default::default() }),
        ("reopen_initial_ms", MachineConfig { reopen_initial_ms: 0, ..Default::default() }),
        ("reopen_max_ms", MachineConfig { reopen_initial_ms: 20, reopen_max_ms: 10, ..Default::default() }),
        ("reopen_jitter_pct", MachineConfig { reopen_jitter_pct: 101, ..Default::default() }),
        ("settle_ms", MachineConfig { settle_ms: MAX_DELAY_MS + 1, ..Default::default() }),
        ("damping.half_life_ms", damping(DampingConfig { half_life_ms: u64::MAX, ..Default::default() })),
        ("damping.half_life_ms", damping(DampingConfig { half_life_ms: 0, ..Default::default() })),
        ("damping.half_life_ms", damping(DampingConfig { half_life_ms: MAX_DELAY_MS / 3 + 1, ..Default::default() })),
        ("damping.reuse", damping(DampingConfig { reuse: 3000.0, ..Default::default() })),
        ("damping.penalty_per_flap", damping(DampingConfig { penalty_per_flap: f64::NAN, ..Default::default() })),
        ("damping.max_penalty", damping(DampingConfig { max_penalty: 100.0, ..Default::default() })),
    ];
    for (key, cfg) in bad {
        assert_eq!(cfg.validate().map_err(|e| e.key), Err(key), "{cfg:?}");
        assert!(Machine::new(cfg).is_err());
    }
    // The edges are accepted.
    let edge = MachineConfig {
        tick_ms: MAX_DELAY_MS,
        settle_ms: MAX_DELAY_MS,
        audit_ms: Some(MAX_DELAY_MS),
        reopen_initial_ms: MAX_DELAY_MS,
        reopen_max_ms: MAX_DELAY_MS,
        reopen_jitter_pct: 100,
        damping: Some(DampingConfig { half_life_ms: MAX_DELAY_MS / 3, ..Default::default() }),
        ..Default::default()
    };
    assert!(Machine::new(edge).is_ok());
}

/// Answers the port and link questions at once; returns the Reopen and
/// ReadAddress actions left unanswered.
fn serve_some(m: &mut Machine, now: Millis) -> (usize, usize) {
    let (mut reopens, mut addresses) = (0, 0);
    while let Some(a) = m.poll_action() {
        match a {
            Action::QueryPort { device, port } => m.handle_port_state(device, port, Ok(PortState::Active), now),
            Action::ReadLink { device, port } => m.handle_link(device, port, Ok(ndr_4x()), now),
            Action::Reopen { .. } => reopens += 1,
            Action::ReadAddress { .. } => addresses += 1,
            _ => {}
        }
    }
    (reopens, addresses)
}

#[test]
fn a_reopen_never_answered_is_asked_again() {
    let mut m = Machine::new(MachineConfig::default()).unwrap();
    m.add_device("d", &[1], Millis(0));
    serve_some(&mut m, Millis(0));
    m.handle_hangup(0, Millis(100));
    serve_some(&mut m, Millis(100));
    let mut asked = 0;
    let mut now = Millis(100);
    for _ in 0..3 {
        now = m.poll_timeout().expect("a re-open is always scheduled");
        m.handle_timeout(now);
        asked += serve_some(&mut m, now).0;
        assert!(m.poll_timeout().is_some_and(|t| t > now));
    }
    assert_eq!(asked, 3, "each unanswered re-open is asked again after a backoff");
    m.handle_reopen(0, Ok(()), now);
    serve_some(&mut m, now);
    assert_eq!(m.rail(RailId { device: 0, port: 1 }).unwrap().word.state, RailState::Active);
}

#[test]
fn an_address_read_never_answered_after_a_gid_change_is_asked_again() {
    let mut m = Machine::new(MachineConfig::default()).unwrap();
    m.add_device("d", &[1], Millis(0));
    serve_some(&mut m, Millis(0));
    let g0 = m.rail(RailId { device: 0, port: 1 }).unwrap().word.generation;
    m.handle_event(0, AsyncEvent::port(EventKind::GidChange, 1), Millis(10));
    assert_eq!(serve_some(&mut m, Millis(10)).1, 1);
    let t = m.poll_timeout().expect("the pending address read keeps the tick");
    m.handle_timeout(t);
    let mut asked = false;
    while let Some(a) = m.poll_action() {
        if let Action::ReadAddress { device, port } = a {
            asked = true;
            m.handle_address(device, port, Err(Errno(95)), t);
        }
    }
    assert!(asked, "asked again");
    assert_eq!(m.rail(RailId { device: 0, port: 1 }).unwrap().word.generation, g0 + 1, "the bump it was owed");
}

/// k. A backend that cannot read addresses (`EOPNOTSUPP`) is not asked
/// again: activations do not ask, a GID_CHANGE bumps the generation at
/// once (as an unreadable answer would) and leaves no tick behind, and a
/// device added anew is asked again.
#[test]
fn k_an_unsupported_address_read_is_not_asked_again() {
    /// Answers everything at once; returns how many address reads were
    /// asked and the AddressChanged generations notified.
    fn serve(m: &mut Machine, state: PortState, now: Millis) -> (usize, Vec<u64>) {
        let (mut reads, mut changes) = (0, Vec::new());
        while let Some(a) = m.poll_action() {
            match a {
                Action::QueryPort { device, port } => m.handle_port_state(device, port, Ok(state), now),
                Action::ReadLink { device, port } => m.handle_link(device, port, Ok(ndr_4x()), now),
                Action::ReadAddress { device, port } => {
                    reads += 1;
                    m.handle_address(device, port, Err(Errno::EOPNOTSUPP), now);
                }
                Action::Notify(Notification { what: Happening::AddressChanged { generation, .. }, .. }) => {
                    changes.push(generation)
                }
                _ => {}
            }
        }
        (reads, changes)
    }
    let mut m = Machine::new(MachineConfig::default()).unwrap();
    let dev = m.add_device("mlx5_0", &[1], Millis(0)).expect("a device");
    assert_eq!(serve(&mut m, PortState::Active, Millis(0)).0, 1, "the first activation asks");
    let rail = RailId { device: dev, port: 1 };
    let gate = m.gate(rail).unwrap();
    m.handle_event(dev, AsyncEvent::port(EventKind::PortErr, 1), Millis(10));
    serve(&mut m, PortState::Down, Millis(10));
    m.handle_event(dev, AsyncEvent::port(EventKind::PortActive, 1), Millis(20));
    assert_eq!(serve(&mut m, PortState::Active, Millis(20)).0, 0, "asked again after EOPNOTSUPP");
    let before = gate.word().generation;
    m.handle_event(dev, AsyncEvent::port(EventKind::GidChange, 1), Millis(30));
    let (reads, changes) = serve(&mut m, PortState::Active, Millis(30));
    assert_eq!(reads, 0);
    assert_eq!(changes, [before + 1], "a GID_CHANGE it cannot read counts as a change");
    assert_eq!(gate.word().generation, before + 1);
    assert_eq!(m.poll_timeout(), None, "nothing left for the tick");
    m.handle_removed(dev, Millis(40));
    serve(&mut m, PortState::Active, Millis(40));
    assert_eq!(m.add_device("mlx5_0", &[1], Millis(50)), Some(dev));
    assert_eq!(serve(&mut m, PortState::Active, Millis(50)).0, 1, "a device added anew is asked");
}

/// A tick that runs late keeps its phase: the next one is a period after
/// it was due, not after it ran (a recording's replay, which runs ticks on
/// time, then polls at the live run's instants); one later than a whole
/// period starts afresh from when it ran.
#[test]
fn a_late_tick_keeps_its_phase() {
    let mut h = Harness::new(MachineConfig::default(), &[vec![(PortState::Down, hdr_4x())]], Millis::ZERO);
    let due = h.m.next_tick().expect("a paused rail arms the tick");
    h.oversleep(due.since(h.now) + 3);
    assert_eq!(h.m.next_tick(), Some(due.plus(1000)), "ran 3 ms late at {}", h.now);
    h.oversleep(5000);
    assert_eq!(h.m.next_tick(), Some(h.now.plus(1000)), "ran seconds late at {}", h.now);
}

// ---- the device lifecycle -------------------------------------------------------

/// Takes every action; answers port queries ACTIVE and link reads NDR 4x.
/// Returns the devices asked to be opened and closed.
fn serve_lifecycle(m: &mut Machine, now: Millis) -> (Vec<u32>, Vec<u32>) {
    let (mut opens, mut closes) = (Vec::new(), Vec::new());
    while let Some(a) = m.poll_action() {
        match a {
            Action::QueryPort { device, port } => m.handle_port_state(device, port, Ok(PortState::Active), now),
            Action::ReadLink { device, port } => m.handle_link(device, port, Ok(ndr_4x()), now),
            Action::Open { device } => opens.push(device),
            Action::Close { device } => closes.push(device),
            _ => {}
        }
    }
    (opens, closes)
}

#[test]
fn a_listed_device_is_opened_and_attached() {
    let mut m = Machine::new(MachineConfig::default()).unwrap();
    let change = m.handle_device_list(["mlx5_0", "mlx5_1", "mlx5_0"], Millis(0));
    assert_eq!(change.appeared, vec![0, 1], "a name listed twice counts once");
    assert_eq!(m.device(0).unwrap().mode.name(), "opening");
    assert_eq!(serve_lifecycle(&mut m, Millis(0)).0, vec![0, 1]);
    m.handle_opened(0, Ok(&[1, 2]), Millis(5));
    serve_lifecycle(&mut m, Millis(5));
    assert_eq!(
        m.rails().map(|r| (r.name.to_string(), r.word.state)).collect::<Vec<_>>(),
        [("mlx5_0/1".to_string(), RailState::Active), ("mlx5_0/2".to_string(), RailState::Active)]
    );
    assert_eq!(m.device(1).unwrap().mode.name(), "opening", "not answered yet");
    // The same list again changes nothing.
    assert_eq!(m.handle_device_list(["mlx5_0", "mlx5_1"], Millis(6)), ListChange::default());
    assert!(!m.has_actions());
}

#[test]
fn a_device_that_will_not_open_is_asked_again_with_backoff_until_it_leaves() {
    let cfg = MachineConfig { reopen_jitter_pct: 0, ..Default::default() };
    let mut m = Machine::new(cfg).unwrap();
    m.handle_device_list(["rxe0"], Millis(0));
    let mut asked_at = vec![0];
    let mut now = Millis(0);
    serve_lifecycle(&mut m, now);
    for _ in 0..4 {
        m.handle_opened(0, Err(ENODEV), now);
        serve_lifecycle(&mut m, now);
        now = m.poll_timeout().expect("a retry is scheduled");
        m.handle_timeout(now);
        assert_eq!(serve_lifecycle(&mut m, now).0, vec![0]);
        asked_at.push(now.0);
    }
    assert_eq!(asked_at, vec![0, 1000, 3000, 7000, 15_000], "1 s, then doubling");
    // It leaves while failing: nothing is scheduled any more.
    m.handle_opened(0, Err(ENODEV), now);
    let change = m.handle_device_list(std::iter::empty(), now);
    assert_eq!(change.left, vec![0]);
    assert_eq!(serve_lifecycle(&mut m, now), (vec![], vec![]), "nothing was open: nothing to close");
    assert_eq!(m.poll_timeout(), None);
    assert_eq!(m.device(0).unwrap().mode, DeviceMode::Removed);
}

#[test]
fn an_open_answered_after_the_device_left_is_closed_again() {
    let mut m = Machine::new(MachineConfig::default()).unwrap();
    m.handle_device_list(["rxe0"], Millis(0));
    serve_lifecycle(&mut m, Millis(0));
    m.handle_device_list(std::iter::empty(), Millis(1));
    m.handle_opened(0, Ok(&[1]), Millis(2));
    assert_eq!(serve_lifecycle(&mut m, Millis(2)), (vec![], vec![0]), "the handle opened late is closed");
    assert_eq!(m.rails().len(), 0, "no rail attached");
    // A stray answer for it now is only counted.
    let stray = m.stray_inputs();
    m.handle_opened(0, Ok(&[1]), Millis(3));
    assert_eq!(m.stray_inputs(), stray + 1);
    assert!(!m.has_actions());
}

/// Found by the property test: an open in flight when the device left,
/// the engine adding it itself meanwhile, then a failure. The open's late
/// answer was taken as stray, so the driver's handle was never closed and
/// the machine asked to re-open a device the driver held open.
#[test]
fn an_open_answered_while_a_reopen_is_due_is_the_reopen() {
    let mut m = Machine::new(MachineConfig::default()).unwrap();
    m.handle_device_list(["rxe0"], Millis(0));
    serve_lifecycle(&mut m, Millis(0));
    m.handle_opened(0, Ok(&[1]), Millis(0));
    serve_lifecycle(&mut m, Millis(0));
    m.handle_device_list(std::iter::empty(), Millis(1));
    m.handle_device_list(["rxe0"], Millis(1));
    assert_eq!(serve_lifecycle(&mut m, Millis(1)).0, vec![0], "back: open asked, not answered yet");
    m.handle_device_list(std::iter::empty(), Millis(1));
    assert_eq!(m.add_device("rxe0", &[1], Millis(2)), Some(0), "the engine opened it itself");
    serve_lifecycle(&mut m, Millis(2));
    m.handle_hangup(0, Millis(3));
    assert_eq!(serve_lifecycle(&mut m, Millis(3)).1, vec![0], "closed");
    assert_eq!(m.device(0).unwrap().mode.name(), "gone");
    m.handle_opened(0, Ok(&[1]), Millis(4));
    serve_lifecycle(&mut m, Millis(4));
    assert_eq!(m.device(0).unwrap().mode.name(), "events", "the late handle is taken");
    assert_eq!(m.gate_of("rxe0/1").unwrap().word().state, RailState::Active);
    // No re-open is due any more, and none is asked.
    while let Some(t) = m.poll_timeout().filter(|t| t.0 < 60_000) {
        m.handle_timeout(t);
        while let Some(a) = m.poll_action() {
            assert!(!matches!(a, Action::Reopen { .. } | Action::Open { .. }), "{a:?} at {t}");
            if let Action::QueryPort { device, port } = a {
                m.handle_port_state(device, port, Ok(PortState::Active), t);
            }
        }
    }
}

#[test]
fn a_device_that_leaves_and_comes_back_keeps_its_index_and_rails() {
    let mut m = Machine::new(MachineConfig::default()).unwrap();
    m.handle_device_list(["rxe0", "rxe1"], Millis(0));
    serve_lifecycle(&mut m, Millis(0));
    m.handle_opened(0, Ok(&[1]), Millis(0));
    m.handle_opened(1, Ok(&[1]), Millis(0));
    serve_lifecycle(&mut m, Millis(0));
    let gate = m.gate_of("rxe0/1").unwrap();
    let before = gate.word().generation;
    let change = m.handle_device_list(["rxe1"], Millis(100));
    assert_eq!(change.left, vec![0]);
    assert_eq!(serve_lifecycle(&mut m, Millis(100)).1, vec![0], "closed at once");
    assert_eq!((gate.word().state, gate.word().reason), (RailState::Inert, PauseReason::DeviceRemoved));
    let change = m.handle_device_list(["rxe1", "rxe0"], Millis(200));
    assert_eq!(change.appeared, vec![0], "the old index");
    assert_eq!(serve_lifecycle(&mut m, Millis(200)).0, vec![0]);
    m.handle_opened(0, Ok(&[1]), Millis(200));
    serve_lifecycle(&mut m, Millis(200));
    assert_eq!(gate.word().state, RailState::Active, "the old gate sees the new device");
    assert!(gate.word().generation > before, "a new device: a new generation");
    // Back with another port: a new rail; the old one's gate stays inert.
    m.handle_device_list(["rxe1"], Millis(300));
    m.handle_device_list(["rxe1", "rxe0"], Millis(400));
    serve_lifecycle(&mut m, Millis(400));
    m.handle_opened(0, Ok(&[2]), Millis(400));
    serve_lifecycle(&mut m, Millis(400));
    assert_eq!(gate.word().state, RailState::Inert);
    assert_eq!(m.gate_of("rxe0/2").unwrap().word().state, RailState::Active);
    assert!(m.gate(RailId { device: 0, port: 1 }).is_none(), "rxe0 has no port 1 now");
}

#[test]
fn names_that_cannot_be_a_device_are_stray() {
    let mut m = Machine::new(MachineConfig::default()).unwrap();
    let long = "x".repeat(300);
    let change = m.handle_device_list(["", "a/b", "bad\u{1b}", long.as_str(), "ok"], Millis(0));
    assert_eq!(change.appeared, vec![0]);
    assert_eq!(m.stray_inputs(), 4);
    assert_eq!(m.device(0).unwrap().name, "ok");
}

/// The maxima of every counter width (2^8−1, 2^16−1, 2^32−1, 2^64−1).
const MAXIMA: [u64; 4] = [0xff, 0xffff, 0xffff_ffff, u64::MAX];

/// A value of a counter read: often a width's maximum or a value beside
/// one, otherwise anything.
fn counter_value() -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => prop::sample::select(MAXIMA.to_vec()),
        3 => (prop::sample::select(MAXIMA.to_vec()), -2i64..=2)
            .prop_map(|(m, d)| m.checked_add_signed(d).unwrap_or(m)),
        2 => any::<u64>(),
        2 => 0u64..1000,
    ]
}

/// Two reads of one counter, the others unchanged.
fn counter_pair() -> impl Strategy<Value = (PortCounters, PortCounters, Counter)> {
    let counter = prop::sample::select(Counter::ALL.to_vec());
    let other = proptest::option::of(0u64..1000);
    (counter, counter_value(), counter_value(), other.clone(), other).prop_map(|(c, before, after, o1, o2)| {
        let with = |v: u64| {
            let mut read = PortCounters { link_downed: o1, carrier_changes: o2, carrier_down: o1 };
            match c {
                Counter::LinkDowned => read.link_downed = Some(v),
                Counter::CarrierChanges => read.carrier_changes = Some(v),
                Counter::CarrierDown => read.carrier_down = Some(v),
            }
            read
        };
        (with(before), with(after), c)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// One rule for every counter and width: a rise is evidence only
    /// between two reads neither of which is at a width's maximum (a read
    /// there is unknown), so a counter rising into a maximum, from one
    /// maximum to another or from a maximum on is no flap, and every other
    /// rise is one. The machine calls exactly those rises silent flaps.
    #[test]
    fn a_rise_touching_a_maximum_is_never_a_flap((before, after, counter) in counter_pair()) {
        let (b, a) = (before.get(counter).unwrap_or(0), after.get(counter).unwrap_or(0));
        let evidence = a > b && !MAXIMA.contains(&a) && !MAXIMA.contains(&b);
        prop_assert_eq!(after.rose_since(&before), evidence, "{} {} -> {}", counter.name(), b, a);
        prop_assert_eq!(silent_flap_after(before, after), evidence, "{} {} -> {}", counter.name(), b, a);
    }
}

/// Whether the machine, reading `before` and then `after` on an active
/// rail with no flap seen, calls it a silent flap once the confirmation is
/// due.
fn silent_flap_after(before: PortCounters, after: PortCounters) -> bool {
    fn serve(m: &mut Machine, counters: PortCounters, now: Millis) {
        while let Some(action) = m.poll_action() {
            match action {
                Action::QueryPort { device, port } => m.handle_port_state(device, port, Ok(PortState::Active), now),
                Action::ReadLink { device, port } => m.handle_link(device, port, Ok(hdr_4x()), now),
                Action::ReadCounters { device, port } => m.handle_counters(device, port, Ok(counters), now),
                _ => {}
            }
        }
    }
    let cfg = MachineConfig { audit_ms: Some(1000), ..Default::default() };
    let mut m = Machine::new(cfg).expect("valid");
    m.add_device("mlx5_0", &[1], Millis(0));
    serve(&mut m, before, Millis(0));
    let gate = m.gate(RailId { device: 0, port: 1 }).expect("a rail");
    let generation = gate.word().generation;
    for t in [1000, 1000 + SILENT_FLAP_CONFIRM_MS, 2000] {
        m.handle_timeout(Millis(t));
        serve(&mut m, after, Millis(t));
    }
    gate.word().generation != generation
}

/// A breaker that trips on one local failure, with a 1 s backoff, no
/// jitter and a 1.5 s probe timeout; the rail `0/1` half-open at the
/// returned time.
fn half_open_rail() -> Harness {
    let cfg = MachineConfig {
        data_path: Some(DataPathConfig {
            failures: 1,
            min_peers: 1,
            backoff_initial_ms: 1000,
            probe_timeout_ms: 1500,
            ..Default::default()
        }),
        reopen_jitter_pct: 0,
        ..Default::default()
    };
    let mut h = Harness::healthy(cfg, &[1]);
    h.advance_to(Millis(100));
    h.transfers(0, 1, 7, 12, 1); // RETRY_EXC_ERR: the local path
    assert!(h.advance_until(Millis(5000), |h| h.snap(0, 1).reason == PauseReason::HalfOpen), "never half-open");
    h
}

fn probe_failures(h: &Harness) -> Vec<(Millis, bool)> {
    let record = h.record.as_ref().expect("recording");
    record
        .iter()
        .filter_map(|&(_, a)| match a {
            Action::Notify(Notification { t, what: Happening::ProbeFailed { timed_out, .. } }) => Some((t, timed_out)),
            _ => None,
        })
        .collect()
}

/// A probe's timeout has a deadline of its own: taken just after a tick,
/// it fails `probe_timeout_ms` after the tick that saw it (within one
/// `tick_ms` of the documented bound), not at a later tick.
#[test]
fn a_probe_times_out_on_its_own_deadline() {
    for offset in [1, 500, 999] {
        let mut h = half_open_rail();
        // The next tick, then the probe taken `offset` ms after it.
        let tick = h.m.next_tick().expect("a tick while half-open");
        h.advance_to(tick.plus(offset));
        h.take_record();
        h.probe(0, 1, None, false);
        let taken = h.now;
        assert!(h.advance_until(taken.plus(10_000), |h| !probe_failures(h).is_empty()), "the probe never timed out");
        let [(t, true)] = probe_failures(&h)[..] else { panic!("{:?}", probe_failures(&h)) };
        assert!(t >= taken.plus(1500) && t <= taken.plus(1500 + TICK), "taken at {taken}, timed out at {t}");
        assert_eq!(h.snap(0, 1).reason, PauseReason::DataPath);
    }
}

/// A port loss while a probe is out fails the probe: said at once, the
/// next backoff is the longer one, the rail shows the loss; back, the
/// breaker grants a new probe after that backoff, and its success closes it.
#[test]
fn a_port_loss_fails_the_probe_out() {
    let mut h = half_open_rail();
    h.probe(0, 1, None, false);
    h.advance(300);
    h.take_record();
    h.world_port(0, 1).state = PortState::Down;
    h.port_event(0, EventKind::PortErr, 1);
    assert_eq!(probe_failures(&h), [(h.now, false)], "the lost probe was not said");
    assert_eq!(h.snap(0, 1).reason, PauseReason::PortErr);
    let lost = h.now;
    h.advance(100);
    h.world_port(0, 1).state = PortState::Active;
    h.port_event(0, EventKind::PortActive, 1);
    assert!(h.advance_until(lost.plus(10_000), |h| h.snap(0, 1).reason == PauseReason::HalfOpen));
    // The second backoff: 2 s after the loss, not 1 s.
    assert!(h.now >= lost.plus(2000), "half-open again at {} after a loss at {lost}", h.now);
    h.probe(0, 1, Some(true), false);
    assert_eq!(h.snap(0, 1).state, RailState::Active);
}

/// A port query that fails is retried at the next ticks, `query_retries`
/// times in a row, before the device counts as gone; a good answer
/// between failures starts the count again. With none (the default) the
/// first failure closes the device.
#[test]
fn failed_queries_are_retried_before_a_device_is_gone() {
    for retries in [0u64, 2] {
        let cfg = MachineConfig { query_retries: retries, audit_ms: Some(TICK), ..Default::default() };
        let mut h = Harness::healthy(cfg, &[1]);
        h.world_port(0, 1).query_fails = true;
        // The audit's read fails, then each retry, one tick apart.
        for _ in 0..retries {
            h.advance(TICK);
            assert_eq!(h.snap(0, 1).state, RailState::Active, "gone before {retries} retries");
            assert!(!h.mode(0).is_closed());
        }
        h.advance(TICK);
        assert_eq!(h.snap(0, 1).state, RailState::Inert, "not gone after {retries} retries");
        assert!(h.mode(0).is_closed(), "{:?}", h.mode(0));
    }
}

/// With `device_owner = engine` a device that is gone (DEVICE_FATAL, a
/// hang-up) is never closed: its rails go inert, and after the re-open
/// backoff the engine is asked to re-validate it; its answer re-attaches
/// the rails. Only a device that left the host is closed.
#[test]
fn an_engines_device_is_revalidated_never_closed() {
    let cfg = MachineConfig { device_owner: DeviceOwner::Engine, reopen_jitter_pct: 0, ..Default::default() };
    let mut h = Harness::healthy(cfg, &[1]);
    for lose in [0, 1] {
        h.take_record();
        let at = h.now;
        if lose == 0 {
            h.event(0, fatal());
        } else {
            h.hangup(0);
        }
        assert_eq!(h.snap(0, 1).state, RailState::Inert);
        assert!(
            !h.recorded(|a| matches!(a, Action::Close { .. } | Action::Reopen { .. })),
            "closed an engine's device"
        );
        assert!(h.advance_until(at.plus(5000), |h| h.snap(0, 1).state == RailState::Active), "never re-validated");
        let asked = h.record.as_ref().unwrap().iter().find(|(_, a)| matches!(a, Action::Revalidate { device: 0, .. }));
        assert_eq!(asked.map(|&(t, _)| t), Some(at.plus(1000)), "revalidated after the first backoff");
    }
    h.take_record();
    h.remove(0);
    assert!(h.recorded(|a| *a == Action::Close { device: 0 }), "a device that left is closed");
}
