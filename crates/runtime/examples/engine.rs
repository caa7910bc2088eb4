//! # A transfer engine on top of railwatch
//!
//! This example is meant to be copied. It shows everything an engine author
//! needs from `railwatch-runtime`:
//!
//! 1. Build a [`Monitor`] over the opened devices, with a selector the
//!    workers share (here the reference [`BandwidthSelector`] in an `Arc`).
//! 2. Before the monitor goes to its own thread, take what the workers and
//!    the engine need from it: one [`Gate`] per rail and the notification
//!    receiver.
//! 3. [`Monitor::spawn`] it. From then on it owns every device's async-event
//!    fd, drains them, pauses and resumes rails, re-seeds bandwidth and runs
//!    the recovery tick. Nothing else may read those fds.
//! 4. Workers, on every transfer: pick a rail through the selector, take a
//!    ticket from that rail's gate (one atomic load), and rebuild their
//!    endpoints (QPs, address handles) for that rail when the ticket's
//!    generation is newer than the one the endpoints were built under.
//!
//! The devices here are simulated ([`SimDevice`]: real non-blocking pipes
//! standing in for libibverbs async fds), so the main thread can play the
//! network: it flaps ports with events, renegotiates a link to a lower rate,
//! and brings one port back *silently* (no `PORT_ACTIVE` event at all, the
//! case that strands rails forever in engines without a recovery poll). With
//! real NICs you would hand `railwatch_verbs_backend::VerbsDevice`s to the
//! monitor instead; nothing else changes.
//!
//! The monitor logs through the `log` crate (a rail going down at warn,
//! coming back at info, a recovery by the poll at warn); install whatever
//! logger the engine already uses to see those lines.
//!
//! Run it with `cargo run -p railwatch-runtime --example engine`. It takes
//! about a second and a half, prints a timeline and a summary, and exits 0
//! when every rail is back and the workers were refused while rails were
//! down.

use std::collections::HashMap;
use std::error::Error;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use railwatch_core::{AsyncEvent, Element, EventKind, LinkAttrs, LinkRate, PortState, RailId, RailState, Rejection};
use railwatch_runtime::{
    BandwidthSelector, Cause, Config, Gate, Happening, MachineConfig, Monitor, Notification, RecoveredBy, SystemClock,
};
use railwatch_sim_backend::{PortSpec, SimDevice};

/// Worker threads (each also has a "home" rail, see [`worker`]).
const WORKERS: usize = 4;
/// How long a simulated transfer takes.
const TRANSFER: Duration = Duration::from_micros(200);
/// Bytes one simulated transfer moves (only counted).
const TRANSFER_BYTES: u64 = 1 << 20;
/// How long each outage lasts once the workers have noticed it.
const OUTAGE: Duration = Duration::from_millis(150);
/// Upper bound for anything the main thread waits for. Generous: nothing
/// here should take more than a few recovery ticks (100 ms each).
const PATIENCE: Duration = Duration::from_secs(10);

/// What the workers share about one rail.
struct RailInfo {
    id: RailId,
    name: String,
    /// The gate: a read-only, lock-free view of the rail's state word.
    gate: Gate,
    /// Statistics, for the summary.
    transfers: AtomicU64,
    rejections: AtomicU64,
    rebuilds: AtomicU64,
    /// The first refusal seen, to show what a rejection says.
    first_rejection: Mutex<Option<Rejection>>,
}

/// An endpoint a worker keeps per rail: in a real engine, the QPs and
/// address handles built on that rail's device and port. It remembers the
/// generation it was built under.
struct Endpoint {
    generation: u64,
}

