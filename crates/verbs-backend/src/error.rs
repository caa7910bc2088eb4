//! What can go wrong talking to libibverbs, with the device and the call.

use std::io;

/// A failed libibverbs operation: which device, which call, which errno.
///
/// Converts into [`io::Error`] (keeping this message and the errno's
/// [`io::ErrorKind`]) where [`railwatch_core::VerbsPort`] demands
/// `io::Result`; [`errno_of`] gets the errno back out of either.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerbsError {
    /// Listing the devices failed for a reason other than "no kernel RDMA
    /// support" (ENOSYS, which is an empty list).
    #[error("{call} failed: {source}")]
    List {
        /// The failing call (`"ibv_get_device_list"`).
        call: &'static str,
        /// The errno it left.
        #[source]
        source: io::Error,
    },
    /// No device of that name is present.
    #[error("{device}: no such RDMA device")]
    NotFound {
        /// The name asked for.
        device: String,
    },
    /// A call on an existing device failed.
    #[error("{device}: {call} failed: {source}")]
    Call {
        /// The device name.
        device: String,
        /// The failing call (`"ibv_query_port"`, `"ibv_get_async_event"`, …).
        call: &'static str,
        /// The errno it returned or left.
        #[source]
        source: io::Error,
    },
    /// The device is closed (after [`close`](railwatch_core::VerbsPort::close)
    /// or a failed [`reopen`](railwatch_core::VerbsPort::reopen)).
    #[error("{device}: device is closed")]
    Closed {
        /// The device name.
        device: String,
    },
}

impl VerbsError {
    pub(crate) fn call(device: &str, call: &'static str, source: io::Error) -> VerbsError {
        VerbsError::Call { device: device.to_owned(), call, source }
    }

    /// The device name, when the error is about one device.
    pub fn device(&self) -> Option<&str> {
        match self {
            VerbsError::List { .. } => None,
            VerbsError::NotFound { device } | VerbsError::Call { device, .. } | VerbsError::Closed { device } => {
                Some(device)
            }
        }
    }

    /// The libibverbs call that failed, if one did.
    pub fn failed_call(&self) -> Option<&'static str> {
        match self {
            VerbsError::List { call, .. } | VerbsError::Call { call, .. } => Some(call),
            VerbsError::NotFound { .. } | VerbsError::Closed { .. } => None,
        }
    }

    /// The errno behind the error, if there is one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            VerbsError::List { source, .. } | VerbsError::Call { source, .. } => source.raw_os_error(),
            VerbsError::NotFound { .. } | VerbsError::Closed { .. } => None,
        }
    }

    /// The [`io::ErrorKind`] the error maps to: the errno's kind for failed
    /// calls, `NotFound` for an absent device, `NotConnected` for a closed one.
    pub fn kind(&self) -> io::ErrorKind {
        match self {
            VerbsError::List { source, .. } | VerbsError::Call { source, .. } => source.kind(),
            VerbsError::NotFound { .. } => io::ErrorKind::NotFound,
            VerbsError::Closed { .. } => io::ErrorKind::NotConnected,
        }
    }
}

impl From<VerbsError> for io::Error {
    fn from(err: VerbsError) -> io::Error {
        io::Error::new(err.kind(), err)
    }
}

/// The errno behind an [`io::Error`] returned by this crate: its raw OS
/// error, or the errno of the [`VerbsError`] it wraps.
///
/// `WouldBlock` and `Interrupted` from
/// [`get_event`](railwatch_core::VerbsPort::get_event) are plain OS errors
/// (no allocation on the drain's normal end); every other failure wraps a
/// [`VerbsError`] naming the device and the call.
pub fn errno_of(err: &io::Error) -> Option<i32> {
    err.raw_os_error().or_else(|| err.get_ref()?.downcast_ref::<VerbsError>()?.errno())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversion_keeps_message_kind_and_errno() {
        let err = VerbsError::call("mlx5_0", "ibv_get_async_event", io::Error::from_raw_os_error(libc::EIO));
        let msg = err.to_string();
        assert!(msg.starts_with("mlx5_0: ibv_get_async_event failed: "), "{msg}");
        assert_eq!(
            (err.device(), err.failed_call(), err.errno()),
            (Some("mlx5_0"), Some("ibv_get_async_event"), Some(5))
        );
        let io_err = io::Error::from(err);
        assert_eq!(io_err.to_string(), msg);
        assert_eq!(errno_of(&io_err), Some(libc::EIO));
        assert!(std::error::Error::source(&io_err).is_some(), "the errno stays reachable as the source");

        let eagain = io::Error::from_raw_os_error(libc::EAGAIN);
        assert_eq!((eagain.kind(), errno_of(&eagain)), (io::ErrorKind::WouldBlock, Some(libc::EAGAIN)));

        let closed = io::Error::from(VerbsError::Closed { device: "mlx5_1".into() });
        assert_eq!((closed.kind(), errno_of(&closed)), (io::ErrorKind::NotConnected, None));
        assert_eq!(closed.to_string(), "mlx5_1: device is closed");

        let missing = VerbsError::NotFound { device: "mlx5_9".into() };
        assert_eq!(
            (missing.kind(), missing.device(), missing.failed_call()),
            (io::ErrorKind::NotFound, Some("mlx5_9"), None)
        );

        let list = VerbsError::List { call: "ibv_get_device_list", source: io::Error::from_raw_os_error(libc::EPERM) };
        assert_eq!((list.device(), list.kind()), (None, io::ErrorKind::PermissionDenied));
        assert!(list.to_string().starts_with("ibv_get_device_list failed: "));
    }
}
