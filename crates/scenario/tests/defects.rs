//! Scenario files that showed policy defects in the monitor before the
//! policy moved into core's machine, run end to end through the driver
//! (the real monitor over simulated devices, in virtual time). Each file's
//! expectations are the corrected behaviour; the numbers in the names are
//! the defect list of the machine issue.

use railwatch_runtime::lines::Record;
use railwatch_scenario::driver::{self, RunOptions};
use railwatch_scenario::{Scenario, ScenarioError};

const ONE_PORT: &str = r#"
[[device]]
name = "mlx5_0"
ports = [ { port = 1, state = "active", speed = "ndr", width = "4x" } ]
"#;

/// Runs `body` (with the one-port device) and asserts that every
/// expectation held, naming those that did not.
fn assert_holds(head: &str, body: &str) {
    let text = format!("{head}\n{ONE_PORT}\n{body}");
    let scenario = Scenario::parse(&text, "defect.toml").unwrap_or_else(|e| panic!("{e}"));
    let started = std::time::Instant::now();
    let summary = driver::run(&scenario, &RunOptions::default(), |_, _| {}).expect("the run");
    assert!(started.elapsed().as_secs() < 10, "a short scenario ran long");
    assert!(!summary.expectations.is_empty(), "the file checks something");
    let failed: Vec<String> = summary
        .expectations
        .into_iter()
        .filter(|e| !e.passed)
        .map(|e| format!("{} ms {}: {}", e.at_ms, e.rail, e.detail))
        .collect();
    assert!(failed.is_empty(), "{failed:#?}");
}

fn refused(head: &str) -> ScenarioError {
    Scenario::parse(&format!("{head}\n{ONE_PORT}"), "defect.toml").expect_err("refused")
}

#[test]
fn d1_a_damping_hold_that_would_overflow_is_refused_with_its_line() {
    // Before: a valid file whose release time overflowed never ended.
    let e = refused("duration_ms = 5000\n[damping]\nhalf_life_ms = 9223372036854775807\nreuse = 1.0");
    assert_eq!(e.line(), Some(3), "{e}");
    assert!(e.to_string().contains("damping.half_life_ms"), "{e}");
    let e = refused("duration_ms = 5000\ntick_ms = 99999999999");
    assert!(e.to_string().contains("tick_ms"), "{e}");
}

#[test]
fn d3_a_reattached_device_goes_through_the_settle_delay() {
    // DEVICE_FATAL at 100: closed, re-opened at 1.1–1.3 s with the port
    // ACTIVE. With a 1 s settle delay it is paused (settling) first.
    assert_holds(
        "duration_ms = 4000\nsettle_ms = 1000",
        r#"
[[step]]
at_ms = 100
device = "mlx5_0"
event = "device_fatal"

[[expect]]
at_ms = 1400
rail = "mlx5_0/1"
state = "paused"
available = false

[[expect]]
at_ms = 2400
rail = "mlx5_0/1"
state = "active"
available = true
recovered_by = "attach"
"#,
    );
}

#[test]
fn d5_a_bounce_during_the_settle_on_a_poll_only_device_is_noticed() {
    // The fd fails (poll-only); the port goes down at 500 and is found by
    // the tick at 1000; it reads ACTIVE again at 1500 (tick at 2000 starts a
    // settle until 5000); it bounces at 2500 (tick at 3000 sees it down,
    // cancelling the settle) and is back at 3500: the settle restarts at
    // 4000 and ends at 7000, not at the original 5000.
    assert_holds(
        "duration_ms = 9000\nsettle_ms = 3000",
        r#"
[[step]]
at_ms = 100
device = "mlx5_0"
fault = "ebadf"
event = "comm_est"

[[step]]
at_ms = 500
device = "mlx5_0"
port_state = { port = 1, state = "down" }

[[step]]
at_ms = 1500
device = "mlx5_0"
port_state = { port = 1, state = "active" }

[[step]]
at_ms = 2500
device = "mlx5_0"
port_state = { port = 1, state = "down" }

[[step]]
at_ms = 3500
device = "mlx5_0"
port_state = { port = 1, state = "active" }

[[expect]]
at_ms = 5500
rail = "mlx5_0/1"
state = "paused"

[[expect]]
at_ms = 7500
rail = "mlx5_0/1"
state = "active"
recovered_by = "poll"
"#,
    );
}

#[test]
fn d6_a_poll_only_device_learns_a_link_rate_change() {
    assert_holds(
        "duration_ms = 3000",
        r#"
[[step]]
at_ms = 100
device = "mlx5_0"
fault = "ebadf"
event = "comm_est"

[[step]]
at_ms = 500
device = "mlx5_0"
link = { port = 1, speed = "hdr", width = "4x" }

[[expect]]
at_ms = 1600
rail = "mlx5_0/1"
state = "active"
bandwidth_gbps = 200
"#,
    );
}

