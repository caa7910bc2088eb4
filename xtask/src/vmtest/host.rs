//! The host side's plumbing: the Debian packages the VM is built from
//! (installed when missing, as root), and running a command for its output.

use std::fs;
use std::path::Path;
use std::process::Command;

use crate::deps::{installed, is_root};
use crate::run::step;

/// Host packages the VM is built from (`dpkg-query` checks them):
/// qemu, the guest's shell, rdma-core's tools and providers (the rxe one),
/// `ip` and `rdma`, and `xz` for the kernel image.
const HOST_PACKAGES: [&str; 6] =
    ["qemu-system-x86", "busybox-static", "ibverbs-utils", "ibverbs-providers", "iproute2", "xz-utils"];

/// `apt-get update` (as root): the package lists lack what is needed.
pub fn apt_update() -> Result<(), String> {
    if !is_root() {
        return Err("vmtest: the package lists lack what is needed; run `sudo apt-get update`".into());
    }
    step("apt-get update", Command::new("apt-get").args(["update", "-q"]))
}

/// Installs the missing host packages (as root), with `apt-get update` only
/// when the first attempt fails.
pub fn host_packages() -> Result<(), String> {
    let missing: Vec<&str> = HOST_PACKAGES.iter().copied().filter(|p| !installed(p)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    if !is_root() {
        return Err(format!(
            "vmtest: missing host packages: {}. Install them with: sudo apt-get install -y --no-install-recommends {}",
            missing.join(" "),
            missing.join(" ")
        ));
    }
    let install = || {
        step(
            "apt-get install (vmtest)",
            Command::new("apt-get")
                .args(["install", "-y", "-q", "--no-install-recommends"])
                .args(&missing)
                .env("DEBIAN_FRONTEND", "noninteractive"),
        )
    };
    if install().is_err() {
        apt_update()?;
        install()?;
    }
    Ok(())
}

/// A command's standard output when it succeeds.
pub fn output_of(cmd: &mut Command) -> Option<String> {
    let out = cmd.output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A command's standard output as bytes; its failure is an error naming it.
pub fn output_bytes(cmd: &mut Command) -> Result<Vec<u8>, String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() { Ok(out.stdout) } else { Err(format!("{cmd:?} failed ({})", out.status)) }
}

/// `mkdir -p`, the error naming the directory.
pub fn mkdir(dir: &Path) -> Result<(), String> {
    fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))
}
