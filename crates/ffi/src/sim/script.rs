//! Scripting a simulated device from C: events, port states and links,
//! GID tables and flap counters, faults, unplugging.

use railwatch_core::{LinkAttrs, PortCounters, PortState};

use super::{rw_sim, with_device, with_port};
use crate::evidence::RW_COUNTER_NONE;
use crate::limits::{RW_MAX_GIDS, RW_SIM_MAX_REPEAT};
use crate::status::{Error, Result, rw_status};

/// Queues `repeat` copies of the event (`code`, `element`: the port number
/// for port events, an object's pointer value for QP/CQ/SRQ/WQ events) on
/// the device's async fd. `repeat` is at most `RW_SIM_MAX_REPEAT`
/// (`RW_ERR_RANGE` above), and a port event's element a port number
/// (1..=255, else `RW_ERR_RANGE`, as `rw_machine_handle_event` refuses
/// it). Only an open device queues events, as the
/// kernel only queues them on an open context: before a monitor (or
/// `rw_sim_open`) opened it, or once it was closed, the call returns
/// `RW_ERR_STATE` and the events are counted as dropped
/// (`rw_sim_counters.dropped`).
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_push_event(
    sim: *const rw_sim,
    device: u32,
    code: u32,
    element: u64,
    repeat: u64,
) -> rw_status {
    with_device(sim, device, |h| {
        check_repeat(repeat, "repeat")?;
        let event = crate::machine::checked_event(code, element)?;
        if h.queue(event, repeat) == 0 && repeat > 0 {
            return Err(Error::new(
                rw_status::RW_ERR_STATE,
                format!("{} is not open (nobody opened it yet, or it was closed): {repeat} event(s) dropped", h.name()),
            ));
        }
        Ok(())
    })
}

/// `RW_ERR_RANGE` for a count above `RW_SIM_MAX_REPEAT`.
fn check_repeat(n: u64, arg: &str) -> Result<()> {
    if n > RW_SIM_MAX_REPEAT {
        return Err(Error::new(
            rw_status::RW_ERR_RANGE,
            format!("{arg}: {n} is more than RW_SIM_MAX_REPEAT ({RW_SIM_MAX_REPEAT})"),
        ));
    }
    Ok(())
}

/// Sets what a query of `port` returns (`ibv_port_state`), without any
/// event: a port that comes back silently.
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_set_port_state(sim: *const rw_sim, device: u32, port: u32, state: u32) -> rw_status {
    with_port(sim, device, port, |h, p| {
        h.set_port_state(p, PortState::from_code(state));
        Ok(())
    })
}

/// `port` goes DOWN and `PORT_ERR` is queued for it (dropped, and
/// counted so, while the device is not open: the state changes either
/// way).
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_port_down(sim: *const rw_sim, device: u32, port: u32) -> rw_status {
    with_port(sim, device, port, |h, p| {
        h.port_down(p);
        Ok(())
    })
}

/// `port` goes ACTIVE and `PORT_ACTIVE` is queued for it (dropped, and
/// counted so, while the device is not open).
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_port_up(sim: *const rw_sim, device: u32, port: u32) -> rw_status {
    with_port(sim, device, port, |h, p| {
        h.port_up(p);
        Ok(())
    })
}

/// The next `n` reads of the device's fd fail with EINTR (`n` at most
/// `RW_SIM_MAX_REPEAT`).
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_eintr(sim: *const rw_sim, device: u32, n: u64) -> rw_status {
    with_device(sim, device, |h| {
        check_repeat(n, "n")?;
        h.eintr(n);
        Ok(())
    })
}

/// From now on reads of the device's fd fail with EIO (port queries still
/// answer).
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_eio(sim: *const rw_sim, device: u32) -> rw_status {
    with_device(sim, device, |h| {
        h.eio();
        Ok(())
    })
}

/// The device leaves the host silently (as Soft-RoCE does: only the device
/// list and a uevent change).
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_unplug(sim: *const rw_sim, device: u32) -> rw_status {
    with_device(sim, device, |h| {
        h.unplug();
        Ok(())
    })
}

/// The device comes back (a new device of the same name).
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_plug(sim: *const rw_sim, device: u32) -> rw_status {
    with_device(sim, device, |h| {
        h.plug();
        Ok(())
    })
}

