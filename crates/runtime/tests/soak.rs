//! Soak: millions of simulated events, random faults and flaps, against
//! the real runtime `Monitor` over `SimDevice`s (real non-blocking pipes,
//! real epoll), in virtual time.
//!
//! Seeded and reproducible: the same `RAILWATCH_SOAK_SEED` gives the same
//! script and the same final counters (the seed also seeds the monitor's
//! re-open jitter). `RAILWATCH_SOAK_EVENTS` sets how many events the script
//! generates (default 200,000, what `cargo test` runs; `cargo xtask soak`
//! runs 10,000,000 in release). The monitor runs with its default
//! behaviour (no settle delay, no flap damping) unless
//! `RAILWATCH_SOAK_SETTLE_MS` (a settle delay) or `RAILWATCH_SOAK_DAMPING=1`
//! (flap damping, with a short half-life) say otherwise; the stranded
//! bounds below then grow by the settle delay and the longest suppression.
//! `RAILWATCH_SOAK_TRACE=<virtual ms>` prints every script action and
//! monitor notification from that time on, to dissect a failure.
//!
//! Checked:
//!
//! - **nothing lost**: per device, reads = acks, the monitor handled every
//!   event the device returned, and every event the script generated was
//!   read, dropped or is still pending (generated = read + dropped +
//!   pending) at every checkpoint. The simulator's `dropped` counts both
//!   events refused at queue time (the device was removed or closed) and
//!   events discarded from the queue when the device was removed, closed
//!   (DEVICE_FATAL, removal) or re-opened; the script tallies the refusals
//!   itself, so queued = read + discarded + pending is checked too, and the
//!   script's tally of what the devices accepted must equal their `queued`.
//!   At the end nothing is pending: queued = read + discarded;
//! - **no rail stranded**: during the run, a rail never stays paused for
//!   more than two ticks (plus the settle delay and the longest damping
//!   hold, when those are on) while its port reads ACTIVE and its device is
//!   open, nor inert for more than the longest re-open backoff (plus ticks)
//!   while its device is present; after the run, every port is set ACTIVE,
//!   every removed device restored and every device with a failed fd reset,
//!   and after a few ticks every rail is active and available, every device
//!   reads events again;
//! - **memory stays flat**: the process's VmRSS is sampled at 10%, 50% and
//!   100% of the run; the growth from 10% to 100% must stay under
//!   [`RSS_GROWTH_LIMIT_KIB`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use railwatch_core::{
    AsyncEvent, DampingConfig, Element, EventKind, LinkAttrs, Millis, ObjectHandle, PauseReason, PortState, RailId,
    RailState, WorkScope,
};
use railwatch_runtime::{
    BandwidthSelector, Cause, Config, DeviceMode, Gate, Happening, MachineConfig, Monitor, Notification, RecoveredBy,
};
use railwatch_sim_backend::{PortSpec, SimClock, SimDevice, SimHandle};

/// Events generated when `RAILWATCH_SOAK_EVENTS` is not set.
const DEFAULT_EVENTS: u64 = 200_000;
/// Seed used when `RAILWATCH_SOAK_SEED` is not set.
const DEFAULT_SEED: u64 = 0x7261_696c_7761_7463; // "railwatc"

const DEVICES: usize = 8;
const PORTS: u8 = 2;
const TICK_MS: u64 = 100;
const REOPEN_INITIAL_MS: u64 = 200;
const REOPEN_MAX_MS: u64 = 1600;
/// Largest virtual-time step between two script actions.
const MAX_STEP_MS: u64 = 60;
/// Largest burst of COMM_EST in one action.
const MAX_BURST: u64 = 512;

