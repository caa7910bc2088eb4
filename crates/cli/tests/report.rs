//! `railwatch simulate --html FILE` end to end: the built binary writes the
//! page (stdout unchanged), and Debian's Chromium, headless, opens it and
//! lays it out: the page's own script counts the lanes and bands that were
//! rendered with a non-zero size and writes the counts on the picture, which
//! the dumped DOM shows. They must equal the counts derived here, on the
//! side, from the `--json` lines of the same run; and the browser must log
//! no console message at all (an error, an uncaught exception or a blocked
//! load would each be one). Skipped, saying so, where no `chromium` is
//! installed (`cargo xtask deps` installs it). Every wait is bounded.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const CHROMIUM: &str = "/usr/bin/chromium";
const WAIT: Duration = Duration::from_secs(60);
/// The default scenario, then two with inert, paused and damped rails.
const SCENARIOS: [Option<&str>; 3] = [None, Some("softroce-hotplug"), Some("flap-damping")];

mod common;
use common::railwatch;

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("UTF-8")
}

fn scenario_args(builtin: Option<&str>) -> Vec<&str> {
    builtin.map_or(vec![], |b| vec!["--builtin", b])
}

/// Runs `simulate --json --html page.html`; its JSON lines and the page.
fn simulate(dir: &Path, builtin: Option<&str>) -> (Vec<Value>, String, std::path::PathBuf) {
    let page = dir.join(format!("{}.html", builtin.unwrap_or("default")));
    let mut args = vec!["simulate", "--json", "--html", page.to_str().expect("a UTF-8 temp path")];
    args.extend(scenario_args(builtin));
    let out = railwatch(&args);
    assert!(out.status.success(), "simulate {builtin:?} failed: {}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let lines = stdout.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    (lines, std::fs::read_to_string(&page).expect("the page was written"), page)
}

/// The lanes and bands the page must show, derived from the JSON lines
/// alone: one lane per rail of the summary; per rail, its state runs (the
/// first transition's `from`, else the summary's state, then each
/// transition's `to` with its pause reason; a reason that names no pause,
/// like `gid_change`, keeps the one before), zero-length runs left out and
/// equal neighbours counted once.
fn expected(lines: &[Value]) -> (usize, usize) {
    const PAUSES: [&str; 7] =
        ["port_err", "port_not_active", "device_fatal", "device_removed", "not_opened", "damped", "settling"];
    let summary = lines.last().expect("a summary");
    assert_eq!(summary["kind"], "summary");
    let end = summary["t_ms"].as_u64().expect("t_ms");
    let rails = summary["rails"].as_array().expect("rails");
    let mut bands = 0;
    for rail in rails {
        let name = rail["rail"].as_str().expect("a name");
        let transitions: Vec<&Value> =
            lines.iter().filter(|l| l["kind"] == "transition" && l["rail"].as_str() == Some(name)).collect();
        let first = transitions.first().map_or(&rail["state"], |t| &t["from"]).as_str().expect("a state");
        let mut state = (first.to_string(), if first == "active" { "" } else { "?" }.to_string());
        let mut points = vec![(0, state.clone())];
        for t in &transitions {
            let to = t["to"].as_str().expect("to").to_string();
            let reason = t["reason"].as_str().unwrap_or("");
            state = if to == "active" {
                (to, String::new())
            } else if PAUSES.contains(&reason) {
                (to, reason.to_string())
            } else if state.0 == to {
                (to, state.1)
            } else {
                (to, "other".to_string())
            };
            points.push((t["t_ms"].as_u64().expect("t_ms"), state.clone()));
        }
        let mut runs: Vec<&(String, String)> = Vec::new();
        for (i, (start, state)) in points.iter().enumerate() {
            let stop = points.get(i + 1).map_or(end, |p| p.0);
            if stop > *start && runs.last() != Some(&state) {
                runs.push(state);
            }
        }
        bands += runs.len();
    }
    (rails.len(), bands)
}

/// The value of `attr="N"` in `html`.
fn attr(html: &str, attr: &str) -> Option<usize> {
    let at = html.find(&format!(" {attr}=\""))? + attr.len() + 3;
    html[at..].split('"').next()?.parse().ok()
}

/// Runs Chromium headless on the page: the dumped DOM and its stderr.
fn chromium_dump(dir: &Path, page: &Path) -> (String, String) {
    let profile = tempfile::tempdir_in(dir).expect("a profile dir");
    let (dom_path, log_path) = (dir.join("dom.html"), dir.join("chromium.log"));
    let mut child = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=2000",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&dom_path).expect("dom file"))
        .stderr(std::fs::File::create(&log_path).expect("log file"))
        .spawn()
        .expect("chromium starts");
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for chromium") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within {WAIT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    assert!(status.success(), "chromium failed ({status}):\n{log}");
    (std::fs::read_to_string(&dom_path).expect("the dumped DOM"), log)
}

#[test]
fn chromium_renders_every_lane_and_band_without_a_console_message() {
    if !Path::new(CHROMIUM).exists() {
        eprintln!("note: no {CHROMIUM} installed (Debian package chromium): test skipped");
        return;
    }
    let dir = tempfile::tempdir().expect("a temp dir");
    for builtin in SCENARIOS {
        let (lines, html, page) = simulate(dir.path(), builtin);
        let (lanes, bands) = expected(&lines);
        assert!(lanes > 0 && bands >= lanes, "{builtin:?}: {lanes} lanes, {bands} bands");
        assert_eq!(attr(&html, "data-lanes"), Some(lanes), "{builtin:?}: lanes written");
        assert_eq!(attr(&html, "data-bands"), Some(bands), "{builtin:?}: bands written");

        let (dom, log) = chromium_dump(dir.path(), &page);
        assert_eq!(attr(&dom, "data-rendered-lanes"), Some(lanes), "{builtin:?}: lanes rendered");
        assert_eq!(attr(&dom, "data-rendered-bands"), Some(bands), "{builtin:?}: bands rendered");
        assert_eq!(dom.matches(r#"<g class="lane">"#).count(), lanes, "{builtin:?}: lanes in the DOM");
        let console: Vec<&str> = log.lines().filter(|l| l.contains(":CONSOLE")).collect();
        assert!(console.is_empty(), "{builtin:?}: the page logged:\n{}", console.join("\n"));
    }
}

#[test]
fn html_leaves_stdout_unchanged_for_json_and_for_people() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let page = dir.path().join("page.html");
    let page = page.to_str().expect("a UTF-8 temp path");
    for builtin in SCENARIOS {
        for json in [true, false] {
            let mut plain = vec!["simulate"];
            if json {
                plain.push("--json");
            }
            plain.extend(scenario_args(builtin));
            let mut with_page = plain.clone();
            with_page.extend(["--html", page]);
            let (a, b) = (railwatch(&plain), railwatch(&with_page));
            assert!(a.status.success() && b.status.success(), "{builtin:?}: {}", text(&b.stderr));
            assert_eq!(text(&a.stdout), text(&b.stdout), "{builtin:?} json={json}: stdout changed");
            let html = std::fs::read_to_string(page).expect("the page");
            assert!(html.starts_with("<!DOCTYPE html>"));
            std::fs::remove_file(page).expect("removed");
        }
    }
    // No temporary file is left beside the page.
    assert_eq!(std::fs::read_dir(dir.path()).expect("the dir").count(), 0);
}

#[test]
fn an_unwritable_html_path_is_exit_2_naming_it() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let page = dir.path().join("no-such-dir").join("page.html");
    let out = railwatch(&["simulate", "--html", page.to_str().expect("UTF-8")]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains(&page.display().to_string()), "the message names the path: {err}");
    assert!(!page.exists());
}
