//! `simulate --metrics-series`: the metrics a scraper would have stored
//! during a run, as promtool's `input_series`; bounded, written as the
//! other output files are, and read by promtool as its test input.

use std::fs;
use std::process::{Command, Output};

mod common;
use common::railwatch;

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The `values` of the series `series` (exactly as written) in `text`.
fn values_of<'t>(text: &'t str, series: &str) -> Option<&'t str> {
    let line = format!("      - series: '{series}'");
    let mut lines = text.lines();
    lines.find(|l| *l == line)?;
    lines.next()?.trim().strip_prefix("values: '")?.strip_suffix('\'')
}

#[test]
fn a_poll_recovery_is_seen_scrape_by_scrape() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("series.yml");
    let path = out.to_str().unwrap();
    let run = railwatch(&[
        "simulate",
        "--builtin",
        "missed-port-active",
        "--metrics-series",
        path,
        "--scrape-interval",
        "1s",
    ]);
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    let text = fs::read_to_string(&out).unwrap();
    assert!(
        text.contains("\nevaluation_interval: 1s\ntests:\n  - name: 'missed-port-active'\n    interval: 1s\n"),
        "{text}"
    );
    let labels = r#"device="mlx5_0",port="1",instance="missed-port-active",job="railwatch""#;
    // The scenario: port 1 down at 100 ms, back at 500 ms with the
    // PORT_ACTIVE lost; the tick finds it at 2.1 s. Scrapes at 0, 1, 2, 3
    // and 4 s: the one at 2 s still sees it out.
    assert_eq!(values_of(&text, &format!("railwatch_rail_available{{{labels}}}")), Some("1 0x1 1x1"), "{text}");
    assert_eq!(
        values_of(&text, &format!("railwatch_recoveries_by_poll_total{{{labels}}}")),
        Some("0x2 1x1"),
        "there from the attach, at 0"
    );
    assert_eq!(
        values_of(&text, r#"up{instance="missed-port-active",job="railwatch"}"#),
        Some("1x4"),
        "one scrape a second, 0 to 4 s: {text}"
    );
}

#[test]
fn a_run_can_be_made_longer_and_only_longer() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("series.yml");
    let path = out.to_str().unwrap();
    let run = railwatch(&[
        "simulate",
        "--builtin",
        "missed-port-active",
        "--metrics-series",
        path,
        "--duration-ms",
        "600000",
    ]);
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    let text = fs::read_to_string(&out).unwrap();
    // 0 to 600 s at 15 s: 41 scrapes, the rail available from the third on.
    let labels = r#"device="mlx5_0",port="1",instance="missed-port-active",job="railwatch""#;
    assert_eq!(values_of(&text, &format!("railwatch_rail_available{{{labels}}}")), Some("1x40"), "{text}");
    let short = railwatch(&["simulate", "--builtin", "missed-port-active", "--duration-ms", "10"]);
    assert_eq!(short.status.code(), Some(2));
    assert!(stderr(&short).contains("--duration-ms 10 is before the scenario's end (4000 ms)"), "{}", stderr(&short));
}

#[test]
fn a_run_is_made_longer_only_up_to_the_scenario_limit() {
    // Beyond a week (a scenario's own limit) the HTML report's time axis
    // overflowed (a panic; a wrap and an endless loop in a release build).
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("run.html");
    for d in ["604800001", &u64::MAX.to_string()] {
        let run = railwatch(&[
            "simulate",
            "--builtin",
            "missed-port-active",
            "--html",
            html.to_str().unwrap(),
            "--duration-ms",
            d,
        ]);
        assert_eq!(run.status.code(), Some(2), "{d}: {}", stderr(&run));
        let err = stderr(&run);
        assert!(err.contains(&format!("--duration-ms {d} is more than the limit of 604800000 ms (7 days)")), "{err}");
        assert!(run.stdout.is_empty(), "refused before the run");
        assert!(!html.exists());
    }
    let week = railwatch(&["simulate", "--builtin", "missed-port-active", "--duration-ms", "604800000"]);
    assert_eq!(week.status.code(), Some(0), "{}", stderr(&week));
}