/// The bound on VmRSS growth from 10% to 100% of the run.
///
/// The soak's working set is fixed: 8 devices and 16 rails; each pipe's
/// overflow is run-length encoded and emptied by every settle (a device
/// whose fd failed holds one entry per burst until it is reset, a few
/// hundred at most); the notification channel is bounded (4096 entries of
/// ~64 bytes) and emptied after every poll; the monitor's scratch buffers
/// are reused; the set of unknown codes warned about is a fixed handful;
/// pipe buffers live in the kernel, not in VmRSS. What moves is allocator
/// noise (measured: under 0.1 MiB over 10M and 100M events). 8 MiB is well
/// above that noise and below what a leak of one byte per event adds over
/// 90% of a 10,000,000-event run (~8.6 MiB; a deliberate one-byte-per-event
/// leak in the script was caught at 9.2 MiB). For shorter runs the check is
/// proportionally weaker: the 10M run of `cargo xtask soak` carries it.
const RSS_GROWTH_LIMIT_KIB: u64 = 8 * 1024;

/// SplitMix64: tiny, fast, and the same sequence on every platform.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0; the modulo bias is irrelevant here).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `per_10k` / 10,000.
    fn chance(&mut self, per_10k: u64) -> bool {
        self.below(10_000) < per_10k
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => {
            let v = v.trim().replace('_', "");
            let parsed = match v.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => v.parse(),
            };
            parsed.unwrap_or_else(|e| panic!("{name}={v}: {e}"))
        }
        Err(_) => default,
    }
}

/// The process's resident set (VmRSS) in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS in /proc/self/status")
}

/// Link rates a DEVICE_SPEED_CHANGE may renegotiate to.
fn links() -> [LinkAttrs; 4] {
    [
        LinkAttrs::new(PortSpec::NDR, PortSpec::WIDTH_4X),
        LinkAttrs::new(64, PortSpec::WIDTH_4X), // HDR 4x
        LinkAttrs::new(128, 16),                // NDR 2x
        LinkAttrs::new(32, PortSpec::WIDTH_4X), // EDR 4x
    ]
}

/// Codes the decision table does not act on, unknown ones included. A
/// fixed handful: the monitor warns once per (device, code) and remembers
/// which, as designed.
const UNHANDLED: [u32; 8] = [5, 6, 12, 13, 17, 21, 63, 0xFFFF_FFFF];
/// QP/WQ errors: the engine is notified with the object handle.
const OBJECT_ERRORS: [EventKind; 4] =
    [EventKind::QpFatal, EventKind::QpReqErr, EventKind::QpAccessErr, EventKind::WqFatal];

/// What the script did, by kind.
#[derive(Debug, Default)]
struct Tally {
    actions: u64,
    /// Events the script generated (every repeat, queued or dropped).
    generated: u64,
    /// Of those, how many the devices accepted (the rest were dropped at
    /// once: the device was removed or closed).
    accepted: u64,
    bursts: u64,
    port_down: u64,
    port_up_event: u64,
    port_up_silent: u64,
    port_transitional: u64,
    restarts_and_address: u64,
    object_errors: u64,
    unhandled: u64,
    speed_changes: u64,
    eintr: u64,
    eio_ebadf: u64,
    removes: u64,
    restores: u64,
    resets: u64,
    fatal: u64,
}

/// What the monitor said, by kind.
#[derive(Debug, Default)]
struct Heard {
    notifications: u64,
    events: u64,
    paused: u64,
    inert: u64,
    by_event: u64,
    by_poll: u64,
    by_attach: u64,
    bumps: u64,
    reseeds: u64,
    object_errors: u64,
    drain_errors: u64,
}

impl Heard {
    fn note(&mut self, n: &Notification) {
        self.notifications += 1;
        match &n.what {
            Happening::Event { .. } => self.events += 1,
            Happening::Transition { to, cause, .. } => match (to, cause) {
                (_, Cause::By(RecoveredBy::Event)) => self.by_event += 1,
                (_, Cause::By(RecoveredBy::Poll)) => self.by_poll += 1,
                (_, Cause::By(RecoveredBy::Attach)) => self.by_attach += 1,
                (_, Cause::Bump(_)) => self.bumps += 1,
                (RailState::Inert, _) => self.inert += 1,
                (RailState::Paused, _) => self.paused += 1,
                _ => {}
            },
            Happening::Reseed { .. } => self.reseeds += 1,
            Happening::WorkLost { scope: WorkScope::Qp { .. } | WorkScope::Wq(_), .. } => self.object_errors += 1,
            Happening::Drain { errno: Some(_), .. } => self.drain_errors += 1,
            _ => {}
        }
    }
}

