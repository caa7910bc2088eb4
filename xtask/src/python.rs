//! `cargo xtask python`: the Python module (crates/python) built and
//! tested as its users install it. A virtualenv (`target/python-venv`,
//! kept between runs) gets maturin, pytest and mypy from PyPI; `maturin
//! develop` builds the module into it with the workspace's target
//! directory (the Rust build is shared with the other steps); pytest runs
//! `crates/python/tests` (the live tests against `railwatch watch` under
//! the fake libibverbs); `mypy --strict` checks the package and
//! `examples/pick_rails.py` against its stub.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use crate::run::{cargo, root, step, target_dir};

/// What the virtualenv gets from PyPI.
const TOOLS: [&str; 4] = ["maturin>=1.5,<2", "pytest", "mypy", "jsonschema"];

pub fn run() -> Result<(), String> {
    let started = Instant::now();
    let venv = target_dir().join("python-venv");
    let bin = venv.join("bin");
    // Kept between runs; a list that grew since is installed again.
    let stamp = venv.join("railwatch-tools");
    let wanted = TOOLS.join("\n");
    if !bin.join("maturin").is_file() || std::fs::read_to_string(&stamp).ok().as_deref() != Some(wanted.as_str()) {
        step("python: virtualenv", Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
        step("python: tools from PyPI", Command::new(bin.join("pip")).args(["install", "-q"]).args(TOOLS))?;
        std::fs::write(&stamp, &wanted).map_err(|e| format!("{}: {e}", stamp.display()))?;
    }
    let package = root().join("crates/python");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    step(
        "python: maturin develop",
        Command::new(bin.join("maturin"))
            .args(["develop", "-q"])
            .current_dir(&package)
            .env("VIRTUAL_ENV", &venv)
            .env("PATH", &path)
            .env("CARGO_TARGET_DIR", target_dir()),
    )?;
    let (railwatch, fake) = agent()?;
    step(
        "python: pytest",
        Command::new(bin.join("python"))
            .args(["-m", "pytest", "-q", "-rs", "tests"])
            .current_dir(&package)
            .env("RAILWATCH_BIN", &railwatch)
            .env("RAILWATCH_FAKE_LIB", &fake),
    )?;
    step(
        "python: mypy --strict",
        Command::new(bin.join("mypy")).args(["--strict", "python/railwatch", "examples"]).current_dir(&package),
    )?;
    eprintln!("==> python: {:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// The `railwatch` binary built with `verbs`, and the fake libibverbs's
/// directory (the build script's output, named in cargo's messages).
fn agent() -> Result<(PathBuf, PathBuf), String> {
    let mut cmd = cargo();
    cmd.args(["build", "-p", "railwatch", "--features", "verbs", "--message-format=json"]);
    let out = cmd.output().map_err(|e| format!("build railwatch: {e}"))?;
    if !out.status.success() {
        return Err(format!("build railwatch failed ({})", out.status));
    }
    let fake = crate::library::fake_dir(&crate::library::messages(&out.stdout))
        .ok_or("build railwatch: cargo named no output of railwatch-verbs-backend's build script")?;
    Ok((target_dir().join("debug/railwatch"), fake))
}
