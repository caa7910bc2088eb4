//! `cargo xtask scale [events|rails]`: the CLI under large scenarios, timed,
//! with the process's peak resident memory.
//!
//! - `events`: 1,000,000 queued COMM_EST across 64 devices, with a flap
//!   hidden behind one device's burst (`simulate --json`).
//! - `rails`: the largest scenario the limits allow (4,096 devices × 16
//!   ports, 65,536 rails, some of them flapping), run by `simulate --html`
//!   and, from its input log, by `replay --html`; each against the target of
//!   30 s (issue 31).

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::run::{cargo, step};

const DEVICES: u64 = 64;
const EVENTS: u64 = 1_000_000;

/// The scenario text.
fn scenario() -> String {
    let mut s = String::new();
    let per_device = EVENTS / DEVICES;
    let _ = writeln!(s, "name = \"scale-1m-64\"\nduration_ms = 3000\n");
    for d in 0..DEVICES {
        let _ = writeln!(s, "[[device]]\nname = \"mlx5_{d}\"\nports = [{{ port = 1 }}]\n");
    }
    let _ = writeln!(
        s,
        "[[step]]\nat_ms = 100\ndevice = \"mlx5_7\"\nport_state = {{ port = 1, state = \"down\" }}\n\
         event = \"port_err\"\nport = 1\n"
    );
    for d in 0..DEVICES {
        let _ =
            writeln!(s, "[[step]]\nat_ms = 200\ndevice = \"mlx5_{d}\"\nevent = \"comm_est\"\nrepeat = {per_device}\n");
    }
    let _ = writeln!(
        s,
        "[[step]]\nat_ms = 200\ndevice = \"mlx5_7\"\nport_state = {{ port = 1, state = \"active\" }}\n\
         event = \"port_active\"\nport = 1\n"
    );
    let _ = writeln!(s, "[[expect]]\nat_ms = 200\nrail = \"mlx5_7/1\"\nstate = \"active\"\nrecovered_by = \"event\"\n");
    s
}

/// The largest scenario the limits allow (crates/scenario's `MAX_DEVICES`
/// and `MAX_RAILS`): 4,096 devices of 16 ports each, 65,536 rails.
const RAIL_DEVICES: u64 = 4096;
const RAIL_PORTS: u64 = 16;
/// One device in this many has a flapping port (256 rails flap).
const FLAP_EVERY: u64 = 16;
/// How often each of them flaps, one round every `ROUND_MS`.
const FLAPS: u64 = 4;
const ROUND_MS: u64 = 10_000;
/// The target for each run (issue 31).
const RAILS_TARGET_S: f64 = 30.0;

/// The largest scenario's text: every port active at the start; every
/// 16th device has one port flap `FLAPS` times (PORT_ERR, then PORT_ACTIVE
/// 500 ms later), the flaps of the different rails spread 37 ms apart so
/// that most of them fall on instants of their own, each step's effect
/// expected 100 ms after it (paused, then active again by the event).
pub fn largest() -> String {
    let mut s = String::new();
    // The last flap's steps and checks end 1,035 ms into the last round.
    let end = 2000 + FLAPS * ROUND_MS;
    let _ = writeln!(s, "name = \"scale-65536-rails\"\nduration_ms = {end}\n");
    for d in 0..RAIL_DEVICES {
        let _ = writeln!(s, "[[device]]\nname = \"mlx5_{d}\"\nports = [");
        for p in 1..=RAIL_PORTS {
            let _ = writeln!(s, "    {{ port = {p}, state = \"active\", speed = \"ndr\", width = \"4x\" }},");
        }
        let _ = writeln!(s, "]\n");
    }
    // (at_ms, device, port, down)
    let mut steps = Vec::new();
    for (i, d) in (0..RAIL_DEVICES).step_by(FLAP_EVERY as usize).enumerate() {
        let port = (d / FLAP_EVERY) % RAIL_PORTS + 1;
        for round in 0..FLAPS {
            let down = 1000 + round * ROUND_MS + i as u64 * 37;
            steps.push((down, d, port, true));
            steps.push((down + 500, d, port, false));
        }
    }
    steps.sort();
    for &(at, d, port, down) in &steps {
        let (state, event) = if down { ("down", "port_err") } else { ("active", "port_active") };
        let _ = writeln!(
            s,
            "[[step]]\nat_ms = {at}\ndevice = \"mlx5_{d}\"\nport_state = {{ port = {port}, state = \"{state}\" }}\n\
             event = \"{event}\"\nport = {port}\n"
        );
    }
    // Each flap checked 100 ms after each of its steps (instants of their own).
    for &(at, d, port, down) in &steps {
        let what = if down {
            "state = \"paused\"\nreason = \"port_err\""
        } else {
            "state = \"active\"\nrecovered_by = \"event\""
        };
        let _ = writeln!(s, "[[expect]]\nat_ms = {}\nrail = \"mlx5_{d}/{port}\"\n{what}\n", at + 100);
    }
    let _ =
        writeln!(s, "[[expect]]\nat_ms = {end}\nrail = \"mlx5_16/2\"\nstate = \"active\"\nrecovered_by = \"event\"\n");
    let _ = writeln!(s, "[[expect]]\nat_ms = {end}\nrail = \"mlx5_4095/16\"\nstate = \"active\"\navailable = true\n");
    s
}

