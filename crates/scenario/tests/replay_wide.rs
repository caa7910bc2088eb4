//! Recordings replay exactly, checked by a second, independent generator
//! of random valid scenarios (`replay_props.rs` has the first): several
//! devices of up to three ports (numbered with gaps), some absent at the
//! start, every setting (tick, settle, audit, damping with its knobs, the
//! breaker with its knobs, `require_address`, the drain budget, the re-open
//! backoff and jitter), and steps in **clusters**: many steps in one
//! millisecond across devices, steps that combine several changes, events
//! of every scope (bursts with `repeat` past the drain budget, object
//! events, raw codes, events that contradict the port), every fault
//! (`eintr`, `eio`, `ebadf`, `remove` loud or silent, `restore`, `unplug`,
//! `plug`, also where they change nothing) and expectations that only add
//! instants. Each is recorded as `simulate --record` records and replayed:
//! the same transitions (rail, from, to, cause, generation) in order, at
//! the same times but where a re-open's jitter is drawn anew.
//!
//! `RAILWATCH_WIDE_CASES` sets the number of cases (default 300, about 8 s
//! in debug; `cargo xtask props` runs a tenth of its cases, 10,000 by
//! default, in release), `RAILWATCH_WIDE_SEED` the first seed;
//! `RAILWATCH_WIDE_WRITE=DIR` writes each failing case's scenario to
//! `DIR/wide-SEED.toml`. A failing case prints its seed, its scenario and
//! its recording. To study one: `RAILWATCH_WIDE_SHRINK=FILE` makes it
//! smaller, `RAILWATCH_WIDE_ONE=FILE` prints both runs (with
//! `RAILWATCH_REPLAY_DUMP`, every input each monitor saw).

mod common;

use std::fmt::Write as _;

use common::{record, replay};
use railwatch_scenario::Scenario;

fn env_u64(key: &str, default: u64) -> u64 {
    std::env::var(key).ok().and_then(|v| v.replace('_', "").parse().ok()).unwrap_or(default)
}

#[test]
fn wide_random_scenarios_replay_from_their_recordings() {
    let dir = tempfile::tempdir().unwrap();
    let write = std::env::var_os("RAILWATCH_WIDE_WRITE").map(std::path::PathBuf::from);
    let (first, n) = (env_u64("RAILWATCH_WIDE_SEED", 1), env_u64("RAILWATCH_WIDE_CASES", 300));
    let mut failures = Vec::new();
    for seed in first..first + n {
        let text = Wide::new(seed).scenario();
        let sc = Scenario::parse(&text, &format!("wide-{seed}.toml"))
            .unwrap_or_else(|e| panic!("seed {seed}: the generator wrote an invalid scenario: {e}\n{text}"));
        let (live, path) = record(&sc, dir.path());
        let replayed = replay(&path);
        if let Some(diff) = common::differ_shown(&live, &replayed, &path) {
            if let Some(dir) = &write {
                std::fs::write(dir.join(format!("wide-{seed}.toml")), &text).unwrap();
            }
            failures.push(format!("seed {seed}: {diff}\n--- scenario\n{text}"));
        }
    }
    common::assert_none_differ(&failures, n as usize, 40);
}

/// The generator is deterministic: a seed is a scenario, so a failing
/// seed can be written out and kept.
#[test]
fn a_seed_is_always_the_same_scenario() {
    for seed in [1, 2, 77, u64::MAX] {
        assert_eq!(Wide::new(seed).scenario(), Wide::new(seed).scenario());
    }
    assert_ne!(Wide::new(1).scenario(), Wide::new(2).scenario());
}

/// A seeded generator (splitmix64, unlike `common::Gen`).
struct Wide {
    state: u64,
}

/// What the generator knows of a device while it writes steps: enough to
/// make most faults meaningful (a few are not, on purpose).
struct Dev {
    name: String,
    ports: Vec<u8>,
    listed: bool,
    removed: bool,
    /// A read error made it poll-only (until it is re-opened).
    polled: bool,
    gids: bool,
    counters: Vec<[u64; 3]>,
}

const STATES: [&str; 6] = ["down", "init", "armed", "active", "active_defer", "active"];
const SPEEDS: [&str; 9] = ["sdr", "ddr", "qdr", "fdr10", "fdr", "edr", "hdr", "ndr", "xdr"];
const WIDTHS: [&str; 5] = ["1x", "2x", "4x", "8x", "12x"];
const ADDRESSES: [&str; 6] = ["fe80::1", "fe80::2", "fe80::3", "::ffff:10.0.0.1", "::ffff:10.0.0.2", "2001:db8::9"];
const STATUSES: [&str; 7] =
    ["success", "success", "retry_exc_err", "loc_qp_op_err", "rem_access_err", "rnr_retry_exc_err", "wr_flush_err"];
