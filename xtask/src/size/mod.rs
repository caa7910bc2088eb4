//! `cargo xtask size [--before REV] [--json | --markdown]`: the size of the
//! code against the project's limits.
//!
//! For every crate (`crates/*/src`, and `xtask/src`) it counts the lines of
//! code (no test code: `#[cfg(test)]` items and the out-of-line test
//! modules they declare, files under a `tests/` directory; no comments, no
//! blank lines), and finds the longest file and the longest function (from
//! its `fn` line to its closing brace; `measure.rs` says exactly what
//! counts). It fails when a function is longer than [`MAX_FN_LINES`] or a
//! file has more than [`MAX_FILE_CODE`] lines of code, after naming every
//! one. It fails too on an import circle between a crate's modules
//! (`circles.rs`: siblings that name each other, directly or round).
//!
//! `--before REV` measures the tree at a git revision too and prints the
//! two side by side (the limits are checked on the working tree only);
//! `--markdown` prints the table for a note, `--json` one JSON object.

mod circles;
mod lex;
mod measure;
mod source;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use measure::{Function, measure};
use source::SourceFile;

/// The longest a function may be, in lines.
pub const MAX_FN_LINES: usize = 150;
/// The most lines of code a file may have.
pub const MAX_FILE_CODE: usize = 700;

/// One file's measures.
struct FileSize {
    path: String,
    code: usize,
    functions: Vec<Function>,
    /// The paths from `crate` or `super` it names (for the circles).
    paths: Vec<Vec<String>>,
}

/// One crate's measures.
#[derive(Default)]
struct CrateSize {
    files: Vec<FileSize>,
}

impl CrateSize {
    fn code(&self) -> usize {
        self.files.iter().map(|f| f.code).sum()
    }

    fn longest_file(&self) -> Option<&FileSize> {
        self.files.iter().max_by_key(|f| (f.code, std::cmp::Reverse(&f.path)))
    }

    fn longest_fn(&self) -> Option<(&str, &Function)> {
        let all = self.files.iter().flat_map(|f| f.functions.iter().map(move |func| (f.path.as_str(), func)));
        all.max_by_key(|(path, f)| (f.lines, std::cmp::Reverse((*path, f.line))))
    }
}

/// Crate name (`crates/<name>`'s directory, or `xtask`) to its measures.
type Sizes = BTreeMap<String, CrateSize>;

/// Measures every file of `files` that is not test code.
fn sizes(files: &[SourceFile]) -> Sizes {
    let measured: Vec<(&SourceFile, measure::Measure)> = files.iter().map(|f| (f, measure(&f.text))).collect();
    let mut test_paths = Vec::new();
    for (file, m) in &measured {
        for module in &m.test_modules {
            let dir = source::module_dir(&file.path);
            test_paths.push(format!("{dir}{module}.rs"));
            test_paths.push(format!("{dir}{module}/"));
        }
    }
    let mut sizes = Sizes::new();
    for (file, m) in measured {
        if source::is_test_path(&file.path) || test_paths.iter().any(|t| file.path == *t || file.path.starts_with(t)) {
            continue;
        }
        let size = FileSize { path: file.path.clone(), code: m.code, functions: m.functions, paths: m.paths };
        sizes.entry(file.krate.clone()).or_default().files.push(size);
    }
    sizes
}

/// What is over the limits, one line each.
fn offenders(sizes: &Sizes) -> Vec<String> {
    let mut out = Vec::new();
    for (name, size) in sizes {
        let modules = size.files.iter().map(|f| (circles::module_of(&f.path), f.paths.clone())).collect();
        out.extend(circles::circles(&modules).into_iter().map(|c| format!("{name}: import circle {c}")));
        for file in &size.files {
            if file.code > MAX_FILE_CODE {
                out.push(format!("{}: {} lines of code (limit {MAX_FILE_CODE})", file.path, file.code));
            }
            for f in file.functions.iter().filter(|f| f.lines > MAX_FN_LINES) {
                out.push(format!(
                    "{}:{}: fn {} is {} lines (limit {MAX_FN_LINES})",
                    file.path, f.line, f.name, f.lines
                ));
            }
        }
    }
    out
}

