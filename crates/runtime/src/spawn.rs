//! Running the monitor on its own thread, and the handle an engine keeps.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};
use log::error;
use mio::Waker;
use railwatch_core::{Clock, Gate, Notification, RailId, Selector, TransferReport, VerbsPort};

use crate::monitor::{Monitor, WAKER};
use crate::snapshot::Snapshot;

/// A request from the handle, served by the monitor thread between waits.
enum Command {
    Snapshot(Sender<Snapshot>),
    Gate(String, Sender<Option<Gate>>),
    Subscribe(Sender<Receiver<Notification>>),
    Transfers(RailId, Vec<TransferReport>),
    Probe(RailId, bool),
}

type Joined<P, S, C> = (Monitor<P, S, C>, io::Result<()>);

/// A monitor running on its own thread: snapshots, gates and subscriptions
/// on request. Dropping the handle stops and joins the thread;
/// [`shutdown`](Self::shutdown) does the same and gives the monitor back.
pub struct MonitorHandle<P, S, C> {
    waker: Arc<Waker>,
    stop: Arc<AtomicBool>,
    commands: Sender<Command>,
    thread: Option<JoinHandle<Joined<P, S, C>>>,
}

impl<P, S, C> Monitor<P, S, C>
where
    P: VerbsPort + Send + 'static,
    S: Selector + Send + 'static,
    C: Clock + 'static,
{
    /// Moves the monitor to a thread named `railwatch-monitor` that blocks
    /// in [`poll_once`](Self::poll_once) until stopped.
    pub fn spawn(self) -> io::Result<MonitorHandle<P, S, C>> {
        self.spawn_with(|_| {})
    }

    /// Like [`spawn`](Self::spawn), and runs `after_wake` on the monitor
    /// thread once before the first wait and after every wake-up, with the
    /// monitor at rest (no drain or action in progress). An embedding uses
    /// it to publish state or dispatch notifications on that thread (the C
    /// API does both); it must not block for long, since events wait
    /// meanwhile.
    pub fn spawn_with(
        self,
        mut after_wake: impl FnMut(&mut Monitor<P, S, C>) + Send + 'static,
    ) -> io::Result<MonitorHandle<P, S, C>> {
        let waker = Arc::new(Waker::new(self.poll_registry(), WAKER)?);
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = crossbeam_channel::unbounded();
        let thread_stop = stop.clone();
        let mut monitor = self;
        let thread = std::thread::Builder::new().name("railwatch-monitor".into()).spawn(move || {
            after_wake(&mut monitor);
            while !thread_stop.load(Ordering::Acquire) {
                if let Err(e) = monitor.poll_once(None) {
                    error!("monitor stopped: waiting on the poll set failed: {e}");
                    return (monitor, Err(e));
                }
                serve(&mut monitor, &rx);
                after_wake(&mut monitor);
            }
            (monitor, Ok(()))
        })?;
        Ok(MonitorHandle { waker, stop, commands: tx, thread: Some(thread) })
    }
}

/// Answers the handle's requests, on the monitor thread between waits (the
/// waker made the wait return).
fn serve<P: VerbsPort, S: Selector, C: Clock>(monitor: &mut Monitor<P, S, C>, commands: &Receiver<Command>) {
    for cmd in commands.try_iter() {
        // A requester that went away is not an error.
        match cmd {
            Command::Snapshot(reply) => drop(reply.send(monitor.snapshot())),
            Command::Gate(name, reply) => drop(reply.send(monitor.gate_of(&name))),
            Command::Subscribe(reply) => drop(reply.send(monitor.subscribe())),
            Command::Transfers(rail, reports) => monitor.report_transfers(rail, &reports),
            Command::Probe(rail, succeeded) => monitor.report_probe(rail, succeeded),
        }
    }
}

fn stopped() -> io::Error {
    io::Error::other("the monitor thread has stopped")
}

impl<P, S, C> MonitorHandle<P, S, C> {
    fn ask<T>(&self, make: impl FnOnce(Sender<T>) -> Command) -> io::Result<T> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.commands.send(make(tx)).map_err(|_| stopped())?;
        self.waker.wake()?;
        rx.recv().map_err(|_| stopped())
    }

    /// A copy of every rail and counter, taken by the monitor thread.
    pub fn snapshot(&self) -> io::Result<Snapshot> {
        self.ask(Command::Snapshot)
    }

    /// A gate for the rail called `name` (`"mlx5_0/1"`).
    pub fn gate(&self, name: &str) -> io::Result<Option<Gate>> {
        self.ask(|tx| Command::Gate(name.to_string(), tx))
    }

    /// Hands the monitor thread the engine's transfer outcomes on `rail`
    /// (see [`Monitor::report_transfers`]), without waiting for them to be
    /// applied. Any thread may call it.
    pub fn report_transfers(&self, rail: RailId, reports: &[TransferReport]) -> io::Result<()> {
        self.commands.send(Command::Transfers(rail, reports.to_vec())).map_err(|_| stopped())?;
        self.waker.wake()
    }

    /// Hands the monitor thread the outcome of the probe `rail`'s gate
    /// granted (see [`Monitor::report_probe`]), without waiting for it to
    /// be applied. Any thread may call it; without it a granted probe can
    /// only time out.
    pub fn report_probe(&self, rail: RailId, succeeded: bool) -> io::Result<()> {
        self.commands.send(Command::Probe(rail, succeeded)).map_err(|_| stopped())?;
        self.waker.wake()
    }

    /// Subscribes to notifications from now on (see
    /// [`Monitor::subscribe`]).
    pub fn subscribe(&self) -> io::Result<Receiver<Notification>> {
        self.ask(Command::Subscribe)
    }

    /// Asks the thread to stop, without waiting: it finishes what it is
    /// doing (a wake-up's work, or the `spawn_with` hook that is running)
    /// and then exits instead of polling again. Dropping the handle (or
    /// [`shutdown`](Self::shutdown)) still joins it. Safe to call from the
    /// monitor thread itself, where joining is not.
    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::Release);
        // If the wake fails the thread is already gone.
        let _ = self.waker.wake();
    }

    /// The monitor thread's id (`None` once stopped): an embedding that
    /// calls back in from that thread must not wait for it.
    pub fn thread_id(&self) -> Option<std::thread::ThreadId> {
        self.thread.as_ref().map(|t| t.thread().id())
    }

    fn stop_and_join(&mut self) -> Option<std::thread::Result<Joined<P, S, C>>> {
        self.stop.store(true, Ordering::Release);
        // If the wake fails the thread is already gone; join tells.
        let _ = self.waker.wake();
        self.thread.take().map(JoinHandle::join)
    }

    /// Stops the thread and returns the monitor, for a final snapshot. An
    /// error is the one that stopped the thread early, if any.
    pub fn shutdown(mut self) -> io::Result<Monitor<P, S, C>> {
        match self.stop_and_join() {
            Some(Ok((monitor, Ok(())))) => Ok(monitor),
            Some(Ok((_, Err(e)))) => Err(e),
            Some(Err(_)) => Err(io::Error::other("the monitor thread panicked")),
            None => Err(stopped()),
        }
    }
}

impl<P, S, C> Drop for MonitorHandle<P, S, C> {
    fn drop(&mut self) {
        let _ = self.stop_and_join();
    }
}