/// What the stranded check saw.
#[derive(Debug, Default)]
struct Waits {
    /// Longest a rail stayed paused with its port ACTIVE on an open device.
    longest_paused_ms: u64,
    /// Longest a rail stayed inert with its device present.
    longest_inert_ms: u64,
    /// Times a rail was seen held by flap damping / settling.
    damped_holds: u64,
    settles: u64,
}

/// The script's model of one device: what it has told the simulator.
#[derive(Debug, Clone)]
struct Model {
    ports: [PortState; PORTS as usize],
    removed: bool,
    /// An `eio`/`ebadf` read fault was set when the device had been
    /// re-opened this many times (a re-open clears it).
    fault_at_reopens: Option<u64>,
}

struct Soak {
    monitor: Monitor<SimDevice, Arc<BandwidthSelector>, SimClock>,
    clock: SimClock,
    selector: Arc<BandwidthSelector>,
    handles: Vec<SimHandle>,
    rx: Receiver<Notification>,
    /// (rail, gate, device index, port index), in monitor order.
    rails: Vec<(RailId, Gate, usize, usize)>,
    models: Vec<Model>,
    rng: Rng,
    hardening: Hardening,
    /// `RAILWATCH_SOAK_TRACE`: virtual time from which to trace.
    trace_from: Option<u64>,
    tally: Tally,
    waits: Waits,
    /// Per rail: the pause reason last seen (`None`: not paused).
    held: Vec<Option<PauseReason>>,
    heard: Heard,
    /// Per rail: since when (and in which state) it has been paused with
    /// its port ACTIVE and its device open, or inert with its device
    /// present.
    stuck_since: Vec<Option<(RailState, u64)>>,
    /// Per device: how many events the script saw accepted and dropped at
    /// once (the rest of `dropped` comes from closes and removals).
    accepted: Vec<u64>,
    dropped_at_queue: Vec<u64>,
}

/// The monitor's optional hardening, from the environment.
#[derive(Debug, Clone, Copy)]
struct Hardening {
    settle_ms: u64,
    damping: Option<DampingConfig>,
}

impl Hardening {
    fn from_env() -> Hardening {
        let damping = (env_u64("RAILWATCH_SOAK_DAMPING", 0) != 0)
            .then_some(DampingConfig { half_life_ms: 8_000, ..DampingConfig::default() });
        if let Some(d) = damping {
            d.validate().expect("damping config");
        }
        Hardening { settle_ms: env_u64("RAILWATCH_SOAK_SETTLE_MS", 0), damping }
    }

    /// The longest a damped rail is held: from `max_penalty` down to
    /// `reuse`, whole half-lives.
    fn max_suppression_ms(&self) -> u64 {
        self.damping.map_or(0, |d| (d.max_penalty / d.reuse).log2().ceil() as u64 * d.half_life_ms)
    }

    /// How long a rail may stay paused while its port reads ACTIVE and its
    /// device is open: the next tick (at most one period plus one script
    /// step away), the settle delay, and a damping hold.
    fn paused_bound_ms(&self) -> u64 {
        2 * TICK_MS + MAX_STEP_MS + self.settle_ms + self.max_suppression_ms()
    }

    /// How long a rail may stay inert while its device is present: the
    /// longest re-open backoff with its jitter (at most 100%) and the tick
    /// that runs it.
    fn inert_bound_ms(&self) -> u64 {
        2 * (REOPEN_MAX_MS + TICK_MS) + MAX_STEP_MS
    }
}

fn now(clock: &SimClock) -> u64 {
    railwatch_runtime::Clock::now(clock).0
}

