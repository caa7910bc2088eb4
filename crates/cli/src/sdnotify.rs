//! The systemd notification protocol (`sd_notify`), with std alone.
//!
//! When systemd starts `railwatch watch` as a `Type=notify` service it sets
//! `NOTIFY_SOCKET` to a datagram socket: a filesystem path, or an abstract
//! socket written with a leading `@`. Each message is one datagram of
//! `KEY=VALUE` lines (`READY=1`, `STATUS=…`, `WATCHDOG=1`, `STOPPING=1`,
//! `RELOADING=1`). With `WATCHDOG_USEC` set (and `WATCHDOG_PID` unset or
//! ours) the service must send `WATCHDOG=1` at least that often; we send it
//! every half of it.
//!
//! With no `NOTIFY_SOCKET`, nothing is sent. A message that cannot be sent
//! is logged once (the first failure) and otherwise ignored: notifying is
//! never a reason to stop watching.

use std::io;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::{Duration, Instant};

/// Shortest time between two `STATUS=` messages: availability that changes
/// faster is sent once the interval has passed, with the latest value.
pub const STATUS_EVERY: Duration = Duration::from_secs(1);

/// A connection to systemd's notification socket, or nothing when
/// `NOTIFY_SOCKET` is unset.
pub struct Notifier {
    /// The socket and where to send, when `NOTIFY_SOCKET` is usable.
    target: Option<(UnixDatagram, SocketAddr)>,
    /// Whether a failure was already logged.
    failed: bool,
    /// How often to send `WATCHDOG=1` (half of `WATCHDOG_USEC`).
    watchdog_every: Option<Duration>,
    /// When the next `WATCHDOG=1` is due.
    next_watchdog: Option<Instant>,
    /// The status last sent, and when.
    status_sent: Option<(String, Instant)>,
    /// A status not yet sent because of the rate limit.
    status_pending: Option<String>,
}

impl Notifier {
    /// Reads `NOTIFY_SOCKET`, `WATCHDOG_USEC` and `WATCHDOG_PID` from the
    /// environment. A socket that cannot be set up is logged and ignored.
    pub fn from_env() -> Notifier {
        let mut n = Notifier {
            target: None,
            failed: false,
            watchdog_every: None,
            next_watchdog: None,
            status_sent: None,
            status_pending: None,
        };
        let Some(socket) = std::env::var_os("NOTIFY_SOCKET").filter(|s| !s.is_empty()) else {
            return n;
        };
        match connect(&socket) {
            Ok(target) => n.target = Some(target),
            Err(e) => {
                log::warn!(
                    "NOTIFY_SOCKET {}: cannot use it ({e}); systemd will not be notified",
                    socket.to_string_lossy()
                );
                n.failed = true;
                return n;
            }
        }
        n.watchdog_every = watchdog_every(
            std::env::var("WATCHDOG_USEC").ok().as_deref(),
            std::env::var("WATCHDOG_PID").ok().as_deref(),
            std::process::id(),
        );
        n
    }

    /// Whether messages are sent at all.
    pub fn active(&self) -> bool {
        self.target.is_some()
    }

    /// Sends `message` (newline-separated `KEY=VALUE` lines).
    pub fn send(&mut self, message: &str) {
        let Some((socket, addr)) = &self.target else { return };
        if let Err(e) = socket.send_to_addr(message.as_bytes(), addr) {
            if !self.failed {
                log::warn!("cannot notify systemd ({e}); further failures are not logged");
                self.failed = true;
            }
        }
    }

    /// `READY=1`: started (or reloaded), every device attached. Starts the
    /// watchdog clock.
    pub fn ready(&mut self) {
        self.send("READY=1");
        if let Some(every) = self.watchdog_every {
            self.next_watchdog.get_or_insert_with(|| Instant::now() + every);
        }
    }

    /// Sets the status line; sent now, or when [`STATUS_EVERY`] has passed
    /// since the last one (by [`Notifier::tick`]). An unchanged status is
    /// not sent again.
    pub fn status(&mut self, status: String) {
        if !self.active() {
            return;
        }
        let now = Instant::now();
        match &self.status_sent {
            Some((last, _)) if *last == status => self.status_pending = None,
            Some((_, at)) if now.duration_since(*at) < STATUS_EVERY => self.status_pending = Some(status),
            _ => self.send_status(status, now),
        }
    }

    fn send_status(&mut self, status: String, now: Instant) {
        self.send(&format!("STATUS={status}"));
        self.status_sent = Some((status, now));
        self.status_pending = None;
    }

    /// Sends what is due: a held-back status, `WATCHDOG=1`. Called from the
    /// watch loop on every turn, so a loop that is stuck stops petting the
    /// watchdog.
    pub fn tick(&mut self) {
        let now = Instant::now();
        if let (Some(status), Some((_, at))) = (&self.status_pending, &self.status_sent) {
            if now.duration_since(*at) >= STATUS_EVERY {
                let status = status.clone();
                self.send_status(status, now);
            }
        }
        if let (Some(next), Some(every)) = (self.next_watchdog, self.watchdog_every) {
            if now >= next {
                self.send("WATCHDOG=1");
                self.next_watchdog = Some(now + every);
            }
        }
    }

