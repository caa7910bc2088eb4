//! A whole `railwatch simulate` run on arbitrary input: parse, then drive
//! the real monitor over simulated devices through the scenario, in virtual
//! time, with a budget.
//!
//! - Never panics, whatever the bytes.
//! - Never hangs: the run ends within its instants budget (the driver skips
//!   idle time, so a long `duration_ms` costs a few instants), and each
//!   input must finish within libFuzzer's `-timeout`.
//! - The output is complete: the summary's events read equal the `event`
//!   notifications plus the COMM_ESTs (which are counted, not notified), and
//!   nothing is dropped.
//!
//! Inputs that queue more than 100k events are skipped: the per-run limits
//! (10M events in all) are tested by the CLI's tests; here they would only
//! slow the search.

#![no_main]

use libfuzzer_sys::fuzz_target;
use railwatch_runtime::Happening;
use railwatch_runtime::lines::Record;
use railwatch_scenario::Scenario;
use railwatch_scenario::driver::{self, RunOptions};

const MAX_EVENTS: u64 = 100_000;
const MAX_INSTANTS: u64 = 200_000;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(scenario) = Scenario::parse(text, "fuzz.toml") else { return };
    let queued: u64 = scenario.steps.iter().map(|s| s.event.map_or(0, |e| e.repeat)).sum();
    let rails: usize = scenario.devices.iter().map(|d| d.ports.len()).sum();
    if queued > MAX_EVENTS || rails > 1024 {
        return;
    }
    let opts = RunOptions { max_instants: Some(MAX_INSTANTS), ..RunOptions::default() };
    let mut events = 0u64;
    let result = driver::run(&scenario, &opts, |_, record| {
        if let Record::Note(n) = record {
            if matches!(n.what, Happening::Event { .. }) {
                events += 1;
            }
        }
    });
    let summary = match result {
        Ok(s) => s,
        // Running out of fds is the machine's limit, not the scenario's.
        Err(e) if e.raw_os_error() == Some(24) => return,
        Err(e) => panic!("the run failed: {e}"),
    };
    let comm_est: u64 = summary.snapshot.devices.iter().map(|d| d.counters.comm_est).sum();
    assert_eq!(events + comm_est, summary.events_read, "every event read is in the output or counted");
    assert_eq!(summary.events_read, summary.events_acked);
    assert_eq!(summary.snapshot.notifications_dropped, 0);
});
