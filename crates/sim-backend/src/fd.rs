//! A real non-blocking pipe carrying one fixed-size record per event.
//!
//! The read end is what the monitor registers with epoll, so readiness,
//! edge-triggering and `EAGAIN` are the kernel's own, not imitations. Each
//! event is one 16-byte record (code `u32`, element tag `u32`, value `u64`,
//! native endian); writes are at most `PIPE_BUF` bytes, so each is atomic and a
//! record is never split.
//!
//! A pipe holds a finite number of bytes (64 KiB by default). The pipe is
//! asked for [`REQUESTED_PIPE_BYTES`] with `F_SETPIPE_SZ` (ignored where not
//! allowed); whatever does not fit waits in an in-memory overflow queue
//! (run-length encoded, so a million copies of one event cost one entry). The
//! overflow is moved into the pipe by the reader: after every successful read
//! that leaves the pipe at most half full, and before reporting `WouldBlock`.
//! So the reader never sees `WouldBlock` while anything is queued, the pipe is
//! never left empty while the overflow holds events (a reader that stops
//! early still has a readable fd), and every top-up is a real write that gives
//! an edge-triggered reader a new edge.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use railwatch_core::{AsyncEvent, Element, ObjectHandle};

/// Bytes of one event record in the pipe.
pub const RECORD_LEN: usize = 16;

/// Pipe capacity asked for with `F_SETPIPE_SZ` (the kernel rounds it up to a
/// power-of-two number of pages). Modest on purpose: pipe buffers count
/// against a per-user limit, and the overflow queue makes any size correct.
pub const REQUESTED_PIPE_BYTES: usize = 256 * 1024;

/// Largest write that is atomic on a pipe (`PIPE_BUF`, 4096 on Linux).
const ATOMIC_WRITE: usize = 4096;
const RECORDS_PER_WRITE: usize = ATOMIC_WRITE / RECORD_LEN;

const TAG_NONE: u32 = 0;
const TAG_PORT: u32 = 1;
const TAG_OBJECT: u32 = 2;

/// Encodes an event as one pipe record.
pub fn encode(event: &AsyncEvent) -> [u8; RECORD_LEN] {
    let (tag, value) = match event.element {
        Element::None => (TAG_NONE, 0),
        Element::Port(p) => (TAG_PORT, u64::from(p)),
        Element::Object(ObjectHandle(h)) => (TAG_OBJECT, h),
    };
    let mut rec = [0u8; RECORD_LEN];
    rec[0..4].copy_from_slice(&event.code.to_ne_bytes());
    rec[4..8].copy_from_slice(&tag.to_ne_bytes());
    rec[8..16].copy_from_slice(&value.to_ne_bytes());
    rec
}

/// Decodes one pipe record.
pub fn decode(rec: &[u8; RECORD_LEN]) -> io::Result<AsyncEvent> {
    let word = |i: usize| u32::from_ne_bytes([rec[i], rec[i + 1], rec[i + 2], rec[i + 3]]);
    let mut value = [0u8; 8];
    value.copy_from_slice(&rec[8..16]);
    let value = u64::from_ne_bytes(value);
    let element = match word(4) {
        TAG_NONE => Element::None,
        TAG_PORT => Element::Port(u32::try_from(value).map_err(|_| bad_record("port number out of range"))?),
        TAG_OBJECT => Element::Object(ObjectHandle(value)),
        _ => return Err(bad_record("unknown element tag")),
    };
    Ok(AsyncEvent::new(word(0), element))
}

fn bad_record(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("corrupt event record: {what}"))
}

/// A pipe for event records: both ends `O_NONBLOCK | O_CLOEXEC`, enlarged to
/// [`REQUESTED_PIPE_BYTES`] where the per-user limit allows. Returns the
/// read end, the write end and the capacity in bytes (at least one atomic
/// write).
pub fn record_pipe() -> io::Result<(OwnedFd, OwnedFd, usize)> {
    let mut fds: [libc::c_int; 2] = [-1, -1];
    // SAFETY: `fds` is a valid, writable array of two c_ints, as pipe2
    // requires; the flags are valid pipe2 flags.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded, so both descriptors are open and owned by
    // nobody else; each is wrapped exactly once.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let requested = libc::c_int::try_from(REQUESTED_PIPE_BYTES).unwrap_or(libc::c_int::MAX);
    // SAFETY: fcntl on a descriptor we own; F_SETPIPE_SZ takes an int.
    // Failure (EPERM above the per-user limit) is fine: the overflow
    // queue makes any capacity correct.
    let _ = unsafe { libc::fcntl(write.as_raw_fd(), libc::F_SETPIPE_SZ, requested) };
    // SAFETY: fcntl on a descriptor we own; F_GETPIPE_SZ takes no argument.
    let size = unsafe { libc::fcntl(write.as_raw_fd(), libc::F_GETPIPE_SZ) };
    Ok((read, write, usize::try_from(size).unwrap_or(ATOMIC_WRITE).max(ATOMIC_WRITE)))
}

