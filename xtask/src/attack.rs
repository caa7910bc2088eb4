//! `cargo xtask attack [metrics|state]`: two tables.
//!
//! - `metrics`: the `/metrics` endpoint under the attacks of
//!   `crates/cli/benches/attack.rs` (idle connections, slowloris, clients
//!   that never read, 1 MiB heads, state-stream readers that never read),
//!   a well-behaved scraper's p50 and p99 and failed scrapes under each,
//!   against its baseline in the same run. The target: p99 within 2× the
//!   baseline's and no scrape failing. Figures in
//!   `<target>/railwatch-bench/attack.tsv`.
//! - `state`: the state socket under the attacks of
//!   `crates/cli/benches/state_attack.rs` (issue 30: 1,000 idle clients,
//!   100 slowloris, 200 stream readers that never read, 1 MiB heads): the
//!   watch loop's recovery p99 and `/metrics` scrapes' p99 against rounds
//!   without the attack, failed scrapes, the process's memory; a symbolic
//!   link or a file offered as the socket refused. The target: both
//!   ratios ≤ 1.1×, no scrape failing. Figures in
//!   `<target>/railwatch-bench/state_attack.tsv`.

use std::fmt::Write as _;
use std::process::Stdio;

use crate::run::cargo;

/// The attacks, in the bench's order.
const ATTACKS: [(&str, &str); 5] = [
    ("idle", "1,000 idle connections"),
    ("slowloris", "100 slowloris clients (a byte a second)"),
    ("neverread", "200 clients that never read (each renewed after 1 s)"),
    ("heads", "8 clients sending 1 MiB heads (each every 50 ms)"),
    ("streams", "200 state-stream readers that never read, the state changing every 50 ms"),
];

/// The most a scrape's p99 may grow under an attack.
const P99_BOUND: f64 = 2.0;

/// The attacks on the state socket, in the bench's order.
const STATE_ATTACKS: [(&str, &str); 4] = [
    ("idle", "1,000 idle connections"),
    ("slowloris", "100 slowloris clients (a byte a second)"),
    ("streams", "200 stream readers that never read (each renewed after 1 s)"),
    ("heads", "8 clients sending 1 MiB heads (each every 50 ms)"),
];

/// The most the loop's recovery p99 and a scrape's p99 may grow under an
/// attack on the state socket (issue 30).
const STATE_BOUND: f64 = 1.1;

/// Runs the benches and prints the tables; an error if a target is missed.
pub fn run(args: &[String]) -> Result<(), String> {
    let (metrics, state) = match args {
        [] => (true, true),
        [a] if a == "metrics" => (true, false),
        [a] if a == "state" => (false, true),
        _ => return Err("usage: cargo xtask attack [metrics|state]".into()),
    };
    let mut missed = 0;
    if metrics {
        let values = bench("attack")?;
        let get = |k: &str| values.get(k).copied().ok_or_else(|| format!("the attack bench did not report {k}"));
        let (text, m) = table(&get)?;
        println!("\n{text}");
        missed += m;
    }
    if state {
        let values = bench("state_attack")?;
        let get = |k: &str| values.get(k).copied().ok_or_else(|| format!("the state_attack bench did not report {k}"));
        let (text, m) = state_table(&get)?;
        println!("\n{text}");
        missed += m;
    }
    if missed > 0 { Err(format!("{missed} attack(s) missed the target")) } else { Ok(()) }
}

/// Runs one bench of `railwatch`; its `key<TAB>value` lines, also kept as
/// `<target>/railwatch-bench/NAME.tsv`.
fn bench(name: &str) -> Result<std::collections::BTreeMap<String, f64>, String> {
    let out = crate::run::target_dir().join("railwatch-bench");
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let mut cmd = cargo();
    cmd.args(["bench", "-q", "-p", "railwatch", "--bench", name]).stdout(Stdio::piped());
    eprintln!("==> {name} bench: {cmd:?}");
    let run = cmd.output().map_err(|e| format!("{name} bench: {e}"))?;
    if !run.status.success() {
        return Err(format!("the {name} bench failed ({})", run.status));
    }
    let file = out.join(format!("{name}.tsv"));
    std::fs::write(&file, &run.stdout).map_err(|e| format!("{}: {e}", file.display()))?;
    crate::bench::read_results(&file)
}

