//! Output that cannot block: lines for stdout or stderr go through a
//! bounded queue to a writer thread of their own, so a reader that stalls
//! (`watch --json | sleep 1000`, a stuck journal) never stops the watch
//! loop, its metrics or its answer to SIGTERM.
//!
//! When the queue is full a line is dropped and counted
//! ([`LineOut::dropped`], a metric of `watch`); once there is room again a
//! line saying how many were dropped goes first, where they would have
//! been. At the end the queue is given a bounded time to drain
//! ([`LineOut::finish`]); a writer still blocked then is left behind (the
//! process ends without it).

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TrySendError};

/// Lines waiting for stdout, at most.
pub const STDOUT_LINES: usize = 1024;
/// Lines waiting for stderr, at most.
pub const STDERR_LINES: usize = 256;

enum Item {
    Line(Vec<u8>),
    /// Everything before it is written: say so.
    Flush(Sender<()>),
}

/// What the writer thread found.
#[derive(Default)]
struct Shared {
    /// The write error that stopped it.
    failed: Mutex<Option<io::ErrorKind>>,
}

/// A bounded queue of lines to one stream, and its writer thread.
pub struct LineOut {
    queue: Sender<Item>,
    shared: Arc<Shared>,
    /// Lines dropped, in all.
    dropped: AtomicU64,
    /// Lines dropped since the last notice was queued.
    unsaid: AtomicU64,
    /// A [`LineOut::finish`] gave up: the writer is left behind.
    abandoned: AtomicBool,
}

impl LineOut {
    /// A queue of `capacity` lines to `sink`, written by a thread named
    /// `name`.
    pub fn new(sink: impl Write + Send + 'static, capacity: usize, name: &str) -> io::Result<LineOut> {
        let (queue, items) = crossbeam_channel::bounded(capacity.max(1));
        let shared = Arc::new(Shared::default());
        let theirs = Arc::clone(&shared);
        thread::Builder::new().name(name.to_owned()).spawn(move || write_all(sink, &items, &theirs))?;
        Ok(LineOut {
            queue,
            shared,
            dropped: AtomicU64::new(0),
            unsaid: AtomicU64::new(0),
            abandoned: AtomicBool::new(false),
        })
    }

    /// A queue to this process's stdout (a second descriptor on it: the
    /// writer never takes std's stdout lock).
    pub fn stdout() -> io::Result<LineOut> {
        let fd = io::stdout().as_fd().try_clone_to_owned()?;
        LineOut::new(File::from(fd), STDOUT_LINES, "railwatch-stdout")
    }

    /// Queues `line` (a whole line, its newline included), or drops and
    /// counts it if the queue is full; `notice(n)` makes the line that says
    /// `n` were dropped, queued first once there is room. An error once
    /// the writer has failed (a closed pipe is `BrokenPipe`).
    pub fn send(&self, line: Vec<u8>, notice: impl FnOnce(u64) -> Vec<u8>) -> io::Result<()> {
        if let Some(kind) = *self.shared.failed.lock().unwrap_or_else(PoisonError::into_inner) {
            return Err(io::Error::new(kind, "the output's writer stopped"));
        }
        let unsaid = self.unsaid.swap(0, Ordering::AcqRel);
        if unsaid > 0 {
            if let Err(TrySendError::Full(_)) = self.queue.try_send(Item::Line(notice(unsaid))) {
                self.unsaid.fetch_add(unsaid, Ordering::AcqRel);
                self.drop_one();
                return Ok(());
            }
        }
        if let Err(TrySendError::Full(_)) = self.queue.try_send(Item::Line(line)) {
            self.drop_one();
        }
        Ok(())
    }

    fn drop_one(&self) {
        self.dropped.fetch_add(1, Ordering::AcqRel);
        self.unsaid.fetch_add(1, Ordering::AcqRel);
    }

    /// Lines dropped so far.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Acquire)
    }

    /// Waits until everything queued is written, at most `within`; the
    /// notice of lines still unsaid goes last. Whether it all went. Once a
    /// finish gave up, a later one does not wait again (the end's bounded
    /// time is spent once, whichever way out calls it).
    pub fn finish(&self, within: Duration, notice: impl FnOnce(u64) -> Vec<u8>) -> bool {
        if self.abandoned.load(Ordering::Acquire) {
            return false;
        }
        let went = self.drain_within(within, notice);
        if !went {
            self.abandoned.store(true, Ordering::Release);
        }
        went
    }

    fn drain_within(&self, within: Duration, notice: impl FnOnce(u64) -> Vec<u8>) -> bool {
        let deadline = Instant::now() + within;
        let unsaid = self.unsaid.swap(0, Ordering::AcqRel);
        if unsaid > 0 && self.queue.send_deadline(Item::Line(notice(unsaid)), deadline).is_err() {
            return false;
        }
        let (ack, acked) = crossbeam_channel::bounded(1);
        self.queue.send_deadline(Item::Flush(ack), deadline).is_ok() && acked.recv_deadline(deadline).is_ok()
    }
}

/// The writer thread: every line in order, until the queue is gone or a
/// write fails (then it stops: what is queued is dropped with the queue).
fn write_all(mut sink: impl Write, items: &Receiver<Item>, shared: &Shared) {
    for item in items {
        match item {
            Item::Line(line) => {
                if let Err(e) = sink.write_all(&line).and_then(|()| sink.flush()) {
                    *shared.failed.lock().unwrap_or_else(PoisonError::into_inner) = Some(e.kind());
                    return;
                }
            }
            Item::Flush(ack) => {
                let _ = ack.send(());
            }
        }
    }
}

/// The stderr queue, once `watch` installs it ([`install_stderr`]).
static STDERR: OnceLock<LineOut> = OnceLock::new();