/// Sets `port`'s link (`ibv_port_attr`'s `active_speed` code, or
/// `active_speed_ex` for codes above 255, and `active_width`) from now on,
/// silently: push `DEVICE_SPEED_CHANGE` (20) to announce it.
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_set_link(sim: *const rw_sim, device: u32, port: u32, speed: u32, width: u8) -> rw_status {
    with_port(sim, device, port, |h, p| {
        h.set_link(p, LinkAttrs::new(speed, width));
        Ok(())
    })
}

/// Sets entry `index` (below `RW_MAX_GIDS`) of `port`'s GID table to the
/// 16 bytes at `raw` (network order; a RoCE v2 GID on an Ethernet link),
/// or empties it when `raw` is NULL, silently: push `GID_CHANGE` (18) to
/// announce it. A device with no GID ever set answers address reads with
/// `EOPNOTSUPP`, as a backend that cannot read addresses does.
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_set_gid(sim: *const rw_sim, device: u32, port: u32, index: u32, raw: *const u8) -> rw_status {
    with_port(sim, device, port, |h, p| {
        if index as usize >= RW_MAX_GIDS {
            return Err(Error::new(
                rw_status::RW_ERR_RANGE,
                format!("index {index}: a GID table has at most RW_MAX_GIDS ({RW_MAX_GIDS}) entries"),
            ));
        }
        // SAFETY: NULL or 16 readable bytes, by the API's contract.
        let gid = (!raw.is_null()).then(|| unsafe { raw.cast::<[u8; 16]>().read_unaligned() });
        h.set_gid(p, index, gid);
        Ok(())
    })
}

/// Sets `port`'s flap counters from now on (`RW_COUNTER_NONE` for one the
/// driver does not have), silently: the machine reads them on its own
/// (`RW_ACTION_READ_COUNTERS`). A port whose counters were never set
/// answers `ENOENT`, as a driver without them does.
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_set_flap_counters(
    sim: *const rw_sim,
    device: u32,
    port: u32,
    link_downed: u64,
    carrier_changes: u64,
    carrier_down: u64,
) -> rw_status {
    with_port(sim, device, port, |h, p| {
        let some = |v: u64| (v != RW_COUNTER_NONE).then_some(v);
        let counters = PortCounters {
            link_downed: some(link_downed),
            carrier_changes: some(carrier_changes),
            carrier_down: some(carrier_down),
        };
        h.set_flap_counters(p, counters);
        Ok(())
    })
}

/// Sets the carrier of `port`'s netdev (`RW_CARRIER_DOWN` or
/// `RW_CARRIER_UP`; a port given one has a netdev from now on, read by
/// `rw_sim_query_carrier`). `notify`: the host is told, as the kernel's
/// rtnetlink link message tells (a `rw_sim_carrier_events_open` handle
/// becomes readable, and a monitor reads every carrier); false: silent, a
/// lost message, seen at the next port query. `RW_ERR_RANGE` for another
/// code.
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_set_carrier(
    sim: *const rw_sim,
    device: u32,
    port: u32,
    carrier: u32,
    notify: bool,
) -> rw_status {
    with_port(sim, device, port, |h, p| {
        let Some(carrier) = crate::machine::carrier_of(carrier)? else {
            return Err(Error::new(rw_status::RW_ERR_RANGE, "carrier RW_CARRIER_UNKNOWN is no carrier".to_owned()));
        };
        if notify {
            h.carrier_change(p, carrier)
        } else {
            h.set_carrier(p, carrier)
        }
        Ok(())
    })
}

/// The device goes away under whoever has it open: its fd hangs up
/// (`EPOLLHUP`), reads fail with `EIO`, port queries with `ENODEV`, and
/// opening it again fails with `ENODEV` until `rw_sim_restore`; queued
/// events are dropped. (Unplugging, by contrast, only changes the list.)
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_hang_up(sim: *const rw_sim, device: u32) -> rw_status {
    with_device(sim, device, |h| {
        h.remove();
        Ok(())
    })
}

/// The device hung up by `rw_sim_hang_up` can be opened again (the old fd
/// stays dead).
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_restore(sim: *const rw_sim, device: u32) -> rw_status {
    with_device(sim, device, |h| {
        h.restore();
        Ok(())
    })
}