/// Peak resident set (VmHWM) of a running process, in KiB.
fn peak_kib_of(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Builds the release binary, runs the measurements asked for (both when
/// none is named), prints time and memory.
pub fn run(args: &[String]) -> Result<(), String> {
    let (events, rails) = match args {
        [] => (true, true),
        [a] if a == "events" => (true, false),
        [a] if a == "rails" => (false, true),
        _ => return Err("usage: cargo xtask scale [events|rails]".into()),
    };
    step("build (release)", cargo().args(["build", "--release", "-p", "railwatch"]))?;
    let dir = crate::run::target_dir().join("scale");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let bin = crate::run::target_dir().join("release/railwatch");
    if events {
        let file = dir.join("scale-1m-64.toml");
        std::fs::write(&file, scenario()).map_err(|e| format!("{}: {e}", file.display()))?;
        measure_events(&bin, &file)?;
    }
    if rails {
        measure_rails(&bin, &dir)?;
    }
    Ok(())
}

/// A finished run of the binary.
struct Measured {
    status: std::process::ExitStatus,
    elapsed: Duration,
    peak_kib: u64,
    stdout: Vec<u8>,
}

/// Runs `bin args`, its stdout captured, timed, its peak memory sampled;
/// its stderr goes to `stderr` (the log of a large run is long), else here.
fn timed(bin: &Path, args: &[&str], stderr: Option<&Path>) -> Result<Measured, String> {
    eprintln!("==> scale: {} {}", bin.display(), args.join(" "));
    let err = match stderr {
        Some(file) => Stdio::from(std::fs::File::create(file).map_err(|e| format!("{}: {e}", file.display()))?),
        None => Stdio::inherit(),
    };
    let started = Instant::now();
    let mut child = Command::new(bin)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(err)
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    let pid = child.id();
    // Read stdout as it comes, or a full pipe would stop the child.
    let mut out = child.stdout.take().ok_or("no stdout")?;
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = std::io::Read::read_to_end(&mut out, &mut bytes);
        bytes
    });
    // VmHWM is a high-water mark: the last reading before exit is the peak.
    let mut peak_kib = 0;
    let status = loop {
        peak_kib = peak_kib.max(peak_kib_of(pid).unwrap_or(0));
        match child.try_wait().map_err(|e| e.to_string())? {
            Some(status) => break status,
            None => std::thread::sleep(Duration::from_millis(5)),
        }
    };
    let elapsed = started.elapsed();
    let stdout = reader.join().map_err(|_| "the reader of stdout panicked")?;
    Ok(Measured { status, elapsed, peak_kib, stdout })
}

fn measure_events(bin: &Path, file: &Path) -> Result<(), String> {
    let m = timed(bin, &["simulate", &file.to_string_lossy(), "--json"], None)?;
    let last = String::from_utf8_lossy(&m.stdout).lines().last().unwrap_or("").to_string();
    // The counts, without the 64 rail rows.
    let summary = last.find("\"events_queued\"").map_or(last.clone(), |at| last[at..].to_string());
    println!("scale: {EVENTS} COMM_EST across {DEVICES} devices");
    println!("  exit status   {}", m.status);
    println!("  wall time     {:.2} s", m.elapsed.as_secs_f64());
    println!("  peak RSS      {:.1} MiB", m.peak_kib as f64 / 1024.0);
    println!("  summary       {summary}");
    if !m.status.success() {
        return Err(format!("the scale scenario failed ({})", m.status));
    }
    if !summary.contains(&format!("\"events_read\":{}", EVENTS + 2)) {
        return Err("not every event was read".into());
    }
    Ok(())
}

