//! The deterministic driver: steps a real runtime [`Monitor`] through a
//! [`Scenario`] on a virtual clock.
//!
//! Time only moves when nothing is left to do at the current instant: the
//! driver sets the clock to the next step, timer or expectation, applies
//! the steps due then (their events go into the devices' real pipes), polls
//! the monitor with a zero timeout until no device is pending, and checks
//! the expectations due then. A ten-minute scenario runs in milliseconds,
//! and the same file gives the same timeline every time.
//!
//! Idle virtual time is skipped: once a recovery tick changed nothing and
//! no step came since, the ticks before the next step, expectation or other
//! timer would read the same ports and change nothing either, so the driver
//! goes straight to the last of them. A week of virtual time with a rail
//! that never recovers costs a handful of ticks, not millions.
//!
//! Every notification reaches the sink: the driver subscribes without a
//! bound and empties the channel after every poll. The sink speaks
//! railwatch-runtime's `lines` ([`Names`], [`Record`], [`ExpectResult`]),
//! as `railwatch watch` does.

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use railwatch_core::{DeviceMode, LinkRate, Millis, PauseReason, RailId};
use railwatch_runtime::lines::{Body, ExpectResult, Line, Names, Record, Verdicts};
use railwatch_runtime::{BandwidthSelector, Config, Monitor, Notification, Observer, RailSnapshot, Snapshot, json};

use railwatch_sim_backend::{SimClock, SimDevice, SimHandle, SimHost};

use crate::scenario::{Expect, Fault, ProbeOutcome, ProbeStep, Scenario, TransferStep};

/// How to run a scenario.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Sleep so that virtual time follows the wall clock.
    pub realtime: bool,
    /// Overrides the scenario's `tick_ms`.
    pub tick_ms: Option<u64>,
    /// Stop with an error after this many instants (a fuzzer's budget);
    /// `None`: no limit (the scenario's own limits bound the run).
    pub max_instants: Option<u64>,
    /// Runs to this virtual time instead of the scenario's `duration_ms`
    /// (the state its last step left holds); `None`: the scenario's. A
    /// time before the scenario's own end is the scenario's end.
    pub duration_ms: Option<u64>,
}

/// What a run hands out as it goes: every record, and the monitor between
/// instants for a caller that samples it (`simulate --metrics-series`
/// reads a snapshot there, as a scraper would).
pub trait Sink {
    /// One record, as it happens.
    fn record(&mut self, names: &Names, record: Record<'_>);

    /// Virtual time is about to move to `t`: `monitor` is as the last
    /// instant left it, and stays so until `t`. The default does nothing.
    fn before_instant(&mut self, t: u64, monitor: &SimMonitor) {
        let _ = (t, monitor);
    }
}

/// A closure as a [`Sink`] of records only.
struct Records<F>(F);

impl<F: FnMut(&Names, Record<'_>)> Sink for Records<F> {
    fn record(&mut self, names: &Names, record: Record<'_>) {
        (self.0)(names, record)
    }
}

/// How a run ended.
#[derive(Debug, Clone)]
pub struct RunSummary {
    /// The monitor's final snapshot.
    pub snapshot: Snapshot,
    /// Events queued into all devices.
    pub events_queued: u64,
    /// Events read from them.
    pub events_read: u64,
    /// Events acknowledged.
    pub events_acked: u64,
    /// Every expectation's verdict, in the order checked.
    pub expectations: Vec<ExpectResult>,
}

impl RunSummary {
    /// Expectations that held.
    pub fn passed(&self) -> usize {
        self.expectations.iter().filter(|e| e.passed).count()
    }

    /// Expectations that failed.
    pub fn failed(&self) -> usize {
        self.expectations.len() - self.passed()
    }

    /// The closing `summary` line (docs/JSON.md): the rails in brief, the
    /// event totals, the verdicts.
    pub fn line(&self) -> Line<'_> {
        let body = Body::RunSummary {
            rails: self.snapshot.rails.iter().map(json::RailJson::brief).collect(),
            events_queued: self.events_queued,
            events_read: self.events_read,
            events_acked: self.events_acked,
            expectations: Verdicts { passed: self.passed(), failed: self.failed() },
        };
        Line::new(self.snapshot.t.0, body)
    }
}

/// The monitor as the driver builds it.
pub type SimMonitor = Monitor<SimDevice, Arc<BandwidthSelector>, SimClock>;