impl Soak {
    fn new(seed: u64, hardening: Hardening) -> Soak {
        let clock = SimClock::new();
        let selector = Arc::new(BandwidthSelector::new());
        let config = Config::from(MachineConfig {
            tick_ms: TICK_MS,
            reopen_initial_ms: REOPEN_INITIAL_MS,
            reopen_max_ms: REOPEN_MAX_MS,
            seed: Some(seed),
            settle_ms: hardening.settle_ms,
            damping: hardening.damping,
            ..MachineConfig::default()
        });
        let mut monitor = Monitor::new(config, selector.clone(), clock.clone()).expect("monitor");
        let rx = monitor.subscribe();
        let mut handles = Vec::new();
        for d in 0..DEVICES {
            let ports: Vec<PortSpec> = (1..=PORTS).map(PortSpec::active).collect();
            let dev = SimDevice::new(format!("mlx5_{d}"), &ports).expect("sim device");
            handles.push(dev.handle());
            monitor.add_device(dev);
        }
        let rails = monitor
            .rails()
            .into_iter()
            .map(|(id, _)| {
                let gate = monitor.gate(id).expect("gate");
                (id, gate, id.device as usize, usize::from(id.port - 1))
            })
            .collect::<Vec<_>>();
        let n = rails.len();
        let mut soak = Soak {
            monitor,
            clock,
            selector,
            handles,
            rx,
            rails,
            models: vec![
                Model { ports: [PortState::Active; PORTS as usize], removed: false, fault_at_reopens: None };
                DEVICES
            ],
            rng: Rng(seed),
            hardening,
            trace_from: std::env::var("RAILWATCH_SOAK_TRACE").ok().map(|_| env_u64("RAILWATCH_SOAK_TRACE", 0)),
            waits: Waits::default(),
            held: vec![None; n],
            tally: Tally::default(),
            heard: Heard::default(),
            stuck_since: vec![None; n],
            accepted: vec![0; DEVICES],
            dropped_at_queue: vec![0; DEVICES],
        };
        soak.settle();
        soak
    }

    /// True once virtual time reached `RAILWATCH_SOAK_TRACE` (ms): every
    /// script action and monitor notification is printed from then on.
    fn tracing(&self) -> bool {
        self.trace_from.is_some_and(|t| now(&self.clock) >= t)
    }

    /// Polls with a zero timeout until no device is pending, counting every
    /// notification (none is kept: the soak's own memory stays flat).
    fn settle(&mut self) {
        for _ in 0..1_000_000 {
            self.monitor.poll_once(Some(Duration::ZERO)).expect("poll_once");
            for n in self.rx.try_iter() {
                self.heard.note(&n);
                if self.tracing() && !matches!(n.what, Happening::Drain { errno: None, .. }) {
                    println!("trace {:>9} ms  monitor: {:?}", n.t.0, n.what);
                }
            }
            if !self.monitor.has_pending() {
                return;
            }
        }
        panic!("the monitor never settled");
    }

    /// Queues `repeat` copies of `ev` on device `d` and tallies the result.
    fn queue(&mut self, d: usize, ev: AsyncEvent, repeat: u64) {
        let accepted = self.handles[d].queue(ev, repeat);
        self.account(d, repeat, accepted);
    }

    fn account(&mut self, d: usize, generated: u64, accepted: u64) {
        self.tally.generated += generated;
        self.tally.accepted += accepted;
        self.accepted[d] += accepted;
        self.dropped_at_queue[d] += generated - accepted;
    }

    fn set_port(&mut self, d: usize, p: usize, state: PortState, kind: Option<EventKind>) {
        self.models[d].ports[p] = state;
        let port = (p + 1) as u8;
        match kind {
            Some(kind) => {
                let accepted = self.handles[d].set_port_state_with_event(port, state, kind);
                self.account(d, 1, accepted);
            }
            None => self.handles[d].set_port_state(port, state),
        }
    }

