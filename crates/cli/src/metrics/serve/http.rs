//! The HTTP server behind `--metrics-listen`: hyper (HTTP/1.1, keep-alive)
//! on a current-thread tokio runtime of its own thread, bounded in
//! everything a client controls, so no client (a scanner, a stuck
//! scraper, a flood) can keep a scraper out or make the agent grow.
//!
//! - A request head is at most [`Limits::max_head`] bytes (past it: 431)
//!   and must arrive within [`Limits::header_timeout`] of the server
//!   starting to wait for it, on a new connection or between two requests
//!   of one (a slow or idle client is closed).
//! - A connection on which no byte has moved either way for
//!   [`Limits::idle_timeout`] is closed (a client that never reads).
//! - At most [`Limits::max_connections`] are open; a new one takes the
//!   place of the quietest (`limit.rs`). Each costs a task and its
//!   buffers, never a thread.
//! - An `accept` that fails (out of file descriptors) is logged at most
//!   every 10 s and retried after a pause: the listener outlives it.
//!
//! A client may shut its write side after its request (half-close): it
//! still gets its whole answer. The request body, if any, is never read. The target may be in origin
//! or absolute form (`GET http://host/metrics`, RFC 9112 §3.2.2).

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::oneshot;

use super::limit::{Connections, Ticket, Watched};

/// What bounds a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The most bytes of request line and headers (a scrape sends a few
    /// hundred).
    pub max_head: usize,
    /// How long a request head may take to arrive.
    pub header_timeout: Duration,
    /// How long a connection may move no byte.
    pub idle_timeout: Duration,
    /// Connections open at once (under a soft limit of 1,024 file
    /// descriptors, with room for the agent's own).
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_head: 16 * 1024,
            header_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(10),
            max_connections: 512,
        }
    }
}

/// The pause after a failed `accept` (no file descriptor left, say).
const ACCEPT_RETRY: Duration = Duration::from_millis(100);
/// A failed `accept` is logged at most this often.
const ACCEPT_LOG_EVERY: Duration = Duration::from_secs(10);
/// The most bytes of `Accept` headers looked at.
const MAX_ACCEPT: usize = 4096;

/// A request, as much as an answer needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `GET`, `HEAD`, ...
    pub method: String,
    /// The path, without query (from an origin- or absolute-form target).
    pub path: String,
    /// The query, after `?` (`watch=1`), if any.
    pub query: Option<String>,
    /// Every `Accept` header's value, joined by `, ` (at most 4 KiB).
    pub accept: Option<String>,
}

/// An answer: status, extra headers, body (left out for `HEAD`).
#[derive(Debug)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// Headers besides `Content-Length`.
    pub headers: Vec<(&'static str, String)>,
    /// The body.
    pub body: Body,
}

/// A response's body: all at once, or lines as they come (a stream ends
/// when its sender is dropped).
#[derive(Debug)]
pub enum Body {
    /// The whole body.
    Text(String),
    /// Lines sent on the channel, each written as it comes.
    Lines(tokio::sync::mpsc::Receiver<Bytes>),
}

impl From<String> for Body {
    fn from(text: String) -> Body {
        Body::Text(text)
    }
}

/// Either body, as hyper writes it.
enum Wire {
    Full(Full<Bytes>),
    Lines(tokio::sync::mpsc::Receiver<Bytes>),
}

