//! `cargo xtask ffi`: the C API tested from C and C++.
//!
//! Builds `railwatch-ffi` with the `verbs` feature (`librailwatch.so` and
//! `librailwatch.a`), checks that every `rw_` function the shared library
//! exports is declared in `railwatch.h` (so no benchmark-only export
//! ships), compiles every `crates/ffi/tests/c/*.c` and
//! `crates/ffi/tests/cpp/*.cpp` twice, against the shared and the static
//! library, into `target/ffi-tests/{dynamic,static}/` (and so the programs
//! written against 0.1.0's header, `crates/ffi/tests/compat/`, each of
//! whose deprecation warnings must fire: [`compat`]), and runs each with
//! `LD_LIBRARY_PATH` starting at the fake `libibverbs.so.1` that
//! railwatch-verbs-backend's build script makes (so libibverbs is always
//! the fake). A program prints `ok - NAME` / `not ok - NAME: why` per check
//! and exits 0 iff all passed; the checks are counted. The examples,
//! `crates/ffi/examples/*.cpp`, are built and run the same way (they play
//! the network under the fake) and pass by exiting 0. The shared library
//! is the dev profile's (the tests' and `vmtest --dev`'s), the static one
//! the release profile's (the README's link line): the optimised code is
//! what engines ship, and valgrind judges it differently ([`valgrind`]).
//! Every binary of either link then runs again under valgrind as
//! crates/ffi/README.md tells users to run it, which must report no error
//! and nothing lost (definitely or possibly). Every run is killed after
//! [`TIMEOUT`].

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::run::{cargo, parallel, root, step};

mod compat;
mod valgrind;

/// The longest a test program may run (under valgrind included).
const TIMEOUT: Duration = Duration::from_secs(120);

/// What the runner was asked to do.
struct Options {
    valgrind: bool,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut opts = Options { valgrind: true };
    for arg in args {
        match arg.as_str() {
            "--no-valgrind" => opts.valgrind = false,
            other => return Err(format!("ffi: unknown argument {other:?} (only --no-valgrind)")),
        }
    }
    Ok(opts)
}

/// One test source and the compiler for it.
struct Source {
    path: PathBuf,
    name: String,
    cpp: bool,
    /// An example (`crates/ffi/examples/`): uses libibverbs itself, prints
    /// a timeline rather than checks, and passes by exiting 0.
    example: bool,
    /// Written against 0.1.0's header (`crates/ffi/tests/compat/`): its
    /// deprecation warnings are no errors, and each must fire.
    compat: bool,
}

/// How a binary is linked.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Link {
    Dynamic,
    Static,
}

impl Link {
    fn name(self) -> &'static str {
        match self {
            Link::Dynamic => "dynamic",
            Link::Static => "static",
        }
    }
}