    /// One random thing happening to the fabric.
    fn act(&mut self) {
        self.tally.actions += 1;
        let d = self.rng.below(DEVICES as u64) as usize;
        let p = self.rng.below(u64::from(PORTS)) as usize;
        let port = (p + 1) as u32;
        let roll = self.rng.below(10_000);
        if self.tracing() {
            println!(
                "trace {:>9} ms  script: action {} roll {roll} on mlx5_{d} port {port}",
                now(&self.clock),
                self.tally.actions
            );
        }
        match roll {
            // A burst of COMM_EST (one per connection).
            0..6_000 => {
                self.tally.bursts += 1;
                let n = self.rng.range(1, MAX_BURST);
                let obj = ObjectHandle(self.rng.next());
                self.queue(d, AsyncEvent::new(EventKind::CommEst.code(), Element::Object(obj)), n);
            }
            // The port drops: DOWN and PORT_ERR.
            6_000..7_200 => {
                self.tally.port_down += 1;
                self.set_port(d, p, PortState::Down, Some(EventKind::PortErr));
            }
            // It comes back with its PORT_ACTIVE.
            7_200..8_000 => {
                self.tally.port_up_event += 1;
                self.set_port(d, p, PortState::Active, Some(EventKind::PortActive));
            }
            // It comes back silently: the PORT_ACTIVE was lost.
            8_000..8_500 => {
                self.tally.port_up_silent += 1;
                self.set_port(d, p, PortState::Active, None);
            }
            // It is on its way up (INIT, ARMED, ACTIVE_DEFER): not usable yet.
            8_500..8_800 => {
                self.tally.port_transitional += 1;
                let s = self.rng.pick(&[PortState::Init, PortState::Armed, PortState::ActiveDefer]);
                self.set_port(d, p, s, None);
            }
            // CQ_ERR, LID_CHANGE, GID_CHANGE: generation bumps.
            8_800..9_100 => {
                self.tally.restarts_and_address += 1;
                let ev = match self.rng.below(3) {
                    0 => AsyncEvent::new(EventKind::CqErr.code(), Element::Object(ObjectHandle(self.rng.next()))),
                    1 => AsyncEvent::port(EventKind::LidChange, port),
                    _ => AsyncEvent::port(EventKind::GidChange, port),
                };
                self.queue(d, ev, 1);
            }
            // QP/WQ errors for the engine.
            9_100..9_300 => {
                self.tally.object_errors += 1;
                let kind = self.rng.pick(&OBJECT_ERRORS);
                let ev = AsyncEvent::new(kind.code(), Element::Object(ObjectHandle(self.rng.next())));
                let n = self.rng.range(1, 8);
                self.queue(d, ev, n);
            }
            // Codes nobody acts on, unknown ones included.
            9_300..9_500 => {
                self.tally.unhandled += 1;
                let code = self.rng.pick(&UNHANDLED);
                let element = if self.rng.chance(5_000) { Element::Port(port) } else { Element::None };
                let n = self.rng.range(1, 16);
                self.queue(d, AsyncEvent::new(code, element), n);
            }
            // The link renegotiates.
            9_500..9_650 => {
                self.tally.speed_changes += 1;
                let link = self.rng.pick(&links());
                let accepted = self.handles[d].set_link_with_event(p as u8 + 1, link);
                self.account(d, 1, accepted);
            }
            // Interrupted reads.
            9_650..9_850 => {
                self.tally.eintr += 1;
                self.handles[d].eintr(self.rng.range(1, 4));
            }
            // The fd starts failing (EIO or EBADF); the device lives.
            9_850..9_880 => {
                self.tally.eio_ebadf += 1;
                if self.rng.chance(5_000) {
                    self.handles[d].eio()
                } else {
                    self.handles[d].ebadf()
                }
                self.models[d].fault_at_reopens = Some(self.handles[d].counters().reopens);
            }
            // The device goes away (unless it is gone already).
            9_880..9_920 if !self.models[d].removed => {
                self.tally.removes += 1;
                self.models[d].removed = true;
                self.handles[d].remove();
            }
            // DEVICE_FATAL.
            9_920..9_940 => {
                self.tally.fatal += 1;
                self.queue(d, AsyncEvent::new(EventKind::DeviceFatal.code(), Element::None), 1);
            }
            // Nothing but time passes.
            _ => {}
        }
        // A device whose fd failed is reset after a while (removed, then
        // restored like any removed device): the only way such a device
        // reads events again; meanwhile what is queued to it waits unread.
        if self.rng.chance(1_000) {
            let snap = self.monitor.snapshot();
            for d in 0..DEVICES {
                if snap.devices[d].mode == DeviceMode::PollOnly && !self.models[d].removed {
                    self.tally.resets += 1;
                    self.models[d].removed = true;
                    self.handles[d].remove();
                }
            }
        }
        // Removed devices come back after a while.
        for d in 0..DEVICES {
            if self.models[d].removed && self.rng.chance(150) {
                if self.tracing() {
                    println!("trace {:>9} ms  script: restore mlx5_{d}", now(&self.clock));
                }
                self.tally.restores += 1;
                self.models[d].removed = false;
                self.handles[d].restore();
            }
        }
    }

