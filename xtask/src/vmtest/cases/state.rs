//! The state API on the real kernel (case 16): `rails --nccl` and `check
//! --npd` through a cable pull, and how long after the kernel's event a
//! stream reader hears the change.

use super::super::json;
use super::watch::check_watch;
use super::{RAIL, Verdict};
use crate::vmtest::progress::CaseRun;

/// The most a change may take to reach a stream reader (issue 30).
const STREAM_TARGET_MS: f64 = 5.0;

/// A stamped line (`NS rest`): its stamp and the rest.
fn stamped(line: &str) -> Option<(u64, &str)> {
    let (ns, rest) = line.split_once(' ')?;
    Some((ns.parse().ok()?, rest))
}

/// Case 16: before the pull `rails --nccl` prints rxe0:1 (exit 0) and
/// `check --npd` says ok (0); during it nothing (1) and a problem (1);
/// after, both as before. The stream reader's `rail` lines say rxe0/1
/// unusable, then usable, each after ibv_asyncwatch's PORT_ERR and
/// PORT_ACTIVE: the figure is the reader's stamp minus asyncwatch's.
pub fn check_state_api(run: &CaseRun, v: &mut Verdict) {
    let w = check_watch(run, v, RAIL, "active", true);
    let nccl = "NCCL_IB_HCA==rxe0:1";
    for (moment, rails, check) in [
        ("before", (nccl, 0), ("ok: 1/1 rails usable", 0)),
        ("down", ("", 1), ("problem: 0/1 rails usable; down: rxe0/1", 1)),
        ("after", (nccl, 0), ("ok: 1/1 rails usable", 0)),
    ] {
        for (what, (want, rc)) in [("rails", rails), ("check", check)] {
            let out = run.out(&format!("{what}.{moment}"));
            let printed: Vec<&str> = out.iter().copied().filter(|l| !l.starts_with("rc=")).collect();
            let wanted: Vec<&str> = if want.is_empty() { vec![] } else { vec![want] };
            v.require(
                printed == wanted && out.last() == Some(&format!("rc={rc}").as_str()),
                format!("{what} {moment} the pull: {out:?}, want {wanted:?} and exit {rc}"),
            );
        }
    }
    let stream = run.out("stream");
    let aw = run.out("asyncwatch");
    let (Some(down), Some(up)) = (run.step("stream", "down"), run.step("stream", "up")) else {
        v.fail("the guest recorded no down/up steps of the stream");
        return;
    };
    let heard = |from: usize, usable: &str| {
        stream.iter().skip(from).filter_map(|l| stamped(l)).find(|(_, l)| {
            json::is(l, &[("kind", "rail")]) && l.contains(&format!("\"usable\":{usable}")) && l.contains(RAIL)
        })
    };
    let event = |name: &str, after: u64| {
        aw.iter().filter_map(|l| stamped(l)).find(|(ns, l)| *ns >= after && l.contains(name)).map(|(ns, _)| ns)
    };
    let mut figures = Vec::new();
    let start = aw.iter().filter_map(|l| stamped(l)).map(|(ns, _)| ns).next().unwrap_or(0);
    let moments = [("down", down, "false", "PORT_ERR", "paused"), ("up", up, "true", "PORT_ACTIVE", "active")];
    let mut after = start;
    for (moment, from, usable, name, to) in moments {
        let Some((reader, line)) = heard(from, usable) else {
            v.fail(format!("the stream reader heard no rail line with usable {usable} after the {moment}"));
            return;
        };
        let Some(kernel) = event(name, after) else {
            v.fail(format!("ibv_asyncwatch printed no {name} after the {moment}"));
            return;
        };
        after = reader;
        let ms = (reader as f64 - kernel as f64) / 1e6;
        // On the agent's clock: the transition, and the snapshot the line
        // carries (published as soon as the rail changed, before the
        // loop's reads that follow, or a later one if the server's thread
        // ran only after the next publish).
        let transition = w
            .iter()
            .rev()
            .find(|l| json::is(l, &[("kind", "transition"), ("rail", RAIL), ("to", to)]))
            .and_then(|l| json::num(l, "t_ms"));
        let turn = transition.zip(json::num(line, "t_ms")).map_or("?".to_owned(), |(t, s)| format!("{}", s - t));
        figures.push(format!(
            "{moment}: {name} printed by ibv_asyncwatch -> the reader's line {ms:.2} ms \
             (the snapshot it carries taken {turn} ms after the transition, on the agent's clock)"
        ));
        if ms > STREAM_TARGET_MS {
            v.note(format!("over the {STREAM_TARGET_MS} ms target of issue 30 ({moment}: {ms:.2} ms)"));
        }
    }
    v.note(format!("state stream: {}", figures.join("; ")));
}
