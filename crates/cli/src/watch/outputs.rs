//! Everything `watch` tells the world besides its exit status: the lines
//! on stdout ([`Printer`]), the metrics (the registry, the `/metrics`
//! endpoint and the text file), the recording, and systemd. One turn of
//! the loop hands them what it saw in one call, [`Outputs::publish`].

use std::io;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use railwatch_core::{Happening, Millis, PortAddress, RailId};
use railwatch_runtime::lines::Names;
use railwatch_runtime::{Config, HostCondition, Notification, Snapshot};

use super::print::Printer;
use crate::RecordArgs;
use crate::config::Settings;
use crate::metrics::{Metrics, Server, Textfile, TextfileWriter};
use crate::sdnotify::{Notifier, rails_status};
use railwatch_cli::record::{self, Recording};
use railwatch_cli::state::{Published, StateSocket};

/// The metrics and where they go.
pub struct MetricsOut {
    /// The registry the loop updates.
    pub registry: Metrics,
    _server: Option<Server>,
    textfile: Option<TextfileWriter>,
    /// The text file checked at start, written from the first turn's
    /// record on: the record before it holds no rail.
    pending: Option<Textfile>,
}

impl MetricsOut {
    /// The metrics, when the settings ask for them: the endpoint bound and
    /// the text file checked writable. A failure is bad input (exit 2),
    /// said before any device is opened.
    pub fn start(settings: &Settings, state: Option<&StateOut>) -> Result<Option<MetricsOut>, ExitCode> {
        let wanted = &settings.metrics;
        if wanted.listen.is_none() && wanted.textfile.is_none() {
            return Ok(None);
        }
        let registry = Metrics::new(env!("CARGO_PKG_VERSION"));
        let state = state.map(|s| Arc::clone(&s.published));
        let server = match wanted.listen.map(|addr| Server::start(addr, registry.exporter(), state)).transpose() {
            Ok(server) => server,
            Err(e) => {
                eprintln!("railwatch: {e}");
                return Err(ExitCode::from(2));
            }
        };
        let mut out = MetricsOut { registry, _server: server, textfile: None, pending: None };
        if let Some(path) = &wanted.textfile {
            match Textfile::open(path) {
                Ok(file) => out.pending = Some(file),
                Err(e) => {
                    eprintln!("railwatch: cannot write the metrics text file {}: {e}", path.display());
                    return Err(ExitCode::from(2));
                }
            }
        }
        Ok(Some(out))
    }

    /// Writes the text file at `path` from now on (at once: the loop has
    /// published its turns); the writer it replaces writes its file a last
    /// time first.
    pub fn write_textfile(&mut self, path: &Path) -> io::Result<()> {
        let file = Textfile::open(path)?;
        self.pending = None;
        self.textfile = Some(TextfileWriter::start(file, self.registry.exporter())?);
        Ok(())
    }

    /// The turn is over at `snapshot`: the registry publishes it, and the
    /// text file checked at start is written from then on.
    pub fn update(&mut self, snapshot: &Snapshot) {
        self.registry.update(snapshot);
        if let Some(file) = self.pending.take() {
            match TextfileWriter::start(file, self.registry.exporter()) {
                Ok(writer) => self.textfile = Some(writer),
                Err(e) => log::error!("cannot start writing the metrics text file: {e}"),
            }
        }
    }

    /// Stops writing the text file (after a last write).
    pub fn stop_textfile(&mut self) {
        self.pending = None;
        self.textfile = None;
    }
}

/// The state API (docs/STATE-API.md): the published snapshot, served on
/// the state socket and on the metrics listener.
pub struct StateOut {
    /// What readers are answered from.
    pub published: Arc<Published>,
    _socket: Option<StateSocket>,
}