    /// No rail stays paused with its port ACTIVE on an open device for more
    /// than two ticks (plus settle and damping), nor inert with its device
    /// present for longer than the longest re-open backoff plus ticks.
    fn check_not_stranded(&mut self) {
        let t = now(&self.clock);
        for (i, (id, gate, d, p)) in self.rails.iter().enumerate() {
            let w = gate.word();
            let held = (w.state == RailState::Paused).then_some(w.reason);
            if held != self.held[i] {
                match held {
                    Some(PauseReason::Damped) => self.waits.damped_holds += 1,
                    Some(PauseReason::Settling) => self.waits.settles += 1,
                    _ => {}
                }
                self.held[i] = held;
            }
            let model = &self.models[*d];
            let (stuck, bound) = match w.state {
                RailState::Paused if !model.removed && model.ports[*p] == PortState::Active => {
                    (true, self.hardening.paused_bound_ms())
                }
                RailState::Inert if !model.removed => (true, self.hardening.inert_bound_ms()),
                _ => (false, 0),
            };
            if !stuck {
                self.stuck_since[i] = None;
                continue;
            }
            // Paused then inert (or back) starts a new wait: each has its
            // own bound.
            let since = match self.stuck_since[i] {
                Some((state, since)) if state == w.state => since,
                _ => {
                    self.stuck_since[i] = Some((w.state, t));
                    t
                }
            };
            let waited = if w.state == RailState::Paused {
                &mut self.waits.longest_paused_ms
            } else {
                &mut self.waits.longest_inert_ms
            };
            *waited = (*waited).max(t - since);
            assert!(
                t - since <= bound,
                "rail {}/{} stranded: {} ({}) since {since} ms, now {t} ms, port {:?}, device removed: {}",
                id.device,
                id.port,
                w.state,
                w.reason,
                model.ports[*p],
                model.removed,
            );
        }
    }

    /// Per device: reads = acks, the monitor handled every event read,
    /// generated = read + dropped + pending and queued = read + discarded +
    /// pending. Returns the totals over every device.
    fn check_nothing_lost(&self) -> Totals {
        let snap = self.monitor.snapshot();
        assert_eq!(snap.notifications_dropped, 0, "the soak empties the channel after every poll");
        let mut t = Totals::default();
        for (d, h) in self.handles.iter().enumerate() {
            let c = h.counters();
            let pending = h.pending();
            let refused = self.dropped_at_queue[d];
            let name = h.name();
            assert_eq!(c.read, c.acked, "{name}: reads != acks: {c:?}");
            assert_eq!(snap.devices[d].counters.events, c.read, "{name}: the monitor did not handle every event read");
            assert_eq!(c.queued, self.accepted[d], "{name}: the device accepted other than the script saw: {c:?}");
            assert_eq!(
                c.queued + refused,
                c.read + c.dropped + pending,
                "{name}: generated ({} + {refused} refused) != read + dropped + pending ({pending}): {c:?}",
                c.queued
            );
            let discarded = c.dropped - refused;
            assert_eq!(c.queued, c.read + discarded + pending);
            t.queued += c.queued;
            t.refused += refused;
            t.read += c.read;
            t.acked += c.acked;
            t.discarded += discarded;
            t.pending += pending;
        }
        t
    }

