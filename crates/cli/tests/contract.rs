//! `railwatch simulate` against inputs a user can write that once broke
//! its contract: inputs that never ended or ate memory, output that dropped
//! lines, and small gaps (terminal escapes, lenient rail names). Every run
//! here has a wall-clock bound, so a hang fails the test instead of hanging
//! it.

use std::io::{Read, Write};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Runs the binary with a deadline; a run past it is killed and fails.
fn railwatch_within(args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_railwatch"))
        .args(args)
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        out.read_to_end(&mut buf).map(|_| buf)
    });
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        err.read_to_end(&mut buf).map(|_| buf)
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("railwatch {args:?} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Output { status, stdout: reader.join().unwrap().unwrap(), stderr: err_reader.join().unwrap().unwrap() }
}

fn scenario_file(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::Builder::new().suffix(".toml").tempfile().expect("temp file");
    f.write_all(text.as_bytes()).expect("write");
    f
}

fn json_lines(o: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&o.stdout).lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const SECONDS: Duration = Duration::from_secs(60);

// ---- inputs that never ended or ate the machine ---------------------------

#[test]
fn a_huge_eintr_count_is_refused_with_its_line() {
    let f = scenario_file(
        "duration_ms = 100\n[[device]]\nname = \"d\"\nports = [{ port = 1, state = \"active\" }]\n\
         [[step]]\nat_ms = 1\ndevice = \"d\"\nfault = \"eintr\"\ncount = 9223372036854775000\n",
    );
    let out = railwatch_within(&["simulate", f.path().to_str().unwrap()], SECONDS);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(":9: step 1: count 9223372036854775000 is more than the maximum"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn the_whole_run_queues_a_bounded_number_of_events() {
    let step = "[[step]]\nat_ms = 1\ndevice = \"d\"\nevent = \"comm_est\"\nrepeat = 6000000\n";
    let f = scenario_file(&format!(
        "duration_ms = 100\n[[device]]\nname = \"d\"\nports = [{{ port = 1, state = \"active\" }}]\n{step}{step}"
    ));
    let out = railwatch_within(&["simulate", f.path().to_str().unwrap()], SECONDS);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains(":10: step 2: the scenario queues more than"), "{}", stderr(&out));
}

#[test]
fn a_device_wide_event_counts_once_per_port_toward_the_limit() {
    let ports: Vec<String> = (1..=255).map(|p| format!("{{ port = {p} }}")).collect();
    let f = scenario_file(&format!(
        "duration_ms = 100\n[[device]]\nname = \"big\"\nports = [{}]\n\
         [[step]]\nat_ms = 10\ndevice = \"big\"\nevent = \"cq_err\"\nobject = 1\nrepeat = 40000\n",
        ports.join(", ")
    ));
    let out = railwatch_within(&["simulate", f.path().to_str().unwrap()], SECONDS);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains(":5: step 1: the scenario queues more than 10000000"), "{}", stderr(&out));
}

#[test]
fn a_week_of_virtual_time_with_a_rail_that_never_recovers_ends_quickly() {
    // The largest duration allowed, a 1 ms tick and a port that stays down:
    // 6e8 ticks if every one ran; idle ticks are skipped.
    let f = scenario_file(
        "duration_ms = 604800000\ntick_ms = 1\n[[device]]\nname = \"d\"\n\
         ports = [{ port = 1, state = \"active\" }]\n\
         [[step]]\nat_ms = 10\ndevice = \"d\"\nport_state = { port = 1, state = \"down\" }\nevent = \"port_err\"\nport = 1\n\
         [[expect]]\nat_ms = 604800000\nrail = \"d/1\"\nstate = \"paused\"\n",
    );
    let started = Instant::now();
    let out = railwatch_within(&["simulate", "--json", f.path().to_str().unwrap()], SECONDS);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(20), "took {:?}", started.elapsed());
    let long = scenario_file("duration_ms = 604800001\n[[device]]\nname = \"d\"\nports = [{ port = 1 }]\n");
    let out = railwatch_within(&["simulate", long.path().to_str().unwrap()], SECONDS);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains(":1: duration_ms 604800001 is more than the limit"), "{}", stderr(&out));
}

