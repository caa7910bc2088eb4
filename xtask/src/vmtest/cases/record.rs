//! Recordings replayed: `watch --record` through a flap and a GID change
//! (case 10), and the replay check the hotplug case shares.

use std::fs;

use super::super::json;
use super::watch::check_watch;
use super::{RAIL, Verdict};
use crate::run::target_dir;
use crate::vmtest::progress::CaseRun;

/// `rail from->to cause gN` for every transition line.
fn transitions(lines: &[&str]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| json::is(l, &[("kind", "transition")]))
        .map(|l| {
            let cause = json::raw(l, "reason").or_else(|| json::raw(l, "by")).unwrap_or("?");
            let field = |k| json::raw(l, k).unwrap_or("?");
            format!("{} {}->{} {cause} g{}", field("rail"), field("from"), field("to"), field("generation"))
        })
        .collect()
}

/// Case 10: the recording of a flap and a GID change replays with the
/// live run's transitions, in order.
pub fn check_record(run: &CaseRun, v: &mut Verdict) {
    let w = check_watch(run, v, RAIL, "active", true);
    let text = check_replay(run, v, &w, "recorded.toml");
    v.require(text.contains("event = \"port_err\""), "the recording has no port_err step");
    v.require(text.contains("gid = {"), "the recording has no gid step");
    v.require(transitions(&w).iter().any(|t| t.contains("gid_change")), "no gid_change bump live");
    check_input_log(run, v);
}

/// The second agent's input log, replayed and lifted in the guest: no
/// divergence, its transitions exactly; the lifted scenario replays it.
fn check_input_log(run: &CaseRun, v: &mut Verdict) {
    let live = transitions(&run.out("watch2"));
    let replayed = transitions(&run.out("relog"));
    let said = run.out("relog.err").join(" ");
    v.require(run.rc("relog") == Some(0), format!("railwatch replay exited {:?}: {said}", run.rc("relog")));
    v.require(!live.is_empty(), "the logging agent saw no transition");
    if replayed == live {
        v.note(format!("the input log replays the second agent's {} transitions exactly: {said}", live.len()));
    } else {
        v.fail(format!("the input log's replay {replayed:?} is not the second agent's {live:?}"));
    }
    let lift = run.out("lift.err").join(" ");
    v.require(run.rc("lift") == Some(0), format!("railwatch lift exited {:?}: {lift}", run.rc("lift")));
}

/// The guest's recording (kept beside the run as `keep`) replayed in the
/// guest: its closing expectations hold and its transitions are the live
/// run's `w`, in order. Returns the recording.
pub fn check_replay(run: &CaseRun, v: &mut Verdict, w: &[&str], keep: &str) -> String {
    let live = transitions(w);
    let text = run.out("recording").join("\n");
    let kept = target_dir().join("vm-cache").join("run").join(keep);
    if let Err(e) = fs::write(&kept, format!("{text}\n")) {
        v.note(format!("could not keep the recording at {}: {e}", kept.display()));
    }
    v.require(
        text.contains("[[device]]") && text.contains("[[expect]]"),
        "the recording has no device or no expectations",
    );
    v.require(
        run.rc("replay") == Some(0),
        format!("the replay exited {:?}: {:?}", run.rc("replay"), run.out("replay.err")),
    );
    let replayed = transitions(&run.out("replay"));
    if replayed == live {
        v.note(format!(
            "the replay's {} transitions are the live run's; recording {} bytes, {} steps",
            live.len(),
            text.len() + 1,
            text.matches("[[step]]").count()
        ));
    } else {
        v.fail(format!("the replay's transitions {replayed:?} are not the live run's {live:?}"));
    }
    text
}
