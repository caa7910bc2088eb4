//! The cases: [`CASES`] (the order they run in) and their host-side checks,
//! a file per group: `status.rs` (what `status` reads), `link.rs` (a live
//! rail's link and address events), `record.rs` (recordings replayed),
//! `devices.rs` (devices leaving and arriving), `state.rs` (the state
//! API: `rails`, `check` and a stream reader), `programs.rs` (other
//! programs run in the guest), `traffic.rs` (the traffic engine on two
//! bridged rails, with the figures of `target/vmtest/traffic.json`);
//! `watch.rs` has what every `watch` case checks.
//!
//! # Adding a case
//!
//! 1. The guest script `xtask/vm/cases/<name>.sh` (busybox sh, sourced by
//!    `/init` in a child shell after `xtask/vm/lib.sh`): it drives the
//!    kernel and the programs, reports with the helpers of `lib.sh`
//!    (`watch_start`/`watch_stop`, `step`, `emit`, `note`, `fail`,
//!    `timed_bg`/`bg_wait`) and waits only with `until_ok` or
//!    `expect_line`, never a bare sleep. `lib.sh`'s `cleanup` then ends
//!    what it left running (extend it for a new background program) and
//!    `/init` restores the baseline.
//! 2. Its check, `fn(&CaseRun, &mut Verdict)`, in the file of its group (a
//!    new group is a new file here, declared below): it reads the case's
//!    `OUT`/`STEP`/`RC`/`TIME` lines through [`CaseRun`] and says what it
//!    found with [`Verdict::require`], [`Verdict::fail`] and
//!    [`Verdict::note`]. `watch::check_watch` does the checks every watch
//!    case shares.
//! 3. Its entry in [`CASES`]: the next free id, the name (the script's),
//!    one line of what it does, the check; before the cases that remove
//!    devices unless it removes one. `pending: Some(why)` while railwatch
//!    lacks the feature: it runs, and its failure is reported as skipped.
//!
//! A program the case runs besides railwatch is an entry in the tables of
//! `vmtest/guest.rs`.

mod devices;
mod link;
mod programs;
mod record;
mod state;
mod status;
mod traffic;
mod watch;

use traffic::Figures;

use super::progress::{CaseRun, Ended};

/// One case: its guest script is `xtask/vm/cases/<name>.sh`.
pub struct Case {
    /// The number in the plan (1 status, 2 flap, ...).
    pub id: u8,
    /// The script's name; `cargo xtask vmtest NAME` runs it.
    pub name: &'static str,
    what: &'static str,
    check: fn(&CaseRun, &mut Verdict),
    /// Some(reason): a failure is reported as skipped.
    pending: Option<&'static str>,
}

/// The cases, in the order they run: the ones that remove devices last.
pub const CASES: &[Case] = &[
    Case { id: 1, name: "status", what: "status --json on rxe0", check: status::check_status, pending: None },
    Case { id: 2, name: "flap", what: "veth0 down/up while watching", check: link::check_flap, pending: None },
    Case {
        id: 8,
        name: "gate_latency",
        what: "PORT_ACTIVE to gate open, next to ibv_asyncwatch printing it",
        check: programs::check_gate_latency,
        pending: None,
    },
    Case { id: 9, name: "metrics", what: "the flap through /metrics", check: link::check_metrics, pending: None },
    Case {
        id: 16,
        name: "state_api",
        what: "rails --nccl, check --npd and a stream reader through a cable pull",
        check: state::check_state_api,
        pending: None,
    },
    Case {
        id: 10,
        name: "record",
        what: "watch --record through a flap and a GID change, replayed",
        check: record::check_record,
        pending: None,
    },
    Case { id: 6, name: "gid_change", what: "an IPv4 address on veth0", check: link::check_gid_change, pending: None },
    Case {
        id: 15,
        name: "require_address",
        what: "require_address = \"roce_v2_ipv4\": veth0's IPv4 address deleted, another added",
        check: link::check_require_address,
        pending: None,
    },
    Case {
        id: 7,
        name: "system_tests",
        what: "verbs-backend tests/system.rs in the guest",
        check: programs::check_system_tests,
        pending: None,
    },
    Case {
        id: 3,
        name: "netdev_deleted",
        what: "ip link del veth0 while watching",
        check: devices::check_netdev_deleted,
        pending: None,
    },
    Case {
        id: 4,
        name: "rdma_link_delete",
        what: "rdma link delete rxe0 while watching, recorded and replayed",
        check: devices::check_rdma_link_delete,
        pending: None,
    },
    Case {
        id: 5,
        name: "hotplug_add",
        what: "rdma link add while watching",
        check: devices::check_hotplug_add,
        pending: None,
    },
    // The traffic cases: two bridged rails, kept up from one to the next.
    Case {
        id: 11,
        name: "traffic_cable_pull",
        what: "rail A's cable pulled 2 s, 10 times, under traffic; the agent beside the engine",
        check: traffic::check_cable_pull,
        pending: None,
    },
    Case {
        id: 12,
        name: "traffic_burst",
        what: "1000 SQ_DRAINED queued ahead of the PORT_ACTIVE, live",
        check: traffic::check_burst,
        pending: None,
    },
    Case {
        id: 13,
        name: "traffic_removal",
        what: "rdma link delete of rail A's devices under traffic, then add",
        check: traffic::check_removal,
        pending: None,
    },
    Case {
        id: 14,
        name: "traffic_address_change",
        what: "an IPv4 address on rail A's netdev under traffic",
        check: traffic::check_address_change,
        pending: None,
    },
];