#[test]
fn a_long_run_at_a_short_interval_is_refused_before_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("series.yml");
    let path = out.to_str().unwrap();
    let week = (7 * 24 * 3_600_000u64).to_string();
    let run = railwatch(&[
        "simulate",
        "--builtin",
        "missed-port-active",
        "--metrics-series",
        path,
        "--scrape-interval",
        "1s",
        "--duration-ms",
        &week,
    ]);
    assert_eq!(run.status.code(), Some(2));
    let err = stderr(&run);
    assert!(err.contains("604801 scrapes, more than the 100000"), "{err}");
    assert!(err.contains("--scrape-interval of at least 6049ms"), "{err}");
    assert!(run.stdout.is_empty(), "refused before the run");
    assert!(!out.exists());
    // A week at the default 15 s is within the bound, and small.
    let run =
        railwatch(&["simulate", "--builtin", "missed-port-active", "--metrics-series", path, "--duration-ms", &week]);
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    let size = fs::metadata(&out).unwrap().len();
    assert!(size < 64 * 1024, "a quiet week is a few lines per series: {size} bytes");
}

#[test]
fn bad_intervals_and_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("series.yml");
    let path = out.to_str().unwrap();
    let run = railwatch(&["simulate", "--metrics-series", path, "--scrape-interval", "15"]);
    assert_eq!(run.status.code(), Some(2));
    assert!(stderr(&run).contains("\"15\" is not an interval"), "{}", stderr(&run));
    let run = railwatch(&["simulate", "--scrape-interval", "15s"]);
    assert_eq!(run.status.code(), Some(2), "--scrape-interval needs --metrics-series");
    for bad in ["/dev/null", dir.path().to_str().unwrap()] {
        let run = railwatch(&["simulate", "--metrics-series", bad]);
        assert_eq!(run.status.code(), Some(2), "{bad}");
        assert!(stderr(&run).contains(&format!("cannot write the metrics series {bad}")), "{}", stderr(&run));
    }
    let html = dir.path().join("r.html");
    let run = railwatch(&["simulate", "--html", html.to_str().unwrap(), "--metrics-series", html.to_str().unwrap()]);
    assert_eq!(run.status.code(), Some(2));
    assert!(stderr(&run).contains("--html and --metrics-series name the same file"), "{}", stderr(&run));
}

/// Every built-in scenario's series is a test file promtool reads, and
/// its values are what PromQL sees: the default scenario's rail is back
/// by 5 s, its generation 2.
#[test]
fn promtool_reads_every_builtins_series() {
    let dir = tempfile::tempdir().unwrap();
    let list = railwatch(&["scenarios"]);
    let names: Vec<String> = String::from_utf8_lossy(&list.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    assert!(names.len() >= 10);
    for name in &names {
        let out = dir.path().join(format!("{name}.yml"));
        let run = railwatch(&["simulate", "--builtin", name, "--metrics-series", out.to_str().unwrap()]);
        assert_eq!(run.status.code(), Some(0), "{name}: {}", stderr(&run));
        let test = promtool(&out);
        assert!(test.status.success(), "{name}: {}{}", String::from_utf8_lossy(&test.stdout), stderr(&test));
    }
    let out = dir.path().join("default.yml");
    let run = railwatch(&["simulate", "--metrics-series", out.to_str().unwrap(), "--scrape-interval", "1s"]);
    assert_eq!(run.status.code(), Some(0));
    let mut text = fs::read_to_string(&out).unwrap();
    text.push_str(
        "    promql_expr_test:\n\
         \x20     - expr: railwatch_rail_generation{device=\"mlx5_0\",port=\"1\"}\n\
         \x20       eval_time: 5s\n\
         \x20       exp_samples:\n\
         \x20         - labels: 'railwatch_rail_generation{device=\"mlx5_0\",port=\"1\",instance=\"burst-hides-port-active\",job=\"railwatch\"}'\n\
         \x20           value: 2\n\
         \x20     - expr: sum(railwatch_async_events_total{event=\"comm_est\"})\n\
         \x20       eval_time: 5s\n\
         \x20       exp_samples:\n\
         \x20         - value: 64\n",
    );
    fs::write(&out, text).unwrap();
    let test = promtool(&out);
    assert!(test.status.success(), "{}{}", String::from_utf8_lossy(&test.stdout), stderr(&test));
}

fn promtool(file: &std::path::Path) -> Output {
    Command::new("promtool").args(["test", "rules"]).arg(file).output().expect("promtool runs (cargo xtask deps)")
}
