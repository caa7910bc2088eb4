//! Device listing and [`VerbsDevice`], the [`VerbsPort`] over one opened
//! libibverbs context.

use std::ffi::{CStr, c_int};
use std::fmt;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::RawFd;
use std::path::Path;
use std::ptr;

use railwatch_core::{
    AsyncEvent, Carrier, LinkAttrs, LinkLayer, PortAddress, PortCounters, PortState, RailIdentity, VerbsPort,
    is_pci_address,
};
use rdma_sys::{ibv_context, ibv_device, ibv_device_attr};

use crate::error::VerbsError;
use crate::ffi;
use crate::reads::PortReads;

/// The array `ibv_get_device_list` returned, freed on drop.
struct DeviceList {
    list: *mut *mut ibv_device,
    len: usize,
}

impl DeviceList {
    /// Lists the devices; ENOSYS (no RDMA support in the kernel) is an empty
    /// list.
    fn get() -> Result<DeviceList, VerbsError> {
        let mut n: c_int = 0;
        // SAFETY: `n` is a writable int; the returned array is owned by the
        // DeviceList and freed once on drop.
        let list = unsafe { rdma_sys::ibv_get_device_list(&mut n) };
        if list.is_null() {
            let err = io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::ENOSYS) {
                log::debug!("ibv_get_device_list: no RDMA support in the kernel (ENOSYS): no devices");
                return Ok(DeviceList { list: ptr::null_mut(), len: 0 });
            }
            return Err(VerbsError::List { call: "ibv_get_device_list", source: err });
        }
        Ok(DeviceList { list, len: usize::try_from(n).unwrap_or(0) })
    }

    fn devices(&self) -> &[*mut ibv_device] {
        if self.list.is_null() {
            return &[];
        }
        // SAFETY: libibverbs returned `len` valid device pointers (followed
        // by a NULL), alive until the list is freed, which borrows self.
        unsafe { std::slice::from_raw_parts(self.list, self.len) }
    }
}

impl Drop for DeviceList {
    fn drop(&mut self) {
        if !self.list.is_null() {
            // SAFETY: the list came from ibv_get_device_list and is freed once.
            unsafe { rdma_sys::ibv_free_device_list(self.list) };
        }
    }
}

fn device_name(device: *mut ibv_device) -> String {
    // SAFETY: `device` comes from a live device list; libibverbs returns a
    // pointer to the NUL-terminated name stored in the device (or NULL).
    let name = unsafe { rdma_sys::ibv_get_device_name(device) };
    if name.is_null() {
        return String::new();
    }
    // SAFETY: non-NULL, NUL-terminated, alive as long as the list.
    unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned()
}

/// The names of the RDMA devices present (`"mlx5_0"`, …), in libibverbs'
/// order.
///
/// A host without RDMA support in its kernel (`ibv_get_device_list` fails
/// with ENOSYS) has no devices: that is an empty list, not an error.
pub fn list_devices() -> Result<Vec<String>, VerbsError> {
    let list = DeviceList::get()?;
    Ok(list.devices().iter().map(|&d| device_name(d)).collect())
}

/// One opened RDMA device: its libibverbs context, with the async-event fd
/// set non-blocking.
///
/// It implements [`VerbsPort`], so the runtime's monitor can own it: it is
/// [`Send`], the monitor thread being its only user. Dropping it closes the
/// device.
pub struct VerbsDevice {
    name: String,
    /// NULL while closed.
    ctx: *mut ibv_context,
    /// `phys_port_cnt` at the last successful open (kept while closed).
    port_count: u8,
    /// The node GUID `ibv_query_device` gave at the last open.
    node_guid: Option<u64>,
    /// The PCI function the device's sysfs entry links to, at the last open.
    pci_address: Option<String>,
}

// SAFETY: libibverbs contexts may be used from any thread (rdma-core
// documents the verbs as thread-safe); the VerbsDevice owns its context
// exclusively and every use goes through `&mut self` or reads plain fields.
unsafe impl Send for VerbsDevice {}

impl fmt::Debug for VerbsDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VerbsDevice")
            .field("name", &self.name)
            .field("open", &self.is_open())
            .field("ports", &self.port_count)
            .field("async_fd", &self.async_fd())
            .finish()
    }
}

