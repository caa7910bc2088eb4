//! `railwatch status` and `railwatch watch`: real devices through
//! railwatch-verbs-backend (feature `verbs`).
//!
//! Exit codes: 0 success (also when there is no RDMA device at all: "no RDMA
//! devices found"), 1 a device, a port or the monitor failed (said on stderr,
//! naming the device and the call), 2 bad input (`--device` names no device,
//! or `include`/`exclude` leave none of the devices present) or output that
//! cannot be written. The JSON lines are documented in
//! docs/JSON-verbs.md.

use std::io::{self, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use railwatch_core::{Happening, LinkAttrs, LinkRate, PortAddress, PortState, VerbsPort, speed_by_code, width_by_code};
use railwatch_runtime::json::AddressJson;
use railwatch_runtime::lines::Record;
use railwatch_runtime::lines::{Line, Names};
use railwatch_runtime::{BandwidthSelector, Clock, DeviceSource, Monitor, Snapshot, SystemClock};
use railwatch_verbs_backend::{HostDevices, VerbsDevice, VerbsError, errno_of, list_devices};
use serde_json::{Value, json};

use crate::config::{self, DeviceFilter, Settings};
use crate::metrics::{Metrics, Server, TextfileWriter};
use crate::output::{self, Style};
use crate::sdnotify::{Notifier, rails_status};
use crate::{StatusArgs, WatchArgs, use_color};
use railwatch_cli::record::Recording;

/// What `status` and `watch` say when the host has no RDMA device (or no
/// RDMA support in its kernel).
const NO_DEVICES: &str = "no RDMA devices found";

/// A failure worth a line: which device (and port), which call, which errno.
#[derive(Debug)]
struct Failure {
    device: String,
    port: Option<u8>,
    call: Option<&'static str>,
    errno: Option<i32>,
    message: String,
}

impl Failure {
    fn of_verbs(device: &str, port: Option<u8>, err: &VerbsError) -> Failure {
        Failure {
            device: device.to_owned(),
            port,
            call: err.failed_call(),
            errno: err.errno(),
            message: err.to_string(),
        }
    }

    /// A failed port query: the backend's `io::Error` wraps a `VerbsError`
    /// naming the call.
    fn of_io(device: &str, port: u8, err: &io::Error) -> Failure {
        if let Some(verbs) = err.get_ref().and_then(|e| e.downcast_ref::<VerbsError>()) {
            return Failure::of_verbs(device, Some(port), verbs);
        }
        Failure {
            device: device.to_owned(),
            port: Some(port),
            call: None,
            errno: errno_of(err),
            message: format!("{device}: {err}"),
        }
    }

    fn json(&self) -> Value {
        let mut v = json!({"kind": "error", "device": self.device});
        if let Some(port) = self.port {
            v["port"] = json!(port);
        }
        v["call"] = json!(self.call);
        v["errno"] = json!(self.errno);
        v["message"] = json!(self.message);
        v
    }

    fn human(&self) -> String {
        match self.port {
            Some(port) => format!("railwatch: port {port}: {}", self.message),
            None => format!("railwatch: {}", self.message),
        }
    }
}

/// Lists the devices; a listing failure (not ENOSYS, which is no devices)
/// is said on stderr.
fn devices() -> Result<Vec<String>, ExitCode> {
    list_devices().map_err(|e| {
        eprintln!("railwatch: cannot list RDMA devices: {e}");
        ExitCode::from(1)
    })
}

/// How often the device list is re-read where uevents cannot be had.
const RESCAN_EVERY: Duration = Duration::from_secs(5);

/// Opens `names`, reporting each device that cannot be opened.
fn open_all(names: &[String], failures: &mut Vec<Failure>) -> Vec<VerbsDevice> {
    let mut opened = Vec::new();
    for name in names {
        match VerbsDevice::open(name) {
            Ok(dev) => opened.push(dev),
            Err(e) => failures.push(Failure::of_verbs(name, None, &e)),
        }
    }
    opened
}

/// Reports a write error: a closed pipe (`| head`) ends quietly with 0,
/// anything else is exit 2.
fn write_failed(e: &io::Error) -> ExitCode {
    if e.kind() == io::ErrorKind::BrokenPipe {
        return ExitCode::SUCCESS;
    }
    eprintln!("railwatch: writing output failed: {e}");
    ExitCode::from(2)
}

// ---- status ----------------------------------------------------------------

/// One port as `status` shows it.
struct Row {
    rail: String,
    device: String,
    port: u8,
    state: PortState,
    link: LinkAttrs,
    /// `None` when it could not be read (said as a failure).
    address: Option<PortAddress>,
}

impl Row {
    fn rate(&self) -> LinkRate {
        self.link.rate()
    }

    fn speed_name(&self) -> Option<&'static str> {
        speed_by_code(self.link.speed_code()).map(|s| s.name)
    }

    fn width_name(&self) -> Option<&'static str> {
        width_by_code(self.link.active_width).map(|w| w.name)
    }

    fn json(&self) -> Value {
        json!({
            "kind": "rail",
            "rail": self.rail,
            "device": self.device,
            "port": self.port,
            "port_state": self.state.name(),
            "port_state_code": self.state.code(),
            "bandwidth_gbps": self.rate().as_gbps(),
            "speed": self.speed_name(),
            "speed_code": self.link.speed_code(),
            "width": self.width_name(),
            "width_code": self.link.active_width,
            "effective_gbps": self.link.effective_100mbps.filter(|&s| s != 0).map(|s| s as f64 / 10.0),
            "address": self.address.as_ref().map(AddressJson::of),
        })
    }

    fn human(&self) -> String {
        let state = match self.state {
            PortState::Unknown(_) => self.state.to_string(),
            known => known.ibv_str().to_string(),
        };
        let rate = self.rate().as_gbps().map_or_else(|| "unknown".to_string(), |g| g.to_string());
        let speed = self.speed_name().map_or_else(|| format!("?({})", self.link.speed_code()), str::to_string);
        let width = self.width_name().map_or_else(|| format!("?({})", self.link.active_width), str::to_string);
        let mut line = format!("{:<16} {:<14} {:>9} {:<7} {}", self.rail, state, rate, speed, width);
        if let Some(a) = &self.address {
            let layer = a.link_layer.map_or("?", |l| l.name());
            let netdev = a.netdev.as_deref().map(|n| format!(" on {n}")).unwrap_or_default();
            let gids: Vec<String> = a.gids.iter().map(|g| format!("[{}] {g} ({})", g.index, g.kind.name())).collect();
            line.push_str(&format!("  {layer}{netdev}, lid {}, gids {}", a.lid, gids.join(", ")));
        }
        line
    }
}