fn main() -> Result<(), Box<dyn Error>> {
    // ---- 1. devices and the monitor ----------------------------------------
    //
    // Three devices, four rails: mlx5_0 has two ports. All start ACTIVE;
    // mlx5_2 runs at HDR 4x (200 Gb/s), the others at NDR 4x (400 Gb/s).
    let hdr_4x = LinkAttrs::new(64, PortSpec::WIDTH_4X); // speed code 64 = HDR, 50 Gb/s per lane
    let mlx5_0 = SimDevice::new("mlx5_0", &[PortSpec::active(1), PortSpec::active(2)])?;
    let mlx5_1 = SimDevice::new("mlx5_1", &[PortSpec::active(1)])?;
    let mlx5_2 = SimDevice::new("mlx5_2", &[PortSpec::new(1, PortState::Active, hdr_4x)])?;
    // The "network": handles the main thread uses to make things happen.
    let (net0, net1, net2) = (mlx5_0.handle(), mlx5_1.handle(), mlx5_2.handle());

    // The selector is shared: the monitor writes availability and bandwidth
    // into it, the workers pick from it.
    let selector = Arc::new(BandwidthSelector::new());
    // A short recovery tick so the silent recovery below shows up quickly;
    // the default (1 s) is right for production. The tick only runs while a
    // rail is paused: a healthy host has no idle wake-ups.
    let config = Config::from(MachineConfig { tick_ms: 100, ..MachineConfig::default() });
    let mut monitor = Monitor::new(config, selector.clone(), SystemClock::new())?;
    for dev in [mlx5_0, mlx5_1, mlx5_2] {
        // Attaches every port: active (and available in the selector, with
        // its bandwidth seeded) or paused, by what the port reads now.
        monitor.add_device(dev);
    }

    // ---- 2. take gates and the notification receiver, then spawn -----------
    let rails: Arc<Vec<RailInfo>> = Arc::new(
        monitor
            .rails()
            .into_iter()
            .map(|(id, name)| RailInfo {
                id,
                gate: monitor.gate(id).expect("the monitor knows its own rails"),
                name,
                transfers: AtomicU64::new(0),
                rejections: AtomicU64::new(0),
                rebuilds: AtomicU64::new(0),
                first_rejection: Mutex::new(None),
            })
            .collect(),
    );
    let notes = monitor.subscribe();
    let names: HashMap<RailId, String> = rails.iter().map(|r| (r.id, r.name.clone())).collect();
    let devices: Vec<String> = (0..).map_while(|d| monitor.device_name(d)).map(String::from).collect();
    let started = Instant::now();
    let monitor = monitor.spawn()?;

    // ---- 3. workers --------------------------------------------------------
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (rails, selector, stop) = (rails.clone(), selector.clone(), stop.clone());
            thread::Builder::new().name(format!("worker-{w}")).spawn(move || worker(w, &rails, &selector, &stop))
        })
        .collect::<Result<_, _>>()?;

    // ---- 4. the network misbehaves -----------------------------------------
    let mut timeline = Timeline { notes, names, devices };
    let rail = |name: &str| rails.iter().position(|r| r.name == name).expect("a rail of this example");
    thread::sleep(Duration::from_millis(150));

    // a) A plain flap: PORT_ERR, a short outage, PORT_ACTIVE.
    let r = rail("mlx5_0/1");
    net0.port_down(1);
    timeline.wait_until_paused(&rails[r])?;
    wait_for_rejection(&rails[r])?;
    thread::sleep(OUTAGE);
    net0.port_up(1);
    timeline.wait_until_active(&rails[r], RecoveredBy::Event)?;

    // b) The bug railwatch exists for: when a port comes back, every
    //    connection re-establishes and the PORT_ACTIVE arrives behind a burst
    //    of COMM_EST. A reader that takes one event per wake-up of the
    //    edge-triggered fd strands it; the monitor drains to EAGAIN. (Its
    //    thread may already be draining the burst while this thread queues
    //    the PORT_ACTIVE: either way nothing is left behind.)
    let r = rail("mlx5_1/1");
    net1.port_down(1);
    timeline.wait_until_paused(&rails[r])?;
    wait_for_rejection(&rails[r])?;
    thread::sleep(OUTAGE);
    net1.queue(AsyncEvent::new(EventKind::CommEst.code(), Element::None), 500);
    net1.port_up(1);
    timeline.wait_until_active(&rails[r], RecoveredBy::Event)?;

    // c) The link comes back slower (NDR 4x → HDR 4x): the monitor re-seeds
    //    the selector's bandwidth *before* marking the rail available, so no
    //    worker scores it on the old rate.
    let r = rail("mlx5_0/2");
    net0.port_down(2);
    timeline.wait_until_paused(&rails[r])?;
    wait_for_rejection(&rails[r])?;
    thread::sleep(OUTAGE);
    net0.set_link(2, hdr_4x);
    net0.port_up(2);
    timeline.wait_until_active(&rails[r], RecoveredBy::Event)?;

    // d) A silent recovery: the port comes back but no PORT_ACTIVE is ever
    //    delivered. Only the recovery tick (here every 100 ms) notices.
    let r = rail("mlx5_2/1");
    net2.port_down(1);
    timeline.wait_until_paused(&rails[r])?;
    wait_for_rejection(&rails[r])?;
    thread::sleep(OUTAGE);
    net2.set_port_state(1, PortState::Active);
    timeline.wait_until_active(&rails[r], RecoveredBy::Poll)?;

    // Let the workers use every rail again: each rail's home worker finds
    // its endpoints stale (older generation) and rebuilds them.
    thread::sleep(Duration::from_millis(150));
    for info in rails.iter() {
        wait_until(&format!("endpoints rebuilt on {}", info.name), || info.rebuilds.load(Ordering::Relaxed) > 0)?;
    }

    // ---- 5. shut down and report -------------------------------------------
    stop.store(true, Ordering::Release);
    let per_worker: Vec<u64> = workers.into_iter().map(|w| w.join().expect("a worker panicked")).collect();
    let monitor = monitor.shutdown()?; // wakes the monitor thread and joins it
    timeline.drain_pending();
    let snapshot = monitor.snapshot();

    println!();
    println!(
        "{:<10} {:>8} {:>5} {:>9} {:>10} {:>9} {:>10} {:>9}",
        "rail", "state", "gen", "Gb/s", "recovered", "transfers", "rejections", "rebuilds"
    );
    for (info, snap) in rails.iter().zip(&snapshot.rails) {
        println!(
            "{:<10} {:>8} {:>5} {:>9} {:>10} {:>9} {:>10} {:>9}",
            info.name,
            snap.state.name(),
            snap.generation,
            snap.rate.and_then(|r| r.as_gbps()).map_or("?".into(), |g| g.to_string()),
            snap.recovered_by.map_or("-", |b| b.name()),
            info.transfers.load(Ordering::Relaxed),
            info.rejections.load(Ordering::Relaxed),
            info.rebuilds.load(Ordering::Relaxed),
        );
    }
    let moved: u64 = per_worker.iter().sum::<u64>() * TRANSFER_BYTES;
    println!(
        "{WORKERS} workers moved {} MiB in {:.2} s; aggregate bandwidth now {} Gb/s; monitor: {} wake-ups, {} ticks",
        moved >> 20,
        started.elapsed().as_secs_f64(),
        selector.aggregate_gbps().unwrap_or(0.0),
        snapshot.wakeups,
        snapshot.ticks,
    );
    for info in rails.iter() {
        if let Some(rejection) = *info.first_rejection.lock().unwrap_or_else(|p| p.into_inner()) {
            println!("first refusal on {}: {rejection}", info.name);
        }
    }

    // What this example promises.
    for (info, snap) in rails.iter().zip(&snapshot.rails) {
        assert_eq!(snap.state, RailState::Active, "{} is not active again", info.name);
        assert!(snap.available && selector.is_available(info.id), "{} is not available", info.name);
        assert!(info.rejections.load(Ordering::Relaxed) > 0, "no worker was refused on {}", info.name);
        assert!(info.rebuilds.load(Ordering::Relaxed) > 0, "nobody rebuilt endpoints on {}", info.name);
    }
    assert_eq!(snapshot.rail("mlx5_0/2").and_then(|r| r.rate), Some(LinkRate::gbps(200)));
    assert_eq!(snapshot.rail("mlx5_2/1").and_then(|r| r.recovered_by), Some(RecoveredBy::Poll));
    assert_eq!(selector.aggregate_gbps(), Some(400.0 + 200.0 + 400.0 + 200.0));
    println!("ok: every rail is active again, and workers were refused (with the reason) while rails were down");
    Ok(())
}

