//! `cargo xtask ci`: what CI runs, in the order a failure is cheapest.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::run::{cargo, root, step};

/// Runs the workspace's tests, echoing their output and adding up cargo's
/// `test result:` lines.
fn tests() -> Result<(u64, u64), String> {
    let mut cmd = cargo();
    cmd.args(["test", "--workspace", "--all-features"]).stdout(Stdio::piped());
    eprintln!("==> tests: {cmd:?}");
    let mut child = cmd.spawn().map_err(|e| format!("tests: cannot start: {e}"))?;
    let (mut passed, mut failed) = (0, 0);
    let stdout = child.stdout.take().ok_or("tests: no stdout")?;
    for line in BufReader::new(stdout).lines() {
        let line = line.map_err(|e| format!("tests: reading output: {e}"))?;
        println!("{line}");
        if let Some(rest) = line.strip_prefix("test result: ") {
            // "ok. 7 passed; 0 failed; 0 ignored; …"
            for part in rest.split(['.', ';']) {
                let mut words = part.split_whitespace();
                match (words.next().and_then(|n| n.parse::<u64>().ok()), words.next()) {
                    (Some(n), Some("passed")) => passed += n,
                    (Some(n), Some("failed")) => failed += n,
                    _ => {}
                }
            }
        }
    }
    let status = child.wait().map_err(|e| format!("tests: {e}"))?;
    if !status.success() {
        return Err(format!("tests failed ({status}): {passed} passed, {failed} failed"));
    }
    Ok((passed, failed))
}

/// Runs every built-in scenario through the built binary: each must hold
/// all of its expectations (exit 0).
fn builtins() -> Result<(), String> {
    step("build railwatch", cargo().args(["build", "-p", "railwatch"]))?;
    let target = crate::run::target_dir();
    let bin = target.join("debug/railwatch");
    let list = Command::new(&bin).arg("scenarios").output().map_err(|e| format!("{}: {e}", bin.display()))?;
    if !list.status.success() {
        return Err(format!("railwatch scenarios failed ({})", list.status));
    }
    let text = String::from_utf8_lossy(&list.stdout).into_owned();
    let names: Vec<&str> = text.lines().filter_map(|l| l.split_whitespace().next()).collect();
    if names.is_empty() {
        return Err("railwatch scenarios listed nothing".into());
    }
    // Independent runs: as many at once as there are cores.
    let runs = crate::run::parallel(&names, |name| {
        step(&format!("scenario {name}"), Command::new(&bin).args(["simulate", "--builtin", name]).env("NO_COLOR", "1"))
    });
    runs.into_iter().collect::<Result<Vec<()>, String>>()?;
    eprintln!("==> built-in scenarios: {} held every expectation", names.len());
    Ok(())
}

/// How long each phase took, printed as a table when the run ends (passed
/// or not), so a slow CI run says where its time went.
#[derive(Default)]
struct Clock {
    phases: Vec<(&'static str, Duration)>,
    started: Option<Instant>,
}

impl Clock {
    /// Runs `f` as the phase `name`, timing it.
    fn phase<T>(&mut self, name: &'static str, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
        let start = Instant::now();
        self.started.get_or_insert(start);
        let out = f();
        self.phases.push((name, start.elapsed()));
        out
    }