/// Reads every port of an opened device.
fn rows_of(dev: &mut VerbsDevice, failures: &mut Vec<Failure>) -> Vec<Row> {
    let name = dev.name().to_owned();
    let mut rows = Vec::new();
    for port in dev.ports() {
        let read = dev.port_state(port).and_then(|state| Ok((state, dev.link(port)?)));
        match read {
            Ok((state, link)) => {
                let address = dev.address(port).map_err(|e| failures.push(Failure::of_io(&name, port, &e))).ok();
                rows.push(Row { rail: format!("{name}/{port}"), device: name.clone(), port, state, link, address });
            }
            Err(e) => failures.push(Failure::of_io(&name, port, &e)),
        }
    }
    rows
}

/// `railwatch status`: one row per rail of every device.
pub fn status(args: StatusArgs) -> ExitCode {
    let names = match devices() {
        Ok(n) => n,
        Err(code) => return code,
    };
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let mut failures = Vec::new();
    let mut rows = Vec::new();
    for mut dev in open_all(&names, &mut failures) {
        rows.extend(rows_of(&mut dev, &mut failures));
    }
    let written = if args.json {
        write_status_json(&mut out, &names, &rows, &failures)
    } else {
        write_status_human(&mut out, &names, &rows)
    };
    if let Err(e) = written.and_then(|()| out.flush()) {
        return write_failed(&e);
    }
    if names.is_empty() && args.json {
        // stdout stays pure JSON; say it to the person too.
        eprintln!("railwatch: {NO_DEVICES}");
    }
    for f in &failures {
        eprintln!("{}", f.human());
    }
    if failures.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

fn write_status_json(out: &mut impl Write, names: &[String], rows: &[Row], failures: &[Failure]) -> io::Result<()> {
    for row in rows {
        writeln!(out, "{}", row.json())?;
    }
    for f in failures {
        writeln!(out, "{}", f.json())?;
    }
    let status = json!({"kind": "status", "devices": names, "rails": rows.len(), "errors": failures.len()});
    writeln!(out, "{status}")
}

fn write_status_human(out: &mut impl Write, names: &[String], rows: &[Row]) -> io::Result<()> {
    if names.is_empty() {
        return writeln!(out, "{NO_DEVICES}");
    }
    if rows.is_empty() {
        return Ok(());
    }
    writeln!(out, "{:<16} {:<14} {:>9} {:<7} WIDTH", "RAIL", "PORT STATE", "GB/S", "SPEED")?;
    for row in rows {
        writeln!(out, "{}", row.human())?;
    }
    Ok(())
}

// ---- watch -----------------------------------------------------------------

/// The first flag is set by SIGINT/SIGTERM: finish the current wait, print
/// the summary, exit. A second SIGINT while it is set exits at once (130).
/// The second is set by SIGHUP: re-read the settings (docs/CONFIG.md,
/// "Reloading"). Each of these signals also wakes the monitor's wait
/// (`waker`, from a thread of signal-hook's): the signal itself may land on
/// another thread (the metrics ones) or just before the wait begins, and a
/// healthy host's wait has no timeout.
fn signal_flags(waker: Option<mio::Waker>) -> (Arc<AtomicBool>, Arc<AtomicBool>) {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let stop = Arc::new(AtomicBool::new(false));
    let registered = signal_hook::flag::register_conditional_shutdown(SIGINT, 130, stop.clone())
        .and_then(|_| signal_hook::flag::register(SIGINT, stop.clone()))
        .and_then(|_| signal_hook::flag::register(SIGTERM, stop.clone()));
    if let Err(e) = registered {
        log::warn!("cannot install the Ctrl-C handler ({e}); Ctrl-C will end railwatch without a summary");
    }
    let reload = Arc::new(AtomicBool::new(false));
    if let Err(e) = signal_hook::flag::register(SIGHUP, reload.clone()) {
        log::warn!("cannot install the SIGHUP handler ({e}); SIGHUP will end railwatch instead of reloading");
    }
    // Registered after the flags: by the time the wake comes, they are set.
    let woken = waker.ok_or_else(|| io::Error::other("no waker")).and_then(|waker| {
        let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])?;
        std::thread::Builder::new().name("railwatch-signals".into()).spawn(move || {
            for _ in signals.forever() {
                let _ = waker.wake();
            }
        })
    });
    if let Err(e) = woken {
        log::warn!("signals will be noticed at the next wake-up only ({e})");
    }
    (stop, reload)
}

