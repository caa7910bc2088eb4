//! The traffic cases' figures, from what the guest sent back: the engine's
//! JSON lines, `ibv_asyncwatch`'s lines and the case's own marks, all
//! stamped with the guest's `CLOCK_MONOTONIC` in nanoseconds.
//!
//! One [`Figures`] per (case, engine): the keys of `target/vmtest/traffic.json`
//! (issue 21), rendered by [`Figures::json`] and [`table`].

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::vmtest::json;

/// Nanoseconds on the guest's monotonic clock.
pub type Ns = u64;

fn ns(obj: &str, key: &str) -> Option<Ns> {
    json::raw(obj, key)?.parse().ok()
}

fn ms_between(from: Ns, to: Ns) -> f64 {
    (to as f64 - from as f64) / 1e6
}

// ---- what the guest sent --------------------------------------------------------

/// One engine run's lines (`OUT LABEL line`).
pub struct Engine<'a> {
    pub lines: Vec<&'a str>,
}

/// A gate line: when the engine saw a device's gate word change.
#[derive(Clone, Copy)]
pub struct Gate {
    pub t: Ns,
    pub admits: bool,
}

/// A failed write.
pub struct Failed<'a> {
    pub rail: &'a str,
    pub post: Ns,
}

impl<'a> Engine<'a> {
    fn kind(&self, kind: &str) -> impl Iterator<Item = &'a str> + '_ {
        let pat = format!("{{\"kind\":\"{kind}\"");
        self.lines.iter().copied().filter(move |l| l.starts_with(&pat))
    }

    /// The gate lines of `device`, in order.
    pub fn gates(&self, device: &str) -> Vec<Gate> {
        self.kind("gate")
            .filter(|l| json::raw(l, "device") == Some(device))
            .filter_map(|l| Some(Gate { t: ns(l, "t_ns")?, admits: json::raw(l, "admits")? == "true" }))
            .collect()
    }

    /// The gate lines of both ends of `rail`, each with its device.
    fn rail_gates(&self, rail: &str) -> Vec<(&'a str, Gate)> {
        self.kind("gate")
            .filter(|l| json::raw(l, "rail") == Some(rail))
            .filter_map(|l| {
                Some((json::raw(l, "device")?, Gate { t: ns(l, "t_ns")?, admits: json::raw(l, "admits")? == "true" }))
            })
            .collect()
    }

    /// `rail`'s QP sets: (serial, when it was published).
    pub fn sets(&self, rail: &str) -> Vec<(u64, Ns)> {
        self.kind("set")
            .filter(|l| json::raw(l, "rail") == Some(rail))
            .filter_map(|l| Some((ns(l, "set")?, ns(l, "t_ns")?)))
            .collect()
    }

    /// The first successful completion on set `serial` of `rail`.
    pub fn first_ok(&self, rail: &str, serial: u64) -> Option<Ns> {
        self.kind("first_ok")
            .find(|l| json::raw(l, "rail") == Some(rail) && ns(l, "set") == Some(serial))
            .and_then(|l| ns(l, "t_ns"))
    }

    /// `rail`'s gaps between successive successes: (from, to).
    pub fn gaps(&self, rail: &str) -> Vec<(Ns, Ns)> {
        self.kind("gap")
            .filter(|l| json::raw(l, "rail") == Some(rail))
            .filter_map(|l| Some((ns(l, "from_ns")?, ns(l, "to_ns")?)))
            .collect()
    }