/// A non-blocking eventfd (`EFD_NONBLOCK | EFD_CLOEXEC`): readable while
/// its count is not 0, every write a new edge, and a write never raises
/// SIGPIPE (a pipe's does once its reader is gone).
pub(crate) fn event_fd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd takes an initial count and valid flags; it returns a
    // new descriptor or -1.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: eventfd succeeded: the descriptor is open and owned by nobody
    // else; it is wrapped exactly once.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// One device's event queue: a pipe plus its overflow.
#[derive(Debug)]
pub(crate) struct EventPipe {
    read: OwnedFd,
    /// `None` once the write end was closed (the device was removed).
    write: Option<OwnedFd>,
    /// Records waiting for room in the pipe, oldest first, as (record, copies).
    overflow: VecDeque<([u8; RECORD_LEN], u64)>,
    /// Total copies in `overflow`.
    overflow_len: u64,
    /// Records currently inside the kernel pipe (exact: every read and write
    /// goes through this struct).
    in_pipe: u64,
    /// Capacity of the pipe in bytes (`F_GETPIPE_SZ`).
    capacity_bytes: usize,
}

impl EventPipe {
    /// A new pipe, both ends `O_NONBLOCK | O_CLOEXEC`, enlarged where allowed.
    pub(crate) fn new() -> io::Result<EventPipe> {
        let (read, write, capacity_bytes) = record_pipe()?;
        Ok(EventPipe {
            read,
            write: Some(write),
            overflow: VecDeque::new(),
            overflow_len: 0,
            in_pipe: 0,
            capacity_bytes,
        })
    }

    /// The read end, for epoll.
    /// A second descriptor for the read end (`dup`): same pipe, same
    /// readiness, for a caller that waits on it with its own epoll.
    pub(crate) fn try_clone_read(&self) -> io::Result<OwnedFd> {
        self.read.try_clone()
    }

    pub(crate) fn read_fd(&self) -> RawFd {
        self.read.as_raw_fd()
    }

    /// The pipe's capacity in bytes.
    pub(crate) fn capacity_bytes(&self) -> usize {
        self.capacity_bytes
    }

    /// False once the write end was closed.
    pub(crate) fn is_live(&self) -> bool {
        self.write.is_some()
    }

    /// Events queued and not yet read (pipe and overflow).
    pub(crate) fn pending(&self) -> u64 {
        self.in_pipe + self.overflow_len
    }

    /// Events inside the kernel pipe right now.
    #[cfg(test)]
    pub(crate) fn in_pipe(&self) -> u64 {
        self.in_pipe
    }

    /// Queues `copies` copies of `record` behind everything already queued.
    /// Never blocks; returns false (queuing nothing) when the write end is
    /// closed.
    pub(crate) fn push(&mut self, record: [u8; RECORD_LEN], copies: u64) -> io::Result<bool> {
        if self.write.is_none() {
            return Ok(false);
        }
        if copies == 0 {
            return Ok(true);
        }
        match self.overflow.back_mut() {
            Some((last, n)) if *last == record => *n += copies,
            _ => self.overflow.push_back((record, copies)),
        }
        self.overflow_len += copies;
        self.flush()?;
        Ok(true)
    }

    /// Reads exactly one record. `WouldBlock` only when nothing is queued.
    pub(crate) fn read_one(&mut self) -> io::Result<[u8; RECORD_LEN]> {
        let rec = match self.read_raw() {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && self.overflow_len > 0 => {
                // Not expected (the pipe is topped up before it runs dry),
                // but never report an empty queue while events wait.
                self.flush()?;
                self.read_raw()?
            }
            other => other?,
        };
        self.in_pipe = self.in_pipe.saturating_sub(1);
        if self.overflow_len > 0 && self.in_pipe.saturating_mul(2) * (RECORD_LEN as u64) <= self.capacity_bytes as u64 {
            self.flush()?;
        }
        Ok(rec)
    }

    fn read_raw(&mut self) -> io::Result<[u8; RECORD_LEN]> {
        let mut rec = [0u8; RECORD_LEN];
        // SAFETY: `rec` is a valid writable buffer of RECORD_LEN bytes and
        // the descriptor is open (owned by self).
        let n = unsafe { libc::read(self.read.as_raw_fd(), rec.as_mut_ptr().cast(), RECORD_LEN) };
        match n {
            n if n < 0 => Err(io::Error::last_os_error()),
            // End of file: no writer left and nothing queued.
            0 => Err(io::Error::from_raw_os_error(libc::EIO)),
            n if n as usize == RECORD_LEN => Ok(rec),
            _ => Err(bad_record("short read")),
        }
    }