#[test]
fn a_fifo_and_a_device_are_refused_before_they_are_opened() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("scenario.toml");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs");
    assert!(made.success());
    for path in [fifo.to_str().unwrap(), "/dev/zero"] {
        let out = railwatch_within(&["simulate", path], SECONDS);
        assert_eq!(out.status.code(), Some(2), "{path}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains(path) && err.contains("not a regular file"), "{err}");
    }
}

#[test]
fn a_file_past_the_size_limit_is_refused_unread() {
    let f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    f.as_file().set_len((16 << 20) + 1).unwrap();
    let out = railwatch_within(&["simulate", f.path().to_str().unwrap()], SECONDS);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("is more than the limit of 16777216"), "{}", stderr(&out));
}

// ---- output that never drops a line -----------------------------------------

#[test]
fn a_busy_run_prints_every_line_its_summary_counts() {
    // One device of 255 ports and a device-scoped event repeated: every
    // CQ_ERR bumps every rail (255 transition lines per event).
    let ports: Vec<String> = (1..=255).map(|p| format!("{{ port = {p}, state = \"active\" }}")).collect();
    let f = scenario_file(&format!(
        "duration_ms = 100\n[[device]]\nname = \"big\"\nports = [{}]\n\
         [[step]]\nat_ms = 10\ndevice = \"big\"\nevent = \"cq_err\"\nobject = 1\nrepeat = 600\n",
        ports.join(", ")
    ));
    let out = railwatch_within(&["simulate", "--json", f.path().to_str().unwrap()], SECONDS);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines = json_lines(&out);
    let bumps = lines.iter().filter(|v| v["kind"] == "transition" && v["reason"] == "cq_err").count();
    assert_eq!(bumps, 600 * 255, "every generation bump is a line");
    let events = lines.iter().filter(|v| v["kind"] == "event").count();
    let summary = lines.last().unwrap();
    assert_eq!(summary["kind"], "summary");
    assert_eq!(events as u64, summary["events_read"].as_u64().unwrap());
    // The summary's generations agree: 1 (attach) + 600.
    assert!(summary["rails"].as_array().unwrap().iter().all(|r| r["generation"] == 601));
}

#[test]
fn a_drain_that_reads_device_fatal_still_prints_its_drain_line() {
    let f = scenario_file(
        "duration_ms = 100\n[[device]]\nname = \"d\"\nports = [{ port = 1, state = \"active\" }]\n\
         [[step]]\nat_ms = 10\ndevice = \"d\"\nevent = \"comm_est\"\nobject = 3\nrepeat = 4\n\
         [[step]]\nat_ms = 10\ndevice = \"d\"\nevent = \"device_fatal\"\n",
    );
    let out = railwatch_within(&["simulate", "--json", f.path().to_str().unwrap()], SECONDS);
    let lines = json_lines(&out);
    let drain = lines.iter().find(|v| v["kind"] == "drain" && v["t_ms"] == 10).expect("a drain line at 10 ms");
    assert_eq!(drain["events"], 5, "{drain}");
    assert_eq!(drain["device"], "d");
}

#[test]
fn an_unknown_code_is_a_device_line_even_with_a_port_element() {
    let f = scenario_file(
        "duration_ms = 100\n[[device]]\nname = \"d\"\nports = [{ port = 1, state = \"active\" }]\n\
         [[step]]\nat_ms = 10\ndevice = \"d\"\nevent = 77\nport = 1\n",
    );
    let out = railwatch_within(&["simulate", "--json", f.path().to_str().unwrap()], SECONDS);
    let lines = json_lines(&out);
    let ev = lines.iter().find(|v| v["kind"] == "event").expect("the event line");
    assert_eq!((ev["device"].as_str(), ev.get("rail")), (Some("d"), None), "{ev}");
}

