//! What the replay tests share: a seeded generator of random valid
//! scenarios, a run recorded as `simulate --record` records it, its
//! replay, and the comparison of their transitions.

#![allow(dead_code)] // each test file uses part of it

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use railwatch_core::Millis;
use railwatch_runtime::Happening;
use railwatch_runtime::lines::{Names, Record};
use railwatch_scenario::Scenario;
use railwatch_scenario::driver::{self, RunOptions};
use railwatch_scenario::record::{RecordOptions, Recorder};

/// One transition: when, and what (rail, from, to, cause, generation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    /// Its time.
    pub t: u64,
    /// `mlx5_0/1 active->paused port_err g1`.
    pub what: String,
    /// Whether it follows a device's re-open (whose jitter a replay draws
    /// anew), or is an attach after one.
    pub after_reopen: bool,
}

fn transition(names: &Names, record: &Record<'_>) -> Option<(u64, String, bool)> {
    let Record::Note(n) = record else { return None };
    let Happening::Transition { rail, from, to, cause, generation } = n.what else { return None };
    let what = format!("{} {}->{} {} g{generation}", names.rail(rail), from.name(), to.name(), cause.name());
    Some((n.t.0, what, cause.name() == "attach"))
}

/// Collects transitions; once a rail's device re-opened, its later times
/// may differ by the jitter.
#[derive(Default)]
struct Collector {
    out: Vec<Transition>,
    reopened: std::collections::HashSet<String>,
}

impl Collector {
    fn take(&mut self, names: &Names, record: &Record<'_>) {
        if let Some((t, what, attach)) = transition(names, record) {
            let device = what.split('/').next().unwrap_or("").to_owned();
            // An attach after the start is a re-open (or a plug).
            if attach && t > 0 {
                self.reopened.insert(device.clone());
            }
            let after_reopen = self.reopened.contains(&device);
            self.out.push(Transition { t, what, after_reopen });
        }
    }
}

fn options(sc: &Scenario) -> RecordOptions {
    RecordOptions {
        recorded_by: "a test".into(),
        name: "recorded".into(),
        description: None,
        config: driver::config(sc, &RunOptions::default()),
        notes: vec![],
        anonymize: false,
    }
}

/// What `simulate --record` does with each record: collects the
/// transitions, flushes the recording as virtual time moves, and tells it
/// before the first instant that the start is over.
struct RecordingSink {
    live: Collector,
    recorder: Arc<Mutex<Recorder>>,
    last_flush: Option<Millis>,
    started: bool,
}

impl driver::Sink for RecordingSink {
    fn record(&mut self, names: &Names, record: Record<'_>) {
        self.live.take(names, &record);
        if let Record::Note(n) = record {
            if self.last_flush != Some(n.t) {
                self.last_flush = Some(n.t);
                self.recorder.lock().unwrap().flush(n.t).unwrap();
            }
        }
    }

    fn before_instant(&mut self, _t: u64, _monitor: &driver::SimMonitor) {
        if !std::mem::replace(&mut self.started, true) {
            self.recorder.lock().unwrap().started();
        }
    }
}

/// Runs `sc` with a recorder flushing as time moves; its transitions and
/// the recording's path.
pub fn record(sc: &Scenario, dir: &Path) -> (Vec<Transition>, PathBuf) {
    let path = dir.join(format!("{}.recorded.toml", sc.name));
    let mut recorder = Recorder::create(&path, &options(sc)).unwrap();
    // As `simulate --record` records.
    recorder.on_virtual_time();
    let recorder = Arc::new(Mutex::new(recorder));
    let observer: railwatch_runtime::Observer = {
        let r = recorder.clone();
        let dump = std::env::var_os("RAILWATCH_REPLAY_DUMP").is_some();
        Box::new(move |now: Millis, what: railwatch_runtime::Observed<'_>| {
            if dump {
                eprintln!("observed {:>6} {what:?}", now.0);
            }
            r.lock().unwrap().observe(now, what)
        })
    };
    let mut sink =
        RecordingSink { live: Collector::default(), recorder: recorder.clone(), last_flush: None, started: false };
    let summary = driver::run_with(sc, &RunOptions::default(), Some(observer), &mut sink).unwrap();
    let live = sink.live;
    let mut r = recorder.lock().unwrap();
    r.flush(summary.snapshot.t).unwrap();
    r.finish(summary.snapshot.t, &summary.snapshot).unwrap();
    (live.out, path)
}