/// The largest scenario: `simulate --html`, then its input log (written by
/// a second, untimed run) through `replay --html`; each timed against
/// [`RAILS_TARGET_S`].
fn measure_rails(bin: &Path, dir: &Path) -> Result<(), String> {
    let file = dir.join("largest.toml");
    let text = largest();
    std::fs::write(&file, &text).map_err(|e| format!("{}: {e}", file.display()))?;
    let (html, rwlog, replayed) =
        (dir.join("largest.html"), dir.join("largest.rwlog"), dir.join("largest-replay.html"));
    let path = |p: &Path| p.to_string_lossy().into_owned();
    // Each run's stderr (the monitor's log) to a file beside; a failure names it.
    let run = |what: &str, args: &[&str], err: &str| {
        let err = dir.join(err);
        let m = timed(bin, args, Some(&err))?;
        match m.status.success() {
            true => Ok(m),
            false => Err(format!("{what} of the largest scenario failed ({}), see {}", m.status, err.display())),
        }
    };
    let simulate =
        run("simulate --html", &["simulate", &path(&file), "--html", &path(&html), "--json"], "simulate.err")?;
    run("simulate --record", &["simulate", &path(&file), "--record", &path(&rwlog), "--json"], "record.err")?;
    let replay = run("replay --html", &["replay", &path(&rwlog), "--html", &path(&replayed), "--json"], "replay.err")?;
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len()) as f64 / 1e6;
    let lines = simulate.stdout.iter().filter(|&&b| b == b'\n').count();
    println!(
        "scale: {RAIL_DEVICES} devices × {RAIL_PORTS} ports, {} rails flapping {FLAPS} times ({:.1} MB scenario, {lines} JSON lines)",
        RAIL_DEVICES / FLAP_EVERY,
        text.len() as f64 / 1e6
    );
    println!("  run                    wall time   target   peak RSS   page");
    let mut late = Vec::new();
    for (what, m, page) in [("simulate --html", &simulate, &html), ("replay --html", &replay, &replayed)] {
        let s = m.elapsed.as_secs_f64();
        let verdict = if s <= RAILS_TARGET_S { "ok" } else { "LATE" };
        println!(
            "  {what:<20} {s:>9.2} s   ≤ {RAILS_TARGET_S:.0} s {verdict:<4} {:>6.1} MiB   {:.2} MB",
            m.peak_kib as f64 / 1024.0,
            size(page)
        );
        if s > RAILS_TARGET_S {
            late.push(what);
        }
    }
    match late.is_empty() {
        true => Ok(()),
        false => Err(format!("over the {RAILS_TARGET_S:.0} s target: {}", late.join(", "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_scenario_is_at_the_limits_with_some_rails_flapping() {
        let text = largest();
        assert_eq!(text.matches("[[device]]").count() as u64, RAIL_DEVICES, "crates/scenario's MAX_DEVICES");
        assert_eq!(text.matches("    { port = ").count() as u64, RAIL_DEVICES * RAIL_PORTS, "MAX_RAILS");
        let flappers = RAIL_DEVICES / FLAP_EVERY;
        assert_eq!(text.matches("event = \"port_err\"").count() as u64, flappers * FLAPS);
        assert_eq!(text.matches("event = \"port_active\"").count() as u64, flappers * FLAPS);
        // Steps in time order, as the parser requires.
        let times: Vec<u64> = text
            .split("[[step]]\nat_ms = ")
            .skip(1)
            .map(|s| s.split('\n').next().and_then(|t| t.parse().ok()).expect("a time"))
            .collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(text.matches("[[expect]]").count() as u64, 2 * flappers * FLAPS + 2);
        assert!(text.len() < 16 << 20, "within the scenario file limit");
    }
}
