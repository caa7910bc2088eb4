//! `cargo xtask bench [--table-only]`: runs the benches of
//! `railwatch-runtime` and prints one table of ratios, each measured
//! against its baseline in the same run (docs/PERFORMANCE.md).
//!
//! - `table` (a plain bench binary) measures every row: interleaved A/B
//!   ratios, latency percentiles, wake-up, allocation and memory counts.
//! - `drain`, `gate`, `tick` (criterion) time the same code paths one
//!   after the other with criterion's statistics; their medians and ratios
//!   are printed below the table as a cross-check. `--table-only` skips
//!   them.
//!
//! - `crates/ffi/bench/c_api_bench.c` (a C program over the release
//!   `librailwatch.a`) measures the C API's rows the same way, and
//!   `crates/cli/benches/scrape.rs` the cost of being scraped (row 10),
//!   `crates/cli/benches/record.rs` the cost of recording (row 11),
//!   `crates/cli/benches/readers.rs` the cost of the state API's readers
//!   (row 13).
//!
//! Results land in `<target>/railwatch-bench/`: `results.tsv` (from
//! `table`), `c_api.tsv`, `criterion/` (criterion's estimates) and
//! `table.md`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use crate::run::{cargo, step};

/// Runs the benches and prints the table.
pub fn run(args: &[String]) -> Result<(), String> {
    let table_only = match args {
        [] => false,
        [a] if a == "--table-only" => true,
        _ => return Err("usage: cargo xtask bench [--table-only]".into()),
    };
    let target = crate::run::target_dir();
    let out = target.join("railwatch-bench");
    if out.exists() {
        std::fs::remove_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    }
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let results = out.join("results.tsv");
    let criterion = out.join("criterion");

    let mut cmd = cargo();
    cmd.args(["bench", "-p", "railwatch-runtime", "--bench", "table"]);
    if !table_only {
        cmd.args(["--bench", "drain", "--bench", "gate", "--bench", "tick"]);
    }
    cmd.env("RAILWATCH_BENCH_OUT", &results).env("CRITERION_HOME", &criterion);
    let started = Instant::now();
    step("benches", &mut cmd)?;
    let elapsed = started.elapsed().as_secs_f64();

    let mut values = read_results(&results)?;
    values.extend(c_api_bench(&out)?);
    values.extend(cli_bench(&out, "scrape")?);
    values.extend(cli_bench(&out, "record")?);
    values.extend(cli_bench(&out, "readers")?);
    let mut text = table(&values)?;
    if !table_only {
        text.push('\n');
        text.push_str(&criterion_section(&criterion));
    }
    let _ = writeln!(text, "\nbench run (build included): {elapsed:.0} s");
    println!("\n{text}");
    let file = out.join("table.md");
    std::fs::write(&file, &text).map_err(|e| format!("{}: {e}", file.display()))?;
    eprintln!("==> bench: table written to {}", file.display());
    Ok(())
}

/// The C API's figures (rows 8 and 9): `crates/ffi/bench/c_api_bench.c`,
/// built -O2 against the release `librailwatch.a` (with the feature
/// `bench-exports`), measures both sides of
/// each ratio in one process, round by round.
fn c_api_bench(out: &Path) -> Result<BTreeMap<String, f64>, String> {
    // With the benchmark's own exports (`rw_bench_*`), which the shipped
    // library leaves out.
    step(
        "build railwatch-ffi (release, bench exports)",
        cargo().args(["build", "--release", "-p", "railwatch-ffi", "--features", "bench-exports"]),
    )?;
    let root = crate::run::root();
    let lib = crate::run::target_dir().join("release/librailwatch.a");
    let bin = out.join("c_api_bench");
    step(
        "compile c_api_bench.c",
        std::process::Command::new("cc")
            .args(["-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I"])
            .arg(root.join("crates/ffi/include"))
            .arg(root.join("crates/ffi/bench/c_api_bench.c"))
            .arg(&lib)
            .args(["-lpthread", "-ldl", "-lm", "-o"])
            .arg(&bin),
    )?;
    let run = std::process::Command::new(&bin).output().map_err(|e| format!("{}: {e}", bin.display()))?;
    if !run.status.success() {
        return Err(format!("c_api_bench failed ({}): {}", run.status, String::from_utf8_lossy(&run.stderr)));
    }
    let file = out.join("c_api.tsv");
    std::fs::write(&file, &run.stdout).map_err(|e| format!("{}: {e}", file.display()))?;
    read_results(&file)
}

