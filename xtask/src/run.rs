//! Running commands with a visible trace.

use std::path::PathBuf;
use std::process::Command;

/// The workspace root (xtask lives one level below it).
pub fn root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}

/// Cargo's target directory: `CARGO_TARGET_DIR` (a relative one is taken
/// from the workspace root, where every `cargo` here runs) or `target/`.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root().join("target"), |dir| root().join(dir))
}

/// A `cargo` command run from the workspace root.
pub fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(root());
    cmd
}

/// Runs `cmd`, echoing it first; an unsuccessful exit is an error naming it.
pub fn step(what: &str, cmd: &mut Command) -> Result<(), String> {
    eprintln!("==> {what}: {cmd:?}");
    let status = cmd.status().map_err(|e| format!("{what}: cannot start: {e}"))?;
    if status.success() { Ok(()) } else { Err(format!("{what} failed ({status})")) }
}