#[test]
fn d8_port_active_on_a_port_that_reads_down_does_not_activate() {
    assert_holds(
        "duration_ms = 3000",
        r#"
[[step]]
at_ms = 100
device = "mlx5_0"
port_state = { port = 1, state = "down" }
event = "port_err"
port = 1

[[step]]
at_ms = 200
device = "mlx5_0"
event = "port_active"
port = 1

[[expect]]
at_ms = 300
rail = "mlx5_0/1"
state = "paused"
available = false
"#,
    );
}

#[test]
fn d8_a_gid_change_alone_re_reads_the_port() {
    // A deleted netdev under Soft-RoCE loses the PORT_ERR and delivers only
    // GID_CHANGE: the re-read finds the port down.
    assert_holds(
        "duration_ms = 3000",
        r#"
[[step]]
at_ms = 100
device = "mlx5_0"
port_state = { port = 1, state = "down" }
event = "gid_change"
port = 1

[[expect]]
at_ms = 150
rail = "mlx5_0/1"
state = "paused"
available = false
"#,
    );
}

#[test]
fn a_gid_change_bumps_the_generation_only_when_the_table_changed() {
    let text = format!(
        "duration_ms = 1000\n{ONE_PORT}\n{}",
        r#"
[[step]]
at_ms = 0
device = "mlx5_0"
gid = { port = 1, index = 0, address = "fe80::1" }

[[step]]                 # announced: the first table read since attach
at_ms = 50
device = "mlx5_0"
event = "gid_change"
port = 1

[[step]]                 # an IPv6 link-local flutter: nothing changed
at_ms = 100
device = "mlx5_0"
event = "gid_change"
port = 1

[[step]]                 # an IPv4 address added: a new entry
at_ms = 200
device = "mlx5_0"
gid = { port = 1, index = 1, address = "::ffff:10.1.1.1" }
event = "gid_change"
port = 1
"#
    );
    let scenario = Scenario::parse(&text, "gids.toml").unwrap_or_else(|e| panic!("{e}"));
    let mut changes = Vec::new();
    driver::run(&scenario, &RunOptions::default(), |_, record| {
        if let Record::Note(n) = record {
            if let railwatch_runtime::Happening::AddressChanged { generation, .. } = n.what {
                changes.push((n.t.0, generation));
            }
        }
    })
    .expect("the run");
    // The device had no table at attach; the first read after a GID_CHANGE
    // (50 ms) has nothing to compare with and counts as a change. Then the
    // flutter at 100 ms changes nothing, and the new entry at 200 ms does.
    assert_eq!(changes, [(50, 2), (200, 3)]);
    // It round-trips through to_toml.
    let again = Scenario::parse(&scenario.to_toml(), "gids.toml").unwrap();
    assert_eq!(again.steps[2].gid, scenario.steps[2].gid);
    assert_eq!(Scenario::parse(&text.replace("::ffff:10.1.1.1", "10.1.1"), "x.toml").unwrap_err().line(), Some(28));
}

/// Damping written with dotted keys or inline is the same TOML as a
/// `[damping]` table: accepted, and a bad value is named at its line.
#[test]
fn damping_as_dotted_keys_or_inline_is_read_like_a_table() {
    for head in ["duration_ms = 1000\ndamping.reuse = 500.0", "duration_ms = 1000\ndamping = { reuse = 500.0 }"] {
        let s = Scenario::parse(&format!("{head}\n{ONE_PORT}"), "d.toml").unwrap_or_else(|e| panic!("{head:?}: {e}"));
        assert_eq!(s.config.machine.damping.map(|d| d.reuse), Some(500.0), "{head:?}");
    }
    let e = refused("duration_ms = 1000\n\ndamping.reuse = 5000.0");
    assert_eq!(e.line(), Some(3), "{e}");
    assert!(e.to_string().contains("damping.reuse"), "{e}");
}

/// A port's GID table declared at the start (`gids`, as a recording
/// writes it) is there at attach: a GID_CHANGE that changes nothing bumps
/// nothing (without the declaration the first read would count as a
/// change), and a real change does. `audit_ms` reaches the monitor: a port
/// that goes down silently is paused within the period. Both round-trip.
#[test]
fn gids_declared_at_the_start_and_the_audit_period_are_honoured() {
    let text = r#"
duration_ms = 2000
audit_ms = 300

[[device]]
name = "mlx5_0"
ports = [
    { port = 1, gids = [{ index = 0, address = "fe80::1" }] },
    { port = 2 },
]

[[step]]
at_ms = 50
device = "mlx5_0"
event = "gid_change"
port = 1

[[step]]
at_ms = 100
device = "mlx5_0"
gid = { port = 1, index = 0, address = "fe80::2" }
event = "gid_change"
port = 1

[[step]]
at_ms = 400
device = "mlx5_0"
port_state = { port = 2, state = "down" }
"#;
    let scenario = Scenario::parse(text, "start.toml").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(scenario.config.machine.audit_ms, Some(300));
    let mut changes = Vec::new();
    let mut paused = None;
    driver::run(&scenario, &RunOptions::default(), |names, record| {
        if let Record::Note(n) = record {
            match n.what {
                railwatch_runtime::Happening::AddressChanged { generation, .. } => changes.push((n.t.0, generation)),
                railwatch_runtime::Happening::Transition { rail, to: railwatch_core::RailState::Paused, .. }
                    if names.rail(rail) == "mlx5_0/2" =>
                {
                    paused.get_or_insert(n.t.0);
                }
                _ => {}
            }
        }
    })
    .expect("the run");
    assert_eq!(changes, [(100, 2)], "only the real change bumps");
    assert_eq!(paused, Some(600), "the audit at 600 ms sees the port down");
    let again = Scenario::parse(&scenario.to_toml(), "start.toml").unwrap();
    assert_eq!(
        (again.config.machine.audit_ms, &again.devices[0].gids),
        (scenario.config.machine.audit_ms, &scenario.devices[0].gids)
    );
    let bad = text.replace("address = \"fe80::1\"", "address = \"10.1\"");
    assert_eq!(Scenario::parse(&bad, "x.toml").unwrap_err().line(), Some(8));
}