/// A scenario loaded into a monitor, ready to be stepped.
pub struct Run<'s> {
    scenario: &'s Scenario,
    /// The monitor under test.
    pub monitor: SimMonitor,
    /// The script's side of every device, in file order.
    pub handles: Vec<SimHandle>,
    /// The virtual clock the monitor reads.
    pub clock: SimClock,
    /// The selector the monitor drives.
    pub selector: Arc<BandwidthSelector>,
    names: Names,
    rx: crossbeam_channel::Receiver<Notification>,
    next_step: usize,
    /// The expectations' indexes by time (file order among equal times),
    /// and how many of them were checked: an instant checks the next due,
    /// not every one.
    expects_by_time: Vec<usize>,
    next_expect: usize,
    tick_ms: u64,
    /// The virtual time the run ends at.
    end_ms: u64,
    /// The last instant applied no step, checked no expectation and made no
    /// notification: the world and the monitor are at rest.
    at_rest: bool,
    /// The rails whose probe the driver took (it is the run's only engine:
    /// no other takes one) and that still read `probing`: looked at after
    /// each instant instead of every rail.
    probes: Vec<RailId>,
}

/// The monitor's config for a run of `scenario`: its settings, `opts`'
/// tick override, and a fixed seed for re-open jitter (same file, same
/// timeline).
pub fn config(scenario: &Scenario, opts: &RunOptions) -> Config {
    let mut config = scenario.config.clone();
    config.machine.tick_ms = opts.tick_ms.unwrap_or(config.machine.tick_ms);
    config.machine.seed = Some(1);
    config
}

/// The virtual time a run of `scenario` ends at: its `duration_ms`, or
/// `opts.duration_ms` when that is later.
pub fn end_ms(scenario: &Scenario, opts: &RunOptions) -> u64 {
    opts.duration_ms.map_or(scenario.duration_ms, |d| d.max(scenario.duration_ms))
}

