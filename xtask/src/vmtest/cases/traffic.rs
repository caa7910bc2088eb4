//! The traffic cases (issue 21): a C++ transfer engine
//! (`crates/ffi/examples/traffic/`, built with the README's CMake lines)
//! writes over two rails of Soft-RoCE devices on bridged veth pairs (guest
//! setup: `rails_up` in `xtask/vm/lib.sh`), once driving railwatch's
//! machine through the C API, then as the one-event-per-wake-up loop
//! before the fix and as the seed's fixed loop (drain to EAGAIN, a 1 Hz
//! poll of paused rails, no breaker, no failing of work in flight), while
//! the guest pulls cables, queues a burst ahead of a
//! `PORT_ACTIVE`, deletes devices and changes an address
//! (`xtask/vm/cases/traffic_*.sh`, helpers in `xtask/vm/traffic.sh`).
//!
//! The host checks the hard invariants (for railwatch: no failed write
//! posted after its gate closed, no rail stranded, no write hung at the
//! end, at most the probe failed under a half-open breaker, no latency
//! below 0 against the kernel's own time of the event; the old loop
//! stranded in the burst, the seed's not; every delete returned) and what
//! each case promises, and
//! collects the figures ([`figures`]) into `target/vmtest/traffic.json`,
//! printed as a table once the VM is done. Timings are figures, never
//! assertions: the emulation is noisy.

mod figures;

use std::fs;

pub use figures::Figures;
use figures::{Engine, Pull, Reference, Stamped};

use super::Verdict;
use crate::run::target_dir;
use crate::vmtest::json;
use crate::vmtest::progress::CaseRun;

/// The engine's labels in the guest's output, and its name in the figures.
/// The engines of a case, (label, name): railwatch, the loop before the fix
/// and the seed's fixed loop (drain to EAGAIN, a 1 Hz poll, nothing more).
const ENGINES: [(&str, &str); 3] = [("railwatch", "railwatch"), ("old", "one_event_per_wakeup"), ("seed", "seed_fix")];

/// Writes `target/vmtest/traffic.json` and prints the table, if a traffic
/// case ran (`all`: the figures the judge collected, in order).
pub fn write_figures(all: &[Figures]) -> Result<(), String> {
    if all.is_empty() {
        return Ok(());
    }
    let dir = target_dir().join("vmtest");
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join("traffic.json");
    let cases: Vec<String> = all.iter().map(|f| format!("  {}", f.json())).collect();
    fs::write(&path, format!("{{\"cases\":[\n{}\n]}}\n", cases.join(",\n")))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    println!("vmtest: traffic figures (ms: median / worst), also in {}:", path.display());
    print!("{}", figures::table(all));
    Ok(())
}

// ---- what every engine run must show -------------------------------------------------

/// The engine run `label`'s lines, checked: it exited 0, wrote a summary,
/// and both rails carried writes. None when there is nothing to measure.
fn engine_run<'a>(run: &'a CaseRun, v: &mut Verdict, label: &str) -> Option<Engine<'a>> {
    let e = Engine { lines: run.out(label) };
    for l in run.out(&format!("{label}.err")) {
        v.note(format!("{label}: {l}"));
    }
    v.require(run.rc(label) == Some(0), format!("the {label} engine exited {:?}, not 0", run.rc(label)));
    let Some(summary) = e.summary() else {
        v.fail(format!("the {label} engine printed no summary"));
        return None;
    };
    for rail in ["A", "B"] {
        let ok = e.end_of(rail).and_then(|o| json::num(o, "writes_ok"));
        v.require(ok.is_some_and(|n| n > 0.0), format!("{label}: rail {rail} carried no write ({ok:?})"));
    }
    v.require(json::raw(summary, "records_full") == Some("false"), format!("{label}: the records filled up"));
    v.note(format!(
        "{label}: {} writes ok, failed {}, unfinished {}, refused {}, not ready {}",
        json::raw(summary, "writes_ok").unwrap_or("?"),
        json::raw(summary, "writes_failed").unwrap_or("?"),
        json::raw(summary, "writes_unfinished").unwrap_or("?"),
        json::raw(summary, "refused").unwrap_or("?"),
        json::raw(summary, "not_ready").unwrap_or("?"),
    ));
    Some(e)
}

/// The engine run's window in the marks: (start, stop).
fn window(marks: &Stamped, label: &str) -> Option<(u64, u64)> {
    let start = marks.marks("engine_start", 0, u64::MAX).into_iter().find(|(_, a)| *a == label)?.0;
    let stop = marks.marks("engine_stop", start, u64::MAX).into_iter().find(|(_, a)| *a == label)?.0;
    Some((start, stop))
}