/// The transitions of the recording at `path`, replayed; a recording that
/// does not load is a transition list saying so.
pub fn replay(path: &Path) -> Vec<Transition> {
    let sc = match Scenario::load(path) {
        Ok(sc) => sc,
        Err(e) => {
            return vec![Transition { t: 0, what: format!("the recording does not load: {e}"), after_reopen: false }];
        }
    };
    let mut replayed = Collector::default();
    let observer: Option<railwatch_runtime::Observer> = std::env::var_os("RAILWATCH_REPLAY_DUMP").map(|_| {
        Box::new(|now: Millis, what: railwatch_runtime::Observed<'_>| {
            eprintln!("replay-observed {:>6} {what:?}", now.0)
        }) as railwatch_runtime::Observer
    });
    let summary =
        driver::run_observed(&sc, &RunOptions::default(), observer, |names, record| replayed.take(names, &record))
            .unwrap();
    for e in summary.expectations.iter().filter(|e| !e.passed) {
        replayed.out.push(Transition {
            t: e.at_ms,
            what: format!("expectation failed: {}", e.detail),
            after_reopen: true,
        });
    }
    replayed.out
}

/// How the replay differs from the live run, if it does: the first
/// transition that is not the same (what, or when, where the time is not
/// one a re-open's jitter may move).
pub fn differ(live: &[Transition], replayed: &[Transition]) -> Option<String> {
    for (i, (a, b)) in live.iter().zip(replayed).enumerate() {
        let same_time = a.t == b.t || (a.after_reopen && b.after_reopen);
        if a.what != b.what || !same_time {
            return Some(format!("transition {i}: live {} at {} ms, replayed {} at {} ms", a.what, a.t, b.what, b.t));
        }
    }
    if live.len() != replayed.len() {
        let (longer, which) = if live.len() > replayed.len() { (live, "live") } else { (replayed, "replayed") };
        let extra = &longer[live.len().min(replayed.len())];
        return Some(format!(
            "{} live transitions, {} replayed; the first extra ({which}): {} at {} ms",
            live.len(),
            replayed.len(),
            extra.what,
            extra.t
        ));
    }
    None
}

/// [`differ`], with the recording at `path` after it: what a failing case
/// prints.
pub fn differ_shown(live: &[Transition], replayed: &[Transition], path: &Path) -> Option<String> {
    let diff = differ(live, replayed)?;
    Some(format!("{diff}\n--- recording\n{}", std::fs::read_to_string(path).unwrap()))
}

/// Fails unless `failures` is empty: how many of `cases` differ, the first
/// line of up to `listed` of them, and the first whole.
pub fn assert_none_differ(failures: &[String], cases: usize, listed: usize) {
    let heads: Vec<&str> = failures.iter().take(listed).filter_map(|f| f.lines().next()).collect();
    assert!(
        failures.is_empty(),
        "{} of {cases} cases differ:\n{}\nthe first:\n{}",
        failures.len(),
        heads.join("\n"),
        failures[0]
    );
}

/// A small seeded generator (xorshift64*).
pub struct Gen {
    state: u64,
}

/// What the generator knows of a device while writing steps.
struct Dev {
    name: String,
    ports: Vec<u8>,
    present: bool,
    removed: bool,
    gids: bool,
    counters: bool,
    link_downed: Vec<u64>,
    /// The ports with a netdev carrier.
    carriers: Vec<u8>,
}

impl Gen {
    /// The generator for `seed`.
    pub fn new(seed: u64) -> Gen {
        Gen { state: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1 }
    }

