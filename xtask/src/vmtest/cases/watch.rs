//! What every `watch` case checks (the attach, the exit status, the
//! summary), and finding lines in `watch --json`'s output.

use super::super::json;
use super::{RAIL, Verdict};
use crate::vmtest::progress::CaseRun;

/// The first line at or after `from` matching `pairs`.
pub fn find(lines: &[&str], from: usize, pairs: &[(&str, &str)]) -> Option<usize> {
    lines.iter().enumerate().skip(from).find(|(_, l)| json::is(l, pairs)).map(|(i, _)| i)
}

/// How many lines at or after `from` match `pairs`.
pub fn count(lines: &[&str], from: usize, pairs: &[(&str, &str)]) -> usize {
    lines.iter().skip(from).filter(|l| json::is(l, pairs)).count()
}

/// A line's `generation`.
pub fn generation(line: &str) -> Option<u64> {
    json::raw(line, "generation")?.parse().ok()
}

/// The last generation `rail` reached in transitions before line `before`.
pub fn generation_before(lines: &[&str], rail: &str, before: usize) -> Option<u64> {
    lines[..before.min(lines.len())]
        .iter()
        .filter(|l| json::is(l, &[("kind", "transition"), ("rail", rail)]))
        .filter_map(|l| generation(l))
        .next_back()
}

/// Checks shared by every watch case: the attach, the exit status, the
/// summary (the rail as `state`/`available`, its rate, the generation of
/// its last transition, the counters). Returns the watch output's lines.
pub fn check_watch<'a>(run: &'a CaseRun, v: &mut Verdict, rail: &str, state: &str, available: bool) -> Vec<&'a str> {
    let w = run.out("watch");
    v.require(
        run.rc("watch") == Some(0),
        format!("railwatch watch exited {:?}, not 0 (after SIGTERM)", run.rc("watch")),
    );
    match find(&w, 0, &[("kind", "transition"), ("rail", RAIL), ("by", "attach")]) {
        Some(i) => {
            // With require_address the rail attaches paused (no_address)
            // and activates once its address is read.
            let waited = find(&w, 0, &[("kind", "transition"), ("rail", RAIL)])
                .is_some_and(|j| j < i && json::is(w[j], &[("from", "inert"), ("reason", "no_address")]));
            let from = if waited { "paused" } else { "inert" };
            v.require(
                json::is(w[i], &[("from", from), ("to", "active")]),
                format!("rxe0/1's attach is not {from} -> active: {}", w[i]),
            );
        }
        None => v.fail("no attach transition for rxe0/1"),
    }
    let Some(summary) = w.iter().rev().find(|l| json::is(l, &[("kind", "summary")])) else {
        v.fail("no summary line after SIGTERM");
        return w;
    };
    v.require(w.last() == Some(summary), "the summary is not the last line");
    let Some(r) = json::object_with(summary, &format!("\"rail\":\"{rail}\"")) else {
        v.fail(format!("the summary has no rail {rail}"));
        return w;
    };
    let available_s = if available { "true" } else { "false" };
    v.require(
        json::is(r, &[("state", state), ("available", available_s)]),
        format!("summary: {rail} is not {state} with available {available_s}: {r}"),
    );
    if state == "active" {
        v.require(json::num(r, "bandwidth_gbps") == Some(10.0), format!("summary: {rail} is not at 10 Gb/s: {r}"));
    }
    let last = generation_before(&w, rail, w.len());
    v.require(
        generation(r).is_some() && generation(r) == last,
        format!("summary: {rail} generation {:?}, its last transition said {last:?}", generation(r)),
    );
    let (read, acked) = (json::num(summary, "events_read"), json::num(summary, "events_acked"));
    v.require(read.is_some() && read == acked, format!("summary: events_read {read:?} != events_acked {acked:?}"));
    let printed = count(&w, 0, &[("kind", "event")]);
    v.require(
        read.is_some_and(|r| r >= printed as f64),
        format!("summary: events_read {read:?} < {printed} event lines printed"),
    );
    if let Some(dev) = summary_device(summary, "rxe0")
        && state != "inert"
    {
        v.require(
            json::is(dev, &[("mode", "events"), ("read_errors", "0")]),
            format!("summary: rxe0 not in events mode without read errors: {dev}"),
        );
    }
    w
}

/// `device`'s object in a summary line's `devices` array (its rails, in
/// `rails`, name their device too).
pub fn summary_device<'a>(summary: &'a str, device: &str) -> Option<&'a str> {
    json::object_with(json::raw(summary, "devices")?, &format!("\"device\":\"{device}\""))
}