/// The pulls of `port` in `from..to`: each pull with the plug after it.
fn pulls(marks: &Stamped, port: &str, from: u64, to: u64) -> Vec<Pull> {
    let plugs = marks.marks("plug", from, to);
    marks
        .marks("pull", from, to)
        .into_iter()
        .filter(|(_, a)| *a == port)
        .filter_map(|(t, _)| Some(Pull { pull: t, plug: plugs.iter().find(|(p, a)| *p > t && *a == port)?.0 }))
        .collect()
}

/// The invariants that hold for railwatch in every case.
fn railwatch_invariants(v: &mut Verdict, f: &Figures) {
    v.require(
        f.failed_posted_after_gate_closed == 0,
        format!("{}: {} failed write(s) posted after the gate closed", f.case, f.failed_posted_after_gate_closed),
    );
    v.require(!f.stranded, format!("{}: railwatch left a rail stranded (its port ACTIVE, no writes)", f.case));
    v.require(
        f.hung_writes_at_end == 0,
        format!("{}: {} write(s) never completed by the end (hung)", f.case, f.hung_writes_at_end),
    );
}

/// Figures for the pulls of one engine run, with what a pull must show.
fn measure_pulls(
    run: &CaseRun,
    v: &mut Verdict,
    case: &'static str,
    label: &str,
    engine: &'static str,
) -> Option<Figures> {
    let e = engine_run(run, v, label)?;
    let marks = Stamped::parse(&run.out("marks"));
    // The kernel's own time of each event; ibv_asyncwatch's stamped lines
    // (late under load: a negative latency, once) only without a trace.
    let kernel = Stamped::kernel_events(&run.out("ktrace"));
    let by_kernel = !kernel.lines.is_empty();
    let aw = if by_kernel { kernel } else { Stamped::parse(&run.out("aw.rxe0")) };
    let reference = if by_kernel { "kernel" } else { "asyncwatch" };
    let mut f = Figures { case, engine, reference, ..Figures::default() };
    if let Err(e) = f.totals(&e) {
        v.fail(format!("{label}: {e}"));
        return None;
    }
    let Some((from, to)) = window(&marks, label) else {
        v.fail(format!("no engine_start/engine_stop marks for {label}"));
        return None;
    };
    let ps = pulls(&marks, "p0", from, to);
    let r = Reference { asyncwatch: &aw, device: "rxe0", rail: "A", other: "B" };
    for (i, p) in ps.iter().enumerate() {
        f.pull(&e, &r, *p, ps.get(i + 1).map(|n| n.pull));
        // Traffic carried on over B while A was out.
        if let Some(gap) = figures::max_gap(&e, "B", p.pull, p.plug) {
            v.require(gap < figures_ms(p.plug - p.pull), format!("{label}: rail B stalled through pull {}", i + 1));
        }
    }
    // The kernel raised the event before anyone could act on it: a negative
    // latency against it is a defect of the measurement.
    let negative = f.admit_after_port_active_ms.iter().chain(&f.close_after_port_err_ms).flatten().any(|ms| *ms < 0.0);
    v.require(!(by_kernel && negative), format!("{label}: a latency below 0 against the kernel's own time"));
    Some(f)
}

fn figures_ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// Each pull closed the gate, admitted it again and wrote on new QPs.
fn require_recovered(v: &mut Verdict, f: &Figures, label: &str) {
    for (i, ((c, a), w)) in f
        .close_after_port_err_ms
        .iter()
        .zip(&f.admit_after_port_active_ms)
        .zip(&f.first_write_after_port_active_ms)
        .enumerate()
    {
        v.require(c.is_some(), format!("{label}: pull {}: no gate close after the PORT_ERR", i + 1));
        v.require(a.is_some(), format!("{label}: pull {}: no gate admit after the PORT_ACTIVE", i + 1));
        v.require(w.is_some(), format!("{label}: pull {}: no write on new QPs after the PORT_ACTIVE", i + 1));
    }
}

// ---- the cases --------------------------------------------------------------------------

