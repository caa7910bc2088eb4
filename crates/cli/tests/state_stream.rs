//! The state stream's two endings, as its reader sees them
//! (docs/STATE-API.md): a reader that falls behind is cut with a last
//! line saying so (`"kind":"cut"`, [`AskErrorKind::Cut`]); an agent that
//! goes away ends the stream with no such line ([`AskErrorKind::Agent`]).
//! The server and client are the agent's and `railwatch`'s, in process,
//! over a simulated device.

use std::sync::Arc;
use std::time::Duration;

use railwatch_cli::state::{DEFAULT_SOCKET_MODE, Published, STREAM_BACKLOG, SocketSettings, StateSocket};
use railwatch_cli::state_client::{AskErrorKind, Changes};
use railwatch_runtime::{Config, Monitor, NoSelector, Snapshot, SystemClock};
use railwatch_sim_backend::{PortSpec, SimDevice};

/// A snapshot of one simulated device with one active port.
fn snapshot() -> Snapshot {
    let mut monitor = Monitor::new(Config::default(), NoSelector, SystemClock::new()).expect("a monitor");
    monitor.add_device(SimDevice::new("mlx5_0", &[PortSpec::active(1)]).expect("a sim device"));
    monitor.poll_once(Some(Duration::from_millis(10))).expect("poll");
    monitor.snapshot()
}

/// The state socket serving `published`, in a directory of its own.
fn serve(published: &Arc<Published>) -> (tempfile::TempDir, std::path::PathBuf, StateSocket) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.sock");
    let settings = SocketSettings { path: path.clone(), mode: DEFAULT_SOCKET_MODE, group: None };
    let socket = StateSocket::start(&settings, Arc::clone(published)).expect("the state socket");
    (dir, path, socket)
}

/// Reads lines until the stream ends: how many, and how it ended.
fn drain(changes: &mut Changes) -> (usize, railwatch_cli::state_client::AskError) {
    let mut lines = 0;
    loop {
        match changes.next_line(Duration::from_secs(20)) {
            Ok(Some(_)) => lines += 1,
            Ok(None) => panic!("no line within 20 s after {lines}"),
            Err(e) => return (lines, e),
        }
    }
}

#[test]
fn a_reader_that_falls_behind_reads_its_lines_then_that_it_was_cut() {
    let published = Arc::new(Published::default());
    let mut snap = snapshot();
    published.update(&snap);
    let (_dir, path, _socket) = serve(&published);
    let mut changes = Changes::open(&path, Duration::from_secs(5)).expect("the stream opens");
    // Nothing is read while the state changes far more often than the
    // socket's buffers and the backlog hold.
    for _ in 0..2000 {
        snap.rails[0].generation += 1;
        published.update(&snap);
        std::thread::sleep(Duration::from_micros(500));
    }
    let (lines, end) = drain(&mut changes);
    assert_eq!(end.kind, AskErrorKind::Cut, "{end}");
    assert!(end.to_string().contains("lines behind"), "{end}");
    assert!(lines > STREAM_BACKLOG, "{lines} lines before the cut");
}

#[test]
fn a_reader_whose_agent_goes_away_is_told_so_not_that_it_was_cut() {
    let published = Arc::new(Published::default());
    published.update(&snapshot());
    let (_dir, path, socket) = serve(&published);
    let mut changes = Changes::open(&path, Duration::from_secs(5)).expect("the stream opens");
    let first = changes.next_line(Duration::from_secs(5)).unwrap().expect("the whole state first");
    assert!(first.starts_with(r#"{"kind":"state""#), "{first}");
    drop(socket);
    let (lines, end) = drain(&mut changes);
    assert_eq!((lines, end.kind), (0, AskErrorKind::Agent), "{end}");
}