impl hyper::body::Body for Wire {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Wire::Full(full) => std::pin::Pin::new(full).poll_frame(cx),
            Wire::Lines(rx) => rx.poll_recv(cx).map(|line| line.map(|l| Ok(hyper::body::Frame::data(l)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Wire::Full(full) => full.is_end_stream(),
            Wire::Lines(_) => false,
        }
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        match self {
            Wire::Full(full) => full.size_hint(),
            Wire::Lines(_) => hyper::body::SizeHint::default(),
        }
    }
}

/// How a request is answered.
type Answer = dyn Fn(&Request) -> Response + Send + Sync;

/// What a server listens on, bound.
#[derive(Debug)]
pub enum Listener {
    /// A TCP address (`--metrics-listen`).
    Tcp(std::net::TcpListener),
    /// A Unix socket (`--state-socket`).
    Unix(std::os::unix::net::UnixListener),
}

impl Listener {
    /// Non-blocking, for tokio; the TCP address, if it is one.
    fn prepare(&self) -> io::Result<Option<SocketAddr>> {
        match self {
            Listener::Tcp(l) => {
                l.set_nonblocking(true)?;
                Ok(Some(l.local_addr()?))
            }
            Listener::Unix(l) => {
                l.set_nonblocking(true)?;
                Ok(None)
            }
        }
    }
}

/// The listener on tokio's reactor.
enum Listening {
    Tcp(tokio::net::TcpListener),
    Unix(tokio::net::UnixListener),
}

/// One accepted connection.
enum Accepted {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

impl Listening {
    fn of(listener: Listener) -> io::Result<Listening> {
        Ok(match listener {
            Listener::Tcp(l) => Listening::Tcp(tokio::net::TcpListener::from_std(l)?),
            Listener::Unix(l) => Listening::Unix(tokio::net::UnixListener::from_std(l)?),
        })
    }

    async fn accept(&self) -> io::Result<Accepted> {
        match self {
            Listening::Tcp(l) => l.accept().await.map(|(s, _)| Accepted::Tcp(s)),
            Listening::Unix(l) => l.accept().await.map(|(s, _)| Accepted::Unix(s)),
        }
    }
}

/// A running server; dropping it stops it: the listener and every
/// connection are closed, and its thread joined.
pub struct Server {
    local: Option<SocketAddr>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
    connections: Arc<Connections>,
}

impl Server {
    /// Listens on `addr` and answers each request with `answer`, within
    /// the default [`Limits`].
    pub fn start(
        addr: SocketAddr,
        answer: impl Fn(&Request) -> Response + Send + Sync + 'static,
    ) -> io::Result<Server> {
        Server::start_with(addr, Limits::default(), answer)
    }

    /// The same, within `limits`.
    pub fn start_with(
        addr: SocketAddr,
        limits: Limits,
        answer: impl Fn(&Request) -> Response + Send + Sync + 'static,
    ) -> io::Result<Server> {
        Server::serve(Listener::Tcp(std::net::TcpListener::bind(addr)?), limits, answer)
    }

    /// Answers on `listener`, bound by the caller (a Unix socket is made
    /// with the mode and owner its caller wants), within `limits`.
    pub fn serve(
        listener: Listener,
        limits: Limits,
        answer: impl Fn(&Request) -> Response + Send + Sync + 'static,
    ) -> io::Result<Server> {
        let local = listener.prepare()?;
        let runtime = tokio::runtime::Builder::new_current_thread().enable_io().enable_time().build()?;
        let (stop, stopped) = oneshot::channel();
        let connections = Connections::new(limits.max_connections);
        let answer: Arc<Answer> = Arc::new(answer);
        let table = Arc::clone(&connections);
        let thread = thread::Builder::new().name("railwatch-http".into()).spawn(move || {
            runtime.block_on(accept_loop(listener, limits, table, answer, stopped));
            // Dropping the runtime closes every connection left.
        })?;
        Ok(Server { local, stop: Some(stop), thread: Some(thread), connections })
    }

    /// The TCP address it listens on (the port filled in); `None` on a
    /// Unix socket.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local
    }

    /// How many connections are open.
    pub fn open_connections(&self) -> usize {
        self.connections.len()
    }