/// Cable pulls: 10 with railwatch (the agent beside it), 3 with the old loop.
pub(super) fn check_cable_pull(run: &CaseRun, v: &mut Verdict) {
    for ((label, engine), wanted) in ENGINES.into_iter().zip([10, 3, 3]) {
        let Some(mut f) = measure_pulls(run, v, "cable_pull", label, engine) else { continue };
        v.require(f.pulls == wanted, format!("{label}: {} pulls, want {wanted}", f.pulls));
        if label == "railwatch" {
            railwatch_invariants(v, &f);
            require_recovered(v, &f, label);
            let e = Engine { lines: run.out(label) };
            check_agent(run, v, &e, &mut f);
            check_reported(v, &e, &f, label);
            // The pull's failures came while the rail was paused by its
            // PORT_ERR: they are explained, the breaker stays shut.
            v.require(
                f.breaker.as_ref().is_some_and(|b| b.trips == 0),
                format!("{label}: the breaker opened on pulls of the rail's own cable: {:?}", f.breaker),
            );
        } else {
            v.require(!f.stranded, format!("{label}: stranded on plain pulls (nothing hid a PORT_ACTIVE)"));
        }
        v.keep(f);
    }
    check_peer_pulls(run, v, "peer", "railwatch");
    check_peer_pulls(run, v, "seed_peer", "seed_fix");
    check_responder(run, v);
}

/// What the engine reported to railwatch's machine is what its records
/// say: every failure (reported at once) and the successes up to the last
/// batch.
fn check_reported(v: &mut Verdict, e: &Engine, f: &Figures, label: &str) {
    let Some(b) = &f.breaker else {
        v.fail(format!("{label}: the engine reported no transfers to the machine"));
        return;
    };
    let recorded = figures::status_counts(&f.writes_failed);
    for (status, n) in &recorded {
        // The engine's own outcomes are not completions: nothing to report.
        if !["post_failed", "work_lost", "abandoned"].contains(&status.as_str()) {
            let got = b.reported.get(status).copied().unwrap_or(0);
            v.require(got == *n, format!("{label}: {n} {status} recorded, {got} reported"));
        }
    }
    let ok = b.reported.get("success").copied().unwrap_or(0);
    v.require(ok > 0 && ok <= f.writes_ok, format!("{label}: {ok} successes reported, {} recorded", f.writes_ok));
    let counters = e.of_kind("counters");
    v.require(
        counters.iter().any(|l| json::raw(l, "error") == Some("0") && json::raw(l, "link_downed") != Some("-1")),
        format!("{label}: the engine answered no counter read from sysfs: {:?}", counters.first()),
    );
}

/// Two pulls of rail A's far end (p1, rxe1's cable), the far ends served
/// by the responder process (`traffic_engine --serve-peers`), which the
/// engine does not open: rxe0's port reads ACTIVE while its QPs fail, as
/// with a NIC on another host. railwatch's breaker opens on rxe0 in every
/// pull (one peer a rail: the engine's min_peers is 1); after its backoff
/// it is half-open, the engine's probe fails while the far end is out and
/// succeeds after the plug, which closes it (the rail back by probe). The
/// seed's loop has no breaker: what it did is a figure.
fn check_peer_pulls(run: &CaseRun, v: &mut Verdict, label: &str, engine: &'static str) {
    let Some(e) = engine_run(run, v, label) else { return };
    let marks = Stamped::parse(&run.out("marks"));
    let mut f = Figures { case: "peer_cable_pull", engine, ..Figures::default() };
    if let Err(err) = f.totals(&e) {
        v.fail(format!("{label}: {err}"));
        return;
    }
    let Some((from, to)) = window(&marks, label) else {
        v.fail(format!("no engine_start/engine_stop marks for {label}"));
        return;
    };
    v.require(e.gates("rxe1").is_empty(), format!("{label}: the engine opened rxe1, the responder's"));
    let ps = pulls(&marks, "p1", from, to);
    let mut first_write = Vec::new();
    for (i, p) in ps.iter().enumerate() {
        let until = ps.get(i + 1).map_or(to, |n| n.pull);
        let back =
            e.sets("A").into_iter().filter(|(_, t)| (p.plug..until).contains(t)).find_map(|(s, _)| e.first_ok("A", s));
        if engine == "railwatch" {
            v.require(back.is_some(), format!("{label}: pull {}: no write on new QPs after the plug", i + 1));
        }
        first_write.push(back.map(|b| figures_ms(b.saturating_sub(p.plug))));
        f.other_rail_max_gap_ms.push(figures::max_gap(&e, "B", p.pull, back.unwrap_or(p.plug)));
        f.pulls += 1;
    }
    if engine != "railwatch" && first_write.iter().any(Option::is_none) {
        v.note(format!("{label}: rail A wrote nothing after the far end came back (no breaker: its QPs failed, nothing rebuilt them)"));
    }
    f.extra.push(("first_write_after_plug_ms", first_write));
    v.require(f.pulls == 2, format!("{label}: {} pulls of p1, want 2", f.pulls));
    if engine == "railwatch" {
        check_breaker(v, &e, &mut f, &ps, to, label);
    }
    v.keep(f);
}

