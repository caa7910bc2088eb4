//! The HTTP server behind `--metrics-listen`: one request per connection,
//! bounded in everything a client controls, so no client (a scanner, a
//! stuck scraper, a flood) can take the endpoint down for good or make
//! the agent grow.
//!
//! - A request's line and headers are read up to [`MAX_HEAD`] bytes, within
//!   [`CLIENT_TIMEOUT`]; past either, the connection is answered 431 or
//!   closed. The body, if any, is never read.
//! - [`WORKERS`] threads answer; accepted connections wait in a queue of
//!   [`QUEUE`], and one that finds it full is closed at once. The threads
//!   are fixed: idle clients cost a slot, never a thread.
//! - An `accept` that fails (out of file descriptors) is logged and retried
//!   after a pause: the listener outlives it.
//!
//! Each answer closes its connection (`Connection: close`), which every
//! Prometheus scraper handles.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, TrySendError};

/// The most bytes of request line and headers read (a scrape sends a few
/// hundred).
pub const MAX_HEAD: usize = 16 * 1024;
/// How long a client may take to send its request head, or to take the
/// answer.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(3);
/// Threads answering requests.
pub const WORKERS: usize = 4;
/// Accepted connections waiting for a thread.
pub const QUEUE: usize = 64;
/// The pause after a failed `accept` (no file descriptor left, say).
const ACCEPT_RETRY: Duration = Duration::from_millis(100);
/// After answering, input left unread is read and dropped up to this
/// much, for this long, so the close is not a reset.
const DRAIN_BYTES: usize = 256 * 1024;
const DRAIN_TIME: Duration = Duration::from_millis(250);
/// A failed `accept` is logged at most this often.
const ACCEPT_LOG_EVERY: Duration = Duration::from_secs(10);

/// A request, as much as an answer needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `GET`, `HEAD`, ...
    pub method: String,
    /// The path, without query or fragment.
    pub path: String,
    /// The `Accept` header, if sent.
    pub accept: Option<String>,
}

/// An answer: status, extra headers, body (left out for `HEAD`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// Headers besides `Content-Length` and `Connection`.
    pub headers: Vec<(&'static str, String)>,
    /// The body.
    pub body: String,
}

/// A running server; dropping it stops it: the listener is closed at
/// once, queued connections are closed unanswered, and a worker still
/// answering finishes on its own (within [`CLIENT_TIMEOUT`]).
pub struct Server {
    stop: Arc<AtomicBool>,
    local: SocketAddr,
    acceptor: Option<JoinHandle<()>>,
}

impl Server {
    /// Listens on `addr` and answers each request with `answer`.
    pub fn start(
        addr: SocketAddr,
        answer: impl Fn(&Request) -> Response + Send + Sync + 'static,
    ) -> io::Result<Server> {
        let listener = TcpListener::bind(addr)?;
        let local = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let (queue, waiting) = crossbeam_channel::bounded::<TcpStream>(QUEUE);
        let answer = Arc::new(answer);
        for n in 0..WORKERS {
            let (waiting, answer, stop) = (waiting.clone(), Arc::clone(&answer), Arc::clone(&stop));
            thread::Builder::new()
                .name(format!("railwatch-http-{n}"))
                .spawn(move || work(&waiting, answer.as_ref(), &stop))?;
        }
        let stopping = Arc::clone(&stop);
        let acceptor = thread::Builder::new().name("railwatch-http-accept".into()).spawn(move || {
            let mut logged: Option<Instant> = None;
            loop {
                let accepted = listener.accept();
                if stopping.load(Ordering::Acquire) {
                    return;
                }
                match accepted {
                    Ok((stream, _)) => match queue.try_send(stream) {
                        // Full: closed at once (dropped), the queue unchanged.
                        Ok(()) | Err(TrySendError::Full(_)) => {}
                        Err(TrySendError::Disconnected(_)) => return,
                    },
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        if logged.is_none_or(|t| t.elapsed() >= ACCEPT_LOG_EVERY) {
                            log::error!("metrics: accepting a connection failed ({e}); retrying");
                            logged = Some(Instant::now());
                        }
                        thread::sleep(ACCEPT_RETRY);
                    }
                }
            }
        })?;
        Ok(Server { stop, local, acceptor: Some(acceptor) })
    }

    /// The address it listens on (the port filled in).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wake the blocking accept with a connection of our own.
        let ip = match self.local.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        let woken = TcpStream::connect_timeout(&SocketAddr::new(ip, self.local.port()), Duration::from_secs(1));
        // It returns, closing the listener and the queue. (If it cannot be
        // woken, its thread is left behind rather than waited for.)
        if let (Ok(_), Some(acceptor)) = (woken, self.acceptor.take()) {
            let _ = acceptor.join();
        }
    }
}

/// A worker: answers queued connections until the queue is gone; once
/// stopped, closes them unanswered.
fn work(waiting: &Receiver<TcpStream>, answer: &(impl Fn(&Request) -> Response + ?Sized), stop: &AtomicBool) {
    for stream in waiting {
        if stop.load(Ordering::Acquire) {
            continue;
        }
        if let Err(e) = serve(stream, answer) {
            log::debug!("a metrics client went away: {e}");
        }
    }
}

