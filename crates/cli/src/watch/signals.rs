//! The signals `watch` answers: SIGINT and SIGTERM stop it (summary
//! printed), SIGHUP reloads its settings (docs/CONFIG.md, "Reloading").

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// What the signals asked for, as flags the watch loop reads.
pub struct Signals {
    stop: Arc<AtomicBool>,
    reload: Arc<AtomicBool>,
}

impl Signals {
    /// Installs the handlers. The stop flag is set by SIGINT/SIGTERM:
    /// finish the current wait, print the summary, exit; a second SIGINT
    /// while it is set exits at once (130). The reload flag is set by
    /// SIGHUP. Each of these signals also wakes the monitor's wait
    /// (`waker`, from a thread of signal-hook's): the signal itself may land
    /// on another thread (the metrics ones) or just before the wait begins,
    /// and a healthy host's wait has no timeout.
    pub fn install(waker: Option<mio::Waker>) -> Signals {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        let stop = Arc::new(AtomicBool::new(false));
        let registered = signal_hook::flag::register_conditional_shutdown(SIGINT, 130, stop.clone())
            .and_then(|_| signal_hook::flag::register(SIGINT, stop.clone()))
            .and_then(|_| signal_hook::flag::register(SIGTERM, stop.clone()));
        if let Err(e) = registered {
            log::warn!("cannot install the Ctrl-C handler ({e}); Ctrl-C will end railwatch without a summary");
        }
        let reload = Arc::new(AtomicBool::new(false));
        if let Err(e) = signal_hook::flag::register(SIGHUP, reload.clone()) {
            log::warn!("cannot install the SIGHUP handler ({e}); SIGHUP will end railwatch instead of reloading");
        }
        // Registered after the flags: by the time the wake comes, they are set.
        let woken = waker.ok_or_else(|| io::Error::other("no waker")).and_then(|waker| {
            let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])?;
            std::thread::Builder::new().name("railwatch-signals".into()).spawn(move || {
                for _ in signals.forever() {
                    let _ = waker.wake();
                }
            })
        });
        if let Err(e) = woken {
            log::warn!("signals will be noticed at the next wake-up only ({e})");
        }
        Signals { stop, reload }
    }

    /// Whether a stop was asked for.
    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// Whether a reload was asked for since the last call.
    pub fn take_reload(&self) -> bool {
        self.reload.swap(false, Ordering::AcqRel)
    }
}
