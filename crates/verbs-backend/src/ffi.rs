//! The raw libibverbs calls that need care beyond what rdma-sys offers.
//!
//! - Async events are read field by field through raw pointers: rdma-sys
//!   types `event_type` as a Rust enum of the codes 0..=19 its header knew,
//!   and materialising a code such as 20 or 99 in it would be undefined
//!   behaviour. The struct lives in a zeroed `MaybeUninit` that is never
//!   assumed initialised; `event_type` is read as a `u32`.
//! - `ibv_event_type_str` is declared here taking a `c_uint` for the same
//!   reason.
//! - The port query reproduces the `verbs.h` inline `ibv_query_port` with the
//!   marker libibverbs really writes (`abi_compat == UINTPTR_MAX`).
//!   `rdma_sys::___ibv_query_port` (0.3) compares `abi_compat` with
//!   `u32::MAX` instead, so on a 64-bit host it never sees an extended context
//!   and always falls back to the exported compatibility `ibv_query_port`,
//!   which fills only the old prefix of `struct ibv_port_attr` (no
//!   `port_cap_flags2`, no `active_speed_ex`). It is still the fallback for
//!   contexts that are not extended, where it is right.
//! - `ibv_query_port_speed` (rdma-core 62+) is looked up at run time.

use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::io;
use std::mem::{MaybeUninit, offset_of, size_of};
use std::sync::OnceLock;

use railwatch_core::{AsyncEvent, Element, EventKind, ObjectHandle, Scope};
use rdma_sys::{ibv_async_event, ibv_context, ibv_port_attr, verbs_context};

// The event is read through raw offsets: pin the layout rdma-sys declares to
// the C one (a pointer-sized union, then a 4-byte enum).
const _: () = assert!(offset_of!(ibv_async_event, element) == 0);
const _: () = assert!(offset_of!(ibv_async_event, event_type) == size_of::<*mut c_void>());
const _: () = assert!(size_of::<rdma_sys::ibv_event_type>() == size_of::<u32>());

#[link(name = "ibverbs")]
unsafe extern "C" {
    /// `const char *ibv_event_type_str(enum ibv_event_type)`, declared with
    /// the raw code: libibverbs indexes a table and answers `"unknown"` for
    /// any code it does not know, so every value is fine to pass.
    #[link_name = "ibv_event_type_str"]
    safe fn event_type_str(event: c_uint) -> *const c_char;
}

/// `__VERBS_ABI_IS_EXTENDED` from verbs.h: `(void *)UINTPTR_MAX`.
const VERBS_ABI_IS_EXTENDED: usize = usize::MAX;

type ExtQueryPort = unsafe extern "C" fn(*mut ibv_context, u8, *mut ibv_port_attr, usize) -> c_int;

/// `int ibv_query_port_speed(struct ibv_context *, uint32_t port_num, uint64_t *speed)`.
type QueryPortSpeed = unsafe extern "C" fn(*mut ibv_context, u32, *mut u64) -> c_int;

/// Reads one async event and acknowledges it, exactly once.
///
/// Returns the errno as an [`io::Error`] when `ibv_get_async_event` fails
/// (nothing to acknowledge then).
///
/// # Safety
///
/// `ctx` is a live context returned by `ibv_open_device`, and no other
/// thread reads its events.
pub(crate) unsafe fn get_event(ctx: *mut ibv_context) -> io::Result<AsyncEvent> {
    let mut raw = MaybeUninit::<ibv_async_event>::zeroed();
    // SAFETY: ctx is live (caller); `raw` is writable storage of the size and
    // alignment libibverbs writes.
    let rc = unsafe { rdma_sys::ibv_get_async_event(ctx, raw.as_mut_ptr()) };
    if rc != 0 {
        // Read errno before anything else can touch it.
        return Err(io::Error::last_os_error());
    }
    // SAFETY: libibverbs filled the event; it is read field by field without
    // ever producing an `ibv_event_type` value.
    let event = unsafe { copy_event(raw.as_ptr()) };
    // SAFETY: `raw` holds the event just returned by ibv_get_async_event and
    // not acknowledged yet; it is acknowledged here and never used again.
    unsafe { rdma_sys::ibv_ack_async_event(raw.as_mut_ptr()) };
    Ok(event)
}