/// Rows 10, 11 and 13: a bench of the cli crate (`crates/cli/benches/NAME.rs`:
/// `scrape`, recovery p99 with the metrics fed as `watch` feeds them and a
/// 10 Hz scraper, against no scraper; `record`, the same with a recorder
/// observing, against none; `readers`, with 100 state readers at 10 Hz,
/// against none), which prints `key<TAB>value` lines.
fn cli_bench(out: &Path, name: &str) -> Result<BTreeMap<String, f64>, String> {
    let mut cmd = cargo();
    cmd.args(["bench", "-q", "-p", "railwatch", "--bench", name]).stdout(std::process::Stdio::piped());
    eprintln!("==> {name} bench: {cmd:?}");
    let run = cmd.output().map_err(|e| format!("{name} bench: {e}"))?;
    if !run.status.success() {
        return Err(format!("the {name} bench failed ({})", run.status));
    }
    let file = out.join(format!("{name}.tsv"));
    std::fs::write(&file, &run.stdout).map_err(|e| format!("{}: {e}", file.display()))?;
    read_results(&file)
}

pub(crate) fn read_results(path: &Path) -> Result<BTreeMap<String, f64>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut map = BTreeMap::new();
    for line in text.lines() {
        let Some((k, v)) = line.split_once('\t') else { continue };
        let v: f64 = v.trim().parse().map_err(|e| format!("{}: {line:?}: {e}", path.display()))?;
        map.insert(k.to_string(), v);
    }
    Ok(map)
}

/// A ratio row's target: a bound, or none (the row is context).
#[derive(Clone, Copy)]
enum Goal {
    AtMost(f64),
    Info,
}

struct Row {
    target: &'static str,
    what: String,
    value: String,
    baseline: String,
    ratio: String,
    goal: String,
    pass: Option<bool>,
}

fn ns(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2} ms", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1} µs", v / 1e3)
    } else if v >= 10.0 {
        format!("{v:.0} ns")
    } else {
        format!("{v:.2} ns")
    }
}

fn ratio_row(target: &'static str, what: &str, value: f64, base: f64, ratio: f64, goal: Goal) -> Row {
    let (goal, pass) = match goal {
        Goal::AtMost(g) => (format!("≤ {g}×"), Some(ratio <= g)),
        Goal::Info => ("—".into(), None),
    };
    Row { target, what: what.into(), value: ns(value), baseline: ns(base), ratio: format!("{ratio:.2}×"), goal, pass }
}

/// Reads one figure of the benches' results, or says which is missing.
type Get<'a> = &'a dyn Fn(&str) -> Result<f64, String>;

/// The table of every row, in order, with its verdicts (Markdown).
fn table(v: &BTreeMap<String, f64>) -> Result<String, String> {
    let get = |k: &str| v.get(k).copied().ok_or_else(|| format!("the bench did not report {k}"));
    let mut rows = Vec::new();
    drain_and_gate_rows(&get, &mut rows)?;
    recovery_and_idle_rows(&get, &mut rows)?;
    scale_rows(&get, &mut rows)?;
    c_api_and_cli_rows(&get, &mut rows)?;
    Ok(render(&rows, get("pipe_capacity_bytes")?))
}

