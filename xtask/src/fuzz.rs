//! `cargo xtask fuzz [--seconds N | --short]`: the cargo-fuzz targets in
//! `fuzz/`, each run for N seconds (default 300; `--short`: the bounded run
//! of [`short`], what `cargo xtask ci` makes), with executions and the
//! result.
//!
//! - `scenario_parse`: arbitrary bytes into `Scenario::parse`; never panics,
//!   refusals are one line with a line number, accepted scenarios
//!   round-trip through `to_toml()`. Seeded from the built-in scenarios
//!   (`crates/cli/scenarios/*.toml`, copied into the corpus at run time) and
//!   guided by `fuzz/scenario_parse.dict`.
//! - `scenario_run`: the same bytes parsed and, when valid, run whole
//!   (the real monitor over simulated devices, in virtual time) with an
//!   instants budget: never panics, never hangs, loses no output line.
//! - `event_decode`: arbitrary codes and elements through `EventKind`,
//!   `PortState`, `LinkAttrs` rate math, `decide_event`/`decide_poll` on
//!   every state, and a `RailCell` driven by the decisions, all checked
//!   against docs/STATE-MACHINE.md's event, poll and transition tables
//!   (written in the target as data, not copied from the code they check)
//!   and the properties its prose states.
//! - `rwlog_replay`: arbitrary bytes read as an input log and replayed:
//!   never panics, every refusal and divergence names a line of the text.
//!   Seeded from `fuzz/rwlog_seed.rwlog` (a built-in's log).
//!
//! Stable toolchain: cargo-fuzz adds `-Zsanitizer=address` unless told
//! otherwise, which only a nightly compiler accepts; with `--sanitizer none`
//! every flag it passes (`-Cpasses=sancov-module`, `-Cllvm-args=...`,
//! `--cfg fuzzing`, `-Cdebug-assertions`) is a stable one, so no nightly and
//! no `RUSTC_BOOTSTRAP` is needed. The targets fuzz safe Rust (the parser and
//! the pure core), where AddressSanitizer would add little: what they look
//! for are panics (overflow checks and debug assertions are on) and broken
//! invariants.
//!
//! cargo-fuzz is installed with `cargo install cargo-fuzz --locked --debug` when
//! missing (`cargo xtask ci` starts that beside its tests). The fuzz project is its own workspace (excluded from the root
//! one) and builds into `fuzz/target`; corpora and crash artifacts go to
//! `fuzz/corpus` and `fuzz/artifacts` (both git-ignored).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::run::{cargo, root, step};

/// The targets, in the order they run.
pub const TARGETS: [&str; 4] = ["scenario_parse", "scenario_run", "event_decode", "rwlog_replay"];
/// Seconds per target for `cargo xtask fuzz`.
pub const DEFAULT_SECONDS: u64 = 300;
/// Seconds per target for the bounded run in `cargo xtask ci`.
pub const SHORT_SECONDS: u64 = 15;

/// The arguments cargo-fuzz gets on every build and run.
const FUZZ_ARGS: [&str; 2] = ["--sanitizer", "none"];

/// One target's run.
#[derive(Debug)]
struct Outcome {
    target: &'static str,
    /// Executions and fuzzing seconds, as libFuzzer reports them.
    executions: Option<(u64, u64)>,
    /// Wall time of `cargo fuzz run` (its build check included).
    wall: f64,
    corpus: usize,
    result: Result<(), String>,
}

/// `cargo xtask fuzz [--seconds N | --short]`.
pub fn run(args: &[String]) -> Result<(), String> {
    let mut seconds = DEFAULT_SECONDS;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--short" => return short(),
            "--seconds" => {
                let v = it.next().ok_or("--seconds needs a value")?;
                seconds = v.parse().map_err(|_| format!("--seconds {v}: not a whole number of seconds"))?;
            }
            other => {
                return Err(format!(
                    "fuzz: unknown argument {other} (usage: cargo xtask fuzz [--seconds N | --short])"
                ));
            }
        }
    }
    if seconds == 0 {
        return Err("--seconds must be at least 1".into());
    }
    fuzz_all(seconds)
}

/// The bounded fuzz run `cargo xtask ci` makes: every target for
/// [`SHORT_SECONDS`] seconds.
pub fn short() -> Result<(), String> {
    fuzz_all(SHORT_SECONDS)
}

