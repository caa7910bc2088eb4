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
    /// What it was.
    pub kind: AskErrorKind,
}

/// What kind of failure an [`AskError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AskErrorKind {
    /// The path names no socket: nothing there, or a file of another kind
    /// (the message says which, and names the path).
    NoSocket,
    /// The agent could not be asked, or its answer read.
    Agent,
    /// The agent cut this stream reader off as too slow (it fell
    /// [`crate::state::STREAM_BACKLOG`] lines behind): reconnect.
    Cut,
}

impl AskError {
    fn agent(socket: &Path, message: String) -> AskError {
        AskError { socket: socket.to_owned(), message, kind: AskErrorKind::Agent }
    }
}

impl fmt::Display for AskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            AskErrorKind::NoSocket => write!(f, "{} {}", self.socket.display(), self.message),
            AskErrorKind::Agent | AskErrorKind::Cut => {
                write!(f, "railwatch at {}: {}", self.socket.display(), self.message)
            }
        }
    }
}

/// Why nothing answered on `socket`: it does not exist, it is not a
/// socket (a file, a directory), or nobody listens on it.
fn no_answer(socket: &Path, e: &std::io::Error) -> AskError {
    use std::os::unix::fs::FileTypeExt;
    let no_socket = |message: &str| AskError {
        socket: socket.to_owned(),
        message: message.to_owned(),
        kind: AskErrorKind::NoSocket,
    };
    match std::fs::metadata(socket) {
        Err(m) if m.kind() == std::io::ErrorKind::NotFound => {
            no_socket("does not exist: railwatch is not running (or --socket names another path)")
        }
        Ok(meta) if meta.is_dir() => no_socket("is not a socket but a directory: is --socket right?"),
        Ok(meta) if !meta.file_type().is_socket() => no_socket("is not a socket: is --socket right?"),
        _ => AskError::agent(
            socket,
            match e.kind() {
                std::io::ErrorKind::ConnectionRefused => "nobody answers (not running?)".to_owned(),
                std::io::ErrorKind::PermissionDenied => {
                    "permission denied (the socket's mode and group: --state-socket-group)".to_owned()
                }
                _ => e.to_string(),
            },
        ),
    }
}

impl std::error::Error for AskError {}

/// A runtime of this thread's for one conversation with the agent.
fn runtime(socket: &Path) -> Result<tokio::runtime::Runtime, AskError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| AskError::agent(socket, format!("no runtime: {e}")))
}

/// The agent's state document as it sent it (JSON text), asked on
/// `socket` within `timeout`.
pub fn ask_text(socket: &Path, timeout: Duration) -> Result<String, AskError> {
    let fail = |message: String| AskError::agent(socket, message);
    let runtime = runtime(socket)?;
    let body = runtime
        .block_on(async { tokio::time::timeout(timeout, get(socket)).await })
        .map_err(|_| fail(format!("no answer within {} ms", timeout.as_millis())))??;
    String::from_utf8(body).map_err(|_| fail("the document is not UTF-8".to_owned()))
}

/// The agent's state, asked on `socket` within `timeout`.
pub fn ask(socket: &Path, timeout: Duration) -> Result<StateReply, AskError> {
    let fail = |message: String| AskError::agent(socket, message);
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
        return Err(AskError::agent(socket, message));
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
async fn get(socket: &Path) -> Result<Vec<u8>, AskError> {
    let fail = |message: String| AskError::agent(socket, message);
    let response = request(socket, STATE_PATH).await?;
    let status = response.status();
    let body =
        Limited::new(response.into_body(), MAX_BODY).collect().await.map_err(|e| fail(e.to_string()))?.to_bytes();
    if !status.is_success() {
        let text = String::from_utf8_lossy(&body[..body.len().min(200)]).trim().to_owned();
        return Err(fail(format!("HTTP {}: {text}", status.as_u16())));
    }
    Ok(body.to_vec())
}

/// `GET target` on `socket`: the response, its body still to read.
async fn request(socket: &Path, target: &str) -> Result<hyper::Response<hyper::body::Incoming>, AskError> {
    let fail = |e: &dyn std::error::Error| AskError::agent(socket, e.to_string());
    let stream = tokio::net::UnixStream::connect(socket).await.map_err(|e| no_answer(socket, &e))?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| fail(&e))?;
    tokio::spawn(connection);
    let request = hyper::Request::get(target)
        .header(hyper::header::HOST, "railwatch")
        .body(Empty::<bytes::Bytes>::new())
        .map_err(|e| fail(&e))?;
    sender.send_request(request).await.map_err(|e| fail(&e))
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
        let fail = |message: String| AskError::agent(socket, message);
        let runtime = runtime(socket)?;
        let target = format!("{STATE_PATH}?watch=1");
        let response = runtime
            .block_on(async { tokio::time::timeout(timeout, request(socket, &target)).await })
            .map_err(|_| fail(format!("no answer within {} ms", timeout.as_millis())))??;
        if !response.status().is_success() {
            return Err(fail(format!("HTTP {}", response.status().as_u16())));
        }
        Ok(Changes { runtime, body: response.into_body(), pending: Vec::new(), socket: socket.to_owned() })
    }

    /// The next line (without its newline) within `timeout`: `Ok(None)`
    /// when none came in time; an error when the agent went away (of kind
    /// [`AskErrorKind::Agent`]), or when it cut this reader off as too
    /// slow (its last line, `"kind":"cut"`: [`AskErrorKind::Cut`]).
    pub fn next_line(&mut self, timeout: Duration) -> Result<Option<String>, AskError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=end).collect();
                let line = String::from_utf8_lossy(&line[..end]).into_owned();
                if line.starts_with(CUT_LINE_START) {
                    let message = cut_message(&line);
                    return Err(AskError { socket: self.socket.clone(), message, kind: AskErrorKind::Cut });
                }
                return Ok(Some(line));
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
        AskError::agent(&self.socket, why.to_owned())
    }
}

/// How the agent's last line to a reader it cut starts (see
/// [`crate::state`]).
const CUT_LINE_START: &str = r#"{"kind":"cut""#;

/// The message of a cut line, or what it means when it has none.
fn cut_message(line: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(line).ok();
    let message = parsed.as_ref().and_then(|v| v["message"].as_str()).unwrap_or("this reader was too slow");
    format!("cut off: {message}")
}
