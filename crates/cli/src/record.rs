//! `watch --record FILE` (and `simulate --record FILE`): the recorder
//! (railwatch-scenario's [`Recorder`]) set up from the settings in force
//! and fed by the monitor's observer.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use railwatch_core::Millis;
use railwatch_runtime::{Config, Observer, Snapshot};
use railwatch_scenario::record::{RecordOptions, Recorder};

/// A recording in progress, shared by the monitor's observer and the watch
/// loop (which flushes it and finishes it).
#[derive(Clone)]
pub struct Recording {
    inner: Arc<Mutex<Recorder>>,
}

/// The recording's description for `watch`: the host, unless anonymized.
pub fn host_description(anonymize: bool) -> String {
    match host_name().filter(|_| !anonymize) {
        Some(host) => format!("recorded by railwatch watch on {host}"),
        None => "recorded by railwatch watch".to_owned(),
    }
}

fn host_name() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    let name = name.trim();
    (!name.is_empty() && name != "(none)").then(|| name.to_owned())
}

impl Recording {
    /// Creates `path` with the header for `config` (the settings in force).
    /// `recorded_by` names the command (`"railwatch watch --record"`).
    /// Only a regular file (or a new one) is written.
    pub fn create(
        path: &Path,
        config: &Config,
        anonymize: bool,
        recorded_by: &str,
        description: String,
    ) -> std::io::Result<Recording> {
        let path = crate::outfile::target(path)?;
        let opts = RecordOptions {
            recorded_by: recorded_by.to_owned(),
            name: "recorded".to_owned(),
            description: Some(description),
            tick_ms: config.tick_ms,
            settle_ms: config.settle_ms,
            audit_ms: config.audit_ms,
            damping: config.damping,
            notes: vec![
                format!("drain_budget = {}", config.drain_budget),
                format!(
                    "re-open backoff {}..{} ms, jitter {}% (the replay draws its own)",
                    config.reopen_initial_ms, config.reopen_max_ms, config.reopen_jitter_pct
                ),
            ],
            anonymize,
        };
        Ok(Recording { inner: Arc::new(Mutex::new(Recorder::create(&path, &opts)?)) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Recorder> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The observer to give the monitor (before its devices are added).
    pub fn observer(&self) -> Observer {
        let inner = self.inner.clone();
        Box::new(move |now, what| inner.lock().unwrap_or_else(PoisonError::into_inner).observe(now, what))
    }

    /// Writes what is settled; logs (once) why the recording stopped early.
    pub fn flush(&self, now: Millis) -> std::io::Result<()> {
        let mut r = self.lock();
        let was_stopped = r.stopped().is_some();
        let result = r.flush(now);
        if let (false, Some(why)) = (was_stopped, r.stopped()) {
            log::warn!("the recording stopped: {why}");
        }
        result
    }

    /// Writes the rest and the final expectations.
    pub fn finish(&self, now: Millis, snapshot: &Snapshot) -> std::io::Result<()> {
        self.lock().finish(now, snapshot)
    }
}
