//! Running the monitor on its own thread.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use log::error;
use mio::Waker;
use railwatch_core::{Selector, VerbsPort};

use crate::clock::Clock;
use crate::monitor::{Monitor, WAKER};

/// A monitor running on its own thread. Dropping the handle without
/// [`shutdown`](Self::shutdown) leaves the thread running detached.
pub struct MonitorHandle<P, S, C> {
    waker: Arc<Waker>,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<(Monitor<P, S, C>, io::Result<()>)>,
}

impl<P, S, C> Monitor<P, S, C>
where
    P: VerbsPort + Send + 'static,
    S: Selector + Send + 'static,
    C: Clock + 'static,
{
    /// Moves the monitor to a thread named `railwatch-monitor` that blocks
    /// in [`poll_once`](Self::poll_once) until shut down. Take gates and the
    /// notification receiver before spawning.
    pub fn spawn(self) -> io::Result<MonitorHandle<P, S, C>> {
        let waker = Arc::new(Waker::new(self.poll_registry(), WAKER)?);
        let stop = Arc::new(AtomicBool::new(false));
        let thread_stop = stop.clone();
        let mut monitor = self;
        let thread = std::thread::Builder::new().name("railwatch-monitor".into()).spawn(move || {
            while !thread_stop.load(Ordering::Acquire) {
                if let Err(e) = monitor.poll_once(None) {
                    error!("monitor stopped: waiting on the poll set failed: {e}");
                    return (monitor, Err(e));
                }
            }
            (monitor, Ok(()))
        })?;
        Ok(MonitorHandle { waker, stop, thread })
    }
}

impl<P, S, C> MonitorHandle<P, S, C> {
    /// Stops the thread (waking it through the mio `Waker`) and returns the
    /// monitor, for a final snapshot. An error is the one that stopped the
    /// thread early, if any.
    pub fn shutdown(self) -> io::Result<Monitor<P, S, C>> {
        self.stop.store(true, Ordering::Release);
        self.waker.wake()?;
        match self.thread.join() {
            Ok((monitor, Ok(()))) => Ok(monitor),
            Ok((_, Err(e))) => Err(e),
            Err(_) => Err(io::Error::other("the monitor thread panicked")),
        }
    }
}