/// Rows 1 and 2: the drain and the gate against their floors.
fn drain_and_gate_rows(get: Get<'_>, rows: &mut Vec<Row>) -> Result<(), String> {
    let bare = get("drain_bare_ns")?;
    rows.push(ratio_row(
        "1",
        "drain, per event: monitor over the sim (10k COMM_EST) vs bare read() loop",
        get("drain_monitor_sim_ns")?,
        bare,
        get("drain_monitor_sim_ratio")?,
        Goal::AtMost(1.5),
    ));
    rows.push(ratio_row(
        "1",
        "drain, per event: monitor over a raw-pipe port (read + decode) vs bare read() loop",
        get("drain_monitor_raw_ns")?,
        bare,
        get("drain_monitor_raw_ratio")?,
        Goal::AtMost(1.5),
    ));
    rows.push(ratio_row(
        "1",
        "  (context) the sim's get_event alone, no monitor, vs bare read() loop",
        get("drain_sim_only_ns")?,
        bare,
        get("drain_sim_only_ratio")?,
        Goal::Info,
    ));
    rows.push(ratio_row(
        "2",
        "Gate::check vs relaxed atomic load, 1 thread (latency: dependent chain over 16 rails)",
        get("gate_1t_check_ns")?,
        get("gate_1t_load_ns")?,
        get("gate_1t_check_ratio")?,
        Goal::AtMost(1.2),
    ));
    rows.push(ratio_row(
        "2",
        "Gate::check vs relaxed atomic load, 8 threads (the same chains, wall time per step per thread)",
        get("gate_8t_check_ns")?,
        get("gate_8t_load_ns")?,
        get("gate_8t_check_ratio")?,
        Goal::AtMost(1.2),
    ));
    rows.push(ratio_row(
        "2",
        "  (context) throughput: 16 independent checks vs 16 independent loads, 1 thread",
        get("gate_sweep_check_ns")?,
        get("gate_sweep_load_ns")?,
        get("gate_sweep_check_ratio")?,
        Goal::Info,
    ));
    let gate_allocs = get("gate_allocs_1t")? + get("gate_allocs_8t")? + get("gate_allocs_refused_1t")?;
    rows.push(Row {
        target: "2",
        what: "heap allocations in 10M Gate::check (1 thread, 8 threads, refused)".into(),
        value: format!("{gate_allocs:.0}"),
        baseline: "—".into(),
        ratio: "—".into(),
        goal: "0".into(),
        pass: Some(gate_allocs == 0.0),
    });
    Ok(())
}

/// Rows 3 and 4: recovery latency against an epoll round trip, and idle
/// wake-ups.
fn recovery_and_idle_rows(get: Get<'_>, rows: &mut Vec<Row>) -> Result<(), String> {
    let floor50 = get("recovery_floor_p50_ns")?;
    let floor99 = get("recovery_floor_p99_ns")?;
    let (ev50, ev99) = (get("recovery_event_p50_ns")?, get("recovery_event_p99_ns")?);
    let (raw50, raw99) = (get("recovery_event_raw_p50_ns")?, get("recovery_event_raw_p99_ns")?);
    rows.push(ratio_row(
        "3",
        "recovery p50, monitor over the sim: PORT_ACTIVE written → spinning worker's gate admits, vs epoll round trip",
        ev50,
        floor50,
        ev50 / floor50,
        Goal::Info,
    ));
    rows.push(ratio_row(
        "3",
        "recovery p99 (10k flaps), monitor over the sim, vs epoll round trip p99",
        ev99,
        floor99,
        ev99 / floor99,
        Goal::AtMost(3.0),
    ));
    rows.push(ratio_row(
        "3",
        "  (context) recovery p50, monitor over the raw-pipe port",
        raw50,
        floor50,
        raw50 / floor50,
        Goal::Info,
    ));
    rows.push(ratio_row(
        "3",
        "  (context) recovery p99, monitor over the raw-pipe port",
        raw99,
        floor99,
        raw99 / floor99,
        Goal::Info,
    ));
    let tick_ms = get("idle_tick_ms")?;
    let healthy = get("idle_healthy_wakeups_per_s")?;
    let polling = 1000.0 / tick_ms;
    rows.push(Row {
        target: "4",
        what: format!("idle wake-ups/s, 8 healthy devices (vs a {tick_ms:.0} ms polling loop)"),
        value: format!("{healthy:.2}/s"),
        baseline: format!("{polling:.0}/s"),
        ratio: format!("{:.2}×", healthy / polling),
        goal: "0/s".into(),
        pass: Some(healthy == 0.0),
    });
    let paused = get("idle_paused_wakeups_per_s")?;
    let ticks = get("idle_paused_ticks_per_s")?;
    let per_tick = if ticks > 0.0 { paused / ticks } else { f64::INFINITY };
    rows.push(Row {
        target: "4",
        what: format!("wake-ups per tick, 1 paused rail of 8 (tick {tick_ms:.0} ms)"),
        value: format!("{paused:.2}/s"),
        baseline: format!("{ticks:.2} ticks/s"),
        ratio: format!("{per_tick:.2}×"),
        goal: "1 per tick (≤ 1.1×)".into(),
        pass: Some(per_tick <= 1.1),
    });
    Ok(())
}