/// `available/total rails available`, counting the rails of the devices
/// attached now (not the inert rails of devices that left).
fn availability(snapshot: &Snapshot) -> String {
    let attached = snapshot.rails.iter().filter(|r| r.state.name() != "inert");
    let (mut available, mut total) = (0, 0);
    for r in attached {
        total += 1;
        available += usize::from(r.available);
    }
    rails_status(available, total)
}

/// SIGHUP: re-reads the settings with the same code as at start (the file,
/// then the flags over it). A bad file is refused with the error logged;
/// `None` then, and the running settings stay. Otherwise the new settings
/// and the changed keys that can be applied now; the changed keys that
/// cannot are logged as needing a restart.
fn reread(args: &WatchArgs, running: &Settings, metrics_on: bool) -> Option<(Settings, Vec<&'static str>)> {
    let file = args.config.as_ref().map_or_else(|| "the flags (no --config)".to_owned(), |p| p.display().to_string());
    let new = match config::resolve(args) {
        Ok(s) => s,
        Err(e) => {
            log::error!("reload refused, the running settings are kept: {e}");
            return None;
        }
    };
    // As at start: settings that would watch none of the devices present
    // are refused.
    if let Ok(present) = list_devices() {
        if !present.is_empty() && !present.iter().any(|n| new.devices.watches(n)) {
            log::error!(
                "reload refused, the running settings are kept: {file}: include/exclude would watch none of the devices present ({})",
                present.join(", ")
            );
            return None;
        }
    }
    let changed = config::changed_keys(running, &new);
    let (mut now, mut later): (Vec<&'static str>, Vec<&'static str>) =
        changed.into_iter().partition(|k| config::RELOADABLE.contains(k));
    if !metrics_on && now.contains(&"metrics.textfile") {
        // No registry was made at start: one cannot be added now.
        now.retain(|k| *k != "metrics.textfile");
        later.push("metrics.textfile");
    }
    if !later.is_empty() {
        log::warn!(
            "reload of {file}: changed, but needing a restart to take effect (still running with the old values): {}",
            later.join(", ")
        );
    }
    Some((new, now))
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The host's devices as the monitor follows them, restricted to those the
/// settings' `include` and `exclude` choose.
struct Chosen<S> {
    inner: S,
    /// Shared with the watch loop, which replaces it on reload.
    filter: Arc<Mutex<DeviceFilter>>,
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

/// A metrics text file no longer written (moved or turned off by a
/// reload) is removed: node_exporter would go on exporting its last values
/// beside the new file's. Only a regular file, and not the new path.
fn forget_textfile(old: Option<&std::path::Path>, new: Option<&std::path::Path>) {
    let Some(old) = old else { return };
    if new.is_some_and(|new| railwatch_cli::outfile::same_file(old, new)) {
        return;
    }
    if std::fs::symlink_metadata(old).is_ok_and(|m| m.is_file()) {
        match std::fs::remove_file(old) {
            Ok(()) => log::info!("removed the metrics text file no longer written, {}", old.display()),
            Err(e) => log::warn!("cannot remove the metrics text file no longer written, {}: {e}", old.display()),
        }
    }
}

/// `railwatch watch`: runs the monitor over the real devices on this thread
/// and prints what happens, then a summary. `settings` are already checked.
pub fn watch(args: WatchArgs, settings: Settings) -> ExitCode {
    // Metrics first: an address that cannot be bound or a file that cannot
    // be written is bad input, said before any device is opened.
    let mut metrics = (settings.metrics.listen.is_some() || settings.metrics.textfile.is_some())
        .then(|| Metrics::new(env!("CARGO_PKG_VERSION")));
    let mut _server = None;
    let mut textfile = None;
    if let Some(m) = &metrics {
        if let Some(addr) = settings.metrics.listen {
            match Server::start(addr, m.exporter()) {
                Ok(server) => _server = Some(server),
                Err(e) => {
                    eprintln!("railwatch: {e}");
                    return ExitCode::from(2);
                }
            }
        }
        if let Some(path) = &settings.metrics.textfile {
            match TextfileWriter::start(path.clone(), m.exporter()) {
                Ok(writer) => textfile = Some(writer),
                Err(e) => {
                    eprintln!("railwatch: cannot write the metrics text file {}: {e}", path.display());
                    return ExitCode::from(2);
                }
            }
        }
    }
    let mut names = match devices() {
        Ok(n) => n,
        Err(code) => return code,
    };
    if let Some(wanted) = &args.device {
        if !names.contains(wanted) {
            let found = if names.is_empty() { NO_DEVICES.to_string() } else { format!("found: {}", names.join(", ")) };
            eprintln!("railwatch: no RDMA device called {wanted:?} ({found})");
            return ExitCode::from(2);
        }
    }
    let filter = settings.devices.clone();
    let present = names.clone();
    names.retain(|n| filter.watches(n));
    if names.is_empty() && !present.is_empty() {
        let include = filter.include.as_ref().map_or_else(|| "every device".to_string(), |i| i.join(", "));
        let exclude = if filter.exclude.is_empty() { "none".to_string() } else { filter.exclude.join(", ") };
        eprintln!(
            "railwatch: none of the devices found ({}) is watched (include: {include}; exclude: {exclude})",
            present.join(", ")
        );
        return ExitCode::from(2);
    }
    if let Some(include) = &filter.include {
        let absent: Vec<&str> = include.iter().filter(|n| !present.contains(n)).map(String::as_str).collect();
        if !absent.is_empty() {
            log::warn!("included but not present (yet): {}", absent.join(", "));
        }
    }
    let style = if args.json { Style::Json } else { Style::Human { color: use_color() } };
    if names.is_empty() {
        if let Some(path) = &args.rec.record {
            eprintln!("railwatch: nothing recorded to {}: there is no device to watch", path.display());
        }
        let printed = match style {
            Style::Human { .. } => writeln!(io::stdout(), "{NO_DEVICES}"),
            Style::Json => {
                eprintln!("railwatch: {NO_DEVICES}");
                output::write_json(&mut io::stdout(), &Line::watch_summary(&empty_snapshot()))
            }
        };
        return printed.map_or_else(|e| write_failed(&e), |()| ExitCode::SUCCESS);
    }

    let mut failures = Vec::new();
    let opened = open_all(&names, &mut failures);
    for f in &failures {
        eprintln!("{}", f.human());
    }
    if opened.is_empty() {
        eprintln!("railwatch: no device could be opened; nothing to watch");
        return ExitCode::from(1);
    }
    let tick_ms = settings.config.tick_ms;
    // What runs now; a reload changes only what it can apply.
    let mut running = settings.clone();
    let mut monitor = match Monitor::new(settings.config, Arc::new(BandwidthSelector::new()), SystemClock::new()) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("railwatch: cannot create the monitor's poll set: {e}");
            return ExitCode::from(1);
        }
    };
    let header: Vec<String> =
        opened.iter().map(|d| format!("{} ({})", d.name(), plural(d.ports().len(), "port", "ports"))).collect();
    let device_names: Vec<String> = opened.iter().map(|d| d.name().to_owned()).collect();
    // With metrics, every event must be counted: nothing may be dropped
    // (the loop empties the receiver after every wake-up).
    let rx = if metrics.is_some() { monitor.subscribe_unbounded() } else { monitor.subscribe() };
    let mut recording = match &args.rec.record {
        None => None,
        Some(path) => match railwatch_cli::record::keep_previous(path).and_then(|kept| {
            if let Some(old) = kept {
                log::warn!("the previous recording in {} is kept as {}", path.display(), old.display());
            }
            Recording::create(
                path,
                &running.config,
                args.rec.record_anonymize,
                "railwatch watch --record",
                railwatch_cli::record::host_description(args.rec.record_anonymize),
            )
        }) {
            Ok(r) => {
                monitor.set_observer(r.observer());
                Some(r)
            }
            Err(e) => {
                eprintln!("railwatch: cannot write the recording {}: {e}", path.display());
                return ExitCode::from(2);
            }
        },
    };
    for dev in opened {
        monitor.add_device(dev);
    }
    // Devices that appear later are attached, those that leave closed at
    // once (a Soft-RoCE removal waits for our handle) and their rails made
    // inert.
    let (source, no_uevents) = HostDevices::new(None);
    let filter = Arc::new(Mutex::new(filter));
    let source = Chosen { inner: source, filter: filter.clone() };
    if let Some(e) = no_uevents {
        log::warn!("no device uevents ({e}); re-reading the device list every {RESCAN_EVERY:?}");
    }
    if let Err(e) = monitor.watch_devices(Box::new(source), RESCAN_EVERY) {
        eprintln!("railwatch: cannot watch for devices appearing and leaving: {e}");
        return ExitCode::from(1);
    }
    let mut table = Names::new(device_names, monitor.rails());
    let waker = monitor.waker().map_err(|e| log::warn!("no waker for the monitor's wait ({e})")).ok();
    let (stop, reload) = signal_flags(waker);
    let mut notifier = Notifier::from_env();
    let mut ready = false;

    let mut out = io::stdout().lock();
    let mut print = |table: &Names, note: &railwatch_runtime::Notification, address: Option<&PortAddress>| {
        let record = Record::Note(note);
        match style {
            // An address line carries the new address.
            Style::Json => Line::of(table, &record)
                .map_or(Ok(()), |line| output::write_json(&mut out, &line.with_address(address))),
            Style::Human { color } => match output::human_record(table, &record, color) {
                Some(line) => match address {
                    Some(a) => {
                        let gids: Vec<String> =
                            a.gids.iter().map(|g| format!("[{}] {g} {}", g.index, g.kind.name())).collect();
                        writeln!(out, "{line}: {}", gids.join(", "))
                    }
                    None => writeln!(out, "{line}"),
                },
                None => Ok(()),
            },
        }
    };
    if let Style::Human { .. } = style {
        let until = args.for_ms.map_or_else(|| "until Ctrl-C".to_string(), |ms| format!("for {ms} ms"));
        println!("watching {}; recovery tick {tick_ms} ms; {until}", header.join(", "));
    }

    let deadline = args.for_ms.map(|ms| Instant::now() + Duration::from_millis(ms));
    let mut result = ExitCode::SUCCESS;
    loop {
        // A device appeared: name its rails too.
        if monitor.machine().rails().len() != table.rails_len() {
            let devices = (0..).map_while(|d| monitor.device_name(d)).map(String::from).collect();
            table = Names::new(devices, monitor.rails());
        }
        // The attach already produced notifications: print them first.
        let notes: Vec<_> = rx.try_iter().collect();
        let snapshot = (metrics.is_some() || notifier.active()).then(|| monitor.snapshot());
        if let Some(m) = &mut metrics {
            // One batch: a scrape sees all of it or none of it.
            m.batch(|m| {
                for note in &notes {
                    m.note(&table, note);
                }
                if let Some(snapshot) = &snapshot {
                    m.update(snapshot);
                }
            });
        }
        let printed: io::Result<()> = notes.iter().try_for_each(|note| {
            let address = match note.what {
                Happening::AddressChanged { rail, .. } => monitor.address(rail),
                _ => None,
            };
            print(&table, note, address)
        });
        if let Err(e) = printed {
            // The reader went away: stop watching.
            notifier.send("STOPPING=1");
            return write_failed(&e);
        }
        if let Some(snapshot) = &snapshot {
            // Every device attached and its first notifications out.
            if !ready {
                notifier.ready();
                ready = true;
            }
            notifier.status(availability(snapshot));
        }
        notifier.tick();
        let remaining = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if stop.load(Ordering::Acquire) || remaining == Some(Duration::ZERO) {
            break;
        }
        if reload.swap(false, Ordering::AcqRel) {
            notifier.send("RELOADING=1");
            if let Some((new, apply)) = reread(&args, &running, metrics.is_some()) {
                let mut applied = Vec::new();
                if apply.contains(&"include") || apply.contains(&"exclude") {
                    *filter.lock().unwrap_or_else(PoisonError::into_inner) = new.devices.clone();
                    running.devices = new.devices.clone();
                    // Newly excluded devices are removed now, newly
                    // included ones attached now (or when they appear).
                    let found = monitor.rescan();
                    if let Some(m) = &mut metrics {
                        // What the operator took out leaves the metrics
                        // (not a rail down); what comes back returns.
                        let rails = monitor.rails();
                        for name in &found.removed {
                            let of_it: Vec<_> =
                                rails.iter().map(|(id, _)| *id).filter(|id| table.device(id.device) == name).collect();
                            m.unwatch(name, &of_it);
                        }
                        m.rewatch(|name| new.devices.watches(name));
                    }
                    let mut what = format!(
                        "include = {}, exclude = [{}]",
                        new.devices
                            .include
                            .as_ref()
                            .map_or_else(|| "every device".to_owned(), |i| format!("[{}]", i.join(", "))),
                        new.devices.exclude.join(", ")
                    );
                    if !found.removed.is_empty() {
                        what.push_str(&format!(" (no longer watched: {})", found.removed.join(", ")));
                    }
                    if !found.added.is_empty() {
                        what.push_str(&format!(" (attached: {})", found.added.join(", ")));
                    }
                    applied.push(what);
                }
                if apply.contains(&"metrics.textfile") {
                    if let Some(m) = &metrics {
                        let still =
                            || running.metrics.textfile.as_ref().map_or("none".into(), |p| p.display().to_string());
                        match (&new.metrics.textfile, crate::config::distinct_files(&args, &new)) {
                            (Some(_), Err(e)) => log::error!("reload: {e}; still writing {}", still()),
                            (Some(path), Ok(())) => match TextfileWriter::start(path.clone(), m.exporter()) {
                                Ok(writer) => {
                                    // The old writer stops (its last write) before its file goes.
                                    textfile = Some(writer);
                                    let old = running.metrics.textfile.replace(path.clone());
                                    forget_textfile(old.as_deref(), Some(path));
                                    applied.push(format!("metrics.textfile = {}", path.display()));
                                }
                                Err(e) => log::error!(
                                    "reload: cannot write the metrics text file {} ({e}); still writing {}",
                                    path.display(),
                                    still()
                                ),
                            },
                            (None, _) => {
                                textfile = None;
                                forget_textfile(running.metrics.textfile.take().as_deref(), None);
                                applied.push("metrics.textfile = none".to_owned());
                            }
                        }
                    }
                }
                if applied.is_empty() {
                    log::info!("reloaded the settings: nothing to apply");
                } else {
                    log::info!("reloaded the settings: applied {}", applied.join("; "));
                }
            }
            notifier.send("READY=1");
            // Attaching may have changed the rails: loop round to print it.
            continue;
        }
        if let Some(r) = &recording {
            if let Err(e) = r.flush(monitor.clock().now()) {
                // Watching matters more than the recording: go on without
                // it, and say so in the exit status.
                log::error!("writing the recording failed ({e}); recording stopped, watching goes on");
                recording = None;
                result = ExitCode::from(1);
            }
        }
        // A recording is written at least once a second.
        let flush_due = recording.as_ref().map(|_| Duration::from_secs(1));
        let wait = [remaining, notifier.next_due(), flush_due].into_iter().flatten().min();
        if let Err(e) = monitor.poll_once(wait) {
            eprintln!("railwatch: the monitor stopped: waiting on its poll set failed: {e}");
            result = ExitCode::from(1);
            break;
        }
    }

    notifier.send("STOPPING=1");
    let snapshot = monitor.snapshot();
    if let Some(r) = &recording {
        if let Err(e) = r.finish(monitor.clock().now(), &snapshot) {
            eprintln!("railwatch: writing the recording failed: {e}");
            result = ExitCode::from(1);
        }
    }
    if let Some(m) = &mut metrics {
        m.batch(|m| m.update(&snapshot));
    }
    // The text file's last write, with the final values.
    drop(textfile);
    let printed = match style {
        Style::Json => output::write_json(&mut io::stdout(), &Line::watch_summary(&snapshot)),
        Style::Human { color } => human_summary(&mut io::stdout(), &snapshot, color),
    };
    if let Err(e) = printed {
        return write_failed(&e);
    }
    if !failures.is_empty() {
        result = ExitCode::from(1);
    }
    result
}

