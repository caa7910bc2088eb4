//! End-to-end: the built `railwatch` binary, run as a user or a tool runs
//! it. Every built-in scenario must hold its expectations; `--json` must be
//! exactly the documented schema; bad input must exit 2 with a one-line
//! message naming the problem.

use std::io::Write;
use std::process::{Command, Output};

use serde_json::Value;

mod common;
use common::railwatch;

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("stdout is UTF-8")
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).expect("stderr is UTF-8")
}

fn builtin_names() -> Vec<String> {
    let out = railwatch(&["scenarios"]);
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out).lines().map(|l| l.split_whitespace().next().unwrap().to_string()).collect()
}

#[test]
fn scenarios_lists_at_least_the_ten_builtins_with_descriptions() {
    let out = railwatch(&["scenarios"]);
    let text = stdout(&out);
    for name in [
        "burst-hides-port-active",
        "missed-port-active",
        "port-settles",
        "dual-port-flap",
        "link-downgrade",
        "eintr-storm",
        "eio-fallback",
        "device-removal",
        "unknown-event-code",
        "busy-host",
    ] {
        let line = text.lines().find(|l| l.split_whitespace().next() == Some(name)).unwrap_or_else(|| panic!("{name}"));
        assert!(line.len() > name.len() + 20, "a description for {name}: {line:?}");
    }
    assert!(text.lines().any(|l| l.starts_with("burst-hides-port-active") && l.ends_with("(default)")));
}

#[test]
fn the_default_run_shows_the_rail_recovering_by_event() {
    let out = railwatch(&["simulate"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("scenario burst-hides-port-active"), "{text}");
    assert!(text.contains("paused → active  by event"), "{text}");
    assert!(text.contains("drained 65 event(s)"), "the burst and the PORT_ACTIVE in one drain: {text}");
    assert!(!text.contains('\x1b'), "no colour off a terminal");
    let table = text.lines().find(|l| l.starts_with("mlx5_0/1 ") && l.contains("event")).expect("summary row");
    assert!(table.contains("active") && table.contains("400"), "{table}");
}

/// Checks one JSON line against the schema in docs/JSON.md.
fn check_schema(v: &Value) {
    let obj = v.as_object().expect("each line is an object");
    assert!(obj["t_ms"].is_u64(), "t_ms: {v}");
    let kind = obj["kind"].as_str().expect("kind");
    let has = |k: &str| obj.contains_key(k);
    let str_field = |k: &str| obj[k].as_str().unwrap_or_else(|| panic!("{k} in {v}")).to_string();
    match kind {
        "event" => {
            assert!(has("rail") ^ has("device"), "rail or device: {v}");
            str_field("event");
            assert!(obj["code"].is_u64());
        }
        "transition" => {
            str_field("rail");
            for k in ["from", "to"] {
                assert!(["active", "paused", "inert"].contains(&str_field(k).as_str()), "{v}");
            }
            assert!(has("reason") ^ has("by"), "reason or by: {v}");
            assert!(obj["generation"].is_u64());
        }
        "reseed" => {
            str_field("rail");
            assert!(obj["from_gbps"].is_null() || obj["from_gbps"].is_f64());
            assert!(obj["to_gbps"].is_null() || obj["to_gbps"].is_f64());
        }
        "available" => {
            str_field("rail");
            assert!(obj["available"].is_boolean());
        }
        "drain" => {
            str_field("device");
            assert!(obj["events"].is_u64());
            match str_field("result").as_str() {
                "drained" => assert!(!has("errno")),
                "error" => assert!(obj["errno"].is_i64()),
                other => panic!("result {other}"),
            }
        }
        "expect" => {
            assert!(obj["at_ms"].is_u64());
            str_field("rail");
            assert!(obj["passed"].is_boolean());
            str_field("detail");
        }
        "address" => {
            str_field("rail");
            assert!(obj["generation"].is_u64());
        }
        "peer_failing" => {
            str_field("rail");
            assert!(obj["peer"].is_u64());
        }
        "half_open" => {
            str_field("rail");
        }
        "probe_failed" => {
            str_field("rail");
            assert!(obj["timed_out"].is_boolean());
        }
        "gid_index" => {
            str_field("rail");
            assert!(obj["index"].is_u64());
        }
        "work_lost" => {
            str_field("device");
            let scope = obj["scope"].as_str().expect("scope");
            assert!(["qp", "wq", "cq", "device"].contains(&scope), "{v}");
            // The object's scopes name the event and may carry the handle;
            // the device's names the reason.
            if scope == "device" {
                str_field("reason");
            } else {
                str_field("event");
                assert!(obj.get("handle").is_none_or(|h| h.as_str().is_some_and(|h| h.starts_with("0x"))), "{v}");
            }
        }
        "summary" => {
            for r in obj["rails"].as_array().expect("rails") {
                let r = r.as_object().unwrap();
                assert!(r["rail"].is_string() && r["state"].is_string() && r["available"].is_boolean());
                assert!(r["bandwidth_gbps"].is_null() || r["bandwidth_gbps"].is_f64());
                assert!(r["generation"].is_u64());
            }
            for k in ["events_queued", "events_read", "events_acked"] {
                assert!(obj[k].is_u64(), "{k}");
            }
            assert!(obj["expectations"]["passed"].is_u64() && obj["expectations"]["failed"].is_u64());
        }
        other => panic!("unknown kind {other}: {v}"),
    }
}

#[test]
fn every_builtin_holds_and_its_json_parses() {
    let names = builtin_names();
    assert!(names.len() >= 10);
    for name in names {
        let out = railwatch(&["simulate", "--builtin", &name, "--json"]);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr(&out));
        let lines: Vec<Value> = stdout(&out)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{name}: {e}: {l}")))
            .collect();
        lines.iter().for_each(check_schema);
        let last = lines.last().expect("output");
        assert_eq!(last["kind"], "summary", "{name}: summary last");
        assert!(lines[..lines.len() - 1].iter().all(|l| l["kind"] != "summary"));
        assert_eq!(last["expectations"]["failed"], 0, "{name}");
        let expects = lines.iter().filter(|l| l["kind"] == "expect").count() as u64;
        assert!(expects > 0, "{name} checks something");
        assert_eq!(last["expectations"]["passed"], expects, "{name}");
        assert_eq!(last["events_read"], last["events_acked"], "{name}: every event read was acked");
        let times: Vec<u64> = lines.iter().map(|l| l["t_ms"].as_u64().unwrap()).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{name}: time never goes backwards");
    }
}