/// Rows 5 to 7: the tick and the drain as devices grow, memory per rail,
/// allocations on the event path, the monitor against the bare machine.
fn scale_rows(get: Get<'_>, rows: &mut Vec<Row>) -> Result<(), String> {
    let tick1 = get("tick_1_ns")?;
    for n in ["64", "1024", "4096"] {
        rows.push(ratio_row(
            "5",
            &format!("tick through poll_once, {n} rails / 1 paused vs 1 rail / 1 paused"),
            get(&format!("tick_{n}_ns"))?,
            tick1,
            get(&format!("tick_{n}_ratio"))?,
            Goal::AtMost(1.5),
        ));
    }
    rows.push(ratio_row(
        "5",
        "  (context) tick, 4096 rails / 64 paused vs 1 rail / 1 paused",
        get("tick_4096_paused64_ns")?,
        tick1,
        get("tick_4096_paused64_ratio")?,
        Goal::Info,
    ));
    let mem = get("mem_per_rail_4096")?;
    rows.push(Row {
        target: "5",
        what: format!(
            "monitor heap per rail, 4096 single-port devices (malloc usable: {:.0} B)",
            get("mem_usable_per_rail_4096")?
        ),
        value: format!("{mem:.0} B"),
        baseline: "—".into(),
        ratio: "—".into(),
        goal: "≤ 512 B".into(),
        pass: Some(mem <= 512.0),
    });
    let drain1 = get("drain_devices_1_ns")?;
    for n in ["64", "1024", "4096"] {
        rows.push(ratio_row(
            "5",
            &format!("drain, per event, burst on 1 device of {n} vs of 1"),
            get(&format!("drain_devices_{n}_ns"))?,
            drain1,
            get(&format!("drain_devices_{n}_ratio"))?,
            Goal::AtMost(1.2),
        ));
    }
    let (sim, raw) = (get("allocs_per_event_sim")?, get("allocs_per_event_raw")?);
    rows.push(Row {
        target: "6",
        what: "heap allocations per drained COMM_EST after warm-up (sim / raw port)".into(),
        value: format!("{sim} / {raw}"),
        baseline: "—".into(),
        ratio: "—".into(),
        goal: "0".into(),
        pass: Some(sim == 0.0 && raw == 0.0),
    });
    let port = get("allocs_per_port_event")?;
    rows.push(Row {
        target: "6",
        what: "heap allocations per port event (PORT_ERR / PORT_ACTIVE, with the query and link read)".into(),
        value: format!("{port}"),
        baseline: "—".into(),
        ratio: "—".into(),
        goal: "0".into(),
        pass: Some(port == 0.0),
    });
    rows.push(ratio_row(
        "7",
        "(context) a flap's events through the monitor (pipe, drain, actions) vs fed to the machine directly, per event",
        get("machine_monitor_ns")?,
        get("machine_direct_ns")?,
        get("machine_monitor_ratio")?,
        Goal::Info,
    ));
    rows.push(ratio_row(
        "12",
        "a transfer report (one line: successes through a peer) through Machine::handle_transfers vs a counted COMM_EST through Machine::handle_event, per call",
        get("transfers_report_ns")?,
        get("transfers_comm_est_ns")?,
        get("transfers_report_ratio")?,
        Goal::AtMost(1.2),
    ));
    rows.push(ratio_row(
        "12",
        "  (context) a mixed report of 4 lines (successes through 2 peers, a peer's refusal, a flush) vs the same COMM_EST",
        get("transfers_report4_ns")?,
        get("transfers_comm_est_ns")?,
        get("transfers_report4_ratio")?,
        Goal::Info,
    ));
    let allocs = get("allocs_per_transfer_report")?;
    rows.push(Row {
        target: "12",
        what: "heap allocations per transfer report after warm-up".into(),
        value: format!("{allocs}"),
        baseline: "—".into(),
        ratio: "—".into(),
        goal: "0".into(),
        pass: Some(allocs == 0.0),
    });
    let allocs = get("allocs_per_probe_cycle")?;
    rows.push(Row {
        target: "12",
        what: "heap allocations per half-open cycle (backoff run, probe granted, its failure reported) after warm-up"
            .into(),
        value: format!("{allocs}"),
        baseline: "—".into(),
        ratio: "—".into(),
        goal: "0".into(),
        pass: Some(allocs == 0.0),
    });
    Ok(())
}