#[test]
fn an_inert_rail_has_one_rate_everywhere_and_a_reattach_reseeds_from_it() {
    let f = scenario_file(
        "duration_ms = 5000\n[[device]]\nname = \"d\"\nports = [{ port = 1, state = \"active\", speed = \"ndr\", width = \"4x\" }]\n\
         [[step]]\nat_ms = 10\ndevice = \"d\"\nfault = \"remove\"\n\
         [[expect]]\nat_ms = 20\nrail = \"d/1\"\nstate = \"inert\"\nbandwidth_gbps = 400\n\
         [[step]]\nat_ms = 100\ndevice = \"d\"\nfault = \"restore\"\nlink = { port = 1, speed = \"hdr\", width = \"4x\" }\n",
    );
    let out = railwatch_within(&["simulate", "--json", f.path().to_str().unwrap()], SECONDS);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines = json_lines(&out);
    let reseeds: Vec<(Option<f64>, Option<f64>)> = lines
        .iter()
        .filter(|v| v["kind"] == "reseed")
        .map(|v| (v["from_gbps"].as_f64(), v["to_gbps"].as_f64()))
        .collect();
    assert_eq!(reseeds, vec![(None, Some(400.0)), (Some(400.0), Some(200.0))]);
    let summary = lines.last().unwrap();
    assert_eq!(summary["rails"][0]["bandwidth_gbps"].as_f64(), Some(200.0));
}

// ---- small contract gaps ------------------------------------------------------

#[test]
fn control_characters_in_names_never_reach_the_terminal_raw() {
    // A scenario's name may hold them: shown escaped.
    let f = scenario_file(
        "name = \"evil\\u001b[2J\"\nduration_ms = 100\n[[device]]\nname = \"d\"\n\
         ports = [{ port = 1, state = \"active\" }]\n",
    );
    let out = railwatch_within(&["simulate", f.path().to_str().unwrap()], SECONDS);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!out.stdout.contains(&0x1b), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains("\\u{1b}"));
    // A device's name may not (no kernel names one so): refused, and the
    // refusal shows it escaped too.
    let f = scenario_file(
        "duration_ms = 100\n[[device]]\nname = \"d\\u001b]0;x\\u0007\"\nports = [{ port = 1, state = \"active\" }]\n",
    );
    let out = railwatch_within(&["simulate", f.path().to_str().unwrap()], SECONDS);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(!out.stderr.contains(&0x1b) && !out.stderr.contains(&0x07), "{}", stderr(&out));
    assert!(stderr(&out).contains(":3: invalid device name"), "{}", stderr(&out));
}

#[test]
fn rail_names_with_a_sign_or_a_leading_zero_are_refused() {
    for rail in ["d/+1", "d/01", "d/ 1", "d/1 "] {
        let f = scenario_file(&format!(
            "duration_ms = 100\n[[device]]\nname = \"d\"\nports = [{{ port = 1 }}]\n\
             [[expect]]\nat_ms = 1\nrail = \"{rail}\"\nstate = \"active\"\n"
        ));
        let out = railwatch_within(&["simulate", f.path().to_str().unwrap()], SECONDS);
        assert_eq!(out.status.code(), Some(2), "{rail}");
        assert!(stderr(&out).contains(":7: expect 1: rail"), "{rail}: {}", stderr(&out));
    }
}

#[test]
fn a_bad_damping_value_is_reported_at_its_key() {
    let f = scenario_file(
        "duration_ms = 100\n[damping]\nsuppress = 3000\nreuse = 4000\n[[device]]\nname = \"d\"\nports = [{ port = 1 }]\n",
    );
    let out = railwatch_within(&["simulate", f.path().to_str().unwrap()], SECONDS);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains(":4: damping.reuse:"), "{}", stderr(&out));
}
