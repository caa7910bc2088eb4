//! `cargo xtask deps`: the Debian packages the verbs backend builds against
//! (and the compilers, valgrind and cmake for `cargo xtask ffi`,
//! prometheus's `promtool` for the metrics tests, libabigail's tools for
//! `cargo xtask abi`, the Debian package's and the image's tools for
//! `cargo xtask deb`).
//!
//! Installs the missing ones when running as root with apt-get (as CI does);
//! elsewhere prints what to install and fails, so nothing is half-built.

use std::process::Command;

use crate::run::step;

/// rdma-sys needs the verbs and rdmacm headers, libclang for bindgen and
/// pkg-config to find them; `cargo xtask ffi` compiles the C API's tests
/// (gcc, g++), runs them under valgrind and builds the example with cmake;
/// the metrics tests check `watch`'s output with `promtool` (from
/// `prometheus`), the service tests the unit with `systemd-analyze`; the
/// report test opens `simulate --html`'s page in headless `chromium`;
/// `cargo xtask abi` compares the C API's ABI with `abidw` and `abidiff`
/// (`abigail-tools`); `cargo xtask deb` checks the package with `lintian`,
/// builds the clean root with `mmdebstrap`, the image with `umoci` and runs
/// it with `podman` (and `runc` where crun cannot: cgroups in hybrid mode).
pub const PACKAGES: [&str; 17] = [
    "libibverbs-dev",
    "librdmacm-dev",
    "libclang-dev",
    "pkg-config",
    "valgrind",
    "cmake",
    "gcc",
    "g++",
    "prometheus",
    "systemd",
    "chromium",
    "abigail-tools",
    "lintian",
    "mmdebstrap",
    "umoci",
    "podman",
    "runc",
];

/// Whether the Debian package `pkg` is installed.
pub(crate) fn installed(pkg: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", pkg])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
        .unwrap_or(false)
}

/// Whether this runs as root (apt-get can install).
pub(crate) fn is_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0").unwrap_or(false)
}

fn have(cmd: &str) -> bool {
    Command::new("sh").args(["-c", &format!("command -v {cmd} >/dev/null")]).status().is_ok_and(|s| s.success())
}

/// Installs what is missing, or explains how.
pub fn run() -> Result<(), String> {
    let missing: Vec<&str> = PACKAGES.iter().copied().filter(|p| !installed(p)).collect();
    if missing.is_empty() {
        eprintln!("==> deps: {} already installed", PACKAGES.join(" "));
        return Ok(());
    }
    if !(is_root() && have("apt-get")) {
        return Err(format!(
            "missing system packages: {}. Install them with: sudo apt-get install -y {}",
            missing.join(" "),
            missing.join(" ")
        ));
    }
    step("apt-get update", Command::new("apt-get").args(["update", "-q"]))?;
    step(
        "apt-get install",
        Command::new("apt-get")
            .args(["install", "-y", "-q", "--no-install-recommends"])
            .args(&missing)
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )
}