    /// Moves overflow into the pipe, one atomic write of whole records at a
    /// time, until the overflow is empty or the pipe is full.
    fn flush(&mut self) -> io::Result<()> {
        let Some(write) = &self.write else { return Ok(()) };
        let fd = write.as_raw_fd();
        let mut buf = [0u8; ATOMIC_WRITE];
        while self.overflow_len > 0 {
            // Fill the buffer from the front runs without consuming them yet.
            let mut records = 0usize;
            for (rec, n) in &self.overflow {
                let take = (RECORDS_PER_WRITE - records).min(usize::try_from(*n).unwrap_or(usize::MAX));
                for _ in 0..take {
                    buf[records * RECORD_LEN..(records + 1) * RECORD_LEN].copy_from_slice(rec);
                    records += 1;
                }
                if records == RECORDS_PER_WRITE {
                    break;
                }
            }
            let bytes = records * RECORD_LEN;
            // SAFETY: `buf[..bytes]` is initialised and valid for reads; the
            // descriptor is open (owned by self). `bytes` <= PIPE_BUF, so the
            // write is all-or-nothing.
            let n = unsafe { libc::write(fd, buf.as_ptr().cast(), bytes) };
            if n < 0 {
                let err = io::Error::last_os_error();
                return match err.kind() {
                    io::ErrorKind::WouldBlock => Ok(()),
                    io::ErrorKind::Interrupted => continue,
                    _ => Err(err),
                };
            }
            if n as usize != bytes {
                // Impossible for writes <= PIPE_BUF; refuse to continue on a
                // split record rather than corrupt the stream.
                return Err(bad_record("partial pipe write"));
            }
            self.consume_overflow(records as u64);
        }
        Ok(())
    }

    fn consume_overflow(&mut self, mut records: u64) {
        self.in_pipe += records;
        self.overflow_len -= records;
        while records > 0 {
            let Some(front) = self.overflow.front_mut() else { break };
            if front.1 > records {
                front.1 -= records;
                break;
            }
            records -= front.1;
            self.overflow.pop_front();
        }
    }

    /// Drops every queued event (pipe and overflow); returns how many.
    pub(crate) fn discard(&mut self) -> u64 {
        let mut dropped = self.overflow_len;
        self.overflow.clear();
        self.overflow_len = 0;
        while self.in_pipe > 0 {
            match self.read_raw() {
                Ok(_) => {
                    self.in_pipe -= 1;
                    dropped += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        dropped += std::mem::take(&mut self.in_pipe);
        dropped
    }

    /// Drops every queued event and closes the write end: the read end then
    /// reports a hang-up (EPOLLHUP) and reads hit end of file. Returns how
    /// many events were dropped.
    pub(crate) fn close_write(&mut self) -> u64 {
        let dropped = self.discard();
        self.write = None;
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use railwatch_core::EventKind;

    #[test]
    fn records_round_trip() {
        for ev in [
            AsyncEvent::port(EventKind::PortActive, 1),
            AsyncEvent::port(EventKind::PortErr, u32::MAX),
            AsyncEvent::new(8, Element::None),
            AsyncEvent::new(1, Element::Object(ObjectHandle(u64::MAX))),
            AsyncEvent::new(99, Element::None),
        ] {
            assert_eq!(decode(&encode(&ev)).unwrap(), ev);
        }
        let mut bad = encode(&AsyncEvent::new(0, Element::None));
        bad[4] = 7;
        assert_eq!(decode(&bad).unwrap_err().kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn overflow_is_flushed_as_the_reader_makes_room() {
        let mut pipe = EventPipe::new().unwrap();
        let cap = (pipe.capacity_bytes() / RECORD_LEN) as u64;
        let total = cap * 3 + 17;
        let a = encode(&AsyncEvent::port(EventKind::CommEst, 1));
        let b = encode(&AsyncEvent::port(EventKind::PortActive, 1));
        assert!(pipe.push(a, total - 1).unwrap());
        assert!(pipe.push(b, 1).unwrap());
        assert!(pipe.in_pipe() <= cap);
        assert_eq!(pipe.pending(), total);
        for i in 0..total {
            let rec = pipe.read_one().unwrap();
            assert_eq!(rec, if i == total - 1 { b } else { a }, "record {i}");
            assert!(pipe.in_pipe() > 0 || pipe.pending() == 0, "pipe ran dry with overflow left at {i}");
        }
        assert_eq!(pipe.read_one().unwrap_err().kind(), io::ErrorKind::WouldBlock);
        assert_eq!(pipe.pending(), 0);
    }

    #[test]
    fn close_write_discards_and_hits_eof() {
        let mut pipe = EventPipe::new().unwrap();
        let a = encode(&AsyncEvent::port(EventKind::CommEst, 1));
        pipe.push(a, 10).unwrap();
        assert_eq!(pipe.close_write(), 10);
        assert!(!pipe.is_live());
        assert!(!pipe.push(a, 1).unwrap());
        assert_eq!(pipe.read_one().unwrap_err().raw_os_error(), Some(libc::EIO));
    }
}
