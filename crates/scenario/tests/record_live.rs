//! Recordings of a live monitor replay as it ran: each test hands a
//! recorder the inputs `watch` hands it (wake-ups and timer runs included)
//! for an incident the fake libibverbs showed in `crates/cli/tests/record.rs`,
//! replays the recording and compares the transitions with the live run's.
//! On a real host, unlike `simulate --record`, wake-ups of one millisecond
//! are apart and the timers' queries may run late.

use std::path::Path;

use railwatch_core::{
    AsyncEvent, Element, Errno, EventKind, Gid, GidType, LinkAttrs, LinkLayer, Millis, PortAddress, PortState,
};
use railwatch_runtime::Observed;
use railwatch_runtime::lines::Record;
use railwatch_scenario::Scenario;
use railwatch_scenario::driver::{self, RunOptions};
use railwatch_scenario::record::{RecordOptions, Recorder};

/// A recorder for `settings` (a scenario's top-level keys) writing `path`,
/// real-time (as `watch --record`), that has seen device 0 (`mlx5_0`, one
/// port, ACTIVE, NDR 4x, with the address `gid` if any) attach at 0 ms.
fn attached(path: &Path, settings: &str, gid: Option<u8>) -> Recorder {
    let sc = Scenario::parse(&format!("duration_ms = 1\n{settings}\n"), "settings.toml").unwrap();
    let opts = RecordOptions {
        recorded_by: "a test".into(),
        name: "recorded".into(),
        description: None,
        config: sc.config.clone(),
        notes: vec![],
        anonymize: false,
    };
    let mut r = Recorder::create(path, &opts).unwrap();
    let at = Millis(0);
    r.observe(at, Observed::Attached { device: 0, name: "mlx5_0", ports: &[1] });
    r.observe(
        at,
        Observed::Input(&railwatch_core::Input::PortState {
            device: 0,
            port: 1,
            answer: Ok(PortState::Active),
            carrier: None,
        }),
    );
    r.observe(
        at,
        Observed::Input(&railwatch_core::Input::Link { device: 0, port: 1, answer: Ok(LinkAttrs::new(128, 2)) }),
    );
    address(&mut r, 0, gid);
    r.started();
    r.flush(at).unwrap();
    r
}

/// An address read of port 1 at `t`: the GID `fe80::N` at index 0, or
/// none on a device that reads none.
fn address(r: &mut Recorder, t: u64, gid: Option<u8>) {
    let Some(n) = gid else {
        r.observe(
            Millis(t),
            Observed::Input(&railwatch_core::Input::Address { device: 0, port: 1, answer: Err(Errno::EOPNOTSUPP) }),
        );
        return;
    };
    let mut raw = [0u8; 16];
    raw[0] = 0xfe;
    raw[1] = 0x80;
    raw[15] = n;
    let address = PortAddress {
        link_layer: Some(LinkLayer::Ethernet),
        lid: 0,
        gids: vec![Gid { index: 0, raw, kind: GidType::RoceV2 }],
        netdev: None,
    };
    r.observe(
        Millis(t),
        Observed::Input(&railwatch_core::Input::Address {
            device: 0,
            port: 1,
            answer: Ok(std::borrow::Cow::Borrowed(&address)),
        }),
    );
}

/// A wake-up at `t` that reads `kind` for port 1 (or device-wide).
fn event(r: &mut Recorder, t: u64, kind: EventKind) {
    r.observe(Millis(t), Observed::Woke);
    let element = if kind == EventKind::DeviceSpeedChange { Element::None } else { Element::Port(1) };
    r.observe(
        Millis(t),
        Observed::Input(&railwatch_core::Input::Event { device: 0, event: AsyncEvent::new(kind.code(), element) }),
    );
}

fn port(r: &mut Recorder, t: u64, state: PortState) {
    r.observe(
        Millis(t),
        Observed::Input(&railwatch_core::Input::PortState { device: 0, port: 1, answer: Ok(state), carrier: None }),
    );
}

/// Ends the recording at `t` and replays it: its transitions
/// (`rail from->to cause gN`) and the recording.
fn replayed(mut r: Recorder, path: &Path, t: u64) -> (Vec<String>, String) {
    let snapshot = railwatch_runtime::Snapshot {
        t: Millis(t),
        rails: vec![],
        devices: vec![],
        wakeups: 0,
        ticks: 0,
        notifications_dropped: 0,
    };
    r.flush(Millis(t)).unwrap();
    r.finish(Millis(t), &snapshot).unwrap();
    let text = std::fs::read_to_string(path).unwrap();
    let sc = Scenario::load(path).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let mut out = Vec::new();
    driver::run(&sc, &RunOptions::default(), |names, record| {
        let Record::Note(n) = record else { return };
        if let railwatch_runtime::Happening::Transition { rail, from, to, cause, generation } = n.what {
            out.push(format!("{} {}->{} {} g{generation}", names.rail(rail), from.name(), to.name(), cause.name()));
        }
    })
    .unwrap();
    (out, text)
}

/// What the live run did in the two link-ups below: a flap, and the GID
/// change after the activation bumping the generation once more.
const LINK_UP_WITH_A_GID_BUMP: [&str; 4] = [
    "mlx5_0/1 inert->active attach g1",
    "mlx5_0/1 active->paused port_err g1",
    "mlx5_0/1 paused->active event g2",
    "mlx5_0/1 active->active gid_change g3",
];

