//! The C programs under valgrind: its options, its suppressions and its
//! verdict.
//!
//! `crates/ffi/valgrind.supp` holds what valgrind reports that is no fault
//! of the program's: each entry says why beside it, as a `#` comment
//! right above it (a test here fails on an entry without one).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Valgrind's options, as crates/ffi/README.md states them: every leak
/// valgrind reports by default ("definitely" and "possibly" lost) and
/// every memory error fails the run.
const ARGS: [&str; 2] = ["--leak-check=full", "--error-exitcode=99"];

/// The suppressions file, from the workspace root.
const SUPPRESSIONS: &str = "crates/ffi/valgrind.supp";

/// The path of valgrind, or an error saying how to get it.
pub fn find() -> Result<PathBuf, String> {
    let out = Command::new("which").arg("valgrind").output().map_err(|e| format!("ffi: cannot run which: {e}"))?;
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || path.is_empty() {
        return Err("ffi: valgrind not found (cargo xtask deps installs it; --no-valgrind skips it)".into());
    }
    Ok(PathBuf::from(path))
}

/// `valgrind` with the README's options and the suppressions, its report
/// into `log`; the program and its arguments are the caller's to add.
pub fn command(valgrind: &Path, root: &Path, log: &Path) -> Command {
    let mut cmd = Command::new(valgrind);
    cmd.args(ARGS)
        .arg(format!("--suppressions={}", root.join(SUPPRESSIONS).display()))
        .arg(format!("--log-file={}", log.display()));
    cmd
}

/// Valgrind's verdict lines: the error summary and what was definitely
/// and possibly lost.
pub fn summary(report: &str) -> String {
    let pick = |key: &str| report.lines().find_map(|l| l.find(key).map(|at| l[at..].trim().to_string()));
    let errors = pick("ERROR SUMMARY:").unwrap_or_else(|| "no ERROR SUMMARY".into());
    if report.contains("no leaks are possible") {
        return format!("{errors}; no leaks are possible");
    }
    let definite = pick("definitely lost:").unwrap_or_else(|| "definitely lost: not reported".into());
    let possible = pick("possibly lost:").unwrap_or_else(|| "possibly lost: not reported".into());
    format!("{errors}; {definite}; {possible}")
}

/// Why valgrind's report fails the run, if it does: any error (with the
/// default leak kinds, a leak "definitely" or "possibly" lost is one), or
/// a leak of either kind however valgrind counted it.
pub fn problem(report: &str) -> Option<String> {
    let Some(line) = report.lines().find(|l| l.contains("ERROR SUMMARY:")) else {
        return Some("valgrind printed no ERROR SUMMARY".into());
    };
    if !line.contains("ERROR SUMMARY: 0 errors") {
        return Some(line[line.find("ERROR SUMMARY:").unwrap_or(0)..].to_string());
    }
    for kind in ["definitely lost:", "possibly lost:"] {
        if let Some(lost) = report.lines().find(|l| l.contains(kind))
            && !lost.contains(&format!("{kind} 0 bytes"))
        {
            return Some(lost[lost.find(kind).unwrap_or(0)..].to_string());
        }
    }
    None
}

/// The names of the suppressions in `text` with no `#` comment right
/// above them (their reason).
#[cfg(test)]
fn unexplained(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if *line != "{" {
            continue;
        }
        let explained = i > 0 && lines[i - 1].starts_with('#') && lines[i - 1].len() > 1;
        if !explained {
            found.push(lines.get(i + 1).unwrap_or(&"(unnamed)").to_string());
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn judges_valgrind_reports() {
        let clean = "==1== ERROR SUMMARY: 0 errors from 0 contexts (suppressed: 0 from 0)\n==1==    definitely lost: 0 bytes in 0 blocks\n";
        assert_eq!(problem(clean), None);
        let leak = "==1==    definitely lost: 16 bytes in 1 blocks\n==1== ERROR SUMMARY: 0 errors from 0 contexts\n";
        assert!(problem(leak).unwrap().contains("16 bytes"));
        let possible = "==1==    definitely lost: 0 bytes in 0 blocks\n==1==      possibly lost: 48 bytes in 1 blocks\n==1== ERROR SUMMARY: 0 errors from 0 contexts\n";
        assert!(problem(possible).unwrap().contains("possibly lost: 48 bytes"));
        assert!(summary(possible).ends_with("possibly lost: 48 bytes in 1 blocks"));
        assert!(problem("==1== ERROR SUMMARY: 2 errors from 2 contexts").is_some());
        assert!(problem("").is_some());
        assert!(summary(clean).starts_with("ERROR SUMMARY: 0 errors"));
    }

    #[test]
    fn every_suppression_says_why() {
        let bare = "# why the first\n{\n   first\n   Memcheck:Cond\n}\n\n{\n   second\n   Memcheck:Cond\n}\n";
        assert_eq!(unexplained(bare), ["second"]);
        let path = crate::run::root().join(SUPPRESSIONS);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(text.contains('{'), "{} suppresses nothing", path.display());
        assert_eq!(unexplained(&text), Vec::<String>::new(), "{}: entries without a reason", path.display());
    }
}
