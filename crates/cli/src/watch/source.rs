//! The devices `watch` follows as they appear and leave: the host's,
//! restricted to those the settings' `include` and `exclude` choose.

use std::io;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use railwatch_runtime::DeviceSource;
use railwatch_verbs_backend::HostDevices;

use crate::config::DeviceFilter;

/// How often the device list is re-read where uevents cannot be had.
pub const RESCAN_EVERY: Duration = Duration::from_secs(5);

/// The host's devices through `filter`.
pub struct Chosen<S> {
    inner: S,
    /// Shared with the watch loop, which replaces it on reload.
    filter: Arc<Mutex<DeviceFilter>>,
}

impl Chosen<HostDevices> {
    /// The host's devices (uevents, or a rescan every [`RESCAN_EVERY`]
    /// where there are none) through `filter`.
    pub fn host(filter: Arc<Mutex<DeviceFilter>>) -> Chosen<HostDevices> {
        let (inner, no_uevents) = HostDevices::new(None);
        if let Some(e) = no_uevents {
            log::warn!("no device uevents ({e}); re-reading the device list every {RESCAN_EVERY:?}");
        }
        Chosen { inner, filter }
    }
}

impl<S: DeviceSource> DeviceSource for Chosen<S> {
    type Device = S::Device;

    fn fd(&self) -> Option<std::os::fd::RawFd> {
        self.inner.fd()
    }

    fn drain(&mut self) -> io::Result<bool> {
        self.inner.drain()
    }

    fn list(&mut self) -> io::Result<Vec<String>> {
        let mut names = self.inner.list()?;
        let filter = self.filter.lock().unwrap_or_else(PoisonError::into_inner);
        names.retain(|n| filter.watches(n));
        Ok(names)
    }

    fn open(&mut self, name: &str) -> io::Result<Self::Device> {
        self.inner.open(name)
    }
}