fn fuzz_all(seconds: u64) -> Result<(), String> {
    ensure_cargo_fuzz()?;
    let fuzz_dir = root().join("fuzz");
    step("fuzz build", fuzz_cmd().args(["build"]).args(FUZZ_ARGS))?;
    let mut outcomes = Vec::new();
    for target in TARGETS {
        outcomes.push(run_target(&fuzz_dir, target, seconds)?);
    }
    println!("fuzz: {seconds} s per target (cargo fuzz, libFuzzer, --sanitizer none)");
    for o in &outcomes {
        let (execs, secs) = o.executions.map_or_else(|| ("?".to_string(), 0), |(n, s)| (n.to_string(), s));
        let rate = o.executions.map_or(0.0, |(n, s)| n as f64 / s.max(1) as f64);
        let result = match &o.result {
            Ok(()) => "ok, no crash".to_string(),
            Err(e) => format!("FAILED: {e}"),
        };
        println!(
            "  {:<15} {execs:>11} executions in {secs:>4} s ({rate:>7.0}/s; {:>4.0} s wall), corpus {:>5} inputs: {result}",
            o.target, o.wall, o.corpus
        );
    }
    let failed: Vec<String> =
        outcomes.iter().filter_map(|o| o.result.as_ref().err().map(|e| format!("{}: {e}", o.target))).collect();
    if failed.is_empty() { Ok(()) } else { Err(format!("fuzzing found a problem: {}", failed.join("; "))) }
}

/// `cargo fuzz ...` from the workspace root, building into `fuzz/target`
/// whatever `CARGO_TARGET_DIR` says (the fuzz build uses other flags than
/// the workspace's, so sharing a target dir would only rebuild both).
fn fuzz_cmd() -> Command {
    let mut cmd = cargo();
    cmd.arg("fuzz").env_remove("CARGO_TARGET_DIR");
    cmd
}

fn have_cargo_fuzz() -> bool {
    let have = cargo().args(["fuzz", "--version"]).stdout(Stdio::null()).stderr(Stdio::null()).status();
    have.is_ok_and(|s| s.success())
}

/// `cargo install cargo-fuzz`, unoptimised: it only runs cargo, and builds
/// in half the time.
fn install_cmd() -> Command {
    let mut cmd = cargo();
    cmd.args(["install", "cargo-fuzz", "--locked", "--debug"]);
    cmd
}

