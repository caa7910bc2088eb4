//! `cargo xtask abi [--bless]`: the C API's ABI against a recorded baseline.
//!
//! `abidw` (libabigail) writes the ABI of the dist build's
//! `librailwatch.so` ([`Profile::Dist`], whose debug info it reads): the
//! exported functions and every type they reach. `abidiff` compares it
//! with the baseline, `crates/ffi/abi/librailwatch-VERSION.abi` (one
//! file; VERSION is the C API's when it was recorded):
//!
//! - no change: passes;
//! - only additions (functions or variables added, nothing removed or
//!   changed): passes, printing them;
//! - anything else (a function removed, a type it reaches changed, the
//!   soname changed): fails, unless the C API's version has moved past
//!   the baseline's (before 1.0 a later minor, from 1.0 a later major),
//!   when it passes and says to record the baseline again.
//!
//! `--bless` records the current build's ABI as the baseline, replacing
//! the one there; it writes it twice and requires the same bytes.
//!
//! The public headers cannot scope the comparison: rustc's debug info
//! gives a type no declaring file, so abidw's `--headers-dir` and
//! `--drop-private-types` leave everything as it is. What scopes it is
//! what the library exports (only the C API's `rw_` functions), and the
//! opaque handles: the types the headers declare and never define
//! (`typedef struct rw_machine rw_machine;`) are Rust structs whose
//! fields are no ABI, so changes in them are suppressed ([`opaque`]).
//! Dropping them from abidw's output instead would drop the parameters
//! that point to them too.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::library::{self, Profile};
use crate::run::{root, target_dir};

/// Where the baseline is, from the workspace root.
const BASELINE_DIR: &str = "crates/ffi/abi";

/// abidw's options: nothing of this machine or this checkout (paths,
/// source locations) and type ids that are hashes of the types, so the
/// same build gives the same file.
const ABIDW_ARGS: [&str; 6] =
    ["--no-corpus-path", "--no-comp-dir-path", "--no-show-locs", "--drop-undefined-syms", "--type-id-style", "hash"];

/// `cargo xtask abi [--bless]`.
pub fn run(args: &[String]) -> Result<(), String> {
    let bless = match args {
        [] => false,
        [flag] if flag == "--bless" => true,
        _ => return Err("abi: usage: cargo xtask abi [--bless]".into()),
    };
    let built = library::build(Profile::Dist)?;
    let out = target_dir().join("abi");
    std::fs::create_dir_all(&out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let current = out.join(file_name(&built.version));
    let so = built.lib_dir.join("librailwatch.so");
    abidw(&so, &current)?;
    if bless {
        return record(&so, &current, &built.version, &out);
    }
    let (baseline, recorded) = baseline()?;
    let suppressions = out.join("opaque.supp");
    write(&suppressions, &opaque()?)?;
    let (code, report) = abidiff(&baseline, &current, &suppressions)?;
    verdict(classify(code, &report)?, &report, &recorded, &built.version)
}

/// The baseline's file name for `version`.
fn file_name(version: &str) -> String {
    format!("librailwatch-{version}.abi")
}

/// Runs abidw on `so`, its ABI into `to`.
fn abidw(so: &Path, to: &Path) -> Result<(), String> {
    let mut cmd = Command::new("abidw");
    cmd.args(ABIDW_ARGS).arg("--out-file").arg(to).arg(so);
    eprintln!("==> abi: {cmd:?}");
    let out = cmd.output().map_err(|e| format!("abi: cannot run abidw ({e}): cargo xtask deps installs it"))?;
    if !out.status.success() {
        return Err(format!("abi: abidw failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr)));
    }
    Ok(())
}

/// Makes `current` (the ABI of `so`) the baseline of `version`, after a
/// second abidw gave the same bytes; removes the earlier baseline.
fn record(so: &Path, current: &Path, version: &str, out: &Path) -> Result<(), String> {
    let again = out.join("again.abi");
    abidw(so, &again)?;
    let (first, second) = (read(current)?, read(&again)?);
    if first != second {
        return Err(format!(
            "abi: abidw wrote {} and {} differently from one build",
            current.display(),
            again.display()
        ));
    }
    let dir = root().join(BASELINE_DIR);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for old in baselines(&dir)? {
        std::fs::remove_file(&old).map_err(|e| format!("cannot remove {}: {e}", old.display()))?;
    }
    let to = dir.join(file_name(version));
    write(&to, &first)?;
    eprintln!("==> abi: recorded the ABI of railwatch {version} in {BASELINE_DIR}/{}", file_name(version));
    Ok(())
}

/// The `librailwatch-*.abi` files in `dir`.
fn baselines(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(Vec::new()) };
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| recorded_version(n).is_some()))
        .collect();
    found.sort();
    Ok(found)
}

