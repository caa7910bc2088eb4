//! Starting `watch`: what can fail on bad input is set up first (the
//! metrics outputs, the devices asked for), then the devices are opened,
//! the monitor made and the recording started, and the host's devices
//! followed as they appear and leave.

use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use railwatch_runtime::lines::Names;
use railwatch_runtime::{BandwidthSelector, Monitor, SystemClock};
use railwatch_verbs_backend::VerbsDevice;

use super::outputs::{self, MetricsOut, Outputs, StateOut};
use super::print::{self, Printer};
use super::signals::Signals;
use super::source::{Chosen, RESCAN_EVERY};
use super::{VerbsMonitor, Watch};
use crate::WatchArgs;
use crate::config::{DeviceFilter, Settings};
use crate::devices::{self, NO_DEVICES};
use crate::output::write_failed;

/// The devices to watch now: those present, with a name a device may have,
/// that `filter` chooses. Bad
/// input (exit 2) when `--device` names none present, or the filter
/// leaves none of those present.
fn choose(args: &WatchArgs, filter: &DeviceFilter) -> Result<Vec<String>, ExitCode> {
    let mut present = devices::list()?;
    // The machine ignores such a name in every later device list (it
    // would be attached, then at once taken for gone), and a scenario
    // could not name it: it is not watched from the start.
    present.retain(|name| match railwatch_core::device_name_problem(name) {
        Some(problem) => {
            log::warn!("not watching the device {}: {problem}", railwatch_core::shown_name(name));
            false
        }
        None => true,
    });
    if let Some(wanted) = &args.device {
        if !present.contains(wanted) {
            let found =
                if present.is_empty() { NO_DEVICES.to_string() } else { format!("found: {}", present.join(", ")) };
            eprintln!("railwatch: no RDMA device called {} ({found})", railwatch_core::shown_name(wanted));
            return Err(ExitCode::from(2));
        }
    }
    let chosen: Vec<String> = present.iter().filter(|n| filter.watches(n)).cloned().collect();
    if chosen.is_empty() && !present.is_empty() {
        let include = filter.include.as_ref().map_or_else(|| "every device".to_string(), |i| i.join(", "));
        let exclude = if filter.exclude.is_empty() { "none".to_string() } else { filter.exclude.join(", ") };
        eprintln!(
            "railwatch: none of the devices found ({}) is watched (include: {include}; exclude: {exclude})",
            present.join(", ")
        );
        return Err(ExitCode::from(2));
    }
    if let Some(include) = &filter.include {
        let absent: Vec<&str> = include.iter().filter(|n| !present.contains(n)).map(String::as_str).collect();
        if !absent.is_empty() {
            log::warn!("included but not present (yet): {}", absent.join(", "));
        }
    }
    Ok(chosen)
}

/// Opens `names`; each that cannot be opened is said on stderr (and makes
/// the exit status 1: `true` with the ones opened). None opened is the
/// end (exit 1).
fn open(names: &[String]) -> Result<(Vec<VerbsDevice>, bool), ExitCode> {
    let mut failures = Vec::new();
    let opened = devices::open_all(names, &mut failures);
    for f in &failures {
        eprintln!("{}", f.human());
    }
    if opened.is_empty() {
        eprintln!("railwatch: no device could be opened; nothing to watch");
        return Err(ExitCode::from(1));
    }
    Ok((opened, !failures.is_empty()))
}

impl Watch {
    /// Starts watching; an exit status instead when there is nothing to
    /// watch or it cannot start (said on stderr).
    pub(super) fn start(args: WatchArgs, mut settings: Settings) -> Result<Watch, ExitCode> {
        // The jitter's seed drawn once, here: an input log records the one
        // the machine runs with.
        settings.config.machine = settings.config.machine_seeded();
        // Metrics first: an address that cannot be bound or a file that
        // cannot be written is bad input, said before any device is opened.
        let state = StateOut::start(&settings)?;
        let metrics = MetricsOut::start(&settings, state.as_ref())?;
        let names = choose(&args, &settings.devices)?;
        let mut printer = Printer::new(args.json);
        if names.is_empty() && args.exit_without_devices {
            if let Some(path) = &args.rec.record {
                eprintln!("railwatch: nothing recorded to {}: there is no device to watch", path.display());
            }
            return Err(printer.nothing_to_watch().map_or_else(|e| write_failed(&e), |()| ExitCode::SUCCESS));
        }
        // None yet: watch for one to appear (a driver loaded after the
        // agent), ready meanwhile.
        let (opened, failed) = if names.is_empty() {
            log::warn!("{NO_DEVICES}: waiting for one to appear");
            (Vec::new(), false)
        } else {
            open(&names)?
        };
        let running = settings.clone();
        let mut monitor = new_monitor(settings)?;
        let watched = print::described(&opened);
        // With metrics, every event must be counted: nothing may be dropped
        // (the loop empties the receiver after every turn).
        let notes = if metrics.is_some() { monitor.subscribe_unbounded() } else { monitor.subscribe() };
        let recording = outputs::start_recording(&args.rec, &running.config)?;
        if let Some(r) = &recording {
            monitor.set_observer(r.observer());
        }
        for dev in opened {
            monitor.add_device(dev);
        }
        // A device attached from now on appeared after the start.
        if let Some(r) = &recording {
            r.started();
        }
        // Devices that appear later are attached, those that leave closed
        // at once (a Soft-RoCE removal waits for our handle) and their rails
        // made inert.
        let filter = Arc::new(Mutex::new(running.devices.clone()));
        if let Err(e) = monitor.watch_devices(Box::new(Chosen::host(filter.clone())), RESCAN_EVERY) {
            eprintln!("railwatch: cannot watch for devices appearing and leaving: {e}");
            return Err(ExitCode::from(1));
        }
        let waker = monitor.waker().map_err(|e| log::warn!("no waker for the monitor's wait ({e})")).ok();
        let signals = Signals::install(waker);
        // A rail's transition reaches the state API's readers as soon as
        // the machine made it, before the reads that follow it (the turn's
        // end publishes again). After the devices' attach: the first
        // publish names the devices `warm` waits for.
        if let Some(state) = &state {
            let published = Arc::clone(&state.published);
            monitor.on_transition(Box::new(move |snapshot| published.update(snapshot)));
        }
        let outputs = Outputs::new(printer, metrics, state, recording);
        let mut watch = Watch {
            names: Names::of(&monitor),
            deadline: args.for_ms.map(|ms| Instant::now() + Duration::from_millis(ms)),
            args,
            running,
            monitor,
            notes,
            filter,
            signals,
            outputs,
            failed,
        };
        let (tick_ms, for_ms) = (watch.running.config.machine.tick_ms, watch.args.for_ms);
        watch.outputs.printer.header(&watched, tick_ms, for_ms);
        Ok(watch)
    }
}

/// The monitor over `settings`' config (the one place `watch` makes one).
fn new_monitor(settings: Settings) -> Result<VerbsMonitor, ExitCode> {
    Monitor::new(settings.config, Arc::new(BandwidthSelector::new()), SystemClock::new()).map_err(|e| {
        eprintln!("railwatch: cannot create the monitor's poll set: {e}");
        ExitCode::from(1)
    })
}