impl StateOut {
    /// The state API, when the settings serve it somewhere: the socket
    /// bound now. A socket that cannot be made is bad input (exit 2), said
    /// before any device is opened.
    pub fn start(settings: &Settings) -> Result<Option<StateOut>, ExitCode> {
        if settings.state_socket.is_none() && settings.metrics.listen.is_none() {
            return Ok(None);
        }
        let published = Arc::new(Published::default());
        let socket = match &settings.state_socket {
            Some(s) => Some(StateSocket::start(s, Arc::clone(&published)).map_err(|e| {
                eprintln!("railwatch: cannot serve the state socket: {e}");
                ExitCode::from(2)
            })?),
            None => None,
        };
        Ok(Some(StateOut { published, _socket: socket }))
    }
}

/// Where `watch` says what happens.
pub struct Outputs {
    /// stdout.
    pub printer: Printer,
    /// The metrics, if asked for.
    pub metrics: Option<MetricsOut>,
    /// The state API, if served.
    pub state: Option<StateOut>,
    /// The recording, if asked for (and not failed).
    pub recording: Option<Recording>,
    /// systemd, when run by it.
    pub notifier: Notifier,
    /// READY was sent.
    ready: bool,
}

/// `available/total rails available`, counting the rails of the devices
/// attached now (not the inert rails of devices that left); when no device
/// is usable, the host's condition first (one line for a driver reload,
/// not a port count that reads like many failures).
fn availability(snapshot: &Snapshot) -> String {
    let attached = snapshot.rails.iter().filter(|r| r.state.name() != "inert");
    let (mut available, mut total) = (0, 0);
    for r in attached {
        total += 1;
        available += usize::from(r.available);
    }
    // No device yet: watch waits for one (issue 23's wording, which
    // systemd shows).
    if snapshot.rails.is_empty() {
        return "0 rails, waiting for devices".to_owned();
    }
    let rails = rails_status(available, total);
    let host = snapshot.host();
    match host.condition {
        HostCondition::Ok => rails,
        HostCondition::AllDevicesGone if host.devices == 0 => format!("no RDMA device; {rails}"),
        HostCondition::AllDevicesGone => {
            format!("every RDMA device gone ({} of {} listed, none open); {rails}", host.present, host.devices)
        }
    }
}

impl Outputs {
    /// The outputs, systemd found from the environment.
    pub fn new(
        printer: Printer,
        metrics: Option<MetricsOut>,
        state: Option<StateOut>,
        recording: Option<Recording>,
    ) -> Outputs {
        Outputs { printer, metrics, state, recording, notifier: Notifier::from_env(), ready: false }
    }

    /// Whether [`publish`](Self::publish) needs a snapshot each turn.
    pub fn wants_snapshot(&self) -> bool {
        self.metrics.is_some() || self.state.is_some() || self.notifier.active()
    }

    /// Hands out one turn's notifications (and `snapshot`, if
    /// [`wants_snapshot`](Self::wants_snapshot)): the metrics published
    /// with the snapshot (a scrape sees all of the turn or none of it), a line each, then READY
    /// (the first time: every device attached and its first notifications
    /// out) and the status line. `address` reads a rail's new address for
    /// an address line. A line that cannot be written ends the turn with
    /// the error.
    pub fn publish<'m>(
        &mut self,
        names: &Names,
        notes: &[Notification],
        snapshot: Option<&Snapshot>,
        address: impl Fn(RailId) -> Option<&'m PortAddress>,
    ) -> io::Result<()> {
        if let Some(m) = &mut self.metrics {
            for note in notes {
                m.registry.note(names, note);
            }
            if let Some(snapshot) = snapshot {
                m.update(snapshot);
            }
        }
        if let (Some(state), Some(snapshot)) = (&self.state, snapshot) {
            state.published.update(snapshot);
        }
        for note in notes {
            let new = match note.what {
                Happening::AddressChanged { rail, .. } => address(rail),
                _ => None,
            };
            self.printer.note(names, note, new)?;
        }
        // The lines this turn dropped are counted now, not at the next
        // turn (there may be none for a long while).
        if let Some(m) = &mut self.metrics {
            m.registry.output_dropped(self.printer.dropped(), railwatch_cli::lineout::stderr_dropped());
        }
        if let Some(snapshot) = snapshot {
            if !self.ready {
                self.notifier.ready();
                self.ready = true;
            }
            self.notifier.status(availability(snapshot));
        }
        self.notifier.tick();
        Ok(())
    }

    /// Writes the recording's settled part. A failure stops the recording
    /// (watching matters more; said in the log) and is returned.
    pub fn flush_recording(&mut self, now: Millis) -> io::Result<()> {
        let Some(r) = &self.recording else { return Ok(()) };
        if let Err(e) = r.flush(now) {
            log::error!("writing the recording failed ({e}); recording stopped, watching goes on");
            self.recording = None;
            return Err(e);
        }
        Ok(())
    }

    /// The end: the recording finished, the metrics' final values set and
    /// the text file's last write made, before the summary is printed.
    pub fn finish(&mut self, now: Millis, snapshot: &Snapshot) -> io::Result<()> {
        let finished = self.recording.as_ref().map_or(Ok(()), |r| r.finish(now, snapshot));
        if let Some(m) = &mut self.metrics {
            m.update(snapshot);
            m.stop_textfile();
        }
        if let Some(state) = &self.state {
            state.published.update(snapshot);
        }
        finished
    }
}

