//! `railwatch watch --config FILE`, its flags and `--check`, end to end.
//!
//! `--check` opens no device, so most of this runs in every build; the
//! tests that watch devices (include and exclude, the settings reaching the
//! monitor) need `--features verbs` and run under the fake libibverbs.
//! Every run has a wall-clock bound, so a hang fails instead of hanging.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const SECONDS: Duration = Duration::from_secs(60);

/// The binary with the fake's variables cleared.
fn railwatch() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_railwatch"));
    cmd.env("NO_COLOR", "1").env("RUST_LOG", "warn");
    for var in ["FAKE_IBVERBS_DEVICES", "FAKE_IBVERBS_EVENTS", "FAKE_IBVERBS_LIST_ERRNO", "FAKE_IBVERBS_OPEN_ERRNO"] {
        cmd.env_remove(var);
    }
    cmd
}

/// Runs `cmd` with a deadline; a run past it is killed and fails.
fn run_within(cmd: &mut Command, limit: Duration) -> (Output, String, String) {
    let mut child =
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("the binary runs");
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
            panic!("railwatch {:?} still running after {limit:?}", cmd.get_args().collect::<Vec<_>>());
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let out = Output { status, stdout: reader.join().unwrap().unwrap(), stderr: err_reader.join().unwrap().unwrap() };
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stdout, stderr)
}

/// `railwatch watch --check ARGS`.
fn check(args: &[&str]) -> (Output, String, String) {
    run_within(railwatch().args(["watch", "--check"]).args(args), SECONDS)
}

fn config_file(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::Builder::new().suffix(".toml").tempfile().expect("temp file");
    f.write_all(text.as_bytes()).expect("write");
    f
}

fn path_of(f: &tempfile::NamedTempFile) -> &str {
    f.path().to_str().expect("a UTF-8 temp path")
}

/// `--check --json` on `text` (and `flags`): the one JSON line.
fn checked_json(text: &str, flags: &[&str]) -> Value {
    let f = config_file(text);
    let mut args = vec!["--json", "--config", path_of(&f)];
    args.extend_from_slice(flags);
    let (out, stdout, stderr) = check(&args);
    assert!(out.status.success(), "{:?}\n{stdout}\n{stderr}", out.status);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{stdout}");
    let v: Value = serde_json::from_str(lines[0]).expect("one JSON line");
    assert_eq!((v["kind"].as_str(), v["valid"].as_bool()), (Some("config"), Some(true)), "{v}");
    v
}

/// `--check` on `text` must fail with exit 1, a stderr line
/// `railwatch: FILE:LINE: KEY: …` containing `message`, and with `--json`
/// a `config_error` line naming the same file, line and key.
fn refused(text: &str, line: usize, key: &str, message: &str) {
    let f = config_file(text);
    let path = path_of(&f);
    let (out, stdout, stderr) = check(&["--config", path]);
    assert_eq!(out.status.code(), Some(1), "{text:?}: {stdout}\n{stderr}");
    let want = format!("railwatch: {path}:{line}: {key}: ");
    let said =
        stderr.lines().find(|l| l.starts_with(&want)).unwrap_or_else(|| panic!("{text:?}: no {want:?} in {stderr}"));
    assert!(said.contains(message), "{text:?}: {said:?} does not say {message:?}");
    assert!(stdout.is_empty(), "nothing on stdout without --json: {stdout}");

    let (out, stdout, _) = check(&["--json", "--config", path]);
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"));
    assert_eq!(v["kind"], "config_error");
    assert_eq!(v["valid"], false);
    assert_eq!((v["file"].as_str(), v["line"].as_u64(), v["key"].as_str()), (Some(path), Some(line as u64), Some(key)));
    assert!(v["message"].as_str().unwrap().contains(message), "{v}");
}

const FULL: &str = r#"# every key
tick_ms = 250
audit_ms = 60_000
settle_ms = 500
drain_budget = 64
explain_every_ms = 10000
reopen_initial_ms = 2000
reopen_max_ms = 120000
reopen_jitter_pct = 10
port_witness = "carrier"
include = ["mlx5_0", "mlx5_1"]
exclude = ["mlx5_1"]

[damping]
penalty_per_flap = 1000
suppress = 3000.5
reuse = 800
half_life_ms = 20000
max_penalty = 8000

[metrics]
listen = "127.0.0.1:9464"
textfile = "railwatch.prom"
"#;

// ---- a valid file ----------------------------------------------------------

