//! railwatch's own diagnostics, for the host: the runtime's log lines (a
//! monitor's "mlx5_0/1 down: port_err ...") and a panic's message go to
//! one callback the engine sets, never to the process's stderr. Not the
//! machine's `RW_ACTION_LOG`, which the engine words itself.

use std::cell::Cell;
use std::ffi::{CString, c_char, c_void};
use std::sync::{Once, PoisonError, RwLock};

use log::{Level, LevelFilter, Metadata, Record};

use crate::status::{Error, guard, rw_status};

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
struct Sink {
    callback: extern "C" fn(*mut c_void, u32, *const c_char, *const c_char),
    user: *mut c_void,
}

// SAFETY: `user` is only passed back to the callback, which the API
// documents as called from any thread: the engine makes both thread-safe.
unsafe impl Send for Sink {}
// SAFETY: as above.
unsafe impl Sync for Sink {}

/// Read-held while a callback runs, write-held to replace it: after
/// `rw_set_log_callback` returns no call of the old one is in flight.
static SINK: RwLock<Option<Sink>> = RwLock::new(None);

thread_local! {
    /// This thread is inside the callback: what it logs now is dropped.
    static IN_CALLBACK: Cell<bool> = const { Cell::new(false) };
}

/// The `log` crate's logger for every railwatch crate, forwarding to the
/// callback.
struct Forward;

static FORWARD: Forward = Forward;

impl log::Log for Forward {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &Record<'_>) {
        if self.enabled(record.metadata()) {
            emit(record.level(), record.target(), &record.args().to_string());
        }
    }

    fn flush(&self) {}
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

fn level_filter(max_level: u32) -> Option<LevelFilter> {
    Some(match max_level {
        0 => LevelFilter::Off,
        1 => LevelFilter::Error,
        2 => LevelFilter::Warn,
        3 => LevelFilter::Info,
        4 => LevelFilter::Debug,
        5 => LevelFilter::Trace,
        _ => return None,
    })
}

/// Sends railwatch's log lines up to `max_level` (`rw_log_level`), and
/// every panic's message (at `RW_LOG_LEVEL_ERROR`, whatever `max_level`
/// says unless it is `RW_LOG_LEVEL_OFF`), to `callback` with `user`,
/// replacing the callback set before. A NULL `callback` or
/// `RW_LOG_LEVEL_OFF` turns it off (the default: railwatch then says
/// nothing; it never writes to stderr). When this returns, the previous
/// callback is not running and is not called again, so its `user` may be
/// freed. `RW_ERR_STATE` from inside the callback (it would wait for
/// itself); `RW_ERR_INVALID` for a level above `RW_LOG_LEVEL_TRACE`.
#[unsafe(no_mangle)]
pub extern "C" fn rw_set_log_callback(callback: rw_log_callback_fn, user: *mut c_void, max_level: u32) -> rw_status {
    crate::status::quiet_panics();
    guard(|| {
        if IN_CALLBACK.try_with(Cell::get).unwrap_or(false) {
            return Err(Error::new(rw_status::RW_ERR_STATE, "rw_set_log_callback from inside the log callback"));
        }
        let filter = level_filter(max_level).ok_or_else(|| {
            Error::new(rw_status::RW_ERR_INVALID, format!("max_level {max_level} is not an rw_log_level (0..=5)"))
        })?;
        let sink = callback.filter(|_| filter != LevelFilter::Off).map(|callback| Sink { callback, user });
        static INSTALL: Once = Once::new();
        // Another logger already set in this process (a Rust host's)
        // keeps it; the callback then only hears panics.
        INSTALL.call_once(|| drop(log::set_logger(&FORWARD)));
        *SINK.write().unwrap_or_else(PoisonError::into_inner) = sink;
        log::set_max_level(if sink.is_some() { filter } else { LevelFilter::Off });
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;
    use std::sync::Mutex;

    static HEARD: Mutex<Vec<(u32, String, String)>> = Mutex::new(Vec::new());

    extern "C" fn hear(_: *mut c_void, level: u32, target: *const c_char, message: *const c_char) {
        // SAFETY: both NUL-terminated, valid for the call (the callback's
        // contract).
        let (t, m) = unsafe { (CStr::from_ptr(target), CStr::from_ptr(message)) };
        let entry = (level, t.to_string_lossy().into_owned(), m.to_string_lossy().into_owned());
        HEARD.lock().unwrap().push(entry);
    }

    #[test]
    fn log_lines_and_panics_reach_the_callback_and_nothing_after_it_is_unset() {
        crate::status::quiet_panics();
        assert_eq!(rw_set_log_callback(Some(hear), std::ptr::null_mut(), 2), rw_status::RW_OK);
        log::warn!(target: "railwatch_runtime::monitor", "mlx5_0/1 down");
        log::info!("above the level: dropped");
        assert_eq!(guard(|| panic!("to the callback")), rw_status::RW_ERR_PANIC);
        assert_eq!(rw_set_log_callback(Some(hear), std::ptr::null_mut(), 6), rw_status::RW_ERR_INVALID);
        assert_eq!(rw_set_log_callback(None, std::ptr::null_mut(), 5), rw_status::RW_OK);
        log::error!("after: dropped");
        let heard = HEARD.lock().unwrap().clone();
        assert!(heard.contains(&(2, "railwatch_runtime::monitor".into(), "mlx5_0/1 down".into())), "{heard:?}");
        assert!(heard.iter().any(|(l, t, m)| *l == 1 && t == "railwatch" && m.ends_with(": to the callback")));
        assert!(!heard.iter().any(|(_, _, m)| m.contains("dropped")), "{heard:?}");
    }
}
