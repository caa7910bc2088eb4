//! What a port reads over a live context: the machine's questions (port
//! state, link, address, flap counters) answered with libibverbs and
//! sysfs. [`VerbsDevice`](crate::VerbsDevice) asks through it for the
//! contexts it owns, and the C API for an engine's own context (which it
//! never closes), so both read a port the same way.

use std::io;
use std::path::Path;

use railwatch_core::{Gid, GidType, LinkAttrs, LinkLayer, PortAddress, PortCounters, PortState, is_netdev_name};
use rdma_sys::ibv_context;

use crate::error::VerbsError;
use crate::ffi;

/// libibverbs' `struct ibv_context`, for callers that hold one of their
/// own (the C API hands an engine's to [`PortReads`]).
pub type RawContext = ibv_context;

/// The name of the device a live context belongs to, as libibverbs has it
/// (`ibv_get_device_name`); `None` if it is not UTF-8.
///
/// # Safety
///
/// `ctx` is a live context from `ibv_open_device`, not closed while the
/// name is used.
pub unsafe fn context_device_name<'a>(ctx: *mut ibv_context) -> Option<&'a str> {
    // SAFETY: a live context (the caller's promise): its device and the
    // device's name are libibverbs' own, alive with it.
    let name = unsafe { rdma_sys::ibv_get_device_name((*ctx).device) };
    // SAFETY: libibverbs returns a NUL-terminated name (never NULL for a
    // device of a live context).
    (!name.is_null()).then(|| unsafe { std::ffi::CStr::from_ptr(name) }).and_then(|n| n.to_str().ok())
}

/// A live context and the device name its sysfs entries go by.
pub struct PortReads<'a> {
    ctx: *mut ibv_context,
    name: &'a str,
}

impl<'a> PortReads<'a> {
    /// Reads over `ctx`, the context of the device called `name`.
    ///
    /// # Safety
    ///
    /// `ctx` is a live context from `ibv_open_device`, not closed while the
    /// value lives.
    pub unsafe fn new(ctx: *mut ibv_context, name: &'a str) -> PortReads<'a> {
        PortReads { ctx, name }
    }

    fn fail(&self, call: &'static str, source: io::Error) -> io::Error {
        VerbsError::call(self.name, call, source).into()
    }

    /// `ibv_query_port`.
    pub fn query(&self, port: u8) -> io::Result<rdma_sys::ibv_port_attr> {
        // SAFETY: ctx is live (`new`'s contract).
        unsafe { ffi::query_port(self.ctx, port) }.map_err(|e| self.fail("ibv_query_port", e))
    }

    /// The port's state.
    pub fn port_state(&self, port: u8) -> io::Result<PortState> {
        Ok(PortState::from_code(self.query(port)?.state))
    }

    /// The port's link: speed and width codes, and the effective speed
    /// where libibverbs has `ibv_query_port_speed`.
    pub fn link(&self, port: u8) -> io::Result<LinkAttrs> {
        let attr = self.query(port)?;
        let mut link = LinkAttrs {
            active_speed: attr.active_speed,
            active_width: attr.active_width,
            active_speed_ex: active_speed_ex(&attr),
            effective_100mbps: None,
        };
        // SAFETY: ctx is live (`new`'s contract).
        match unsafe { ffi::query_port_speed(self.ctx, port) } {
            None => {}
            Some(Ok(speed)) => link.effective_100mbps = Some(speed),
            Some(Err(e)) => log::debug!("{}: ibv_query_port_speed({port}) failed: {e}; using speed x width", self.name),
        }
        Ok(link)
    }

    /// The port's link layer and LID (port query), its non-empty GID table
    /// entries (`ibv_query_gid`, at most 256) and, from sysfs where the
    /// kernel has it, each entry's type and the port's netdev.
    pub fn address(&self, port: u8) -> io::Result<PortAddress> {
        let attr = self.query(port)?;
        let mut address = PortAddress {
            link_layer: Some(LinkLayer::from_code(attr.link_layer)),
            lid: attr.lid,
            gids: Vec::new(),
            netdev: None,
        };
        let sysfs = format!("/sys/class/infiniband/{}/ports/{port}/gid_attrs", self.name);
        for index in 0..attr.gid_tbl_len.clamp(0, 256) {
            // SAFETY: ctx is live (`new`'s contract).
            let raw = unsafe { ffi::query_gid(self.ctx, port, index) }.map_err(|e| self.fail("ibv_query_gid", e))?;
            if raw == [0; 16] {
                continue;
            }
            let kind = match std::fs::read_to_string(format!("{sysfs}/types/{index}")) {
                Ok(t) if t.trim() == "RoCE v2" => GidType::RoceV2,
                Ok(t) if t.trim() == "IB/RoCE v1" => GidType::IbRoceV1,
                _ => GidType::Unknown,
            };
            if address.netdev.is_none() {
                address.netdev = std::fs::read_to_string(format!("{sysfs}/ndevs/{index}"))
                    .ok()
                    .map(|n| n.trim().to_string())
                    .filter(|n| is_netdev_name(n));
            }
            address.gids.push(Gid { index: index as u32, raw, kind });
        }
        Ok(address)
    }

    /// The port's flap counters from sysfs (`link_downed`, the netdev's
    /// carrier counters); `NotFound` where the driver has none.
    pub fn counters(&self, port: u8) -> io::Result<PortCounters> {
        crate::counters::read_flap_counters(Path::new("/sys"), self.name, port)
    }
}

#[cfg(rdma_core_active_speed_ex)]
fn active_speed_ex(attr: &rdma_sys::ibv_port_attr) -> u32 {
    attr.active_speed_ex
}

#[cfg(not(rdma_core_active_speed_ex))]
fn active_speed_ex(_attr: &rdma_sys::ibv_port_attr) -> u32 {
    0
}
