//! Shared by the benches: the floor (a bare non-blocking pipe of 16-byte
//! records), a minimal `VerbsPort` over such a pipe, monitor builders, and
//! the result file that `cargo xtask bench` reads.
//!
//! Each bench binary uses a different subset.
#![allow(dead_code)]

use std::fs::File;
use std::hint::black_box;
use std::io::{self, Read as _, Write as _};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use railwatch_core::{AsyncEvent, Element, EventKind, Gate, LinkAttrs, ObjectHandle, PortState, Selector, VerbsPort};
use railwatch_runtime::{Clock, Config, Monitor};
use railwatch_sim_backend::{PortSpec, SimClock, SimDevice, SimHandle, record};

/// Events in one burst (targets 1, 5 and 6).
pub const BURST: u64 = 10_000;

/// Bytes of one record: the sim's pipe format.
pub const RECORD_LEN: usize = record::RECORD_LEN;

/// What the sim asks for with `F_SETPIPE_SZ`; the floor asks for the same.
pub const PIPE_BYTES: usize = record::REQUESTED_PIPE_BYTES;

/// The `COMM_EST` of one connection, as the burst carries it.
pub fn comm_est() -> AsyncEvent {
    AsyncEvent::new(EventKind::CommEst.code(), Element::Object(ObjectHandle(7)))
}

/// The sim's record codec, shared with the floor and `RawPort` (each bench
/// binary uses a different subset, as with `dead_code` above).
#[allow(unused_imports)]
pub use railwatch_sim_backend::record::{decode, encode};

/// A non-blocking pipe of 16-byte records, sized like the sim's.
pub struct RawPipe {
    // Plain `File`s over the pipe's ends: `read`/`write` on them are single
    // read(2)/write(2) calls, which is exactly the floor.
    read: File,
    write: File,
    /// What `F_GETPIPE_SZ` says.
    pub capacity: usize,
}

impl RawPipe {
    /// The sim's own record pipe (`O_NONBLOCK | O_CLOEXEC`, enlarged to
    /// [`PIPE_BYTES`] where allowed), without the simulator around it.
    pub fn new() -> RawPipe {
        let (read, write, capacity) = record::record_pipe().expect("pipe2");
        RawPipe { read: File::from(read), write: File::from(write), capacity }
    }

    /// The read end.
    pub fn read_fd(&self) -> RawFd {
        self.read.as_raw_fd()
    }

    /// Writes `n` copies of `rec`, in atomic 4 KiB writes.
    ///
    /// # Panics
    ///
    /// If they do not fit the pipe.
    pub fn fill(&self, rec: &[u8; RECORD_LEN], n: u64) {
        const PER_WRITE: usize = 4096 / RECORD_LEN;
        let mut buf = [0u8; 4096];
        for chunk in buf.chunks_exact_mut(RECORD_LEN) {
            chunk.copy_from_slice(rec);
        }
        let mut left = n as usize;
        while left > 0 {
            let records = left.min(PER_WRITE);
            let bytes = records * RECORD_LEN;
            let w = (&self.write).write(&buf[..bytes]);
            assert_eq!(w.ok(), Some(bytes), "the pipe holds {} bytes", self.capacity);
            left -= records;
        }
    }

    /// Writes one byte (the epoll floor's wake-up).
    pub fn poke(&self) {
        let w = (&self.write).write(&[1u8]);
        assert_eq!(w.ok(), Some(1), "write to the pipe");
    }

    /// Reads one record; `WouldBlock` when the pipe is empty.
    #[inline]
    pub fn read_record(&self) -> io::Result<[u8; RECORD_LEN]> {
        let mut rec = [0u8; RECORD_LEN];
        match (&self.read).read(&mut rec)? {
            RECORD_LEN => Ok(rec),
            _ => Err(io::ErrorKind::UnexpectedEof.into()),
        }
    }

    /// Reads whatever is there (up to 64 bytes); `WouldBlock` when empty.
    pub fn read_some(&self) -> io::Result<usize> {
        let mut buf = [0u8; 64];
        (&self.read).read(&mut buf)
    }
}

