//! The alert and recording rules and the dashboards shipped in
//! `crates/cli/dist/`: the rules pass `promtool check rules`; their tests
//! (`dist/prometheus/tests/*.yml`) pass `promtool test rules` on series
//! made by `simulate --metrics-series` from built-in scenarios, scenario
//! files and recordings from the real kernel; every dashboard query
//! parses and names only metrics the agent exports or the rules record.
//!
//! A test file is promtool's, except that an `input_series` item may be
//! `- from_simulate: ARGS`: the series `railwatch simulate ARGS
//! --metrics-series FILE` writes (paths relative to the tests directory),
//! put in its place. The test group's `interval` must be the one ARGS
//! scrape at.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn dist() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("dist")
}

fn rules_file() -> PathBuf {
    dist().join("prometheus/railwatch.rules.yml")
}

fn promtool(args: &[&str]) -> Output {
    Command::new("promtool").args(args).output().expect("promtool runs (cargo xtask deps installs prometheus)")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn the_rules_pass_promtool_check_rules() {
    let out = promtool(&["check", "rules", rules_file().to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
}

/// The series `railwatch simulate ARGS` writes: its `input_series` items,
/// and the interval it scraped at.
fn simulated(args: &str, dir: &Path, scratch: &Path) -> (Vec<String>, String) {
    let out = scratch.join("series.yml");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_railwatch"));
    cmd.current_dir(dir).arg("simulate").args(args.split_whitespace()).arg("--metrics-series").arg(&out);
    let run = cmd.env("NO_COLOR", "1").env_remove("RUST_LOG").output().unwrap();
    assert_eq!(run.status.code(), Some(0), "simulate {args}: {}", text(&run));
    let series = fs::read_to_string(&out).unwrap();
    let interval = series.lines().find_map(|l| l.strip_prefix("    interval: ")).expect("an interval").to_owned();
    let items = series.lines().skip_while(|l| *l != "    input_series:").skip(1).map(str::to_owned).collect();
    (items, interval)
}

/// A test file with each `from_simulate` item replaced by its series and
/// the rule file named by its absolute path.
fn spliced(template: &Path, scratch: &Path) -> String {
    let dir = template.parent().unwrap();
    let source = fs::read_to_string(template).unwrap();
    let mut out = String::new();
    let mut interval: Option<String> = None;
    for line in source.lines() {
        let trimmed = line.trim_start();
        if let Some(i) = trimmed.strip_prefix("interval: ") {
            interval = Some(i.trim().to_owned());
        }
        let Some(args) = trimmed.strip_prefix("- from_simulate: ") else {
            out.push_str(&line.replace("../railwatch.rules.yml", rules_file().to_str().unwrap()));
            out.push('\n');
            continue;
        };
        let (items, scraped) = simulated(args, dir, scratch);
        assert_eq!(interval.as_deref(), Some(scraped.as_str()), "{}: {args}: the group's interval", template.display());
        // The generated items sit at 6 columns; this one at its own.
        let indent = line.len() - trimmed.len();
        for item in items {
            out.push_str(&" ".repeat(indent));
            out.push_str(item.strip_prefix("      ").unwrap_or(&item));
            out.push('\n');
        }
    }
    out
}

fn test_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dist().join("prometheus/tests"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yml"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_alert_fires_when_it_should_and_stays_quiet_when_not() {
    let scratch = tempfile::tempdir().unwrap();
    let mut made = Vec::new();
    for template in test_files() {
        let file = scratch.path().join(template.file_name().unwrap());
        fs::write(&file, spliced(&template, scratch.path())).unwrap();
        made.push(file);
    }
    assert!(made.len() >= 3, "{made:?}");
    let mut args = vec!["test", "rules"];
    args.extend(made.iter().map(|p| p.to_str().unwrap()));
    let out = promtool(&args);
    println!("promtool test rules:\n{}", text(&out));
    assert!(out.status.success(), "{}", text(&out));
    // Every alert of the rules is tested firing somewhere.
    let tests: String = made.iter().map(|f| fs::read_to_string(f).unwrap()).collect();
    for alert in alerts() {
        let firing = tests.split("alertname: ").skip(1).any(|t| {
            t.starts_with(&format!("{alert}\n")) && t.lines().nth(1).is_some_and(|l| !l.contains("exp_alerts: []"))
        });
        assert!(firing, "{alert} is never shown firing");
    }
}

/// The alert names of the rules file.
fn alerts() -> Vec<String> {
    let rules = fs::read_to_string(rules_file()).unwrap();
    rules.lines().filter_map(|l| l.trim().strip_prefix("- alert: ")).map(str::to_owned).collect()
}

/// The names the rules record.
fn recorded() -> BTreeSet<String> {
    let rules = fs::read_to_string(rules_file()).unwrap();
    rules.lines().filter_map(|l| l.trim().strip_prefix("- record: ")).map(str::to_owned).collect()
}

/// Every metric name the agent exports, as a scraper stores it (counters'
/// `_total`, histograms' `_bucket`, `_sum` and `_count`): the names in the
/// series of every built-in scenario and every scenario of the tests.
fn exported() -> BTreeSet<String> {
    let scratch = tempfile::tempdir().unwrap();
    let list = Command::new(env!("CARGO_BIN_EXE_railwatch")).arg("scenarios").output().unwrap();
    let mut runs: Vec<Vec<String>> = String::from_utf8_lossy(&list.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(|name| vec!["--builtin".to_owned(), name.to_owned()])
        .collect();
    let scenarios = dist().join("prometheus/tests/scenarios");
    for entry in fs::read_dir(&scenarios).unwrap() {
        runs.push(vec![entry.unwrap().path().to_str().unwrap().to_owned()]);
    }
    let mut names = BTreeSet::new();
    for args in runs {
        let out = scratch.path().join("names.yml");
        let run = Command::new(env!("CARGO_BIN_EXE_railwatch"))
            .arg("simulate")
            .args(&args)
            .args(["--scrape-interval", "100ms", "--metrics-series"])
            .arg(&out)
            .output()
            .unwrap();
        assert!(run.status.success(), "{args:?}: {}", text(&run));
        let series = fs::read_to_string(&out).unwrap();
        for line in series.lines() {
            if let Some(s) = line.trim().strip_prefix("- series: '") {
                names.insert(s.split('{').next().unwrap().to_owned());
            }
        }
    }
    assert!(names.len() > 20, "{names:?}");
    names
}

/// The metric names an expression uses: identifiers outside string
/// literals, label matchers and grouping lists that are neither keywords
/// nor functions (followed by `(`).
fn names_in(expr: &str) -> BTreeSet<String> {
    const WORDS: &[&str] = &[
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "and",
        "or",
        "unless",
        "bool",
        "offset",
        // Aggregations, which may put `by (…)` before their parenthesis.
        "sum",
        "min",
        "max",
        "avg",
        "count",
        "group",
        "stddev",
        "stdvar",
        "topk",
        "bottomk",
        "quantile",
        "count_values",
    ];
    let mut names = BTreeSet::new();
    let mut i = 0;
    let b = expr.as_bytes();
    let mut braces = 0;
    while i < b.len() {
        let c = b[i];
        let word_end = |from: usize| {
            from + expr[from..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':' || c == '.'))
                .unwrap_or(expr.len() - from)
        };
        match c {
            b'"' | b'\'' => i += 1 + expr[i + 1..].find(c as char).map_or(expr.len(), |j| j + 1),
            b'{' => (braces, i) = (braces + 1, i + 1),
            b'}' => (braces, i) = (braces - 1, i + 1),
            b'0'..=b'9' => i = word_end(i),
            c if c.is_ascii_alphabetic() || c == b'_' || c == b':' => {
                let end = word_end(i);
                let word = &expr[i..end];
                let function = expr[end..].trim_start().starts_with('(');
                if braces == 0 && !function && !WORDS.contains(&word) && !in_grouping(&expr[..i]) {
                    names.insert(word.to_owned());
                }
                i = end;
            }
            _ => i += 1,
        }
    }
    names
}

/// Whether what follows `before` sits in a `by (…)`, `on (…)`, … list.
fn in_grouping(before: &str) -> bool {
    let Some(open) = before.rfind('(') else { return false };
    if before[open..].contains(')') {
        return false;
    }
    let keyword = before[..open].trim_end();
    ["by", "without", "on", "ignoring", "group_left", "group_right"].iter().any(|k| keyword.ends_with(k))
}

/// Every `expr` of a dashboard (panels, rows' panels, template queries).
fn exprs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("expr", Value::String(e)) => out.push(e.clone()),
                    ("query", Value::String(e)) if e.starts_with("label_values(") => {}
                    _ => exprs(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| exprs(v, out)),
        _ => {}
    }
}

/// A dashboard query as Prometheus sees it: Grafana's variables replaced.
fn as_prometheus_sees_it(expr: &str) -> String {
    expr.replace("$__rate_interval", "1m").replace("$__interval", "1m").replace("$__range", "1h")
}

#[test]
fn every_dashboard_query_parses_and_names_only_exported_metrics() {
    let known: BTreeSet<String> = exported().into_iter().chain(recorded()).chain(["up".to_owned()]).collect();
    let scratch = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for name in ["railwatch-host.json", "railwatch-fleet.json"] {
        let path = dist().join("grafana").join(name);
        let dashboard: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).expect("valid JSON");
        assert!(dashboard["title"].is_string() && dashboard["panels"].is_array(), "{name}");
        let mut found = Vec::new();
        exprs(&dashboard, &mut found);
        assert!(found.len() >= 5, "{name}: {found:?}");
        // promtool parses each one, as a recording rule's expression.
        let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
        for (i, e) in found.iter().enumerate() {
            let e = as_prometheus_sees_it(e);
            rules.push_str(&format!("      - record: dashboard:query_{i}\n        expr: {}\n", serde_json::json!(e)));
            for metric in names_in(&e) {
                assert!(known.contains(&metric), "{name}: {metric:?} in {e:?} is not a metric railwatch exports");
            }
        }
        let file = scratch.path().join(format!("{name}.rules.yml"));
        fs::write(&file, rules).unwrap();
        let out = promtool(&["check", "rules", file.to_str().unwrap()]);
        assert!(out.status.success(), "{name}: {}", text(&out));
        checked += found.len();
    }
    assert!(checked >= 10);
}

