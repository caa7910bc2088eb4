//! What the guest runs besides busybox: host programs copied as they are
//! ([`HOST_TOOLS`], in the cached base image) and the programs under test,
//! built for each run ([`PROGRAMS`], in the run's overlay).
//!
//! A new guest-side tool is one entry in one of the two tables: a host
//! program (a Debian package's binary: also add the package to the host
//! list in `host.rs`) in [`HOST_TOOLS`], or something built here (a
//! workspace binary or example, a C or C++ program built by a function of
//! this file) in [`PROGRAMS`]. Either way its shared libraries (`ldd`) go
//! into the base image, and the case scripts run it by its guest path.

use std::fs;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};

use super::json;
use crate::run::{cargo, root, step, target_dir};

/// Host programs copied into the guest at their own paths.
/// `stdbuf` and its preload library line-buffer `ibv_asyncwatch` for the
/// gate_latency case.
pub const HOST_TOOLS: [&str; 6] = [
    "/usr/sbin/ip",
    "/usr/bin/rdma",
    "/usr/bin/ibv_devinfo",
    "/usr/bin/ibv_asyncwatch",
    "/usr/bin/stdbuf",
    "/usr/libexec/coreutils/libstdbuf.so",
];

/// The rxe provider's driver file for libibverbs.
pub const RXE_DRIVER: &str = "/etc/libibverbs.d/rxe.driver";
/// The guest's shell and most of its commands (`--list` names the applets).
pub const BUSYBOX: &str = "/bin/busybox";

/// A program built on the host for each run and copied, without its debug
/// info, into the overlay.
pub struct Program {
    /// Where it goes in the guest (no leading `/`); the case scripts run it
    /// from there. Its file name also names the stripped copy in `run/`.
    pub guest: &'static str,
    /// Builds it; returns the file to copy.
    pub build: fn() -> Result<PathBuf, String>,
}

/// The programs under test, built in this order.
pub const PROGRAMS: &[Program] = &[
    Program { guest: "usr/local/bin/railwatch", build: railwatch },
    Program { guest: "usr/local/bin/gate_latency", build: gate_latency },
    Program { guest: "usr/local/bin/verbs-system-tests", build: system_tests },
    Program { guest: "usr/local/bin/traffic_engine", build: traffic_engine },
    Program { guest: "usr/local/bin/stamp", build: stamp },
];

/// A built program: its guest path and the host file.
pub struct Built {
    /// [`Program::guest`].
    pub guest: &'static str,
    /// The file the build left.
    pub host: PathBuf,
}

/// Whether the measured programs (the gate_latency probe, the library the
/// traffic engine links) are built optimised, as the figures in
/// docs/PERFORMANCE.md are: the default. `cargo xtask ci` passes `--dev`:
/// it checks behaviour, and the dev profile's library is the one
/// `cargo xtask ffi` built already (a release build of the workspace is
/// two minutes of a fresh CI run).
static OPTIMISED: AtomicBool = AtomicBool::new(true);

/// Sets the profile of the measured programs (see [`OPTIMISED`]).
pub fn optimise(yes: bool) {
    OPTIMISED.store(yes, Ordering::Relaxed);
}

/// The cargo profile's arguments and output directory name.
fn profile() -> (&'static [&'static str], &'static str) {
    if OPTIMISED.load(Ordering::Relaxed) { (&["--release"], "release") } else { (&[], "debug") }
}

/// Builds every program of [`PROGRAMS`].
pub fn build() -> Result<Vec<Built>, String> {
    PROGRAMS.iter().map(|p| Ok(Built { guest: p.guest, host: (p.build)()? })).collect()
}

/// railwatch with the `verbs` feature (debug: the cases check behaviour).
/// The target directory is shared: a build of railwatch without the
/// feature, at any moment, replaces `debug/railwatch` (one vmtest run put
/// such a build in the guest, and the agent exited 2). So the binary is
/// copied as soon as it is built, and the copy is checked to be the
/// feature's build (built again when it is not).
fn railwatch() -> Result<PathBuf, String> {
    let own = target_dir().join("vmtest-verbs");
    fs::create_dir_all(&own).map_err(|e| format!("{}: {e}", own.display()))?;
    let copy = own.join("railwatch");
    for _ in 0..3 {
        step("build railwatch (verbs)", cargo().args(["build", "-p", "railwatch", "--features", "verbs"]))?;
        let built = target_dir().join("debug/railwatch");
        fs::copy(&built, &copy).map_err(|e| format!("{} -> {}: {e}", built.display(), copy.display()))?;
        let bytes = fs::read(&copy).map_err(|e| format!("{}: {e}", copy.display()))?;
        if !is_without_verbs(&bytes) {
            return Ok(copy);
        }
        eprintln!("==> vmtest: {} was replaced by a build without verbs: building again", built.display());
    }
    Err("railwatch: three builds with the verbs feature were replaced by builds without it".into())
}

