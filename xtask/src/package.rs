//! `cargo xtask package`: the installed package, used as a program would.
//!
//! Installs the dist build into `target/package/prefix` ([`install`]),
//! then builds `crates/ffi/tests/package/main.c` four ways against it and
//! runs each under the fake libibverbs: with CMake
//! (`crates/ffi/tests/package/CMakeLists.txt`: `find_package`, then
//! `railwatch::railwatch` and `railwatch::railwatch_static`) and with
//! `pkg-config --cflags --libs railwatch` (and `--static`, the archive
//! named in place of `-lrailwatch`). The shared builds must need the
//! library by its soname, the static ones not at all; `find_package` of
//! a newer minor (major from 1.0) than the installed must fail.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::ffi::run_counted;
use crate::install::install;
use crate::library::{self, Profile, soname};
use crate::run::{root, step, target_dir};

/// `cargo xtask package`.
pub fn run() -> Result<(), String> {
    let started = Instant::now();
    let built = library::build(Profile::Dist)?;
    let out = target_dir().join("package");
    let _ = std::fs::remove_dir_all(&out);
    let prefix = install(&built, &out.join("prefix"))?;
    let version = &built.version;
    let ld_path = format!("{}:{}", built.fake_dir.display(), prefix.join("lib").display());
    let mut binaries = with_cmake(&prefix, version, &out)?;
    binaries.extend(with_pkg_config(&prefix, version, &out)?);
    let soname = soname(version);
    for (bin, shared) in &binaries {
        needs_soname(bin, &soname, *shared)?;
        let label = format!("package: {}", bin.file_name().unwrap_or_default().to_string_lossy());
        let r = run_counted(Command::new(bin).env("LD_LIBRARY_PATH", &ld_path), &label)?;
        if let Some(why) = r.problem(false) {
            return Err(format!("{label}: {why}"));
        }
        eprintln!("==> {label}: {} checks passed", r.passed);
    }
    eprintln!(
        "==> package: installed, built {} ways and run in {:.1} s",
        binaries.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// MAJOR.MINOR of `version`, and the next version that must not be
/// compatible with it (0.x: the next minor; from 1.0 the next major).
fn wanted(version: &str) -> (String, String) {
    let mut parts = version.split('.').map(|p| p.parse::<u64>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    let newer = if major == 0 { format!("0.{}", minor + 1) } else { format!("{}.0", major + 1) };
    (format!("{major}.{minor}"), newer)
}

/// `cmake` configuring the consumer project against `prefix` and asking
/// for version `wanted`.
fn configure(prefix: &Path, wanted: &str, build: &Path) -> Command {
    let mut cmd = Command::new("cmake");
    cmd.arg("-S")
        .arg(root().join("crates/ffi/tests/package"))
        .arg("-B")
        .arg(build)
        .arg(format!("-DCMAKE_PREFIX_PATH={}", prefix.display()))
        .arg(format!("-DRAILWATCH_WANTED={wanted}"));
    cmd
}

/// Configures and builds the consumer project: its two binaries, and
/// whether each is the shared link.
fn with_cmake(prefix: &Path, version: &str, out: &Path) -> Result<Vec<(PathBuf, bool)>, String> {
    let (same, newer) = wanted(version);
    let refused = out.join("cmake-newer");
    let status =
        configure(prefix, &newer, &refused).output().map_err(|e| format!("package: cannot run cmake: {e}"))?.status;
    if status.success() {
        return Err(format!("package: find_package(railwatch {newer}) accepted the installed {version}"));
    }
    eprintln!("==> package: find_package(railwatch {newer}) refuses {version}, as it must");
    let build = out.join("cmake");
    step("package: cmake configure", &mut configure(prefix, &same, &build))?;
    step("package: cmake build", Command::new("cmake").arg("--build").arg(&build))?;
    Ok(vec![(build.join("consumer"), true), (build.join("consumer_static"), false)])
}

/// `pkg-config ARGS railwatch` against the prefix, split into words.
fn pkg_config(prefix: &Path, args: &[&str]) -> Result<Vec<String>, String> {
    let out = Command::new("pkg-config")
        .args(args)
        .arg("railwatch")
        .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig"))
        .output()
        .map_err(|e| format!("package: cannot run pkg-config: {e}"))?;
    if !out.status.success() {
        return Err(format!("package: pkg-config {args:?} railwatch failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    Ok(String::from_utf8_lossy(&out.stdout).split_whitespace().map(String::from).collect())
}

/// Compiles main.c with what pkg-config says, linked shared and static
/// (the archive by name, `-l:librailwatch.a`, and `--static`'s private
/// libraries).
fn with_pkg_config(prefix: &Path, version: &str, out: &Path) -> Result<Vec<(PathBuf, bool)>, String> {
    let modversion = pkg_config(prefix, &["--modversion"])?.join(" ");
    if modversion != version {
        return Err(format!("package: pkg-config --modversion says {modversion:?}, the library is {version}"));
    }
    let main = root().join("crates/ffi/tests/package/main.c");
    let mut built = Vec::new();
    for (name, shared) in [("pkg_config", true), ("pkg_config_static", false)] {
        let flags = if shared {
            pkg_config(prefix, &["--cflags", "--libs"])?
        } else {
            let words = pkg_config(prefix, &["--cflags", "--libs", "--static"])?;
            words.into_iter().map(|w| if w == "-lrailwatch" { "-l:librailwatch.a".into() } else { w }).collect()
        };
        let bin = out.join(name);
        step(
            &format!("package: compile with pkg-config ({name})"),
            Command::new("cc")
                .args(["-std=c11", "-Wall", "-Wextra", "-Wpedantic", "-Werror"])
                .arg(format!("-DRAILWATCH_EXPECT=\"{version}\""))
                .arg(&main)
                .arg("-o")
                .arg(&bin)
                .args(&flags),
        )?;
        built.push((bin, shared));
    }
    Ok(built)
}

/// That `bin` needs the library by `soname` (`shared`), or not at all.
fn needs_soname(bin: &Path, soname: &str, shared: bool) -> Result<(), String> {
    let out =
        Command::new("readelf").arg("-d").arg(bin).output().map_err(|e| format!("package: cannot run readelf: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let needed: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| l.split('[').nth(1)?.split(']').next())
        .filter(|lib| lib.starts_with("librailwatch"))
        .collect();
    let expected: &[&str] = if shared { &[soname] } else { &[] };
    if needed != expected {
        return Err(format!("package: {} needs {needed:?} of railwatch, not {expected:?}", bin.display()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn asks_for_the_same_minor_and_a_newer_one() {
        assert_eq!(super::wanted("0.2.0"), ("0.2".into(), "0.3".into()));
        assert_eq!(super::wanted("1.4.2"), ("1.4".into(), "2.0".into()));
    }
}