/// One worker: a loop of transfers. Returns how many it made.
///
/// Each worker has a *home* rail (think: a long-lived connection to a peer
/// that only exists on the NUMA-local NIC). Every transfer first tries the
/// home rail's gate; when the gate refuses, the worker asks the selector for
/// another rail, weighted by bandwidth among the available ones.
fn worker(w: usize, rails: &[RailInfo], selector: &BandwidthSelector, stop: &AtomicBool) -> u64 {
    let home = w % rails.len();
    let index: HashMap<RailId, usize> = rails.iter().enumerate().map(|(i, r)| (r.id, i)).collect();
    let mut endpoints: HashMap<RailId, Endpoint> = HashMap::new();
    let mut seed = 0x9E37_79B9_7F4A_7C15_u64 ^ (w as u64 + 1);
    let mut done = 0;
    while !stop.load(Ordering::Acquire) {
        seed = xorshift(seed);
        // The home rail first; if refused, whatever the selector picks.
        let candidates = [Some(home), selector.pick(seed).and_then(|id| index.get(&id).copied())];
        for rail in candidates.into_iter().flatten() {
            let info = &rails[rail];
            match info.gate.check() {
                Ok(ticket) => {
                    // A newer generation means the rail was paused and came
                    // back (or its CQ failed, or its LID/GID changed) since
                    // these endpoints were built: they are stale. Rebuild
                    // before using them; QPs that failed while the port was
                    // down run several times slower if kept.
                    let ep = endpoints.entry(info.id).or_insert(Endpoint { generation: ticket.generation });
                    if ticket.generation > ep.generation {
                        ep.generation = ticket.generation;
                        info.rebuilds.fetch_add(1, Ordering::Relaxed);
                    }
                    // "Transfer".
                    thread::sleep(TRANSFER);
                    info.transfers.fetch_add(1, Ordering::Relaxed);
                    done += 1;
                    break;
                }
                Err(rejection) => {
                    // The gate says why: state, reason, since when, and the
                    // port state last read. An engine would log it (rate
                    // limited) and fail over, as here.
                    info.rejections.fetch_add(1, Ordering::Relaxed);
                    let mut first = info.first_rejection.lock().unwrap_or_else(|p| p.into_inner());
                    first.get_or_insert(rejection);
                }
            }
        }
    }
    done
}

