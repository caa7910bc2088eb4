//! `cargo xtask scale`: the CLI under a large scenario — 1,000,000 queued
//! COMM_EST across 64 devices, with a flap hidden behind one device's burst
//! — timed, with the process's peak resident memory.

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::run::{cargo, root, step};

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

/// Peak resident set (VmHWM) of a running process, in KiB.
fn peak_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Builds the release binary, runs the scenario, prints time and memory.
pub fn run() -> Result<(), String> {
    step("build (release)", cargo().args(["build", "--release", "-p", "railwatch"]))?;
    let dir = root().join("target/scale");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let file = dir.join("scale-1m-64.toml");
    std::fs::write(&file, scenario()).map_err(|e| format!("{}: {e}", file.display()))?;
    let target = crate::run::target_dir();
    let bin = target.join("release/railwatch");
    measure(&bin, &file)
}

fn measure(bin: &Path, file: &Path) -> Result<(), String> {
    eprintln!("==> scale: {} simulate {} --json", bin.display(), file.display());
    let started = Instant::now();
    let mut child = Command::new(bin)
        .args(["simulate", &file.to_string_lossy(), "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    let pid = child.id();
    // VmHWM is a high-water mark: the last reading before exit is the peak.
    let mut peak = 0;
    let status = loop {
        peak = peak.max(peak_kib(pid).unwrap_or(0));
        match child.try_wait().map_err(|e| e.to_string())? {
            Some(status) => break status,
            None => std::thread::sleep(Duration::from_millis(5)),
        }
    };
    let elapsed = started.elapsed();
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let last = String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or("").to_string();
    // The counts, without the 64 rail rows.
    let summary = last.find("\"events_queued\"").map_or(last.clone(), |at| last[at..].to_string());
    println!("scale: {EVENTS} COMM_EST across {DEVICES} devices");
    println!("  exit status   {status}");
    println!("  wall time     {:.2} s", elapsed.as_secs_f64());
    println!("  peak RSS      {:.1} MiB", peak as f64 / 1024.0);
    println!("  summary       {summary}");
    if !status.success() {
        return Err(format!("the scale scenario failed ({status})"));
    }
    if !summary.contains(&format!("\"events_read\":{}", EVENTS + 2)) {
        return Err("not every event was read".into());
    }
    Ok(())
}
