//! Building `librailwatch` (railwatch-ffi with the `verbs` feature) in one
//! of the profiles the tasks use, and reading where cargo put it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::run::{cargo, root};

/// Which cargo profile the library is built in.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Profile {
    /// The tests' (`cargo xtask ffi`'s shared library, `vmtest --dev`).
    Dev,
    /// The README's link line (`cargo xtask ffi`'s static library).
    Release,
    /// The root Cargo.toml's `[profile.dist]`: release code with full
    /// debug info (abidw reads the types from it), the shared library
    /// linked with its soname ([`soname`]) and every path of this machine
    /// remapped, so neither the library nor the ABI baseline names one.
    Dist,
}

/// A built library.
pub struct Built {
    /// The directory of `librailwatch.so` and `librailwatch.a`.
    pub lib_dir: PathBuf,
    /// The directory of the fake `libibverbs.so.1` that
    /// railwatch-verbs-backend's build script makes (the tests run with it).
    pub fake_dir: PathBuf,
    /// railwatch-ffi's version, the C API's (`"0.2.0"`).
    pub version: String,
}

/// The shared library's soname for the C API's `version`: the major
/// version's from 1.0 (`librailwatch.so.1`), and before it the minor's
/// (`librailwatch.so.0.2`), since a 0.x minor may break the ABI (cargo-c
/// names its libraries the same way).
pub fn soname(version: &str) -> String {
    let mut parts = version.split('.');
    match (parts.next(), parts.next()) {
        (Some("0"), Some(minor)) => format!("librailwatch.so.0.{minor}"),
        (Some(major), _) => format!("librailwatch.so.{major}"),
        (None, _) => "librailwatch.so".into(),
    }
}

/// railwatch-ffi's version, from `cargo pkgid`.
pub fn version() -> Result<String, String> {
    let out = cargo()
        .args(["pkgid", "-p", "railwatch-ffi"])
        .output()
        .map_err(|e| format!("cargo pkgid: cannot start: {e}"))?;
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    match package_version(&id) {
        Some(v) if out.status.success() => Ok(v),
        _ => Err(format!("cargo pkgid -p railwatch-ffi gave no version ({}: {id:?})", out.status)),
    }
}

/// The version in a cargo package id (`…#name@1.0.0`, `…/name#1.0.0`, or
/// `name 1.0.0 (…)`).
fn package_version(id: &str) -> Option<String> {
    let tail = match id.rsplit_once('#') {
        Some((_, tail)) => tail.rsplit_once('@').map_or(tail, |(_, v)| v),
        None => id.split(' ').nth(1)?,
    };
    tail.chars().next().filter(char::is_ascii_digit).map(|_| tail.to_string())
}

/// The cargo command that builds the library in `profile`.
fn command(profile: Profile) -> Result<Command, String> {
    let mut cmd = cargo();
    let features = ["-p", "railwatch-ffi", "--features", "verbs", "--message-format=json"];
    match profile {
        Profile::Dev => cmd.arg("build").args(features),
        Profile::Release => cmd.arg("build").args(features).arg("--release"),
        // `cargo rustc`: the soname only for this crate's link, so every
        // dependency is the same build whatever the version.
        Profile::Dist => {
            let soname = soname(&version()?);
            cmd.args(["rustc", "--lib", "--profile", "dist"])
                .args(features)
                .args(["--", "-C", &format!("link-arg=-Wl,-soname,{soname}")])
                .env("CARGO_ENCODED_RUSTFLAGS", remapped_paths().join("\u{1f}"))
        }
    };
    // The JSON messages are read; cargo's progress and errors are shown.
    cmd.stdout(Stdio::piped()).stderr(Stdio::inherit());
    Ok(cmd)
}

/// rustc's options that take this machine's paths out of the dist build
/// (panic messages, debug info): the workspace and cargo's home.
pub(crate) fn remapped_paths() -> Vec<String> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")));
    let mut flags = vec![format!("--remap-path-prefix={}/=", root().display())];
    if let Some(home) = home {
        flags.push(format!("--remap-path-prefix={}/registry/src/=", home.display()));
    }
    flags
}