/// The rail every case watches.
const RAIL: &str = "rxe0/1";

/// A case's problems (any fails it), notes and figures.
#[derive(Default)]
pub struct Verdict {
    problems: Vec<String>,
    notes: Vec<String>,
    figures: Vec<Figures>,
}

impl Verdict {
    /// The case failed: `problem` says how.
    pub fn fail(&mut self, problem: impl Into<String>) {
        self.problems.push(problem.into());
    }

    /// Fails with `problem` unless `ok`; returns `ok`.
    pub fn require(&mut self, ok: bool, problem: impl Into<String>) -> bool {
        if !ok {
            self.fail(problem);
        }
        ok
    }

    /// A fact worth printing under the case's verdict.
    pub fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }

    /// Figures for `target/vmtest/traffic.json` (the judge collects them).
    fn keep(&mut self, figures: Figures) {
        self.figures.push(figures);
    }
}

/// A case's result.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Outcome {
    /// Every check held.
    Passed,
    /// A check failed.
    Failed,
    /// A pending case's check failed.
    Skipped,
}

/// The verdicts of a run's cases, printed as each case ends, and the
/// figures their checks kept.
pub struct Judge {
    cases: Vec<&'static Case>,
    outcomes: Vec<(&'static str, Outcome)>,
    figures: Vec<Figures>,
}

impl Judge {
    /// A judge of the `cases` this run asked for.
    pub fn new(cases: &[&'static Case]) -> Judge {
        Judge { cases: cases.to_vec(), outcomes: Vec::new(), figures: Vec::new() }
    }

    /// Writes `target/vmtest/traffic.json` and prints its table, if a
    /// traffic case kept figures.
    pub fn write_figures(&self) -> Result<(), String> {
        traffic::write_figures(&self.figures)
    }

    /// Checks a case that ended and prints its verdict.
    pub fn ended(&mut self, Ended { run, broken }: Ended) {
        let Some(case) = self.cases.iter().copied().find(|c| c.name == run.name) else { return };
        let mut v = Verdict::default();
        if let Some(why) = broken {
            v.fail(why);
        }
        for fail in run.all("FAIL") {
            v.fail(format!("guest: {fail}"));
        }
        if run.end.is_some() && run.rc != Some(0) && run.all("FAIL").is_empty() {
            v.fail(format!("the case script exited {:?}", run.rc));
        }
        if broken.is_none() {
            (case.check)(&run, &mut v);
        }
        let outcome = match (v.problems.is_empty(), case.pending) {
            (true, _) => Outcome::Passed,
            (false, None) => Outcome::Failed,
            (false, Some(_)) => Outcome::Skipped,
        };
        print_verdict(case, &run, &v, outcome);
        self.outcomes.push((case.name, outcome));
        self.figures.append(&mut v.figures);
    }

    /// Fails (and prints) the cases that never began.
    pub fn not_run(&mut self) {
        for case in &self.cases {
            if !self.outcomes.iter().any(|(name, _)| name == &case.name) {
                println!("case {} {}: FAILED: did not run", case.id, case.name);
                self.outcomes.push((case.name, Outcome::Failed));
            }
        }
    }

    /// How many cases passed, failed and were skipped.
    pub fn tally(&self) -> (usize, usize, usize) {
        let count = |o: Outcome| self.outcomes.iter().filter(|(_, x)| *x == o).count();
        (count(Outcome::Passed), count(Outcome::Failed), count(Outcome::Skipped))
    }
}

/// The verdict line, the case's times, notes and problems, and its output
/// when it failed.
fn print_verdict(case: &Case, run: &CaseRun, v: &Verdict, outcome: Outcome) {
    let took = run.end.map_or_else(|| "unfinished".to_string(), |end| format!("{:.2} s", end - run.begin));
    let head = format!("case {} {} ({})", case.id, case.name, case.what);
    match (outcome, case.pending) {
        (Outcome::Passed, None) => println!("{head}: passed ({took})"),
        (Outcome::Passed, Some(_)) => {
            println!("{head}: passed ({took}); it is marked pending: remove the mark in xtask/src/vmtest/cases/mod.rs")
        }
        (Outcome::Failed, _) => println!("{head}: FAILED ({took})"),
        (Outcome::Skipped, reason) => println!("{head}: skipped, {} ({took})", reason.unwrap_or("pending")),
    }
    for time in run.all("TIME") {
        let (what, secs) = time.split_once(' ').unwrap_or((time, "?"));
        println!("    time  {what}: {secs} s");
    }
    for note in run.all("NOTE").into_iter().chain(v.notes.iter().map(String::as_str)) {
        println!("    note  {note}");
    }
    let label = if outcome == Outcome::Skipped { "fails today" } else { "problem" };
    for p in &v.problems {
        println!("    {label}  {p}");
    }
    if outcome == Outcome::Failed {
        println!("    the case's output:");
        for l in run.lines().iter().take(200) {
            println!("    | {l}");
        }
    }
}
