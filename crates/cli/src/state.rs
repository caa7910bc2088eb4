//! `watch`'s local state API (docs/STATE-API.md): the snapshot of each
//! turn published for readers on other threads, served read-only as
//! `GET /v1/state` on the state socket (`--state-socket PATH`) and on the
//! metrics listener. A reader gets the published snapshot, encoded on the
//! server's thread; the watch loop only swaps a pointer.

use std::collections::BTreeSet;
use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, watch};

use railwatch_core::DeviceMode;
use railwatch_runtime::Snapshot;
use railwatch_runtime::state::StateJson;

use crate::metrics::serve::http::{self, Body, Limits, Listener, Request, Response};

/// The API's one path.
pub const STATE_PATH: &str = "/v1/state";

/// How often a stream reader hears that the agent is alive when nothing
/// changed.
pub const HEARTBEAT: Duration = Duration::from_secs(5);

/// Lines a stream reader may fall behind by before it is cut.
pub const STREAM_BACKLOG: usize = 64;

/// What a stream reader cut off as too slow reads last, when it reads on:
/// the cut, told apart from the agent going away (the stream just ends,
/// or breaks).
fn cut_line(t_ms: u64) -> Bytes {
    let message = format!("{STREAM_BACKLOG} lines behind: reconnect for the whole state");
    line(&serde_json::json!({"kind": "cut", "t_ms": t_ms, "reason": "slow_reader", "message": message}))
}

/// What the loop publishes for readers: the latest snapshot and whether
/// the agent is warm, and a signal for stream readers that it changed.
pub struct Published {
    snapshot: Mutex<Option<Arc<Snapshot>>>,
    warm: AtomicBool,
    /// The devices present at the first turn, until each was attached once.
    waiting: Mutex<Option<BTreeSet<String>>>,
    /// Bumped at every update.
    changed: watch::Sender<u64>,
    /// The latest state as stream readers are sent it.
    encoded: Mutex<Option<Arc<Encoded>>>,
}

impl Default for Published {
    fn default() -> Published {
        Published {
            snapshot: Mutex::default(),
            warm: AtomicBool::default(),
            waiting: Mutex::default(),
            changed: watch::Sender::new(0),
            encoded: Mutex::default(),
        }
    }
}

impl Published {
    /// The turn's snapshot, published whole. The loop's thread does no
    /// work per reader here: it swaps the pointer and wakes at most one
    /// task per server (the fan-out of [`Api`]), whatever the readers.
    pub fn update(&self, snapshot: &Snapshot) {
        if !self.warm.load(Ordering::Relaxed) && self.warmed(snapshot) {
            self.warm.store(true, Ordering::Release);
        }
        let shared = Arc::new(snapshot.clone());
        *self.snapshot.lock().unwrap_or_else(PoisonError::into_inner) = Some(shared);
        self.changed.send_modify(|n| *n += 1);
    }

    /// The latest snapshot and whether the agent was warm at it.
    fn latest(&self) -> Option<(Arc<Snapshot>, bool)> {
        let snapshot = self.snapshot.lock().unwrap_or_else(PoisonError::into_inner).clone()?;
        Some((snapshot, self.warm.load(Ordering::Acquire)))
    }

    /// Whether every device present at the first turn has been attached
    /// (each of its ports read once) or has left.
    fn warmed(&self, snapshot: &Snapshot) -> bool {
        let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        let waiting = waiting.get_or_insert_with(|| snapshot.devices.iter().map(|d| d.name.clone()).collect());
        waiting.retain(|name| {
            let gone = snapshot.devices.iter().any(|d| d.name == *name && d.mode == DeviceMode::Removed);
            let mut rails = snapshot.rails.iter().filter(|r| r.name.rsplit_once('/').is_some_and(|(d, _)| d == name));
            let read = rails.clone().next().is_some() && rails.all(|r| r.last_port_state.is_some());
            !(gone || read)
        });
        waiting.is_empty()
    }
}

/// The state API as one server answers it: the published state, and the
/// task on the server's thread that feeds every stream reader of that
/// server (started with its first reader).
pub struct Api {
    published: Arc<Published>,
    /// Where a new reader is handed to the fan-out task.
    fan_out: Mutex<Option<mpsc::UnboundedSender<Reader>>>,
}

impl Api {
    /// The API over `published`, for one server.
    pub fn new(published: Arc<Published>) -> Api {
        Api { published, fan_out: Mutex::default() }
    }