    /// The table: each phase's seconds and share of the whole.
    fn print(&self) {
        let total = self.started.map(|s| s.elapsed()).unwrap_or_default().as_secs_f64().max(1e-9);
        eprintln!("==> ci: where the time went");
        eprintln!("    {:<20} {:>8} {:>6}", "phase", "seconds", "share");
        for (name, took) in &self.phases {
            let secs = took.as_secs_f64();
            eprintln!("    {name:<20} {secs:>8.1} {:>5.1}%", 100.0 * secs / total);
        }
        eprintln!("    {:<20} {total:>8.1}", "total");
    }
}

/// Builds that need nothing of the tests, run beside them (the test run
/// leaves cores idle while its processes wait): first the `deb` phase's
/// binary in the dist profile (a build directory and lock of its own; the
/// C library's dist build in the package phase then finds most of its
/// dependencies built, and waits on that lock if it is not done), and
/// cargo-deb where it is missing; cargo-fuzz and the fuzz targets; then
/// the loom models (built in a target dir of their own:
/// `cfg(loom)` rebuilds everything) and run. Their output goes to
/// `target/ci-side.log`, whose tail is printed if one fails; the loom
/// verdict lines are printed either way.
fn side_jobs() -> std::thread::JoinHandle<Result<(), String>> {
    std::thread::spawn(|| {
        let started = Instant::now();
        let path = crate::run::target_dir().join("ci-side.log");
        std::fs::create_dir_all(crate::run::target_dir()).map_err(|e| format!("{e}"))?;
        let log = std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        eprintln!(
            "==> side jobs (the package's binary, cargo-deb, cargo-fuzz, the fuzz build, loom) beside the tests: log {}",
            path.display()
        );
        let out = crate::deb::prebuild(&log)
            .and_then(|()| crate::deb::ensure_cargo_deb(Some(&log)))
            .and_then(|()| crate::fuzz::prepare(&log))
            .and_then(|()| loom(&log));
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for line in text.lines().filter(|l| l.starts_with("test result:") || l.starts_with("test ")) {
            eprintln!("    loom: {line}");
        }
        if let Err(e) = &out {
            let tail: Vec<&str> = text.lines().rev().take(40).collect();
            eprintln!("==> side jobs failed: {e}; the log's last lines:");
            for line in tail.iter().rev() {
                eprintln!("    {line}");
            }
        }
        eprintln!("==> side jobs done in {:.1} s", started.elapsed().as_secs_f64());
        out
    })
}

/// The loom models, output into `log`.
fn loom(log: &std::fs::File) -> Result<(), String> {
    let clone = || log.try_clone().map_err(|e| format!("side log: {e}"));
    step(
        "loom models",
        cargo()
            .args(["test", "-p", "railwatch-core", "--release", "--test", "loom"])
            .env("RUSTFLAGS", "--cfg loom")
            .env("LOOM_MAX_PREEMPTIONS", "3")
            // A separate target dir: cfg(loom) rebuilds everything.
            .env("CARGO_TARGET_DIR", root().join("target/loom"))
            .stdout(clone()?)
            .stderr(clone()?),
    )
}

/// Runs every check; the first failure stops the run. The time table is
/// printed either way.
pub fn run() -> Result<(), String> {
    let mut clock = Clock::default();
    let out = checks(&mut clock);
    clock.print();
    out
}

fn checks(clock: &mut Clock) -> Result<(), String> {
    clock.phase("deps", crate::deps::run)?;
    clock.phase("format", || step("format", cargo().args(["fmt", "--all", "--check"])))?;
    clock.phase("clippy", || {
        step(
            "clippy",
            cargo().args(["clippy", "--workspace", "--all-targets", "--all-features", "--", "-D", "warnings"]),
        )
    })?;
    // No function over 150 lines, no file over 700 lines of code.
    clock.phase("size", || {
        eprintln!("==> size: lines of code and function lengths against the limits");
        crate::size::run(&[])
    })?;
    let side = side_jobs();
    let (passed, failed) = clock.phase("tests", tests)?;
    // The C API from C and C++ (shared and static library, valgrind).
    let (ffi_passed, ffi_failed) = clock.phase("ffi", || crate::ffi::run(&[]))?;
    // The C API installed (the dist build), and used with CMake and pkg-config.
    clock.phase("package", crate::package::run)?;
    // Its ABI against the baseline (the same build).
    clock.phase("abi", || crate::abi::run(&[]))?;
    // The Debian package and the container image, as an operator installs
    // them (the dist build's dependencies are shared with the library's).
    clock.phase("deb", crate::deb::run)?;
    // The side jobs end before the VM starts: it is timed by its guest.
    clock.phase("wait for side jobs", || side.join().unwrap_or_else(|_| Err("the side jobs panicked".into())))?;
    clock.phase("built-in scenarios", builtins)?;
    // The Python module as users install it (maturin, pytest, mypy).
    clock.phase("python", crate::python::run)?;
    // The real kernel RDMA stack (Soft-RoCE in qemu), after the simulated one.
    // Built in the dev profile: it checks behaviour, and reuses the
    // library the ffi step built (a release build would be two minutes).
    clock.phase("vmtest", || crate::vmtest::run(&["--dev".to_string()]))?;
    clock.phase("examples", || {
        step("engine example", cargo().args(["run", "-p", "railwatch-runtime", "--example", "engine"]))?;
        // An engine that keeps its own epoll loop and drives only the machine.
        step("own-loop example", cargo().args(["run", "-p", "railwatch-sim-backend", "--example", "own_loop"]))
    })?;
    clock.phase("docs", || {
        step(
            "docs",
            cargo().args(["doc", "--workspace", "--no-deps", "--all-features"]).env("RUSTDOCFLAGS", "-D warnings"),
        )
    })?;
    // Last, being the slowest to set up on a fresh machine (cargo-fuzz is
    // installed and the targets built with coverage instrumentation).
    clock.phase("fuzz", crate::fuzz::short)?;
    eprintln!("==> ci: all checks passed");
    // The plain closing line CI reads, with the counts of the test steps
    // (cargo's tests and the C API's checks).
    println!("tests: {} passed, {} failed", passed + ffi_passed, failed + ffi_failed);
    Ok(())
}