fn empty_snapshot() -> Snapshot {
    Snapshot {
        t: railwatch_core::Millis(0),
        rails: Vec::new(),
        devices: Vec::new(),
        wakeups: 0,
        ticks: 0,
        notifications_dropped: 0,
    }
}

/// Events read from every device; the backend acknowledges each one it
/// returns, so this is also the number acknowledged.
fn events_read(snapshot: &Snapshot) -> u64 {
    snapshot.devices.iter().map(|d| d.counters.events).sum()
}

fn human_summary(out: &mut impl Write, snapshot: &Snapshot, color: bool) -> io::Result<()> {
    let paint = |code: &str, text: String| if color { format!("\x1b[{code}m{text}\x1b[0m") } else { text };
    writeln!(out)?;
    writeln!(out, "RAIL             STATE    AVAILABLE        GB/S GENERATION  RECOVERED BY")?;
    for r in &snapshot.rails {
        let state = format!("{:<8}", r.state.name());
        let state = match r.state.name() {
            "active" => paint("32", state),
            "paused" => paint("33", state),
            _ => paint("31", state),
        };
        writeln!(
            out,
            "{:<16} {} {:<10} {:>10} {:>10}  {}",
            r.name,
            state,
            if r.available { "yes" } else { "no" },
            r.rate.and_then(|r| r.as_gbps()).map_or("-".into(), |g| g.to_string()),
            r.generation,
            r.recovered_by.map_or("-", |b| b.name()),
        )?;
    }
    let read = events_read(snapshot);
    writeln!(out, "\nevents read {read}, acked {read}; {} tick(s)", snapshot.ticks)?;
    for d in &snapshot.devices {
        let c = &d.counters;
        writeln!(
            out,
            "{}: {} mode, {} event(s) ({} COMM_EST, {} unhandled), {} read error(s), {} re-open(s)",
            d.name,
            d.mode.name(),
            c.events,
            c.comm_est,
            c.unhandled,
            c.read_errors,
            c.reopens
        )?;
    }
    Ok(())
}
