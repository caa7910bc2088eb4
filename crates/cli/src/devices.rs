//! The host's RDMA devices as `status` and `watch` find them through
//! railwatch-verbs-backend (feature `verbs`): listing and opening them, and
//! a failure worth a line, naming the device, the call and the errno.

use std::io;
use std::process::ExitCode;

use railwatch_verbs_backend::{VerbsDevice, VerbsError, errno_of, list_devices};
use serde::Serialize;

/// What `status` and `watch` say when the host has no RDMA device (or no
/// RDMA support in its kernel).
pub const NO_DEVICES: &str = "no RDMA devices found";

/// A failure worth a line: which device (and port), which call, which
/// errno. Serialized, it is `status --json`'s `error` line (docs/JSON.md).
#[derive(Debug, Serialize)]
pub struct Failure {
    kind: &'static str,
    device: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    port: Option<u8>,
    call: Option<&'static str>,
    errno: Option<i32>,
    message: String,
}

impl Failure {
    /// A failed call of the backend.
    pub fn of_verbs(device: &str, port: Option<u8>, err: &VerbsError) -> Failure {
        Failure {
            kind: "error",
            device: device.to_owned(),
            port,
            call: err.failed_call(),
            errno: err.errno(),
            message: err.to_string(),
        }
    }

    /// A failed port query: the backend's `io::Error` wraps a `VerbsError`
    /// naming the call.
    pub fn of_io(device: &str, port: u8, err: &io::Error) -> Failure {
        if let Some(verbs) = err.get_ref().and_then(|e| e.downcast_ref::<VerbsError>()) {
            return Failure::of_verbs(device, Some(port), verbs);
        }
        Failure {
            kind: "error",
            device: device.to_owned(),
            port: Some(port),
            call: None,
            errno: errno_of(err),
            message: format!("{device}: {err}"),
        }
    }

    /// The line for stderr.
    pub fn human(&self) -> String {
        match self.port {
            Some(port) => format!("railwatch: port {port}: {}", self.message),
            None => format!("railwatch: {}", self.message),
        }
    }
}

/// Lists the devices; a listing failure (not ENOSYS, which is no devices)
/// is said on stderr.
pub fn list() -> Result<Vec<String>, ExitCode> {
    list_devices().map_err(|e| {
        eprintln!("railwatch: cannot list RDMA devices: {e}");
        ExitCode::from(1)
    })
}

/// Opens `names`, reporting each device that cannot be opened.
pub fn open_all(names: &[String], failures: &mut Vec<Failure>) -> Vec<VerbsDevice> {
    let mut opened = Vec::new();
    for name in names {
        match VerbsDevice::open(name) {
            Ok(dev) => opened.push(dev),
            Err(e) => failures.push(Failure::of_verbs(name, None, &e)),
        }
    }
    opened
}