/// `cargo xtask ffi [--no-valgrind]`: the runs passed and failed (each
/// program under each link, and again under valgrind); an error when any
/// program failed, timed out or valgrind complained.
pub fn run(args: &[String]) -> Result<(u64, u64), String> {
    let opts = parse(args)?;
    let root = root();
    let (lib_dir, fake_dir) = build(false)?;
    let (release_dir, _) = build(true)?;
    let include = root.join("crates/ffi/include");
    let headers = ["railwatch.h", "railwatch_sim.h"]
        .iter()
        .map(|h| std::fs::read_to_string(include.join(h)).map_err(|e| format!("{h}: {e}")))
        .collect::<Result<String, String>>()?;
    exports_are_the_header(&lib_dir, &headers)?;
    let sources = sources(&root)?;
    let out = crate::run::target_dir().join("ffi-tests");
    let memcheck = if opts.valgrind { Some(valgrind::find()?) } else { None };
    let deprecations = compat::messages(&headers);

    // Every program under both links, and (railwatch.hpp builds as C++17
    // too) every C++ program again with the same warnings, run once (linked
    // dynamically, not under valgrind).
    let mut jobs = Vec::new();
    for link in [Link::Dynamic, Link::Static] {
        let dir = out.join(link.name());
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        jobs.extend(sources.iter().map(|src| (src, link, Standard::Latest, src.name.clone(), dir.join(&src.name))));
    }
    let dir = out.join("cpp17");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for src in sources.iter().filter(|s| s.cpp) {
        let name = format!("{}17", src.name);
        jobs.push((src, Link::Dynamic, Standard::Cpp17, name.clone(), dir.join(&name)));
    }
    for compiled in parallel(&jobs, |(src, link, std, _, bin)| {
        let lib = if *link == Link::Static { &release_dir } else { &lib_dir };
        compile(src, *link, *std, &include, lib, bin, &deprecations)
    }) {
        compiled?;
    }
    let (mut binaries, mut cpp17) = (Vec::new(), Vec::new());
    for (_, link, std, name, bin) in jobs {
        if std == Standard::Cpp17 { &mut cpp17 } else { &mut binaries }.push((name, link, bin));
    }

    let ld_path = ld_library_path(&fake_dir, &lib_dir);
    // Checks (the programs' `ok -` lines) and runs (each program, each
    // link, and each valgrind run: what CI's test count adds).
    let (mut passed, mut failed) = (0, 0);
    let (mut runs_ok, mut runs_failed) = (0u64, 0u64);
    let mut problems = Vec::new();
    for (name, link, bin) in binaries.iter().chain(&cpp17) {
        let example = sources.iter().any(|s| s.example && name.starts_with(&s.name));
        let label = format!("{name} ({})", link.name());
        let mut cmd = Command::new(bin);
        cmd.env("LD_LIBRARY_PATH", &ld_path).current_dir(&root);
        eprintln!("==> ffi: {label}: LD_LIBRARY_PATH={} {}", ld_path, bin.display());
        match run_counted(&mut cmd, &label) {
            Ok(r) => {
                passed += r.passed;
                failed += r.failed;
                eprintln!("==> ffi: {label}: {} passed, {} failed ({})", r.passed, r.failed, r.status);
                match r.problem(example) {
                    Some(why) => {
                        runs_failed += 1;
                        problems.push(format!("{label}: {why}"));
                    }
                    None => runs_ok += 1,
                }
            }
            Err(e) => {
                runs_failed += 1;
                problems.push(e);
            }
        }
    }

    let mut summaries = Vec::new();
    if let Some(memcheck) = &memcheck {
        let logs = out.join("valgrind");
        std::fs::create_dir_all(&logs).map_err(|e| format!("cannot create {}: {e}", logs.display()))?;
        // Both links: the static one is the release build's code.
        let runs = parallel(&binaries, |(name, link, bin)| {
            let label = format!("{name} ({}, valgrind)", link.name());
            let log = logs.join(format!("{name}.{}.log", link.name()));
            let mut cmd = valgrind::command(memcheck, &root, &log);
            cmd.arg(bin).env("LD_LIBRARY_PATH", &ld_path).current_dir(&root);
            eprintln!("==> ffi: {label}: {cmd:?}");
            let outcome = run_counted(&mut cmd, &label);
            let report = std::fs::read_to_string(&log).unwrap_or_default();
            let summary = valgrind::summary(&report);
            eprintln!("==> ffi: {label}: {summary} (log: {})", log.display());
            let example = sources.iter().any(|s| s.example && s.name == *name);
            let problem = match outcome {
                Ok(r) => valgrind::problem(&report)
                    .map(|why| format!("{label}: {why} (see {})", log.display()))
                    .or_else(|| r.problem(example).map(|why| format!("{label}: {why}"))),
                Err(e) => Some(e),
            };
            (format!("{name} ({}): {summary}", link.name()), problem)
        });
        for (summary, problem) in runs {
            summaries.push(summary);
            match problem {
                Some(p) => {
                    runs_failed += 1;
                    problems.push(p);
                }
                None => runs_ok += 1,
            }
        }
    }

    // The CMake lines of the README, as an engine's build would use them.
    match cmake_example(&root, &out, &lib_dir, &ld_path) {
        Ok(()) => runs_ok += 1,
        Err(e) => {
            runs_failed += 1;
            problems.push(e);
        }
    }

    let programs = sources.len();
    eprintln!(
        "==> ffi: {programs} program(s), linked dynamically and statically: {passed} checks passed, {failed} failed; \
         {runs_ok} runs passed, {runs_failed} failed (valgrind runs included)"
    );
    for s in &summaries {
        eprintln!("==> ffi: valgrind {s}");
    }
    if !problems.is_empty() {
        return Err(format!("ffi: {passed} checks passed, {failed} failed; {}", problems.join("; ")));
    }
    if memcheck.is_none() {
        eprintln!("==> ffi: valgrind skipped (--no-valgrind)");
    }
    Ok((runs_ok, runs_failed))
}

