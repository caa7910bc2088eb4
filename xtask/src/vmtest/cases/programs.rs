//! Programs other than railwatch run in the guest: the verbs backend's
//! system tests (case 7) and the gate_latency probe (case 8).

use super::super::json;
use super::Verdict;
use crate::vmtest::progress::CaseRun;

/// Case 7: the verbs backend's system tests pass in the guest.
pub fn check_system_tests(run: &CaseRun, v: &mut Verdict) {
    let out = run.out("test");
    v.require(run.rc("test") == Some(0), format!("the system test binary exited {:?}", run.rc("test")));
    match out.iter().find(|l| l.starts_with("test result:")) {
        Some(result) => {
            v.require(result.starts_with("test result: ok."), result.to_string());
            v.note(result.to_string());
        }
        None => v.fail("no `test result:` line"),
    }
}

/// Case 8: the figure for docs/PERFORMANCE.md. The probe times, from the
/// same `ip link set veth1 up`, the rail's gate admitting and
/// `ibv_asyncwatch` printing the PORT_ACTIVE; its summary line has the
/// medians and their ratio.
pub fn check_gate_latency(run: &CaseRun, v: &mut Verdict) {
    let out = run.out("probe");
    v.require(run.rc("probe") == Some(0), format!("the gate_latency probe exited {:?}", run.rc("probe")));
    for line in run.out("probe.err") {
        v.note(format!("probe: {line}"));
    }
    let rounds = out.iter().filter(|l| l.contains("\"round\"")).count();
    let Some(summary) = out.iter().find(|l| json::is(l, &[("summary", "true")])) else {
        v.fail("the probe printed no summary line");
        return;
    };
    let field = |k| json::raw(summary, k).and_then(|s| s.parse::<f64>().ok());
    match (field("median_gate_us"), field("median_asyncwatch_us"), field("ratio"), field("median_extra_us")) {
        (Some(gate), Some(print), Some(ratio), Some(extra)) => {
            v.require(rounds >= 1 && gate > 0.0 && print > 0.0, format!("no timed round: {summary}"));
            v.note(format!(
                "veth1 up -> gate admits: median {:.2} ms; -> ibv_asyncwatch prints PORT_ACTIVE: median {:.2} ms; \
                 ratio {ratio:.3}; gate minus print per round: median {extra:+.0} us ({rounds} rounds)",
                gate / 1000.0,
                print / 1000.0
            ));
        }
        _ => v.fail(format!("the summary line lacks a field: {summary}")),
    }
}
