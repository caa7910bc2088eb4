//! Reading C arguments: strings, slices and output pointers, each checked
//! for NULL (and strings for UTF-8) before use.

use std::ffi::{CStr, c_char};

use crate::limits::Limit;
use crate::status::{Error, Result, null, rw_status};

/// `p` as a `&str`.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that lives for `'a`.
pub(crate) unsafe fn text<'a>(p: *const c_char, arg: &str) -> Result<&'a str> {
    if p.is_null() {
        return Err(null(arg));
    }
    // SAFETY: non-null, and the caller promises a NUL-terminated string.
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str().map_err(|_| Error::new(rw_status::RW_ERR_INVALID, format!("{arg} is not UTF-8")))
}

/// `len` elements at `p` (`p` may be NULL when `len` is 0), `len` named
/// `count` and bounded by `limit`, which is checked first: a count no
/// valid array has is refused before anything is read.
///
/// # Safety
/// When `0 < len <= limit.max`, `p` points to `len` initialised elements
/// that live for `'a`.
pub(crate) unsafe fn slice<'a, T>(p: *const T, len: usize, limit: Limit, count: &str, arg: &str) -> Result<&'a [T]> {
    if len > limit.max {
        return Err(Error::new(
            rw_status::RW_ERR_RANGE,
            format!("{count}: {len} is more than {} ({})", limit.name, limit.max),
        ));
    }
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(null(arg));
    }
    // SAFETY: non-null, at most `limit.max` elements (far below what makes
    // a slice too long), and the caller promises `len` elements.
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// A new handle, made by `make`, boxed and written through the output
/// pointer `out`. `out` is checked first: for a NULL one nothing is made
/// (no socket opened, no box kept) and the error names `out`.
///
/// # Safety
/// `out` is NULL or valid for a write of a pointer.
pub(crate) unsafe fn put_new<T>(out: *mut *mut T, make: impl FnOnce() -> Result<T>) -> Result<()> {
    if out.is_null() {
        return Err(null("out"));
    }
    let boxed = Box::into_raw(Box::new(make()?));
    // SAFETY: non-null, and writable by the caller's promise.
    unsafe { out.write(boxed) };
    Ok(())
}

/// Writes `value` through the output pointer `p`.
///
/// # Safety
/// `p` is NULL or valid for a write of `T`.
pub(crate) unsafe fn put<T>(p: *mut T, value: T, arg: &str) -> Result<()> {
    if p.is_null() {
        return Err(null(arg));
    }
    // SAFETY: non-null, and the caller promises it is writable; `write`
    // does not drop the (possibly uninitialised) old value.
    unsafe { p.write(value) };
    Ok(())
}

/// The handle in `*slot`, taken out: `*slot` is NULL afterwards (the
/// move/drop convention of every destroy function, so a second destroy
/// through the same pointer finds NULL). `None` when `slot` or `*slot` is
/// NULL.
///
/// # Safety
/// `slot` is NULL or valid for a read and a write of a pointer.
pub(crate) unsafe fn take<T>(slot: *mut *mut T) -> Option<*mut T> {
    if slot.is_null() {
        return None;
    }
    // SAFETY: non-null, and readable and writable by the caller's promise.
    let handle = unsafe { slot.replace(std::ptr::null_mut()) };
    (!handle.is_null()).then_some(handle)
}

/// A handle argument as a shared reference.
///
/// # Safety
/// `p` is NULL or a live handle made by this library.
pub(crate) unsafe fn handle<'a, T>(p: *const T, arg: &str) -> Result<&'a T> {
    // SAFETY: the caller promises a live handle or NULL.
    unsafe { p.as_ref() }.ok_or_else(|| null(arg))
}

/// A handle argument as an exclusive reference.
///
/// # Safety
/// `p` is NULL or a live handle made by this library, not used by another
/// thread during the call.
pub(crate) unsafe fn handle_mut<'a, T>(p: *mut T, arg: &str) -> Result<&'a mut T> {
    // SAFETY: the caller promises a live handle or NULL, used by one
    // thread at a time.
    unsafe { p.as_mut() }.ok_or_else(|| null(arg))
}

/// `name` as a device's name (the kernel's rule, as the device list
/// applies it), or `RW_ERR_INVALID` saying `{what} {name}: why`.
pub(crate) fn device_name(name: &str, what: &str) -> Result<()> {
    match railwatch_core::device_name_problem(name) {
        None => Ok(()),
        Some(problem) => {
            let shown = railwatch_core::shown_name(name);
            Err(crate::status::Error::new(
                crate::status::rw_status::RW_ERR_INVALID,
                format!("{what} {shown}: {problem}"),
            ))
        }
    }
}
