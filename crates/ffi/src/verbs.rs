//! The machine's questions answered over an engine's own libibverbs
//! context (embedding 1): the port state with its netdev's carrier, the
//! link, the address and the flap counters, read the way railwatch's own
//! monitor reads them (railwatch-verbs-backend's `PortReads`). The context
//! stays the engine's: railwatch never closes it.

use std::ffi::c_void;

use railwatch_core::Action;

use crate::args::handle;
use crate::machine::{port_in, rw_action, rw_action_kind, rw_machine, with_at};
use crate::status::{Error, Result, rw_status};

/// Answers the query `action` (`RW_ACTION_QUERY_PORT`, `READ_LINK`,
/// `READ_ADDRESS` or `READ_COUNTERS`) by reading its port over `context`,
/// the engine's `struct ibv_context *` for the action's device, and
/// handing the machine the result, failure included (as its
/// `rw_machine_handle_*` would take it): the port state with the netdev's
/// carrier from sysfs, the link (`ibv_query_port`, and
/// `ibv_query_port_speed` where libibverbs has it), the GID table with each
/// entry's type and netdev, the flap counters from sysfs. Poll the actions
/// it causes as after any input. `RW_ERR_INVALID` for another kind of
/// action, `RW_ERR_NULL` for a NULL context; `RW_ERR_UNSUPPORTED` in a
/// library built without the `verbs` feature.
#[unsafe(no_mangle)]
pub extern "C" fn rw_machine_answer_verbs(
    machine: *mut rw_machine,
    action: *const rw_action,
    context: *mut c_void,
    now_ms: u64,
) -> rw_status {
    with_at(machine, now_ms, |m, now| {
        // SAFETY: NULL or an action, by the API's contract.
        let a = unsafe { handle(action, "action") }?;
        if context.is_null() {
            return Err(crate::status::null("context"));
        }
        let ask = query_of(a.kind)?;
        let query = ask(a.device, port_in(m, a.device, a.port)?);
        // SAFETY: a live context of the action's device, by the API's
        // contract; used for this call only.
        unsafe { read::answer(m, query, context, now) }
    })
}

/// The query an action of `kind` asks, made from its device and port; or
/// `RW_ERR_INVALID`.
fn query_of(kind: u32) -> Result<fn(u32, u8) -> Action> {
    use rw_action_kind::*;
    Ok(match kind {
        k if k == RW_ACTION_QUERY_PORT as u32 => |device, port| Action::QueryPort { device, port },
        k if k == RW_ACTION_READ_LINK as u32 => |device, port| Action::ReadLink { device, port },
        k if k == RW_ACTION_READ_ADDRESS as u32 => |device, port| Action::ReadAddress { device, port },
        k if k == RW_ACTION_READ_COUNTERS as u32 => |device, port| Action::ReadCounters { device, port },
        other => {
            return Err(Error::new(
                rw_status::RW_ERR_INVALID,
                format!("action kind {other} is not a port query (QUERY_PORT, READ_LINK, READ_ADDRESS, READ_COUNTERS)"),
            ));
        }
    })
}

#[cfg(feature = "verbs")]
mod read {
    use std::ffi::c_void;
    use std::path::Path;

    use railwatch_core::{Action, Machine, Millis};
    use railwatch_runtime::errno_of;
    use railwatch_verbs_backend::{PortReads, RawContext, context_device_name, read_carrier};

    use crate::status::{Error, Result, rw_status};

    /// Reads what `query` asks over `context` and feeds it to `m`.
    ///
    /// # Safety
    /// `context` is a live `struct ibv_context *`.
    pub(super) unsafe fn answer(m: &mut Machine, query: Action, context: *mut c_void, now: Millis) -> Result<()> {
        let ctx = context.cast::<RawContext>();
        // SAFETY: a live context (the caller's promise).
        let name = unsafe { context_device_name(ctx) }
            .ok_or_else(|| Error::new(rw_status::RW_ERR_INVALID, "the context's device name is not UTF-8"))?;
        // SAFETY: as above, for the length of this call.
        let reads = unsafe { PortReads::new(ctx, name) };
        let errno = |e: std::io::Error| errno_of(&e);
        match query {
            Action::QueryPort { device, port } => {
                let carrier = read_carrier(Path::new("/sys"), name, port).ok();
                m.handle_port_reading(device, port, reads.port_state(port).map_err(errno), carrier, now);
            }
            Action::ReadLink { device, port } => m.handle_link(device, port, reads.link(port).map_err(errno), now),
            Action::ReadAddress { device, port } => {
                let address = reads.address(port).map_err(errno);
                m.handle_address(device, port, address.as_ref().map_err(|e| *e), now);
            }
            Action::ReadCounters { device, port } => {
                m.handle_counters(device, port, reads.counters(port).map_err(errno), now);
            }
            _ => unreachable!("query_of makes only port queries"),
        }
        Ok(())
    }
}

#[cfg(not(feature = "verbs"))]
mod read {
    use std::ffi::c_void;

    use railwatch_core::{Action, Machine, Millis};

    use crate::status::{Error, Result, rw_status};

    /// Without libibverbs there is nothing to read with.
    ///
    /// # Safety
    /// None needed; the signature matches the `verbs` build's.
    pub(super) unsafe fn answer(_m: &mut Machine, _query: Action, _context: *mut c_void, _now: Millis) -> Result<()> {
        Err(Error::new(rw_status::RW_ERR_UNSUPPORTED, "railwatch was built without the `verbs` feature"))
    }
}
