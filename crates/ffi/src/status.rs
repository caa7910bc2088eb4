//! Status codes, the thread-local last error, and the guard every export
//! runs its body in: no panic crosses into C.

use std::cell::RefCell;
use std::ffi::{CString, c_char};
use std::panic::{AssertUnwindSafe, PanicHookInfo, catch_unwind};
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

/// What a call returned. `RW_OK` is 0; on anything else
/// [`rw_last_error`] says what happened, in words.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rw_status {
    /// Success.
    RW_OK = 0,
    /// A required pointer was null.
    RW_ERR_NULL = 1,
    /// A device index, port or rail is out of range, or unknown.
    RW_ERR_RANGE = 2,
    /// An argument or setting is invalid (the message names it).
    RW_ERR_INVALID = 3,
    /// No such device or rail.
    RW_ERR_NOT_FOUND = 4,
    /// A system call or libibverbs call failed.
    RW_ERR_IO = 5,
    /// The call is not possible now (such as asking a monitor for a
    /// snapshot before it published one).
    RW_ERR_STATE = 6,
    /// Not built in (such as libibverbs without the `verbs` feature).
    RW_ERR_UNSUPPORTED = 7,
    /// railwatch panicked; the message has the panic's text. The object
    /// the call was made on should be destroyed.
    RW_ERR_PANIC = 8,
    /// The caller's buffer is too small; the count needed was written.
    RW_ERR_BUFFER = 9,
}

/// An error on the Rust side of the boundary. Boxed, so a `Result<(),
/// Error>` is one pointer: the success path of every call carries it.
#[derive(Debug)]
pub(crate) struct Error(Box<ErrorInner>);

#[derive(Debug)]
pub(crate) struct ErrorInner {
    status: rw_status,
    message: String,
}

impl Error {
    #[cold]
    pub(crate) fn new(status: rw_status, message: impl Into<String>) -> Error {
        Error(Box::new(ErrorInner { status, message: message.into() }))
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error::new(rw_status::RW_ERR_IO, e.to_string())
    }
}

pub(crate) type Result<T> = std::result::Result<T, Error>;

/// `RW_ERR_NULL` naming the argument.
#[cold]
pub(crate) fn null(arg: &str) -> Error {
    Error::new(rw_status::RW_ERR_NULL, format!("{arg} is NULL"))
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
    /// What the panic hook made of this thread's latest panic, for the
    /// guard that catches it.
    static PANIC_TEXT: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Whether the panic hook also runs the one before it (the default hook,
/// which prints to stderr): only in this crate's own unit tests, where a
/// failing assertion must still say why.
static ALSO_PRINT: AtomicBool = AtomicBool::new(cfg!(test));

/// Installs, once per process, the panic hook that keeps every panic off
/// the host's stderr (no message, no backtrace): the text goes to the log
/// callback (`rw_set_log_callback`) and, through the guard that catches
/// it, to `rw_last_error`. Called by every function that makes a handle
/// or needs none, so it is in place before any call that could panic,
/// and by none on the event path.
pub(crate) fn quiet_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let text = panic_text(info);
            crate::log_sink::emit(log::Level::Error, "railwatch", &text);
            let _ = PANIC_TEXT.try_with(|t| *t.borrow_mut() = Some(text));
            if ALSO_PRINT.load(Ordering::Relaxed) {
                previous(info);
            }
        }));
    });
}

/// "railwatch panicked at FILE:LINE: MESSAGE".
fn panic_text(info: &PanicHookInfo<'_>) -> String {
    // (`payload_as_str` is newer than the workspace's MSRV.)
    let payload = info.payload();
    let what = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic with no message");
    match info.location() {
        Some(at) => format!("railwatch panicked at {}:{}: {what}", at.file(), at.line()),
        None => format!("railwatch panicked: {what}"),
    }
}

/// `errno`, with this thread's last error saying why: for the calls that
/// answer an errno as libibverbs does (the simulator's context,
/// `rw_carrier_read`), whose failures name their value like every other.
pub(crate) fn errno_because(errno: i32, why: impl std::fmt::Display) -> i32 {
    set_last_error(&format!("{why} ({})", std::io::Error::from_raw_os_error(errno)));
    errno
}

fn set_last_error(message: &str) {
    // An interior NUL would truncate; replace it rather than lose the text.
    let text = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
    // At thread exit the slot may be gone (a C++ thread_local destroyed
    // late): the status still says what happened.
    let _ = LAST_ERROR.try_with(|e| *e.borrow_mut() = text);
}

/// Runs `body`, turning an error or a panic into a status and the
/// thread's last error.
#[inline]
pub(crate) fn guard(body: impl FnOnce() -> Result<()>) -> rw_status {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => rw_status::RW_OK,
        Ok(Err(e)) => {
            set_last_error(&e.0.message);
            e.0.status
        }
        Err(panic) => {
            // The hook's text (with where it panicked) when it ran.
            let text = PANIC_TEXT.try_with(|t| t.borrow_mut().take()).ok().flatten().unwrap_or_else(|| {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic with no message".into());
                format!("railwatch panicked: {what}")
            });
            set_last_error(&text);
            rw_status::RW_ERR_PANIC
        }
    }
}

