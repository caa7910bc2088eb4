//! The one log callback the engine sets and the one way to reach it:
//! [`emit`], used by the `log` crate's logger (`logging`) and by the panic
//! hook (`status`), so a panic is heard even where another logger won.

use std::cell::Cell;
use std::ffi::{CString, c_char, c_void};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

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

/// The callback, which generation of it this is, and the calls in flight
/// of each generation (by parity: a replacement waits for the previous
/// one's calls before it returns, so no older one has calls left).
pub(crate) struct Slot {
    sink: Option<Sink>,
    generation: u64,
    in_flight: [usize; 2],
}

/// Held only to read or replace the callback and count its calls, never
/// while it runs: a callback that waits for another thread (a
/// `rw_monitor_free`) never waits for that thread's own log line, nor for
/// a replacement queued meanwhile.
static SLOT: Mutex<Slot> = Mutex::new(Slot { sink: None, generation: 0, in_flight: [0, 0] });
/// Notified when a generation's last call in flight returns.
static RETURNED: Condvar = Condvar::new();
/// One replacement at a time.
static REPLACING: Mutex<()> = Mutex::new(());

fn slot() -> MutexGuard<'static, Slot> {
    SLOT.lock().unwrap_or_else(PoisonError::into_inner)
}

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
    let text = |s: &str| CString::new(s.replace('\0', "\\0")).unwrap_or_default();
    let (target, message) = (text(target), text(message));
    let (sink, parity) = {
        let mut slot = slot();
        let Some(sink) = slot.sink else { return };
        let parity = (slot.generation % 2) as usize;
        slot.in_flight[parity] += 1;
        (sink, parity)
    };
    let _ = IN_CALLBACK.try_with(|c| c.set(true));
    (sink.callback)(sink.user, level_code(level), target.as_ptr(), message.as_ptr());
    let _ = IN_CALLBACK.try_with(|c| c.set(false));
    let mut slot = slot();
    slot.in_flight[parity] -= 1;
    if slot.in_flight[parity] == 0 {
        RETURNED.notify_all();
    }
}

/// Makes `sink` the callback and waits for the calls of the one it
/// replaces: when this returns, that one is not running and is never
/// called again. Not from inside the callback (it would wait for itself).
pub(crate) fn replace(sink: Option<Sink>) {
    let _one = REPLACING.lock().unwrap_or_else(PoisonError::into_inner);
    let mut slot = slot();
    let old = (slot.generation % 2) as usize;
    slot.sink = sink;
    slot.generation += 1;
    while slot.in_flight[old] > 0 {
        slot = RETURNED.wait(slot).unwrap_or_else(PoisonError::into_inner);
    }
}

pub(crate) fn level_code(level: Level) -> u32 {
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