    /// How long the loop may wait before [`Notifier::tick`] has something
    /// to send (`None`: nothing is due, ever).
    pub fn next_due(&self) -> Option<Duration> {
        let now = Instant::now();
        let status = match (&self.status_pending, &self.status_sent) {
            (Some(_), Some((_, at))) => Some((*at + STATUS_EVERY).saturating_duration_since(now)),
            _ => None,
        };
        let watchdog = self.next_watchdog.map(|t| t.saturating_duration_since(now));
        [status, watchdog].into_iter().flatten().min()
    }
}

/// The `STATUS=` text for `available` of `total` rails.
pub fn rails_status(available: usize, total: usize) -> String {
    format!("{available}/{total} rails available")
}

/// How often to pet the watchdog: half of `WATCHDOG_USEC`, when it is a
/// positive number and `WATCHDOG_PID` is unset or `pid`.
fn watchdog_every(usec: Option<&str>, wd_pid: Option<&str>, pid: u32) -> Option<Duration> {
    let usec: u64 = usec?.trim().parse().ok().filter(|&u| u > 0)?;
    if let Some(p) = wd_pid {
        if p.trim().parse::<u32>().ok() != Some(pid) {
            return None;
        }
    }
    Some(Duration::from_micros(usec / 2).max(Duration::from_millis(1)))
}

/// An unbound datagram socket and the address `NOTIFY_SOCKET` names.
fn connect(socket: &std::ffi::OsStr) -> io::Result<(UnixDatagram, SocketAddr)> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = socket.as_bytes();
    let addr = match bytes.split_first() {
        Some((b'@', name)) => abstract_addr(name)?,
        Some((b'/', _)) => SocketAddr::from_pathname(std::path::Path::new(socket))?,
        _ => {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "neither an absolute path nor @abstract"));
        }
    };
    Ok((UnixDatagram::unbound()?, addr))
}

#[cfg(target_os = "linux")]
fn abstract_addr(name: &[u8]) -> io::Result<SocketAddr> {
    use std::os::linux::net::SocketAddrExt;
    SocketAddr::from_abstract_name(name)
}

#[cfg(not(target_os = "linux"))]
fn abstract_addr(_name: &[u8]) -> io::Result<SocketAddr> {
    Err(io::Error::new(io::ErrorKind::Unsupported, "abstract sockets are Linux-only"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watchdog_is_half_the_interval_and_only_for_our_pid() {
        assert_eq!(watchdog_every(Some("200000"), None, 7), Some(Duration::from_millis(100)));
        assert_eq!(watchdog_every(Some("200000"), Some("7"), 7), Some(Duration::from_millis(100)));
        assert_eq!(watchdog_every(Some("200000"), Some("8"), 7), None);
        assert_eq!(watchdog_every(Some("0"), None, 7), None);
        assert_eq!(watchdog_every(Some("x"), None, 7), None);
        assert_eq!(watchdog_every(None, None, 7), None);
    }

    #[test]
    fn addresses_path_and_abstract() {
        assert!(connect(std::ffi::OsStr::new("/run/systemd/notify")).is_ok());
        assert!(connect(std::ffi::OsStr::new("relative")).is_err());
        #[cfg(target_os = "linux")]
        {
            let (_, addr) = connect(std::ffi::OsStr::new("@railwatch-test")).unwrap();
            use std::os::linux::net::SocketAddrExt;
            assert_eq!(addr.as_abstract_name(), Some(&b"railwatch-test"[..]));
        }
    }

    #[test]
    fn abstract_socket_receives() {
        #[cfg(target_os = "linux")]
        {
            use std::os::linux::net::SocketAddrExt;
            let name = format!("railwatch-sdnotify-test-{}", std::process::id());
            let server = UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap()).unwrap();
            let (sock, addr) = connect(std::ffi::OsStr::new(&format!("@{name}"))).unwrap();
            let mut n = Notifier {
                target: Some((sock, addr)),
                failed: false,
                watchdog_every: None,
                next_watchdog: None,
                status_sent: None,
                status_pending: None,
            };
            n.ready();
            n.status(rails_status(1, 2));
            n.status(rails_status(2, 2)); // held back by the rate limit
            let mut buf = [0u8; 256];
            server.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let got = server.recv(&mut buf).unwrap();
            assert_eq!(&buf[..got], b"READY=1");
            let got = server.recv(&mut buf).unwrap();
            assert_eq!(&buf[..got], b"STATUS=1/2 rails available");
            assert!(n.next_due().is_some_and(|d| d <= STATUS_EVERY));
        }
    }
}