/// Runs the body of a function that answers as libibverbs does, with an
/// errno (0: done): an error of the call itself (NULL, a value out of
/// range) is `EINVAL`, a panic `EIO`, with the thread's last error saying
/// what happened either way.
pub(crate) fn guard_errno(body: impl FnOnce() -> Result<i32>) -> i32 {
    let mut errno = libc::EIO;
    let status = guard(|| {
        errno = body()?;
        Ok(())
    });
    match status {
        rw_status::RW_OK => errno,
        rw_status::RW_ERR_PANIC => libc::EIO,
        _ => libc::EINVAL,
    }
}

/// Runs a destructor's body; a panic there is swallowed (there is nobody
/// to return it to) but recorded as the last error.
pub(crate) fn guard_void(body: impl FnOnce()) {
    let _ = guard(|| {
        body();
        Ok(())
    });
}

/// This thread's last error, as Rust text (for the crate's tests).
#[cfg(test)]
pub(crate) fn last_error_text() -> String {
    LAST_ERROR.try_with(|e| e.borrow().to_string_lossy().into_owned()).unwrap_or_default()
}

/// The last error of a failed call on this thread, as UTF-8 text; an
/// empty string when none failed yet. Valid until the next failing call on
/// this thread. Never NULL.
#[unsafe(no_mangle)]
pub extern "C" fn rw_last_error() -> *const c_char {
    LAST_ERROR.try_with(|e| e.borrow().as_ptr()).unwrap_or(c"".as_ptr())
}

/// A short name for a status (`"RW_ERR_NULL"`; `"unknown status"` for a
/// value that is none); never NULL.
#[unsafe(no_mangle)]
pub extern "C" fn rw_status_name(status: i32) -> *const c_char {
    // An int, not the enum: a value C made up must not be undefined
    // behaviour here.
    let name: &'static [u8] = match status {
        0 => b"RW_OK\0",
        1 => b"RW_ERR_NULL\0",
        2 => b"RW_ERR_RANGE\0",
        3 => b"RW_ERR_INVALID\0",
        4 => b"RW_ERR_NOT_FOUND\0",
        5 => b"RW_ERR_IO\0",
        6 => b"RW_ERR_STATE\0",
        7 => b"RW_ERR_UNSUPPORTED\0",
        8 => b"RW_ERR_PANIC\0",
        9 => b"RW_ERR_BUFFER\0",
        _ => b"unknown status\0",
    };
    name.as_ptr().cast()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last_error() -> String {
        // SAFETY: rw_last_error never returns NULL and its text is
        // NUL-terminated, valid until the next failing call on this thread.
        unsafe { std::ffi::CStr::from_ptr(rw_last_error()) }.to_string_lossy().into_owned()
    }

    #[test]
    fn a_panic_becomes_a_status_and_a_message() {
        // With the hook (another test may have installed it) the text also
        // says where: "railwatch panicked at FILE:LINE: ...".
        let status = guard(|| panic!("the machine broke"));
        assert_eq!(status, rw_status::RW_ERR_PANIC);
        assert!(last_error().starts_with("railwatch panicked"), "{}", last_error());
        assert!(last_error().ends_with(": the machine broke"), "{}", last_error());
        let status = guard(|| panic!("{} broke", "it"));
        assert_eq!(status, rw_status::RW_ERR_PANIC);
        assert!(last_error().ends_with(": it broke"), "{}", last_error());
    }

    #[test]
    fn with_the_hook_a_panic_says_where_and_prints_nothing() {
        // In a child process of this test binary, with the hook as the
        // library has it (printing nothing): its stderr must be empty of
        // the panic.
        const CHILD: &str = "RAILWATCH_QUIET_PANIC_CHILD";
        if std::env::var_os(CHILD).is_some() {
            ALSO_PRINT.store(false, Ordering::Relaxed);
            quiet_panics();
            assert_eq!(guard(|| panic!("quietly")), rw_status::RW_ERR_PANIC);
            let text = last_error();
            assert!(text.starts_with("railwatch panicked at crates/ffi/src/status.rs:"), "{text}");
            assert!(text.ends_with(": quietly"), "{text}");
            return;
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "status::tests::with_the_hook_a_panic_says_where_and_prints_nothing", "--nocapture"])
            .env(CHILD, "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "the child failed: {stderr}");
        assert!(!stderr.contains("panicked") && !stderr.contains("backtrace"), "stderr: {stderr}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"), "the child ran no test");
    }

    #[test]
    fn an_error_sets_the_last_error_and_success_keeps_it() {
        assert_eq!(guard(|| Err(null("gate"))), rw_status::RW_ERR_NULL);
        assert_eq!(last_error(), "gate is NULL");
        assert_eq!(guard(|| Ok(())), rw_status::RW_OK);
        assert_eq!(last_error(), "gate is NULL", "a success leaves the last error alone");
        assert_eq!(guard(|| Err(Error::new(rw_status::RW_ERR_INVALID, "a\0b"))), rw_status::RW_ERR_INVALID);
        assert_eq!(last_error(), "a\\0b", "an interior NUL does not lose the text");
    }

    #[test]
    fn a_panic_in_a_destructor_is_swallowed() {
        guard_void(|| panic!("in drop"));
        assert!(last_error().ends_with(": in drop"), "{}", last_error());
    }
}
