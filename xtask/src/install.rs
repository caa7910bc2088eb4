//! `cargo xtask install --prefix DIR`: the C API installed as a package.
//!
//! Builds railwatch-ffi with `verbs` in the dist profile ([`Profile::Dist`])
//! and installs, without debug info (`strip --strip-debug` on the copies;
//! the build keeps it for `cargo xtask abi`):
//!
//! - `include/railwatch/`: every header of `crates/ffi/include/`;
//! - `lib/librailwatch.so.VERSION`, its soname `lib/librailwatch.so.0.MINOR`
//!   (from 1.0 `.so.MAJOR`) and `lib/librailwatch.so`, symlinks to it;
//! - `lib/librailwatch.a`;
//! - `lib/cmake/railwatch/railwatchConfig.cmake` and
//!   `railwatchConfigVersion.cmake`, and `lib/pkgconfig/railwatch.pc`,
//!   written from `crates/ffi/dist/` by its `configure.cmake`.
//!
//! It prints the installed libraries' sizes.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::library::{self, Built, Profile, soname};
use crate::run::{root, step};

/// `cargo xtask install --prefix DIR`.
pub fn run(args: &[String]) -> Result<(), String> {
    let prefix = match args {
        [flag, dir] if flag == "--prefix" => PathBuf::from(dir),
        _ => return Err("install: usage: cargo xtask install --prefix DIR".into()),
    };
    let built = library::build(Profile::Dist)?;
    let prefix = install(&built, &prefix)?;
    eprintln!("==> install: railwatch {} in {}", built.version, prefix.display());
    Ok(())
}

/// Installs the dist build `built` into `prefix` (made if missing),
/// replacing what an earlier install put there: the prefix, absolute.
pub fn install(built: &Built, prefix: &Path) -> Result<PathBuf, String> {
    let mkdir = |dir: &Path| std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()));
    mkdir(prefix)?;
    let prefix = prefix.canonicalize().map_err(|e| format!("{}: {e}", prefix.display()))?;
    let (include, lib) = (prefix.join("include/railwatch"), prefix.join("lib"));
    mkdir(&include)?;
    mkdir(&lib)?;
    for header in headers()? {
        let name = header.file_name().unwrap_or_default();
        copy(&header, &include.join(name))?;
    }
    let soname = soname(&built.version);
    let shared = lib.join(format!("librailwatch.so.{}", built.version));
    let archive = lib.join("librailwatch.a");
    copy(&built.lib_dir.join("librailwatch.so"), &shared)?;
    copy(&built.lib_dir.join("librailwatch.a"), &archive)?;
    step("strip the debug info", Command::new("strip").arg("--strip-debug").arg(&shared).arg(&archive))?;
    let real = shared.file_name().unwrap_or_default();
    symlink(Path::new(real), &lib.join(&soname))?;
    symlink(Path::new(&soname), &lib.join("librailwatch.so"))?;
    step(
        "write the CMake package and railwatch.pc",
        Command::new("cmake")
            .arg(format!("-DPREFIX={}", prefix.display()))
            .arg(format!("-DVERSION={}", built.version))
            .arg(format!("-DSONAME={soname}"))
            .arg(format!("-DCMAKE_SIZEOF_VOID_P={}", std::mem::size_of::<usize>()))
            .arg("-P")
            .arg(root().join("crates/ffi/dist/configure.cmake")),
    )?;
    for file in [&shared, &archive] {
        let bytes = std::fs::metadata(file).map_err(|e| format!("{}: {e}", file.display()))?.len();
        eprintln!("==> install: {}: {bytes} bytes ({:.2} MB)", file.display(), bytes as f64 / 1e6);
    }
    Ok(prefix)
}

/// Every header of `crates/ffi/include/` (`*.h`, `*.hpp`), sorted.
fn headers() -> Result<Vec<PathBuf>, String> {
    let dir = root().join("crates/ffi/include");
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("h" | "hpp")))
        .collect();
    found.sort();
    if found.is_empty() {
        return Err(format!("install: no headers in {}", dir.display()));
    }
    Ok(found)
}

/// Copies `from` to `to`, replacing it (a symlink there is replaced, not
/// followed).
fn copy(from: &Path, to: &Path) -> Result<(), String> {
    let _ = std::fs::remove_file(to);
    std::fs::copy(from, to).map(drop).map_err(|e| format!("cannot copy {} to {}: {e}", from.display(), to.display()))
}

/// Makes `link` a symlink to `target`, replacing what was there.
fn symlink(target: &Path, link: &Path) -> Result<(), String> {
    let _ = std::fs::remove_file(link);
    std::os::unix::fs::symlink(target, link).map_err(|e| format!("cannot link {}: {e}", link.display()))
}