/// The version in a baseline's file name (`librailwatch-0.2.0.abi`).
fn recorded_version(name: &str) -> Option<String> {
    let version = name.strip_prefix("librailwatch-")?.strip_suffix(".abi")?;
    version.starts_with(|c: char| c.is_ascii_digit()).then(|| version.to_string())
}

/// The baseline and the version it was recorded at.
fn baseline() -> Result<(PathBuf, String), String> {
    let dir = root().join(BASELINE_DIR);
    match &baselines(&dir)?[..] {
        [one] => {
            let name = one.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            Ok((one.clone(), recorded_version(name).unwrap_or_default()))
        }
        [] => Err(format!("abi: no baseline in {BASELINE_DIR}: record one with cargo xtask abi --bless")),
        many => Err(format!("abi: {} baselines in {BASELINE_DIR}, one is kept: cargo xtask abi --bless", many.len())),
    }
}

/// The suppressions of the opaque handles: the `typedef struct X X;` of
/// the public headers with no `struct X {` in any of them.
fn opaque() -> Result<String, String> {
    let dir = root().join("crates/ffi/include");
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut text = String::new();
    for path in entries.flatten().map(|e| e.path()) {
        if matches!(path.extension().and_then(|e| e.to_str()), Some("h" | "hpp")) {
            text.push_str(&read(&path)?);
        }
    }
    let mut names: Vec<&str> = text
        .lines()
        .filter_map(|l| {
            let rest = l.trim().strip_prefix("typedef struct ")?.strip_suffix(';')?;
            let (tag, alias) = rest.split_once(' ')?;
            (tag == alias.trim()).then_some(tag)
        })
        .filter(|tag| !text.contains(&format!("struct {tag} {{")))
        .collect();
    names.sort_unstable();
    names.dedup();
    if names.is_empty() {
        return Err("abi: the headers declare no opaque handle (typedef struct X X;)".into());
    }
    Ok(format!(
        "# The C API's opaque handles, declared and never defined in the\n\
         # headers: their Rust insides are no ABI.\n\
         [suppress_type]\n  name_regexp = ^(.*::)?({})$\n",
        names.join("|")
    ))
}

/// Runs abidiff: its exit code and report.
fn abidiff(baseline: &Path, current: &Path, suppressions: &Path) -> Result<(i32, String), String> {
    let mut cmd = Command::new("abidiff");
    cmd.arg("--suppressions").arg(suppressions).arg(baseline).arg(current);
    eprintln!("==> abi: {cmd:?}");
    let out = cmd.output().map_err(|e| format!("abi: cannot run abidiff ({e}): cargo xtask deps installs it"))?;
    let report = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let code = out.status.code().ok_or_else(|| format!("abi: abidiff was killed ({})", out.status))?;
    Ok((code, report))
}

/// What abidiff found.
#[derive(Debug, PartialEq, Eq)]
enum Change {
    None,
    /// Functions or variables added, nothing else.
    Additions,
    /// Anything removed or changed.
    Incompatible,
}

/// abidiff's exit code's bits.
const ABIDIFF_ERROR: i32 = 1 | 2;
const ABIDIFF_ABI_CHANGE: i32 = 4;
const ABIDIFF_ABI_INCOMPATIBLE_CHANGE: i32 = 8;