impl VerbsDevice {
    /// Opens the device called `name`, reads its port count and sets its
    /// async-event fd `O_NONBLOCK`.
    pub fn open(name: &str) -> Result<VerbsDevice, VerbsError> {
        let mut device = VerbsDevice {
            name: name.to_owned(),
            ctx: ptr::null_mut(),
            port_count: 0,
            node_guid: None,
            pci_address: None,
        };
        device.open_context()?;
        Ok(device)
    }

    /// Whether the device is open (false after [`VerbsPort::close`] or a
    /// failed [`VerbsPort::reopen`]).
    pub fn is_open(&self) -> bool {
        !self.ctx.is_null()
    }

    /// The number of physical ports at the last successful open.
    pub fn port_count(&self) -> u8 {
        self.port_count
    }

    fn open_context(&mut self) -> Result<(), VerbsError> {
        let list = DeviceList::get()?;
        let Some(&device) = list.devices().iter().find(|&&d| device_name(d) == self.name) else {
            return Err(VerbsError::NotFound { device: self.name.clone() });
        };
        // SAFETY: `device` belongs to the live list; libibverbs allows
        // freeing the list once the device is opened.
        let ctx = unsafe { rdma_sys::ibv_open_device(device) };
        if ctx.is_null() {
            return Err(self.fail("ibv_open_device", io::Error::last_os_error()));
        }
        let pci_address = pci_address_of(device);
        drop(list);
        match self.setup(ctx) {
            Ok((port_count, node_guid)) => {
                self.ctx = ctx;
                self.port_count = port_count;
                self.node_guid = Some(node_guid).filter(|&g| g != 0);
                self.pci_address = pci_address;
                log::debug!("{}: opened, {} port(s), async fd {}", self.name, port_count, self.async_fd());
                Ok(())
            }
            Err(err) => {
                // SAFETY: ctx was opened above and is closed once here.
                unsafe { rdma_sys::ibv_close_device(ctx) };
                Err(err)
            }
        }
    }

    /// Reads the port count and node GUID, and makes the async fd
    /// non-blocking.
    fn setup(&self, ctx: *mut ibv_context) -> Result<(u8, u64), VerbsError> {
        let mut attr = MaybeUninit::<ibv_device_attr>::zeroed();
        // SAFETY: ctx is live; attr is a writable, zeroed ibv_device_attr.
        let rc = unsafe { rdma_sys::ibv_query_device(ctx, attr.as_mut_ptr()) };
        if rc != 0 {
            let err = if rc > 0 { io::Error::from_raw_os_error(rc) } else { io::Error::last_os_error() };
            return Err(self.fail("ibv_query_device", err));
        }
        // SAFETY: ibv_query_device succeeded and filled the struct; the field
        // is a plain u8.
        let port_count = unsafe { (&raw const (*attr.as_ptr()).phys_port_cnt).read() };
        // SAFETY: as above; node_guid is a plain integer in network order.
        let node_guid = u64::from_be(unsafe { (&raw const (*attr.as_ptr()).node_guid).read() });
        // SAFETY: ctx is live; async_fd is a plain int field.
        let fd = unsafe { (*ctx).async_fd };
        set_nonblocking(fd).map_err(|e| self.fail("fcntl(async_fd, O_NONBLOCK)", e))?;
        Ok((port_count, node_guid))
    }

    /// The raw context (NULL while closed), for this crate's tests.
    #[cfg(test)]
    pub(crate) fn raw_context(&self) -> *mut ibv_context {
        self.ctx
    }

    fn fail(&self, call: &'static str, source: io::Error) -> VerbsError {
        VerbsError::call(&self.name, call, source)
    }

    fn live(&self) -> Result<*mut ibv_context, VerbsError> {
        if self.ctx.is_null() { Err(VerbsError::Closed { device: self.name.clone() }) } else { Ok(self.ctx) }
    }

    fn query(&self, port: u8) -> io::Result<rdma_sys::ibv_port_attr> {
        self.reads()?.query(port)
    }

    /// Reads over the live context.
    fn reads(&self) -> io::Result<PortReads<'_>> {
        let ctx = self.live()?;
        // SAFETY: ctx is live (checked above) and owned by self, which the
        // borrow keeps from closing it.
        Ok(unsafe { PortReads::new(ctx, &self.name) })
    }
}

