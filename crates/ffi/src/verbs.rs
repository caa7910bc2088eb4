//! The machine's questions answered over an engine's own libibverbs
//! context (embedding 1): the port state with its netdev's carrier, the
//! link, the address and the flap counters, read the way railwatch's own
//! monitor reads them (railwatch-verbs-backend's `PortReads`), and the
//! check that an engine-owned device answers again (`REVALIDATE`). The
//! context stays the engine's: railwatch never closes it.

use std::ffi::c_void;

use crate::action::{rw_action, rw_action_kind};
use crate::args::handle;
use crate::machine::{device_in, port_in, rw_machine, with_at};
use crate::status::{Error, Result, rw_status};

/// What an action asks to be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ask {
    PortState,
    Link,
    Address,
    Counters,
    /// A port query of the device's first port, answered as a re-open.
    Revalidate,
}

/// Answers the query `action` (`RW_ACTION_QUERY_PORT`, `READ_LINK`,
/// `READ_ADDRESS`, `READ_COUNTERS`, or `REVALIDATE`) by reading over
/// `context`, the engine's `struct ibv_context *` for the action's device,
/// and handing the machine the result, failure included (as its
/// `rw_machine_handle_*` would take it): the port state with the netdev's
/// carrier from sysfs, the link (`ibv_query_port`, and
/// `ibv_query_port_speed` where libibverbs has it), the GID table with each
/// entry's type and netdev, the flap counters from sysfs; for `REVALIDATE`,
/// a query of the device's first port as the check that it answers
/// (`rw_machine_handle_reopen` with its errno; an engine that
/// re-initialises its context after `RW_REASON_DEVICE_FATAL` does so
/// first). Poll the actions it causes as after any input.
/// `RW_ERR_INVALID` for another kind of action (`rw_action_is_query` tells
/// them apart), `RW_ERR_NULL` for a NULL context; `RW_ERR_UNSUPPORTED` in
/// a library built without the `verbs` feature.
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
        let ask = ask_of(a.kind)?;
        let port = if ask == Ask::Revalidate {
            device_in(m, a.device)?;
            let first = m.rails().find(|r| r.id.device == a.device).map(|r| r.id.port);
            first.ok_or_else(|| Error::new(rw_status::RW_ERR_NOT_FOUND, format!("device {} has no port", a.device)))?
        } else {
            port_in(m, a.device, a.port)?
        };
        // SAFETY: a live context of the action's device, by the API's
        // contract; used for this call only.
        unsafe { read::answer(m, ask, a.device, port, context, now) }
    })
}

/// What an action of `kind` asks to be read, or `RW_ERR_INVALID`.
fn ask_of(kind: u32) -> Result<Ask> {
    use rw_action_kind::*;
    Ok(match kind {
        k if k == RW_ACTION_QUERY_PORT as u32 => Ask::PortState,
        k if k == RW_ACTION_READ_LINK as u32 => Ask::Link,
        k if k == RW_ACTION_READ_ADDRESS as u32 => Ask::Address,
        k if k == RW_ACTION_READ_COUNTERS as u32 => Ask::Counters,
        k if k == RW_ACTION_REVALIDATE as u32 => Ask::Revalidate,
        other => {
            return Err(Error::new(
                rw_status::RW_ERR_INVALID,
                format!(
                    "action kind {other} is not a query (QUERY_PORT, READ_LINK, READ_ADDRESS, READ_COUNTERS, \
                     REVALIDATE)"
                ),
            ));
        }
    })
}

#[cfg(feature = "verbs")]
mod read {
    use std::ffi::c_void;
    use std::path::Path;

    use railwatch_core::{Machine, Millis};
    use railwatch_runtime::errno_of;
    use railwatch_verbs_backend::{PortReads, RawContext, context_device_name, read_carrier};

    use super::Ask;
    use crate::status::{Error, Result, rw_status};

    /// Reads what `ask` asks of `device`'s `port` over `context` and feeds
    /// it to `m`.
    ///
    /// # Safety
    /// `context` is a live `struct ibv_context *`.
    pub(super) unsafe fn answer(
        m: &mut Machine,
        ask: Ask,
        device: u32,
        port: u8,
        context: *mut c_void,
        now: Millis,
    ) -> Result<()> {
        let ctx = context.cast::<RawContext>();
        // SAFETY: a live context (the caller's promise).
        let name = unsafe { context_device_name(ctx) }
            .ok_or_else(|| Error::new(rw_status::RW_ERR_INVALID, "the context's device name is not UTF-8"))?;
        // SAFETY: as above, for the length of this call.
        let reads = unsafe { PortReads::new(ctx, name) };
        let errno = |e: std::io::Error| errno_of(&e);
        match ask {
            Ask::PortState => {
                let carrier = read_carrier(Path::new("/sys"), name, port).ok();
                m.handle_port_reading(device, port, reads.port_state(port).map_err(errno), carrier, now);
            }
            Ask::Link => m.handle_link(device, port, reads.link(port).map_err(errno), now),
            Ask::Address => {
                let address = reads.address(port).map_err(errno);
                m.handle_address(device, port, address.as_ref().map_err(|e| *e), now);
            }
            Ask::Counters => m.handle_counters(device, port, reads.counters(port).map_err(errno), now),
            Ask::Revalidate => m.handle_reopen(device, reads.port_state(port).map(drop).map_err(errno), now),
        }
        Ok(())
    }
}

#[cfg(not(feature = "verbs"))]
mod read {
    use std::ffi::c_void;

    use railwatch_core::{Machine, Millis};

    use super::Ask;
    use crate::status::{Error, Result, rw_status};

    /// Without libibverbs there is nothing to read with.
    ///
    /// # Safety
    /// None needed; the signature matches the `verbs` build's.
    pub(super) unsafe fn answer(
        _m: &mut Machine,
        _ask: Ask,
        _device: u32,
        _port: u8,
        _context: *mut c_void,
        _now: Millis,
    ) -> Result<()> {
        Err(Error::new(rw_status::RW_ERR_UNSUPPORTED, "railwatch was built without the `verbs` feature"))
    }
}
