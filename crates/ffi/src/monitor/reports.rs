//! What the engine tells a monitor about its own traffic: transfer
//! outcomes and a granted probe's outcome, by rail name, from any thread
//! (the monitor thread's callbacks included). Handed over without
//! waiting; the monitor applies them at its clock's time.

use std::ffi::c_char;

use railwatch_core::TransferReport;

use crate::args::{handle, slice, text};
use crate::evidence::rw_transfer_report;
use crate::limits::TRANSFER_REPORTS;
use crate::status::{Error, Result, guard, rw_status};

use super::{lock, rw_monitor};

/// With the running monitor behind `monitor` and the id of its rail
/// called `rail`.
fn with_rail(
    monitor: *const rw_monitor,
    rail: *const c_char,
    body: impl FnOnce(&dyn super::Running, railwatch_core::RailId) -> Result<std::io::Result<()>>,
) -> rw_status {
    guard(|| {
        // SAFETY: a live monitor or NULL, and a NUL-terminated name, by the
        // API's contract.
        let (m, rail) = unsafe { (handle(monitor, "monitor")?, text(rail, "rail")?) };
        let (id, _) = m.shared.rail(rail)?;
        let running = lock(&m.running);
        let running = running.as_deref().ok_or_else(stopped)?;
        body(running, id)?.map_err(|_| stopped())
    })
}

fn stopped() -> Error {
    Error::new(rw_status::RW_ERR_STATE, "the monitor has stopped")
}

/// Transfer outcomes on the rail called `rail` (`"mlx5_0/1"`) since the
/// engine's last report, `n` lines at `reports` (at most
/// `RW_MAX_TRANSFER_REPORTS`), as `rw_machine_report_transfers` takes them
/// (the same breaker, peers and window). Any thread; copied and handed to
/// the monitor thread without waiting. `RW_ERR_NOT_FOUND` for a rail the
/// monitor does not have (yet), `RW_ERR_STATE` once it stopped.
#[unsafe(no_mangle)]
pub extern "C" fn rw_monitor_report_transfers(
    monitor: *const rw_monitor,
    rail: *const c_char,
    reports: *const rw_transfer_report,
    n: usize,
) -> rw_status {
    with_rail(monitor, rail, |running, id| {
        // SAFETY: `n` lines at `reports`, by the API's contract (`slice`
        // checks the bound before any read).
        let given = unsafe { slice(reports, n, TRANSFER_REPORTS, "n", "reports") }?;
        let lines: Vec<TransferReport> =
            given.iter().map(|l| TransferReport { peer: l.peer, wc_status: l.wc_status, count: l.count }).collect();
        Ok(running.report_transfers(id, &lines))
    })
}

/// The outcome of the probe `rw_gate_probe` granted on the rail called
/// `rail`, as `rw_machine_report_probe` takes it (`succeeded`: its
/// transfer completed with success). Any thread; handed to the monitor
/// thread without waiting. `RW_ERR_NOT_FOUND` for a rail the monitor does
/// not have (yet), `RW_ERR_STATE` once it stopped.
#[unsafe(no_mangle)]
pub extern "C" fn rw_monitor_report_probe(
    monitor: *const rw_monitor,
    rail: *const c_char,
    succeeded: bool,
) -> rw_status {
    with_rail(monitor, rail, |running, id| Ok(running.report_probe(id, succeeded)))
}
