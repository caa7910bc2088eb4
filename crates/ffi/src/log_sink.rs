//! The one log callback the engine sets and the one way to reach it:
//! [`emit`], used by the `log` crate's logger (`logging`) and by the panic
//! hook (`status`), so a panic is heard even where another logger won.

use std::cell::Cell;
use std::ffi::{CString, c_char, c_void};
use std::sync::{PoisonError, RwLock};

use log::Level;

/// How much the log callback hears (`rw_set_log_callback`'s `max_level`),
/// and the level of one message.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rw_log_level {
    /// Nothing (as `max_level`).
    RW_LOG_LEVEL_OFF = 0,
    /// Something failed: a monitor thread stopped, railwatch panicked.
    RW_LOG_LEVEL_ERROR = 1,
    /// A rail went down, a device could not be read.
    RW_LOG_LEVEL_WARN = 2,
    /// A rail came back, a rate changed.
    RW_LOG_LEVEL_INFO = 3,
    /// Every event.
    RW_LOG_LEVEL_DEBUG = 4,
    /// Everything.
    RW_LOG_LEVEL_TRACE = 5,
}

/// The log callback: `level` (`rw_log_level`), the module that logged it
/// (`"railwatch_runtime::monitor"`) and the message, both NUL-terminated
/// and valid for the call only. It runs on the thread that logs (a
/// monitor thread, or a thread inside a railwatch call), possibly on
/// several threads at once: it must be thread-safe. It may call railwatch
/// (what that logs on the same thread meanwhile is dropped, so it cannot
/// recurse), except `rw_set_log_callback`.
pub type rw_log_callback_fn =
    Option<extern "C" fn(user: *mut c_void, level: u32, target: *const c_char, message: *const c_char)>;

/// The callback and its `user`.
#[derive(Clone, Copy)]
pub(crate) struct Sink {
    pub(crate) callback: extern "C" fn(*mut c_void, u32, *const c_char, *const c_char),
    pub(crate) user: *mut c_void,
}

// SAFETY: `user` is only passed back to the callback, which the API
// documents as called from any thread: the engine makes both thread-safe.
unsafe impl Send for Sink {}
// SAFETY: as above.
unsafe impl Sync for Sink {}

/// Read-held while a callback runs, write-held to replace it: after
/// `rw_set_log_callback` returns no call of the old one is in flight.
pub(crate) static SINK: RwLock<Option<Sink>> = RwLock::new(None);

thread_local! {
    /// This thread is inside the callback: what it logs now is dropped.
    static IN_CALLBACK: Cell<bool> = const { Cell::new(false) };
}

/// Hands one message to the callback, if there is one and this thread is
/// not inside it already.
pub(crate) fn emit(level: Level, target: &str, message: &str) {
    if IN_CALLBACK.try_with(Cell::get).unwrap_or(true) {
        return;
    }
    let sink = SINK.read().unwrap_or_else(PoisonError::into_inner);
    let Some(sink) = *sink else { return };
    let text = |s: &str| CString::new(s.replace('\0', "\\0")).unwrap_or_default();
    let (target, message) = (text(target), text(message));
    let _ = IN_CALLBACK.try_with(|c| c.set(true));
    (sink.callback)(sink.user, level_code(level), target.as_ptr(), message.as_ptr());
    let _ = IN_CALLBACK.try_with(|c| c.set(false));
}

fn level_code(level: Level) -> u32 {
    (match level {
        Level::Error => rw_log_level::RW_LOG_LEVEL_ERROR,
        Level::Warn => rw_log_level::RW_LOG_LEVEL_WARN,
        Level::Info => rw_log_level::RW_LOG_LEVEL_INFO,
        Level::Debug => rw_log_level::RW_LOG_LEVEL_DEBUG,
        Level::Trace => rw_log_level::RW_LOG_LEVEL_TRACE,
    }) as u32
}

/// Whether this thread is inside the callback now.
pub(crate) fn in_callback() -> bool {
    IN_CALLBACK.try_with(Cell::get).unwrap_or(false)
}