/// Port events, and how often each is picked.
const PORT_EVENTS: [&str; 9] = [
    "port_err",
    "port_active",
    "port_active",
    "lid_change",
    "gid_change",
    "pkey_change",
    "sm_change",
    "client_reregister",
    "port_err",
];
const OBJECT_EVENTS: [&str; 8] =
    ["cq_err", "qp_fatal", "qp_req_err", "qp_access_err", "comm_est", "srq_err", "path_mig", "qp_last_wqe_reached"];

impl Wide {
    fn new(seed: u64) -> Wide {
        Wide { state: seed ^ 0x5DEE_CE66_D1CE_4E5B }
    }

    fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<T: Copy>(&mut self, of: &[T]) -> T {
        of[self.below(of.len() as u64) as usize]
    }

    fn scenario(&mut self) -> String {
        let mut s = String::from("name = \"wide\"\n");
        let duration = 300 + self.below(5000);
        let _ = writeln!(s, "duration_ms = {duration}");
        let require = self.settings(&mut s);
        let mut devs = self.devices(&mut s, require);
        let mut t = 0;
        for _ in 0..self.below(20) {
            t += self.pick(&[0, 0, 1, 1, 2, 3, 9, 30, 49, 50, 51, 100, 170, 400, 1100]);
            if t > duration {
                break;
            }
            // A cluster: several steps in one millisecond, across devices,
            // random ones or an incident's usual shapes.
            for _ in 0..1 + self.below(5) {
                let d = self.below(devs.len() as u64) as usize;
                if self.chance(25) {
                    self.shape(&mut s, t, &mut devs[d]);
                } else {
                    self.step(&mut s, t, &mut devs[d]);
                }
            }
        }
        for _ in 0..self.below(3) {
            let d = &devs[self.below(devs.len() as u64) as usize];
            let port = d.ports[0];
            let _ = writeln!(
                s,
                "\n[[expect]]\nat_ms = {}\nrail = \"{}/{port}\"\nstate = \"active\"",
                self.below(duration + 1),
                d.name
            );
        }
        s
    }

    /// The settings; says whether addresses are required.
    fn settings(&mut self, s: &mut String) -> bool {
        let tick = self.pick(&[1, 3, 10, 50, 100, 250, 1000]);
        let _ = writeln!(s, "tick_ms = {tick}");
        if self.chance(40) {
            let _ = writeln!(s, "audit_ms = {}", self.pick(&[1, 17, 100, 450]));
        }
        if self.chance(40) {
            let _ = writeln!(s, "settle_ms = {}", self.pick(&[0, 1, 25, 120, 600]));
        }
        if self.chance(20) {
            let _ = writeln!(s, "explain_every_ms = {}", self.pick(&[0, 10, 500]));
        }
        let initial = self.pick(&[1, 10, 50, 200, 900]);
        let _ = writeln!(s, "reopen_initial_ms = {initial}");
        if self.chance(50) {
            let _ = writeln!(s, "reopen_max_ms = {}", initial * self.pick(&[1, 2, 8]));
        }
        if self.chance(50) {
            let _ = writeln!(s, "reopen_jitter_pct = {}", self.pick(&[0, 5, 20, 100]));
        }
        if self.chance(30) {
            let _ = writeln!(s, "drain_budget = {}", self.pick(&[1, 2, 5, 16]));
        }
        if self.chance(30) {
            let _ = writeln!(s, "silent_flaps = {}", self.chance(50));
        }
        let require = self.pick(&["none", "none", "none", "any", "roce_v2", "roce_v2_ipv4", "ib"]);
        if require != "none" || self.chance(10) {
            let _ = writeln!(s, "require_address = \"{require}\"");
        }
        match self.below(5) {
            0 => {
                let _ = writeln!(s, "data_path = false");
            }
            1 | 2 => {
                let backoff = self.pick(&[1, 20, 300]);
                let _ = writeln!(
                    s,
                    "[data_path]\nfailures = {}\nwindow_ms = {}\nmin_peers = {}\nbackoff_initial_ms = {backoff}\n\
                     backoff_max_ms = {}",
                    1 + self.below(5),
                    self.pick(&[5, 200, 10000]),
                    1 + self.below(3),
                    backoff * self.pick(&[1, 4])
                );
            }
            _ => {}
        }
        if self.chance(35) {
            // reuse < suppress <= max_penalty.
            let reuse = self.pick(&[100, 750, 1500]);
            let suppress = reuse + self.pick(&[1, 1000, 2000]);
            let _ = writeln!(
                s,
                "[damping]\npenalty_per_flap = {}\nsuppress = {suppress}\nreuse = {reuse}\nhalf_life_ms = {}\n\
                 max_penalty = {}",
                self.pick(&[500, 1000, 2600]),
                self.pick(&[1, 90, 700, 15000]),
                suppress + self.pick(&[0, 3000])
            );
        }
        require != "none"
    }