/// The responder served the far ends: it exited 0 and built sets.
fn check_responder(run: &CaseRun, v: &mut Verdict) {
    let r = Engine { lines: run.out("responder") };
    for l in run.out("responder.err") {
        v.note(format!("responder: {l}"));
    }
    v.require(run.rc("responder") == Some(0), format!("the responder exited {:?}, not 0", run.rc("responder")));
    let (ok, failed) = (r.count("served", &[("error", "0")]), r.count("served", &[]));
    v.require(ok > 0, "the responder served no QP set");
    v.note(format!("responder: served {ok} set(s), refused {}", failed - ok));
}

/// The far-end pulls' breaker, for the engine with railwatch's machine:
/// in every pull it opened on rxe0 once, a probe closed it once the far
/// end was back, and at most the probe failed under a half-open rail.
fn check_breaker(v: &mut Verdict, e: &Engine, f: &mut Figures, ps: &[Pull], to: u64, label: &str) {
    let closes = probe_closes(e);
    // A trip takes an active rail out; a failed probe opens it again, from
    // paused (a transition too, not another trip).
    let trips = rxe0_lines(e, "transition", &[("from", "active"), ("to", "paused"), ("reason", "data_path")]);
    for (i, p) in ps.iter().enumerate() {
        let until = ps.get(i + 1).map_or(to, |n| n.pull);
        let n = trips.iter().filter(|t| (p.pull..until).contains(*t)).count();
        v.require(n == 1, format!("{label}: pull {}: the breaker opened {n} time(s) on rxe0, want 1", i + 1));
        let closed = closes.iter().filter(|t| (p.plug..until).contains(*t)).count();
        v.require(
            closed == 1,
            format!("{label}: pull {}: {closed} probe(s) closed the breaker after the plug, want 1", i + 1),
        );
    }
    f.extra.push((
        "breaker_closed_after_plug_ms",
        ps.iter().map(|p| closes.iter().find(|t| **t >= p.plug).map(|t| figures_ms(t - p.plug))).collect(),
    ));
    let per = failed_per_readmission(e);
    v.require(
        per.iter().all(|n| *n <= 1),
        format!("{label}: more than the probe failed under a half-open rail: {per:?} per re-admission"),
    );
    f.extra.push(("writes_failed_per_readmission", per.iter().map(|n| Some(*n as f64)).collect()));
    railwatch_invariants(v, f);
    match &f.breaker {
        Some(b) => {
            v.require(b.trips == trips.len(), format!("{label}: the breaker opened off rxe0: {b:?}"));
            v.note(format!("{label}: reported {}, the breaker opened {} time(s)", b.reported_json(), b.trips));
        }
        None => v.fail(format!("{label}: the engine reported no transfers to the machine")),
    }
}

/// When rxe0's breaker closed: its rail back `by` a probe.
fn probe_closes(e: &Engine) -> Vec<u64> {
    rxe0_lines(e, "transition", &[("to", "active"), ("by", "probe")])
}

/// The times of `kind` lines of rxe0 with `pairs`.
fn rxe0_lines(e: &Engine, kind: &str, pairs: &[(&str, &str)]) -> Vec<u64> {
    e.of_kind(kind)
        .into_iter()
        .filter(|l| json::is(l, &[("device", "rxe0")]) && json::is(l, pairs))
        .filter_map(|l| json::raw(l, "t_ns")?.parse().ok())
        .collect()
}

/// Per half-open spell of rxe0's breaker (from its `half_open` line to the
/// probe's verdict: closed, or `probe_failed`): the writes that failed
/// under it, the probe's failure included. Ordinary work is refused while
/// half-open, so at most the probe may fail.
fn failed_per_readmission(e: &Engine) -> Vec<u64> {
    let (closed, probe_failed) = (probe_closes(e), rxe0_lines(e, "probe_failed", &[]));
    let failed = e.failed();
    rxe0_lines(e, "half_open", &[])
        .into_iter()
        .map(|from| {
            let verdict = |ts: &[u64]| ts.iter().copied().find(|t| *t >= from);
            let (ok, bad) = (verdict(&closed), verdict(&probe_failed));
            let to = ok.into_iter().chain(bad).min().unwrap_or(u64::MAX);
            let writes = failed.iter().filter(|w| w.rail == "A" && (from..to).contains(&w.post)).count() as u64;
            writes + u64::from(bad == Some(to))
        })
        .collect()
}