    /// The answer to a request for [`STATE_PATH`], or `None` for another
    /// path: the document, or with `?watch=1` its stream (called on the
    /// server's runtime, where the fan-out task runs).
    pub fn respond(&self, request: &Request) -> Option<Response> {
        if request.path != STATE_PATH {
            return None;
        }
        if !matches!(request.method.as_str(), "GET" | "HEAD") {
            let mut r = http::plain(405, "only GET and HEAD\n");
            r.headers.push(("Allow", "GET, HEAD".to_owned()));
            return Some(r);
        }
        let Some((snapshot, warm)) = self.published.latest() else {
            return Some(http::plain(503, "railwatch has not finished its first turn\n"));
        };
        if request.query.as_deref().is_some_and(|q| q.split('&').any(|p| p == "watch=1")) {
            // One place more than the backlog: the cut line's.
            let (tx, rx) = mpsc::channel(STREAM_BACKLOG + 1);
            self.join(Reader { tx, at: None, quiet_since: tokio::time::Instant::now() });
            let headers = vec![("Content-Type", "application/x-ndjson".to_owned())];
            return Some(Response { status: 200, headers, body: Body::Lines(rx) });
        }
        let body = serde_json::to_string(&StateJson::of(&snapshot, warm)).unwrap_or_default() + "\n";
        Some(Response {
            status: 200,
            headers: vec![("Content-Type", "application/json".to_owned())],
            body: body.into(),
        })
    }

