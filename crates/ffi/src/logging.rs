//! railwatch's own diagnostics, for the host: the runtime's log lines (a
//! monitor's "mlx5_0/1 down: port_err ...") and a panic's message go to
//! one callback the engine sets, never to the process's stderr. Not the
//! machine's `RW_ACTION_LOG`, which the engine words itself.

use std::ffi::c_void;
use std::sync::Once;

use log::{LevelFilter, Metadata, Record};

use crate::log_sink::{Sink, emit, in_callback, replace, rw_log_callback_fn};
use crate::status::{Error, Result, guard, rw_status};

/// The `log` crate's logger for every railwatch crate, forwarding to the
/// callback. Only railwatch's own records (a target starting with
/// `railwatch`): the crates it uses log too (mio's "registering event
/// source with poller" at trace), and those lines are not railwatch's to
/// hand an engine.
struct Forward;

static FORWARD: Forward = Forward;

impl log::Log for Forward {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= log::max_level() && metadata.target().starts_with("railwatch")
    }

    fn log(&self, record: &Record<'_>) {
        if self.enabled(record.metadata()) {
            emit(record.level(), record.target(), &record.args().to_string());
        }
    }

    fn flush(&self) {}
}

/// `max_level` as a filter, or the error naming it: not an `rw_log_level`.
pub(crate) fn level_filter(max_level: u32) -> Result<LevelFilter> {
    Ok(match max_level {
        0 => LevelFilter::Off,
        1 => LevelFilter::Error,
        2 => LevelFilter::Warn,
        3 => LevelFilter::Info,
        4 => LevelFilter::Debug,
        5 => LevelFilter::Trace,
        _ => {
            let message = format!("max_level {max_level} is not an rw_log_level (0..=5)");
            return Err(Error::new(rw_status::RW_ERR_INVALID, message));
        }
    })
}

/// Sends railwatch's log lines up to `max_level` (`rw_log_level`; its own
/// only, not those of the crates it uses), and
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
        if in_callback() {
            return Err(Error::new(rw_status::RW_ERR_STATE, "rw_set_log_callback from inside the log callback"));
        }
        let filter = level_filter(max_level)?;
        let sink = callback.filter(|_| filter != LevelFilter::Off).map(|callback| Sink { callback, user });
        static INSTALL: Once = Once::new();
        // Another logger already set in this process (a Rust host's)
        // keeps it; the callback then only hears panics.
        INSTALL.call_once(|| drop(log::set_logger(&FORWARD)));
        replace(sink);
        log::set_max_level(if sink.is_some() { filter } else { LevelFilter::Off });
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::{CStr, c_char};
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
        // Another crate's line (mio's, say), at a level let through: not
        // railwatch's, dropped.
        log::warn!(target: "mio::poll", "another crate's: dropped");
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