#[test]
fn a_valid_file_round_trips_into_the_effective_settings() {
    let f = config_file(FULL);
    let path = path_of(&f);
    let (out, stdout, stderr) = check(&["--json", "--config", path]);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let v: Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    assert_eq!(v["file"], path);
    assert_eq!(
        v["settings"],
        json!({
            "tick_ms": 250, "audit_ms": 60000, "settle_ms": 500, "drain_budget": 64, "notify_capacity": 4096,
            "data_path": {"failures": 8, "window_ms": 10000, "min_peers": 2, "backoff_initial_ms": 1000,
                "backoff_max_ms": 60000, "probe_timeout_ms": 40000},
            "silent_flaps": true, "require_address": "none", "port_witness": "carrier",
            "explain_every_ms": 10000, "reopen_initial_ms": 2000, "reopen_max_ms": 120000,
            "reopen_jitter_pct": 10, "query_retries": 0, "device_owner": "railwatch",
            "include": ["mlx5_0", "mlx5_1"], "exclude": ["mlx5_1"],
            "damping": {"penalty_per_flap": 1000.0, "suppress": 3000.5, "reuse": 800.0,
                "half_life_ms": 20000, "max_penalty": 8000.0},
            "metrics": {"listen": "127.0.0.1:9464", "textfile": "railwatch.prom"},
        })
    );
    // Where each came from: the line it was written on.
    let from = &v["from"];
    assert_eq!(from["tick_ms"], format!("{path}:2"));
    assert_eq!(from["port_witness"], format!("{path}:10"));
    assert_eq!(from["exclude"], format!("{path}:12"));
    assert_eq!(from["damping"], format!("{path}:14"));
    assert_eq!(from["damping.half_life_ms"], format!("{path}:18"));
    assert_eq!(from["metrics.textfile"], format!("{path}:23"));
    assert_eq!(v["metrics_served"], true);
    // Metrics are served now: no note about them.
    assert!(!stderr.contains("metrics"), "{stderr}");

    // The same for people.
    let (out, stdout, _) = check(&["--config", path]);
    assert!(out.status.success());
    assert!(stdout.starts_with(&format!("{path}: valid; effective settings:\n")), "{stdout}");
    let row = |key: &str| -> Vec<String> {
        let line = stdout.lines().find(|l| l.split_whitespace().next() == Some(key)).unwrap_or_else(|| panic!("{key}"));
        line.split_whitespace().map(str::to_owned).collect()
    };
    assert_eq!(row("tick_ms"), ["tick_ms", "250", &format!("{path}:2")]);
    assert_eq!(row("drain_budget")[1], "64");
    assert_eq!(row("damping")[1], "on");
    assert_eq!(row("include")[1..3], ["mlx5_0,", "mlx5_1"]);
    assert_eq!(row("metrics.listen"), ["metrics.listen", "127.0.0.1:9464", &format!("{path}:22")]);
}

#[test]
fn without_a_file_the_defaults_are_shown_and_valid() {
    let (out, stdout, stderr) = check(&["--json"]);
    assert!(out.status.success(), "{stderr}");
    let v: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert!(v["file"].is_null());
    let s = &v["settings"];
    assert_eq!((s["tick_ms"].as_u64(), s["drain_budget"].as_u64()), (Some(1000), Some(256)));
    // The agent audits active rails every second by default.
    assert_eq!(s["audit_ms"].as_u64(), Some(1000), "{s}");
    assert!(s["damping"].is_null() && s["include"].is_null(), "{s}");
    assert_eq!(s["exclude"], json!([]));
    assert!(v["from"].as_object().unwrap().values().all(|o| o == "default"), "{v}");
    assert!(!stderr.contains("metrics"), "no [metrics], no note: {stderr}");
}

#[test]
fn the_example_in_docs_config_md_is_valid() {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/CONFIG.md"))
        .expect("docs/CONFIG.md");
    let start = doc.find("```toml\n").expect("a ```toml block") + "```toml\n".len();
    let example = &doc[start..start + doc[start..].find("```").unwrap()];
    let v = checked_json(example, &[]);
    assert!(v["settings"]["damping"].is_object(), "the example turns damping on: {v}");
}

#[test]
fn a_section_is_turned_off_with_false() {
    let v = checked_json("data_path = false\ndamping = false\n", &[]);
    assert!(v["settings"]["data_path"].is_null(), "{v}");
    assert!(v["settings"]["damping"].is_null(), "{v}");
    assert_eq!(v["from"]["data_path"].as_str().map(|s| s.ends_with(":1")), Some(true), "{v}");
}