/// Configures and builds `crates/ffi/examples/CMakeLists.txt` (the
/// README's CMake lines) against the built library, then runs both of its
/// engines (shared and static) under the fake libibverbs.
fn cmake_example(root: &Path, out: &Path, lib_dir: &Path, ld_path: &str) -> Result<(), String> {
    let build = out.join("cmake");
    let _ = std::fs::remove_dir_all(&build);
    step(
        "cmake configure (examples/CMakeLists.txt)",
        Command::new("cmake")
            .arg("-S")
            .arg(root.join("crates/ffi/examples"))
            .arg("-B")
            .arg(&build)
            .arg(format!("-DRAILWATCH_ROOT={}", root.display()))
            .arg(format!("-DRAILWATCH_LIB_DIR={}", lib_dir.display())),
    )?;
    step("cmake build", Command::new("cmake").arg("--build").arg(&build))?;
    for engine in ["engine", "engine_static"] {
        let bin = build.join(engine);
        let label = format!("cmake {engine}");
        let r = run_counted(Command::new(&bin).env("LD_LIBRARY_PATH", ld_path).current_dir(root), &label)?;
        if let Some(why) = r.problem(true) {
            return Err(format!("{label}: {why}"));
        }
        eprintln!("==> ffi: {label}: exited 0");
    }
    Ok(())
}

/// Builds the library (dev, or with `release` the release profile); its
/// directory and the fake libibverbs's directory, from cargo's JSON
/// messages.
fn build(release: bool) -> Result<(PathBuf, PathBuf), String> {
    let mut cmd = cargo();
    cmd.args(["build", "-p", "railwatch-ffi", "--features", "verbs", "--message-format=json"]).stdout(Stdio::piped());
    if release {
        cmd.arg("--release");
    }
    eprintln!("==> build librailwatch: {cmd:?}");
    let out = cmd.output().map_err(|e| format!("build librailwatch: cannot start: {e}"))?;
    if !out.status.success() {
        return Err(format!("build librailwatch failed ({})", out.status));
    }
    let (mut lib_dir, mut fake_dir) = (None, None);
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let package = json_string(line, "package_id").unwrap_or_default();
        match json_string(line, "reason").as_deref() {
            Some("build-script-executed") if names_package(&package, "railwatch-verbs-backend") => {
                fake_dir = json_string(line, "out_dir").map(|d| Path::new(&d).join("fake-ibverbs/basic"));
            }
            Some("compiler-artifact") if names_package(&package, "railwatch-ffi") => {
                let so = json_strings(line, "filenames").into_iter().find(|f| f.ends_with("librailwatch.so"));
                lib_dir = so.and_then(|f| Path::new(&f).parent().map(Path::to_path_buf));
            }
            _ => {}
        }
    }
    let lib_dir = lib_dir.ok_or("build librailwatch: cargo named no librailwatch.so")?;
    let fake_dir = fake_dir.ok_or("build librailwatch: no build-script-executed message of railwatch-verbs-backend")?;
    for needed in [lib_dir.join("librailwatch.a"), fake_dir.join("libibverbs.so.1")] {
        if !needed.is_file() {
            return Err(format!(
                "{} is missing (the fake libibverbs needs a C compiler and the rdma-core headers: cargo xtask deps)",
                needed.display()
            ));
        }
    }
    eprintln!("==> ffi: library {}, fake libibverbs {}", lib_dir.display(), fake_dir.display());
    Ok((lib_dir, fake_dir))
}