    /// Every port ACTIVE, every device present and reading events: after a
    /// few ticks, every rail must be active and available.
    fn recover_everything(&mut self) {
        // Devices whose fd failed, or will fail at the next read (a fault
        // not cleared by a re-open yet): reset them (remove, let the monitor
        // see it, restore), the only way back to reading events.
        let snap = self.monitor.snapshot();
        for d in 0..DEVICES {
            let latent = self.models[d].fault_at_reopens.is_some_and(|r| r == self.handles[d].counters().reopens);
            if (snap.devices[d].mode == DeviceMode::PollOnly || latent) && !self.models[d].removed {
                self.tally.resets += 1;
                self.models[d].removed = true;
                self.handles[d].remove();
            }
        }
        self.run_for(4 * TICK_MS);
        for d in 0..DEVICES {
            if self.models[d].removed {
                self.tally.restores += 1;
                self.models[d].removed = false;
                self.handles[d].restore();
            }
            for p in 0..PORTS as usize {
                self.set_port(d, p, PortState::Active, None);
            }
        }
        self.run_for(self.hardening.inert_bound_ms() + self.hardening.paused_bound_ms());
    }

    /// Lets virtual time pass, tick by tick.
    fn run_for(&mut self, ms: u64) {
        let end = now(&self.clock) + ms;
        while now(&self.clock) < end {
            let next = self.monitor.next_deadline().map_or(end, |t| t.0.min(end)).max(now(&self.clock) + 1);
            self.clock.set(Millis(next));
            self.settle();
        }
    }
}

/// Event counts over every device.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Totals {
    /// Accepted into a device's queue.
    queued: u64,
    /// Refused at queue time (device removed or closed).
    refused: u64,
    read: u64,
    acked: u64,
    /// Queued, then discarded when the device was removed, closed or
    /// re-opened.
    discarded: u64,
    pending: u64,
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

