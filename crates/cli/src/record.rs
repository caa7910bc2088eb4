//! `watch --record FILE` (and `simulate --record FILE`): the recorder set
//! up from the settings in force and fed by the monitor's observer: an
//! input log ([`LogFile`]) for a name ending in `.rwlog`, else a scenario
//! (railwatch-scenario's [`Recorder`]).

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use railwatch_core::Millis;
use railwatch_runtime::{Config, Observer, Snapshot};
use railwatch_scenario::record::{RecordOptions, Recorder};

use crate::inputlog::LogFile;
use crate::outfile::OutFile;

/// A recording in progress, shared by the monitor's observer and the watch
/// loop (which flushes it and finishes it).
#[derive(Clone)]
pub struct Recording {
    inner: Arc<Mutex<Kind>>,
    disk: Arc<Mutex<Disk>>,
}

/// What is recorded.
enum Kind {
    /// A scenario that `railwatch simulate` replays.
    Scenario(Box<Recorder>),
    /// The machine's inputs, that `railwatch replay` replays exactly.
    Log(LogFile),
}

/// Whether `path` names an input log (`.rwlog`) rather than a scenario.
pub fn is_input_log(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "rwlog")
}

impl Kind {
    fn file_handle(&self) -> io::Result<File> {
        match self {
            Kind::Scenario(r) => r.file_handle(),
            Kind::Log(l) => l.file_handle(),
        }
    }

    fn copy_into(&self, to: &File) -> io::Result<()> {
        match self {
            Kind::Scenario(r) => r.copy_into(to),
            Kind::Log(l) => l.copy_into(to),
        }
    }

    fn continue_in(&mut self, file: File) {
        match self {
            Kind::Scenario(r) => r.continue_in(file),
            Kind::Log(l) => l.continue_in(file),
        }
    }
}

/// How often what was written is synced to disk: a host that crashes (not
/// only the process) loses at most about this much of the recording.
const SYNC_EVERY: Duration = Duration::from_secs(1);

/// The file's second handle, where it is named, and when it was last
/// synced (real time: a virtual-time `simulate` run is not synced once per
/// virtual second).
struct Disk {
    file: File,
    out: OutFile,
    synced_at: Instant,
}

/// `watch`'s recording is the only copy of what the host said: an existing
/// non-empty file at `path` is kept as `path.old` (replacing an older
/// one), as `perf record` keeps `perf.data.old`, so an agent restarted
/// after a crash does not wipe the incident it recorded. Returns the name
/// the old one is kept under. A link at `path` is not kept: it is
/// replaced by the recording, its target never written.
pub fn keep_previous(path: &Path) -> io::Result<Option<PathBuf>> {
    OutFile::open(path)?.keep_previous()
}