impl<'s> Run<'s> {
    /// Builds the scenario's devices and a monitor over them, at virtual
    /// time 0, subscribed without a bound (the driver empties the channel
    /// after every poll, so it never loses one).
    pub fn new(scenario: &'s Scenario, opts: &RunOptions) -> io::Result<Run<'s>> {
        Run::observed(scenario, opts, None)
    }

    /// [`new`](Self::new), with `observer` set on the monitor before the
    /// devices are added (a recorder sees them attach).
    pub fn observed(scenario: &'s Scenario, opts: &RunOptions, observer: Option<Observer>) -> io::Result<Run<'s>> {
        let clock = SimClock::new();
        let selector = Arc::new(BandwidthSelector::new());
        let config = config(scenario, opts);
        let tick_ms = config.machine.tick_ms;
        let mut monitor = Monitor::new(config, selector.clone(), clock.clone())?;
        let rx = monitor.subscribe_unbounded();
        if let Some(observer) = observer {
            monitor.set_observer(observer);
        }
        let (devices, handles) = scenario.build_devices()?;
        for ((dev, decl), handle) in devices.into_iter().zip(&scenario.devices).zip(&handles) {
            if decl.present {
                monitor.add_device(dev);
            } else {
                // Not in the host's list until a `plug` step: the host then
                // opens it anew and the monitor attaches it.
                handle.unplug();
            }
        }
        // The host's device list and its uevent twin: unplugged devices are
        // removed, plugged ones added, as `railwatch watch` does for real.
        let host = SimHost::new(handles.clone())?;
        monitor.watch_devices(Box::new(host), Duration::from_secs(3600))?;
        let names = Names::of(&monitor);
        let mut expects_by_time: Vec<usize> = (0..scenario.expects.len()).collect();
        expects_by_time.sort_by_key(|&i| scenario.expects[i].at_ms);
        Ok(Run {
            scenario,
            monitor,
            handles,
            clock,
            selector,
            names,
            rx,
            next_step: 0,
            expects_by_time,
            next_expect: 0,
            tick_ms,
            end_ms: end_ms(scenario, opts),
            at_rest: false,
            probes: Vec::new(),
        })
    }

    /// Names for the ids in notifications.
    pub fn names(&self) -> &Names {
        &self.names
    }

    /// The virtual time the run ends at: the scenario's `duration_ms`, or
    /// [`RunOptions::duration_ms`] when that is later.
    pub fn end_ms(&self) -> u64 {
        self.end_ms
    }

    /// The next instant something is due: a step, an expectation or a
    /// monitor timer, capped at the scenario's end (idle ticks skipped, see
    /// the module docs). `None` when the run is over.
    pub fn next_instant(&self) -> Option<u64> {
        let now = railwatch_runtime::Clock::now(&self.clock).0;
        let end = self.end_ms;
        let step = self.scenario.steps.get(self.next_step).map(|s| s.at_ms);
        let expect = self.expects_by_time.get(self.next_expect).map(|&i| self.scenario.expects[i].at_ms);
        let timer = self.monitor.machine().next_timer().map(|t| t.0);
        let tick = self.monitor.next_tick().map(|t| t.0);
        let others = [step, expect, timer].into_iter().flatten().min();
        let next = match (tick, others) {
            // Only ticks before the next thing: at rest, they would change
            // nothing; go to the last of them.
            (Some(tick), others) if self.at_rest && others.is_none_or(|o| tick < o) => {
                let horizon = others.unwrap_or(u64::MAX).min(end.saturating_add(1));
                let skip = horizon.saturating_sub(1).saturating_sub(tick) / self.tick_ms.max(1);
                Some(tick.saturating_add(skip.saturating_mul(self.tick_ms)))
            }
            (tick, others) => [tick, others].into_iter().flatten().min(),
        };
        match next {
            Some(t) if t <= end => Some(t.max(now)),
            _ if now < end => Some(end),
            _ => None,
        }
    }

    /// Polls the monitor (zero timeout) until no device is pending, handing
    /// every notification to `sink`; returns how many there were.
    fn drain_notes(&mut self, sink: &mut impl FnMut(&Names, Record<'_>)) -> io::Result<usize> {
        let mut notes = 0;
        loop {
            self.monitor.poll_once(Some(Duration::ZERO))?;
            // A device plugged in for the first time: name its rails too.
            if self.monitor.machine().rails().len() != self.names.rails_len() {
                self.names = Names::of(&self.monitor);
            }
            for note in self.rx.try_iter() {
                notes += 1;
                sink(&self.names, Record::Note(&note));
            }
            if !self.monitor.has_pending() {
                return Ok(notes);
            }
        }
    }

    /// The engine reports `transfers` on a rail of the device called
    /// `device`, if the monitor has it: what the devices queued before is
    /// read first, as the live monitor had read it when the engine
    /// reported. Returns how many notifications the drain made.
    fn report_transfers(
        &mut self,
        device: &str,
        transfers: TransferStep,
        sink: &mut impl FnMut(&Names, Record<'_>),
    ) -> io::Result<usize> {
        let Some(device) = self.monitor.device_index(device) else { return Ok(0) };
        let notes = self.drain_notes(sink)?;
        let rail = RailId { device, port: transfers.port };
        self.monitor.report_transfers(rail, &[transfers.report]);
        Ok(notes)
    }

    /// The engine asks the rail's gate for the probe and reports
    /// `probe.outcome` for it, or for the one it took earlier (`taken`
    /// reports nothing); what the devices queued before is read first. With
    /// no probe out, nothing is sent. Returns how many notifications the
    /// drain made.
    fn probe(
        &mut self,
        device: &str,
        probe: ProbeStep,
        sink: &mut impl FnMut(&Names, Record<'_>),
    ) -> io::Result<usize> {
        let Some(device) = self.monitor.device_index(device) else { return Ok(0) };
        let notes = self.drain_notes(sink)?;
        let rail = RailId { device, port: probe.port };
        let Some(gate) = self.monitor.gate(rail) else { return Ok(notes) };
        let out = gate.probe().is_ok() || gate.word().reason == PauseReason::Probing;
        if out && !self.probes.contains(&rail) {
            self.probes.push(rail);
        }
        match probe.outcome {
            ProbeOutcome::Success if out => self.monitor.report_probe(rail, true),
            ProbeOutcome::Failure if out => self.monitor.report_probe(rail, false),
            _ => {}
        }
        Ok(notes)
    }

    /// Whether the monitor reads the async fd of the device called `name`
    /// (open, not poll-only).
    fn is_read(&self, name: &str) -> bool {
        let device = self.monitor.device_index(name);
        device.and_then(|d| self.monitor.machine().device(d)).is_some_and(|d| d.mode == DeviceMode::Events)
    }

    /// Polls the monitor (zero timeout) until no device is pending, handing
    /// every notification to `sink`.
    pub fn settle(&mut self, sink: &mut impl FnMut(&Names, Record<'_>)) -> io::Result<()> {
        self.drain_notes(sink).map(|_| ())
    }

    /// Moves the clock to `t`, applies the steps due, lets the monitor
    /// settle (running its timers if due) and checks the expectations due.
    pub fn advance_to(&mut self, t: u64, sink: &mut impl FnMut(&Names, Record<'_>)) -> io::Result<Vec<ExpectResult>> {
        self.clock.set(Millis(t));
        let mut applied = false;
        let ticks = self.monitor.machine().ticks();
        let mut notes = 0;
        // Devices an event was queued on in this instant.
        let mut queued: Vec<usize> = Vec::new();
        while let Some(step) = self.scenario.steps.get(self.next_step).filter(|s| s.at_ms <= t) {
            // Asked for: what was queued so far is read first.
            if step.drain {
                queued.clear();
                notes += self.drain_notes(sink)?;
            }
            // What a device queued in this instant before a read fault or a
            // removal of it is read first (a removal would drop it; a read
            // error would hide it), as the live monitor read it in the
            // drain that then failed. Only what was queued and is read: a
            // step that queued nothing (the device closed or removed) or a
            // device whose fd is not read (poll-only) leaves nothing to
            // read first, and the steps of the instant are applied as one.
            if matches!(step.fault, Some(Fault::Eio | Fault::Ebadf | Fault::Remove))
                && queued.contains(&step.device_index)
                && self.is_read(&step.device)
            {
                queued.clear();
                notes += self.drain_notes(sink)?;
            }
            let listed = self.handles[step.device_index].is_listed();
            if step.apply(&self.handles) > 0 {
                queued.push(step.device_index);
            }
            self.next_step += 1;
            applied = true;
            if let Some(transfers) = step.transfers {
                notes += self.report_transfers(&step.device, transfers, sink)?;
            }
            if let Some(probe) = step.probe {
                notes += self.probe(&step.device, probe, sink)?;
            }
            // The monitor sees each change of the device list, as it sees
            // each uevent: an unplug and a plug in one instant are a
            // device leaving and a new one coming, not nothing. One that
            // changes nothing (a plug of a listed device) is no uevent.
            if matches!(step.fault, Some(Fault::Unplug | Fault::Plug))
                && listed != self.handles[step.device_index].is_listed()
            {
                notes += self.drain_notes(sink)?;
            }
        }
        notes += self.drain_notes(sink)?;
        let ticked = self.monitor.machine().ticks() != ticks;
        if ticked {
            sink(&self.names, Record::Tick(t));
        }
        // The expectations due, in file order; each reads its own rail (a
        // copy of every rail would be the largest thing an instant makes).
        let waiting = &self.expects_by_time[self.next_expect..];
        let mut due = waiting[..waiting.partition_point(|&i| self.scenario.expects[i].at_ms <= t)].to_vec();
        self.next_expect += due.len();
        due.sort_unstable();
        let mut results = Vec::new();
        for expect in due.into_iter().map(|i| &self.scenario.expects[i]) {
            let result = check_rail(expect, self.monitor.rail_snapshot(&expect.rail.to_string()).as_ref());
            sink(&self.names, Record::Expect(&result));
            results.push(result);
        }
        // At rest once a tick changed nothing and nothing came since: an
        // instant without a tick (an audit, a timer) that changed nothing
        // keeps what the last tick said, and says nothing itself (the ticks
        // after a change must read the ports before any is skipped).
        // A probe out is timed by the ticks: none of them is idle.
        let machine = self.monitor.machine();
        self.probes.retain(|&id| machine.rail(id).is_some_and(|r| r.word.reason == PauseReason::Probing));
        let probe_out = !self.probes.is_empty();
        self.at_rest = match (!applied && notes == 0 && results.is_empty() && !probe_out, ticked) {
            (false, _) => false,
            (true, true) => true,
            (true, false) => self.at_rest,
        };
        Ok(results)
    }

    /// Totals over every device: (queued, read, acked).
    pub fn event_totals(&self) -> (u64, u64, u64) {
        self.handles
            .iter()
            .map(SimHandle::counters)
            .fold((0, 0, 0), |(q, r, a), c| (q + c.queued, r + c.read, a + c.acked))
    }
}

/// Runs `scenario` to its end, handing every notification and expectation
/// verdict to `sink` as it happens.
pub fn run(scenario: &Scenario, opts: &RunOptions, sink: impl FnMut(&Names, Record<'_>)) -> io::Result<RunSummary> {
    run_observed(scenario, opts, None, sink)
}

/// [`run`], with `observer` watching every input the monitor feeds its
/// machine (see [`Run::observed`]).
pub fn run_observed(
    scenario: &Scenario,
    opts: &RunOptions,
    observer: Option<Observer>,
    sink: impl FnMut(&Names, Record<'_>),
) -> io::Result<RunSummary> {
    run_with(scenario, opts, observer, &mut Records(sink))
}

/// [`run_observed`] with a [`Sink`] that also sees the monitor before each
/// instant.
pub fn run_with(
    scenario: &Scenario,
    opts: &RunOptions,
    observer: Option<Observer>,
    sink: &mut impl Sink,
) -> io::Result<RunSummary> {
    let mut run = Run::observed(scenario, opts, observer)?;
    let started = Instant::now();
    let mut expectations = Vec::new();
    let mut records = |names: &Names, record: Record<'_>| sink.record(names, record);
    // Attaching the devices at time 0 already produced notifications.
    run.settle(&mut records)?;
    let mut instants = 0u64;
    while let Some(t) = run.next_instant() {
        instants += 1;
        if opts.max_instants.is_some_and(|max| instants > max) {
            return Err(io::Error::other(format!(
                "the run passed its budget of {} instants at {t} ms",
                opts.max_instants.unwrap_or(0)
            )));
        }
        if opts.realtime {
            let due = started + Duration::from_millis(t);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
        sink.before_instant(t, &run.monitor);
        let mut records = |names: &Names, record: Record<'_>| sink.record(names, record);
        expectations.extend(run.advance_to(t, &mut records)?);
        if t >= run.end_ms {
            break;
        }
    }
    let (events_queued, events_read, events_acked) = run.event_totals();
    Ok(RunSummary { snapshot: run.monitor.snapshot(), events_queued, events_read, events_acked, expectations })
}

fn rate_text(rate: Option<LinkRate>) -> String {
    match rate.and_then(|r| r.as_gbps()) {
        Some(g) => format!("{g} Gb/s"),
        None if rate.is_some() => "an unknown rate".into(),
        None => "no rate".into(),
    }
}

/// Checks one expectation against a snapshot.
pub fn check(expect: &Expect, snapshot: &Snapshot) -> ExpectResult {
    check_rail(expect, snapshot.rail(&expect.rail.to_string()))
}

/// Checks one expectation against its rail as a snapshot has it (`None`:
/// there is no such rail).
fn check_rail(expect: &Expect, rail: Option<&RailSnapshot>) -> ExpectResult {
    let name = expect.rail.to_string();
    let Some(rail) = rail else {
        return ExpectResult { at_ms: expect.at_ms, rail: name, passed: false, detail: "no such rail".into() };
    };
    let mut wanted = Vec::new();
    let mut wrong = Vec::new();
    let mut field = |what: String, ok: bool, found: String| {
        if !ok {
            wrong.push(format!("{what} but found {found}"));
        }
        wanted.push(what);
    };
    let RailSnapshot { state, available, rate, recovered_by, reason, generation, .. } = rail;
    if let Some(s) = expect.state {
        field(format!("state {s}"), *state == s, state.to_string());
    }
    if let Some(a) = expect.available {
        field(format!("available {a}"), *available == a, available.to_string());
    }
    if let Some(b) = expect.bandwidth {
        field(format!("bandwidth {}", rate_text(Some(b))), *rate == Some(b), rate_text(*rate));
    }
    if let Some(by) = expect.recovered_by {
        let found = recovered_by.map_or("never", |b| b.name());
        field(format!("recovered by {by}"), *recovered_by == Some(by), found.to_string());
    }
    if let Some(r) = expect.reason {
        field(format!("reason {r}"), *reason == r, reason.to_string());
    }
    if let Some(h) = expect.half_open {
        field(format!("half_open {h}"), rail.half_open() == h, rail.half_open().to_string());
    }
    if let Some(g) = expect.generation {
        field(format!("generation {g}"), *generation == g, generation.to_string());
    }
    let passed = wrong.is_empty();
    let detail = if passed { wanted.join(", ") } else { wrong.join("; ") };
    ExpectResult { at_ms: expect.at_ms, rail: name, passed, detail }
}