/// The PCI function a device sits on: where its sysfs entry's `device`
/// link points (`…/0000:3b:00.0`), if that is a PCI address. libibverbs
/// names the entry in `ibdev_path`.
fn pci_address_of(device: *mut ibv_device) -> Option<String> {
    // SAFETY: `device` belongs to a live device list; ibdev_path is a
    // NUL-terminated array inside it.
    let path = unsafe { CStr::from_ptr((*device).ibdev_path.as_ptr()) }.to_str().ok()?.to_owned();
    if path.is_empty() {
        return None;
    }
    let target = std::fs::read_link(format!("{path}/device")).ok()?;
    let name = target.file_name()?.to_str()?;
    is_pci_address(name).then(|| name.to_owned())
}

fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: F_GETFL on an fd number has no memory effects.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    if flags & libc::O_NONBLOCK == 0 {
        // SAFETY: F_SETFL with an int argument has no memory effects.
        if unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

impl VerbsPort for VerbsDevice {
    fn name(&self) -> &str {
        &self.name
    }

    /// `1..=phys_port_cnt` as read at the last successful open (also while
    /// closed, so the monitor keeps its rails).
    fn ports(&self) -> Vec<u8> {
        (1..=self.port_count).collect()
    }

    /// The async-event fd (non-blocking), or -1 while the device is closed.
    fn async_fd(&self) -> RawFd {
        if self.ctx.is_null() {
            return -1;
        }
        // SAFETY: ctx is live; async_fd is a plain int field.
        unsafe { (*self.ctx).async_fd }
    }

    fn get_event(&mut self) -> io::Result<AsyncEvent> {
        let ctx = self.live()?;
        // SAFETY: ctx is live and `&mut self` makes this the only reader.
        match unsafe { ffi::get_event(ctx) } {
            Ok(event) => Ok(event),
            // The normal ends of a drain: the bare errno, no allocation.
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => Err(e),
            Err(e) => Err(self.fail("ibv_get_async_event", e).into()),
        }
    }

    fn port_state(&mut self, port: u8) -> io::Result<PortState> {
        self.reads()?.port_state(port)
    }

    fn link(&mut self, port: u8) -> io::Result<LinkAttrs> {
        self.reads()?.link(port)
    }

    /// See [`PortReads::address`].
    fn address(&mut self, port: u8) -> io::Result<PortAddress> {
        self.reads()?.address(port)
    }

    /// The carrier of the port's netdev from sysfs; `NotFound` for a port
    /// without one (InfiniBand).
    fn carrier(&mut self, port: u8) -> io::Result<Carrier> {
        crate::netdev::read_carrier(Path::new("/sys"), &self.name, port)
    }

    /// See [`PortReads::counters`].
    fn flap_counters(&mut self, port: u8) -> io::Result<PortCounters> {
        self.reads()?.counters(port)
    }

    /// The node GUID and PCI address read at the last open; the port's
    /// GUID, on an InfiniBand link layer, is GID 0's interface identifier.
    fn identity(&mut self, port: u8) -> io::Result<RailIdentity> {
        let attr = self.query(port)?;
        let ctx = self.live()?;
        let port_guid = if LinkLayer::from_code(attr.link_layer) == LinkLayer::InfiniBand {
            // SAFETY: ctx is live (checked above) and owned by self.
            let gid = unsafe { ffi::query_gid(ctx, port, 0) }.map_err(|e| self.fail("ibv_query_gid", e))?;
            let mut id = [0u8; 8];
            id.copy_from_slice(&gid[8..]);
            Some(u64::from_be_bytes(id)).filter(|&g| g != 0)
        } else {
            None
        };
        Ok(RailIdentity { node_guid: self.node_guid, port_guid, pci_address: self.pci_address.clone() })
    }

    fn close(&mut self) {
        if self.ctx.is_null() {
            return;
        }
        // SAFETY: ctx was opened by open_context, is closed once and
        // forgotten right after.
        let rc = unsafe { rdma_sys::ibv_close_device(self.ctx) };
        self.ctx = ptr::null_mut();
        if rc != 0 {
            log::warn!("{}: ibv_close_device failed: {}", self.name, io::Error::last_os_error());
        } else {
            log::debug!("{}: closed", self.name);
        }
    }

    fn reopen(&mut self) -> io::Result<()> {
        self.close();
        self.open_context().map_err(io::Error::from)
    }
}

impl Drop for VerbsDevice {
    fn drop(&mut self) {
        self.close();
    }
}