/// Output forms.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Form {
    Text,
    Markdown,
    Json,
}

/// Command-line options.
#[derive(Debug, PartialEq, Eq)]
struct Options {
    before: Option<String>,
    form: Form,
}

fn options(args: &[String]) -> Result<Options, String> {
    let usage = "usage: cargo xtask size [--before REV] [--json | --markdown]";
    let mut opts = Options { before: None, form: Form::Text };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--before" => {
                opts.before = Some(it.next().ok_or(format!("size: --before needs a revision; {usage}"))?.clone())
            }
            "--json" => opts.form = Form::Json,
            "--markdown" => opts.form = Form::Markdown,
            other => return Err(format!("size: unknown argument {other:?}; {usage}")),
        }
    }
    Ok(opts)
}

/// `cargo xtask size`: prints the measures, fails on what is over the
/// limits.
pub fn run(args: &[String]) -> Result<(), String> {
    let opts = options(args)?;
    let now = sizes(&source::working_tree()?);
    let before = opts.before.as_deref().map(|rev| source::at_revision(rev).map(|f| sizes(&f))).transpose()?;
    let over = offenders(&now);
    let text = match opts.form {
        Form::Text => text(&now, before.as_ref(), opts.before.as_deref(), &over),
        Form::Markdown => markdown(&now, before.as_ref(), opts.before.as_deref(), &over),
        Form::Json => json(&now, before.as_ref(), opts.before.as_deref(), &over),
    };
    print!("{text}");
    if over.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "size: {} over the limits (functions {MAX_FN_LINES} lines, files {MAX_FILE_CODE} lines of code, no import circles)",
            over.len()
        ))
    }
}

/// One row of the table: the crate's figures as cells.
struct Row {
    krate: String,
    files: String,
    code: String,
    before: String,
    longest_file: String,
    longest_fn: String,
}

fn rows(now: &Sizes, before: Option<&Sizes>) -> Vec<Row> {
    let mut names: Vec<&String> = now.keys().collect();
    if let Some(b) = before {
        names.extend(b.keys().filter(|k| !now.contains_key(*k)));
        names.sort();
    }
    names
        .into_iter()
        .map(|name| {
            let size = now.get(name);
            let was = before.map(|b| b.get(name).map_or(0, CrateSize::code));
            let code = size.map_or(0, CrateSize::code);
            let file = size.and_then(CrateSize::longest_file);
            let func = size.and_then(CrateSize::longest_fn);
            Row {
                krate: name.clone(),
                files: size.map_or(0, |s| s.files.len()).to_string(),
                code: code.to_string(),
                before: was.map_or_else(String::new, |w| format!("{w} ({:+})", code as i64 - w as i64)),
                longest_file: file.map_or_else(|| "-".into(), |f| format!("{} ({})", f.path, f.code)),
                longest_fn: func
                    .map_or_else(|| "-".into(), |(p, f)| format!("{}:{} {} ({})", p, f.line, f.name, f.lines)),
            }
        })
        .collect()
}

fn header(rev: Option<&str>) -> Vec<String> {
    let mut cells = vec!["crate".to_string(), "files".into(), "code".into()];
    if let Some(rev) = rev {
        cells.push(format!("code at {rev} (change)"));
    }
    cells.extend(["longest file (code)".into(), "longest function (lines)".into()]);
    cells
}

fn cells(row: &Row, with_before: bool) -> Vec<String> {
    let mut cells = vec![row.krate.clone(), row.files.clone(), row.code.clone()];
    if with_before {
        cells.push(row.before.clone());
    }
    cells.extend([row.longest_file.clone(), row.longest_fn.clone()]);
    cells
}