fn xorshift(mut x: u64) -> u64 {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x
}

/// Waits until some worker was refused by `rail`'s gate (it is paused, and
/// it is the home rail of one worker, so this is quick).
fn wait_for_rejection(rail: &RailInfo) -> Result<(), Box<dyn Error>> {
    let before = rail.rejections.load(Ordering::Relaxed);
    wait_until(&format!("a refusal on {}", rail.name), || rail.rejections.load(Ordering::Relaxed) > before)
}

/// Waits (politely) until `done`, or gives up after [`PATIENCE`].
fn wait_until(what: &str, done: impl Fn() -> bool) -> Result<(), Box<dyn Error>> {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        if Instant::now() > deadline {
            return Err(format!("timed out waiting for {what}").into());
        }
        thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// Prints the monitor's notifications as they come, and waits for the ones
/// the script needs. An engine would log these, feed them to metrics, or
/// react to `WorkLost` (fail the work posted to that QP, CQ or device).
struct Timeline {
    notes: Receiver<Notification>,
    names: HashMap<RailId, String>,
    devices: Vec<String>,
}

impl Timeline {
    fn wait_until_paused(&mut self, rail: &RailInfo) -> Result<(), Box<dyn Error>> {
        self.wait_for(
            &format!("{} paused", rail.name),
            |what| matches!(what, Happening::Transition { rail: r, to: RailState::Paused, .. } if *r == rail.id),
        )
    }

    fn wait_until_active(&mut self, rail: &RailInfo, by: RecoveredBy) -> Result<(), Box<dyn Error>> {
        // The activation path ends with the rail marked available, after
        // the re-seed: wait for that.
        self.wait_for(&format!("{} active by {}", rail.name, by.name()), |what| {
            matches!(what, Happening::Transition { rail: r, cause: Cause::By(b), to: RailState::Active, .. }
                if *r == rail.id && *b == by)
        })?;
        self.wait_for(
            &format!("{} available", rail.name),
            |what| matches!(what, Happening::Available { rail: r, available: true } if *r == rail.id),
        )
    }

    fn wait_for(&mut self, what: &str, done: impl Fn(&Happening) -> bool) -> Result<(), Box<dyn Error>> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let note = self.notes.recv_timeout(left).map_err(|_| format!("timed out waiting for {what}"))?;
            self.print(&note);
            if done(&note.what) {
                return Ok(());
            }
        }
    }

    fn drain_pending(&mut self) {
        while let Ok(note) = self.notes.try_recv() {
            self.print(&note);
        }
    }

    fn print(&self, note: &Notification) {
        let name = |id: &RailId| self.names.get(id).map_or("?", String::as_str);
        let dev_name = |d: &u32| self.devices.get(*d as usize).map_or("?", String::as_str);
        let line = match &note.what {
            // One line per drain instead of one per event.
            Happening::Event { .. } => return,
            Happening::Drain { device, events, errno: None } => {
                format!("{}: drained {events} event(s)", dev_name(device))
            }
            Happening::Drain { device, events, errno: Some(e) } => {
                format!("{}: read error (errno {e}) after {events} event(s); polling instead", dev_name(device))
            }
            Happening::Transition { rail, from, to, cause, generation } => {
                let why = match cause {
                    Cause::Reason(r) => r.name().to_string(),
                    Cause::By(b) => format!("by {}", b.name()),
                    Cause::Bump(k) => k.name().to_string(),
                    Cause::SilentFlap => "silent flap".to_string(),
                };
                format!("{}: {from} → {to} ({why}), generation {generation}", name(rail))
            }
            Happening::Reseed { rail, from, to } => {
                let from = from.map_or("unseeded".to_string(), |f| f.to_string());
                format!("{}: bandwidth re-seeded {from} → {to}", name(rail))
            }
            Happening::Available { rail, available } => {
                format!("{}: {}", name(rail), if *available { "available" } else { "unavailable" })
            }
            Happening::AddressChanged { rail, generation } => {
                format!("{}: address changed, generation {generation}: rebuild endpoints", name(rail))
            }
            Happening::WorkLost { device, scope } => {
                format!("{}: {} work lost ({scope:?}): fail it now", dev_name(device), scope.name())
            }
            Happening::PeerFailing { rail, peer } => {
                format!("{}: transfers through peer {peer} fail, through no other: kept", name(rail))
            }
            Happening::HalfOpen { rail } => format!("{}: half-open, one probe may go", name(rail)),
            Happening::ProbeFailed { rail, timed_out } => {
                format!("{}: probe failed{}", name(rail), if *timed_out { " (timed out)" } else { "" })
            }
            Happening::GidIndex { rail, index } => format!("{}: endpoints use GID index {index}", name(rail)),
        };
        // `note.t` is the monitor's clock: milliseconds since its
        // `SystemClock` was created, just before the monitor was.
        println!("{:>8}  {line}", note.t.to_string());
    }
}
