//! Record and replay: `railwatch watch --record FILE` runs under the fake
//! libibverbs while a test drives its devices through the fake's control
//! FIFO (a flap, a burst hiding a PORT_ACTIVE, a silent recovery only the
//! tick can see, a renegotiated link, a GID change); `railwatch simulate
//! FILE` then replays the recording, and its transitions (rail, from, to,
//! reason or recovery path, generation) must be the live run's, in the same
//! order. Every wait is bounded.

#![cfg(feature = "verbs")]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use railwatch_verbs_backend::testing::{FakeLib, command_under_fake};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(30);

/// Kills the child when the test ends, however it ends.
struct Killed(Option<Child>);

impl Drop for Killed {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn control(fifo: &Path, lines: &str) {
    let mut f = std::fs::OpenOptions::new().write(true).open(fifo).expect("the fake reads its control FIFO");
    f.write_all(lines.as_bytes()).unwrap();
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "no {what} within {WAIT:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn lines(text: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(text).lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// `rail from→to cause generation` for every transition line.
fn transitions(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .filter(|v| v["kind"] == "transition")
        .map(|v| {
            let cause = v.get("reason").or_else(|| v.get("by")).and_then(Value::as_str).unwrap_or("?");
            format!("{} {}→{} {cause} g{}", v["rail"].as_str().unwrap_or("?"), v["from"], v["to"], v["generation"])
        })
        .collect()
}

fn terminate(mut child: Child) -> Output {
    // SIGTERM: a clean stop writes the final expectations.
    let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
    let deadline = Instant::now() + WAIT;
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "watch did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Runs `watch --json --record` under the fake with two devices, drives
/// the scripted incident, stops it, and returns (its lines, the recording).
fn record(dir: &Path, extra: &[&str]) -> (Vec<Value>, String) {
    let fifo = dir.join("control");
    if !fifo.exists() {
        assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success(), "mkfifo");
    }
    let file = dir.join("incident.toml");
    let mut watch = Command::new(env!("CARGO_BIN_EXE_railwatch"));
    command_under_fake(&mut watch, FakeLib::Basic)
        .env("FAKE_IBVERBS_DEVICES", "mlx5_0:4/128/2,4/64/2;mlx5_1:4/32/2")
        .env("FAKE_IBVERBS_CONTROL", &fifo)
        .env_remove("FAKE_IBVERBS_EVENTS")
        .args(["watch", "--json", "--tick-ms", "200", "--record"])
        .arg(&file)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut guard = Killed(Some(watch.spawn().expect("railwatch starts")));
    // The header and the devices are on disk within a second.
    wait_for("the devices in the recording", || {
        std::fs::read_to_string(&file).is_ok_and(|t| t.matches("[[device]]").count() == 2)
    });
    let pause = || std::thread::sleep(Duration::from_millis(300));
    // mlx5_0/1 flaps: PORT_ERR (10), then PORT_ACTIVE (9) behind a burst of
    // COMM_EST (4).
    control(&fifo, "port 0 1 1\nevent 0 10 1\n");
    pause();
    let mut burst = String::from("port 0 1 4\n");
    for _ in 0..40 {
        burst.push_str("event 0 4 0\n");
    }
    burst.push_str("event 0 9 1\n");
    control(&fifo, &burst);
    pause();
    // mlx5_0/2 goes down with an event and comes back silently: the tick
    // recovers it.
    control(&fifo, "port 0 2 1\nevent 0 10 2\n");
    pause();
    control(&fifo, "port 0 2 4\n");
    pause();
    pause();
    // mlx5_1/1 comes back from a flap at a lower rate, then its GID
    // changes (GID_CHANGE, 18).
    control(&fifo, "port 1 1 1\nevent 1 10 1\n");
    pause();
    control(&fifo, "link 1 1 64 2\nport 1 1 4\nevent 1 9 1\n");
    pause();
    control(&fifo, "gid 1 1 0 7\nevent 1 18 1\n");
    pause();
    // Device events carry element 0, as rdma-core fills them: a
    // renegotiation of mlx5_0/2 announced by DEVICE_SPEED_CHANGE (20), then
    // mlx5_1 dies (DEVICE_FATAL, 8) and is re-opened after its backoff.
    control(&fifo, "link 0 2 32 2\nevent 0 20 0\n");
    pause();
    control(&fifo, "event 1 8 0\n");
    let reattached = || {
        std::fs::read_to_string(dir.join("incident.toml")).is_ok_and(|t| t.contains("device_fatal")) && {
            std::thread::sleep(Duration::from_millis(2500));
            true
        }
    };
    wait_for("the DEVICE_FATAL in the recording", reattached);
    let out = terminate(guard.0.take().unwrap());
    assert!(out.status.success(), "watch failed: {}", String::from_utf8_lossy(&out.stderr));
    (lines(&out.stdout), std::fs::read_to_string(&file).unwrap())
}

fn replay(file: &Path) -> (Output, Vec<Value>) {
    let out = Command::new(env!("CARGO_BIN_EXE_railwatch")).arg("simulate").arg(file).arg("--json").output().unwrap();
    let parsed = lines(&out.stdout);
    (out, parsed)
}

#[test]
fn a_recorded_incident_replays_with_the_same_transitions() {
    let dir = tempfile::tempdir().unwrap();
    let (live, text) = record(dir.path(), &[]);
    let live_transitions = transitions(&live);
    // The incident happened as scripted: both recovery paths, a bump.
    let joined = live_transitions.join("\n");
    assert!(joined.contains("mlx5_0/1 \"active\"→\"paused\" port_err"), "{joined}");
    assert!(joined.contains("mlx5_0/1 \"paused\"→\"active\" event"), "{joined}");
    assert!(joined.contains("mlx5_0/2 \"paused\"→\"active\" poll"), "{joined}");
    assert!(joined.contains("mlx5_1/1 \"active\"→\"active\" gid_change"), "{joined}");
    assert!(joined.contains("mlx5_1/1 \"active\"→\"inert\" device_fatal"), "{joined}");
    assert!(joined.contains("mlx5_1/1 \"inert\"→\"active\" attach g4"), "{joined}");
    // The recording is a scenario: the devices, the burst as one step, the
    // silent change, the final expectations.
    assert!(text.contains("repeat = 40"), "{text}");
    assert!(text.contains("[[expect]]"), "{text}");
    assert!(text.contains("gids = ["), "{text}");
    assert!(
        text.contains("event = \"device_speed_change\"\n\n") || text.ends_with("event = \"device_speed_change\"\n"),
        "{text}"
    );

    let (out, replayed) = replay(&dir.path().join("incident.toml"));
    assert!(out.status.success(), "the replay's expectations failed: {}\n{text}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(transitions(&replayed), live_transitions, "replay differs from the live run; recording:\n{text}");
    // The recording makes a report through the same path as any scenario.
    let page = dir.path().join("incident.html");
    let out = Command::new(env!("CARGO_BIN_EXE_railwatch"))
        .arg("simulate")
        .arg(dir.path().join("incident.toml"))
        .arg("--html")
        .arg(&page)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("data-lanes=\"3\""), "three rails, three lanes");
}

#[test]
fn an_anonymized_recording_names_no_device_and_replays_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let (live, text) = record(dir.path(), &["--record-anonymize"]);
    assert!(!text.contains("mlx5"), "a device name is left:\n{text}");
    assert!(!text.contains("fe80::7"), "a real GID is left:\n{text}");
    let (out, replayed) = replay(&dir.path().join("incident.toml"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let renamed: Vec<String> =
        transitions(&live).iter().map(|t| t.replace("mlx5_0/", "dev0/").replace("mlx5_1/", "dev1/")).collect();
    assert_eq!(transitions(&replayed), renamed, "recording:\n{text}");
}

/// `watch --json --record DIR/NAME` under the fake with one device,
/// driven through the control FIFO: (the FIFO, the recording, the child).
fn record_one_device(dir: &Path, name: &str, stderr: Stdio) -> (PathBuf, PathBuf, Killed) {
    let fifo = dir.join("control");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let file = dir.join(name);
    let mut watch = Command::new(env!("CARGO_BIN_EXE_railwatch"));
    command_under_fake(&mut watch, FakeLib::Basic)
        .env("FAKE_IBVERBS_DEVICES", "mlx5_0:4/128/2")
        .env("FAKE_IBVERBS_CONTROL", &fifo)
        .env_remove("FAKE_IBVERBS_EVENTS")
        .args(["watch", "--json", "--record"])
        .arg(&file)
        .stdout(Stdio::null())
        .stderr(stderr);
    let guard = Killed(Some(watch.spawn().unwrap()));
    (fifo, file, guard)
}

/// Whether the file at `path` holds `what` now (a condition for [`wait_for`]).
fn holds<'a>(path: &'a Path, what: &'a str) -> impl FnMut() -> bool + 'a {
    move || std::fs::read_to_string(path).is_ok_and(|t| t.contains(what))
}

#[test]
fn a_killed_recording_is_still_a_valid_scenario() {
    let dir = tempfile::tempdir().unwrap();
    let (fifo, file, mut guard) = record_one_device(dir.path(), "killed.toml", Stdio::null());
    wait_for("the device in the recording", holds(&file, "[[device]]"));
    control(&fifo, "port 0 1 1\nevent 0 10 1\n");
    // Within a second and a half the PORT_ERR is on disk.
    wait_for("the event in the recording", holds(&file, "port_err"));
    let mut child = guard.0.take().unwrap();
    child.kill().unwrap(); // SIGKILL: nothing is finished.
    child.wait().unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains("[[expect]]"), "{text}");
    let (out, replayed) = replay(&file);
    assert!(out.status.success(), "{}\n{text}", String::from_utf8_lossy(&out.stderr));
    // What was on disk replays; past it the replay goes on from the last
    // state it knows.
    let replayed = transitions(&replayed);
    assert_eq!(
        replayed[..2],
        [
            "mlx5_0/1 \"inert\"→\"active\" attach g1".to_string(),
            "mlx5_0/1 \"active\"→\"paused\" port_err g1".to_string()
        ],
        "{text}"
    );

    // The agent restarts (as systemd restarts it after a crash) with the
    // same --record: the killed recording is kept as killed.toml.old, not
    // wiped, and the new one is written.
    let mut again = Command::new(env!("CARGO_BIN_EXE_railwatch"));
    let out = command_under_fake(&mut again, FakeLib::Basic)
        .env("FAKE_IBVERBS_DEVICES", "mlx5_0:4/128/2")
        .env_remove("FAKE_IBVERBS_CONTROL")
        .env_remove("FAKE_IBVERBS_EVENTS")
        .args(["watch", "--json", "--for-ms", "200", "--record"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let old = dir.path().join("killed.toml.old");
    assert!(String::from_utf8_lossy(&out.stderr).contains("kept as"), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_to_string(&old).unwrap(), text);
    let new = std::fs::read_to_string(&file).unwrap();
    assert!(new.contains("[[expect]]") && !new.contains("port_err"), "{new}");
}

/// An operator (or a log rotation) moves the recording away mid-run, then
/// another time replaces its name with a link: at the next sync the whole
/// recording is written anew under its name, and at the end the name holds
/// all of it (the device, the events before and after, the expectations);
/// the link's target is never written.
#[test]
fn a_recording_moved_or_replaced_mid_run_is_written_anew_under_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let (fifo, file, mut guard) = record_one_device(dir.path(), "rec.toml", Stdio::piped());
    wait_for("the device in the recording", holds(&file, "[[device]]"));
    control(&fifo, "port 0 1 1\nevent 0 10 1\n");
    wait_for("the PORT_ERR in the recording", holds(&file, "port_err"));

    let moved = dir.path().join("moved.toml");
    std::fs::rename(&file, &moved).unwrap();
    control(&fifo, "port 0 1 4\nevent 0 9 1\n");
    wait_for("the recording back under its name", holds(&file, "port_active"));
    let first = std::fs::read_to_string(&file).unwrap();
    assert!(first.contains("[[device]]") && first.contains("port_err"), "written whole: {first}");

    let target = dir.path().join("target");
    std::fs::write(&target, "keep me\n").unwrap();
    std::fs::remove_file(&file).unwrap();
    std::os::unix::fs::symlink(&target, &file).unwrap();
    control(&fifo, "port 0 1 1\nevent 0 10 1\n");
    wait_for("a regular file under the name again", || {
        std::fs::symlink_metadata(&file).is_ok_and(|m| m.file_type().is_file())
    });
    let out = terminate(guard.0.take().unwrap());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("written anew under its name"));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me\n", "the link's target is not written");
    let text = std::fs::read_to_string(&file).unwrap();
    // All that was there before the link (the duration aside, which grows).
    assert!(text.contains(&first[first.find("[[device]]").unwrap()..]), "{text}");
    assert!(text.matches("port_err").count() == 2 && text.contains("[[expect]]"), "{text}");
    let (out, replayed) = replay(&file);
    assert!(out.status.success(), "{}\n{text}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(transitions(&replayed).len(), 4, "attach, pause, recovery, pause: {text}");
}

/// Random incidents, seeded: `watch --record` under the fake with a fast
/// tick (and the audit, every other case) while random flaps, silent
/// recoveries, GID changes around a PORT_ACTIVE (a RoCE link-up: the GID
/// set in the millisecond after it or before it is written, announced by
/// GID_CHANGE or not), GID changes no event tells of, renegotiations and
/// bursts are driven through the control FIFO; the replay of each recording gives the live run's transitions
/// (rail, from, to, cause, generation) in the same order.
/// `RAILWATCH_WATCH_REPLAY_CASES` sets the number of cases (default 4).
#[test]
fn random_incidents_recorded_by_watch_replay_the_same() {
    let cases: u64 = std::env::var("RAILWATCH_WATCH_REPLAY_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(4);
    let mut failures = Vec::new();
    for seed in 1..=cases {
        let dir = tempfile::tempdir().unwrap();
        let (live, recording) = record_random(dir.path(), seed);
        let (out, replayed) = replay(&dir.path().join("incident.toml"));
        let (live, replayed) = (transitions(&live), transitions(&replayed));
        // `RAILWATCH_WATCH_REPLAY_KEEP=DIR`: each case's recording and both
        // runs' transitions are kept there.
        if let Some(keep) = std::env::var_os("RAILWATCH_WATCH_REPLAY_KEEP").map(std::path::PathBuf::from) {
            let runs = format!("live\n{}\nreplayed\n{}\n", live.join("\n"), replayed.join("\n"));
            std::fs::write(keep.join(format!("seed-{seed}.toml")), &recording).unwrap();
            std::fs::write(keep.join(format!("seed-{seed}.transitions")), runs).unwrap();
        }
        if !out.status.success() || live != replayed {
            failures.push(format!("seed {seed}:\nlive     {live:?}\nreplayed {replayed:?}\n{recording}"));
        }
    }
    assert!(failures.is_empty(), "{} of {cases} differ; the first:\n{}", failures.len(), failures[0]);
}

/// One random incident (see above), recorded.
fn record_random(dir: &Path, seed: u64) -> (Vec<Value>, String) {
    record_random_to(dir, seed, "incident.toml")
}

/// The devices are in the recording `file`: declared (a scenario), or
/// added (an input log, written each wake-up).
fn has_devices(file: &Path) -> bool {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    text.matches("[[device]]").count() == 2 || text.matches("\"kind\":\"add_device\"").count() == 2
}

/// One random incident, recorded to `dir/name`.
fn record_random_to(dir: &Path, seed: u64, name: &str) -> (Vec<Value>, String) {
    let fifo = dir.join("control");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success(), "mkfifo");
    let file = dir.join(name);
    let mut watch = Command::new(env!("CARGO_BIN_EXE_railwatch"));
    command_under_fake(&mut watch, FakeLib::Basic)
        .env("FAKE_IBVERBS_DEVICES", "mlx5_0:4/128/2,4/64/2;mlx5_1:4/32/2")
        .env("FAKE_IBVERBS_CONTROL", &fifo)
        .env_remove("FAKE_IBVERBS_EVENTS")
        .args(["watch", "--json", "--tick-ms", "50", "--record"])
        .arg(&file)
        .args(["--audit-ms", if seed % 2 == 0 { "300" } else { "off" }])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut guard = Killed(Some(watch.spawn().expect("railwatch starts")));
    wait_for("the devices in the recording", || has_devices(&file));
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    let ports = [(0, 1), (0, 2), (1, 1)];
    for i in 0..12 {
        let (d, p) = ports[next(3) as usize];
        let gid = 10 + i + 20 * seed;
        // The link goes down first, for a while (`~`: 30 to 80 ms), so
        // the link-up activates the rail.
        let down = if next(2) == 0 { format!("port {d} {p} 1\nevent {d} 10 {p}\n~") } else { String::new() };
        let command = match next(10) {
            0 => format!("port {d} {p} 1\nevent {d} 10 {p}\n"),
            1 => format!("port {d} {p} 4\nevent {d} 9 {p}\n"),
            2 => format!("port {d} {p} 4\n"),
            // A RoCE link-up: PORT_ACTIVE, then a GID change in the same
            // millisecond or the next (`|`: a pause of up to 2 ms, so the
            // monitor may have read the address for the activation before
            // the GID changes).
            3 => format!("{down}port {d} {p} 4\nevent {d} 9 {p}\n|gid {d} {p} 0 {gid}\nevent {d} 18 {p}\n"),
            4 => format!("link {d} {p} {} 2\nevent {d} 20 0\n", [32, 64, 128][next(3) as usize]),
            // The GID set before the PORT_ACTIVE is written, with or
            // without a GID_CHANGE after it.
            5 => format!("{down}port {d} {p} 4\ngid {d} {p} 0 {gid}\n|event {d} 9 {p}\n"),
            6 => format!("{down}port {d} {p} 4\ngid {d} {p} 0 {gid}\nevent {d} 9 {p}\n|event {d} 18 {p}\n"),
            // A link-up whose GID change no event tells of.
            7 => format!("{down}port {d} {p} 4\nevent {d} 9 {p}\n|gid {d} {p} 0 {gid}\n"),
            // A GID change with no event at all: only a later read finds it.
            8 => format!("gid {d} {p} 0 {gid}\n"),
            _ => format!("{}event {d} 9 {p}\n", format!("event {d} 4 0\n").repeat(20)),
        };
        for (k, slow) in command.split('~').enumerate() {
            if k > 0 {
                std::thread::sleep(Duration::from_millis(30 + next(50)));
            }
            for (k, part) in slow.split('|').enumerate() {
                if k > 0 {
                    std::thread::sleep(Duration::from_micros(next(2000)));
                }
                control(&fifo, part);
            }
        }
        std::thread::sleep(Duration::from_millis(20 + next(200)));
    }
    std::thread::sleep(Duration::from_millis(1500));
    let out = terminate(guard.0.take().unwrap());
    assert!(out.status.success(), "watch failed: {}", String::from_utf8_lossy(&out.stderr));
    (lines(&out.stdout), std::fs::read_to_string(&file).unwrap())
}

/// The input log: `watch --record FILE.rwlog` under the fake through random
/// incidents, then `railwatch replay FILE.rwlog`: no divergence, and the
/// live run's transitions (rail, from, to, cause, generation) exactly,
/// with no placement rule in between. `RAILWATCH_WATCH_REPLAY_CASES` sets
/// the number of cases (default 4).
#[test]
fn random_incidents_logged_by_watch_replay_exactly() {
    let cases: u64 = std::env::var("RAILWATCH_WATCH_REPLAY_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(4);
    for seed in 1..=cases {
        let dir = tempfile::tempdir().unwrap();
        let (live, _) = record_random_to(dir.path(), seed, "incident.rwlog");
        let out = Command::new(env!("CARGO_BIN_EXE_railwatch"))
            .arg("replay")
            .arg(dir.path().join("incident.rwlog"))
            .arg("--json")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "seed {seed}: {stderr}");
        assert!(stderr.contains("no divergence"), "seed {seed}: {stderr}");
        let (live, replayed) = (transitions(&live), transitions(&lines(&out.stdout)));
        assert!(!live.is_empty(), "seed {seed}: nothing happened");
        assert_eq!(live, replayed, "seed {seed}");
    }
}

#[test]
fn replay_says_what_is_wrong_with_a_log() {
    let dir = tempfile::tempdir().unwrap();
    let run = |file: &Path| Command::new(env!("CARGO_BIN_EXE_railwatch")).arg("replay").arg(file).output().unwrap();
    let log = dir.path().join("x.rwlog");
    let out = Command::new(env!("CARGO_BIN_EXE_railwatch"))
        .args(["simulate", "--builtin", "device-removal", "--record"])
        .arg(&log)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(run(&log).status.code(), Some(0));
    let text = std::fs::read_to_string(&log).unwrap();
    // Garbage on line 3: exit 2 naming it.
    let mut lines: Vec<&str> = text.lines().collect();
    lines[2] = "{not json";
    let bad = dir.path().join("bad.rwlog");
    std::fs::write(&bad, lines.join("\n") + "\n").unwrap();
    let out = run(&bad);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 3"), "{}", String::from_utf8_lossy(&out.stderr));
    // A port answer that says another port: exit 1, the divergence named.
    let at = text.lines().position(|l| l.contains("\"kind\":\"port_state\"")).unwrap();
    let edited: Vec<String> = text
        .lines()
        .enumerate()
        .map(|(i, l)| if i == at { l.replace("\"port\":1", "\"port\":7") } else { l.to_owned() })
        .collect();
    let diverged = dir.path().join("diverged.rwlog");
    std::fs::write(&diverged, edited.join("\n") + "\n").unwrap();
    let out = run(&diverged);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&format!("line {}", at + 1)) && stderr.contains("diverges"), "{stderr}");
    // Not there, not a log: exit 2.
    assert_eq!(run(&dir.path().join("none.rwlog")).status.code(), Some(2));
    let scenario = dir.path().join("s.rwlog");
    std::fs::write(&scenario, "duration_ms = 5\n").unwrap();
    assert_eq!(run(&scenario).status.code(), Some(2));
    // Cut by a crash: replayed up to the cut, said.
    let cut = dir.path().join("cut.rwlog");
    std::fs::write(&cut, &text[..text.len() - 5]).unwrap();
    let out = run(&cut);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cut"), "{}", String::from_utf8_lossy(&out.stderr));
}

/// `railwatch lift`: a watch log under the fake becomes a scenario that
/// `simulate` runs; lift says whether it replays the log (a live log's
/// re-open jitter is the one thing a scenario draws anew).
#[test]
fn a_watch_log_lifts_to_a_scenario() {
    let dir = tempfile::tempdir().unwrap();
    let (live, _) = record_random_to(dir.path(), 3, "incident.rwlog");
    let toml = dir.path().join("lifted.toml");
    let out = Command::new(env!("CARGO_BIN_EXE_railwatch"))
        .arg("lift")
        .arg(dir.path().join("incident.rwlog"))
        .arg("-o")
        .arg(&toml)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("are the log's"), "{stderr}");
    let (out, replayed) = replay(&toml);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(transitions(&replayed), transitions(&live));
}