/// An aligned table, then what is over the limits.
fn text(now: &Sizes, before: Option<&Sizes>, rev: Option<&str>, over: &[String]) -> String {
    let mut table = vec![header(rev)];
    table.extend(rows(now, before).iter().map(|r| cells(r, rev.is_some())));
    let widths: Vec<usize> =
        (0..table[0].len()).map(|c| table.iter().map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for row in &table {
        let line: Vec<String> = row.iter().zip(&widths).map(|(cell, w)| format!("{cell:<w$}")).collect();
        let _ = writeln!(out, "{}", line.join("  ").trim_end());
    }
    let total: usize = now.values().map(CrateSize::code).sum();
    let _ = writeln!(out, "total: {total} lines of code");
    limits_section(&mut out, over);
    out
}

/// A Markdown table, then what is over the limits.
fn markdown(now: &Sizes, before: Option<&Sizes>, rev: Option<&str>, over: &[String]) -> String {
    let head = header(rev);
    let mut out = format!("| {} |\n|{}\n", head.join(" | "), " --- |".repeat(head.len()));
    for row in rows(now, before) {
        let _ = writeln!(out, "| {} |", cells(&row, rev.is_some()).join(" | "));
    }
    out.push('\n');
    limits_section(&mut out, over);
    out
}

fn limits_section(out: &mut String, over: &[String]) {
    if over.is_empty() {
        let _ = writeln!(
            out,
            "within the limits: functions {MAX_FN_LINES} lines, files {MAX_FILE_CODE} lines of code, no import circles"
        );
        return;
    }
    let _ = writeln!(
        out,
        "over the limits (functions {MAX_FN_LINES} lines, files {MAX_FILE_CODE} lines of code, no import circles):"
    );
    for o in over {
        let _ = writeln!(out, "- {o}");
    }
}

/// A JSON string literal.
fn quoted(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn crate_json(size: &CrateSize) -> String {
    let file =
        size.longest_file().map_or("null".into(), |f| format!("{{\"path\":{},\"code\":{}}}", quoted(&f.path), f.code));
    let func = size.longest_fn().map_or("null".into(), |(p, f)| {
        format!("{{\"path\":{},\"line\":{},\"name\":{},\"lines\":{}}}", quoted(p), f.line, quoted(&f.name), f.lines)
    });
    format!("{{\"files\":{},\"code\":{},\"longest_file\":{file},\"longest_fn\":{func}}}", size.files.len(), size.code())
}

/// One JSON object: the limits, each crate (and at `rev`), the offenders.
fn json(now: &Sizes, before: Option<&Sizes>, rev: Option<&str>, over: &[String]) -> String {
    let each = |sizes: &Sizes| {
        let items: Vec<String> = sizes.iter().map(|(name, s)| format!("{}:{}", quoted(name), crate_json(s))).collect();
        format!("{{{}}}", items.join(","))
    };
    let mut out =
        format!("{{\"limits\":{{\"fn_lines\":{MAX_FN_LINES},\"file_code\":{MAX_FILE_CODE}}},\"crates\":{}", each(now));
    if let (Some(b), Some(rev)) = (before, rev) {
        let _ = write!(out, ",\"before\":{{\"rev\":{},\"crates\":{}}}", quoted(rev), each(b));
    }
    let over: Vec<String> = over.iter().map(|o| quoted(o)).collect();
    let _ = writeln!(out, ",\"over\":[{}]}}", over.join(","));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(krate: &str, path: &str, text: &str) -> SourceFile {
        SourceFile { krate: krate.into(), path: path.into(), text: text.into() }
    }

    fn long_fn(name: &str, body_lines: usize) -> String {
        format!("fn {name}() {{\n{}}}\n", "    x();\n".repeat(body_lines))
    }

    #[test]
    fn test_modules_and_test_directories_are_left_out() {
        let files = [
            file("report", "crates/report/src/lib.rs", "fn a() {}\n#[cfg(test)]\nmod tests;\nmod page;\n"),
            file("report", "crates/report/src/tests.rs", &long_fn("huge", 400)),
            file("report", "crates/report/src/tests/extra.rs", &long_fn("huge2", 400)),
            file("report", "crates/report/src/page.rs", "#[cfg(test)]\nmod tests;\nfn p() {}\n"),
            file("report", "crates/report/src/page/tests.rs", &long_fn("huge3", 400)),
            file("xtask", "xtask/src/tests/x.rs", &long_fn("huge4", 400)),
        ];
        let s = sizes(&files);
        let report = &s["report"];
        let paths: Vec<&str> = report.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["crates/report/src/lib.rs", "crates/report/src/page.rs"]);
        assert_eq!(report.code(), 3);
        assert!(!s.contains_key("xtask"));
        assert!(offenders(&s).is_empty());
    }

    #[test]
    fn the_limits_name_each_offender() {
        let big_file = "const X: u8 = 0;\n".repeat(MAX_FILE_CODE + 1);
        let files = [
            file(
                "cli",
                "crates/cli/src/a.rs",
                &format!("{}{}", long_fn("ok", MAX_FN_LINES - 2), long_fn("long", MAX_FN_LINES - 1)),
            ),
            file("cli", "crates/cli/src/b.rs", &big_file),
            file("core", "crates/core/src/lib.rs", &"const Y: u8 = 0;\n".repeat(MAX_FILE_CODE)),
        ];
        let s = sizes(&files);
        assert_eq!(
            offenders(&s),
            [
                format!("crates/cli/src/a.rs:{}: fn long is {} lines (limit 150)", MAX_FN_LINES + 1, MAX_FN_LINES + 1),
                format!("crates/cli/src/b.rs: {} lines of code (limit 700)", MAX_FILE_CODE + 1),
            ]
        );
        let cli = &s["cli"];
        assert_eq!(cli.longest_file().map(|f| f.path.as_str()), Some("crates/cli/src/b.rs"));
        assert_eq!(cli.longest_fn().map(|(_, f)| (f.name.as_str(), f.lines)), Some(("long", MAX_FN_LINES + 1)));
    }

    #[test]
    fn the_forms_carry_the_same_figures() {
        let now = sizes(&[file("core", "crates/core/src/lib.rs", &long_fn("f", 3))]);
        let before = sizes(&[file("core", "crates/core/src/lib.rs", &long_fn("f", 1))]);
        let over = offenders(&now);
        let t = text(&now, Some(&before), Some("v0"), &over);
        assert!(t.contains("core   1      5     3 (+2)"), "{t}");
        assert!(t.contains("crates/core/src/lib.rs:1 f (5)"), "{t}");
        let m = markdown(&now, Some(&before), Some("v0"), &over);
        assert!(m.starts_with("| crate | files | code | code at v0 (change) |"), "{m}");
        assert!(m.contains("| core | 1 | 5 | 3 (+2) | crates/core/src/lib.rs (5) |"), "{m}");
        let j = json(&now, Some(&before), Some("v0"), &over);
        assert!(j.contains("\"crates\":{\"core\":{\"files\":1,\"code\":5,"), "{j}");
        assert!(j.contains("\"before\":{\"rev\":\"v0\",\"crates\":{\"core\":{\"files\":1,\"code\":3,"), "{j}");
        assert!(j.ends_with("\"over\":[]}\n"), "{j}");
    }

    /// The lexer on every file of the workspace (raw strings, lifetimes,
    /// byte strings and all): each file's delimiters balance.
    #[test]
    fn every_workspace_file_lexes_with_balanced_delimiters() {
        let files = source::working_tree().unwrap();
        assert!(files.len() > 50, "only {} files found", files.len());
        for f in &files {
            let tokens = lex::lex(&f.text).tokens;
            for (open, close) in [('{', '}'), ('(', ')'), ('[', ']')] {
                let n = |c| tokens.iter().filter(|t| t.kind == lex::Kind::Punct(c)).count();
                assert_eq!(n(open), n(close), "{}: {open} and {close} do not balance", f.path);
            }
        }
    }

    #[test]
    fn options_parse() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(options(&[]), Ok(Options { before: None, form: Form::Text }));
        assert_eq!(
            options(&args(&["--before", "main", "--json"])),
            Ok(Options { before: Some("main".into()), form: Form::Json })
        );
        assert!(options(&args(&["--before"])).is_err());
        assert!(options(&args(&["--wat"])).is_err());
        assert_eq!(quoted("a\"b\\\n"), "\"a\\\"b\\\\\\u000a\"");
    }
}