// ---- each class of error names file, line and key ---------------------------

#[test]
fn an_unknown_key_is_named_with_its_line() {
    refused("tick_ms = 100\n\nticks_ms = 5\n", 3, "ticks_ms", "unknown key");
    refused("[damping]\nhalf_life_ms = 1000\nhalflife = 2\n", 3, "damping.halflife", "unknown key");
    refused("[metrics]\nport = 9464\n", 2, "metrics.port", "unknown key");
    refused("tick_ms = 100\n[dampening]\n", 2, "dampening", "unknown key");
}

#[test]
fn a_wrong_type_is_named_with_its_line() {
    refused(
        "settle_ms = 1\ntick_ms = \"fast\"\n",
        2,
        "tick_ms",
        "must be a whole number of milliseconds, not a string",
    );
    refused("tick_ms = 1.5\n", 1, "tick_ms", "not a float");
    refused("[damping]\nsuppress = \"high\"\n", 2, "damping.suppress", "must be a number, not a string");
    refused("damping = 5\n", 1, "damping", "must be a table (or false to turn it off), not an integer");
    refused("include = \"mlx5_0\"\n", 1, "include", "must be a list of device names");
    refused("exclude = [\"mlx5_0\", 3]\n", 1, "exclude", "item 2 must be a device name (a string), not an integer");
    refused("[metrics]\nlisten = 9464\n", 2, "metrics.listen", "must be a string \"ADDR:PORT\", not an integer");
}

#[test]
fn an_out_of_range_value_is_named_with_its_line() {
    refused("# the tick\ntick_ms = 0\n", 2, "tick_ms", "must be at least 1 ms");
    refused("tick_ms = -5\n", 1, "tick_ms", "must not be negative");
    refused("drain_budget = 0\n", 1, "drain_budget", "must be at least 1");
    refused("audit_ms = 0\n", 1, "audit_ms", "must be at least 1 ms");
    refused("settle_ms = 604800001\n", 1, "settle_ms", "more than the limit");
    refused("reopen_jitter_pct = 101\n", 1, "reopen_jitter_pct", "more than the limit of 100");
    // A default refused because of a written key points at that key.
    refused("\nreopen_initial_ms = 120000\n", 2, "reopen_max_ms", "less than reopen_initial_ms");
    refused(
        "[data_path]\nfailures = 3\nbackoff_initial_ms = 70000\n",
        3,
        "data_path.backoff_max_ms",
        "less than data_path.backoff_initial_ms",
    );
    refused("data_path = { backoff_initial_ms = 70000 }\n", 1, "data_path.backoff_max_ms", "less than");
    refused("include = []\n", 1, "include", "nothing would be watched");
    refused("include = [\"mlx5_0\", \"mlx5_0\"]\n", 1, "include", "listed twice");
    refused("include = [\"a b\"]\n", 1, "include", "invalid device name");
    refused("include = [\"mlx5_0\"]\n\nexclude = [\"mlx5_0\"]\n", 3, "exclude", "excludes every included device");
}

#[test]
fn a_damping_hold_longer_than_a_week_is_refused_at_its_key() {
    refused("[damping]\nhalf_life_ms = 300000000\n", 2, "damping.half_life_ms", "the limit is one week");
    refused(
        "[damping]\nhalf_life_ms = 10000000000\n",
        2,
        "damping.half_life_ms",
        "more than the limit of 604800000 ms",
    );
    refused("[damping]\nreuse = 3000\n", 2, "damping.reuse", "less than suppress");
    // max_penalty is at its default: the [damping] header is named.
    refused("tick_ms = 5\n[damping]\nsuppress = 7000\n", 2, "damping.max_penalty", "at least suppress");
    // Dotted and inline forms name the key's line too.
    refused("tick_ms = 5\ndamping.half_life_ms = 0\n", 2, "damping.half_life_ms", "must be at least 1 ms");
    refused("damping = { reuse = 0 }\n", 1, "damping.reuse", "must be positive");
}