/// `railwatch watch --metrics-listen` beside the engine counted the flaps
/// the engine saw: each a pause and a return (by the event, or by the
/// recovery poll when it read the port first: either side may). Which
/// witness paused it each time (the port's `port_err`, or the netdev's
/// `no_carrier`: veth0 loses its carrier with the pull) is a figure.
fn check_agent(run: &CaseRun, v: &mut Verdict, e: &Engine, f: &mut Figures) {
    let pulls = f.pulls;
    let (before, after) = (run.out("metrics.before"), run.out("metrics.after"));
    v.require(!before.is_empty() && !after.is_empty(), "the agent's /metrics was not scraped");
    let agent = AgentFlaps::between(&before, &after);
    let engine_pauses = e.count("transition", &[("device", "rxe0"), ("from", "active"), ("to", "paused")]);
    let engine_returns = e.count("transition", &[("device", "rxe0"), ("from", "paused"), ("to", "active")]);
    v.note(format!(
        "agent beside the engine: rxe0/1 paused +{}, back +{}; the engine: {engine_pauses} and {engine_returns}; {pulls} pulls",
        agent.pauses, agent.returns
    ));
    v.require(
        agent.pauses == engine_pauses as f64 && agent.returns == engine_returns as f64 && engine_pauses == pulls,
        "the agent's /metrics and the engine counted different flaps",
    );
    v.note(format!(
        "agent: rxe0/1 paused first by port_err {}, by no_carrier {}",
        agent.pauses - agent.by_carrier,
        agent.by_carrier
    ));
    f.extra.push(("agent_paused_by_port_err", vec![Some(agent.pauses - agent.by_carrier)]));
    f.extra.push(("agent_paused_by_no_carrier", vec![Some(agent.by_carrier)]));
    v.require(run.rc("watch") == Some(0), format!("the agent exited {:?}, not 0", run.rc("watch")));
}

/// What the agent's /metrics say of rxe0/1 between two scrapes.
#[derive(Debug, PartialEq)]
struct AgentFlaps {
    /// Pauses (`railwatch_rail_pauses_total`): from active, never a change
    /// of reason while paused (docs/METRICS.md). A pause first witnessed
    /// by the carrier becomes `port_err` when the port says so, and that
    /// change is another transition `to="paused"`: counting those counted
    /// one pull twice.
    pauses: f64,
    /// Returns: transitions into active, but for attaches.
    returns: f64,
    /// Pauses the carrier witnessed first (`no_carrier` is entered only
    /// from active here: a rail paused for its port keeps that reason).
    by_carrier: f64,
}

