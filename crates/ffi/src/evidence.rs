//! Evidence beyond the port state, from C: the engine reports its transfer
//! outcomes (the data-path breaker) and its probes' (the breaker's way
//! back), and answers the machine's flap-counter reads (silent flaps).

use railwatch_core::{Errno, PortCounters, RailId, TransferReport};

use crate::args::{put, slice};
use crate::limits::TRANSFER_REPORTS;
use crate::machine::{port_in, rw_machine, with, with_at};
use crate::status::{Error, rw_status};

/// A counter the driver does not have (`rw_machine_handle_counters`).
pub const RW_COUNTER_NONE: u64 = u64::MAX;

/// One line of a transfer report: `count` completions with `wc_status`
/// (`ibv_wc_status`; 0 is success) on transfers to `peer` (an id the
/// engine chooses: a remote NIC, a host).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct rw_transfer_report {
    /// The engine's id of the peer.
    pub peer: u64,
    /// The work-completion status.
    pub wc_status: u32,
    /// How many completions had it.
    pub count: u32,
}

/// Transfer outcomes on the rail of `device`'s `port` since the engine's
/// last report: `n` lines at `reports` (at most `RW_MAX_TRANSFER_REPORTS`).
/// Failures against the local path (`IBV_WC_RETRY_EXC_ERR`,
/// `IBV_WC_LOC_QP_OP_ERR`, ...) through enough distinct peers within the
/// window open the data-path breaker (the rail pauses, reason
/// `RW_REASON_DATA_PATH`); through one peer only they are notified
/// (`RW_HAPPENING_PEER_FAILING`) and the rail stays. Successes close
/// nothing: only a probe does (`rw_machine_report_probe`). Flush errors are
/// never counted. No allocation.
#[unsafe(no_mangle)]
pub extern "C" fn rw_machine_report_transfers(
    machine: *mut rw_machine,
    device: u32,
    port: u32,
    reports: *const rw_transfer_report,
    n: usize,
    now_ms: u64,
) -> rw_status {
    with_at(machine, now_ms, |m, now| {
        let port = port_in(m, device, port)?;
        // SAFETY: `n` lines at `reports`, by the API's contract (`slice`
        // checks the bound before any read).
        let lines = unsafe { slice(reports, n, TRANSFER_REPORTS, "n", "reports") }?;
        // rw_transfer_report has TransferReport's fields in its order; the
        // conversion is per line, on the stack, a few at a time.
        let mut batch = [TransferReport { peer: 0, wc_status: 0, count: 0 }; 64];
        for chunk in lines.chunks(batch.len()) {
            for (slot, l) in batch.iter_mut().zip(chunk) {
                *slot = TransferReport { peer: l.peer, wc_status: l.wc_status, count: l.count };
            }
            m.handle_transfers(device, port, &batch[..chunk.len()], now);
        }
        Ok(())
    })
}

/// The outcome of the probe `rw_gate_probe` granted on the rail of
/// `device`'s `port` (`succeeded` true: its transfer completed with
/// success). Success closes the data-path breaker: the rail activates
/// (`RW_BY_PROBE`, the generation moves once). Failure opens it again with
/// the next backoff (`RW_HAPPENING_PROBE_FAILED`). A report with no probe
/// out is ignored. No allocation.
#[unsafe(no_mangle)]
pub extern "C" fn rw_machine_report_probe(
    machine: *mut rw_machine,
    device: u32,
    port: u32,
    succeeded: bool,
    now_ms: u64,
) -> rw_status {
    with_at(machine, now_ms, |m, now| {
        let port = port_in(m, device, port)?;
        m.handle_probe(device, port, succeeded, now);
        Ok(())
    })
}

/// The answer to `RW_ACTION_READ_COUNTERS`: `error` 0 and the port's
/// counters (`RW_COUNTER_NONE` for one the driver does not have), or the
/// errno of a read that failed (ENOENT where the driver has none: the
/// machine stops asking for the port). A rise with no PORT_ERR seen on an
/// active rail is a silent flap: the generation moves
/// (`RW_CAUSE_SILENT_FLAP`).
#[unsafe(no_mangle)]
pub extern "C" fn rw_machine_handle_counters(
    machine: *mut rw_machine,
    device: u32,
    port: u32,
    error: i32,
    link_downed: u64,
    carrier_changes: u64,
    carrier_down: u64,
    now_ms: u64,
) -> rw_status {
    with_at(machine, now_ms, |m, now| {
        let port = port_in(m, device, port)?;
        let some = |v: u64| (v != RW_COUNTER_NONE).then_some(v);
        let answer = match error {
            0 => Ok(PortCounters {
                link_downed: some(link_downed),
                carrier_changes: some(carrier_changes),
                carrier_down: some(carrier_down),
            }),
            e => Err(Errno(e)),
        };
        m.handle_counters(device, port, answer, now);
        Ok(())
    })
}

/// Writes to `*index` the GID index `require_address` chose for the rail
/// (endpoints are built on it). `RW_ERR_NOT_FOUND` when none is chosen
/// (`require_address` is `none`, or the rail has no such address yet).
#[unsafe(no_mangle)]
pub extern "C" fn rw_machine_gid_index(machine: *mut rw_machine, device: u32, port: u32, index: *mut u32) -> rw_status {
    with(machine, |m| {
        let port = port_in(m, device, port)?;
        if index.is_null() {
            return Err(crate::status::null("index"));
        }
        let chosen = m.rail(RailId { device, port }).and_then(|r| r.gid_index);
        let chosen = chosen.ok_or_else(|| {
            Error::new(rw_status::RW_ERR_NOT_FOUND, format!("rail {device}/{port} has no GID index chosen"))
        })?;
        // SAFETY: checked non-null; the caller passes a writable u32.
        unsafe { put(index, chosen, "index") }
    })
}