/// Rows 8 to 11: the C API, and the cli's metrics scrape and recorder.
fn c_api_and_cli_rows(get: Get<'_>, rows: &mut Vec<Row>) -> Result<(), String> {
    rows.push(ratio_row(
        "8",
        "C: the header's inline gate check (acquire load, decode, generation used) vs a relaxed load of a flag word and a branch (latency: dependent chain over 16 rails)",
        get("c_gate_inline_ns")?,
        get("c_gate_relaxed_ns")?,
        get("c_gate_ratio")?,
        Goal::AtMost(1.2),
    ));
    rows.push(ratio_row(
        "9",
        "C: port events fed through the C API with their actions (a flap: events, batched actions, answers) vs the same calls in Rust, per event",
        get("c_feed_capi_ns")?,
        get("c_feed_rust_ns")?,
        get("c_feed_ratio")?,
        Goal::AtMost(1.3),
    ));
    rows.push(ratio_row(
        "9",
        "  (context) one COMM_EST (counted only, no action) through rw_machine_handle_event vs Machine::handle_event: the crossing alone",
        get("c_event_capi_ns")?,
        get("c_event_rust_ns")?,
        get("c_event_ratio")?,
        Goal::Info,
    ));

    rows.push(ratio_row(
        "10",
        "recovery p99 (PORT_ACTIVE written → gate admits) with the metrics fed as watch feeds them and /metrics scraped at 10 Hz, vs not scraped",
        get("scrape_p99_on_ns")?,
        get("scrape_p99_off_ns")?,
        get("scrape_ratio")?,
        Goal::AtMost(1.1),
    ));
    rows.push(ratio_row(
        "11",
        "recovery p99 (PORT_ACTIVE written → gate admits) with watch --record's recorder observing every input and flushed after every wake-up, vs no recorder (back-to-back flaps, the worst case; after a 150 ms warm-up)",
        get("record_p99_on_ns")?,
        get("record_p99_off_ns")?,
        get("record_ratio")?,
        Goal::AtMost(1.3),
    ));
    rows.push(ratio_row(
        "11",
        "  (context) the same in a new recording's first 150 ms, while its buffers grow",
        get("record_cold_p99_on_ns")?,
        get("record_cold_p99_off_ns")?,
        get("record_cold_ratio")?,
        Goal::Info,
    ));
    rows.push(ratio_row(
        "11b",
        "the same with the input log (--record FILE.rwlog: each input a JSON line in memory, written each wake-up), vs no recorder",
        get("record_log_p99_on_ns")?,
        get("record_log_p99_off_ns")?,
        get("record_log_ratio")?,
        Goal::AtMost(1.05),
    ));
    rows.push(ratio_row(
        "13",
        "recovery p99 (PORT_ACTIVE written → gate admits) with the state published every wake-up and 100 clients reading GET /v1/state on the socket at 10 Hz, vs no reader",
        get("readers_p99_on_ns")?,
        get("readers_p99_off_ns")?,
        get("readers_ratio")?,
        Goal::AtMost(1.1),
    ));
    Ok(())
}

