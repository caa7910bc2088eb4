//! The device lifecycle for an engine that keeps its loop: it tells the
//! machine which devices the host has (after a uevent, or on its own
//! rescan), and the machine asks it to open the new ones
//! (`RW_ACTION_OPEN`, answered with [`rw_machine_handle_opened`]) and to
//! close those that left (`RW_ACTION_CLOSE`), retrying an open that fails
//! with backoff. [`crate::rw_uevents`] is the kernel's device uevents as an
//! fd for the engine's own epoll set.

use std::ffi::c_char;

use railwatch_core::MAX_DEVICE_NAME_BYTES;

use crate::args::{put, slice, text};
use crate::limits::{DEVICES, PORTS};
use crate::machine::{device_in, rw_machine, slot_in, with, with_at};
use crate::status::{Error, Result, rw_status};

/// The host's RDMA devices now, by name (`ibv_get_device_list`'s
/// `ibv_get_device_name`s, after a uevent, or on a rescan): devices that
/// are no longer listed leave (closed at once: `RW_ACTION_STOP_READING` and
/// `RW_ACTION_CLOSE`, their rails inert); names new to the list appear, and
/// the machine asks for each to be opened (`RW_ACTION_OPEN`). A name that
/// left and comes back keeps its device index. At most `RW_MAX_DEVICES`
/// names; a name that cannot be a device's (empty, over 63 bytes, with a
/// `/`, whitespace or a control character) is skipped and counted as stray input.
#[unsafe(no_mangle)]
pub extern "C" fn rw_machine_handle_device_list(
    machine: *mut rw_machine,
    names: *const *const c_char,
    count: usize,
    now_ms: u64,
) -> rw_status {
    with_at(machine, now_ms, |m, now| {
        // SAFETY: `count` pointers at `names`, by the API's contract
        // (`slice` checks the bound and NULL before any read).
        let ptrs = unsafe { slice(names, count, DEVICES, "count", "names") }?;
        let mut list = Vec::with_capacity(ptrs.len());
        for (i, &p) in ptrs.iter().enumerate() {
            // SAFETY: each is a NUL-terminated string, by the API's contract.
            list.push(unsafe { text(p, &format!("names[{i}]")) }?);
        }
        m.handle_device_list(list, now);
        Ok(())
    })
}

/// The answer to `RW_ACTION_OPEN` of `device`: `error` 0 and the device's
/// `nports` port numbers at `ports` (1..=255, no duplicate, at least one,
/// as `rw_machine_add_device` takes them: a device with no port is
/// `RW_ERR_INVALID`) when it opened, or the errno when it would not
/// (asked again after a backoff while the device list has it). Opened, the machine asks to start reading it and to
/// query its ports (the attach). Answered after the device left, it asks
/// for the device to be closed again.
#[unsafe(no_mangle)]
pub extern "C" fn rw_machine_handle_opened(
    machine: *mut rw_machine,
    device: u32,
    ports: *const u8,
    nports: usize,
    error: i32,
    now_ms: u64,
) -> rw_status {
    with_at(machine, now_ms, |m, now| {
        device_in(m, device)?;
        if error != 0 {
            m.handle_opened(device, Err(railwatch_core::Errno(error)), now);
            return Ok(());
        }
        // SAFETY: `nports` port numbers at `ports`, by the API's contract
        // (`slice` checks the bound before any read).
        let ports = unsafe { slice(ports, nports, PORTS, "nports", "ports") }?;
        check_ports(ports)?;
        m.handle_opened(device, Ok(ports), now);
        Ok(())
    })
}

/// Port numbers as a device has them: at least one, 1..=255, none twice.
pub(crate) fn check_ports(ports: &[u8]) -> Result<()> {
    if ports.is_empty() {
        return Err(Error::new(rw_status::RW_ERR_INVALID, "ports []: a device has at least one (1..=255)".to_owned()));
    }
    let mut seen = [false; 256];
    for &p in ports {
        if p == 0 || std::mem::replace(&mut seen[usize::from(p)], true) {
            return Err(Error::new(
                rw_status::RW_ERR_INVALID,
                format!("ports {ports:?}: each must be 1..=255, none twice"),
            ));
        }
    }
    Ok(())
}

/// Writes device `device`'s name, NUL-terminated, into the `capacity`
/// bytes at `buf`, and its length (without the NUL) to `*len` (may be
/// NULL). The buffer idiom: `RW_ERR_BUFFER`, nothing written to `buf`,
/// when it does not fit (`capacity` below the length + 1; names are at
/// most 63 bytes, so 64 always fits): `*len` still says how long it is,
/// and a NULL `buf` with `capacity` 0 is the size query. What
/// `RW_ACTION_OPEN` opens. An empty slot (`rw_machine_add_device_at`) is
/// `RW_ERR_NOT_FOUND`.
#[unsafe(no_mangle)]
pub extern "C" fn rw_machine_device_name(
    machine: *mut rw_machine,
    device: u32,
    buf: *mut c_char,
    capacity: usize,
    len: *mut usize,
) -> rw_status {
    with(machine, |m| {
        slot_in(m, device)?;
        let name = m.device(device).map(|d| d.name.to_string()).unwrap_or_default();
        if name.is_empty() {
            return Err(Error::new(rw_status::RW_ERR_NOT_FOUND, format!("slot {device} is empty")));
        }
        debug_assert!(name.len() <= MAX_DEVICE_NAME_BYTES);
        if !len.is_null() {
            // SAFETY: checked non-null; the caller passes a writable size_t.
            unsafe { put(len, name.len(), "len") }?;
        }
        if capacity < name.len() + 1 {
            return Err(Error::new(
                rw_status::RW_ERR_BUFFER,
                format!("capacity {capacity}: the name needs {} bytes with its NUL", name.len() + 1),
            ));
        }
        if buf.is_null() {
            return Err(crate::status::null("buf"));
        }
        // SAFETY: `buf` has room for `capacity` >= len + 1 bytes (the
        // caller's promise, the check above); the name holds no NUL (a
        // device name never does).
        unsafe {
            std::ptr::copy_nonoverlapping(name.as_ptr(), buf.cast::<u8>(), name.len());
            buf.add(name.len()).write(0);
        }
        Ok(())
    })
}