#[test]
fn soak() {
    let target = env_u64("RAILWATCH_SOAK_EVENTS", DEFAULT_EVENTS).max(10);
    let seed = env_u64("RAILWATCH_SOAK_SEED", DEFAULT_SEED);
    println!("soak: {target} events, seed {seed:#x}, {DEVICES} devices x {PORTS} ports, tick {TICK_MS} ms");

    let started = Instant::now();
    let hardening = Hardening::from_env();
    println!(
        "soak: settle delay {} ms, flap damping {}",
        hardening.settle_ms,
        hardening.damping.map_or_else(|| "off".to_string(), |d| format!("{d:?}"))
    );
    let mut soak = Soak::new(seed, hardening);
    let marks = [(10, target / 10), (50, target / 2), (100, target)];
    let mut samples: Vec<(u64, u64, u64)> = Vec::new(); // (percent, events, RSS KiB)
    let mut next_mark = 0;
    let mut next_check = 0;
    while soak.tally.generated < target {
        soak.act();
        let step = soak.rng.below(MAX_STEP_MS + 1);
        soak.clock.advance(step);
        soak.settle();
        soak.check_not_stranded();
        if soak.tally.generated >= next_check {
            soak.check_nothing_lost();
            next_check = soak.tally.generated + target / 100 + 1;
        }
        while next_mark < marks.len() && soak.tally.generated >= marks[next_mark].1 {
            samples.push((marks[next_mark].0, soak.tally.generated, rss_kib()));
            next_mark += 1;
        }
    }
    let run_time = started.elapsed();
    let virtual_ms = now(&soak.clock);

    soak.recover_everything();
    let end = soak.check_nothing_lost();
    assert_eq!(end.pending, 0, "events left unread after recovery");
    assert_eq!(end.queued, end.read + end.discarded);
    assert_eq!(end.queued + end.refused, soak.tally.generated);
    let snap = soak.monitor.snapshot();
    let mut bad = Vec::new();
    for r in &snap.rails {
        if r.state != RailState::Active || !r.available || !soak.selector.is_available(r.id) || r.rate.is_none() {
            bad.push(format!("{} {} ({}) available {} rate {:?}", r.name, r.state, r.reason, r.available, r.rate));
        }
    }
    for d in &snap.devices {
        if d.mode != DeviceMode::Events {
            bad.push(format!("{} is {}", d.name, d.mode.name()));
        }
    }
    // A last burst on every device is read in full: every fd is live.
    for d in 0..DEVICES {
        soak.queue(d, AsyncEvent::new(EventKind::CommEst.code(), Element::None), 1000);
    }
    soak.settle();
    let last = soak.check_nothing_lost();
    let burst = DEVICES as u64 * 1000;
    assert_eq!(last, Totals { queued: end.queued + burst, read: end.read + burst, acked: end.acked + burst, ..end });

    let t = &soak.tally;
    let h = &soak.heard;
    let secs = run_time.as_secs_f64();
    println!(
        "soak: {} events generated in {} actions, {:.2} s wall, {:.0} events/s",
        t.generated,
        t.actions,
        secs,
        t.generated as f64 / secs
    );
    println!(
        "  virtual time    {:.1} min, {} ticks, {} wake-ups",
        virtual_ms as f64 / 60_000.0,
        snap.ticks,
        snap.wakeups
    );
    println!("  script          {t:?}");
    println!(
        "  devices         queued {}, read {}, acked {}, discarded {} (queued, then the device was closed), \
         refused {} (device removed or closed), pending {}",
        end.queued, end.read, end.acked, end.discarded, end.refused, end.pending
    );
    println!(
        "  monitor         {} notifications: {} events, {} pauses, {} inert, activations by event {} / poll {} / attach {}, {} generation bumps, {} re-seeds, {} object errors, {} failed drains",
        h.notifications,
        h.events,
        h.paused,
        h.inert,
        h.by_event,
        h.by_poll,
        h.by_attach,
        h.bumps,
        h.reseeds,
        h.object_errors,
        h.drain_errors
    );
    let reopens: u64 = snap.devices.iter().map(|d| d.counters.reopens).sum();
    let budget_hits: u64 = snap.devices.iter().map(|d| d.counters.budget_hits).sum();
    let interrupted: u64 = snap.devices.iter().map(|d| d.counters.interrupted).sum();
    let w = &soak.waits;
    println!(
        "  waits           longest paused with the port ACTIVE {} ms (bound {}), longest inert with the device \
         present {} ms (bound {}); {} damping holds, {} settles seen",
        w.longest_paused_ms,
        soak.hardening.paused_bound_ms(),
        w.longest_inert_ms,
        soak.hardening.inert_bound_ms(),
        w.damped_holds,
        w.settles
    );
    println!("  device counters re-opens {reopens}, budget hits {budget_hits}, EINTR retried {interrupted}");
    for (pct, events, kib) in &samples {
        println!("  RSS at {pct:>3}%     {:.1} MiB (after {events} events)", mib(*kib));
    }
    let growth = samples.last().map_or(0, |s| s.2).saturating_sub(samples.first().map_or(0, |s| s.2));
    println!("  RSS growth      {:.2} MiB from 10% to 100% (limit {:.0} MiB)", mib(growth), mib(RSS_GROWTH_LIMIT_KIB));
    println!(
        "  final           {} rails active and available, {} devices reading events",
        snap.rails.len() - bad.len().min(snap.rails.len()),
        DEVICES
    );

    assert!(bad.is_empty(), "stranded after recovery: {bad:#?}");
    assert_eq!(samples.len(), 3, "RSS samples: {samples:?}");
    assert!(growth < RSS_GROWTH_LIMIT_KIB, "VmRSS grew {growth} KiB from 10% to 100% of the run");
    // The soak exercised what it claims to.
    assert!(h.by_poll > 0 && h.by_event > 0 && h.by_attach >= DEVICES as u64 * PORTS as u64, "{h:?}");
    if target >= 100_000 {
        assert!(reopens > 0 && h.drain_errors > 0 && interrupted > 0 && h.inert > 0, "{h:?}");
    }
    // The selector agrees with the monitor.
    for r in &snap.rails {
        assert_eq!(soak.selector.rate(r.id), r.rate, "{}", r.name);
    }
}