impl AgentFlaps {
    fn between(before: &[&str], after: &[&str]) -> AgentFlaps {
        let d = |series: &dyn Fn(&[&str]) -> f64| series(after) - series(before);
        AgentFlaps {
            pauses: d(&|s| sum(s, r#"railwatch_rail_pauses_total{device="rxe0",port="1"}"#)),
            returns: d(&|s| transitions(s, "active", None)),
            by_carrier: d(&|s| transitions(s, "paused", Some("no_carrier"))),
        }
    }
}

/// rxe0/1's transitions into `to` (with `cause` if given), but for attaches.
fn transitions(scrape: &[&str], to: &str, cause: Option<&str>) -> f64 {
    let prefix = format!(r#"railwatch_transitions_total{{device="rxe0",port="1",to="{to}","#);
    let cause = cause.map(|c| format!(r#"cause="{c}""#));
    scrape
        .iter()
        .filter(|l| l.starts_with(&prefix) && !l.contains(r#"cause="attach""#))
        .filter(|l| cause.as_ref().is_none_or(|c| l.contains(c.as_str())))
        .filter_map(|l| value(l))
        .sum()
}

/// The sum of the series starting with `prefix`.
fn sum(scrape: &[&str], prefix: &str) -> f64 {
    scrape.iter().filter(|l| l.starts_with(prefix)).filter_map(|l| value(l)).sum()
}

/// A sample line's value.
fn value(line: &str) -> Option<f64> {
    line.rsplit(' ').next()?.parse().ok()
}

/// A burst of SQ_DRAINED ahead of the PORT_ACTIVE: railwatch readmits A on
/// the wake-up that brings it; the old loop leaves A out.
pub(super) fn check_burst(run: &CaseRun, v: &mut Verdict) {
    for (label, engine) in ENGINES {
        let Some(f) = measure_pulls(run, v, "burst_hides_port_active", label, engine) else { continue };
        let e = Engine { lines: run.out(label) };
        v.require(f.pulls == 1, format!("{label}: {} pulls, want 1", f.pulls));
        let bursts = e.of_kind("burst");
        v.require(
            bursts.len() == 1 && json::raw(bursts[0], "errors") == Some("0"),
            format!("{label}: the burst did not happen cleanly: {bursts:?}"),
        );
        let a_end = e.end_of("A").and_then(|o| json::raw(o, "port_state"));
        v.require(a_end == Some("active"), format!("{label}: rxe0's port is {a_end:?} at the end, not active"));
        if label == "railwatch" {
            railwatch_invariants(v, &f);
            require_recovered(v, &f, label);
            check_one_wakeup(v, &e, run);
        } else if label == "seed" {
            // Reading to EAGAIN is the seed's fix: the burst hides nothing.
            v.require(!f.stranded, "the seed's fixed loop was stranded by the burst");
            require_recovered(v, &f, label);
        } else {
            v.require(f.stranded, "the one-event-per-wake-up engine was not stranded by the burst");
            let reads = e.count("read", &[("device", "rxe0")]);
            v.note(format!(
                "{label}: read {reads} event(s) of rxe0 in all (the burst queued 1000 ahead of the PORT_ACTIVE)"
            ));
        }
        v.keep(f);
    }
}

/// railwatch's gate admitted on the first wake-up after the plug: at most
/// one drain of rxe0 between the plug and the admit (none when its
/// recovery poll read the port ACTIVE before the event came), and the
/// burst was read whole.
fn check_one_wakeup(v: &mut Verdict, e: &Engine, run: &CaseRun) {
    let marks = Stamped::parse(&run.out("marks"));
    let Some((plug, _)) = marks.marks("plug", 0, u64::MAX).into_iter().next() else { return };
    let Some(admitted) = e.gates("rxe0").iter().find(|g| g.t >= plug && g.admits).map(|g| g.t) else { return };
    let rxe0_drains: Vec<&str> =
        e.of_kind("drain").into_iter().filter(|l| json::raw(l, "device") == Some("rxe0")).collect();
    let t = |l: &str| json::raw(l, "t_ns").and_then(|t| t.parse::<u64>().ok());
    let between = rxe0_drains.iter().filter(|l| t(l).is_some_and(|t| (plug..=admitted).contains(&t))).count();
    v.require(between <= 1, format!("railwatch: {between} drains of rxe0 between the plug and the admit, want 1"));
    let read: u64 = rxe0_drains.iter().filter_map(|l| json::raw(l, "events")?.parse::<u64>().ok()).sum();
    v.require(read >= 1001, format!("railwatch read {read} events of rxe0, fewer than the burst and the PORT_ACTIVE"));
    let by = e
        .of_kind("transition")
        .into_iter()
        .find(|l| json::is(l, &[("device", "rxe0"), ("to", "active")]) && t(l).is_some_and(|x| x >= plug))
        .and_then(|l| json::raw(l, "by"));
    v.note(format!("railwatch: {read} events of rxe0 read in all; back by {by:?}, {between} drain(s) after the plug"));
}

/// `rdma link delete` of rail A's devices under traffic, then `rdma link add`.
pub(super) fn check_removal(run: &CaseRun, v: &mut Verdict) {
    let Some(e) = engine_run(run, v, "railwatch") else { return };
    let marks = Stamped::parse(&run.out("marks"));
    let mut f = Figures { case: "removal", engine: "railwatch", ..Figures::default() };
    if let Err(err) = f.totals(&e) {
        v.fail(format!("railwatch: {err}"));
        return;
    }
    let (mut close_after, mut closed_after, mut engine_part) = (Vec::new(), Vec::new(), Vec::new());
    for device in ["rxe0", "rxe1"] {
        let start = marks.marks("delete_start", 0, u64::MAX).into_iter().find(|(_, a)| *a == device).map(|m| m.0);
        let done = marks.marks("delete_done", 0, u64::MAX).into_iter().find(|(_, a)| a.starts_with(device));
        v.require(
            done.is_some_and(|(_, a)| a.ends_with(" 0")),
            format!("rdma link delete {device} did not return 0: {done:?}"),
        );
        f.delete_returned_ms.push(start.zip(done).map(|(s, d)| figures_ms(d.0 - s)));
        // The machine's CLOSE carried out, and the context really closed.
        let at = |kind: &str, pairs: &[(&str, &str)]| {
            e.of_kind(kind)
                .into_iter()
                .filter(|l| json::is(l, pairs))
                .filter_map(|l| json::raw(l, "t_ns")?.parse::<u64>().ok())
                .find(|t| start.is_some_and(|s| *t >= s))
        };
        let close = at("device", &[("device", device), ("what", "close")]);
        let closed = at("context_closed", &[("device", device)]);
        v.require(close.is_some() && closed.is_some(), format!("the engine did not close {device} after its delete"));
        close_after.push(start.zip(close).map(|(s, c)| figures_ms(c - s)));
        closed_after.push(start.zip(closed).map(|(s, c)| figures_ms(c - s)));
        // The engine's own part: the machine told of the removal (the
        // device list after the uevent) to the context closed.
        let removed = at("transition", &[("device", device), ("to", "inert"), ("reason", "device_removed")]);
        engine_part.push(removed.zip(closed).map(|(r, c)| figures_ms(c.saturating_sub(r))));
    }
    // From the first `rdma link add` (the set can be built before the
    // second one's mark is written).
    let (deleted, added) = (marks.after(0, "delete_start"), marks.after(0, "add_start"));
    match (deleted, added) {
        (Some(d), Some(a)) => {
            f.other_rail_max_gap_ms.push(figures::max_gap(&e, "B", d, a));
            let back = e.sets("A").into_iter().filter(|(_, t)| *t >= a).find_map(|(s, _)| e.first_ok("A", s));
            v.require(back.is_some(), "rail A carried no write after `rdma link add`");
            f.extra.push(("first_write_after_add_ms", vec![back.map(|b| figures_ms(b - a))]));
        }
        _ => v.fail("no delete_start/add_start marks"),
    }
    // The ledger: the writes in flight on rail A when its devices left were
    // failed at once, from the uevent the engine read (the work_lost it was
    // told in that wake-up) to the last of them.
    let uevent = e
        .of_kind("uevent")
        .into_iter()
        .filter_map(|l| json::raw(l, "t_ns")?.parse::<u64>().ok())
        .find(|t| deleted.is_some_and(|d| *t >= d));
    let told = e.count("work_lost", &[("rail", "A"), ("scope", "device")]);
    v.require(told >= 1, format!("the engine was told of no lost work on rail A ({told} work_lost lines)"));
    let lost = e.lost("A");
    f.extra.push(("writes_lost", vec![lost.map(|(n, _)| n as f64)]));
    f.extra.push((
        "inflight_failed_after_ms",
        vec![uevent.zip(lost).map(|(u, (_, last))| figures_ms(last.saturating_sub(u)))],
    ));
    f.extra.push(("close_after_delete_ms", close_after));
    f.extra.push(("context_closed_after_delete_ms", closed_after));
    f.extra.push(("context_closed_after_removal_ms", engine_part));
    railwatch_invariants(v, &f);
    v.keep(f);
}

/// An address added to and removed from veth0 under traffic: each GID
/// change bumps rail A's generation, the engine rebuilds, traffic resumes.
pub(super) fn check_address_change(run: &CaseRun, v: &mut Verdict) {
    let Some(e) = engine_run(run, v, "railwatch") else { return };
    let marks = Stamped::parse(&run.out("marks"));
    let mut f = Figures { case: "address_change", engine: "railwatch", ..Figures::default() };
    if let Err(err) = f.totals(&e) {
        v.fail(format!("railwatch: {err}"));
        return;
    }
    let mut resumed = Vec::new();
    for what in ["addr_add", "addr_del"] {
        let Some((t, _)) = marks.marks(what, 0, u64::MAX).into_iter().next() else {
            v.fail(format!("no {what} mark"));
            continue;
        };
        let bumped = e.of_kind("transition").into_iter().any(|l| {
            json::is(l, &[("device", "rxe0"), ("bump_event", "18")])
                && json::raw(l, "t_ns").and_then(|x| x.parse::<u64>().ok()).is_some_and(|x| x >= t)
        });
        v.require(bumped, format!("no gid_change generation bump of rxe0 after {what}"));
        let back = e.sets("A").into_iter().filter(|(_, s)| *s >= t).find_map(|(s, _)| e.first_ok("A", s));
        v.require(back.is_some(), format!("rail A carried no write on new QPs after {what}"));
        resumed.push(back.map(|b| figures_ms(b - t)));
        f.other_rail_max_gap_ms.push(figures::max_gap(&e, "B", t, back.unwrap_or(t)));
    }
    f.extra.push(("first_write_after_address_change_ms", resumed));
    railwatch_invariants(v, &f);
    v.keep(f);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_what_failed_under_each_half_open_spell() {
        let e = Engine {
            lines: vec![
                r#"{"kind":"half_open","t_ns":100,"device":"rxe0","rail":"A"}"#,
                r#"{"kind":"failed","rail":"A","set":1,"status":"retry_exc_err","post_ns":50,"done_ns":150}"#,
                r#"{"kind":"probe_failed","t_ns":200,"device":"rxe0","rail":"A"}"#,
                r#"{"kind":"half_open","t_ns":300,"device":"rxe0","rail":"A"}"#,
                r#"{"kind":"failed","rail":"A","set":2,"status":"retry_exc_err","post_ns":310,"done_ns":390}"#,
                r#"{"kind":"failed","rail":"B","set":3,"status":"retry_exc_err","post_ns":320,"done_ns":390}"#,
                r#"{"kind":"transition","t_ns":400,"device":"rxe0","rail":"A","to":"active","by":"probe"}"#,
            ],
        };
        // The first spell: its failed probe (the write posted before it does
        // not count); the second: one of A's writes, the probe closed it.
        assert_eq!(failed_per_readmission(&e), [1, 1]);
        assert_eq!(probe_closes(&e), [400]);
    }

    #[test]
    fn a_far_end_pull_that_does_not_open_the_breaker_fails_the_case() {
        // Pull 1 (100..200, plugged at 150): opened at 120, half-open at
        // 130, its probe failed (open again, not another trip), half-open
        // at 140, the probe closed it at 160. Pull 2 (300..400): nothing.
        let e = Engine {
            lines: vec![
                r#"{"kind":"transition","t_ns":120,"device":"rxe0","rail":"A","from":"active","to":"paused","reason":"data_path"}"#,
                r#"{"kind":"half_open","t_ns":130,"device":"rxe0","rail":"A"}"#,
                r#"{"kind":"probe_failed","t_ns":135,"device":"rxe0","rail":"A"}"#,
                r#"{"kind":"transition","t_ns":135,"device":"rxe0","rail":"A","from":"paused","to":"paused","reason":"data_path"}"#,
                r#"{"kind":"half_open","t_ns":140,"device":"rxe0","rail":"A"}"#,
                r#"{"kind":"transition","t_ns":160,"device":"rxe0","rail":"A","from":"paused","to":"active","by":"probe"}"#,
            ],
        };
        let ps = [Pull { pull: 100, plug: 150 }, Pull { pull: 300, plug: 350 }];
        let mut v = Verdict::default();
        check_breaker(&mut v, &e, &mut Figures::default(), &ps, 500, "peer");
        let want = ["peer: pull 2: the breaker opened 0 time(s) on rxe0, want 1", "peer: pull 2: 0 probe(s)"];
        for w in want {
            assert!(v.problems.iter().any(|p| p.starts_with(w)), "no {w:?} in {:?}", v.problems);
        }
        assert!(!v.problems.iter().any(|p| p.contains("pull 1")), "{:?}", v.problems);
    }

    #[test]
    fn a_pause_the_carrier_witnessed_first_is_one_pause() {
        // issue 42's failed run: 10 pulls, one first seen as no_carrier,
        // then port_err when the port said so (a change of reason, another
        // transition into paused); the agent paused 10 times.
        let before = [
            r#"railwatch_transitions_total{device="rxe0",port="1",to="active",cause="attach"} 1"#,
            r#"railwatch_rail_pauses_total{device="rxe0",port="1"} 0"#,
        ];
        let after = [
            r#"railwatch_transitions_total{device="rxe0",port="1",to="active",cause="attach"} 1"#,
            r#"railwatch_transitions_total{device="rxe0",port="1",to="paused",cause="port_err"} 10"#,
            r#"railwatch_transitions_total{device="rxe0",port="1",to="paused",cause="no_carrier"} 1"#,
            r#"railwatch_transitions_total{device="rxe0",port="1",to="active",cause="event"} 9"#,
            r#"railwatch_transitions_total{device="rxe0",port="1",to="active",cause="poll"} 1"#,
            r#"railwatch_transitions_total{device="rxe2",port="1",to="paused",cause="port_err"} 4"#,
            r#"railwatch_rail_pauses_total{device="rxe0",port="1"} 10"#,
        ];
        let got = AgentFlaps::between(&before, &after);
        assert_eq!(got, AgentFlaps { pauses: 10.0, returns: 10.0, by_carrier: 1.0 });
    }
}