/// From now on, [`eprint()`] and the log go through a queue to stderr.
pub fn install_stderr() {
    let made = io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .and_then(|fd| LineOut::new(File::from(fd), STDERR_LINES, "railwatch-stderr"));
    match made {
        Ok(out) => {
            let _ = STDERR.set(out);
        }
        Err(e) => {
            let _ = writeln!(io::stderr(), "railwatch: stderr stays unqueued ({e})");
        }
    }
}

fn stderr_notice(n: u64) -> Vec<u8> {
    format!("railwatch: {n} line(s) of stderr dropped: it was not read fast enough\n").into_bytes()
}

/// Writes a line to stderr: through the queue once installed, else at
/// once. A line that cannot be written is dropped.
pub fn eprint(line: std::fmt::Arguments<'_>) {
    let mut text = line.to_string();
    text.push('\n');
    eprint_bytes(text.into_bytes());
}

fn eprint_bytes(bytes: Vec<u8>) {
    match STDERR.get() {
        Some(out) => {
            let _ = out.send(bytes, stderr_notice);
        }
        None => {
            let _ = io::stderr().write_all(&bytes);
        }
    }
}

/// Lines dropped on the way to stderr.
pub fn stderr_dropped() -> u64 {
    STDERR.get().map_or(0, LineOut::dropped)
}

/// Gives the stderr queue up to `within` to drain.
pub fn finish_stderr(within: Duration) {
    if let Some(out) = STDERR.get() {
        out.finish(within, stderr_notice);
    }
}

/// A writer for the log (env_logger writes each record whole, in one
/// call): to stderr as [`eprint()`] does.
pub struct LogPipe;

impl Write for LogPipe {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        eprint_bytes(buf.to_vec());
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink that blocks until let go, then records what it got.
    #[derive(Clone)]
    struct Stalled {
        go: Receiver<()>,
        got: Arc<Mutex<Vec<u8>>>,
    }

    impl Write for Stalled {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let _ = self.go.recv();
            self.got.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn notice(n: u64) -> Vec<u8> {
        format!("dropped {n}\n").into_bytes()
    }

    /// A stalled reader: sending never blocks; what does not fit is
    /// dropped, counted, and said where it was once the reader drains.
    #[test]
    fn a_stalled_reader_never_blocks_the_sender() {
        let (go, gate) = crossbeam_channel::unbounded();
        let got = Arc::new(Mutex::new(Vec::new()));
        let out = LineOut::new(Stalled { go: gate, got: Arc::clone(&got) }, 4, "test-out").unwrap();
        for n in 0..100 {
            out.send(format!("line {n}\n").into_bytes(), notice).unwrap();
        }
        // The writer holds one line, the queue four: the rest dropped.
        assert!(out.dropped() >= 95, "{}", out.dropped());
        let dropped = out.dropped();
        for _ in 0..200 {
            go.send(()).unwrap();
        }
        assert!(out.finish(Duration::from_secs(30), notice), "drained once let go");
        out.send(b"after\n".to_vec(), notice).unwrap();
        assert!(out.finish(Duration::from_secs(30), notice));
        let text = String::from_utf8(got.lock().unwrap().clone()).unwrap();
        let said: u64 = text.lines().filter_map(|l| l.strip_prefix("dropped ")?.parse::<u64>().ok()).sum();
        assert_eq!(said, dropped, "{text}");
        assert!(text.ends_with("after\n"), "{text}");
        let lines = text.lines().filter(|l| l.starts_with("line ")).count() as u64;
        assert_eq!(lines + dropped, 100, "{text}");
    }

    /// Finishing with a reader that never drains gives up at its bound.
    #[test]
    fn finishing_gives_up_on_a_stuck_reader() {
        let (_go, gate) = crossbeam_channel::unbounded();
        let out = LineOut::new(Stalled { go: gate, got: Arc::default() }, 2, "test-stuck").unwrap();
        for _ in 0..10 {
            out.send(b"x\n".to_vec(), notice).unwrap();
        }
        assert!(!out.finish(Duration::from_millis(50), notice));
    }

    /// A finish that gave up is not waited out again (`watch` finishes
    /// stdout at its end, then again as the printer is dropped: a stalled
    /// reader held SIGTERM's exit twice the bound): a later finish says
    /// so at once, even if the reader has drained since.
    #[test]
    fn a_finish_that_gave_up_is_not_waited_again() {
        let (go, gate) = crossbeam_channel::unbounded();
        let out = LineOut::new(Stalled { go: gate, got: Arc::default() }, 2, "test-twice").unwrap();
        for _ in 0..10 {
            out.send(b"x\n".to_vec(), notice).unwrap();
        }
        assert!(!out.finish(Duration::from_millis(50), notice));
        for _ in 0..100 {
            go.send(()).unwrap();
        }
        assert!(!out.finish(Duration::from_secs(30), notice), "the second finish waited for the writer");
    }

    /// A closed reader (EPIPE) is an error to the sender, once seen.
    #[test]
    fn a_failed_writer_is_reported() {
        struct Closed;
        impl Write for Closed {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::ErrorKind::BrokenPipe.into())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let out = LineOut::new(Closed, 4, "test-closed").unwrap();
        out.send(b"x\n".to_vec(), notice).unwrap();
        let started = Instant::now();
        loop {
            match out.send(b"y\n".to_vec(), notice) {
                Err(e) => break assert_eq!(e.kind(), io::ErrorKind::BrokenPipe),
                Ok(()) => assert!(started.elapsed() < Duration::from_secs(30), "never seen"),
            }
            thread::sleep(Duration::from_millis(5));
        }
    }
}
