//! The files measured: every `.rs` under `crates/*/src` and `xtask/src`,
//! from the working tree or from a git revision (`git cat-file --batch`).

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use crate::run::root;

/// One source file.
pub struct SourceFile {
    /// Its crate: the directory under `crates/`, or `xtask`.
    pub krate: String,
    /// Its path from the workspace root, `/`-separated.
    pub path: String,
    /// Its text (invalid UTF-8 replaced).
    pub text: String,
}

/// The crate a workspace path belongs to, when it is a source file measured.
fn crate_of(path: &str) -> Option<String> {
    if !path.ends_with(".rs") {
        return None;
    }
    if path.starts_with("xtask/src/") {
        return Some("xtask".into());
    }
    let rest = path.strip_prefix("crates/")?;
    let (name, under) = rest.split_once('/')?;
    under.starts_with("src/").then(|| name.to_string())
}

/// Whether a file is under a `tests/` directory of its `src/`.
pub fn is_test_path(path: &str) -> bool {
    let in_src = path.split_once("/src/").map_or("", |(_, rest)| rest);
    in_src.split('/').rev().skip(1).any(|dir| dir == "tests")
}

/// The directory (with its trailing `/`) where the out-of-line modules a
/// file declares live: beside a `lib.rs`, `main.rs` or `mod.rs`, else in
/// the directory named after the file.
pub fn module_dir(path: &str) -> String {
    let (dir, file) = path.rsplit_once('/').unwrap_or(("", path));
    match file {
        "lib.rs" | "main.rs" | "mod.rs" => format!("{dir}/"),
        _ => format!("{dir}/{}/", file.trim_end_matches(".rs")),
    }
}

fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) -> Result<(), String> {
    for entry in fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
        if path.is_dir() {
            walk(&path, out)?;
        } else {
            out.push(path);
        }
    }
    Ok(())
}

/// The measured files of the working tree, by path.
pub fn working_tree() -> Result<Vec<SourceFile>, String> {
    let root = root();
    let mut dirs = vec![root.join("xtask/src")];
    for entry in fs::read_dir(root.join("crates")).map_err(|e| format!("crates: {e}"))?.flatten() {
        dirs.push(entry.path().join("src"));
    }
    let mut paths = Vec::new();
    for dir in dirs.iter().filter(|d| d.is_dir()) {
        walk(dir, &mut paths)?;
    }
    let mut files = Vec::new();
    for path in paths {
        let rel = path.strip_prefix(&root).unwrap_or(&path).to_string_lossy().replace('\\', "/");
        let Some(krate) = crate_of(&rel) else { continue };
        let bytes = fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        files.push(SourceFile { krate, path: rel, text: String::from_utf8_lossy(&bytes).into_owned() });
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

/// The measured files at git revision `rev`, by path.
pub fn at_revision(rev: &str) -> Result<Vec<SourceFile>, String> {
    let git = || {
        let mut cmd = Command::new("git");
        cmd.current_dir(root());
        cmd
    };
    let list = git()
        .args(["ls-tree", "-r", "--name-only", rev, "--", "crates", "xtask/src"])
        .output()
        .map_err(|e| format!("size: cannot run git: {e}"))?;
    if !list.status.success() {
        return Err(format!("size: git ls-tree {rev}: {}", String::from_utf8_lossy(&list.stderr).trim()));
    }
    let mut paths: Vec<(String, String)> =
        String::from_utf8_lossy(&list.stdout).lines().filter_map(|p| crate_of(p).map(|k| (k, p.to_string()))).collect();
    paths.sort_by(|a, b| a.1.cmp(&b.1));
    let mut child = git()
        .args(["cat-file", "--batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("size: cannot run git cat-file: {e}"))?;
    let mut stdin = child.stdin.take().ok_or("git cat-file: no stdin")?;
    let request: String = paths.iter().map(|(_, p)| format!("{rev}:{p}\n")).collect();
    // Written from a thread: git answers while it reads, and a full pipe
    // either way would stall both.
    let writer = std::thread::spawn(move || stdin.write_all(request.as_bytes()));
    let mut out = BufReader::new(child.stdout.take().ok_or("git cat-file: no stdout")?);
    let mut files = Vec::new();
    for (krate, path) in paths {
        let text = read_blob(&mut out).map_err(|e| format!("size: git cat-file {rev}:{path}: {e}"))?;
        files.push(SourceFile { krate, path, text });
    }
    let _ = writer.join();
    let _ = child.wait();
    Ok(files)
}

/// One answer of `git cat-file --batch`: `<oid> blob <size>`, the
/// content, a newline.
fn read_blob(out: &mut impl BufRead) -> Result<String, String> {
    let mut header = String::new();
    out.read_line(&mut header).map_err(|e| e.to_string())?;
    let size: usize = match header.split_whitespace().collect::<Vec<_>>()[..] {
        [_, "blob", size] => size.parse().map_err(|_| format!("bad header {header:?}"))?,
        _ => return Err(format!("unexpected answer {:?}", header.trim())),
    };
    let mut content = vec![0; size + 1];
    out.read_exact(&mut content).map_err(|e| e.to_string())?;
    content.pop();
    Ok(String::from_utf8_lossy(&content).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_files_are_measured_and_where_their_modules_are() {
        assert_eq!(crate_of("crates/cli/src/verbs.rs").as_deref(), Some("cli"));
        assert_eq!(crate_of("xtask/src/vmtest/mod.rs").as_deref(), Some("xtask"));
        assert_eq!(crate_of("crates/cli/tests/watch.rs"), None);
        assert_eq!(crate_of("crates/cli/benches/scrape.rs"), None);
        assert_eq!(crate_of("crates/cli/src/dist/unit.service"), None);
        assert!(is_test_path("crates/report/src/tests/page.rs"));
        assert!(!is_test_path("crates/report/src/tests.rs"));
        assert!(!is_test_path("crates/core/src/machine/mod.rs"));
        assert_eq!(module_dir("crates/report/src/lib.rs"), "crates/report/src/");
        assert_eq!(module_dir("crates/core/src/machine/mod.rs"), "crates/core/src/machine/");
        assert_eq!(module_dir("crates/core/src/rail.rs"), "crates/core/src/rail/");
    }

    #[test]
    fn cat_file_answers_are_read_one_by_one() {
        let mut answers = &b"abc blob 5\nfn x\n\nabc blob 0\n\ndef missing\n"[..];
        assert_eq!(read_blob(&mut answers).unwrap(), "fn x\n");
        assert_eq!(read_blob(&mut answers).unwrap(), "");
        assert!(read_blob(&mut answers).unwrap_err().contains("missing"));
    }
}