#[test]
fn a_bad_metrics_setting_is_refused_at_its_key() {
    refused("[metrics]\nlisten = \"localhost:9464\"\n", 2, "metrics.listen", "is not an ADDR:PORT socket address");
    refused("[metrics]\nlisten = \"127.0.0.1\"\n", 2, "metrics.listen", "is not an ADDR:PORT socket address");
    refused("[metrics]\nlisten = \"[::1]:0\"\n", 2, "metrics.listen", "the port must not be 0");
    refused("[metrics]\ntextfile = \"\"\n", 2, "metrics.textfile", "must not be empty");
    refused("[metrics]\ntextfile = \"dir/\"\n", 2, "metrics.textfile", "names a directory");
    let v = checked_json("[metrics]\nlisten = \"[::1]:9464\"\n", &[]);
    assert_eq!(v["settings"]["metrics"]["listen"], "[::1]:9464");
}

#[test]
fn a_toml_syntax_error_is_named_with_its_line() {
    let f = config_file("tick_ms = 5\nsettle_ms = \n");
    let (out, _, stderr) = check(&["--config", path_of(&f)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.starts_with(&format!("railwatch: {}:2: settle_ms: ", path_of(&f))), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
}

// ---- flags ---------------------------------------------------------------------

#[test]
fn the_audit_turns_off_in_the_file_or_by_flag() {
    let v = checked_json("audit_ms = false\n", &[]);
    assert!(v["settings"]["audit_ms"].is_null(), "{v}");
    let v = checked_json("audit_ms = 250\n", &["--audit-ms", "off"]);
    assert!(v["settings"]["audit_ms"].is_null(), "{v}");
    assert_eq!(v["from"]["audit_ms"], "--audit-ms");
    let (out, _, stderr) = check(&["--audit-ms", "often"]);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("\"often\" is neither `off` nor a number of ms"), "{stderr}");
}

#[test]
fn flags_override_the_file() {
    let text =
        "tick_ms = 250\nsettle_ms = 500\ninclude = [\"mlx5_0\"]\nexclude = [\"mlx5_2\"]\n[damping]\nreuse = 700\n";
    let v = checked_json(
        text,
        &[
            "--tick-ms",
            "40",
            "--audit-ms",
            "5000",
            "--drain-budget",
            "8",
            "--damping-half-life-ms",
            "1000",
            "--include",
            "mlx5_1",
            "--include",
            "mlx5_3",
            "--exclude",
            "mlx5_0",
        ],
    );
    let s = &v["settings"];
    assert_eq!(s["tick_ms"], 40);
    assert_eq!(s["settle_ms"], 500, "not overridden");
    assert_eq!((s["audit_ms"].as_u64(), s["drain_budget"].as_u64()), (Some(5000), Some(8)));
    assert_eq!(s["damping"]["half_life_ms"], 1000);
    assert_eq!(s["damping"]["reuse"], 700.0, "the file's other damping keys stay");
    assert_eq!(s["include"], json!(["mlx5_1", "mlx5_3"]), "a flag list replaces the file's");
    assert_eq!(s["exclude"], json!(["mlx5_0"]));
    let from = &v["from"];
    assert_eq!(from["tick_ms"], "--tick-ms");
    assert_eq!(from["damping.half_life_ms"], "--damping-half-life-ms");
    assert_eq!((from["include"].as_str(), from["exclude"].as_str()), (Some("--include"), Some("--exclude")));
    assert!(from["settle_ms"].as_str().unwrap().ends_with(":2"), "{from}");

    // --settle-ms over the file; --device is an include of one.
    let v = checked_json(text, &["--settle-ms", "0", "--device", "mlx5_7"]);
    assert_eq!((v["settings"]["settle_ms"].as_u64(), v["from"]["settle_ms"].as_str()), (Some(0), Some("--settle-ms")));
    assert_eq!((&v["settings"]["include"], v["from"]["include"].as_str()), (&json!(["mlx5_7"]), Some("--device")));
}

#[test]
fn damping_flags_turn_it_on_or_off() {
    let v = checked_json("tick_ms = 100\n", &["--damping"]);
    assert_eq!(
        v["settings"]["damping"],
        json!({"penalty_per_flap": 1000.0, "suppress": 2500.0, "reuse": 750.0, "half_life_ms": 15000, "max_penalty": 6000.0})
    );
    assert_eq!(v["from"]["damping"], "--damping");
    let v = checked_json("tick_ms = 100\n", &["--damping-half-life-ms", "2000"]);
    assert_eq!(v["settings"]["damping"]["half_life_ms"], 2000, "on, with the defaults otherwise");
    let v = checked_json("[damping]\nhalf_life_ms = 2000\n", &["--no-damping"]);
    assert!(v["settings"]["damping"].is_null());
    assert_eq!(v["from"]["damping"], "--no-damping");
}

#[test]
fn a_bad_flag_value_names_the_flag_and_key() {
    let f = config_file("[damping]\nmax_penalty = 7000\n");
    for (flags, want) in [
        (&["--damping-half-life-ms", "99999999999"][..], "--damping-half-life-ms: damping.half_life_ms: "),
        (&["--drain-budget", "0"][..], "--drain-budget: drain_budget: must be at least 1"),
        (&["--tick-ms", "0"][..], "--tick-ms: tick_ms: must be at least 1 ms"),
        (&["--audit-ms", "0"][..], "--audit-ms: audit_ms: must be at least 1 ms"),
        (&["--settle-ms", "999999999999"][..], "--settle-ms: settle_ms: "),
        (&["--include", "mlx5_0", "--exclude", "mlx5_0"][..], "--exclude: exclude: excludes every included device"),
        (&["--include", "a/b"][..], "--include: include: invalid device name"),
    ] {
        let mut args = vec!["--config", path_of(&f)];
        args.extend_from_slice(flags);
        let (out, _, stderr) = check(&args);
        assert_eq!(out.status.code(), Some(1), "{flags:?}: {stderr}");
        assert!(stderr.starts_with(&format!("railwatch: {want}")), "{flags:?}: {stderr}");
    }
    // What the argument parser cannot read at all is bad usage (exit 2).
    let (out, _, stderr) = check(&["--tick-ms", "1e3"]);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
}

#[test]
fn a_bad_file_is_refused_even_when_a_flag_overrides_the_bad_key() {
    let f = config_file("tick_ms = 0\n");
    let (out, _, stderr) = check(&["--config", path_of(&f), "--tick-ms", "50"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains(&format!("{}:1: tick_ms: must be at least 1 ms", path_of(&f))), "{stderr}");
}

#[test]
fn watch_without_check_refuses_a_bad_file_as_bad_input() {
    let f = config_file("tick_ms = 0\n");
    let (out, stdout, stderr) = run_within(railwatch().args(["watch", "--config", path_of(&f)]), SECONDS);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(stderr.contains(&format!("{}:1: tick_ms: must be at least 1 ms", path_of(&f))), "{stderr}");
}

// ---- files that are not config files -------------------------------------------

#[test]
fn a_directory_a_huge_file_a_socket_and_a_missing_file_are_refused_quickly() {
    let dir = tempfile::tempdir().expect("temp dir");
    let quick = Duration::from_secs(10);

    let started = Instant::now();
    let (out, _, stderr) = run_within(railwatch().args(["watch", "--check", "--config"]).arg(dir.path()), quick);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("is a directory, not a config file"), "{stderr}");

    // 17 MiB, sparse: refused from its size, never read.
    let huge = dir.path().join("huge.toml");
    std::fs::File::create(&huge).and_then(|f| f.set_len(17 << 20)).expect("a sparse file");
    let (out, _, stderr) = run_within(railwatch().args(["watch", "--check", "--config"]).arg(&huge), quick);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("is more than the limit of 16777216 (16 MiB)"), "{stderr}");

    // Not a regular file: never opened (a FIFO would block, a device be
    // read forever).
    let sock = dir.path().join("sock.toml");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).expect("a unix socket");
    let (out, _, stderr) = run_within(railwatch().args(["watch", "--check", "--config"]).arg(&sock), quick);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("not a regular file"), "{stderr}");

    let (out, _, stderr) =
        run_within(railwatch().args(["watch", "--check", "--config"]).arg(dir.path().join("absent.toml")), quick);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("absent.toml: no such file"), "{stderr}");

    // Binary content.
    let bin = dir.path().join("bin.toml");
    std::fs::write(&bin, b"tick_ms = 1\n\0\0").unwrap();
    let (out, _, stderr) = run_within(railwatch().args(["watch", "--check", "--config"]).arg(&bin), quick);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("not a text file (NUL byte at offset 12)"), "{stderr}");
    assert!(started.elapsed() < quick, "took {:?}", started.elapsed());
}