    /// Hands `reader` to the fan-out task, started on this runtime if it
    /// is not running.
    fn join(&self, reader: Reader) {
        let mut fan_out = self.fan_out.lock().unwrap_or_else(PoisonError::into_inner);
        let reader = match fan_out.as_ref() {
            Some(tx) => match tx.send(reader) {
                Ok(()) => return,
                // The task is gone (its runtime was): a new one.
                Err(mpsc::error::SendError(reader)) => reader,
            },
            None => reader,
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = tx.send(reader);
        tokio::spawn(fan_out_task(Arc::clone(&self.published), self.published.changed.subscribe(), rx));
        *fan_out = Some(tx);
    }
}

/// A stream reader, as the fan-out task keeps it.
struct Reader {
    /// Its lines, written by its connection's task.
    tx: mpsc::Sender<Bytes>,
    /// The state it was last told (`None`: nothing yet).
    at: Option<Arc<Encoded>>,
    /// Since when it was sent no line (its heartbeat is due [`HEARTBEAT`]
    /// later).
    quiet_since: tokio::time::Instant,
}

/// Readers fed before the task lets the server's other tasks run (a
/// scrape waits behind at most this many readers' lines).
const FAN_OUT_CHUNK: usize = 4;

/// The least time between two fan-outs: a host flapping thousands of
/// times a second costs the server's thread at most this many a second
/// (each reader told the latest state), not one per turn of the loop.
const FAN_OUT_GAP: Duration = Duration::from_millis(2);

/// Every stream reader of one server (`?watch=1`), fed by this one task on
/// the server's thread: the loop's update wakes it once; it tells each
/// reader what changed since it was last told, as lines (the changes
/// from one state to the next made once, shared by every reader at the
/// same state), a few readers at a time. A reader's lines: the whole
/// document first (`"kind":"state"`), then after each turn every rail
/// whose fields changed (`"kind":"rail"`, with `t_ms` and `warm`) and
/// `warm` turning true (`"kind":"warm"`), and a `"kind":"heartbeat"` after
/// [`HEARTBEAT`] with nothing to say. A reader [`STREAM_BACKLOG`] lines
/// behind is cut: its last line says so (`"kind":"cut"`), and the stream
/// ends; one that is gone is left.
async fn fan_out_task(
    published: Arc<Published>,
    mut changed: watch::Receiver<u64>,
    mut joining: mpsc::UnboundedReceiver<Reader>,
) {
    let mut readers: Vec<Reader> = Vec::new();
    let mut last_fan_out: Option<tokio::time::Instant> = None;
    loop {
        let due = readers.iter().map(|r| r.quiet_since + HEARTBEAT).min();
        let far = tokio::time::Instant::now() + HEARTBEAT;
        tokio::select! {
            // Waited for only with readers: an update wakes no task of a
            // server without one (the loop's publish then wakes nothing).
            ended = changed.changed(), if !readers.is_empty() => if ended.is_err() { return },
            reader = joining.recv() => match reader {
                Some(reader) => readers.push(reader),
                None => return,
            },
            () = tokio::time::sleep_until(due.unwrap_or(far)), if due.is_some() => {
                let now = tokio::time::Instant::now();
                let t_ms = published.encoded().map_or(0, |e| e.t_ms);
                readers.retain_mut(|r| {
                    if now < r.quiet_since + HEARTBEAT {
                        return true;
                    }
                    r.quiet_since = now;
                    send(&r.tx, line(&serde_json::json!({"kind": "heartbeat", "t_ms": t_ms})), t_ms)
                });
                continue;
            }
        }
        // A storm of changes is told at most every FAN_OUT_GAP (each
        // reader the latest state); a change after a quiet spell at once.
        if let Some(last) = last_fan_out.filter(|t| t.elapsed() < FAN_OUT_GAP) {
            tokio::time::sleep_until(last + FAN_OUT_GAP).await;
        }
        last_fan_out = Some(tokio::time::Instant::now());
        let Some(now) = published.encoded() else { continue };
        let mut changes = Changes::default();
        let mut i = 0;
        let mut fed = 0;
        while i < readers.len() {
            let reader = &mut readers[i];
            if reader.at.as_ref().is_some_and(|at| Arc::ptr_eq(at, &now)) {
                i += 1;
                continue;
            }
            let lines = changes.between(reader.at.as_ref(), &now);
            let kept = lines.iter().all(|l| send(&reader.tx, l.clone(), now.t_ms));
            if !lines.is_empty() {
                reader.quiet_since = tokio::time::Instant::now();
            }
            reader.at = Some(Arc::clone(&now));
            if kept {
                i += 1;
            } else {
                readers.swap_remove(i);
            }
            fed += 1;
            if fed % FAN_OUT_CHUNK == 0 {
                tokio::task::yield_now().await;
            }
        }
        // A reader may have joined, or the state changed, meanwhile: the
        // next round sees it.
        while let Ok(reader) = joining.try_recv() {
            readers.push(reader);
        }
    }
}

/// Queues `line` for a stream reader: `false` when the stream ends, the
/// reader gone, or [`STREAM_BACKLOG`] lines behind (then the cut line takes
/// the place kept for it).
fn send(tx: &mpsc::Sender<Bytes>, line: Bytes, t_ms: u64) -> bool {
    if tx.capacity() <= 1 {
        let _ = tx.try_send(cut_line(t_ms));
        return false;
    }
    tx.try_send(line).is_ok()
}

/// The latest state encoded once per turn, shared by every stream reader
/// (200 readers cost one encoding, not 200).
struct Encoded {
    /// The update it encodes.
    turn: u64,
    t_ms: u64,
    warm: bool,
    /// The first line of a stream: the whole document.
    whole: Bytes,
    /// Each rail's name, JSON and its `"kind":"rail"` line.
    rails: Vec<(String, Arc<str>, Bytes)>,
}

impl Encoded {
    /// The encoding of `snapshot`; a rail whose JSON did not change since
    /// `previous` keeps its string, so readers compare pointers, not text.
    fn of(snapshot: &Snapshot, warm: bool, turn: u64, previous: Option<&Encoded>) -> Encoded {
        let doc = StateJson::of(snapshot, warm);
        let mut whole = serde_json::Map::from_iter([("kind".to_owned(), "state".into())]);
        if let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(&doc) {
            whole.extend(fields);
        }
        let kept = |name: &str, json: &str| {
            let old = previous?.rails.iter().find(|(n, _, _)| n == name)?;
            (*old.1 == *json).then(|| Arc::clone(&old.1))
        };
        let t_ms = doc.t_ms;
        let rails = doc
            .rails
            .iter()
            .map(|r| {
                let json = serde_json::to_string(r).unwrap_or_default();
                let name = r.rail.rail;
                let text = format!(r#"{{"kind":"rail","t_ms":{t_ms},"warm":{warm},"rail":{json}}}"#) + "\n";
                (name.to_owned(), kept(name, &json).unwrap_or_else(|| Arc::from(json)), Bytes::from(text))
            })
            .collect();
        Encoded { turn, t_ms: doc.t_ms, warm, whole: line(&whole.into()), rails }
    }

    /// The rail named `name` at about `index`.
    fn rail(&self, index: usize, name: &str) -> Option<&(String, Arc<str>, Bytes)> {
        self.rails.get(index).filter(|r| r.0 == name).or_else(|| self.rails.iter().find(|r| r.0 == name))
    }
}

impl Published {
    /// The latest state, encoded: by the first reader after each update,
    /// reused by the others.
    fn encoded(&self) -> Option<Arc<Encoded>> {
        let turn = *self.changed.borrow();
        let mut cache = self.encoded.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(e) = cache.as_ref().filter(|e| e.turn == turn) {
            return Some(Arc::clone(e));
        }
        let (snapshot, warm) = self.latest()?;
        let e = Arc::new(Encoded::of(&snapshot, warm, turn, cache.as_deref()));
        *cache = Some(Arc::clone(&e));
        Some(e)
    }
}

/// The lines from one state to another, each pair made once per fan-out
/// (the readers at one state, nearly all, share them).
#[derive(Default)]
struct Changes {
    made: Vec<Change>,
}

/// The lines that tell a reader told one state (`None`: nothing yet) of
/// the latest.
type Change = (Option<Arc<Encoded>>, Arc<[Bytes]>);

impl Changes {
    /// What tells a reader told `from` (`None`: nothing yet) that the
    /// state is `to`.
    fn between(&mut self, from: Option<&Arc<Encoded>>, to: &Encoded) -> Arc<[Bytes]> {
        let same = |a: Option<&Arc<Encoded>>, b: Option<&Arc<Encoded>>| match (a, b) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        if let Some((_, lines)) = self.made.iter().find(|(f, _)| same(f.as_ref(), from)) {
            return Arc::clone(lines);
        }
        let lines: Arc<[Bytes]> = lines_between(from.map(Arc::as_ref), to).into();
        self.made.push((from.cloned(), Arc::clone(&lines)));
        lines
    }
}

/// The lines that tell a reader told `from` (`None`: nothing yet) that
/// the state is `to`: the whole document first, then the warm line and
/// each rail whose JSON changed.
fn lines_between(from: Option<&Encoded>, to: &Encoded) -> Vec<Bytes> {
    let Some(from) = from else { return vec![to.whole.clone()] };
    let mut out = Vec::new();
    if from.warm != to.warm {
        out.push(line(&serde_json::json!({"kind": "warm", "t_ms": to.t_ms, "warm": to.warm})));
    }
    for (i, (name, json, line)) in to.rails.iter().enumerate() {
        if !from.rail(i, name).is_some_and(|old| Arc::ptr_eq(&old.1, json)) {
            out.push(line.clone());
        }
    }
    out
}

/// A JSON value as one line.
fn line(value: &serde_json::Value) -> Bytes {
    Bytes::from(value.to_string() + "\n")
}

/// The state socket's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SocketSettings {
    /// Where.
    pub path: PathBuf,
    /// Its mode (default 0660).
    pub mode: u32,
    /// Its group, a name or a number (default: the agent's own, root's
    /// under systemd).
    pub group: Option<String>,
}

/// The default mode: the owner and the group may connect.
pub const DEFAULT_SOCKET_MODE: u32 = 0o660;

/// The state socket served: dropping it stops the server and removes the
/// socket.
pub struct StateSocket {
    _server: Option<http::Server>,
    path: PathBuf,
}

impl Drop for StateSocket {
    fn drop(&mut self) {
        // The server first: nobody is answered on a socket that is gone.
        drop(self._server.take());
        let _ = std::fs::remove_file(&self.path);
    }
}

impl StateSocket {
    /// Binds `settings.path` (see [`bind`]) and serves `published` on it.
    /// On any failure no socket is left behind.
    pub fn start(settings: &SocketSettings, published: Arc<Published>) -> io::Result<StateSocket> {
        let listener = bind(settings)?;
        // From here the socket is ours: removed on every way out.
        let mut socket = StateSocket { _server: None, path: settings.path.clone() };
        let api = Api::new(published);
        let answer = move |r: &Request| {
            api.respond(r).unwrap_or_else(|| http::plain(404, "not found: the state is at /v1/state\n"))
        };
        let server = http::Server::serve(Listener::Unix(listener), Limits::default(), answer)?;
        socket._server = Some(server);
        Ok(socket)
    }
}

/// Binds the socket: a path that is a symlink or anything but a socket is
/// refused, never replaced; a socket another agent answers on is refused;
/// a stale one (nobody answers) is replaced. Then its mode and group; the
/// group is resolved before anything is made, and a failure after the
/// bind removes the socket it made.
pub fn bind(settings: &SocketSettings) -> io::Result<UnixListener> {
    let path = &settings.path;
    let gid = settings.group.as_deref().map(group_id).transpose()?;
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        let refuse = |why: &str| io::Error::new(io::ErrorKind::AlreadyExists, format!("{}: {why}", path.display()));
        if meta.file_type().is_symlink() {
            return Err(refuse("is a symbolic link; not replaced"));
        }
        if !meta.file_type().is_socket() {
            return Err(refuse("exists and is not a socket; not replaced"));
        }
        if UnixStream::connect(path).is_ok() {
            return Err(refuse("another railwatch answers on it"));
        }
        std::fs::remove_file(path)?;
    }
    let listener = UnixListener::bind(path)?;
    let made = Made(Some(path));
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(settings.mode))?;
    if let Some(gid) = gid {
        rustix::fs::chown(path, None, Some(gid)).map_err(|e| {
            let e = io::Error::from(e);
            io::Error::new(e.kind(), format!("{}: cannot give it group {}: {e}", path.display(), gid.as_raw()))
        })?;
    }
    made.keep();
    Ok(listener)
}

