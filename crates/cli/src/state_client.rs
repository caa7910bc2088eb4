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

/// The agent's state, asked on `socket` within `timeout`.
pub fn ask(socket: &Path, timeout: Duration) -> Result<StateReply, AskError> {
    let fail = |message: String| AskError { socket: socket.to_owned(), message };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| fail(format!("no runtime: {e}")))?;
    let body = runtime
        .block_on(async { tokio::time::timeout(timeout, get(socket)).await })
        .map_err(|_| fail(format!("no answer within {} ms", timeout.as_millis())))?
        .map_err(fail)?;
    let reply: StateReply = serde_json::from_slice(&body).map_err(|e| fail(format!("not a state document: {e}")))?;
    if reply.schema != STATE_SCHEMA {
        return Err(fail(format!("schema {:?}, this railwatch reads {STATE_SCHEMA:?}", reply.schema)));
    }
    Ok(reply)
}

/// The body of `GET /v1/state` on `socket`.
async fn get(socket: &Path) -> Result<Vec<u8>, String> {
    let stream = tokio::net::UnixStream::connect(socket).await.map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => "no socket (not running?)".to_owned(),
        std::io::ErrorKind::ConnectionRefused => "nobody answers (not running?)".to_owned(),
        _ => e.to_string(),
    })?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    let request = hyper::Request::get(STATE_PATH)
        .header(hyper::header::HOST, "railwatch")
        .body(Empty::<bytes::Bytes>::new())
        .map_err(|e| e.to_string())?;
    let response = sender.send_request(request).await.map_err(|e| e.to_string())?;
    let status = response.status();
    let body = Limited::new(response.into_body(), MAX_BODY).collect().await.map_err(|e| e.to_string())?.to_bytes();
    if !status.is_success() {
        let text = String::from_utf8_lossy(&body[..body.len().min(200)]).trim().to_owned();
        return Err(format!("HTTP {}: {text}", status.as_u16()));
    }
    Ok(body.to_vec())
}