/// A file cut off after `key =` (a recording cut by a full disk, a
/// truncated copy) is refused with a message, not an empty one.
#[test]
fn a_file_cut_off_after_a_key_says_so() {
    for text in
        ["duration_ms =", "duration_ms = 100\n[[device]]\nname = \"a\"\nports = [{ port = 1 }]\n[[step]]\nat_ms ="]
    {
        let e = Scenario::parse(text, "cut.toml").unwrap_err();
        assert!(e.message().contains("cut off"), "{e}");
        assert_eq!(e.line(), Some(text.lines().count()), "{e}");
    }
}

/// An unplug and a plug in one instant are a device leaving and a new one
/// of the same name coming (as two uevents are), not nothing: the rail goes
/// inert and comes back with a new generation, as it does 1 ms apart.
#[test]
fn an_unplug_and_a_plug_in_one_instant_are_a_new_device() {
    use railwatch_runtime::Happening;
    for plug_at in [1000, 1001] {
        let text = format!(
            "duration_ms = 3000\n{ONE_PORT}\n[[step]]\nat_ms = 1000\ndevice = \"mlx5_0\"\nfault = \"unplug\"\n\n\
             [[step]]\nat_ms = {plug_at}\ndevice = \"mlx5_0\"\nfault = \"plug\"\n"
        );
        let scenario = Scenario::parse(&text, "replug.toml").unwrap_or_else(|e| panic!("{e}"));
        let mut seen = Vec::new();
        driver::run(&scenario, &RunOptions::default(), |_, record| {
            if let Record::Note(n) = record {
                if let Happening::Transition { to, cause, generation, .. } = n.what {
                    let cause = cause.name();
                    seen.push(format!("{} {} {cause} g{generation}", n.t.0, to.name()));
                }
            }
        })
        .expect("the run");
        assert_eq!(
            seen,
            ["0 active attach g1", "1000 inert device_removed g1", &format!("{plug_at} active attach g2")],
            "plug at {plug_at}"
        );
    }
}

/// The simulator's held context stays dead after `restore`, as the
/// kernel's does: a poll-only device removed and restored between two
/// ticks is noticed at the next one (its query fails: closed, re-opened,
/// attached anew with a new generation). Before, the old handle answered
/// again and the removal went unseen, its generation kept.
#[test]
fn a_poll_only_device_removed_and_restored_between_ticks_is_noticed() {
    assert_holds(
        "duration_ms = 5000\nreopen_initial_ms = 100",
        r#"
[[step]]
at_ms = 100
device = "mlx5_0"
fault = "eio"
event = "comm_est"

[[step]]
at_ms = 500
device = "mlx5_0"
fault = "remove"

[[step]]
at_ms = 600
device = "mlx5_0"
fault = "restore"

[[expect]]
at_ms = 4000
rail = "mlx5_0/1"
state = "active"
recovered_by = "attach"
generation = 2
"#,
    );
}

#[test]
fn the_first_attach_with_require_address_does_not_wait_the_settle_delay() {
    // Before: the address answer went through the settle delay, so a rail
    // with its address at start waited `settle_ms` (CONFIG.md: the first
    // attach never does). A later recovery still waits.
    assert_holds(
        "duration_ms = 5000\nsettle_ms = 1000\nrequire_address = \"any\"",
        r#"
[[device]]
name = "rxe0"
ports = [ { port = 1, state = "active", speed = "ndr", width = "1x", gids = [{ index = 0, address = "fe80::1" }] } ]

[[expect]]
at_ms = 100
rail = "rxe0/1"
state = "active"
available = true
recovered_by = "attach"

[[step]]
at_ms = 1000
device = "rxe0"
port_state = { port = 1, state = "down" }
event = "port_err"
port = 1

[[step]]
at_ms = 2000
device = "rxe0"
port_state = { port = 1, state = "active" }
event = "port_active"
port = 1

[[expect]]
at_ms = 2500
rail = "rxe0/1"
state = "paused"
reason = "settling"

[[expect]]
at_ms = 3500
rail = "rxe0/1"
state = "active"
available = true
"#,
    );
}