/// Every `rw_` function `librailwatch.so` exports is declared in the
/// generated headers (`text`, railwatch.h and railwatch_sim.h): nothing
/// else ships (the benchmark's `rw_bench_*` are only in a library built
/// with the `bench-exports` feature).
fn exports_are_the_header(lib_dir: &Path, text: &str) -> Result<(), String> {
    let so = lib_dir.join("librailwatch.so");
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(&so)
        .output()
        .map_err(|e| format!("ffi: cannot run nm: {e}"))?;
    if !out.status.success() {
        return Err(format!("ffi: nm -D {} failed ({})", so.display(), out.status));
    }
    let exported = exported_functions(&String::from_utf8_lossy(&out.stdout));
    let undeclared: Vec<&str> = exported.iter().map(String::as_str).filter(|f| !declares(text, f)).collect();
    if !undeclared.is_empty() {
        return Err(format!(
            "ffi: {} exports what railwatch.h and railwatch_sim.h do not declare: {}",
            so.display(),
            undeclared.join(", ")
        ));
    }
    eprintln!(
        "==> ffi: the library exports {} rw_ functions, each declared in railwatch.h or railwatch_sim.h",
        exported.len()
    );
    Ok(())
}

/// The `rw_` functions (`T` symbols) of `nm -D --defined-only` output.
fn exported_functions(nm: &str) -> Vec<String> {
    nm.lines()
        .filter_map(|l| match l.split_whitespace().collect::<Vec<_>>()[..] {
            [_, "T", name] if name.starts_with("rw_") => Some(name.to_string()),
            _ => None,
        })
        .collect()
}

/// Whether the header declares function `name`: a line outside comments
/// with `name(` after a space or `*`, as cbindgen writes a prototype.
fn declares(header: &str, name: &str) -> bool {
    let call = format!("{name}(");
    header
        .lines()
        .filter(|l| !l.trim_start().starts_with(['/', '*']))
        .any(|l| l.match_indices(&call).any(|(at, _)| l[..at].ends_with([' ', '*'])))
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

/// The C and C++ test sources, sorted by name.
fn sources(root: &Path) -> Result<Vec<Source>, String> {
    let mut found = Vec::new();
    for (dir, ext, cpp) in [
        ("crates/ffi/tests/c", "c", false),
        ("crates/ffi/tests/cpp", "cpp", true),
        ("crates/ffi/tests/compat", "c", false),
        ("crates/ffi/tests/compat", "cpp", true),
    ] {
        let compat = dir.ends_with("compat");
        let dir = root.join(dir);
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some(ext) {
                continue;
            }
            let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("test").to_string();
            let stem = if compat { format!("compat_{stem}") } else { stem };
            let name = if cpp { format!("{stem}_cpp") } else { stem };
            found.push(Source { path, name, cpp, example: false, compat });
        }
    }
    found.sort_by(|a, b| (a.cpp, &a.name).cmp(&(b.cpp, &b.name)));
    if found.iter().all(|s| s.cpp) {
        return Err(format!("ffi: no C test programs in {}", root.join("crates/ffi/tests/c").display()));
    }
    // The examples, run under the fake too (they play the network there).
    let mut examples: Vec<Source> = std::fs::read_dir(root.join("crates/ffi/examples"))
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("cpp"))
                .map(|path| {
                    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("example");
                    Source { name: format!("example_{stem}"), path, cpp: true, example: true, compat: false }
                })
                .collect()
        })
        .unwrap_or_default();
    examples.sort_by(|a, b| a.name.cmp(&b.name));
    found.extend(examples);
    Ok(found)
}

/// Which C++ a C++ program is built as (C is always C11).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Standard {
    /// C++20.
    Latest,
    /// C++17: railwatch.hpp without std::span and std::atomic_ref.
    Cpp17,
}

/// The warnings every program is built with, as errors: the headers must
/// be clean under them (`-Wpedantic` in C; in C++ also old-style casts
/// and implicit conversions), and so is every test.
const C_WARNINGS: [&str; 4] = ["-Wall", "-Wextra", "-Wpedantic", "-Werror"];
const CPP_WARNINGS: [&str; 6] = ["-Wall", "-Wextra", "-Wpedantic", "-Wold-style-cast", "-Wconversion", "-Werror"];

