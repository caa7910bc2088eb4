//! `cargo xtask attack`: the `/metrics` endpoint under the attacks of
//! `crates/cli/benches/attack.rs` (idle connections, slowloris, clients
//! that never read, 1 MiB heads), a well-behaved scraper's p50 and p99
//! and failed scrapes under each, against its baseline in the same run.
//! The target: p99 within 2× the baseline's and no scrape failing.
//! The figures land in `<target>/railwatch-bench/attack.tsv`.

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

/// Runs the bench and prints the table; an error if a target is missed.
pub fn run(args: &[String]) -> Result<(), String> {
    if !args.is_empty() {
        return Err("usage: cargo xtask attack".into());
    }
    let out = crate::run::target_dir().join("railwatch-bench");
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let mut cmd = cargo();
    cmd.args(["bench", "-q", "-p", "railwatch", "--bench", "attack"]).stdout(Stdio::piped());
    eprintln!("==> attack bench: {cmd:?}");
    let run = cmd.output().map_err(|e| format!("attack bench: {e}"))?;
    if !run.status.success() {
        return Err(format!("the attack bench failed ({})", run.status));
    }
    let file = out.join("attack.tsv");
    std::fs::write(&file, &run.stdout).map_err(|e| format!("{}: {e}", file.display()))?;
    let values = crate::bench::read_results(&file)?;
    let get = |k: &str| values.get(k).copied().ok_or_else(|| format!("the attack bench did not report {k}"));
    let (text, missed) = table(&get)?;
    println!("\n{text}");
    if missed > 0 { Err(format!("{missed} attack(s) missed the target")) } else { Ok(()) }
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