    fn devices(&mut self, s: &mut String, need_gids: bool) -> Vec<Dev> {
        let mut devs = Vec::new();
        for i in 0..1 + self.below(4) {
            let name = format!("{}{i}", self.pick(&["mlx5_", "rxe", "irdma"]));
            let mut ports: Vec<u8> = match self.below(4) {
                0 => vec![1],
                1 => vec![1, 2],
                2 => vec![1, 2, 3],
                _ => vec![1, self.pick(&[3, 7, 255])],
            };
            if self.chance(10) {
                ports.reverse();
            }
            let listed = self.chance(80);
            let gids = need_gids && self.chance(85) || self.chance(45);
            let _ = writeln!(s, "\n[[device]]\nname = \"{name}\"");
            if !listed {
                let _ = writeln!(s, "present = false");
            }
            let _ = writeln!(s, "ports = [");
            let mut counters = Vec::new();
            for &p in &ports {
                let state = if self.chance(75) { "active" } else { self.pick(&STATES) };
                let _ = write!(
                    s,
                    "  {{ port = {p}, state = \"{state}\", speed = \"{}\", width = \"{}\"",
                    self.pick(&SPEEDS),
                    self.pick(&WIDTHS)
                );
                if self.chance(15) {
                    let _ = write!(s, ", effective_mbps = {}", self.pick(&[100, 25000, 400000]));
                }
                if gids && self.chance(85) {
                    let _ = write!(s, ", gids = [{{ index = 0, address = \"{}\" }}", self.pick(&ADDRESSES));
                    if self.chance(30) {
                        let _ = write!(s, ", {{ index = 3, address = \"{}\" }}", self.pick(&ADDRESSES));
                    }
                    s.push(']');
                }
                let c = [self.below(3), self.below(3), self.below(3)];
                if self.chance(45) {
                    let _ = write!(s, ", counters = {{ link_downed = {}, carrier_changes = {} }}", c[0], c[1]);
                }
                counters.push(c);
                s.push_str(" },\n");
            }
            s.push_str("]\n");
            devs.push(Dev { name, ports, listed, removed: false, polled: false, gids, counters });
        }
        devs
    }

    fn step(&mut self, s: &mut String, t: u64, d: &mut Dev) {
        let _ = write!(s, "\n[[step]]\nat_ms = {t}\ndevice = \"{}\"\n", d.name);
        let port = self.pick(&d.ports);
        // What the step changes silently (possibly several), then a fault,
        // an event and transfers; at least one of them.
        let mut did = false;
        if self.chance(30) {
            let _ = writeln!(s, "port_state = {{ port = {port}, state = \"{}\" }}", self.pick(&STATES));
            did = true;
        }
        if self.chance(12) {
            let _ = write!(s, "link = {{ port = {port}, speed = \"{}\", width = \"{}\"", self.pick(&SPEEDS), {
                self.pick(&WIDTHS)
            });
            if self.chance(20) {
                let _ = write!(s, ", effective_mbps = {}", self.pick(&[200, 100000]));
            }
            s.push_str(" }\n");
            did = true;
        }
        if (d.gids || self.chance(5)) && self.chance(20) {
            let index = self.pick(&[0, 0, 1, 3]);
            if self.chance(20) {
                let _ = writeln!(s, "gid = {{ port = {port}, index = {index} }}");
            } else {
                let _ = writeln!(s, "gid = {{ port = {port}, index = {index}, address = \"{}\" }}", {
                    self.pick(&ADDRESSES)
                });
            }
            did = true;
        }
        if self.chance(12) {
            let i = d.ports.iter().position(|p| *p == port).unwrap_or(0);
            let c = &mut d.counters[i];
            let k = self.below(3) as usize;
            c[k] = if self.chance(10) { 0 } else { c[k] + 1 + self.below(2) };
            let c = *c;
            let _ = writeln!(
                s,
                "counters = {{ port = {port}, link_downed = {}, carrier_changes = {}, carrier_down = {} }}",
                c[0], c[1], c[2]
            );
            did = true;
        }
        if self.chance(22) {
            self.fault(s, d);
            did = true;
        }
        if self.chance(55) || !did {
            self.event(s, d, port);
            did = true;
        }
        if self.chance(10) || !did {
            let _ = writeln!(
                s,
                "transfers = {{ port = {port}, peer = {}, status = \"{}\", count = {} }}",
                self.below(4),
                self.pick(&STATUSES),
                1 + self.below(12)
            );
        }
    }