fn ensure_cargo_fuzz() -> Result<(), String> {
    if have_cargo_fuzz() {
        return Ok(());
    }
    let started = Instant::now();
    step("install cargo-fuzz", &mut install_cmd())?;
    eprintln!("==> cargo-fuzz installed in {:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// What `fuzz_all` needs built first (cargo-fuzz, then the targets), with
/// every command's output into `log`: `cargo xtask ci` runs it beside its
/// tests, whose run leaves cores idle while its processes wait.
pub fn prepare(log: &std::fs::File) -> Result<(), String> {
    let into = |cmd: &mut Command| -> Result<(), String> {
        let out = log.try_clone().map_err(|e| format!("fuzz log: {e}"))?;
        let err = log.try_clone().map_err(|e| format!("fuzz log: {e}"))?;
        cmd.stdout(out).stderr(err);
        Ok(())
    };
    if !have_cargo_fuzz() {
        let mut install = install_cmd();
        into(&mut install)?;
        step("install cargo-fuzz", &mut install)?;
    }
    let mut build = fuzz_cmd();
    build.args(["build"]).args(FUZZ_ARGS);
    into(&mut build)?;
    step("fuzz build", &mut build)
}

/// Copies the built-in scenarios into the `scenario_parse` corpus (never
/// committed: `/fuzz/corpus` is git-ignored). Returns how many.
fn seed_scenarios(corpus: &Path) -> Result<usize, String> {
    let dir = root().join("crates/cli/scenarios");
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut n = 0;
    for entry in entries {
        let path = entry.map_err(|e| e.to_string())?.path();
        if path.extension().is_some_and(|e| e == "toml") {
            let name = path.file_name().map(PathBuf::from).unwrap_or_default();
            let to = corpus.join(format!("seed-{}", name.display()));
            std::fs::copy(&path, &to).map_err(|e| format!("{} -> {}: {e}", path.display(), to.display()))?;
            n += 1;
        }
    }
    if n == 0 {
        return Err(format!("no seed scenarios in {}", dir.display()));
    }
    Ok(n)
}

fn run_target(fuzz_dir: &Path, target: &'static str, seconds: u64) -> Result<Outcome, String> {
    let corpus = fuzz_dir.join("corpus").join(target);
    std::fs::create_dir_all(&corpus).map_err(|e| format!("{}: {e}", corpus.display()))?;
    let mut libfuzzer = vec![
        format!("-max_total_time={seconds}"),
        // A single input taking seconds is a bug too (a hang).
        "-timeout=10".to_string(),
        "-print_final_stats=1".to_string(),
    ];
    if target == "rwlog_replay" {
        // An input log of a built-in (device-removal), recorded with
        // `simulate --record`: the shape the fuzzer mutates.
        let seed = fuzz_dir.join("rwlog_seed.rwlog");
        std::fs::copy(&seed, corpus.join("seed.rwlog")).map_err(|e| format!("{}: {e}", seed.display()))?;
    }
    if target.starts_with("scenario_") {
        let seeds = seed_scenarios(&corpus)?;
        eprintln!("==> fuzz {target}: {seeds} built-in scenarios seeded into {}", corpus.display());
        libfuzzer.push(format!("-dict={}", fuzz_dir.join("scenario_parse.dict").display()));
    }
    let mut cmd = fuzz_cmd();
    cmd.args(["run", target]).args(FUZZ_ARGS).arg("--").args(&libfuzzer);
    eprintln!("==> fuzz {target} for {seconds} s: {cmd:?}");
    let started = Instant::now();
    let mut child = cmd
        .stdout(Stdio::inherit())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("fuzz {target}: cannot start cargo fuzz: {e}"))?;
    let stderr = child.stderr.take().ok_or("no stderr pipe")?;
    let mut executions = None;
    // A Rust panic is `thread '…' panicked at file:line:col:` with the
    // message on the next line; libFuzzer then names the crashing input.
    let mut panic: Option<String> = None;
    let mut panic_next = false;
    let mut artifact: Option<String> = None;
    for line in BufReader::new(stderr).lines() {
        let line = line.map_err(|e| e.to_string())?;
        // libFuzzer's own progress lines (NEW, REDUCE, pulse ...) and its
        // recommended dictionary are noise at this length; the rest (the
        // build, the final stats, a crash report) is shown.
        let progress = line.starts_with('#') || line.starts_with('"') || line.contains("dictionary. ######");
        if !progress {
            eprintln!("{line}");
        }
        if let Some(n) = parse_done(&line) {
            executions = Some(n);
        }
        if panic_next {
            panic_next = false;
            if let Some(p) = panic.as_mut() {
                p.push(' ');
                p.push_str(line.trim());
            }
        }
        if panic.is_none() && line.contains("panicked at") {
            panic = Some(line.trim().to_string());
            panic_next = true;
        }
        if let Some(path) = line.split("Test unit written to ").nth(1) {
            artifact = Some(path.trim().to_string());
        }
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    let seconds_taken = started.elapsed().as_secs_f64();
    let corpus_len = std::fs::read_dir(&corpus).map(|d| d.count()).unwrap_or(0);
    let result = if status.success() {
        Ok(())
    } else {
        let artifact = artifact.unwrap_or_else(|| format!("see {}", fuzz_dir.join("artifacts").join(target).display()));
        let panic = panic.unwrap_or_else(|| "no panic message (see the output above)".into());
        Err(format!(
            "{status}; {panic}; input {artifact} (reproduce: cargo fuzz run --sanitizer none {target} <input>)"
        ))
    };
    Ok(Outcome { target, executions, wall: seconds_taken, corpus: corpus_len, result })
}

/// `Done 452171 runs in 31 second(s)` → (452171, 31).
fn parse_done(line: &str) -> Option<(u64, u64)> {
    let words: Vec<&str> = line.strip_prefix("Done ")?.split_whitespace().collect();
    match words.as_slice() {
        [runs, "runs", "in", secs, ..] => Some((runs.parse().ok()?, secs.parse().ok()?)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_libfuzzer_final_line() {
        assert_eq!(parse_done("Done 452171 runs in 31 second(s)"), Some((452171, 31)));
        assert_eq!(parse_done("#452171 DONE cov: 380"), None);
    }
}
