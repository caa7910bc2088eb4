//! Asking a running agent for its state (`railwatch rails`, `railwatch
//! check`; docs/STATE-API.md): one `GET /v1/state` over the state socket,
//! with hyper's HTTP/1.1 client, bounded in time and size.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::rt::TokioIo;
use railwatch_runtime::state::{STATE_SCHEMA, StateReply};

use crate::state::STATE_PATH;

/// The socket the systemd unit serves (`RuntimeDirectory=railwatch`).
pub const DEFAULT_SOCKET: &str = "/run/railwatch/state.sock";

/// The most bytes of a state document read (a host has at most a few
/// hundred rails, each well under 2 KiB).
const MAX_BODY: usize = 8 << 20;

/// Why the agent could not be asked.
#[derive(Debug)]
pub struct AskError {
    /// The socket.
    pub socket: PathBuf,
    /// What went wrong.
    pub message: String,
}

impl fmt::Display for AskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "railwatch at {}: {}", self.socket.display(), self.message)
    }
}

impl std::error::Error for AskError {}

/// A runtime of this thread's for one conversation with the agent.
fn runtime(socket: &Path) -> Result<tokio::runtime::Runtime, AskError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| AskError { socket: socket.to_owned(), message: format!("no runtime: {e}") })
}

/// The agent's state document as it sent it (JSON text), asked on
/// `socket` within `timeout`.
pub fn ask_text(socket: &Path, timeout: Duration) -> Result<String, AskError> {
    let fail = |message: String| AskError { socket: socket.to_owned(), message };
    let runtime = runtime(socket)?;
    let body = runtime
        .block_on(async { tokio::time::timeout(timeout, get(socket)).await })
        .map_err(|_| fail(format!("no answer within {} ms", timeout.as_millis())))?
        .map_err(fail)?;
    String::from_utf8(body).map_err(|_| fail("the document is not UTF-8".to_owned()))
}

/// The agent's state, asked on `socket` within `timeout`.
pub fn ask(socket: &Path, timeout: Duration) -> Result<StateReply, AskError> {
    let fail = |message: String| AskError { socket: socket.to_owned(), message };
    let reply: StateReply =
        serde_json::from_str(&ask_text(socket, timeout)?).map_err(|e| fail(format!("not a state document: {e}")))?;
    if reply.schema != STATE_SCHEMA {
        return Err(fail(format!("schema {:?}, this railwatch reads {STATE_SCHEMA:?}", reply.schema)));
    }
    Ok(reply)
}

/// The agent's state when it can be trusted: an error too when it is not
/// warm (it has not attached every device present at its start).
pub fn ask_warm(socket: &Path, timeout: Duration) -> Result<StateReply, AskError> {
    let reply = ask(socket, timeout)?;
    if !reply.warm {
        let message = "starting: not every device was attached yet".to_owned();
        return Err(AskError { socket: socket.to_owned(), message });
    }
    Ok(reply)
}

/// The rails work may be sent down (`usable`, as the agent judged it), in
/// its order: what `railwatch rails` prints and Python's `usable_rails()`
/// returns, as `device:port`.
pub fn usable_rails(reply: &StateReply) -> Vec<String> {
    reply.rails.iter().filter(|r| r.usable).map(|r| format!("{}:{}", r.device, r.port)).collect()
}

/// The body of `GET /v1/state` on `socket`.
async fn get(socket: &Path) -> Result<Vec<u8>, String> {
    let response = request(socket, STATE_PATH).await?;
    let status = response.status();
    let body = Limited::new(response.into_body(), MAX_BODY).collect().await.map_err(|e| e.to_string())?.to_bytes();
    if !status.is_success() {
        let text = String::from_utf8_lossy(&body[..body.len().min(200)]).trim().to_owned();
        return Err(format!("HTTP {}: {text}", status.as_u16()));
    }
    Ok(body.to_vec())
}

/// `GET target` on `socket`: the response, its body still to read.
async fn request(socket: &Path, target: &str) -> Result<hyper::Response<hyper::body::Incoming>, String> {
    let stream = tokio::net::UnixStream::connect(socket).await.map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => "no socket (not running?)".to_owned(),
        std::io::ErrorKind::ConnectionRefused => "nobody answers (not running?)".to_owned(),
        _ => e.to_string(),
    })?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    let request = hyper::Request::get(target)
        .header(hyper::header::HOST, "railwatch")
        .body(Empty::<bytes::Bytes>::new())
        .map_err(|e| e.to_string())?;
    sender.send_request(request).await.map_err(|e| e.to_string())
}

/// The agent's change stream (`GET /v1/state?watch=1`), line by line.
pub struct Changes {
    runtime: tokio::runtime::Runtime,
    body: hyper::body::Incoming,
    pending: Vec<u8>,
    socket: PathBuf,
}

/// The longest line of the stream read (a whole document of a big host).
const MAX_LINE: usize = MAX_BODY;

impl Changes {
    /// Opens the stream on `socket` within `timeout`.
    pub fn open(socket: &Path, timeout: Duration) -> Result<Changes, AskError> {
        let fail = |message: String| AskError { socket: socket.to_owned(), message };
        let runtime = runtime(socket)?;
        let target = format!("{STATE_PATH}?watch=1");
        let response = runtime
            .block_on(async { tokio::time::timeout(timeout, request(socket, &target)).await })
            .map_err(|_| fail(format!("no answer within {} ms", timeout.as_millis())))?
            .map_err(fail)?;
        if !response.status().is_success() {
            return Err(fail(format!("HTTP {}", response.status().as_u16())));
        }
        Ok(Changes { runtime, body: response.into_body(), pending: Vec::new(), socket: socket.to_owned() })
    }

    /// The next line (without its newline) within `timeout`: `Ok(None)`
    /// when none came in time; an error when the agent went away.
    pub fn next_line(&mut self, timeout: Duration) -> Result<Option<String>, AskError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=end).collect();
                return Ok(Some(String::from_utf8_lossy(&line[..end]).into_owned()));
            }
            if self.pending.len() > MAX_LINE {
                return Err(self.gone("a line longer than 8 MiB"));
            }
            // The timer is made inside the runtime (its time driver).
            let body = &mut self.body;
            let frame = self.runtime.block_on(async { tokio::time::timeout_at(deadline, body.frame()).await });
            match frame {
                Err(_) => return Ok(None),
                Ok(None) => return Err(self.gone("the agent ended the stream")),
                Ok(Some(Err(e))) => return Err(self.gone(&e.to_string())),
                Ok(Some(Ok(frame))) => {
                    if let Some(data) = frame.data_ref() {
                        self.pending.extend_from_slice(data);
                    }
                }
            }
        }
    }

    fn gone(&self, why: &str) -> AskError {
        AskError { socket: self.socket.clone(), message: why.to_owned() }
    }
}