/// Copies the code and element out of a filled `ibv_async_event`.
///
/// # Safety
///
/// `ev` points to an event filled by `ibv_get_async_event` (or one whose
/// first pointer-sized bytes and following 4 bytes are initialised).
pub(crate) unsafe fn copy_event(ev: *const ibv_async_event) -> AsyncEvent {
    // SAFETY: the field is 4 initialised bytes (layout asserted above); it is
    // read as a u32, never as the generated enum, so any code is fine.
    let code = unsafe { (&raw const (*ev).event_type).cast::<u32>().read() };
    let element = match EventKind::from_code(code).scope() {
        Scope::Port | Scope::Device => {
            // SAFETY: libibverbs stores `port_num` (a c_int at offset 0) for
            // every event that is not about a cq/qp/srq/wq.
            let port = unsafe { (&raw const (*ev).element).cast::<c_int>().read() };
            u32::try_from(port).map_or(Element::None, Element::Port)
        }
        Scope::Cq | Scope::Qp | Scope::Srq | Scope::Wq => {
            // SAFETY: for these codes libibverbs stores the object pointer,
            // which is only turned into an opaque key, never dereferenced.
            let object = unsafe { (&raw const (*ev).element).cast::<*mut c_void>().read() };
            Element::Object(ObjectHandle(object.addr() as u64))
        }
        Scope::Unknown => Element::None,
    };
    AsyncEvent::new(code, element)
}

/// `verbs_get_ctx_op(ctx, query_port)` from verbs.h, with the real marker.
///
/// # Safety
///
/// `ctx` is a live context returned by `ibv_open_device`.
unsafe fn extended_query_port(ctx: *mut ibv_context) -> Option<ExtQueryPort> {
    // SAFETY: ctx is live (caller); abi_compat is a plain pointer field.
    let marker = unsafe { (*ctx).abi_compat };
    if marker.addr() != VERBS_ABI_IS_EXTENDED {
        return None;
    }
    // SAFETY: an extended context is the last field of the struct
    // verbs_context libibverbs allocated (verbs.h: "Must be last field"), so
    // stepping back by its offset stays inside that allocation.
    let vctx = unsafe { ctx.byte_sub(offset_of!(verbs_context, context)) }.cast::<verbs_context>();
    // SAFETY: `sz` sits immediately before the context and is always
    // present in an extended context.
    let sz = unsafe { (*vctx).sz };
    if sz < size_of::<verbs_context>() - offset_of!(verbs_context, query_port) {
        return None;
    }
    // SAFETY: `sz` says the library's verbs_context reaches back to
    // `query_port` (the struct grows towards lower addresses).
    unsafe { (*vctx).query_port }
}

/// The verbs.h inline `ibv_query_port`: into a zeroed struct, through the
/// context's `query_port` op when the context is extended, else through
/// `rdma_sys::___ibv_query_port` (the compatibility entry).
///
/// # Safety
///
/// `ctx` is a live context returned by `ibv_open_device`.
pub(crate) unsafe fn query_port(ctx: *mut ibv_context, port: u8) -> io::Result<ibv_port_attr> {
    // SAFETY: bindgen generated ibv_port_attr as integers only (its enums
    // are constified to u32), so all-zero bytes are a valid value.
    let mut attr: ibv_port_attr = unsafe { MaybeUninit::zeroed().assume_init() };
    // SAFETY: ctx is live (caller).
    let rc = match unsafe { extended_query_port(ctx) } {
        // SAFETY: the op takes the context, the port, and a struct of the
        // size passed, which is exactly `attr`.
        Some(op) => unsafe { op(ctx, port, &mut attr, size_of::<ibv_port_attr>()) },
        // SAFETY: ctx is live and attr is a whole, zeroed ibv_port_attr.
        None => unsafe { rdma_sys::___ibv_query_port(ctx, port, &mut attr) },
    };
    errno_result(rc).map(|()| attr)
}