/// Compiles one test program into `bin` (one of 0.1.0's must warn each of
/// the header's `deprecations`).
fn compile(
    src: &Source,
    link: Link,
    standard: Standard,
    include: &Path,
    lib_dir: &Path,
    bin: &Path,
    deprecations: &[String],
) -> Result<(), String> {
    let mut cmd = if src.cpp {
        let mut c = Command::new("c++");
        c.arg(if standard == Standard::Cpp17 { "-std=c++17" } else { "-std=c++20" }).args(CPP_WARNINGS);
        c
    } else {
        let mut c = Command::new("cc");
        c.arg("-std=c11").args(C_WARNINGS);
        c
    };
    cmd.arg("-g").arg(format!("-I{}", include.display())).arg("-o").arg(bin).arg(&src.path);
    match link {
        Link::Dynamic => {
            cmd.arg(format!("-L{}", lib_dir.display()))
                .arg("-lrailwatch")
                .arg(format!("-Wl,-rpath,{}", lib_dir.display()));
        }
        // The static library's own dependencies (what rustc's
        // native-static-libs lists that is not linked by default).
        Link::Static => {
            cmd.arg(lib_dir.join("librailwatch.a")).args(["-libverbs", "-lm"]);
        }
    }
    if link == Link::Dynamic {
        // The examples, and the programs that use railwatch_verbs.h, call
        // libibverbs themselves.
        cmd.arg("-libverbs");
    }
    cmd.args(["-pthread", "-ldl"]);
    let std_name = if src.cpp && standard == Standard::Cpp17 { ", C++17" } else { "" };
    let what = format!("compile {} ({}{std_name})", src.name, link.name());
    if src.compat {
        cmd.args(compat::ALLOWED);
        return compat::compile(&what, &mut cmd, deprecations);
    }
    step(&what, &mut cmd)
}

/// `LD_LIBRARY_PATH`: the fake libibverbs first, then the library
/// (nothing inherited: `cargo run` adds its own directories).
fn ld_library_path(fake_dir: &Path, lib_dir: &Path) -> String {
    format!("{}:{}", fake_dir.display(), lib_dir.display())
}

/// One program's run.
struct Counted {
    passed: u64,
    failed: u64,
    status: ExitStatus,
}

impl Counted {
    /// Why the run failed, if it did (an example needs no checks).
    fn problem(&self, example: bool) -> Option<String> {
        if self.failed > 0 {
            Some(format!("{} check(s) failed", self.failed))
        } else if !self.status.success() {
            Some(format!("exited with {}", self.status))
        } else if self.passed == 0 && !example {
            Some("ran no checks".into())
        } else {
            None
        }
    }
}

/// Runs `cmd`, counting its `ok -` and `not ok -` lines and echoing its
/// standard output in one piece when it ends (runs go two at a time: their
/// lines stay together); killed after [`TIMEOUT`], which is an error naming
/// it.
fn run_counted(cmd: &mut Command, label: &str) -> Result<Counted, String> {
    let mut child = cmd.stdout(Stdio::piped()).spawn().map_err(|e| format!("{label}: cannot start: {e}"))?;
    let stdout = child.stdout.take().ok_or_else(|| format!("{label}: no stdout"))?;
    let reader = std::thread::spawn(move || {
        let (mut passed, mut failed, mut text) = (0u64, 0u64, String::new());
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.starts_with("ok - ") {
                passed += 1;
            } else if line.starts_with("not ok - ") {
                failed += 1;
            }
            text.push_str(&line);
            text.push('\n');
        }
        print!("{text}");
        (passed, failed)
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| format!("{label}: {e}"))? {
            break status;
        }
        if started.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            let _ = reader.join();
            return Err(format!("{label}: did not finish within {} s and was killed", TIMEOUT.as_secs()));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (passed, failed) = reader.join().map_err(|_| format!("{label}: the output reader panicked"))?;
    Ok(Counted { passed, failed, status })
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
    fn reads_the_exports_against_the_header() {
        let nm = "0000000000048900 T rw_version\n                 U malloc\n0000000000005d740 T rw_bench_feed_rust\n0000000000001000 T other\n0000000000002000 B rw_data\n";
        assert_eq!(exported_functions(nm), ["rw_version", "rw_bench_feed_rust"]);
        let header = "const char *rw_version(void);\nenum rw_status rw_version_numbers(uint32_t *major);\n// see rw_bench_feed_rust(), not declared\n";
        assert!(declares(header, "rw_version"));
        assert!(declares(header, "rw_version_numbers"));
        assert!(!declares(header, "rw_bench_feed_rust"));
    }
}