    pub fn failed(&self) -> Vec<Failed<'a>> {
        self.kind("failed")
            .filter_map(|l| Some(Failed { rail: json::raw(l, "rail")?, post: ns(l, "post_ns")? }))
            .collect()
    }

    /// The ledger's `lost` line of `rail`: (writes it failed on
    /// WORK_LOST, the last one's time).
    pub fn lost(&self, rail: &str) -> Option<(u64, Ns)> {
        self.kind("lost")
            .find(|l| json::raw(l, "rail") == Some(rail))
            .and_then(|l| Some((ns(l, "writes")?, ns(l, "last_ns")?)))
    }

    pub fn summary(&self) -> Option<&'a str> {
        self.kind("summary").last()
    }

    /// The summary's object for `rail`.
    pub fn end_of(&self, rail: &str) -> Option<&'a str> {
        json::object_with(self.summary()?, &format!("\"rail\":\"{rail}\""))
    }

    /// Lines of `kind` whose `key` is `value`.
    pub fn count(&self, kind: &str, pairs: &[(&str, &str)]) -> usize {
        self.kind(kind).filter(|l| json::is(l, pairs)).count()
    }

    pub fn of_kind(&self, kind: &str) -> Vec<&'a str> {
        self.kind(kind).collect()
    }

    /// Whether `rail`'s gates both admitted at `t` (by the lines before).
    fn rail_admits_at(gates: &[(&str, Gate)], t: Ns) -> bool {
        let mut last: Vec<(&str, bool)> = Vec::new();
        for (device, g) in gates.iter().take_while(|(_, g)| g.t <= t) {
            match last.iter_mut().find(|(d, _)| d == device) {
                Some(entry) => entry.1 = g.admits,
                None => last.push((device, g.admits)),
            }
        }
        !last.is_empty() && last.iter().all(|(_, a)| *a)
    }

    /// Failed writes posted on a rail after its gate had closed (as the
    /// engine's gate lines say: the line is written once the word changed).
    pub fn failed_after_gate_closed(&self) -> u64 {
        let failed = self.failed();
        let mut n = 0;
        for rail in failed.iter().map(|f| f.rail).collect::<std::collections::BTreeSet<_>>() {
            let gates = self.rail_gates(rail);
            n += failed.iter().filter(|f| f.rail == rail && !Self::rail_admits_at(&gates, f.post)).count() as u64;
        }
        n
    }
}

/// Lines stamped by the guest's `stamp`: "NS rest".
pub struct Stamped<'a> {
    pub lines: Vec<(Ns, &'a str)>,
}

impl<'a> Stamped<'a> {
    pub fn parse(lines: &[&'a str]) -> Stamped<'a> {
        Stamped {
            lines: lines
                .iter()
                .filter_map(|l| {
                    let (t, rest) = l.split_once(' ')?;
                    Some((t.parse().ok()?, rest))
                })
                .collect(),
        }
    }

    /// The kernel's own trace of the async events (`ktrace_start` in
    /// traffic.sh: a kprobe on `ib_dispatch_event` on the mono clock), as
    /// "NS IBV_EVENT_NAME" lines; empty when the guest had no such trace.
    pub fn kernel_events(trace: &[&str]) -> Stamped<'static> {
        Stamped { lines: trace.iter().filter_map(|l| kernel_event(l)).collect() }
    }

    /// The first line at or after `from` containing `pat`.
    pub fn after(&self, from: Ns, pat: &str) -> Option<Ns> {
        self.lines.iter().find(|(t, l)| *t >= from && l.contains(pat)).map(|(t, _)| *t)
    }

    /// Every mark `what arg` between `from` and `to`.
    pub fn marks(&self, what: &str, from: Ns, to: Ns) -> Vec<(Ns, &'a str)> {
        self.lines
            .iter()
            .filter(|(t, _)| (from..=to).contains(t))
            .filter_map(|(t, l)| {
                let (w, arg) = l.split_once(' ').unwrap_or((l, ""));
                (w == what).then_some((*t, arg))
            })
            .collect()
    }
}

/// One trace line, `task-1 [001] d..1.  123.456789: ib_event:
/// (ib_dispatch_event+0x0/0x70 [ib_core]) event=9`: its time in ns and
/// the event's verbs name (only the port events the figures use).
fn kernel_event(line: &str) -> Option<(Ns, &'static str)> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "ib_event:")?;
    let (secs, frac) = words.get(at.checked_sub(1)?)?.strip_suffix(':')?.split_once('.')?;
    let scale = 10u64.checked_pow(9u32.checked_sub(frac.len() as u32)?)?;
    let t = secs.parse::<u64>().ok()?.checked_mul(1_000_000_000)?.checked_add(frac.parse::<u64>().ok()? * scale)?;
    let code = words.iter().find_map(|w| w.strip_prefix("event="))?;
    let code = match code.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16).ok()?,
        None => code.parse().ok()?,
    };
    let name = match code {
        8 => "IBV_EVENT_DEVICE_FATAL",
        9 => "IBV_EVENT_PORT_ACTIVE",
        10 => "IBV_EVENT_PORT_ERR",
        _ => return None,
    };
    Some((t, name))
}

// ---- the figures ----------------------------------------------------------------------