/// The recording and the metrics text file may not replace the config
/// file, nor each other: refused (1 with `--check`, 2 without), the config
/// left as it was.
#[test]
fn watch_never_writes_over_its_own_files() {
    let dir = tempfile::tempdir().expect("temp dir");
    let prom = dir.path().join("railwatch.prom");
    let prom = prom.to_str().unwrap();
    // Named as a recording's kept copy would be.
    let config = dir.path().join("r.toml.old");
    std::fs::write(&config, format!("[metrics]\ntextfile = \"{prom}\"\n")).unwrap();
    let config = config.to_str().unwrap();
    let recording = dir.path().join("r.toml");
    let recording = recording.to_str().unwrap();
    let before = std::fs::read_to_string(config).unwrap();
    for (extra, said) in [
        (["--record", config], format!("--config and --record name the same file, {config}")),
        (["--record", prom], format!("--record and metrics.textfile name the same file, {prom}")),
        (["--textfile", config], format!("--config and metrics.textfile name the same file, {config}")),
        // Where an earlier recording would be kept is written too.
        (
            ["--record", recording],
            format!("--config and the earlier recording's FILE.old name the same file, {config}"),
        ),
    ] {
        let (out, _, stderr) = check(&[&["--config", config][..], &extra[..]].concat());
        assert_eq!(out.status.code(), Some(1), "{extra:?}: {stderr}");
        assert!(stderr.contains(&said), "{extra:?}: {stderr}");
        let (out, _, stderr) =
            run_within(railwatch().args(["watch", "--for-ms", "1", "--config", config]).args(extra), SECONDS);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {stderr}");
        assert!(stderr.contains(&said), "{extra:?}: {stderr}");
        assert_eq!(std::fs::read_to_string(config).unwrap(), before);
    }
}