/// The rules name only what the agent exports, `up`, and node_exporter's
/// text file time (the one alert for the textfile collector).
#[test]
fn the_rules_name_only_exported_metrics() {
    let known: BTreeSet<String> = exported()
        .into_iter()
        .chain(recorded())
        .chain(["up".to_owned(), "node_textfile_mtime_seconds".to_owned()])
        .collect();
    let rules = fs::read_to_string(rules_file()).unwrap();
    let mut exprs = Vec::new();
    let mut lines = rules.lines().peekable();
    while let Some(l) = lines.next() {
        let Some(e) = l.trim().strip_prefix("expr: ") else { continue };
        if e == "|" {
            let mut block = String::new();
            while lines.peek().is_some_and(|n| n.starts_with("          ")) {
                block.push_str(lines.next().unwrap().trim());
                block.push(' ');
            }
            exprs.push(block);
        } else {
            exprs.push(e.to_owned());
        }
    }
    assert!(exprs.len() >= 10);
    for e in &exprs {
        for metric in names_in(e) {
            assert!(known.contains(&metric), "{metric:?} in {e:?}");
        }
    }
    // And the check itself can fail.
    assert!(names_in("rate(railwatch_no_such_total[5m])").contains("railwatch_no_such_total"));
    assert_eq!(
        names_in(
            r#"sum by (instance, device) (railwatch_rail_available{device=~"mlx.*"}) * on (instance) group_left (node_guid) railwatch_rail_info"#
        ),
        ["railwatch_rail_available", "railwatch_rail_info"].map(str::to_owned).into()
    );
}