/// The change abidiff's exit `code` and `report` say. abidiff counts a
/// changed type (a struct's layout) as a change, not as incompatible: any
/// `N Removed` or `N Changed` in its summaries, N > 0, is one here.
fn classify(code: i32, report: &str) -> Result<Change, String> {
    if code & ABIDIFF_ERROR != 0 {
        return Err(format!("abi: abidiff failed (exit code {code}): {report}"));
    }
    if code & ABIDIFF_ABI_INCOMPATIBLE_CHANGE != 0 {
        return Ok(Change::Incompatible);
    }
    if code & ABIDIFF_ABI_CHANGE == 0 {
        return Ok(Change::None);
    }
    let counted = |part: &str, kind: &str| {
        let mut words = part.split_whitespace();
        words.next().and_then(|n| n.parse::<u64>().ok()).filter(|_| words.next() == Some(kind)).unwrap_or(0)
    };
    let removed_or_changed: u64 = report
        .lines()
        .filter_map(|l| l.split_once("changes summary:").map(|(_, s)| s))
        .flat_map(|s| s.split(','))
        .map(|part| counted(part, "Removed") + counted(part, "Changed"))
        .sum();
    Ok(if removed_or_changed > 0 { Change::Incompatible } else { Change::Additions })
}

/// A version's ABI epoch: (0, minor) before 1.0, (major, 0) from it.
fn epoch(version: &str) -> (u64, u64) {
    let mut parts = version.split('.').map(|p| p.parse::<u64>().unwrap_or(0));
    match (parts.next().unwrap_or(0), parts.next().unwrap_or(0)) {
        (0, minor) => (0, minor),
        (major, _) => (major, 0),
    }
}

/// Passes or fails on `change`, printing abidiff's `report` when there
/// is one.
fn verdict(change: Change, report: &str, recorded: &str, version: &str) -> Result<(), String> {
    if change != Change::None {
        eprintln!("==> abi: abidiff against the baseline of {recorded}:\n{report}");
    }
    match change {
        Change::None => eprintln!("==> abi: the ABI of railwatch {version} is the baseline's ({recorded})"),
        Change::Additions => eprintln!("==> abi: only additions to the baseline's ABI ({recorded}): compatible"),
        Change::Incompatible if epoch(version) > epoch(recorded) => eprintln!(
            "==> abi: an incompatible change, which {version} may make after {recorded}: \
             record the new baseline with cargo xtask abi --bless"
        ),
        Change::Incompatible => {
            return Err(format!(
                "abi: an incompatible change to the ABI of {recorded} (abidiff's report above), and the C API is \
                 still {version}: undo it, or move crates/ffi/Cargo.toml's version to the next {} and record the \
                 baseline with cargo xtask abi --bless",
                if epoch(version).0 == 0 { "minor (0.x)" } else { "major" }
            ));
        }
    }
    Ok(())
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_abidiffs_answers() {
        let added = "Functions changes summary: 0 Removed, 0 Changed, 1 Added function\n\
                     Variables changes summary: 0 Removed, 0 Changed, 0 Added variable\n";
        let changed = "Functions changes summary: 0 Removed, 1 Changed (3 filtered out), 0 Added function\n";
        assert_eq!(classify(0, ""), Ok(Change::None));
        assert_eq!(classify(4, added), Ok(Change::Additions));
        assert_eq!(classify(4, changed), Ok(Change::Incompatible));
        assert_eq!(classify(12, added), Ok(Change::Incompatible));
        assert!(classify(1, "error").is_err());
    }

    #[test]
    fn a_break_is_allowed_by_the_next_minor_before_1_0_and_the_next_major_after() {
        assert!(epoch("0.3.0") > epoch("0.2.5"));
        assert!(epoch("0.2.9") == epoch("0.2.0"));
        assert!(epoch("1.9.0") == epoch("1.0.0"));
        assert!(epoch("2.0.0") > epoch("1.9.0"));
        assert!(verdict(Change::Incompatible, "", "0.2.0", "0.2.1").is_err());
        assert!(verdict(Change::Incompatible, "", "0.2.0", "0.3.0").is_ok());
        assert!(verdict(Change::Additions, "", "0.2.0", "0.2.0").is_ok());
    }

    #[test]
    fn names_baselines_by_version() {
        assert_eq!(recorded_version(&file_name("0.2.0")).as_deref(), Some("0.2.0"));
        assert_eq!(recorded_version("librailwatch-x.abi"), None);
        assert_eq!(recorded_version("notes.txt"), None);
    }
}