// ---- without the verbs feature -----------------------------------------------

#[cfg(not(feature = "verbs"))]
#[test]
fn without_the_verbs_feature_a_valid_config_still_needs_verbs_to_watch() {
    let f = config_file("tick_ms = 100\n");
    let (out, stdout, stderr) = run_within(railwatch().args(["watch", "--config", path_of(&f)]), SECONDS);
    assert_eq!(out.status.code(), Some(2));
    assert!(stdout.is_empty(), "{stdout}");
    assert!(stderr.contains("no verbs support"), "{stderr}");
}

// ---- include and exclude choose the devices watched (the fake libibverbs) -------

#[cfg(feature = "verbs")]
mod with_verbs {
    use std::process::{Command, Stdio};
    use std::time::Duration;

    use railwatch_verbs_backend::testing::{FakeLib, command_under_fake};
    use serde_json::Value;

    use super::{SECONDS, check, config_file, path_of, railwatch, run_within};

    /// mlx5_0 (NDR 4x), mlx5_1 (EDR 4x) and mlx5_2 (HDR 2x), one port each.
    const THREE_DEVICES: &str = "mlx5_0:4/128/2;mlx5_1:4/32/2;mlx5_2:4/64/16";

    fn under_fake(args: &[&str]) -> Command {
        let mut cmd = railwatch();
        command_under_fake(&mut cmd, FakeLib::Basic).env("FAKE_IBVERBS_DEVICES", THREE_DEVICES).args(args);
        cmd
    }