    /// One of an incident's usual shapes, as steps of one device in the
    /// millisecond `t`: a RoCE link-up (the port ACTIVE, `PORT_ACTIVE` and
    /// a GID change, with or without `GID_CHANGE`, in either order), a flap,
    /// a loud removal, a read error followed by what then happens to the
    /// device (now only polled), or a GID change no event tells of.
    fn shape(&mut self, s: &mut String, t: u64, d: &mut Dev) {
        let port = self.pick(&d.ports);
        let head = format!("\n[[step]]\nat_ms = {t}\ndevice = \"{}\"\n", d.name);
        let gid = format!("gid = {{ port = {port}, index = 0, address = \"{}\" }}\n", self.pick(&ADDRESSES));
        let up =
            format!("port_state = {{ port = {port}, state = \"active\" }}\nevent = \"port_active\"\nport = {port}\n");
        match self.below(6) {
            0 => {
                let announce =
                    if self.chance(60) { format!("event = \"gid_change\"\nport = {port}\n") } else { String::new() };
                if self.chance(50) {
                    let _ = write!(s, "{head}{up}{head}{gid}{announce}");
                } else {
                    let _ = write!(s, "{head}{gid}{announce}{head}{up}");
                }
            }
            1 => {
                let _ = write!(
                    s,
                    "{head}port_state = {{ port = {port}, state = \"down\" }}\nevent = \"port_err\"\nport = {port}\n"
                );
                if self.chance(50) {
                    let _ = write!(s, "{head}{up}");
                }
            }
            2 if !d.removed && d.listed => {
                let _ = write!(s, "{head}event = \"device_fatal\"\n{head}fault = \"remove\"\n");
                d.removed = true;
            }
            3 => {
                d.polled = true;
                let _ = writeln!(s, "{head}fault = \"{}\"", self.pick(&["eio", "ebadf"]));
                // What happens next to the device, now only polled.
                let then = self.pick(&["remove", "unplug", "restore", "plug", "none"]);
                if then != "none" {
                    let _ = writeln!(s, "{head}fault = \"{then}\"");
                }
                match then {
                    "remove" => d.removed = true,
                    "unplug" => d.listed = false,
                    "plug" | "restore" => d.removed = false,
                    _ => {}
                }
                if then == "plug" {
                    d.listed = true;
                }
            }
            4 => {
                let _ = write!(s, "{head}{gid}");
            }
            _ => {
                let _ = write!(s, "{head}{gid}event = \"lid_change\"\nport = {port}\n{head}{up}");
            }
        }
    }

    fn fault(&mut self, s: &mut String, d: &mut Dev) {
        // A device only polled (after a read error) goes away or comes
        // back more often: the tick, not its fd, notices.
        let pick = if d.polled && self.chance(60) { 4 + self.below(7) } else { self.below(12) };
        let fault = match pick {
            0 | 1 => {
                let _ = writeln!(s, "fault = \"eintr\"\ncount = {}", 1 + self.below(4));
                return;
            }
            2 | 3 => {
                d.polled = true;
                self.pick(&["eio", "ebadf"])
            }
            4 | 5 if !d.removed && d.listed => {
                d.removed = true;
                "remove"
            }
            6 | 7 if d.removed => {
                d.removed = false;
                "restore"
            }
            8 if d.listed => {
                d.listed = false;
                "unplug"
            }
            9 | 10 if !d.listed => {
                d.listed = true;
                d.removed = false;
                d.polled = false;
                "plug"
            }
            // Where it changes nothing, or nothing the generator tracks.
            _ => self.pick(&["restore", "plug", "remove", "unplug"]),
        };
        let _ = writeln!(s, "fault = \"{fault}\"");
    }

