//! Devices leaving and arriving under `watch`: the netdev deleted (case 3),
//! `rdma link delete` (case 4), `rdma link add` (case 5).

use super::super::json;
use super::record::check_replay;
use super::watch::{check_watch, find, summary_device};
use super::{RAIL, Verdict};
use crate::vmtest::progress::CaseRun;

/// What the removal cases expect of railwatch once the device leaves: the
/// rail inert (device_removed) while railwatch still runs, so the kernel's
/// removal did not wait for its exit.
/// Returns the watch's lines.
fn check_removed<'r>(run: &'r CaseRun, v: &mut Verdict, step_name: &str, delete: &str) -> Vec<&'r str> {
    let w = check_watch(run, v, RAIL, "inert", false);
    let Some(at) = run.step("watch", step_name) else {
        v.fail(format!("the guest recorded no {step_name} step"));
        return w;
    };
    v.require(
        find(&w, at, &[("kind", "transition"), ("rail", RAIL), ("to", "inert"), ("reason", "device_removed")])
            .is_some(),
        "no transition of rxe0/1 to inert because device_removed",
    );
    match (run.time(delete), run.time(&format!("{delete}_after_sigterm"))) {
        (Some(t), None) => v.note(format!("{delete} returned after {t:.3} s with railwatch watching")),
        (Some(t), Some(after)) => v.fail(format!(
            "{delete} blocked until railwatch was stopped: {t:.3} s in all, {after:.3} s after its SIGTERM"
        )),
        (None, _) => v.fail(format!("{delete} did not return")),
    }
    if let Some(summary) = w.iter().rev().find(|l| json::is(l, &[("kind", "summary")])) {
        let dev = summary_device(summary, "rxe0");
        v.require(
            dev.is_some_and(|d| json::is(d, &[("mode", "removed")])),
            format!("summary: rxe0 is not in mode removed: {dev:?}"),
        );
    }
    w
}

/// Case 3: veth0 deleted under rxe0.
pub fn check_netdev_deleted(run: &CaseRun, v: &mut Verdict) {
    check_removed(run, v, "netdev_del", "ip_link_del");
}

/// Case 4: `rdma link delete rxe0`, recorded: the recording of the host
/// losing its only device replays with the live run's transitions.
pub fn check_rdma_link_delete(run: &CaseRun, v: &mut Verdict) {
    let w = check_removed(run, v, "rdma_delete", "rdma_link_delete");
    let text = check_replay(run, v, &w, "recorded-removal.toml");
    v.require(text.contains("fault = \"unplug\""), "the recording has no unplug of rxe0");
}

/// Case 5: a new device (rxe1), then rxe0 deleted and added again.
pub fn check_hotplug_add(run: &CaseRun, v: &mut Verdict) {
    let w = check_watch(run, v, "rxe1/1", "active", true);
    let text = check_replay(run, v, &w, "recorded-hotplug.toml");
    v.require(text.contains("present = false"), "rxe1 is not declared as appearing later");
    v.require(text.contains("fault = \"unplug\""), "the recording has no unplug of rxe0");
    if let Some(at) = run.step("watch", "add_rxe1") {
        v.require(
            find(&w, at, &[("kind", "transition"), ("rail", "rxe1/1"), ("from", "inert")]).is_some(),
            "rxe1/1 was not attached after `rdma link add rxe1`",
        );
    } else {
        v.fail("the guest recorded no add_rxe1 step");
    }
    match run.step("watch", "readd_rxe0") {
        Some(at) => {
            v.require(
                find(&w, at, &[("kind", "transition"), ("rail", RAIL), ("by", "attach")]).is_some(),
                "rxe0/1 was not attached again after `rdma link add rxe0`",
            );
        }
        None => v.fail("rxe0 was not added again (its delete did not finish)"),
    }
}
