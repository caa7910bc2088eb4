//! The VM: `qemu-system-x86_64 -kernel vmlinux` (the ELF kernel through its
//! PVH entry point: no real-mode setup, no in-guest decompression), with
//! KVM only where `/proc/cpuinfo` shows `vmx` or `svm` (the `/dev/kvm` of
//! these machines is not hardware virtualisation), two serial ports
//! (`ttyS0` the console, `ttyS1` the results), followed until it powers off
//! or is killed at the timeout.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::progress::{Ended, Live};

/// What one VM run gave (the cases' verdicts went to `on_end`).
pub struct VmRun {
    /// qemu start to `/init`.
    pub boot: Option<Duration>,
    /// `/init` to READY: modules, veth, rxe0.
    pub setup: Option<Duration>,
    /// READY to DONE.
    pub cases: Option<Duration>,
    /// qemu start to its exit.
    pub total: Duration,
    /// Something went wrong outside the cases (timeout, setup).
    pub problem: Option<String>,
    /// `run/results.txt`.
    pub results: PathBuf,
    /// `run/console.log`.
    pub console: PathBuf,
}

fn hardware_virtualisation() -> bool {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags =
        cpuinfo.lines().any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "vmx" || f == "svm"));
    flags && Path::new("/dev/kvm").exists()
}

/// The qemu command: 1 GiB, 2 CPUs, no display, no network, the console
/// to `console`, the results port to `results`, qemu's own output to
/// `qemu_log`.
fn qemu(
    accel: &[&str],
    vmlinux: &Path,
    initrd: &Path,
    (console, results, qemu_log): (&Path, &Path, &Path),
) -> Result<Command, String> {
    let log = File::create(qemu_log).map_err(|e| format!("{}: {e}", qemu_log.display()))?;
    let log2 = log.try_clone().map_err(|e| format!("{}: {e}", qemu_log.display()))?;
    let mut cmd = Command::new("qemu-system-x86_64");
    cmd.args(accel)
        .args(["-m", "1024", "-smp", "2", "-display", "none", "-no-reboot", "-nodefaults", "-net", "none"])
        .arg("-serial")
        .arg(format!("file:{}", console.display()))
        .arg("-serial")
        .arg(format!("file:{}", results.display()))
        .arg("-kernel")
        .arg(vmlinux)
        .arg("-initrd")
        .arg(initrd)
        .args(["-append", "console=ttyS0 quiet panic=-1 8250.nr_uarts=2"])
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log2);
    Ok(cmd)
}

/// Boots the VM and follows it; each case is given to `on_end` as it ends
/// (or when the VM stops, for one still running).
pub fn boot(
    vmlinux: &Path,
    initrd: &Path,
    run_dir: &Path,
    timeout: Duration,
    on_end: &mut dyn FnMut(Ended),
) -> Result<VmRun, String> {
    let results = run_dir.join("results.txt");
    let console = run_dir.join("console.log");
    let accel: &[&str] =
        if hardware_virtualisation() { &["-accel", "kvm", "-cpu", "host"] } else { &["-accel", "tcg", "-cpu", "max"] };
    let mut cmd = qemu(accel, vmlinux, initrd, (&console, &results, &run_dir.join("qemu.log")))?;
    eprintln!("==> vmtest: boot ({}; timeout {} s): {cmd:?}", accel[1], timeout.as_secs());
    let started = Instant::now();
    let child = cmd.spawn().map_err(|e| format!("vmtest: cannot start qemu: {e}"))?;
    let mut live = Live::new(started, &results);
    let timed_out = follow(child, timeout, &mut live, on_end)?;
    let total = started.elapsed();
    let problem = if timed_out {
        Some(format!("the VM did not finish within {} s and was killed", timeout.as_secs()))
    } else {
        live.problem()
    };
    if let Some(p) = &problem {
        eprintln!("==> vmtest: {p}; the console's last lines:");
        let text = fs::read_to_string(&console).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        for l in &lines[lines.len().saturating_sub(30)..] {
            eprintln!("    | {l}");
        }
    }
    if let Some(ended) = live.unfinished() {
        on_end(ended);
    }
    let [boot, setup, cases] = live.timings();
    Ok(VmRun { boot, setup, cases, total, problem, results, console })
}

/// Reads the results while qemu runs. True when the VM was killed at the
/// timeout.
fn follow(mut child: Child, timeout: Duration, live: &mut Live, on_end: &mut dyn FnMut(Ended)) -> Result<bool, String> {
    let started = Instant::now();
    loop {
        live.read(on_end);
        if child.try_wait().map_err(|e| format!("qemu: {e}"))?.is_some() {
            live.read(on_end);
            return Ok(false);
        }
        if started.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            live.read(on_end);
            return Ok(true);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