/// The rows as a Markdown table, then how many targets were met.
fn render(rows: &[Row], pipe_capacity: f64) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "| # | measurement | value | baseline | ratio | target | result |");
    let _ = writeln!(s, "|---|---|---:|---:|---:|---|---|");
    for r in rows {
        let result = match r.pass {
            Some(true) => "pass",
            Some(false) => "**FAIL**",
            None => "",
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} |",
            r.target, r.what, r.value, r.baseline, r.ratio, r.goal, result
        );
    }
    let judged: Vec<bool> = rows.iter().filter_map(|r| r.pass).collect();
    let _ = writeln!(
        s,
        "\n{} of {} targets met. Pipe capacity {:.0} bytes.",
        judged.iter().filter(|p| **p).count(),
        judged.len(),
        pipe_capacity
    );
    s
}

/// The median point estimate (ns) of a criterion benchmark, from its
/// `new/estimates.json`.
fn criterion_median(dir: &Path, id: &str) -> Option<f64> {
    let text = std::fs::read_to_string(dir.join(id).join("new/estimates.json")).ok()?;
    let median = &text[text.find("\"median\"")?..];
    let pe = &median[median.find("\"point_estimate\":")? + "\"point_estimate\":".len()..];
    let end = pe.find([',', '}'])?;
    pe[..end].trim().parse().ok()
}

fn criterion_section(dir: &Path) -> String {
    // (subject, baseline, ops per iteration)
    let pairs: [(&str, &str, f64); 14] = [
        ("drain/monitor_sim", "drain/bare_read", 10_000.0),
        ("drain/monitor_raw", "drain/bare_read", 10_000.0),
        ("drain/sim_only", "drain/bare_read", 10_000.0),
        ("gate/check_1t", "gate/relaxed_load_1t", 16.0),
        ("gate/check_8t", "gate/relaxed_load_8t", 16.0),
        ("gate/check_sweep_1t", "gate/relaxed_load_sweep_1t", 16.0),
        ("tick/paused_1/64", "tick/paused_1/1", 1.0),
        ("tick/paused_1/1024", "tick/paused_1/1", 1.0),
        ("tick/paused_1/4096", "tick/paused_1/1", 1.0),
        ("tick/paused_64/4096", "tick/paused_1/1", 1.0),
        ("drain_devices/monitor_sim/64", "drain_devices/monitor_sim/1", 10_000.0),
        ("drain_devices/monitor_sim/1024", "drain_devices/monitor_sim/1", 10_000.0),
        ("drain_devices/monitor_sim/4096", "drain_devices/monitor_sim/1", 10_000.0),
        ("drain_devices/monitor_sim/1", "drain/bare_read", 10_000.0),
    ];
    let mut s = String::new();
    let _ = writeln!(s, "Cross-check, criterion (each benchmark run after the other; medians):\n");
    let _ = writeln!(s, "| criterion benchmark | median per op | baseline | per op | ratio |");
    let _ = writeln!(s, "|---|---:|---|---:|---:|");
    for (subject, base, ops) in pairs {
        match (criterion_median(dir, subject), criterion_median(dir, base)) {
            (Some(a), Some(b)) => {
                let _ = writeln!(s, "| {subject} | {} | {base} | {} | {:.2}× |", ns(a / ops), ns(b / ops), a / b);
            }
            _ => {
                let _ = writeln!(s, "| {subject} | (missing) | {base} | | |");
            }
        }
    }
    s
}
