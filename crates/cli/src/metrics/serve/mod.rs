//! `--metrics-listen ADDR:PORT`: the `/metrics` endpoint, answered from
//! the registry by the bounded server of [`http`] (hyper, on a thread of
//! its own).

pub mod http;
mod limit;

use std::net::SocketAddr;
use std::sync::Arc;

use super::export::{Exporter, Format};
use crate::state::{Api, Published};

/// The `/metrics` endpoint: the bounded server of [`http`], its thread
/// answering from the registry.
pub struct Server {
    _http: http::Server,
}

/// A refusal to listen: the address and why.
#[derive(Debug)]
pub struct BindError {
    /// The address asked for.
    pub addr: SocketAddr,
    /// What the bind said.
    pub message: String,
}

impl std::fmt::Display for BindError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot serve metrics on {}: {}", self.addr, self.message)
    }
}

impl std::error::Error for BindError {}

/// Answers one request: `/metrics` in the format asked for, the state
/// API's path from `state` when it is served, 404 for any other path, 405
/// for a method other than GET or HEAD.
fn respond(exporter: &Exporter, state: Option<&Api>, request: &http::Request) -> http::Response {
    use http::{Response, plain};
    if let Some(answer) = state.and_then(|s| s.respond(request)) {
        answer
    } else if request.path != "/metrics" {
        plain(404, "not found: metrics are at /metrics\n")
    } else if !matches!(request.method.as_str(), "GET" | "HEAD") {
        let mut r = plain(405, "only GET and HEAD\n");
        r.headers.push(("Allow", "GET, HEAD".to_owned()));
        r
    } else {
        let format = Format::from_accept(request.accept.as_deref());
        // The encoder runs here, into memory; the socket is written after.
        Response {
            status: 200,
            headers: vec![("Content-Type", format.content_type().to_owned())],
            body: exporter.encode(format).into(),
        }
    }
}

impl Server {
    /// Listens on `addr` and answers on a thread of its own: `/metrics`,
    /// and the state API when `state` is given.
    pub fn start(addr: SocketAddr, exporter: Exporter, state: Option<Arc<Published>>) -> Result<Server, BindError> {
        let state = state.map(Api::new);
        let http = http::Server::start(addr, move |request| respond(&exporter, state.as_ref(), request))
            .map_err(|e| BindError { addr, message: e.to_string() })?;
        Ok(Server { _http: http })
    }
}