/// Whether a railwatch binary is a build without the `verbs` feature: it
/// holds the message only that build prints (crates/cli/src/main.rs).
fn is_without_verbs(binary: &[u8]) -> bool {
    binary.windows(NO_VERBS.len()).any(|w| w == NO_VERBS)
}

/// What only railwatch's build without `verbs` prints.
const NO_VERBS: &[u8] = b"this build has no verbs support";

/// `crates/verbs-backend/examples/gate_latency.rs`, optimised: it measures
/// (unless `--dev`).
fn gate_latency() -> Result<PathBuf, String> {
    let (args, dir) = profile();
    step(
        &format!("build the gate_latency probe ({dir})"),
        cargo().args(["build", "-p", "railwatch-verbs-backend", "--example", "gate_latency"]).args(args),
    )?;
    Ok(target_dir().join(dir).join("examples/gate_latency"))
}

/// The verbs backend's `tests/system.rs` binary, as cargo names it.
fn system_tests() -> Result<PathBuf, String> {
    let mut cmd = cargo();
    cmd.args(["test", "-p", "railwatch-verbs-backend", "--test", "system", "--no-run", "--message-format=json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    eprintln!("==> build the verbs backend's system tests: {cmd:?}");
    let out = cmd.output().map_err(|e| format!("cargo test --no-run: {e}"))?;
    if !out.status.success() {
        return Err(format!("building the system tests failed ({})", out.status));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .filter(|l| l.contains("\"reason\":\"compiler-artifact\"") && l.contains("\"name\":\"system\""))
        .find_map(|l| json::raw(l, "executable").filter(|e| *e != "null"))
        .map(PathBuf::from)
        .ok_or_else(|| "vmtest: cargo named no executable for the system test".to_string())
}

/// Where the traffic engine's CMake build (one per profile of the library
/// it links) and `stamp` go.
fn traffic_dir() -> PathBuf {
    target_dir().join(format!("vmtest-traffic-{}", profile().1))
}

/// The traffic cases' engine (`crates/ffi/examples/traffic/`): librailwatch
/// (`verbs`; release unless `--dev`), then the examples' CMakeLists.txt,
/// the README's lines (the engine itself always Release: it is measured).
fn traffic_engine() -> Result<PathBuf, String> {
    let (args, dir) = profile();
    step(
        &format!("build librailwatch ({dir}, verbs)"),
        cargo().args(["build", "-p", "railwatch-ffi", "--features", "verbs"]).args(args),
    )?;
    let out = traffic_dir();
    if !out.join("CMakeCache.txt").exists() {
        step(
            "cmake configure (the traffic engine)",
            Command::new("cmake")
                .arg("-S")
                .arg(root().join("crates/ffi/examples"))
                .arg("-B")
                .arg(&out)
                .arg(format!("-DRAILWATCH_ROOT={}", root().display()))
                .arg(format!("-DRAILWATCH_LIB_DIR={}", target_dir().join(dir).display()))
                .arg("-DCMAKE_BUILD_TYPE=Release"),
        )?;
    }
    step(
        "cmake build (the traffic engine)",
        Command::new("cmake").arg("--build").arg(&out).args(["--target", "traffic_engine"]),
    )?;
    Ok(out.join("traffic_engine"))
}

/// `xtask/vm/stamp.c`: the traffic cases' clock in the guest.
fn stamp() -> Result<PathBuf, String> {
    let out = traffic_dir();
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let bin = out.join("stamp");
    step(
        "cc stamp",
        Command::new("cc")
            .args(["-O2", "-Wall", "-Wextra", "-Werror", "-o"])
            .arg(&bin)
            .arg(root().join("xtask/vm/stamp.c")),
    )?;
    Ok(bin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mark_of_a_build_without_verbs_is_in_that_build_only() {
        let main = fs::read_to_string(root().join("crates/cli/src/main.rs")).unwrap();
        let mark = String::from_utf8_lossy(NO_VERBS);
        let gated = main.split("#[cfg(not(feature = \"verbs\"))]").skip(1).any(|item| {
            let body = item.split("\n}\n").next().unwrap_or("");
            is_without_verbs(body.as_bytes())
        });
        assert!(gated && main.matches(mark.as_ref()).count() == 1, "{mark:?}: not once, in a cfg(not(verbs)) item");
    }
}