/// The state socket's table (Markdown) and how many attacks missed the
/// target (a path not refused counts as one).
fn state_table(get: &dyn Fn(&str) -> Result<f64, String>) -> Result<(String, usize), String> {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| attack on the state socket | recovery p99 (baseline) | ratio | scrape p99 (baseline) | ratio | failed scrapes | RSS after | result |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---|");
    let start = get("state_attack_rss_start_kib")?;
    let mut missed = 0;
    for (key, what) in STATE_ATTACKS {
        let v = |k: &str| get(&format!("state_attack_{key}_{k}"));
        let (rec, rec_base, rec_ratio) =
            (v("recovery_p99_ns")? / 1e3, v("recovery_base_p99_ns")? / 1e3, v("recovery_ratio")?);
        let (scr, scr_base, scr_ratio) =
            (v("scrape_p99_ns")? / 1e6, v("scrape_base_p99_ns")? / 1e6, v("scrape_ratio")?);
        let (failed, scrapes, rss) = (v("failures")?, v("scrapes")?, v("rss_kib")?);
        let pass = rec_ratio <= STATE_BOUND && scr_ratio <= STATE_BOUND && failed == 0.0;
        missed += usize::from(!pass);
        let verdict = if pass { "pass" } else { "**FAIL**" };
        let _ = writeln!(
            s,
            "| {what} | {rec:.1} µs ({rec_base:.1}) | {rec_ratio:.2}× | {scr:.2} ms ({scr_base:.2}) | {scr_ratio:.2}× | {failed:.0} of {scrapes:.0} | {:.1} MiB | {verdict} |",
            rss / 1024.0
        );
    }
    let refused = get("state_attack_paths_refused")? == 1.0;
    missed += usize::from(!refused);
    let _ = writeln!(
        s,
        "\nRSS at the start {:.1} MiB. A symbolic link or a file offered as the socket: {}.\nTarget: both p99s ≤ {STATE_BOUND}× the baseline's (the median of the per-pair ratios), no scrape failing.",
        start / 1024.0,
        if refused { "refused, left as they were" } else { "**NOT refused**" }
    );
    Ok((s, missed))
}

/// The table (Markdown) and how many attacks missed the target.
fn table(get: &dyn Fn(&str) -> Result<f64, String>) -> Result<(String, usize), String> {
    let mut s = String::new();
    let _ =
        writeln!(s, "| attack | scrape p50 | scrape p99 | baseline p50 / p99 | p99 ratio | failed scrapes | result |");
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---|");
    let mut missed = 0;
    for (key, what) in ATTACKS {
        let ms = |k: &str| get(&format!("attack_{key}_{k}_ns")).map(|v| v / 1e6);
        let (p50, p99, b50, b99) = (ms("p50")?, ms("p99")?, ms("base_p50")?, ms("base_p99")?);
        let ratio = get(&format!("attack_{key}_ratio"))?;
        let (failed, scrapes) = (get(&format!("attack_{key}_failures"))?, get(&format!("attack_{key}_scrapes"))?);
        let pass = ratio <= P99_BOUND && failed == 0.0;
        missed += usize::from(!pass);
        let verdict = if pass { "pass" } else { "**FAIL**" };
        let _ = writeln!(
            s,
            "| {what} | {p50:.2} ms | {p99:.2} ms | {b50:.2} / {b99:.2} ms | {ratio:.2}× | {failed:.0} of {scrapes:.0} | {verdict} |"
        );
    }
    let _ = writeln!(
        s,
        "\nTarget: p99 ≤ {P99_BOUND}× the baseline's (the median of 10 pairs of rounds, with and without the attack), no scrape failing."
    );
    Ok((s, missed))
}