/// Reads one request head (bounded), answers it, closes.
fn serve(mut stream: TcpStream, answer: &(impl Fn(&Request) -> Response + ?Sized)) -> io::Result<()> {
    stream.set_read_timeout(Some(CLIENT_TIMEOUT))?;
    stream.set_write_timeout(Some(CLIENT_TIMEOUT))?;
    let deadline = Instant::now() + CLIENT_TIMEOUT;
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    // The answer, and whether it goes without its body (HEAD).
    let (response, bodiless) = loop {
        match parse(&head) {
            Parsed::Complete(request) => break (answer(&request), request.method == "HEAD"),
            Parsed::Bad => break (plain(400, "bad request\n"), false),
            Parsed::Partial if head.len() >= MAX_HEAD => break (plain(431, "request head too large\n"), false),
            Parsed::Partial => {}
        }
        if Instant::now() >= deadline {
            return Ok(()); // Too slow: closed without an answer.
        }
        let n = match stream.read(&mut chunk) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        // Never past the bound (the head is under it here).
        head.extend_from_slice(&chunk[..n.min(MAX_HEAD - head.len())]);
    };
    let mut out = format!("HTTP/1.1 {} {}\r\n", response.status, reason(response.status));
    for (name, value) in &response.headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str(&format!("Content-Length: {}\r\nConnection: close\r\n\r\n", response.body.len()));
    if !bodiless {
        out.push_str(&response.body);
    }
    stream.write_all(out.as_bytes())?;
    stream.flush()?;
    let _ = stream.shutdown(Shutdown::Write);
    // Unread input makes the close a reset, which can cost the client the
    // answer: read what is left, within bounds, before closing.
    stream.set_read_timeout(Some(DRAIN_TIME))?;
    let deadline = Instant::now() + DRAIN_TIME;
    let mut drained = 0;
    while drained < DRAIN_BYTES && Instant::now() < deadline {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => drained += n,
        }
    }
    Ok(())
}

enum Parsed {
    Complete(Request),
    Partial,
    Bad,
}

/// Parses a request head with httparse.
fn parse(head: &[u8]) -> Parsed {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(head) {
        Ok(httparse::Status::Complete(_)) => {
            let (Some(method), Some(target)) = (req.method, req.path) else { return Parsed::Bad };
            let accept = req
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("accept"))
                .map(|h| String::from_utf8_lossy(h.value).into_owned());
            let path = target.split(['?', '#']).next().unwrap_or("").to_owned();
            Parsed::Complete(Request { method: method.to_owned(), path, accept })
        }
        Ok(httparse::Status::Partial) => Parsed::Partial,
        Err(_) => Parsed::Bad,
    }
}

/// A plain-text answer.
pub fn plain(status: u16, body: &str) -> Response {
    Response { status, headers: vec![("Content-Type", "text/plain; charset=utf-8".to_owned())], body: body.to_owned() }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo_server() -> Server {
        Server::start("127.0.0.1:0".parse().unwrap(), |r: &Request| Response {
            status: 200,
            headers: vec![],
            body: format!("{} {} {:?}", r.method, r.path, r.accept),
        })
        .unwrap()
    }

    fn exchange(addr: SocketAddr, request: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let _ = s.write_all(request);
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }

    #[test]
    fn a_request_is_answered_and_the_connection_closed() {
        let server = echo_server();
        let out = exchange(server.local_addr(), b"GET /metrics?x=1 HTTP/1.1\r\nAccept: text/plain\r\n\r\n");
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        assert!(out.contains("Connection: close\r\n"), "{out}");
        assert!(out.ends_with("GET /metrics Some(\"text/plain\")"), "{out}");
        let head = exchange(server.local_addr(), b"HEAD /metrics HTTP/1.0\r\n\r\n");
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n") && head.ends_with("\r\n\r\n"), "{head}");
        assert_eq!(exchange(server.local_addr(), b"garbage\r\n\r\n").lines().next(), Some("HTTP/1.1 400 Bad Request"));
    }

    /// An endless header is cut at MAX_HEAD and answered 431; the server
    /// keeps answering.
    #[test]
    fn an_endless_head_is_refused_at_its_bound() {
        let server = echo_server();
        let mut s = TcpStream::connect(server.local_addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\n").unwrap();
        let line = format!("X-A: {}\r\n", "a".repeat(1000));
        let mut sent = 0;
        // The server stops reading at its bound: writes then fail or block
        // (bounded by the write timeout).
        s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
        while sent < 4 * MAX_HEAD && s.write_all(line.as_bytes()).is_ok() {
            sent += line.len();
        }
        let _ = s.shutdown(Shutdown::Write);
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        assert!(out.starts_with("HTTP/1.1 431 "), "{out:?}");
        let ok = exchange(server.local_addr(), b"GET /metrics HTTP/1.1\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK"), "{ok}");
    }

    /// More idle clients than threads and queue: the extra ones are closed,
    /// and once they leave (or time out) a scrape is answered again.
    #[test]
    fn idle_clients_cost_no_thread_and_the_endpoint_outlives_them() {
        let server = echo_server();
        let idle: Vec<TcpStream> =
            (0..WORKERS + QUEUE + 20).filter_map(|_| TcpStream::connect(server.local_addr()).ok()).collect();
        assert!(idle.len() > WORKERS + QUEUE, "{} connected", idle.len());
        drop(idle);
        let started = Instant::now();
        loop {
            let out = exchange(server.local_addr(), b"GET /metrics HTTP/1.1\r\n\r\n");
            if out.starts_with("HTTP/1.1 200 OK") {
                break;
            }
            assert!(started.elapsed() < CLIENT_TIMEOUT * 4, "never answered again: {out:?}");
            thread::sleep(Duration::from_millis(50));
        }
    }

    #[test]
    fn dropping_the_server_stops_it() {
        let server = echo_server();
        let addr = server.local_addr();
        drop(server);
        assert!(TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err());
    }
}