/// One (case, engine)'s figures.
#[derive(Default)]
pub struct Figures {
    pub case: &'static str,
    pub engine: &'static str,
    /// What the pulls' latencies are measured from: `kernel` (the trace of
    /// `ib_dispatch_event`) or `asyncwatch` (its stamped lines).
    pub reference: &'static str,
    pub pulls: usize,
    pub writes_ok: u64,
    /// WC status name -> count (the summary's object, as JSON).
    pub writes_failed: String,
    pub failed_posted_after_gate_closed: u64,
    pub refused: u64,
    pub stranded: bool,
    /// Writes never completed when the engine stopped (its ledger's
    /// `pending` records, after its bounded wind-down): work that hung.
    pub hung_writes_at_end: u64,
    pub admit_after_port_active_ms: Vec<Option<f64>>,
    pub close_after_port_err_ms: Vec<Option<f64>>,
    pub first_write_after_port_active_ms: Vec<Option<f64>>,
    pub other_rail_max_gap_ms: Vec<Option<f64>>,
    pub delete_returned_ms: Vec<Option<f64>>,
    /// Other case-specific figures: (key, values).
    pub extra: Vec<(&'static str, Vec<Option<f64>>)>,
    /// The breaker's numbers, for an engine with railwatch's machine.
    pub breaker: Option<Breaker>,
}

/// What an engine told railwatch's machine of its transfers, and what the
/// data-path breaker did with it.
#[derive(Default, Debug, PartialEq)]
pub struct Breaker {
    /// Completions reported, by status name (the summary's `reported`,
    /// summed over the rails).
    pub reported: BTreeMap<String, u64>,
    /// Rails the breaker took out (transitions from active with reason
    /// `data_path`; a failed probe's re-opening is none).
    pub trips: usize,
    /// Times the breaker went half-open, probes that closed it (the
    /// rail back `by` probe) and probes that failed or timed out.
    pub half_open: usize,
    pub probes_ok: usize,
    pub probes_failed: usize,
    /// Failures through one peer only, notified (the rail stayed).
    pub peer_failing: usize,
}

impl Breaker {
    /// From an engine run's lines; None when no rail reported (the engine
    /// without a machine).
    pub fn of(e: &Engine) -> Option<Breaker> {
        let summary = e.summary()?;
        let mut b = Breaker::default();
        let mut any = false;
        for rail in ["A", "B"] {
            for (status, n) in reported_of(summary, rail)? {
                any = true;
                *b.reported.entry(status).or_default() += n;
            }
        }
        // A failed probe opens it again from paused: not another trip.
        b.trips = e.count("transition", &[("from", "active"), ("to", "paused"), ("reason", "data_path")]);
        b.half_open = e.of_kind("half_open").len();
        b.probes_ok = e.count("transition", &[("to", "active"), ("by", "probe")]);
        b.probes_failed = e.of_kind("probe_failed").len();
        b.peer_failing = e.of_kind("peer_failing").len();
        any.then_some(b)
    }

    /// The JSON object of `reported`.
    pub fn reported_json(&self) -> String {
        let items: Vec<String> = self.reported.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
        format!("{{{}}}", items.join(","))
    }
}

/// `rail`'s `reported` object in a summary line (the last of the rail's
/// object, so that `Engine::end_of` keeps the flat fields before it), as
/// (status, count).
fn reported_of(summary: &str, rail: &str) -> Option<Vec<(String, u64)>> {
    let rails = json::raw(summary, "rails")?;
    let at = rails.find(&format!("\"rail\":\"{rail}\""))?;
    Some(status_counts(json::raw(&rails[at..], "reported")?))
}

/// One pull: the cable out at `pull`, back at `plug`.
#[derive(Clone, Copy)]
pub struct Pull {
    pub pull: Ns,
    pub plug: Ns,
}

/// What a pull's figures are measured against.
pub struct Reference<'a> {
    pub asyncwatch: &'a Stamped<'a>,
    /// The device whose cable is pulled ("rxe0"), its rail and the other.
    pub device: &'a str,
    pub rail: &'a str,
    pub other: &'a str,
}