/// `ibv_query_port_speed` when the loaded libibverbs exports it.
pub(crate) fn query_port_speed_fn() -> Option<QueryPortSpeed> {
    static SYMBOL: OnceLock<Option<QueryPortSpeed>> = OnceLock::new();
    *SYMBOL.get_or_init(|| {
        // SAFETY: RTLD_NOLOAD only looks up the libibverbs this process
        // already linked (no constructor runs); the handle is kept for the
        // life of the process, as the library is.
        let lib = unsafe { libc::dlopen(c"libibverbs.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
        let scope = if lib.is_null() { libc::RTLD_DEFAULT } else { lib };
        // SAFETY: a valid handle (or RTLD_DEFAULT) and a NUL-terminated name.
        let symbol = unsafe { libc::dlsym(scope, c"ibv_query_port_speed".as_ptr()) };
        if symbol.is_null() {
            return None;
        }
        // SAFETY: rdma-core declares ibv_query_port_speed with exactly this
        // signature (ibv_query_port_speed(3)).
        Some(unsafe { std::mem::transmute::<*mut c_void, QueryPortSpeed>(symbol) })
    })
}

/// The effective port speed in 100 Mb/s units, when the library has
/// `ibv_query_port_speed` and the device answers.
///
/// # Safety
///
/// `ctx` is a live context returned by `ibv_open_device`.
pub(crate) unsafe fn query_port_speed(ctx: *mut ibv_context, port: u8) -> Option<io::Result<u64>> {
    let query = query_port_speed_fn()?;
    let mut speed = 0u64;
    // SAFETY: ctx is live (caller); `speed` is a writable u64.
    let rc = unsafe { query(ctx, u32::from(port), &mut speed) };
    Some(errno_result(rc).map(|()| speed))
}

/// What `ibv_event_type_str` answers for a raw code.
pub(crate) fn event_name(code: u32) -> &'static str {
    let name = event_type_str(code);
    if name.is_null() {
        return "unknown";
    }
    // SAFETY: libibverbs returns a pointer into a static table of
    // NUL-terminated string constants.
    unsafe { CStr::from_ptr(name) }.to_str().unwrap_or("unknown")
}

/// A verbs return value that is 0 or an errno value (some old providers
/// return -1 and set errno).
fn errno_result(rc: c_int) -> io::Result<()> {
    match rc {
        0 => Ok(()),
        rc if rc > 0 => Err(io::Error::from_raw_os_error(rc)),
        _ => Err(io::Error::last_os_error()),
    }
}

/// Reads GID table entry `index` of `port` (`ibv_query_gid`; an empty slot
/// reads as all zeros).
///
/// # Safety
///
/// `ctx` must be a live context.
pub unsafe fn query_gid(ctx: *mut ibv_context, port: u8, index: c_int) -> io::Result<[u8; 16]> {
    let mut gid = MaybeUninit::<rdma_sys::ibv_gid>::zeroed();
    // SAFETY: the caller guarantees ctx; gid is a valid, writable union.
    let rc = unsafe { rdma_sys::ibv_query_gid(ctx, port, index, gid.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: zeroed, then written by libibverbs; every bit pattern of the
    // 16-byte union is a valid `raw`.
    Ok(unsafe { gid.assume_init().raw })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An event record as libibverbs fills it: an object pointer or a
    /// `port_num` at offset 0, then the raw code.
    fn raw_event(element: u64, code: u32) -> MaybeUninit<ibv_async_event> {
        let mut raw = MaybeUninit::<ibv_async_event>::zeroed();
        let p = raw.as_mut_ptr();
        let object = matches!(EventKind::from_code(code).scope(), Scope::Cq | Scope::Qp | Scope::Srq | Scope::Wq);
        // SAFETY: writes stay inside the zeroed struct, at the offsets and
        // widths asserted at the top of this module.
        unsafe {
            if object {
                (&raw mut (*p).element).cast::<*mut c_void>().write(std::ptr::without_provenance_mut(element as usize));
            } else {
                (&raw mut (*p).element).cast::<c_int>().write(element as c_int);
            }
            (&raw mut (*p).event_type).cast::<u32>().write(code);
        }
        raw
    }

    #[test]
    fn copy_event_reads_any_code_as_a_value() {
        let cases = [
            (1, 9, Element::Port(1)),
            (2, 10, Element::Port(2)),
            (0, 8, Element::Port(0)),
            (1, 20, Element::Port(1)),
            (0xdead_0000, 0, Element::Object(ObjectHandle(0xdead_0000))),
            (0xbeef_0000, 4, Element::Object(ObjectHandle(0xbeef_0000))),
            (0x1000, 14, Element::Object(ObjectHandle(0x1000))),
            (0x2000, 19, Element::Object(ObjectHandle(0x2000))),
            (7, 21, Element::None),
            (7, 99, Element::None),
            (7, u32::MAX, Element::None),
        ];
        for (element, code, expected) in cases {
            let raw = raw_event(element, code);
            // SAFETY: `raw` is a fully initialised event record.
            let ev = unsafe { copy_event(raw.as_ptr()) };
            assert_eq!(ev, AsyncEvent::new(code, expected), "code {code}");
        }
        // A negative port_num is no port at all.
        let raw = raw_event(u64::from(u32::MAX), 9);
        // SAFETY: as above.
        assert_eq!(unsafe { copy_event(raw.as_ptr()) }.element, Element::None);
    }

    /// rdma-sys 0.3's `___ibv_query_port` checks `abi_compat` against
    /// `u32::MAX`, not libibverbs' `UINTPTR_MAX`, so on an extended context
    /// it takes the compatibility entry (old prefix only). `query_port` takes
    /// the context's op, as the C inline does. If rdma-sys fixes its check,
    /// this test says so and the workaround can go.
    #[test]
    fn rdma_sys_query_port_misses_the_extended_marker() {
        use crate::testing::{Fake, FakeLib, rerun_under_fake};
        if !rerun_under_fake("ffi::tests::rdma_sys_query_port_misses_the_extended_marker", FakeLib::Basic) {
            return;
        }
        let fake = Fake::get();
        fake.set_devices(1);
        let dev = crate::VerbsDevice::open("mlx5_0").unwrap();
        let ctx = dev.raw_context();
        // SAFETY: ctx is live; all-zero is a valid ibv_port_attr.
        let mut attr: ibv_port_attr = unsafe { MaybeUninit::zeroed().assume_init() };
        // SAFETY: ctx is live and attr is a whole ibv_port_attr.
        assert_eq!(unsafe { rdma_sys::___ibv_query_port(ctx, 1, &mut attr) }, 0);
        assert_eq!(attr.state, 4);
        assert_eq!((fake.counter("compat_queries"), fake.counter("ext_queries")), (1, 0));
        // SAFETY: ctx is live.
        let attr = unsafe { query_port(ctx, 1) }.unwrap();
        assert_eq!((attr.state, attr.active_speed, attr.active_width), (4, 128, 2));
        assert_eq!((fake.counter("compat_queries"), fake.counter("ext_queries")), (1, 1));

        // What that costs on rdma-core 49+: an XDR port's speed code, which
        // only active_speed_ex holds, is lost on rdma-sys's path.
        #[cfg(rdma_core_active_speed_ex)]
        {
            fake.set_port(0, 1, 4, 0, 2, 256);
            // SAFETY: ctx is live; all-zero is a valid ibv_port_attr.
            let mut compat: ibv_port_attr = unsafe { MaybeUninit::zeroed().assume_init() };
            // SAFETY: ctx is live and compat is a whole ibv_port_attr.
            assert_eq!(unsafe { rdma_sys::___ibv_query_port(ctx, 1, &mut compat) }, 0);
            assert_eq!(compat.active_speed_ex, 0, "the compatibility entry fills the old prefix only");
            // SAFETY: ctx is live.
            assert_eq!(unsafe { query_port(ctx, 1) }.unwrap().active_speed_ex, 256);
        }
    }

    #[test]
    fn errno_results() {
        assert!(errno_result(0).is_ok());
        assert_eq!(errno_result(libc::ENODEV).unwrap_err().raw_os_error(), Some(libc::ENODEV));
    }
}
