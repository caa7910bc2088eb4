//! The cost of being read (`cargo xtask bench`, row 13): recovery latency
//! p99 — `PORT_ACTIVE` written on a simulated device → the rail's gate
//! admits — for a monitor whose every wake-up publishes its snapshot to
//! the state API as `railwatch watch --state-socket` does, with 100
//! clients reading `GET /v1/state` on the Unix socket at 10 Hz each,
//! against the same without the readers. Rounds of one second alternate
//! between the two; the figure is the median of the per-pair p99 ratios.
//! Prints `key<TAB>value` lines for the bench table.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

mod common;

use railwatch_cli::state::{DEFAULT_SOCKET_MODE, Published, SocketSettings, StateSocket};
use railwatch_runtime::{Config, Monitor, NoSelector, SystemClock};
use railwatch_sim_backend::{PortSpec, SimDevice};

const PAIRS: usize = 4;
/// One round of flaps, read or not.
const ROUND: Duration = Duration::from_secs(1);
/// Readers, each reading every [`READ_EVERY`].
const READERS: usize = 100;
const READ_EVERY: Duration = Duration::from_millis(100);

fn main() {
    let mut monitor = Monitor::new(Config::default(), NoSelector, SystemClock::new()).expect("a monitor");
    let dev = SimDevice::new("mlx5_0", &[PortSpec::active(1)]).expect("a sim device");
    let sim = dev.handle();
    monitor.add_device(dev);
    let gate = monitor.gate_of("mlx5_0/1").expect("the rail");
    let published = Arc::new(Published::default());
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("state.sock");
    let settings = SocketSettings { path: path.clone(), mode: DEFAULT_SOCKET_MODE, group: None };
    let _socket = StateSocket::start(&settings, Arc::clone(&published)).expect("the state socket");
    published.update(&monitor.snapshot());

    let reading = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    for _ in 0..READERS {
        let (reading, reads, path) = (reading.clone(), reads.clone(), path.clone());
        std::thread::spawn(move || reader(&path, &reading, &reads));
    }

    // One wake-up of `watch`: poll, then publish the snapshot.
    let wake = |monitor: &mut Monitor<SimDevice, NoSelector, SystemClock>| {
        monitor.poll_once(Some(Duration::from_secs(1))).expect("poll");
        published.update(&monitor.snapshot());
    };

    let compared = common::alternate(PAIRS, |read| {
        reading.store(read, Ordering::Release);
        common::flap_round(&sim, &gate, ROUND, || wake(&mut monitor))
    });
    reading.store(false, Ordering::Release);
    compared.print("readers");
    println!("readers_reads\t{}", reads.load(Ordering::Relaxed));
}

/// One client: a GET every [`READ_EVERY`] while `reading`.
fn reader(path: &Path, reading: &AtomicBool, reads: &AtomicU64) {
    loop {
        if reading.load(Ordering::Acquire) && read(path).is_some() {
            reads.fetch_add(1, Ordering::Relaxed);
        }
        std::thread::sleep(READ_EVERY);
    }
}

/// One GET /v1/state; the answer's length.
fn read(path: &Path) -> Option<usize> {
    let mut s = UnixStream::connect(path).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(b"GET /v1/state HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n").ok()?;
    let mut body = Vec::new();
    s.read_to_end(&mut body).ok()?;
    Some(body.len())
}
