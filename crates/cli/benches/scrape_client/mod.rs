//! What the two attack benches (`attack.rs` on the metrics listener,
//! `state_attack.rs` on the state socket) share: one `/metrics` scrape as
//! Prometheus makes it, bounded by [`SCRAPE_TIMEOUT`].

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// How long one scrape may take before it counts as failed.
pub const SCRAPE_TIMEOUT: Duration = Duration::from_secs(10);

/// One scrape as Prometheus makes it: whether it got a 200 with a body.
pub fn scrape(addr: SocketAddr) -> bool {
    let deadline = Instant::now() + SCRAPE_TIMEOUT;
    let Ok(mut s) = TcpStream::connect_timeout(&addr, SCRAPE_TIMEOUT) else { return false };
    let _ = s.set_write_timeout(Some(SCRAPE_TIMEOUT));
    let request =
        "GET /metrics HTTP/1.1\r\nHost: scraper\r\nAccept: text/plain;version=0.0.4\r\nConnection: close\r\n\r\n";
    if s.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut answer = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || s.set_read_timeout(Some(left)).is_err() {
            return false;
        }
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    let text = String::from_utf8_lossy(&answer);
    text.starts_with("HTTP/1.1 200") && text.contains("railwatch_rail_available")
}