    fn event(&mut self, s: &mut String, d: &Dev, port: u8) {
        match self.below(10) {
            0..=4 => {
                let _ = writeln!(s, "event = \"{}\"\nport = {port}", self.pick(&PORT_EVENTS));
            }
            5 => {
                let event = self.pick(&["device_fatal", "device_speed_change", "device_speed_change"]);
                let _ = writeln!(s, "event = \"{event}\"");
            }
            6 | 7 => {
                let _ = writeln!(
                    s,
                    "event = \"{}\"\nobject = {}",
                    self.pick(&OBJECT_EVENTS),
                    self.pick(&[0u64, 0x7f00, 0x7f08, 0xdead_beef])
                );
            }
            8 => {
                let _ = writeln!(s, "event = \"comm_est\"\nobject = 0x7f00");
            }
            _ => match self.below(3) {
                0 => {
                    let _ = writeln!(s, "event = {}", self.pick(&[99, 40000]));
                }
                1 => {
                    let _ = writeln!(s, "event = \"99\"\nport = {}", d.ports[0]);
                }
                _ => {
                    let _ = writeln!(s, "event = 99\nobject = 12");
                }
            },
        }
        if self.chance(25) {
            let _ = writeln!(s, "repeat = {}", self.pick(&[2, 3, 17, 300]));
        }
    }
}

/// `RAILWATCH_WIDE_SHRINK=FILE`: a scenario whose recording replays
/// differently, made smaller while it still does (steps, expectations and
/// lines of steps taken out one at a time), written to `FILE.min.toml`.
#[test]
fn shrink_when_asked() {
    let Some(file) = std::env::var_os("RAILWATCH_WIDE_SHRINK").map(std::path::PathBuf::from) else { return };
    let dir = tempfile::tempdir().unwrap();
    let differs = |text: &str| -> Option<String> {
        let sc = Scenario::parse(text, "shrink.toml").ok()?;
        let (live, path) = record(&sc, dir.path());
        common::differ(&live, &replay(&path))
    };
    let mut blocks: Vec<String> = Vec::new();
    for (i, part) in std::fs::read_to_string(&file).unwrap().split("\n[[").enumerate() {
        blocks.push(if i == 0 { part.to_owned() } else { format!("\n[[{part}") });
    }
    let text = |b: &[String]| b.concat();
    assert!(differs(&text(&blocks)).is_some(), "{} replays the same", file.display());
    loop {
        let before = blocks.clone();
        let mut i = blocks.len();
        while i > 1 {
            i -= 1;
            if blocks[i].starts_with("\n[[device]]") {
                continue;
            }
            let mut fewer = blocks.clone();
            fewer.remove(i);
            if differs(&text(&fewer)).is_some() {
                blocks = fewer;
                continue;
            }
            let lines: Vec<String> = blocks[i].lines().map(str::to_owned).collect();
            for j in (0..lines.len()).rev() {
                let keep = ["[[", "at_ms", "device ="];
                if keep.iter().any(|k| lines[j].starts_with(k)) || lines[j].is_empty() {
                    continue;
                }
                let mut one = blocks.clone();
                let current: Vec<&str> = one[i].lines().collect();
                let Some(pos) = current.iter().position(|l| *l == lines[j].as_str()) else { continue };
                let mut rest = current.clone();
                rest.remove(pos);
                one[i] = format!("{}\n", rest.join("\n"));
                if differs(&text(&one)).is_some() {
                    blocks = one;
                }
            }
        }
        if blocks == before {
            break;
        }
    }
    let out = file.with_extension("min.toml");
    let last = text(&blocks);
    std::fs::write(&out, &last).unwrap();
    eprintln!("{}: {}\n{last}", out.display(), differs(&last).unwrap_or_default());
}

/// `RAILWATCH_WIDE_ONE=FILE`: records and replays one scenario and prints
/// both runs' transitions and the recording (with
/// `RAILWATCH_REPLAY_DUMP`, every input each monitor saw too).
#[test]
fn one_when_asked() {
    let Some(file) = std::env::var_os("RAILWATCH_WIDE_ONE").map(std::path::PathBuf::from) else { return };
    let dir = tempfile::tempdir().unwrap();
    let sc = Scenario::load(&file).unwrap();
    let (live, path) = record(&sc, dir.path());
    let replayed = replay(&path);
    for (name, list) in [("live", &live), ("replayed", &replayed)] {
        for tr in list {
            eprintln!("{name:>8}: {:>6} {}", tr.t, tr.what);
        }
    }
    eprintln!("{}\n{}", std::fs::read_to_string(&path).unwrap(), common::differ(&live, &replayed).unwrap_or_default());
}
