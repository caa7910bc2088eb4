//! A clean Debian root, as an operator's host starts: built by mmdebstrap
//! from the archive this host's apt uses (its sources files, read at run
//! time), cached outside the work tree, and unpacked afresh for each run.
//!
//! The root is the `apt` variant (Essential packages and apt) with
//! `systemd` (`systemctl is-enabled`, `systemd-analyze verify`) and
//! `man-db` (the pages read as an operator reads them), as a server has
//! them. It keeps apt's package lists, and the packages railwatch's
//! depend on are downloaded into apt's cache (not installed), so `apt
//! install ./railwatch_*.deb` resolves them as on any host and the test
//! needs no network.
//!
//! The cache: `$RAILWATCH_CACHE_DIR`, else `$XDG_CACHE_HOME/railwatch`,
//! else `~/.cache/railwatch`; the root is `debian-root/<suite>-<key>.tar`
//! (about 300 MB), its key a hash of what it is built from, an older one
//! removed when a new one is made. Building it takes about a minute.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::run::step;

/// What the root has besides the `apt` variant.
const INCLUDE: &str = "systemd,man-db";
/// What is downloaded into the root's apt cache for the install.
pub const DEPENDENCIES: [&str; 2] = ["libibverbs1", "ibverbs-providers"];

/// The cache directory (see the module's doc).
pub fn cache_dir() -> Result<PathBuf, String> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("RAILWATCH_CACHE_DIR")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("railwatch")))
        .or_else(|| var("HOME").map(|d| d.join(".cache/railwatch")))
        .ok_or_else(|| "no cache directory: set RAILWATCH_CACHE_DIR".to_owned())
}

/// This host's release codename (`bookworm`), from /etc/os-release.
fn suite() -> Result<String, String> {
    let text = std::fs::read_to_string("/etc/os-release").map_err(|e| format!("/etc/os-release: {e}"))?;
    text.lines()
        .find_map(|l| l.strip_prefix("VERSION_CODENAME="))
        .map(|v| v.trim_matches('"').to_owned())
        .filter(|v| !v.is_empty())
        .ok_or_else(|| "/etc/os-release names no VERSION_CODENAME".to_owned())
}

/// The host's apt sources files (one-line `.list` and deb822 `.sources`),
/// which mmdebstrap copies into the root.
fn sources() -> Result<Vec<PathBuf>, String> {
    let mut files = vec![PathBuf::from("/etc/apt/sources.list")];
    if let Ok(dir) = std::fs::read_dir("/etc/apt/sources.list.d") {
        let mut more: Vec<PathBuf> = dir
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "list" || x == "sources"))
            .collect();
        more.sort();
        files.extend(more);
    }
    let used: Vec<PathBuf> = files
        .into_iter()
        .filter(|p| {
            std::fs::read_to_string(p).is_ok_and(|t| t.lines().any(|l| !l.trim().is_empty() && !l.starts_with('#')))
        })
        .collect();
    if used.is_empty() {
        return Err("this host's apt has no sources (/etc/apt/sources.list, sources.list.d/)".into());
    }
    Ok(used)
}

/// The mmdebstrap command that builds the root into `out`.
fn command(suite: &str, sources: &[PathBuf], out: &Path) -> Command {
    let mut cmd = Command::new("mmdebstrap");
    cmd.args([
        "--variant=apt",
        "--format=tar",
        "--include",
        INCLUDE,
        "--skip=cleanup/apt/lists",
        "--skip=cleanup/apt/cache",
    ])
    // The base system's packages out of the cache, then the
    // dependencies in, for the offline install.
    .arg("--customize-hook=rm -f \"$1\"/var/cache/apt/archives/*.deb")
    .arg(format!("--customize-hook=chroot \"$1\" apt-get install --download-only -y -q {}", DEPENDENCIES.join(" ")))
    .arg(suite)
    .arg(out)
    .args(sources);
    cmd
}

/// FNV-1a of the parts: the cache key.
fn key(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in part.iter().chain(&[0xff]) {
            h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// The cached root's tarball, built first when missing.
pub fn tarball() -> Result<PathBuf, String> {
    let suite = suite()?;
    let sources = sources()?;
    let mut parts: Vec<Vec<u8>> = vec![suite.clone().into_bytes(), INCLUDE.into(), DEPENDENCIES.join(" ").into()];
    for s in &sources {
        parts.push(std::fs::read(s).map_err(|e| format!("{}: {e}", s.display()))?);
    }
    let dir = cache_dir()?.join("debian-root");
    let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
    let tar = dir.join(format!("{suite}-{:016x}.tar", key(&refs)));
    if tar.is_file() {
        eprintln!("==> deb: Debian root {} (cached)", tar.display());
        return Ok(tar);
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let partial = tar.with_extension("tar.partial");
    let started = std::time::Instant::now();
    step("deb: build the Debian root (mmdebstrap)", &mut command(&suite, &sources, &partial))?;
    std::fs::rename(&partial, &tar).map_err(|e| format!("{}: {e}", tar.display()))?;
    for old in std::fs::read_dir(&dir).map_err(|e| e.to_string())?.flatten() {
        if old.path() != tar {
            let _ = std::fs::remove_file(old.path());
        }
    }
    eprintln!("==> deb: Debian root built in {:.0} s: {}", started.elapsed().as_secs_f64(), tar.display());
    Ok(tar)
}

/// The root unpacked afresh at `dir`.
pub fn unpack(tar: &Path, dir: &Path) -> Result<(), String> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    step("deb: unpack the Debian root", Command::new("tar").arg("-C").arg(dir).arg("-xf").arg(tar))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_key_depends_on_every_part_and_their_bounds() {
        assert_eq!(super::key(&[b"a", b"b"]), super::key(&[b"a", b"b"]));
        assert_ne!(super::key(&[b"a", b"b"]), super::key(&[b"ab"]));
        assert_ne!(super::key(&[b"a"]), super::key(&[b"b"]));
    }
}