/// The floor of target 1: `read()` 16-byte records until `EAGAIN`.
/// Returns how many were read.
#[inline]
pub fn bare_read(pipe: &RawPipe) -> u64 {
    let mut n = 0u64;
    loop {
        match pipe.read_record() {
            Ok(rec) => {
                black_box(rec);
                n += 1;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => panic!("read: {e}"),
        }
    }
}

/// `SimDevice::get_event` until `WouldBlock`, no monitor: the simulator's
/// own cost. Returns how many were read.
#[inline]
pub fn sim_only_read(dev: &mut SimDevice) -> u64 {
    let mut n = 0u64;
    loop {
        match dev.get_event() {
            Ok(ev) => {
                black_box(ev);
                n += 1;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return n,
            Err(e) => panic!("get_event: {e}"),
        }
    }
}

/// Target 2 works over this many rails, each behind its own `Arc`.
pub const GATE_RAILS: usize = 16;

/// `GATE_RAILS` active gates (generation 1), each over its own cell, and
/// as many plain atomic words holding 1, each in its own `Arc` too.
pub fn gate_rails() -> ([Gate; GATE_RAILS], [Arc<AtomicU64>; GATE_RAILS]) {
    let gates = std::array::from_fn(|_| {
        let cell = Arc::new(railwatch_core::RailCell::new(railwatch_core::Millis(0)));
        let _ = cell.attach(PortState::Active, railwatch_core::Millis(0));
        Gate::new(cell)
    });
    let words = std::array::from_fn(|_| Arc::new(AtomicU64::new(1)));
    (gates, words)
}

/// Target 2, latency: `steps` admissions in a dependent chain, each
/// choosing the next rail from the generation it read (a worker acts on
/// the ticket before its next transfer). Returns the last rail.
#[inline(always)]
pub fn gate_chain(gates: &[Gate; GATE_RAILS], steps: u64) -> usize {
    let gates = black_box(gates);
    let mut i = 0usize;
    for _ in 0..steps {
        let generation = match gates[i].check() {
            Ok(ticket) => ticket.generation,
            Err(_) => u64::MAX,
        };
        i = (generation as usize).wrapping_add(i) % GATE_RAILS;
    }
    i
}

/// The floor of [`gate_chain`]: the same chain over plain relaxed loads.
#[inline(always)]
pub fn load_chain(words: &[Arc<AtomicU64>; GATE_RAILS], steps: u64) -> usize {
    let words = black_box(words);
    let mut i = 0usize;
    for _ in 0..steps {
        let w = words[i].load(Ordering::Relaxed);
        i = (w as usize).wrapping_add(i) % GATE_RAILS;
    }
    i
}

/// Target 2, throughput (context): `Gate::check` on all 16 rails,
/// independent of each other, summing the generations.
#[inline(always)]
pub fn gate_sweep(gates: &[Gate; GATE_RAILS]) -> u64 {
    let mut sum = 0u64;
    for gate in black_box(gates) {
        sum = sum.wrapping_add(match gate.check() {
            Ok(ticket) => ticket.generation,
            Err(_) => u64::MAX,
        });
    }
    sum
}

/// The floor of [`gate_sweep`]: 16 independent relaxed loads, summed.
#[inline(always)]
pub fn load_sweep(words: &[Arc<AtomicU64>; GATE_RAILS]) -> u64 {
    let mut sum = 0u64;
    for word in black_box(words) {
        sum = sum.wrapping_add(word.load(Ordering::Relaxed));
    }
    sum
}

/// The smallest honest `VerbsPort`: its async fd is a [`RawPipe`], and
/// `get_event` is one `read()` of a record plus the decode. No lock, no
/// counters, no overflow queue: what the monitor adds on top of it is the
/// monitor's own cost.
pub struct RawPort {
    pub pipe: Arc<RawPipe>,
    /// What a port query reads: the flapping bench sets it with each event,
    /// so the recovery tick never reads ACTIVE while the port is "down".
    pub port_up: Arc<AtomicBool>,
}

impl RawPort {
    /// A port over `pipe`, ACTIVE.
    pub fn new(pipe: Arc<RawPipe>) -> RawPort {
        RawPort { pipe, port_up: Arc::new(AtomicBool::new(true)) }
    }
}

impl VerbsPort for RawPort {
    fn name(&self) -> &str {
        "raw0"
    }

    fn ports(&self) -> Vec<u8> {
        vec![1]
    }

    fn async_fd(&self) -> RawFd {
        self.pipe.read_fd()
    }

    #[inline]
    fn get_event(&mut self) -> io::Result<AsyncEvent> {
        decode(&self.pipe.read_record()?)
    }

    fn port_state(&mut self, _port: u8) -> io::Result<PortState> {
        Ok(if self.port_up.load(Ordering::Acquire) { PortState::Active } else { PortState::Down })
    }

    fn link(&mut self, _port: u8) -> io::Result<LinkAttrs> {
        Ok(LinkAttrs::new(PortSpec::NDR, PortSpec::WIDTH_4X))
    }

    fn close(&mut self) {}

    fn reopen(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Spins until `done()`; panics after 10 s instead of hanging a bench run.
#[inline]
pub fn spin_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    let mut n = 0u32;
    while !done() {
        std::hint::spin_loop();
        n = n.wrapping_add(1);
        if n % 4096 == 0 && start.elapsed() > Duration::from_secs(10) {
            panic!("waited 10 s for {what}");
        }
    }
}

/// Polls (zero timeout) until no device is pending: one drain of whatever
/// is queued, as many budget-sized rounds as it takes.
#[inline]
pub fn drain_monitor<P: VerbsPort, S: Selector, C: Clock>(m: &mut Monitor<P, S, C>) {
    m.poll_once(Some(Duration::ZERO)).expect("poll_once");
    while m.has_pending() {
        m.poll_once(Some(Duration::ZERO)).expect("poll_once");
    }
}

/// `n` single-port sim devices (`sim0`, `sim1`, …); the first `paused`
/// have their port DOWN, so they attach paused.
pub fn sim_devices(n: usize, paused: usize) -> (Vec<SimDevice>, Vec<SimHandle>) {
    let mut devices = Vec::with_capacity(n);
    let mut handles = Vec::with_capacity(n);
    for i in 0..n {
        let spec = if i < paused { PortSpec::active(1).with_state(PortState::Down) } else { PortSpec::active(1) };
        let dev = SimDevice::new(format!("sim{i}"), &[spec]).expect("sim device");
        handles.push(dev.handle());
        devices.push(dev);
    }
    (devices, handles)
}

/// A virtual-clock monitor over `n` single-port sim devices, the first
/// `paused` of them paused.
pub fn sim_monitor<S: Selector>(
    n: usize,
    paused: usize,
    config: Config,
    selector: S,
) -> (Monitor<SimDevice, S, SimClock>, Vec<SimHandle>, SimClock) {
    raise_fd_limit();
    let clock = SimClock::new();
    let mut m = Monitor::new(config, selector, clock.clone()).expect("monitor");
    let (devices, handles) = sim_devices(n, paused);
    for d in devices {
        m.add_device(d);
    }
    (m, handles, clock)
}

/// Two fds per sim device: lift the soft limit to the hard one.
pub fn raise_fd_limit() {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `lim` is a valid rlimit to write into.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 && lim.rlim_cur < lim.rlim_max {
        lim.rlim_cur = lim.rlim_max;
        // SAFETY: `lim` is a valid rlimit; raising the soft limit up to the
        // hard one is always allowed.
        let _ = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    }
}

/// Appends `key<TAB>value` to the file named by `RAILWATCH_BENCH_OUT` (set
/// by `cargo xtask bench`) and prints it.
pub fn record(key: &str, value: f64) {
    println!("result {key} = {value}");
    if let Some(path) = std::env::var_os("RAILWATCH_BENCH_OUT") {
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path).expect("result file");
        writeln!(f, "{key}\t{value}").expect("write result");
    }
}