/// Starts `watch --record FILE`, keeping an earlier recording there as
/// `FILE.old`. A file that cannot be written is bad input (exit 2).
pub fn start_recording(rec: &RecordArgs, config: &Config) -> Result<Option<Recording>, ExitCode> {
    let Some(path) = &rec.record else { return Ok(None) };
    let started = record::keep_previous(path).and_then(|kept| {
        if let Some(old) = kept {
            log::warn!("the previous recording in {} is kept as {}", path.display(), old.display());
        }
        let description = record::host_description(rec.record_anonymize);
        Recording::create(path, config, rec.record_anonymize, "railwatch watch --record", description)
    });
    started.map(Some).map_err(|e| {
        eprintln!("railwatch: cannot write the recording {}: {e}", path.display());
        ExitCode::from(2)
    })
}

#[cfg(test)]
mod tests {
    use railwatch_core::{DeviceMode, LinkRate, PauseReason, RailId, RailState};
    use railwatch_runtime::{DeviceCounters, DeviceSnapshot, RailSnapshot};

    use super::*;

    fn snapshot(modes: &[DeviceMode], states: &[(RailState, bool)]) -> Snapshot {
        let devices = modes
            .iter()
            .enumerate()
            .map(|(i, &mode)| DeviceSnapshot { name: format!("mlx5_{i}"), mode, counters: DeviceCounters::default() })
            .collect();
        let rails = states
            .iter()
            .enumerate()
            .map(|(i, &(state, available))| RailSnapshot {
                id: RailId { device: i as u32, port: 1 },
                name: format!("mlx5_{i}/1"),
                state,
                reason: PauseReason::None,
                since: Millis(0),
                last_port_state: None,
                carrier: None,
                generation: 1,
                available,
                rate: Some(LinkRate::gbps(400)),
                recovered_by: None,
                address: None,
                identity: None,
                breaker_until: None,
                gid_index: None,
                counters: None,
                evidence: Default::default(),
            })
            .collect();
        Snapshot { t: Millis(0), rails, devices, wakeups: 0, ticks: 0, notifications_dropped: 0 }
    }

    /// The status line counts the attached rails, and says the host's
    /// condition first when no device is usable.
    #[test]
    fn the_status_line_says_when_every_device_is_gone() {
        let gone = DeviceMode::Gone { next_reopen: Millis(1000), backoff_ms: 1000 };
        let up = [(RailState::Active, true), (RailState::Paused, false)];
        assert_eq!(availability(&snapshot(&[DeviceMode::Events, gone], &up)), "1/2 rails available");
        let out = [(RailState::Inert, false), (RailState::Inert, false)];
        assert_eq!(
            availability(&snapshot(&[DeviceMode::Removed, gone], &out)),
            "every RDMA device gone (1 of 2 listed, none open); 0/0 rails available"
        );
        // None at all yet: watch waits for one (issue 23).
        assert_eq!(availability(&snapshot(&[], &[])), "0 rails, waiting for devices");
    }
}