    fn next(&mut self) -> u64 {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// True with `percent` % chance.
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, T>(&mut self, of: &'a [T]) -> &'a T {
        &of[self.below(of.len() as u64) as usize]
    }

    /// A random valid scenario, as TOML. The netdev carriers are drawn from
    /// a stream of their own, so every seed's other draws stay what they
    /// were before carriers existed (its regressions still reproduce).
    pub fn scenario(&mut self) -> String {
        let mut side = Gen { state: (self.state ^ 0xD1B5_4A32_D192_ED03) | 1 };
        let mut s = String::new();
        if side.chance(50) {
            let _ = writeln!(s, "port_witness = \"{}\"", side.pick(&["port", "carrier", "both"]));
        }
        let duration = 2000 + self.below(6000);
        let _ = writeln!(s, "duration_ms = {duration}");
        let _ = writeln!(s, "tick_ms = {}", self.pick(&[50, 100, 250, 1000]));
        if self.chance(30) {
            let _ = writeln!(s, "audit_ms = {}", self.pick(&[100, 300, 1000]));
        }
        if self.chance(25) {
            let _ = writeln!(s, "settle_ms = {}", self.pick(&[20, 150, 500]));
        }
        let _ = writeln!(s, "reopen_initial_ms = {}", self.pick(&[100, 300, 1000]));
        if self.chance(25) {
            let _ = writeln!(s, "silent_flaps = false");
        }
        let require = self.chance(20).then(|| *self.pick(&["any", "roce_v2", "roce_v2_ipv4"]));
        if let Some(r) = require {
            let _ = writeln!(s, "require_address = \"{r}\"");
        }
        match self.below(4) {
            0 => {
                let _ = writeln!(s, "data_path = false");
            }
            1 => {
                let _ = writeln!(
                    s,
                    "[data_path]\nfailures = {}\nmin_peers = {}\nbackoff_initial_ms = {}",
                    1 + self.below(4),
                    1 + self.below(2),
                    self.pick(&[100, 500])
                );
            }
            _ => {}
        }
        if self.chance(30) {
            let _ = writeln!(s, "[damping]\nhalf_life_ms = {}", self.pick(&[500, 2000, 15000]));
        }
        let mut devs = self.devices(&mut s, require.is_some(), &mut side);
        let steps = self.below(16);
        let mut t = 0;
        for _ in 0..steps {
            t += self.pick(&[0, 1, 5, 40, 100, 300, 700, 1500]);
            if t > duration {
                break;
            }
            let d = self.below(devs.len() as u64) as usize;
            if !devs[d].carriers.is_empty() && side.chance(20) {
                let port = *side.pick(&devs[d].carriers);
                let state = side.pick(&["up", "down"]);
                let silent = if side.chance(30) { ", notify = false" } else { "" };
                let _ = writeln!(
                    s,
                    "\n[[step]]\nat_ms = {t}\ndevice = \"{}\"\ncarrier = {{ port = {port}, state = \"{state}\"{silent} }}",
                    devs[d].name
                );
            }
            self.step(&mut s, t, &mut devs[d]);
        }
        s
    }

    fn devices(&mut self, s: &mut String, need_gids: bool, side: &mut Gen) -> Vec<Dev> {
        let n = 1 + self.below(3);
        let mut devs = Vec::new();
        for i in 0..n {
            let name = format!("{}_{i}", self.pick(&["mlx5", "rxe"]));
            let ports: Vec<u8> = (1..=1 + self.below(2) as u8).collect();
            let present = i == 0 || self.chance(80);
            let gids = need_gids || self.chance(50);
            let counters = self.chance(40);
            let _ = writeln!(s, "\n[[device]]\nname = \"{name}\"");
            if !present {
                let _ = writeln!(s, "present = false");
            }
            let _ = write!(s, "ports = [");
            let mut carriers = Vec::new();
            for p in &ports {
                let state = if self.chance(80) { "active" } else { *self.pick(&["down", "init", "armed"]) };
                let speed = self.pick(&["hdr", "ndr", "edr"]);
                let _ = write!(s, "{{ port = {p}, state = \"{state}\", speed = \"{speed}\", width = \"4x\"");
                if gids {
                    let addr = if self.chance(50) { "::ffff:10.0.0.1" } else { "fe80::1" };
                    let _ = write!(s, ", gids = [{{ index = 0, address = \"{addr}\" }}]");
                }
                if counters {
                    let _ = write!(s, ", counters = {{ link_downed = 0 }}");
                }
                if side.chance(40) {
                    let _ = write!(s, ", carrier = \"{}\"", if side.chance(85) { "up" } else { "down" });
                    carriers.push(*p);
                }
                let _ = write!(s, " }}, ");
            }
            let _ = writeln!(s, "]");
            let link_downed = vec![0; ports.len()];
            devs.push(Dev { name, ports, present, removed: false, gids, counters, link_downed, carriers });
        }
        devs
    }

    fn step(&mut self, s: &mut String, t: u64, d: &mut Dev) {
        let port = *self.pick(&d.ports);
        let _ = write!(s, "\n[[step]]\nat_ms = {t}\ndevice = \"{}\"\n", d.name);
        match self.below(17) {
            0 | 1 => {
                let _ = writeln!(
                    s,
                    "port_state = {{ port = {port}, state = \"down\" }}\nevent = \"port_err\"\nport = {port}"
                );
            }
            2 | 3 => {
                let _ = writeln!(s, "port_state = {{ port = {port}, state = \"active\" }}");
                if self.chance(60) {
                    let _ = writeln!(s, "event = \"port_active\"\nport = {port}");
                }
            }
            4 => {
                let state = self.pick(&["down", "init", "armed", "active_defer"]);
                let _ = writeln!(s, "port_state = {{ port = {port}, state = \"{state}\" }}");
            }
            5 => {
                let speed = self.pick(&["hdr", "ndr", "edr", "fdr"]);
                let width = self.pick(&["1x", "2x", "4x"]);
                let _ = writeln!(s, "link = {{ port = {port}, speed = \"{speed}\", width = \"{width}\" }}");
                if self.chance(60) {
                    let _ = writeln!(s, "event = \"device_speed_change\"");
                }
            }
            6 if d.gids => {
                let addr = self.pick(&["fe80::1", "fe80::2", "::ffff:10.0.0.2"]);
                let index = self.below(2);
                let _ = writeln!(s, "gid = {{ port = {port}, index = {index}, address = \"{addr}\" }}");
                if self.chance(70) {
                    let _ = writeln!(s, "event = \"gid_change\"\nport = {port}");
                }
            }
            7 if d.counters => {
                let i = d.ports.iter().position(|p| *p == port).unwrap();
                d.link_downed[i] += 1 + self.below(2);
                let _ = writeln!(s, "counters = {{ port = {port}, link_downed = {} }}", d.link_downed[i]);
            }
            8 => {
                let status =
                    self.pick(&["success", "retry_exc_err", "loc_qp_op_err", "rem_access_err", "wr_flush_err"]);
                let _ = writeln!(
                    s,
                    "transfers = {{ port = {port}, peer = {}, status = \"{status}\", count = {} }}",
                    self.below(3),
                    1 + self.below(10)
                );
            }
            9 => {
                let _ = writeln!(
                    s,
                    "fault = \"eintr\"\ncount = {}\nevent = \"lid_change\"\nport = {port}",
                    1 + self.below(3)
                );
            }
            10 if !d.removed => {
                let _ = writeln!(s, "fault = \"{}\"", self.pick(&["eio", "ebadf"]));
            }
            11 if !d.removed && d.present => {
                if self.chance(50) {
                    let _ = writeln!(s, "event = \"device_fatal\"\n\n[[step]]\nat_ms = {t}\ndevice = \"{}\"", d.name);
                }
                let _ = writeln!(s, "fault = \"remove\"");
                d.removed = true;
            }
            12 if d.removed => {
                let _ = writeln!(s, "fault = \"restore\"");
                d.removed = false;
            }
            13 if d.present => {
                let _ = writeln!(s, "fault = \"unplug\"");
                d.present = false;
            }
            14 if !d.present => {
                let _ = writeln!(s, "fault = \"plug\"");
                d.present = true;
            }
            15 => {
                let (event, repeat) =
                    *self.pick(&[("comm_est", 64), ("cq_err", 1), ("sm_change", 1), ("client_reregister", 1)]);
                let _ = write!(s, "event = \"{event}\"\nrepeat = {repeat}\n");
                if matches!(event, "sm_change" | "client_reregister") {
                    let _ = writeln!(s, "port = {port}");
                }
            }
            _ => {
                let _ = writeln!(s, "event = 99");
            }
        }
    }
}