    /// The rails of `watch --json --for-ms 0` with the config `text` and
    /// `flags`.
    fn watched(text: &str, flags: &[&str]) -> Vec<String> {
        let f = config_file(text);
        let mut args = vec!["watch", "--json", "--for-ms", "0", "--config", path_of(&f)];
        args.extend_from_slice(flags);
        let (out, stdout, stderr) = run_within(&mut under_fake(&args), SECONDS);
        assert!(out.status.success(), "{text:?} {flags:?}: {:?}\n{stdout}\n{stderr}", out.status);
        let summary: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
        assert_eq!(summary["kind"], "summary");
        for line in stdout.lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            if let Some(device) = v.get("device").and_then(Value::as_str) {
                let wanted = summary["rails"].as_array().unwrap().iter().any(|r| r["rail"] == format!("{device}/1"));
                assert!(wanted, "a line about an unwatched device: {line}");
            }
        }
        summary["rails"].as_array().unwrap().iter().map(|r| r["rail"].as_str().unwrap().to_owned()).collect()
    }

    #[test]
    fn include_and_exclude_choose_the_devices() {
        assert_eq!(watched("tick_ms = 100\n", &[]), ["mlx5_0/1", "mlx5_1/1", "mlx5_2/1"]);
        assert_eq!(watched("include = [\"mlx5_2\", \"mlx5_0\"]\n", &[]), ["mlx5_0/1", "mlx5_2/1"]);
        assert_eq!(watched("exclude = [\"mlx5_1\"]\n", &[]), ["mlx5_0/1", "mlx5_2/1"]);
        assert_eq!(watched("include = [\"mlx5_0\", \"mlx5_1\"]\nexclude = [\"mlx5_0\"]\n", &[]), ["mlx5_1/1"]);
        // An included device that is not there (yet) is not an error.
        assert_eq!(watched("include = [\"mlx5_1\", \"mlx5_9\"]\n", &[]), ["mlx5_1/1"]);
        // Flags replace the file's lists.
        assert_eq!(watched("include = [\"mlx5_0\"]\n", &["--include", "mlx5_2"]), ["mlx5_2/1"]);
        assert_eq!(watched("exclude = [\"mlx5_0\"]\n", &["--exclude", "mlx5_2"]), ["mlx5_0/1", "mlx5_1/1"]);
        assert_eq!(watched("include = [\"mlx5_0\"]\n", &["--device", "mlx5_1"]), ["mlx5_1/1"]);
        assert_eq!(
            watched("tick_ms = 100\n", &["--include", "mlx5_0", "--include", "mlx5_1", "--exclude", "mlx5_1"]),
            ["mlx5_0/1"]
        );
    }

    #[test]
    fn when_no_device_present_is_chosen_watch_says_so_and_exits_2() {
        let f = config_file("exclude = [\"mlx5_0\", \"mlx5_1\", \"mlx5_2\"]\n");
        let (out, stdout, stderr) =
            run_within(&mut under_fake(&["watch", "--for-ms", "0", "--config", path_of(&f)]), SECONDS);
        assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
        assert!(stdout.is_empty(), "{stdout}");
        assert!(
            stderr.contains("none of the devices found (mlx5_0, mlx5_1, mlx5_2) is watched (include: every device; exclude: mlx5_0, mlx5_1, mlx5_2)"),
            "{stderr}"
        );
        // --device still names a device that is not there.
        let (out, _, stderr) = run_within(&mut under_fake(&["watch", "--device", "mlx5_9"]), SECONDS);
        assert_eq!(out.status.code(), Some(2));
        assert!(stderr.contains(r#"no RDMA device called "mlx5_9""#), "{stderr}");
    }

    #[test]
    fn the_files_settings_reach_the_monitor_and_flags_win() {
        // mlx5_0 loses its port and its PORT_ACTIVE is never sent: the
        // recovery tick from the file brings it back.
        let f = config_file("tick_ms = 30\ninclude = [\"mlx5_0\"]\n");
        let mut cmd = under_fake(&["watch", "--for-ms", "200", "--config", path_of(&f)]);
        cmd.env("FAKE_IBVERBS_EVENTS", "mlx5_0:10@1");
        let (out, stdout, stderr) = run_within(&mut cmd, SECONDS);
        assert!(out.status.success(), "{stdout}\n{stderr}");
        assert!(stdout.starts_with("watching mlx5_0 (1 port); recovery tick 30 ms; for 200 ms\n"), "{stdout}");
        assert!(stdout.contains("paused → active  by poll, generation 2"), "{stdout}");

        let (out, stdout, _) = run_within(
            &mut under_fake(&["watch", "--for-ms", "0", "--tick-ms", "45", "--config", path_of(&f)]),
            SECONDS,
        );
        assert!(out.status.success());
        assert!(stdout.starts_with("watching mlx5_0 (1 port); recovery tick 45 ms;"), "{stdout}");
    }

    /// What `--check` accepts, `watch` runs, and what it refuses, `watch`
    /// refuses the same way: each numeric flag at the top of its range and
    /// one past it (the issue's `--drain-budget 10000000000` crashed
    /// `watch` after `--check` passed; `--for-ms 18446744073709551615`
    /// panicked on the deadline).
    #[test]
    fn check_accepts_exactly_what_watch_runs() {
        for (flag, top, past) in [
            ("--tick-ms", "604800000", "604800001"),
            ("--audit-ms", "604800000", "604800001"),
            ("--settle-ms", "604800000", "604800001"),
            ("--drain-budget", "65536", "65537"),
            ("--drain-budget", "65536", "10000000000"),
            ("--drain-budget", "65536", "9223372036854775807"),
            ("--drain-budget", "65536", "18446744073709551616"),
            ("--damping-half-life-ms", "201600000", "201600001"),
            ("--for-ms", "31536000000", "31536000001"),
            ("--for-ms", "31536000000", "18446744073709551615"),
        ] {
            let (ok, _, stderr) = check(&[flag, top]);
            assert_eq!(ok.status.code(), Some(0), "--check {flag} {top}: {stderr}");
            let (bad, _, check_err) = check(&[flag, past]);
            let refused = bad.status.code();
            assert!(matches!(refused, Some(1 | 2)), "--check {flag} {past}: {refused:?} {check_err}");
            // watch: the top runs, and one past it is refused as --check
            // refused it.
            if flag == "--for-ms" {
                let mut child =
                    under_fake(&["watch", flag, top]).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
                std::thread::sleep(Duration::from_millis(300));
                let alive = child.try_wait().unwrap().is_none();
                let _ = child.kill();
                let out = child.wait_with_output().unwrap();
                assert!(alive, "watch {flag} {top} ended: {}", String::from_utf8_lossy(&out.stderr));
            } else {
                let (out, stdout, stderr) =
                    run_within(&mut under_fake(&["watch", "--for-ms", "0", flag, top]), SECONDS);
                assert!(out.status.success(), "watch {flag} {top}: {stdout}\n{stderr}");
            }
            let mut args = vec!["watch"];
            if flag != "--for-ms" {
                args.extend(["--for-ms", "0"]);
            }
            args.extend([flag, past]);
            // (exit 2, bad input, where --check says 1, invalid; the
            // parser's own refusals are 2 for both), with the same words.
            let (out, stdout, stderr) = run_within(&mut under_fake(&args), SECONDS);
            assert_eq!(out.status.code(), Some(2), "watch {flag} {past}: {stdout}\n{stderr}");
            let first = |text: &str| text.lines().next().unwrap_or("").to_owned();
            assert_eq!(first(&stderr), first(&check_err), "watch {flag} {past}");
        }
    }

    #[test]
    fn check_opens_no_device() {
        // Listing would fail (EPERM): --check never gets that far.
        let f = config_file("tick_ms = 100\n");
        let mut cmd = under_fake(&["watch", "--check", "--config", path_of(&f)]);
        cmd.env("FAKE_IBVERBS_LIST_ERRNO", "1");
        let (out, stdout, stderr) = run_within(&mut cmd, SECONDS);
        assert!(out.status.success(), "{stdout}\n{stderr}");
        assert!(stdout.contains("valid; effective settings"), "{stdout}");
    }
}

/// An 8 MiB device name with ESC and BEL in it (in the file or a flag):
/// the error line is short and has no raw control character.
#[test]
fn an_error_line_is_bounded_and_escaped() {
    let huge = format!("\u{1b}[31m\u{7}{}", "a".repeat(8 << 20));
    let f =
        config_file(&format!("include = [\"{}\"]\n", huge.replace('\u{1b}', "\\u001b").replace('\u{7}', "\\u0007")));
    let (out, _, stderr) = check(&["--config", path_of(&f)]);
    assert_eq!(out.status.code(), Some(1), "{}", &stderr[..stderr.len().min(300)]);
    let (out2, _, flag_err) = check(&["--include", &huge[..4096]]);
    assert_eq!(out2.status.code(), Some(1));
    for err in [&stderr, &flag_err] {
        assert!(err.len() < 2048, "{} bytes: {}", err.len(), &err[..300]);
        assert!(!err.chars().any(|c| c.is_control() && c != '\n'), "{err}");
        assert!(err.contains("invalid device name \"\\u{1b}[31m\\u{7}aaa"), "{err}");
    }
    // A [[damping]] array of tables names its key.
    let f = config_file("[[damping]]\nhalf_life_ms = 3\n");
    let (_, _, stderr) = check(&["--config", path_of(&f)]);
    assert!(stderr.contains(":1: damping: must be a table (or false to turn it off), not an array"), "{stderr}");
}

/// A flag's value clap refuses is shown bounded and escaped, as every
/// other error line is: a 100 KB value is not echoed whole, a control
/// character reaches no terminal; the exit is 2.
#[test]
fn a_refused_flag_value_is_shown_bounded_and_escaped() {
    let long = "9".repeat(100_000);
    let (out, _, stderr) = check(&["--tick-ms", &long]);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.len() < 500 && stderr.contains("… (100000 bytes)"), "{} bytes: {}", stderr.len(), &stderr[..200]);
    assert!(stderr.contains("--tick-ms"), "{stderr}");
    let (out, _, stderr) =
        run_within(railwatch().args(["simulate", "--builtin", "a\u{7}b\u{1b}[2J", "--nope"]), SECONDS);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(!stderr.contains('\u{7}') && !stderr.contains('\u{1b}'), "{stderr:?}");
}
