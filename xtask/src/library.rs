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
fn remapped_paths() -> Vec<String> {
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
    let (mut lib_dir, mut fake_dir, mut version) = (None, None, None);
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let package = json_string(line, "package_id").unwrap_or_default();
        match json_string(line, "reason").as_deref() {
            Some("build-script-executed") if names_package(&package, "railwatch-verbs-backend") => {
                fake_dir = json_string(line, "out_dir").map(|d| Path::new(&d).join("fake-ibverbs/basic"));
            }
            Some("compiler-artifact") if names_package(&package, "railwatch-ffi") => {
                let so = json_strings(line, "filenames").into_iter().find(|f| f.ends_with("librailwatch.so"));
                lib_dir = so.and_then(|f| Path::new(&f).parent().map(Path::to_path_buf));
                version = package_version(&package);
            }
            _ => {}
        }
    }
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

/// The string value of `"key":"…"` in one line of JSON (unescaped).
fn json_string(line: &str, key: &str) -> Option<String> {
    let at = line.find(&format!("\"{key}\":\""))? + key.len() + 4;
    parse_json_string(&line[at..]).map(|(s, _)| s)
}

/// The strings of the array `"key":["…","…"]` in one line of JSON.
fn json_strings(line: &str, key: &str) -> Vec<String> {
    let Some(at) = line.find(&format!("\"{key}\":[")) else { return Vec::new() };
    let mut rest = &line[at + key.len() + 4..];
    let mut found = Vec::new();
    while let Some(s) = rest.strip_prefix('"') {
        let Some((value, used)) = parse_json_string(s) else { break };
        found.push(value);
        rest = &s[used..];
        match rest.strip_prefix(',') {
            Some(r) => rest = r,
            None => break,
        }
    }
    found
}

/// A JSON string's text up to its closing quote (`s` starts after the
/// opening one): the unescaped value and the bytes used, quote included.
fn parse_json_string(s: &str) -> Option<(String, usize)> {
    let mut value = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((value, i + 1)),
            '\\' => match chars.next()?.1 {
                'n' => value.push('\n'),
                't' => value.push('\t'),
                'r' => value.push('\r'),
                'u' => {
                    let hex: String = (0..4).filter_map(|_| chars.next().map(|(_, h)| h)).collect();
                    value.push(u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32).unwrap_or('\u{fffd}'));
                }
                other => value.push(other),
            },
            c => value.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cargo_messages() {
        let line = r#"{"reason":"build-script-executed","package_id":"path+file:///src/crates/verbs-backend#railwatch-verbs-backend@0.1.0","out_dir":"/t/debug/build/x-1/out","env":[]}"#;
        assert_eq!(json_string(line, "reason").as_deref(), Some("build-script-executed"));
        assert_eq!(json_string(line, "out_dir").as_deref(), Some("/t/debug/build/x-1/out"));
        assert!(names_package(&json_string(line, "package_id").unwrap(), "railwatch-verbs-backend"));
        assert!(!names_package("path+file:///src/crates/ffi#railwatch-ffi@0.1.0", "railwatch"));
        assert!(names_package("railwatch-ffi 0.1.0 (path+file:///src/crates/ffi)", "railwatch-ffi"));
        assert!(names_package("path+file:///src/railwatch-ffi#0.1.0", "railwatch-ffi"));
        assert!(!names_package("path+file:///src/railwatch-ffi#0.1.0", "railwatch"));
        let art =
            r#"{"reason":"compiler-artifact","filenames":["/t/debug/librailwatch.so","/t/d\"q/librailwatch.a"],"x":1}"#;
        assert_eq!(json_strings(art, "filenames"), ["/t/debug/librailwatch.so", "/t/d\"q/librailwatch.a"]);
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
