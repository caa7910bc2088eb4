//! `cargo xtask ffi`: the C API tested from C and C++.
//!
//! Builds `railwatch-ffi` with the `verbs` feature (`librailwatch.so` and
//! `librailwatch.a`), checks that every `rw_` function the shared library
//! exports is declared in `railwatch.h` (so no benchmark-only export
//! ships), compiles every `crates/ffi/tests/c/*.c` and
//! `crates/ffi/tests/cpp/*.cpp` three times, against the shared and the
//! static library, and the static one again with AddressSanitizer and
//! UBSan ([`asan`]), into `target/ffi-tests/{dynamic,static,asan}/` (and so the programs
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
//! Every binary of the first two links then runs again under valgrind as
//! crates/ffi/README.md tells users to run it, which must report no error
//! and nothing lost (definitely or possibly). Every run is killed after
//! [`TIMEOUT`].

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::library::{self, Built, Profile};
use crate::run::{parallel, root, step};

mod asan;
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
    /// The static library, the program built with ASan and UBSan ([`asan`]).
    Asan,
}

impl Link {
    fn name(self) -> &'static str {
        match self {
            Link::Dynamic => "dynamic",
            Link::Static => "static",
            Link::Asan => "asan",
        }
    }
}

/// `cargo xtask ffi [--no-valgrind]`: the runs passed and failed (each
/// program under each link, and again under valgrind); an error when any
/// program failed, timed out or valgrind complained.
pub fn run(args: &[String]) -> Result<(u64, u64), String> {
    let opts = parse(args)?;
    let root = root();
    let Built { lib_dir, fake_dir, .. } = library::build(Profile::Dev)?;
    let release_dir = library::build(Profile::Release)?.lib_dir;
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

    let jobs = jobs(&sources, &out)?;
    for compiled in parallel(&jobs, |job| {
        let lib = if job.link == Link::Dynamic { &lib_dir } else { &release_dir };
        compile(job.src, job.link, job.standard, &include, lib, &job.bin, &deprecations)
    }) {
        compiled?;
    }

    let ld_path = ld_library_path(&fake_dir, &lib_dir);
    // Checks (the programs' `ok -` lines) and runs (each program, each
    // link, and each valgrind run: what CI's test count adds).
    let mut tally = Tally::default();
    for job in &jobs {
        let label = format!("{} ({})", job.name, job.link.name());
        let mut cmd = Command::new(&job.bin);
        cmd.env("LD_LIBRARY_PATH", &ld_path).current_dir(&root);
        if job.link == Link::Asan {
            asan::configure(&mut cmd);
        }
        eprintln!("==> ffi: {label}: LD_LIBRARY_PATH={} {}", ld_path, job.bin.display());
        tally.add(&label, run_counted(&mut cmd, &label), job.src.example);
    }
    // Valgrind runs the programs of the plain links (not C++17's again,
    // nor ASan's, which valgrind cannot run).
    let binaries: Vec<(String, Link, PathBuf)> = jobs
        .iter()
        .filter(|j| j.link != Link::Asan && j.standard == Standard::Latest)
        .map(|j| (j.name.clone(), j.link, j.bin.clone()))
        .collect();
    let summaries = match &memcheck {
        Some(memcheck) => under_valgrind(memcheck, &binaries, &sources, &out, &ld_path, &mut tally)?,
        None => Vec::new(),
    };

    // The CMake lines of the README, as an engine's build would use them.
    tally.outcome(cmake_example(&root, &out, &lib_dir, &ld_path).err());

    let Tally { passed, failed, runs_ok, runs_failed, problems } = tally;
    eprintln!(
        "==> ffi: {} program(s), linked dynamically, statically and statically under ASan+UBSan: \
         {passed} checks passed, {failed} failed; {runs_ok} runs passed, {runs_failed} failed (valgrind runs included)",
        sources.len()
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

/// Every binary of the plain links under valgrind (the static one is the
/// release build's code), two at a time: each one's summary line.
fn under_valgrind(
    memcheck: &Path,
    binaries: &[(String, Link, PathBuf)],
    sources: &[Source],
    out: &Path,
    ld_path: &str,
    tally: &mut Tally,
) -> Result<Vec<String>, String> {
    let root = root();
    let logs = out.join("valgrind");
    std::fs::create_dir_all(&logs).map_err(|e| format!("cannot create {}: {e}", logs.display()))?;
    let runs = parallel(binaries, |(name, link, bin)| {
        let label = format!("{name} ({}, valgrind)", link.name());
        let log = logs.join(format!("{name}.{}.log", link.name()));
        let mut cmd = valgrind::command(memcheck, &root, &log);
        cmd.arg(bin).env("LD_LIBRARY_PATH", ld_path).current_dir(&root);
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
    let mut summaries = Vec::new();
    for (summary, problem) in runs {
        summaries.push(summary);
        tally.outcome(problem);
    }
    Ok(summaries)
}

/// What the runs came to: the programs' checks, the runs passed and
/// failed, and why each failure failed.
#[derive(Default)]
struct Tally {
    passed: u64,
    failed: u64,
    runs_ok: u64,
    runs_failed: u64,
    problems: Vec<String>,
}

impl Tally {
    /// One run's outcome: passed, or failed for `problem`.
    fn outcome(&mut self, problem: Option<String>) {
        match problem {
            Some(p) => {
                self.runs_failed += 1;
                self.problems.push(p);
            }
            None => self.runs_ok += 1,
        }
    }

    /// One program's plain run (its checks counted; `label` names it).
    fn add(&mut self, label: &str, run: Result<Counted, String>, example: bool) {
        match run {
            Ok(r) => {
                self.passed += r.passed;
                self.failed += r.failed;
                eprintln!("==> ffi: {label}: {} passed, {} failed ({})", r.passed, r.failed, r.status);
                self.outcome(r.problem(example).map(|why| format!("{label}: {why}")));
            }
            Err(e) => self.outcome(Some(e)),
        }
    }
}

/// One program to compile and run: its source, link and standard, its
/// name in the reports and the binary.
struct Job<'a> {
    src: &'a Source,
    link: Link,
    standard: Standard,
    name: String,
    bin: PathBuf,
}

/// Every program under each link (C11 and C++20), and (railwatch.hpp
/// builds as C++17 too) every C++ program again as C++17, linked
/// dynamically and under ASan; each link's binaries in a directory of
/// `out` named after it (C++17's dynamic ones in `cpp17/`).
fn jobs<'a>(sources: &'a [Source], out: &Path) -> Result<Vec<Job<'a>>, String> {
    let mut jobs = Vec::new();
    for link in [Link::Dynamic, Link::Static, Link::Asan] {
        let dir = out.join(link.name());
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        for src in sources {
            let bin = dir.join(&src.name);
            jobs.push(Job { src, link, standard: Standard::Latest, name: src.name.clone(), bin });
        }
    }
    for link in [Link::Dynamic, Link::Asan] {
        let dir = if link == Link::Dynamic { out.join("cpp17") } else { out.join(link.name()) };
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        for src in sources.iter().filter(|s| s.cpp) {
            let name = format!("{}17", src.name);
            jobs.push(Job { src, link, standard: Standard::Cpp17, bin: dir.join(&name), name });
        }
    }
    Ok(jobs)
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
        Link::Static | Link::Asan => {
            cmd.arg(lib_dir.join("librailwatch.a")).args(["-libverbs", "-lm"]);
        }
    }
    if link == Link::Asan {
        cmd.args(asan::FLAGS);
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
pub(crate) struct Counted {
    pub passed: u64,
    failed: u64,
    status: ExitStatus,
}

impl Counted {
    /// Why the run failed, if it did (an example needs no checks).
    pub fn problem(&self, example: bool) -> Option<String> {
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
pub(crate) fn run_counted(cmd: &mut Command, label: &str) -> Result<Counted, String> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