/// A socket just made, removed when dropped unless kept.
struct Made<'a>(Option<&'a Path>);

impl Made<'_> {
    fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for Made<'_> {
    fn drop(&mut self) {
        if let Some(path) = self.0 {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// A group's id: a number as it is, a name from /etc/group. The number
/// 4294967295 (`(gid_t)-1`) is refused: to `chown` it means "leave the
/// group as it is", never a group.
pub fn group_id(group: &str) -> io::Result<rustix::fs::Gid> {
    let gid = match group.parse::<u32>() {
        Ok(gid) => gid,
        Err(_) if group.chars().all(|c| c.is_ascii_digit()) && !group.is_empty() => {
            return Err(invalid(format!("group {group}: not a group id (at most 4294967294)")));
        }
        Err(_) => named_group(group)?,
    };
    if gid == u32::MAX {
        return Err(invalid(format!("group {gid}: not a group id ((gid_t)-1 means \"no change\" to chown)")));
    }
    Ok(rustix::fs::Gid::from_raw(gid))
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

/// A group's id by its name, from /etc/group.
fn named_group(group: &str) -> io::Result<u32> {
    let groups = std::fs::read_to_string("/etc/group")?;
    groups
        .lines()
        .filter_map(|l| {
            let mut f = l.split(':');
            Some((f.next()?, f.nth(1)?))
        })
        .find(|(name, _)| *name == group)
        .and_then(|(_, gid)| gid.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no group {group:?} in /etc/group")))
}

/// Whether `path` could be the state socket's (for the settings' check
/// before anything starts): its directory exists.
pub fn check_socket_path(path: &Path) -> Result<(), String> {
    match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(dir) if !dir.is_dir() => Err(format!("{} is not a directory", dir.display())),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(path: &Path) -> SocketSettings {
        SocketSettings { path: path.to_owned(), mode: DEFAULT_SOCKET_MODE, group: None }
    }

    #[test]
    fn a_symlink_or_a_file_is_refused_and_left_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, "keep").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        for path in [&file, &link] {
            let e = bind(&settings(path)).unwrap_err();
            assert!(e.to_string().contains("not replaced"), "{e}");
        }
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep");
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    }

    #[test]
    fn a_stale_socket_is_replaced_a_live_one_refused_and_the_mode_set() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.sock");
        let live = bind(&settings(&path)).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o660);
        let e = bind(&settings(&path)).unwrap_err();
        assert!(e.to_string().contains("another railwatch"), "{e}");
        drop(live);
        bind(&settings(&path)).expect("a stale socket is replaced");
    }

    #[test]
    fn a_group_is_a_number_or_a_name() {
        assert_eq!(group_id("0").unwrap().as_raw(), 0);
        assert_eq!(group_id("root").unwrap().as_raw(), 0);
        assert_eq!(group_id("4294967294").unwrap().as_raw(), u32::MAX - 1);
        assert!(group_id("no-such-group-here").is_err());
    }

    /// `(gid_t)-1` is "no change" to chown (and rustix asserts against
    /// it), a number past u32 no group: refused with the value named, and
    /// no socket left behind.
    #[test]
    fn an_impossible_group_is_refused_naming_it_and_leaves_no_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.sock");
        for group in ["4294967295", "4294967296", "99999999999999999999"] {
            let with = SocketSettings { group: Some(group.to_owned()), ..settings(&path) };
            let e = StateSocket::start(&with, Arc::default()).err().expect("refused");
            assert!(e.to_string().contains(group) && e.kind() == io::ErrorKind::InvalidInput, "{e}");
            assert!(std::fs::symlink_metadata(&path).is_err(), "{group}: a socket was left behind");
        }
    }

    /// What removes the socket when a step after the bind fails (the mode,
    /// the group: neither fails for root, who runs the tests): the guard
    /// removes the socket it made unless kept.
    #[test]
    fn the_guard_removes_a_made_socket_unless_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.sock");
        let listener = UnixListener::bind(&path).unwrap();
        drop(Made(Some(&path)));
        assert!(std::fs::symlink_metadata(&path).is_err(), "the socket was left behind");
        drop(listener);
        let kept = UnixListener::bind(&path).unwrap();
        Made(Some(&path)).keep();
        assert!(std::fs::symlink_metadata(&path).is_ok());
        drop(kept);
    }
}