impl Figures {
    /// The counters every case has, from the engine's summary.
    pub fn totals(&mut self, e: &Engine) -> Result<(), String> {
        let s = e.summary().ok_or("the engine printed no summary")?;
        self.writes_ok = ns(s, "writes_ok").ok_or("summary: no writes_ok")?;
        self.writes_failed = json::raw(s, "writes_failed").ok_or("summary: no writes_failed")?.to_string();
        self.refused = ns(s, "refused").ok_or("summary: no refused")?;
        self.hung_writes_at_end = ns(s, "writes_unfinished").ok_or("summary: no writes_unfinished")?;
        self.failed_posted_after_gate_closed = e.failed_after_gate_closed();
        self.breaker = Breaker::of(e);
        let stopped = ns(s, "stopped_ns").ok_or("summary: no stopped_ns")?;
        // Stranded: a rail whose port reads ACTIVE at the end carried no
        // write in the last second.
        self.stranded = ["A", "B"].iter().any(|r| {
            e.end_of(r).is_some_and(|o| {
                json::raw(o, "port_state") == Some("active")
                    && ns(o, "last_ok_ns").is_none_or(|t| t + 1_000_000_000 < stopped)
            })
        });
        Ok(())
    }

    /// The per-pull figures.
    pub fn pull(&mut self, e: &Engine, r: &Reference, p: Pull, next_pull: Option<Ns>) {
        let gates = e.gates(r.device);
        let until = next_pull.unwrap_or(Ns::MAX);
        let err_print = r.asyncwatch.after(p.pull, "IBV_EVENT_PORT_ERR").filter(|t| *t < p.plug);
        let active_print = r.asyncwatch.after(p.plug, "IBV_EVENT_PORT_ACTIVE").filter(|t| *t < until);
        let closed = gates.iter().find(|g| g.t >= p.pull && !g.admits).map(|g| g.t).filter(|t| *t < until);
        let admitted = gates.iter().find(|g| g.t >= p.plug && g.admits).map(|g| g.t).filter(|t| *t < until);
        self.close_after_port_err_ms.push(err_print.zip(closed).map(|(a, b)| ms_between(a, b)));
        self.admit_after_port_active_ms.push(active_print.zip(admitted).map(|(a, b)| ms_between(a, b)));
        let first_write = e
            .sets(r.rail)
            .iter()
            .filter(|(_, t)| *t >= p.plug && *t < until)
            .find_map(|(serial, _)| e.first_ok(r.rail, *serial));
        self.first_write_after_port_active_ms.push(active_print.zip(first_write).map(|(a, b)| ms_between(a, b)));
        // While the rail was out: from the pull to its first write after.
        let end = first_write.unwrap_or(p.plug + 1_000_000_000);
        self.other_rail_max_gap_ms.push(max_gap(e, r.other, p.pull, end));
        self.pulls += 1;
    }
}

/// The longest gap between successive successes on `rail` that overlaps
/// `from..to` (the engine reports gaps from its --gap-ms up); None when
/// there was none that long.
pub fn max_gap(e: &Engine, rail: &str, from: Ns, to: Ns) -> Option<f64> {
    e.gaps(rail)
        .iter()
        .filter(|(a, b)| *b >= from && *a <= to)
        .map(|(a, b)| ms_between(*a, *b))
        .fold(None, |m, g| Some(m.map_or(g, |m: f64| m.max(g))))
}

fn json_list(values: &[Option<f64>]) -> String {
    let items: Vec<String> = values.iter().map(|v| v.map_or_else(|| "null".into(), |v| format!("{v:.3}"))).collect();
    format!("[{}]", items.join(","))
}

impl Figures {
    /// The object of `traffic.json`'s `cases` array.
    pub fn json(&self) -> String {
        let mut o = format!(
            "{{\"case\":\"{}\",\"engine\":\"{}\",\"reference\":\"{}\",\"pulls\":{},\"writes_ok\":{},\"writes_failed\":{},\
             \"failed_posted_after_gate_closed\":{},\"refused\":{},\"stranded\":{},\"hung_writes_at_end\":{}",
            self.case,
            self.engine,
            self.reference,
            self.pulls,
            self.writes_ok,
            if self.writes_failed.is_empty() { "{}" } else { &self.writes_failed },
            self.failed_posted_after_gate_closed,
            self.refused,
            self.stranded,
            self.hung_writes_at_end
        );
        for (key, values) in [
            ("admit_after_port_active_ms", &self.admit_after_port_active_ms),
            ("close_after_port_err_ms", &self.close_after_port_err_ms),
            ("first_write_after_port_active_ms", &self.first_write_after_port_active_ms),
            ("other_rail_max_gap_ms", &self.other_rail_max_gap_ms),
            ("delete_returned_ms", &self.delete_returned_ms),
        ]
        .into_iter()
        .chain(self.extra.iter().map(|(k, v)| (*k, v)))
        {
            let _ = write!(o, ",\"{key}\":{}", json_list(values));
        }
        match &self.breaker {
            Some(b) => {
                let _ = write!(
                    o,
                    ",\"transfers_reported\":{},\"breaker_trips\":{},\"half_open\":{},\"probes_ok\":{},\
                     \"probes_failed\":{},\"peer_failing\":{}",
                    b.reported_json(),
                    b.trips,
                    b.half_open,
                    b.probes_ok,
                    b.probes_failed,
                    b.peer_failing
                );
            }
            None => o.push_str(",\"transfers_reported\":null,\"breaker_trips\":null"),
        }
        o + "}"
    }
}