    /// The most sockets of clients held at once so far (closing ones
    /// included): at most one more than [`Limits::max_connections`].
    pub fn peak_connections(&self) -> usize {
        self.connections.peak()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Accepts until told to stop, each connection on a task of its own.
async fn accept_loop(
    listener: Listener,
    limits: Limits,
    connections: Arc<Connections>,
    answer: Arc<Answer>,
    mut stopped: oneshot::Receiver<()>,
) {
    let listener = match Listening::of(listener) {
        Ok(l) => l,
        Err(e) => return log::error!("http: cannot serve the listener ({e})"),
    };
    let mut http = http1::Builder::new();
    // A client may shut its write side once its request is sent (`nc -N`,
    // `shutdown(SHUT_WR)`): without half-close, hyper takes the EOF it
    // reads before the answer is written for the end and drops the answer.
    http.timer(TokioTimer::new())
        .half_close(true)
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(limits.max_head.max(8192))
        .max_headers(64);
    let mut logged: Option<Instant> = None;
    loop {
        let accepted = tokio::select! {
            _ = &mut stopped => return,
            // Only with room: an evicted connection's socket is closed first.
            accepted = async {
                connections.room().await;
                listener.accept().await
            } => accepted,
        };
        match accepted {
            Ok(stream) => {
                let ticket = connections.admit();
                let id = ticket.id();
                let (http, answer) = (http.clone(), Arc::clone(&answer));
                let task = match stream {
                    Accepted::Tcp(s) => tokio::spawn(serve(s, http, limits, answer, ticket)),
                    Accepted::Unix(s) => tokio::spawn(serve(s, http, limits, answer, ticket)),
                };
                connections.set_abort(id, task.abort_handle());
            }
            Err(e) => {
                if logged.is_none_or(|t| t.elapsed() >= ACCEPT_LOG_EVERY) {
                    log::error!("http: accepting a connection failed ({e}); retrying");
                    logged = Some(Instant::now());
                }
                tokio::time::sleep(ACCEPT_RETRY).await;
            }
        }
    }
}

/// One connection: hyper serves it until it ends, or until no byte has
/// moved for the idle timeout.
async fn serve<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static>(
    stream: S,
    http: http1::Builder,
    limits: Limits,
    answer: Arc<Answer>,
    ticket: Ticket,
) {
    let activity = Arc::clone(&ticket.activity);
    let io = TokioIo::new(Watched::new(stream, Arc::clone(&activity)));
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let response = respond(answer.as_ref(), &request);
        async move { Ok::<_, Infallible>(response) }
    });
    let connection = http.serve_connection(io, service);
    let idle = async {
        loop {
            let quiet = activity.quiet_for();
            if quiet >= limits.idle_timeout {
                return;
            }
            tokio::time::sleep(limits.idle_timeout - quiet).await;
        }
    };
    tokio::select! {
        done = connection => {
            if let Err(e) = done {
                log::debug!("a metrics client went away: {e}");
            }
        }
        () = idle => log::debug!("a metrics client moved nothing for {:?}: closed", limits.idle_timeout),
    }
    drop(ticket);
}

/// The request as [`Request`], answered, as hyper's response.
fn respond(answer: &Answer, request: &hyper::Request<Incoming>) -> hyper::Response<Wire> {
    let mut accept = String::new();
    for value in request.headers().get_all(ACCEPT) {
        if !accept.is_empty() {
            accept.push_str(", ");
        }
        accept.push_str(&String::from_utf8_lossy(value.as_bytes()));
        if accept.len() > MAX_ACCEPT {
            let mut end = MAX_ACCEPT;
            while !accept.is_char_boundary(end) {
                end -= 1;
            }
            accept.truncate(end);
            break;
        }
    }
    let ours = Request {
        method: request.method().as_str().to_owned(),
        path: request.uri().path().to_owned(),
        query: request.uri().query().map(str::to_owned),
        accept: (!accept.is_empty() || request.headers().contains_key(ACCEPT)).then_some(accept),
    };
    let answered = answer(&ours);
    let body = match answered.body {
        Body::Text(text) => Wire::Full(Full::new(Bytes::from(text))),
        Body::Lines(rx) => Wire::Lines(rx),
    };
    let mut response = hyper::Response::new(body);
    *response.status_mut() =
        hyper::StatusCode::from_u16(answered.status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    for (name, value) in answered.headers {
        if let Ok(value) = HeaderValue::from_str(&value) {
            response.headers_mut().append(name, value);
        }
    }
    if !response.headers().contains_key(CONTENT_TYPE) {
        response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    }
    response
}

/// A plain-text answer.
pub fn plain(status: u16, body: &str) -> Response {
    Response {
        status,
        headers: vec![("Content-Type", "text/plain; charset=utf-8".to_owned())],
        body: Body::Text(body.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{Shutdown, TcpStream};

    use super::*;

    /// The server's TCP address.
    fn tcp(server: &Server) -> SocketAddr {
        server.local_addr().expect("a TCP server")
    }

    fn echo_server(limits: Limits) -> Server {
        Server::start_with("127.0.0.1:0".parse().unwrap(), limits, |r: &Request| Response {
            status: 200,
            headers: vec![],
            body: format!("{} {} {:?}", r.method, r.path, r.accept).into(),
        })
        .unwrap()
    }

    /// Sends `request`, reads until the server closes (the requests here
    /// ask it to).
    fn exchange(addr: SocketAddr, request: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let _ = s.write_all(request);
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn a_request_is_answered() {
        let server = echo_server(Limits::default());
        let out = exchange(
            tcp(&server),
            b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept: text/plain\r\nConnection: close\r\n\r\n",
        );
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        assert!(out.ends_with("GET /metrics Some(\"text/plain\")"), "{out}");
        let head = exchange(tcp(&server), b"HEAD /metrics HTTP/1.0\r\n\r\n");
        assert!(head.starts_with("HTTP/1.0 200 OK\r\n") && head.ends_with("\r\n\r\n"), "{head}");
        let bad = exchange(tcp(&server), b"garbage\r\n\r\n");
        assert_eq!(bad.lines().next(), Some("HTTP/1.1 400 Bad Request"), "{bad}");
    }

    /// RFC 9112 §3.2.2: a server must accept the absolute form.
    #[test]
    fn a_unix_socket_is_served_as_tcp_is_with_the_query() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let server = Server::serve(Listener::Unix(listener), Limits::default(), |r: &Request| Response {
            status: 200,
            headers: vec![],
            body: format!("{} {} {:?}", r.method, r.path, r.query).into(),
        })
        .unwrap();
        assert_eq!(server.local_addr(), None);
        let mut s = std::os::unix::net::UnixStream::connect(&path).unwrap();
        s.write_all(b"GET /v1/state?watch=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.1 200 OK") && out.ends_with("GET /v1/state Some(\"watch=1\")"), "{out}");
    }

    /// A client that sends its request and then shuts its write side
    /// (`nc -N`, `shutdown(SHUT_WR)`) gets the whole answer every time,
    /// not an empty reply when the EOF is read before the answer is
    /// written (before `half_close`, about one in 200 here: 1,000 rounds).
    #[test]
    fn a_request_then_a_half_close_always_gets_its_whole_answer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let body = "x".repeat(20_000);
        let answer = body.clone();
        let server = Server::serve(Listener::Unix(listener), Limits::default(), move |_: &Request| Response {
            status: 200,
            headers: vec![],
            body: answer.clone().into(),
        })
        .unwrap();
        for round in 0..1000 {
            let mut s = std::os::unix::net::UnixStream::connect(&path).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            s.write_all(b"GET /v1/state HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            s.shutdown(Shutdown::Write).unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).unwrap();
            assert!(out.starts_with("HTTP/1.1 200 OK") && out.ends_with(&body), "round {round}: {:?}", &out);
        }
        drop(server);
    }

    #[test]
    fn an_absolute_form_target_is_its_path() {
        let server = echo_server(Limits::default());
        let addr = tcp(&server);
        let request = format!("GET http://{addr}/metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        let out = exchange(addr, request.as_bytes());
        assert!(out.starts_with("HTTP/1.1 200 OK") && out.ends_with("GET /metrics None"), "{out}");
    }

    /// Two `Accept` headers are one list.
    #[test]
    fn every_accept_header_is_read() {
        let server = echo_server(Limits::default());
        let out = exchange(
            tcp(&server),
            b"GET /metrics HTTP/1.1\r\nAccept: text/plain;q=0.1\r\nAccept: application/openmetrics-text\r\nConnection: close\r\n\r\n",
        );
        assert!(out.ends_with("Some(\"text/plain;q=0.1, application/openmetrics-text\")"), "{out}");
    }

    /// A 1 MiB head is refused at the bound (431, or closed while being
    /// sent); the server keeps answering.
    #[test]
    fn a_huge_head_is_refused_at_its_bound() {
        let server = echo_server(Limits::default());
        let mut s = TcpStream::connect(tcp(&server)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut head = b"GET /metrics HTTP/1.1\r\n".to_vec();
        while head.len() < 1 << 20 {
            head.extend_from_slice(format!("X-A{}: {}\r\n", head.len(), "a".repeat(1000)).as_bytes());
        }
        let _ = s.write_all(&head);
        let _ = s.shutdown(Shutdown::Write);
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        let out = String::from_utf8_lossy(&out);
        assert!(out.is_empty() || out.starts_with("HTTP/1.1 431 "), "{out:?}");
        let ok = exchange(tcp(&server), b"GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK"), "{ok}");
    }

    /// More idle clients than the table holds: a scrape still gets in,
    /// in the place of the quietest.
    #[test]
    fn idle_clients_never_keep_a_scrape_out() {
        let limits = Limits { max_connections: 8, ..Limits::default() };
        let server = echo_server(limits);
        let idle: Vec<TcpStream> = (0..50).map(|_| TcpStream::connect(tcp(&server)).unwrap()).collect();
        for _ in 0..5 {
            let ok = exchange(tcp(&server), b"GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n");
            assert!(ok.starts_with("HTTP/1.1 200 OK"), "{ok:?}");
        }
        assert!(server.open_connections() <= 8, "{}", server.open_connections());
        drop(idle);
    }

    /// A flood of new connections, each closing another: the sockets held
    /// never pass the bound (one closing besides it, one being accepted),
    /// so the agent never runs out of descriptors for its own files. The
    /// flood waits in the listen backlog while an answer holds the server's
    /// thread, then is accepted at once.
    #[test]
    fn a_flood_never_holds_more_sockets_than_the_bound() {
        let limits = Limits { max_connections: 8, ..Limits::default() };
        let server = Server::start_with("127.0.0.1:0".parse().unwrap(), limits, |r: &Request| {
            if r.path == "/hold" {
                thread::sleep(Duration::from_millis(300));
            }
            plain(200, "x")
        })
        .unwrap();
        let mut holder = TcpStream::connect(tcp(&server)).unwrap();
        holder.write_all(b"GET /hold HTTP/1.1\r\n\r\n").unwrap();
        thread::sleep(Duration::from_millis(50));
        let flood: Vec<TcpStream> = (0..100).map(|_| TcpStream::connect(tcp(&server)).unwrap()).collect();
        let started = Instant::now();
        while server.peak_connections() < 9 && started.elapsed() < Duration::from_secs(2) {
            thread::sleep(Duration::from_millis(10));
        }
        thread::sleep(Duration::from_millis(200));
        let peak = server.peak_connections();
        assert!(peak <= 8 + 1, "{peak} sockets held at once, against a bound of 8");
        drop((flood, holder));
        let ok = exchange(tcp(&server), b"GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK"), "{ok}");
    }

    /// A client whose head never ends, or that never reads, is closed by
    /// the timeouts and its place freed.
    #[test]
    fn slow_and_stalled_clients_are_closed() {
        let limits = Limits {
            header_timeout: Duration::from_millis(200),
            idle_timeout: Duration::from_millis(300),
            ..Limits::default()
        };
        let server = Server::start_with("127.0.0.1:0".parse().unwrap(), limits, |_: &Request| Response {
            status: 200,
            headers: vec![],
            body: "x".repeat(32 << 20).into(),
        })
        .unwrap();
        let mut slow = TcpStream::connect(tcp(&server)).unwrap();
        slow.write_all(b"GET /metrics HTTP/1.1\r\nX-Slow: a").unwrap();
        let mut stalled = TcpStream::connect(tcp(&server)).unwrap();
        stalled.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
        let started = Instant::now();
        while server.open_connections() > 0 {
            assert!(started.elapsed() < Duration::from_secs(30), "{} still open", server.open_connections());
            thread::sleep(Duration::from_millis(20));
        }
        slow.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut out = Vec::new();
        let _ = slow.read_to_end(&mut out);
        assert!(out.is_empty() || out.starts_with(b"HTTP/1.1 408"), "{:?}", String::from_utf8_lossy(&out));
    }

    #[test]
    fn dropping_the_server_stops_it() {
        let server = echo_server(Limits::default());
        let addr = tcp(&server);
        let held = TcpStream::connect(addr).unwrap();
        drop(server);
        assert!(TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err());
        drop(held);
    }
}