/// A RoCE link-up: PORT_ACTIVE read, the activation's address read finds
/// the old GID, and the GID changes and GID_CHANGE is read in a second
/// wake-up of the same millisecond: the live run bumps the generation.
/// The GID change was placed in that millisecond, where the replay's
/// activation (which reads the instant at once) already read it, and the
/// bump was lost (3 of 20 random `watch --record` incidents). A drain step
/// now goes before the second wake-up's steps.
#[test]
fn a_gid_change_read_in_a_second_wake_up_of_its_millisecond_keeps_its_bump() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.toml");
    let mut r = attached(&path, "tick_ms = 50", Some(1));
    event(&mut r, 515, EventKind::PortErr);
    event(&mut r, 581, EventKind::PortActive);
    port(&mut r, 581, PortState::Active);
    r.observe(
        Millis(581),
        Observed::Input(&railwatch_core::Input::Link { device: 0, port: 1, answer: Ok(LinkAttrs::new(128, 2)) }),
    );
    address(&mut r, 581, Some(1));
    event(&mut r, 581, EventKind::GidChange);
    address(&mut r, 581, Some(0xad));
    port(&mut r, 581, PortState::Active);
    let (replayed, text) = replayed(r, &path, 2000);
    assert_eq!(replayed, LINK_UP_WITH_A_GID_BUMP, "{text}");
}

/// The same link-up with PORT_ACTIVE and GID_CHANGE read in one drain (the
/// GID changed while the monitor handled PORT_ACTIVE, 1 of 40 random
/// `watch --record` incidents): the drain step goes just before the
/// GID_CHANGE, after the PORT_ACTIVE whose address read found the old GID.
#[test]
fn a_gid_change_read_in_the_drain_of_its_port_active_keeps_its_bump() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.toml");
    let mut r = attached(&path, "tick_ms = 50", Some(1));
    event(&mut r, 1144, EventKind::PortErr);
    port(&mut r, 1190, PortState::Down);
    event(&mut r, 1422, EventKind::PortActive);
    port(&mut r, 1422, PortState::Active);
    r.observe(
        Millis(1422),
        Observed::Input(&railwatch_core::Input::Link { device: 0, port: 1, answer: Ok(LinkAttrs::new(128, 2)) }),
    );
    address(&mut r, 1422, Some(1));
    let gid_change = AsyncEvent::new(EventKind::GidChange.code(), Element::Port(1));
    r.observe(Millis(1422), Observed::Input(&railwatch_core::Input::Event { device: 0, event: gid_change }));
    address(&mut r, 1422, Some(0xd));
    port(&mut r, 1422, PortState::Active);
    let (replayed, text) = replayed(r, &path, 2000);
    assert_eq!(replayed, LINK_UP_WITH_A_GID_BUMP, "{text}");
    let drain = "drain = true\n\n[[step]]\nat_ms = 1422\ndevice = \"mlx5_0\"\nevent = \"gid_change\"";
    assert!(text.contains(drain), "{text}");
}

/// PORT_ERR read, no query of the port until PORT_ACTIVE's 51 ms later
/// (the tick, due a millisecond before it, ran late, after it, and found
/// the rail active): the query read ACTIVE, as before the PORT_ERR, so no
/// change was recorded, and the replay's tick, on time, found the port
/// ACTIVE and recovered the rail by poll before the event. The port now
/// goes down at the PORT_ERR and up where the PORT_ACTIVE is read (an
/// event's query is on time: no slack).
#[test]
fn a_port_err_then_a_port_active_with_no_query_between_is_a_flap_in_the_replay() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.toml");
    let mut r = attached(&path, "tick_ms = 50", None);
    event(&mut r, 1275, EventKind::PortErr);
    event(&mut r, 1326, EventKind::PortActive);
    port(&mut r, 1326, PortState::Active);
    r.observe(
        Millis(1326),
        Observed::Input(&railwatch_core::Input::Link { device: 0, port: 1, answer: Ok(LinkAttrs::new(128, 2)) }),
    );
    r.observe(Millis(1326), Observed::Timers);
    let (replayed, text) = replayed(r, &path, 2000);
    let live =
        ["mlx5_0/1 inert->active attach g1", "mlx5_0/1 active->paused port_err g1", "mlx5_0/1 paused->active event g2"];
    assert_eq!(replayed, live, "{text}");
}

/// The timers' queries still get the slack: a tick that ran 20 ms late
/// found the port ACTIVE after a PORT_ERR; the replay's tick, on time,
/// finds it too (the recovery comes at the tick's due time, by poll).
#[test]
fn a_late_tick_s_change_is_placed_before_the_replays_tick() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.toml");
    let mut r = attached(&path, "tick_ms = 100", None);
    event(&mut r, 250, EventKind::PortErr);
    port(&mut r, 250, PortState::Down);
    r.observe(Millis(320), Observed::Woke);
    r.observe(Millis(320), Observed::Timers);
    port(&mut r, 320, PortState::Active);
    let (replayed, text) = replayed(r, &path, 1000);
    assert_eq!(replayed.len(), 3, "{text}");
    assert_eq!(replayed[2], "mlx5_0/1 paused->active poll g2", "{text}");
    assert!(text.contains("at_ms = 270\ndevice = \"mlx5_0\"\nport_state = { port = 1, state = \"active\" }"), "{text}");
}
