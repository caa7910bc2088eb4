//! The Debian package: the `railwatch` binary built with `verbs` in the
//! dist profile (the C library's profile and flags, so `cargo xtask
//! package` builds the shared dependencies once), its man pages and
//! completions written by the binary itself (`railwatch generate`), then
//! `cargo deb --no-build` with crates/cli/Cargo.toml's
//! `[package.metadata.deb]`, and lintian.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::library::{fake_dir, messages, remapped_paths};
use crate::run::{cargo, root, step, target_dir};

/// cargo-deb's versions this is written for (`cargo install` when missing).
const CARGO_DEB: &str = "^3.8";

/// A built package.
pub struct Deb {
    /// `target/debian/railwatch_<version>_<arch>.deb`.
    pub path: PathBuf,
    /// The package's version (`0.1.0-1`).
    pub version: String,
    /// The crate's (`0.1.0`): what `railwatch --version` says.
    pub upstream: String,
    /// The fake libibverbs's directory (the container runs under it).
    pub fake_dir: PathBuf,
}

/// Builds the package and runs lintian on it.
pub fn build() -> Result<Deb, String> {
    ensure_cargo_deb(None)?;
    let (bin, fake_dir) = build_binary()?;
    let upstream = crate_version(&bin)?;
    let changelog = std::fs::read_to_string(root().join("crates/cli/debian/changelog")).map_err(|e| e.to_string())?;
    let version = changelog_version(&changelog).ok_or("crates/cli/debian/changelog: no version on its first line")?;
    if version.rsplit_once('-').map(|(up, _)| up) != Some(upstream.as_str()) {
        return Err(format!(
            "crates/cli/debian/changelog's first entry is {version}, the crate is {upstream}: add an entry for it"
        ));
    }
    generate(&bin)?;
    let out_dir = target_dir().join("debian");
    let _ = std::fs::remove_dir_all(&out_dir);
    let mut deb = cargo();
    deb.args(["deb", "-p", "railwatch", "--no-build", "--profile", "dist", "--strip", "--deb-version", &version])
        .arg("-o")
        .arg(&out_dir);
    step("deb: cargo deb", &mut deb)?;
    let path = std::fs::read_dir(&out_dir)
        .map_err(|e| format!("{}: {e}", out_dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .ok_or("deb: cargo deb wrote no .deb")?;
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    eprintln!("==> deb: {} ({:.2} MB)", path.display(), size as f64 / 1e6);
    lintian(&path)?;
    Ok(Deb { path, version, upstream, fake_dir })
}

/// `cargo deb` (cargo-deb), installed when missing; `log` takes the
/// install's output (CI starts it beside the tests: `ci::side_jobs`).
pub fn ensure_cargo_deb(log: Option<&std::fs::File>) -> Result<(), String> {
    let have = cargo().args(["deb", "--version"]).output().is_ok_and(|o| o.status.success());
    if have {
        return Ok(());
    }
    let mut install = cargo();
    install.args(["install", "cargo-deb", "--locked", "--version", CARGO_DEB]);
    if let Some(log) = log {
        let clone = || log.try_clone().map_err(|e| format!("side log: {e}"));
        install.stdout(clone()?).stderr(clone()?);
    }
    step("deb: install cargo-deb", &mut install)
}

/// The cargo command that builds the binary in the dist profile with
/// `verbs`, with the library's flags (so each shares the other's build).
fn binary_command() -> Command {
    let mut cmd = cargo();
    cmd.args(["build", "-p", "railwatch", "--bin", "railwatch", "--features", "verbs", "--profile", "dist"])
        .arg("--message-format=json")
        .env("CARGO_ENCODED_RUSTFLAGS", remapped_paths().join("\u{1f}"));
    cmd
}

/// The binary built ahead, its output into `log`: CI builds it among the
/// side jobs, beside the tests (whose builds are another profile's, with a
/// lock of their own), so the `deb` phase finds it built.
pub fn prebuild(log: &std::fs::File) -> Result<(), String> {
    let clone = || log.try_clone().map_err(|e| format!("side log: {e}"));
    step("deb: build railwatch (dist, verbs)", binary_command().stdout(clone()?).stderr(clone()?))
}

/// The binary, and the fake libibverbs's directory, from cargo's messages.
fn build_binary() -> Result<(PathBuf, PathBuf), String> {
    let mut cmd = binary_command();
    cmd.stdout(Stdio::piped()).stderr(Stdio::inherit());
    eprintln!("==> deb: build railwatch: {cmd:?}");
    let out = cmd.output().map_err(|e| format!("build railwatch: cannot start: {e}"))?;
    if !out.status.success() {
        return Err(format!("build railwatch failed ({})", out.status));
    }
    let messages = messages(&out.stdout);
    let bin = messages
        .iter()
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "railwatch")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .ok_or("build railwatch: cargo named no executable")?;
    let fake = fake_dir(&messages).ok_or("build railwatch: no output of railwatch-verbs-backend's build script")?;
    Ok((bin, fake))
}

/// `railwatch --version`'s version.
fn crate_version(bin: &Path) -> Result<String, String> {
    let out = Command::new(bin).arg("--version").output().map_err(|e| format!("{}: {e}", bin.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace().nth(1).map(str::to_owned).ok_or_else(|| format!("railwatch --version said {text:?}"))
}

/// The version of a Debian changelog's first entry: `railwatch (V) ...`.
pub fn changelog_version(text: &str) -> Option<String> {
    let line = text.lines().next()?;
    let start = line.find('(')? + 1;
    let end = line[start..].find(')')? + start;
    Some(line[start..end].to_owned())
}

/// The man pages (gzipped, as Debian ships them) and completions, where
/// the package's assets name them: `target/release/generated/` stands for
/// the dist profile's directory.
fn generate(bin: &Path) -> Result<(), String> {
    let dir = target_dir().join("dist/generated");
    let _ = std::fs::remove_dir_all(&dir);
    let man = dir.join("man");
    let quiet = |cmd: &mut Command| {
        cmd.stdout(Stdio::null());
    };
    let mut gen_man = Command::new(bin);
    gen_man.args(["generate", "man"]).arg(&man);
    quiet(&mut gen_man);
    step("deb: man pages", &mut gen_man)?;
    let mut pages: Vec<PathBuf> = std::fs::read_dir(&man)
        .map_err(|e| format!("{}: {e}", man.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    pages.sort();
    // -n: no name or time stamp in the archive, the same bytes every build.
    step("deb: gzip the man pages", Command::new("gzip").args(["-9nf"]).args(&pages))?;
    let mut gen_completions = Command::new(bin);
    gen_completions.args(["generate", "completions"]).arg(dir.join("completions"));
    quiet(&mut gen_completions);
    step("deb: completions", &mut gen_completions)
}

/// lintian on the package: its tags printed; an error or a warning that
/// is not overridden fails (crates/cli/debian/lintian-overrides says why
/// each override is there).
fn lintian(deb: &Path) -> Result<(), String> {
    let out = Command::new("lintian")
        .args(["--display-info", "--display-experimental", "--pedantic", "--fail-on", "error,warning"])
        .arg(deb)
        .output()
        .map_err(|e| format!("lintian: cannot start: {e} (cargo xtask deps installs it)"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let tags: Vec<&str> =
        text.lines().filter(|l| ["E: ", "W: ", "I: ", "P: ", "X: "].iter().any(|p| l.starts_with(p))).collect();
    eprintln!("==> deb: lintian: {} tag(s) not overridden", tags.len());
    for line in &tags {
        eprintln!("    {line}");
    }
    if !out.status.success() {
        return Err(format!(
            "lintian failed ({}): an error or warning above, or: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_the_changelogs_version() {
        let text = "railwatch (0.1.0-1) unstable; urgency=medium\n\n  * x\n";
        assert_eq!(super::changelog_version(text).as_deref(), Some("0.1.0-1"));
        assert_eq!(super::changelog_version("nothing"), None);
    }
}