/// A `{"status":count,...}` object's entries.
pub fn status_counts(obj: &str) -> Vec<(String, u64)> {
    obj.trim_matches(['{', '}'])
        .split(',')
        .filter_map(|kv| {
            let (k, v) = kv.split_once(':')?;
            Some((k.trim_matches('"').to_string(), v.parse().ok()?))
        })
        .collect()
}

/// "median / worst" of the values present, in ms ("-" when none).
pub fn median_worst(values: &[Option<f64>]) -> String {
    let mut v: Vec<f64> = values.iter().flatten().copied().collect();
    if v.is_empty() {
        return "-".into();
    }
    v.sort_by(f64::total_cmp);
    let median = if v.len() % 2 == 1 { v[v.len() / 2] } else { (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0 };
    let missing = values.len() - v.len();
    let worst = v[v.len() - 1];
    if missing > 0 { format!("{median:.2} / {worst:.2} ({missing} none)") } else { format!("{median:.2} / {worst:.2}") }
}

/// The printed table: a row per (case, engine).
pub fn table(all: &[Figures]) -> String {
    let mut t = String::from(
        "| case | engine | pulls | writes ok | failed | failed after gate closed | refused | stranded | hung at end | \
         admit after PORT_ACTIVE ms | close after PORT_ERR ms | first write after PORT_ACTIVE ms | \
         other rail max gap ms | delete ms |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for f in all {
        let failed: u64 = status_counts(&f.writes_failed).iter().map(|(_, n)| n).sum();
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            f.case,
            f.engine,
            f.pulls,
            f.writes_ok,
            failed,
            f.failed_posted_after_gate_closed,
            f.refused,
            f.stranded,
            f.hung_writes_at_end,
            median_worst(&f.admit_after_port_active_ms),
            median_worst(&f.close_after_port_err_ms),
            median_worst(&f.first_write_after_port_active_ms),
            median_worst(&f.other_rail_max_gap_ms),
            median_worst(&f.delete_returned_ms),
        );
    }
    for f in all {
        for (key, values) in &f.extra {
            let _ = writeln!(t, "{} / {}: {key} {}", f.case, f.engine, median_worst(values));
        }
        if let Some(b) = &f.breaker {
            let _ = writeln!(
                t,
                "{} / {}: transfers reported {}, breaker trips {}, half-open {}, probes {} ok / {} failed, peer failing {}",
                f.case,
                f.engine,
                b.reported_json(),
                b.trips,
                b.half_open,
                b.probes_ok,
                b.probes_failed,
                b.peer_failing
            );
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine(lines: &[&'static str]) -> Engine<'static> {
        Engine { lines: lines.to_vec() }
    }

    #[test]
    fn counts_failures_posted_after_the_gate_closed() {
        let e = engine(&[
            r#"{"kind":"gate","t_ns":100,"rail":"A","device":"rxe0","admits":true}"#,
            r#"{"kind":"gate","t_ns":100,"rail":"A","device":"rxe1","admits":true}"#,
            r#"{"kind":"gate","t_ns":500,"rail":"A","device":"rxe0","admits":false}"#,
            r#"{"kind":"gate","t_ns":900,"rail":"A","device":"rxe0","admits":true}"#,
            r#"{"kind":"failed","rail":"A","set":1,"status":"retry_exc_err","post_ns":400,"done_ns":800}"#,
            r#"{"kind":"failed","rail":"A","set":1,"status":"wr_flush_err","post_ns":600,"done_ns":800}"#,
            r#"{"kind":"failed","rail":"A","set":2,"status":"wr_flush_err","post_ns":950,"done_ns":990}"#,
        ]);
        assert_eq!(e.failed_after_gate_closed(), 1);
    }

    #[test]
    fn reads_what_was_reported_and_what_the_breaker_did() {
        let e = engine(&[
            r#"{"kind":"transition","t_ns":5,"device":"rxe0","rail":"A","generation":1,"from":"active","to":"paused","reason":"data_path"}"#,
            r#"{"kind":"half_open","t_ns":6,"device":"rxe0","rail":"A","generation":0}"#,
            r#"{"kind":"probe_failed","t_ns":6,"device":"rxe0","rail":"A","generation":0,"timed_out":false}"#,
            r#"{"kind":"half_open","t_ns":6,"device":"rxe0","rail":"A","generation":0}"#,
            r#"{"kind":"transition","t_ns":7,"device":"rxe0","rail":"A","generation":2,"from":"paused","to":"active","by":"probe"}"#,
            r#"{"kind":"summary","writes_ok":9,"rails":[{"rail":"A","local":"rxe0","writes_ok":5,"port_state":"active","last_ok_ns":8,"reported":{"retry_exc_err":2,"success":5}},{"rail":"B","local":"rxe2","writes_ok":4,"port_state":"active","last_ok_ns":8,"reported":{"success":4}}]}"#,
        ]);
        let b = Breaker::of(&e).expect("reported");
        assert_eq!(b.reported_json(), r#"{"retry_exc_err":2,"success":9}"#);
        assert_eq!((b.trips, b.half_open, b.probes_ok, b.probes_failed, b.peer_failing), (1, 2, 1, 1, 0));
        // The rail's flat fields before `reported` stay readable.
        assert_eq!(e.end_of("A").and_then(|o| json::raw(o, "last_ok_ns")), Some("8"));
        let old = engine(&[r#"{"kind":"summary","rails":[{"rail":"A","reported":{}},{"rail":"B","reported":{}}]}"#]);
        assert_eq!(Breaker::of(&old), None, "an engine without a machine reports nothing");
        assert_eq!(status_counts(r#"{"wr_flush_err":3,"retry_exc_err":1}"#).len(), 2);
    }

    #[test]
    fn measures_a_pull_against_the_reference() {
        let e = engine(&[
            r#"{"kind":"gate","t_ns":1000000,"rail":"A","device":"rxe0","admits":false}"#,
            r#"{"kind":"set","rail":"A","set":2,"t_ns":3050000000}"#,
            r#"{"kind":"gate","t_ns":3001000000,"rail":"A","device":"rxe0","admits":true}"#,
            r#"{"kind":"gap","rail":"B","from_ns":5000000,"to_ns":25000000,"ms":20.0}"#,
            r#"{"kind":"first_ok","rail":"A","set":2,"t_ns":3100000000}"#,
        ]);
        let aw = Stamped::parse(&[
            "900000 event_type IBV_EVENT_PORT_ERR (10), port 1",
            "3000000000 event_type IBV_EVENT_PORT_ACTIVE (9), port 1",
        ]);
        let r = Reference { asyncwatch: &aw, device: "rxe0", rail: "A", other: "B" };
        let mut f = Figures::default();
        f.pull(&e, &r, Pull { pull: 0, plug: 2_000_000_000 }, None);
        assert_eq!(f.pulls, 1);
        assert_eq!(f.close_after_port_err_ms, [Some(0.1)]);
        assert_eq!(f.admit_after_port_active_ms, [Some(1.0)]);
        assert_eq!(f.first_write_after_port_active_ms, [Some(100.0)]);
        assert_eq!(f.other_rail_max_gap_ms, [Some(20.0)]);
        assert_eq!(median_worst(&[Some(1.0), Some(3.0), None]), "2.00 / 3.00 (1 none)");
        assert!(f.json().contains("\"admit_after_port_active_ms\":[1.000]"));
    }

    #[test]
    fn reads_the_kernels_own_time_of_an_event() {
        let k = Stamped::kernel_events(&[
            "     kworker/1:2-57      [001] d..1.   12.000250: ib_event: (ib_dispatch_event+0x0/0x70 [ib_core]) event=9",
            "  <idle>-0 [000] ..s1. 13.5: ib_event: (ib_dispatch_event+0x0/0x70 [ib_core]) event=0xa",
            "  <idle>-0 [000] ..s1. 14.000001: ib_event: (ib_dispatch_event+0x0/0x70 [ib_core]) event=18",
            "# tracer: nop",
        ]);
        assert_eq!(k.lines, [(12_000_250_000, "IBV_EVENT_PORT_ACTIVE"), (13_500_000_000, "IBV_EVENT_PORT_ERR")]);
        assert_eq!(k.after(13_000_000_000, "IBV_EVENT_PORT_ERR"), Some(13_500_000_000));
    }
}
