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

use railwatch_core::DeviceMode;
use railwatch_runtime::Snapshot;
use railwatch_runtime::state::StateJson;

use crate::metrics::serve::http::{self, Limits, Listener, Request, Response};

/// The API's one path.
pub const STATE_PATH: &str = "/v1/state";

/// What the loop publishes for readers: the latest snapshot and whether
/// the agent is warm.
#[derive(Default)]
pub struct Published {
    snapshot: Mutex<Option<Arc<Snapshot>>>,
    warm: AtomicBool,
    /// The devices present at the first turn, until each was attached once.
    waiting: Mutex<Option<BTreeSet<String>>>,
}

impl Published {
    /// The turn's snapshot, published whole.
    pub fn update(&self, snapshot: &Snapshot) {
        if !self.warm.load(Ordering::Relaxed) && self.warmed(snapshot) {
            self.warm.store(true, Ordering::Release);
        }
        let shared = Arc::new(snapshot.clone());
        *self.snapshot.lock().unwrap_or_else(PoisonError::into_inner) = Some(shared);
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

    /// The answer to a request for [`STATE_PATH`], or `None` for another
    /// path.
    pub fn respond(&self, request: &Request) -> Option<Response> {
        if request.path != STATE_PATH {
            return None;
        }
        if !matches!(request.method.as_str(), "GET" | "HEAD") {
            let mut r = http::plain(405, "only GET and HEAD\n");
            r.headers.push(("Allow", "GET, HEAD".to_owned()));
            return Some(r);
        }
        let snapshot = self.snapshot.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let Some(snapshot) = snapshot else {
            return Some(http::plain(503, "railwatch has not finished its first turn\n"));
        };
        let warm = self.warm.load(Ordering::Acquire);
        let body = serde_json::to_string(&StateJson::of(&snapshot, warm)).unwrap_or_default() + "\n";
        Some(Response { status: 200, headers: vec![("Content-Type", "application/json".to_owned())], body })
    }
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
    _server: http::Server,
    path: PathBuf,
}

impl Drop for StateSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl StateSocket {
    /// Binds `settings.path` (see [`bind`]) and serves `published` on it.
    pub fn start(settings: &SocketSettings, published: Arc<Published>) -> io::Result<StateSocket> {
        let listener = bind(settings)?;
        let answer = move |r: &Request| {
            published.respond(r).unwrap_or_else(|| http::plain(404, "not found: the state is at /v1/state\n"))
        };
        let server = http::Server::serve(Listener::Unix(listener), Limits::default(), answer)?;
        Ok(StateSocket { _server: server, path: settings.path.clone() })
    }
}

/// Binds the socket: a path that is a symlink or anything but a socket is
/// refused, never replaced; a socket another agent answers on is refused;
/// a stale one (nobody answers) is replaced. Then its mode and group.
pub fn bind(settings: &SocketSettings) -> io::Result<UnixListener> {
    let path = &settings.path;
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
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(settings.mode))?;
    if let Some(group) = &settings.group {
        let gid = group_id(group)?;
        rustix::fs::chown(path, None, Some(rustix::fs::Gid::from_raw(gid)))?;
    }
    Ok(listener)
}

/// A group's id: a number as it is, a name from /etc/group.
fn group_id(group: &str) -> io::Result<u32> {
    if let Ok(gid) = group.parse() {
        return Ok(gid);
    }
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
        assert_eq!(group_id("0").unwrap(), 0);
        assert_eq!(group_id("root").unwrap(), 0);
        assert!(group_id("no-such-group-here").is_err());
    }
}