/// Where [`keep_previous`] keeps a recording at `path`: in its directory,
/// with `.old` added.
pub fn kept_as(path: &Path) -> PathBuf {
    OutFile::open(path).map_or_else(
        |_| {
            let mut old = path.as_os_str().to_owned();
            old.push(".old");
            PathBuf::from(old)
        },
        |out| out.kept_as(),
    )
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
    /// Creates `path` with the header for `config` (the settings in force;
    /// an input log needs its seed fixed, the one the monitor runs with).
    /// `recorded_by` names the command (`"railwatch watch --record"`).
    /// Written as [`OutFile`] writes: a new file renamed into place (a
    /// link there replaced, never followed), then grown in place. An input
    /// log is not anonymized: asking for it is an error.
    pub fn create(
        path: &Path,
        config: &Config,
        anonymize: bool,
        recorded_by: &str,
        description: String,
    ) -> std::io::Result<Recording> {
        let log = is_input_log(path);
        if log && anonymize {
            let message = "an input log (.rwlog) holds the devices' own names and addresses: \
                           --record-anonymize applies to a scenario recording (.toml)";
            return Err(io::Error::new(io::ErrorKind::InvalidInput, message));
        }
        let out = OutFile::open(path)?;
        let file = out.create_growing()?;
        let kind = match log {
            true => Kind::Log(LogFile::create_in(file, &config.machine_seeded(), recorded_by)?),
            false => Kind::Scenario(Box::new(Self::scenario_in(file, config, anonymize, recorded_by, description)?)),
        };
        let disk = Disk { file: kind.file_handle()?, out, synced_at: Instant::now() };
        Ok(Recording { inner: Arc::new(Mutex::new(kind)), disk: Arc::new(Mutex::new(disk)) })
    }

    fn scenario_in(
        file: File,
        config: &Config,
        anonymize: bool,
        recorded_by: &str,
        description: String,
    ) -> io::Result<Recorder> {
        let opts = RecordOptions {
            recorded_by: recorded_by.to_owned(),
            name: "recorded".to_owned(),
            description: Some(description),
            config: config.clone(),
            notes: vec!["the re-open jitter (the replay draws its own)".to_owned()],
            anonymize,
        };
        Recorder::create_in(file, &opts)
    }

    /// The host's devices at the start are attached (see
    /// [`Recorder::started`]).
    pub fn started(&self) {
        if let Kind::Scenario(r) = &mut *self.lock() {
            r.started();
        }
    }

    /// The monitor runs on a virtual clock (`simulate --record`): changes
    /// are placed at the query that saw them.
    pub fn on_virtual_time(&self) {
        if let Kind::Scenario(r) = &mut *self.lock() {
            r.on_virtual_time();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kind> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The observer to give the monitor (before its devices are added).
    pub fn observer(&self) -> Observer {
        let inner = self.inner.clone();
        Box::new(move |now, what| match &mut *inner.lock().unwrap_or_else(PoisonError::into_inner) {
            Kind::Scenario(r) => r.observe(now, what),
            Kind::Log(l) => l.observe(now, what),
        })
    }

    /// Writes what is settled, and syncs it to disk once a second; logs
    /// (once) why the recording stopped early.
    pub fn flush(&self, now: Millis) -> io::Result<()> {
        let wrote = match &mut *self.lock() {
            Kind::Scenario(r) => {
                let was_stopped = r.stopped().is_some();
                let wrote = r.flush(now)?;
                if let (false, Some(why)) = (was_stopped, r.stopped()) {
                    log::warn!("the recording stopped: {why}");
                }
                wrote
            }
            Kind::Log(l) => l.flush(now)?,
        };
        // Most wake-ups write nothing: they pay for no clock read either.
        if !wrote {
            return Ok(());
        }
        // Not under the recorder's lock: the observer may go on meanwhile.
        let mut disk = self.disk.lock().unwrap_or_else(PoisonError::into_inner);
        if disk.synced_at.elapsed() >= SYNC_EVERY {
            disk.synced_at = Instant::now();
            disk.file.sync_data()?;
            self.keep_at_name(&mut disk)?;
        }
        Ok(())
    }

    /// Writes the rest and the final expectations, and syncs the file.
    pub fn finish(&self, now: Millis, snapshot: &Snapshot) -> io::Result<()> {
        match &mut *self.lock() {
            Kind::Scenario(r) => r.finish(now, snapshot)?,
            Kind::Log(l) => drop(l.write_out()?),
        }
        let mut disk = self.disk.lock().unwrap_or_else(PoisonError::into_inner);
        disk.file.sync_data()?;
        self.keep_at_name(&mut disk)
    }

    /// A recording moved away, deleted or replaced under its name (by an
    /// operator, a log rotation) is written anew there, whole, and grown
    /// there from then on: what is at the name at the end is the whole
    /// recording. Checked at each sync and at the end.
    fn keep_at_name(&self, disk: &mut Disk) -> io::Result<()> {
        if disk.out.names(&disk.file)? {
            return Ok(());
        }
        // Under the recorder's lock: nothing is written between the copy
        // and the switch to it.
        let mut recorder = self.lock();
        let file = disk.out.replace_with(|to| recorder.copy_into(to))?;
        recorder.continue_in(file.try_clone()?);
        disk.file = file;
        log::warn!(
            "the recording {} was moved, deleted or replaced: written anew under its name",
            disk.out.path().display()
        );
        Ok(())
    }
}