#[test]
fn the_same_file_gives_the_same_timeline() {
    let a = railwatch(&["simulate", "--builtin", "busy-host", "--json"]);
    let b = railwatch(&["simulate", "--builtin", "busy-host", "--json"]);
    assert_eq!(stdout(&a), stdout(&b));
}

fn scenario_file(text: &[u8]) -> tempfile::NamedTempFile {
    let mut f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    f.write_all(text).unwrap();
    f
}

const FAILING: &str = r#"
name = "wrong-on-purpose"
duration_ms = 2000

[[device]]
name = "mlx5_0"
ports = [ { port = 1, state = "active", speed = "ndr", width = "4x" } ]

[[step]]
at_ms = 100
device = "mlx5_0"
port_state = { port = 1, state = "down" }
event = "port_err"
port = 1

[[expect]]
at_ms = 500
rail = "mlx5_0/1"
state = "active"
"#;

#[test]
fn a_failed_expectation_exits_1_and_names_it() {
    let f = scenario_file(FAILING.as_bytes());
    let out = railwatch(&["simulate", f.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("expectation failed at 500 ms on mlx5_0/1: state active but found paused"), "{err}");
    let out = railwatch(&["simulate", f.path().to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let last: Value = serde_json::from_str(stdout(&out).lines().last().unwrap()).unwrap();
    assert_eq!(last["expectations"]["failed"], 1);
}

fn assert_bad_input(args: &[&str], needles: &[&str]) {
    let out = railwatch(args);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: {n:?} in {err}");
    }
    assert!(stdout(&out).is_empty(), "nothing runs: {}", stdout(&out));
}

#[test]
fn bad_input_exits_2_with_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.toml");
    assert_bad_input(&["simulate", missing.to_str().unwrap()], &["nope.toml", "no such file"]);
    assert_bad_input(&["simulate", dir.path().to_str().unwrap()], &["directory"]);
    let empty = scenario_file(b"");
    assert_bad_input(&["simulate", empty.path().to_str().unwrap()], &[empty.path().to_str().unwrap(), "empty"]);
    let garbage = scenario_file(&[0x7f, b'E', b'L', b'F', 0, 0, 0xff, 0xfe]);
    assert_bad_input(&["simulate", garbage.path().to_str().unwrap()], &["not a text file"]);
    let bad = scenario_file(FAILING.replace("device = \"mlx5_0\"", "device = \"mlx5_9\"").as_bytes());
    let path = bad.path().to_str().unwrap();
    assert_bad_input(&["simulate", path], &[&format!("{path}:11:"), "mlx5_9"]);
    assert_bad_input(&["simulate", "--builtin", "no-such"], &["no-such", "burst-hides-port-active"]);
}

#[cfg(not(feature = "verbs"))]
#[test]
fn watch_and_status_without_verbs_say_how_to_get_it() {
    for cmd in ["watch", "status"] {
        let out = railwatch(&[cmd]);
        assert_eq!(out.status.code(), Some(2));
        let err = stderr(&out);
        assert!(err.contains("no verbs support") && err.contains("--features verbs"), "{err}");
    }
}

/// `simulate --record` records a simulated run as `watch --record` records
/// a live one; replaying the recording of every built-in gives the same
/// timeline of transitions, at the same times, and its closing
/// expectations hold. A path that cannot be written is bad input.
#[test]
fn a_recorded_simulation_replays_the_same_transitions() {
    let dir = tempfile::tempdir().unwrap();
    let transitions = |o: &Output| -> Vec<String> {
        stdout(o).lines().filter(|l| l.contains("\"kind\":\"transition\"")).map(str::to_owned).collect()
    };
    for name in builtin_names() {
        let file = dir.path().join(format!("{name}.toml"));
        let live = railwatch(&["simulate", "--builtin", &name, "--json", "--record", file.to_str().unwrap()]);
        assert!(live.status.success(), "{name}: {}", stderr(&live));
        let replay = railwatch(&["simulate", file.to_str().unwrap(), "--json"]);
        assert!(replay.status.success(), "{name}: the replay's expectations: {}", stderr(&replay));
        assert!(!transitions(&live).is_empty(), "{name}");
        assert_eq!(transitions(&replay), transitions(&live), "{name}");
    }
    let out = railwatch(&["simulate", "--record", "/nonexistent/dir/r.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("/nonexistent/dir/r.toml"), "{}", stderr(&out));
}

/// Every scenario of a class of recording that once did not replay
/// (`crates/scenario/tests/replay/`), recorded by `simulate --record` and
/// replayed by `simulate`: the same transitions (rail, from, to, cause,
/// generation) in order, at the same times until the rail's device is
/// attached again (a re-open's jitter is drawn anew).
#[test]
fn every_replay_regression_replays_through_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let scenarios = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenario/tests/replay");
    let mut files: Vec<_> = std::fs::read_dir(&scenarios).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(files.len() >= 10, "{}", scenarios.display());
    for file in files {
        let name = file.file_stem().unwrap().to_string_lossy().into_owned();
        let recording = dir.path().join(format!("{name}.recorded.toml"));
        let live = railwatch(&["simulate", file.to_str().unwrap(), "--json", "--record", recording.to_str().unwrap()]);
        let replay = railwatch(&["simulate", recording.to_str().unwrap(), "--json"]);
        assert!(replay.status.success(), "{name}: the replay's expectations: {}", stderr(&replay));
        let (live, replayed) = (timed_transitions(&live), timed_transitions(&replay));
        let what = |l: &[(u64, String, bool)]| l.iter().map(|(_, w, _)| w.clone()).collect::<Vec<_>>();
        assert_eq!(what(&replayed), what(&live), "{name}");
        for ((a, w, moved), (b, _, also)) in live.iter().zip(&replayed) {
            assert!(a == b || (*moved && *also), "{name}: {w} at {a} ms live, {b} ms replayed");
        }
    }
}

/// Each transition line as (its time, `rail from->to cause gN`, whether a
/// re-open's jitter may have moved it: its device was attached again).
fn timed_transitions(o: &Output) -> Vec<(u64, String, bool)> {
    let mut reattached = std::collections::HashSet::new();
    let lines: Vec<Value> = stdout(o).lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    lines
        .iter()
        .filter(|v| v["kind"] == "transition")
        .map(|v| {
            let rail = v["rail"].as_str().unwrap_or("?").to_owned();
            let cause = v.get("reason").or_else(|| v.get("by")).and_then(Value::as_str).unwrap_or("?");
            let t = v["t_ms"].as_u64().expect("a transition line has t_ms");
            let device = rail.split('/').next().unwrap_or("").to_owned();
            if cause == "attach" && t > 0 {
                reattached.insert(device.clone());
            }
            let what = format!("{rail} {}->{} {cause} g{}", v["from"], v["to"], v["generation"]);
            (t, what, reattached.contains(&device))
        })
        .collect()
}

/// `--html` and `--record` write regular files only: a device, a FIFO or
/// a directory is refused before the run (a FIFO would block), the device
/// left as it was; the two naming one file is refused too.
#[test]
fn output_files_must_be_regular_files() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let fifo = fifo.to_str().unwrap();
    let dir_s = dir.path().to_str().unwrap();
    for args in [
        &["simulate", "--html", "/dev/null"][..],
        &["simulate", "--html", fifo],
        &["simulate", "--html", dir_s],
        // A directory that takes no new file (sysfs; even for root).
        &["simulate", "--html", "/sys/railwatch-report.html"],
        &["simulate", "--record", "/dev/null"],
        &["simulate", "--record", fifo],
    ] {
        let out = railwatch(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(args[2]), "{args:?}: {}", stderr(&out));
        assert!(stdout(&out).is_empty(), "{args:?}: refused before the run");
    }
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::metadata("/dev/null").unwrap().file_type().is_char_device());
    let same = dir.path().join("x");
    let out = railwatch(&["simulate", "--html", same.to_str().unwrap(), "--record", same.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--html and --record name the same file"), "{}", stderr(&out));
}

/// Neither output may replace the scenario being run: refused before the
/// run, the scenario left byte for byte as it was (also through another
/// spelling of its path).
#[test]
fn an_output_never_replaces_its_scenario() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("mine.toml");
    let text = "# my notes\nname = \"mine\"\nduration_ms = 100\n\n[[device]]\nname = \"d\"\nports = [{ port = 1, state = \"active\" }]\n";
    std::fs::write(&scenario, text).unwrap();
    let path = scenario.to_str().unwrap();
    let spelled = dir.path().join(".").join("mine.toml");
    let spelled = spelled.to_str().unwrap();
    for (flag, output) in [("--record", path), ("--html", path), ("--record", spelled)] {
        let out = railwatch(&["simulate", path, flag, output]);
        assert_eq!(out.status.code(), Some(2), "{flag} {output}: {}", stderr(&out));
        let said = stderr(&out);
        assert!(said.contains(&format!("the scenario and {flag} name the same file, {output}")), "{said}");
        assert!(stdout(&out).is_empty(), "{flag}: refused before the run");
        assert_eq!(std::fs::read_to_string(&scenario).unwrap(), text, "{flag} {output}");
    }
}

/// A write of the recording that fails partway (here the file-size limit,
/// as a full disk would) is cut back off: the file is still a scenario
/// that loads and replays, up to its last whole write.
#[test]
fn a_recording_cut_short_by_a_failed_write_still_loads() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("short.toml");
    // `ulimit -f 8`: writes past 8 KiB fail (EFBIG, SIGXFSZ ignored); the
    // busy-host recording is 12 KB.
    let script = format!(
        "trap '' XFSZ; ulimit -f 8; exec \"$0\" simulate --builtin busy-host --json --record '{}'",
        file.display()
    );
    let out = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_railwatch"))
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("writing the recording"), "{}", stderr(&out));
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.len() <= 8192 && text.contains("[[device]]"), "{} bytes:\n{text}", text.len());
    let replay = railwatch(&["simulate", file.to_str().unwrap(), "--json"]);
    assert_eq!(replay.status.code(), Some(0), "{}\n{text}", stderr(&replay));
}