/// Builds the library in `profile`: where it is, the fake libibverbs and
/// the version, from cargo's JSON messages.
pub fn build(profile: Profile) -> Result<Built, String> {
    let mut cmd = command(profile)?;
    eprintln!("==> build librailwatch ({profile:?}): {cmd:?}");
    let out = cmd.output().map_err(|e| format!("build librailwatch: cannot start: {e}"))?;
    if !out.status.success() {
        return Err(format!("build librailwatch failed ({})", out.status));
    }
    let messages = messages(&out.stdout);
    let fake_dir = fake_dir(&messages);
    let ffi = messages.iter().find(|m| {
        m["reason"] == "compiler-artifact"
            && m["package_id"].as_str().is_some_and(|p| names_package(p, "railwatch-ffi"))
    });
    let files = ffi.and_then(|m| m["filenames"].as_array()).into_iter().flatten().filter_map(|f| f.as_str());
    let so = files.into_iter().find(|f| f.ends_with("librailwatch.so"));
    let lib_dir = so.and_then(|f| Path::new(f).parent().map(Path::to_path_buf));
    let version = ffi.and_then(|m| m["package_id"].as_str()).and_then(package_version);
    let lib_dir = lib_dir.ok_or("build librailwatch: cargo named no librailwatch.so")?;
    let fake_dir = fake_dir.ok_or("build librailwatch: no build-script-executed message of railwatch-verbs-backend")?;
    let version = version.ok_or("build librailwatch: no version in railwatch-ffi's package id")?;
    for needed in [lib_dir.join("librailwatch.a"), fake_dir.join("libibverbs.so.1")] {
        if !needed.is_file() {
            return Err(format!(
                "{} is missing (the fake libibverbs needs a C compiler and the rdma-core headers: cargo xtask deps)",
                needed.display()
            ));
        }
    }
    eprintln!("==> library {} ({version}), fake libibverbs {}", lib_dir.display(), fake_dir.display());
    Ok(Built { lib_dir, fake_dir, version })
}

/// Whether cargo's `package_id` is the package `name`: spelled
/// `path+file:///…#name@1.0.0`, `path+file:///…/name#1.0.0` (when the
/// directory is the name) or, by older cargos, `name 1.0.0 (…)`.
fn names_package(id: &str, name: &str) -> bool {
    if let Some((url, tail)) = id.rsplit_once('#') {
        return match tail.split_once('@') {
            Some((package, _)) => package == name,
            None => url.rsplit('/').next() == Some(name),
        };
    }
    id.split(' ').next() == Some(name)
}

/// cargo's JSON messages (`--message-format=json`), one per line; a line
/// that is not JSON is skipped.
pub fn messages(stdout: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(stdout).lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// The fake libibverbs's directory: in the output of
/// railwatch-verbs-backend's build script, as cargo's messages name it.
pub fn fake_dir(messages: &[serde_json::Value]) -> Option<PathBuf> {
    let script = messages.iter().find(|m| {
        m["reason"] == "build-script-executed"
            && m["package_id"].as_str().is_some_and(|p| names_package(p, "railwatch-verbs-backend"))
    })?;
    Some(Path::new(script["out_dir"].as_str()?).join("fake-ibverbs/basic"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cargo_messages() {
        let out = concat!(
            r#"{"reason":"build-script-executed","package_id":"path+file:///src/crates/verbs-backend#railwatch-verbs-backend@0.1.0","out_dir":"/t/debug/build/x-1/out","env":[]}"#,
            "\nnot json\n",
            r#"{"reason":"compiler-artifact","filenames":["/t/debug/librailwatch.so","/t/d\"q/librailwatch.a"],"x":1}"#,
        );
        let m = messages(out.as_bytes());
        assert_eq!(m.len(), 2);
        assert_eq!(fake_dir(&m), Some(PathBuf::from("/t/debug/build/x-1/out/fake-ibverbs/basic")));
        assert_eq!(m[1]["filenames"][1], "/t/d\"q/librailwatch.a");
        assert!(!names_package("path+file:///src/crates/ffi#railwatch-ffi@0.1.0", "railwatch"));
        assert!(names_package("railwatch-ffi 0.1.0 (path+file:///src/crates/ffi)", "railwatch-ffi"));
        assert!(names_package("path+file:///src/railwatch-ffi#0.1.0", "railwatch-ffi"));
        assert!(!names_package("path+file:///src/railwatch-ffi#0.1.0", "railwatch"));
    }

    #[test]
    fn reads_versions_and_sonames() {
        assert_eq!(package_version("path+file:///src/crates/ffi#railwatch-ffi@0.2.0").as_deref(), Some("0.2.0"));
        assert_eq!(package_version("path+file:///src/railwatch-ffi#0.1.0").as_deref(), Some("0.1.0"));
        assert_eq!(package_version("railwatch-ffi 0.1.0 (path+file:///src/crates/ffi)").as_deref(), Some("0.1.0"));
        assert_eq!(package_version("nonsense"), None);
        assert_eq!(soname("0.2.0"), "librailwatch.so.0.2");
        assert_eq!(soname("1.4.2"), "librailwatch.so.1");
    }
}
