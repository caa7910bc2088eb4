//! The recorder against the simulator: every built-in scenario is run with
//! a [`Recorder`] watching the monitor's inputs, and the recording, replayed,
//! must give the same transitions (rail, from, to, cause, generation) in
//! the same order, and pass its own closing expectations. The recorder's
//! file must be a valid scenario after every flush.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use railwatch_core::Millis;
use railwatch_runtime::Happening;
use railwatch_runtime::lines::{Names, Record};
use railwatch_scenario::Scenario;
use railwatch_scenario::driver::{self, RunOptions};
use railwatch_scenario::record::{RecordOptions, Recorder};

fn builtins() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../cli/scenarios");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "the built-in scenarios in {}", dir.display());
    files
}

fn options(sc: &Scenario, anonymize: bool) -> RecordOptions {
    RecordOptions {
        recorded_by: "a test".into(),
        name: "recorded".into(),
        description: None,
        config: sc.config.clone(),
        notes: vec!["a note".into()],
        anonymize,
    }
}

/// A recorder writing `path` under the default config that has seen the
/// monitor attach device 0 (`mlx5_0`, one port) and read its port ACTIVE
/// at 0 ms.
fn recorder_of_one_active_port(path: &Path) -> Recorder {
    use railwatch_core::PortState;
    use railwatch_runtime::Observed;
    let sc = Scenario::parse("duration_ms = 1\n[[device]]\nname = \"x\"\nports = [{ port = 1 }]\n", "x").unwrap();
    let mut r = Recorder::create(path, &options(&sc, false)).unwrap();
    r.observe(Millis(0), Observed::Attached { device: 0, name: "mlx5_0", ports: &[1] });
    r.observe(
        Millis(0),
        Observed::Input(&railwatch_core::Input::PortState {
            device: 0,
            port: 1,
            answer: Ok(PortState::Active),
            carrier: None,
        }),
    );
    r
}

/// The snapshot `finish` is given at `t` when no rail's end state matters.
fn no_rails(t: u64) -> railwatch_runtime::Snapshot {
    railwatch_runtime::Snapshot {
        t: Millis(t),
        rails: vec![],
        devices: vec![],
        wakeups: 0,
        ticks: 0,
        notifications_dropped: 0,
    }
}

fn transition_line(names: &Names, record: &Record<'_>) -> Option<String> {
    let Record::Note(n) = record else { return None };
    let Happening::Transition { rail, from, to, cause, generation } = n.what else { return None };
    let cause = cause.name();
    Some(format!("{} {}->{} {cause} g{generation}", names.rail(rail), from.name(), to.name()))
}

/// Runs `sc` with a recorder flushing at every instant; returns the
/// transitions and the recording's path.
fn record(sc: &Scenario, dir: &Path, anonymize: bool) -> (Vec<String>, PathBuf) {
    let path = dir.join(format!("{}.toml", sc.name));
    let recorder = Arc::new(Mutex::new(Recorder::create(&path, &options(sc, anonymize)).unwrap()));
    let observer: railwatch_runtime::Observer = {
        let r = recorder.clone();
        Box::new(move |now: Millis, what: railwatch_runtime::Observed<'_>| r.lock().unwrap().observe(now, what))
    };
    let mut live = Vec::new();
    let mut last_flush = None;
    let summary = driver::run_observed(sc, &RunOptions::default(), Some(observer), |names, record| {
        if let Some(line) = transition_line(names, &record) {
            live.push(line);
        }
        if let Record::Note(n) = record {
            // Flush as time moves, and check the file is whole each time.
            if last_flush != Some(n.t) {
                last_flush = Some(n.t);
                recorder.lock().unwrap().flush(n.t).unwrap();
            }
        }
    })
    .unwrap();
    let mut r = recorder.lock().unwrap();
    r.flush(summary.snapshot.t).unwrap();
    Scenario::load(&path).unwrap_or_else(|e| panic!("{}: a flushed recording does not parse: {e}", sc.name));
    r.finish(summary.snapshot.t, &summary.snapshot).unwrap();
    (live, path)
}

fn replay(path: &Path) -> (Vec<String>, usize, Vec<String>) {
    let sc = Scenario::load(path).unwrap_or_else(|e| panic!("{e}\n{}", std::fs::read_to_string(path).unwrap()));
    let mut replayed = Vec::new();
    let summary = driver::run(&sc, &RunOptions::default(), |names, record| {
        replayed.extend(transition_line(names, &record));
    })
    .unwrap();
    let failed: Vec<_> = summary.expectations.iter().filter(|e| !e.passed).map(|e| e.detail.clone()).collect();
    (replayed, summary.expectations.len(), failed)
}

#[test]
fn every_builtin_scenario_replays_from_its_recording() {
    let dir = tempfile::tempdir().unwrap();
    for file in builtins() {
        let sc = Scenario::load(&file).unwrap();
        let (live, path) = record(&sc, dir.path(), false);
        let (replayed, expectations, failed) = replay(&path);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(replayed, live, "{}: the replay differs; recording:\n{text}", file.display());
        assert!(failed.is_empty(), "{}: expectations failed: {failed:?}\n{text}", file.display());
        let rails: usize = sc.devices.iter().map(|d| d.ports.len()).sum();
        assert_eq!(expectations, rails, "{}: one closing expectation per rail", file.display());
    }
}

#[test]
fn an_anonymized_recording_replays_under_new_names() {
    let dir = tempfile::tempdir().unwrap();
    for file in builtins() {
        let sc = Scenario::load(&file).unwrap();
        let (live, path) = record(&sc, dir.path(), true);
        let text = std::fs::read_to_string(&path).unwrap();
        for d in &sc.devices {
            assert!(!text.contains(&format!("\"{}\"", d.name)), "{}: {} is named:\n{text}", file.display(), d.name);
        }
        let renamed: Vec<String> = live
            .iter()
            .map(|l| {
                let (rail, rest) = l.split_once('/').unwrap();
                let idx = sc.devices.iter().position(|d| d.name == rail).unwrap();
                format!("dev{idx}/{rest}")
            })
            .collect();
        let (replayed, _, failed) = replay(&path);
        assert_eq!(replayed, renamed, "{}", file.display());
        assert!(failed.is_empty(), "{}: expectations failed: {failed:?}", file.display());
    }
}

#[test]
fn a_change_a_query_saw_is_placed_before_the_replays_query() {
    use railwatch_core::{AsyncEvent, Element, EventKind, LinkAttrs, PortState};
    use railwatch_runtime::Observed;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.toml");
    let mut r = recorder_of_one_active_port(&path);
    let at = |t| Millis(t);
    r.observe(
        at(0),
        Observed::Input(&railwatch_core::Input::Link { device: 0, port: 1, answer: Ok(LinkAttrs::new(128, 2)) }),
    );
    let err = AsyncEvent::new(EventKind::PortErr.code(), Element::Port(1));
    r.observe(at(500), Observed::Input(&railwatch_core::Input::Event { device: 0, event: err }));
    // The tick a second later (late by 2 ms) reads DOWN: after the
    // PORT_ERR, placed with it; the one after reads DOWN again: nothing.
    // (The timers' queries, which a busy host runs late.)
    let tick = |r: &mut Recorder, t: u64, state| {
        r.observe(at(t), Observed::Woke);
        r.observe(at(t), Observed::Timers);
        r.observe(
            at(t),
            Observed::Input(&railwatch_core::Input::PortState { device: 0, port: 1, answer: Ok(state), carrier: None }),
        );
    };
    tick(&mut r, 1502, PortState::Down);
    tick(&mut r, 2500, PortState::Down);
    // Two queries 10 ms apart, the second sees ACTIVE: right after the first.
    tick(&mut r, 2510, PortState::Active);
    // A burst in one instant is one step.
    let comm_est = AsyncEvent::new(EventKind::CommEst.code(), Element::Object(railwatch_core::ObjectHandle(0xdead)));
    for _ in 0..5 {
        r.observe(at(3000), Observed::Input(&railwatch_core::Input::Event { device: 0, event: comm_est }));
    }
    r.flush(at(1000)).unwrap();
    let early = std::fs::read_to_string(&path).unwrap();
    assert!(early.contains("event = \"port_err\"") && early.contains("port_state"), "{early}");
    r.flush(at(4000)).unwrap();
    let sc = Scenario::load(&path).unwrap();
    let steps: Vec<(u64, String)> = sc
        .steps
        .iter()
        .map(|s| {
            let what = match (s.port_state, s.event) {
                (Some(p), _) => format!("{}", p.state),
                (None, Some(e)) => format!("{}x{}", e.event.kind().name(), e.repeat),
                _ => "?".into(),
            };
            (s.at_ms, what)
        })
        .collect();
    assert_eq!(
        steps,
        [(500, "port_errx1".into()), (500, "down".into()), (2501, "active".into()), (3000, "comm_estx5".into())]
            .map(|(t, w): (u64, String)| (t, w)),
    );
    assert_eq!(sc.steps[3].event.unwrap().event.element, Element::Object(railwatch_core::ObjectHandle(1)));
    assert_eq!(sc.duration_ms, 4000);
}

mod arbitrary_inputs {
    //! Whatever a monitor hands the recorder (any event code and element,
    //! any answer or error, devices attached, removed and re-attached, at
    //! any non-decreasing times, flushed at any moments), the file parses
    //! after every flush and after the finish, and every step is within
    //! `duration_ms`.

    use proptest::prelude::*;
    use railwatch_core::{
        AsyncEvent, Element, Errno, Gid, GidType, LinkAttrs, LinkLayer, Millis, ObjectHandle, PortAddress, PortState,
    };
    use railwatch_runtime::Observed;
    use railwatch_scenario::Scenario;
    use railwatch_scenario::record::{RecordOptions, Recorder};

    #[derive(Debug, Clone)]
    enum In {
        Attach(u32, u8),
        Removed(u32),
        Event(u32, u32, u8),
        ReadError(u32, i32),
        HungUp(u32),
        Reopened(u32, bool),
        PortState(u32, u8, Option<u32>),
        Link(u32, u8, u32, u8, Option<u64>),
        Address(u32, u8, Option<(u16, u8, u8)>),
        Flush,
    }

    fn input() -> impl Strategy<Value = (u64, In)> {
        let dev = 0u32..3;
        let port = 0u8..4;
        let what = prop_oneof![
            (dev.clone(), 1u8..4).prop_map(|(d, n)| In::Attach(d, n)),
            dev.clone().prop_map(In::Removed),
            (dev.clone(), prop_oneof![0u32..24, Just(65535), any::<u32>()], 0u8..5)
                .prop_map(|(d, c, e)| In::Event(d, c, e)),
            (dev.clone(), prop_oneof![Just(5), Just(9), Just(19), any::<i32>()]).prop_map(|(d, e)| In::ReadError(d, e)),
            dev.clone().prop_map(In::HungUp),
            (dev.clone(), any::<bool>()).prop_map(|(d, ok)| In::Reopened(d, ok)),
            (dev.clone(), port.clone(), proptest::option::of(0u32..9)).prop_map(|(d, p, s)| In::PortState(d, p, s)),
            (dev.clone(), port.clone(), 0u32..300, 0u8..40, proptest::option::of(0u64..5000))
                .prop_map(|(d, p, s, w, e)| In::Link(d, p, s, w, e)),
            (dev, port, proptest::option::of((0u16..3, 0u8..3, 0u8..3))).prop_map(|(d, p, a)| In::Address(d, p, a)),
            Just(In::Flush),
        ];
        (0u64..2000, what)
    }

    fn feed(r: &mut Recorder, t: u64, what: &In, attached: &mut Vec<u8>) {
        let now = Millis(t);
        match *what {
            In::Attach(d, n) => {
                // Indices come in order, as the monitor gives them.
                let d = (d as usize).min(attached.len());
                if d == attached.len() {
                    attached.push(n);
                }
                let ports: Vec<u8> = (1..=attached[d]).collect();
                r.observe(now, Observed::Attached { device: d as u32, name: &format!("dev_{d}"), ports: &ports });
            }
            In::Removed(d) => r.observe(now, Observed::Left { device: d }),
            In::Event(d, code, e) => {
                let element = match e {
                    0 => Element::None,
                    1 => Element::Object(ObjectHandle(u64::MAX - u64::from(code))),
                    p => Element::Port(u32::from(p - 1)),
                };
                r.observe(
                    now,
                    Observed::Input(&railwatch_core::Input::Event { device: d, event: AsyncEvent::new(code, element) }),
                );
            }
            In::ReadError(d, e) => {
                r.observe(now, Observed::Input(&railwatch_core::Input::ReadError { device: d, errno: Errno(e) }))
            }
            In::HungUp(d) => r.observe(now, Observed::Input(&railwatch_core::Input::HungUp { device: d })),
            In::Reopened(d, ok) => r.observe(
                now,
                Observed::Input(&railwatch_core::Input::Reopened {
                    device: d,
                    result: if ok { Ok(()) } else { Err(Errno(19)) },
                }),
            ),
            In::PortState(d, p, s) => {
                let answer = s.map(PortState::from_code).ok_or(Errno(19));
                r.observe(
                    now,
                    Observed::Input(&railwatch_core::Input::PortState { device: d, port: p, answer, carrier: None }),
                );
            }
            In::Link(d, p, speed, width, eff) => {
                let link = LinkAttrs {
                    active_speed: speed as u8,
                    active_width: width,
                    active_speed_ex: speed,
                    effective_100mbps: eff,
                };
                r.observe(now, Observed::Input(&railwatch_core::Input::Link { device: d, port: p, answer: Ok(link) }));
            }
            In::Address(d, p, a) => {
                let address = a.map(|(lid, g, nd)| PortAddress {
                    link_layer: Some(LinkLayer::Ethernet),
                    lid,
                    gids: (0..g)
                        .map(|i| Gid { index: u32::from(i), raw: [i + 1; 16], kind: GidType::RoceV2 })
                        .collect(),
                    netdev: (nd > 0).then(|| format!("eth{nd}")),
                });
                let answer = address.as_ref().ok_or(if p == 0 { Errno::EOPNOTSUPP } else { Errno(5) });
                r.observe(
                    now,
                    Observed::Input(&railwatch_core::Input::Address {
                        device: d,
                        port: p,
                        answer: answer.map(std::borrow::Cow::Borrowed),
                    }),
                );
            }
            In::Flush => {}
        }
    }

    proptest! {
        #[test]
        fn the_file_parses_after_every_flush(mut inputs in proptest::collection::vec(input(), 1..60), anonymize: bool) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("r.toml");
            let opts = RecordOptions {
                recorded_by: "a test".into(),
                name: "r".into(), description: None, config: Default::default(), notes: vec![], anonymize,
            };
            let mut r = Recorder::create(&path, &opts).unwrap();
            inputs.sort_by_key(|(t, _)| *t);
            let mut attached = Vec::new();
            // The monitor attaches its first device before anything else.
            feed(&mut r, 0, &In::Attach(0, 2), &mut attached);
            feed(&mut r, 0, &In::PortState(0, 1, Some(4)), &mut attached);
            for (t, what) in &inputs {
                feed(&mut r, *t, what, &mut attached);
                if matches!(what, In::Flush) {
                    r.flush(Millis(*t)).unwrap();
                    let sc = Scenario::load(&path);
                    prop_assert!(sc.is_ok(), "after a flush at {t}: {}\n{}", sc.unwrap_err(), std::fs::read_to_string(&path).unwrap());
                }
            }
            let end = inputs.last().map_or(0, |(t, _)| *t) + 1;
            r.finish(Millis(end), &super::no_rails(end)).unwrap();
            let sc = Scenario::load(&path);
            prop_assert!(sc.is_ok(), "after the finish: {}\n{}", sc.as_ref().unwrap_err(), std::fs::read_to_string(&path).unwrap());
            let sc = sc.unwrap();
            prop_assert!(sc.steps.iter().all(|s| s.at_ms <= sc.duration_ms));
        }
    }
}

/// A device that is not in the host's list at the start (`present =
/// false`) appears with its `plug` step: the monitor attaches it then, its
/// rails are named from then on, and a recording of the run declares it
/// the same way and replays the same.
#[test]
fn a_device_that_appears_later_is_recorded_and_replayed() {
    let text = r#"
duration_ms = 3000

[[device]]
name = "mlx5_0"
ports = [{ port = 1 }]

[[device]]
name = "rxe1"
present = false
ports = [{ port = 1, state = "down", speed = "sdr", width = "1x" }]

[[step]]
at_ms = 500
device = "rxe1"
fault = "plug"

[[step]]
at_ms = 1200
device = "rxe1"
port_state = { port = 1, state = "active" }
event = "port_active"
port = 1

[[expect]]
at_ms = 400
rail = "mlx5_0/1"
state = "active"

[[expect]]
at_ms = 2000
rail = "rxe1/1"
state = "active"
recovered_by = "event"
"#;
    let sc = Scenario::parse(text, "later.toml").unwrap_or_else(|e| panic!("{e}"));
    assert!(!sc.devices[1].present);
    assert!(!Scenario::parse(&sc.to_toml(), "later.toml").unwrap().devices[1].present);
    let mut lines = Vec::new();
    let summary =
        driver::run(&sc, &RunOptions::default(), |names, record| lines.extend(transition_line(names, &record)))
            .unwrap();
    assert_eq!(summary.failed(), 0, "{:?}", summary.expectations);
    assert_eq!(
        lines,
        [
            "mlx5_0/1 inert->active attach g1",
            "rxe1/1 inert->paused port_not_active g1",
            "rxe1/1 paused->active event g2"
        ]
        .map(String::from)
        .to_vec(),
        "the attach at 500 ms paused the rail, PORT_ACTIVE brought it back"
    );
    let dir = tempfile::tempdir().unwrap();
    let (live, path) = record(&sc, dir.path(), false);
    let recording = std::fs::read_to_string(&path).unwrap();
    assert!(recording.contains("present = false"), "{recording}");
    let (replayed, _, failed) = replay(&path);
    assert_eq!(replayed, live, "{recording}");
    assert!(failed.is_empty(), "{failed:?}\n{recording}");
}

/// A recording stops short of the loader's 16 MiB limit, says so, and
/// still loads: a host that flaps for days cannot make a file `simulate`
/// refuses.
#[test]
fn a_recording_stops_before_the_file_limit_and_still_loads() {
    use railwatch_core::{AsyncEvent, Element, EventKind, PortState};
    use railwatch_runtime::Observed;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.toml");
    let mut r = recorder_of_one_active_port(&path);
    let err = AsyncEvent::new(EventKind::PortErr.code(), Element::Port(1));
    let mut t = 1;
    while r.stopped().is_none() {
        for state in [PortState::Down, PortState::Active] {
            r.observe(Millis(t), Observed::Input(&railwatch_core::Input::Event { device: 0, event: err }));
            r.observe(
                Millis(t),
                Observed::Input(&railwatch_core::Input::PortState {
                    device: 0,
                    port: 1,
                    answer: Ok(state),
                    carrier: None,
                }),
            );
            t += 1;
        }
        if t % 10_000 == 1 {
            r.flush(Millis(t)).unwrap();
        }
        assert!(t < 2_000_000, "never stopped");
    }
    r.flush(Millis(t + 1000)).unwrap();
    r.finish(Millis(t + 2000), &no_rails(t + 2000)).unwrap();
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(size < railwatch_scenario::scenario::MAX_FILE_BYTES, "{size} bytes");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("# recording stopped: the file is near the 16 MiB scenario limit"));
    // The end state is not expected: the steps after the stop are missing.
    assert!(text.contains("# no [[expect]]: the recording stopped before the end"));
    assert!(!text.contains("[[expect]]\n"));
    let loaded = Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert!(loaded.steps.len() > 100_000, "{} steps", loaded.steps.len());
}

/// A recording may last exactly the 7-day limit and still ends cleanly;
/// one that goes past it stops at 7 days and expects nothing.
#[test]
fn a_recording_stops_only_past_seven_days() {
    use railwatch_scenario::scenario::MAX_DURATION_MS;
    let dir = tempfile::tempdir().unwrap();
    for (end, stops) in [(MAX_DURATION_MS, false), (MAX_DURATION_MS + 1, true)] {
        let path = dir.path().join(format!("{end}.toml"));
        let mut r = recorder_of_one_active_port(&path);
        r.flush(Millis(0)).unwrap();
        r.finish(Millis(end), &no_rails(end)).unwrap();
        assert_eq!(r.stopped().is_some_and(|why| why.contains("7 days")), stops, "{end}: {:?}", r.stopped());
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.contains("# recording stopped: 7 days"), stops, "{end}: {text}");
        assert_eq!(text.contains("# no [[expect]]"), stops, "{end}: {text}");
        let loaded = Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(loaded.duration_ms, MAX_DURATION_MS);
    }
}

/// A port that went DOWN while a `DEVICE_FATAL` kept its device closed is
/// seen by the first query after the live re-open. The replay re-opens at
/// its own time (the backoff's jitter is drawn anew), possibly earlier: the
/// change is placed at the close (after its event), so the replay sees it
/// whenever it re-opens, and pauses the rail as the live run did.
#[test]
fn a_change_seen_after_a_reopen_is_placed_at_the_close() {
    use railwatch_core::{AsyncEvent, Element, EventKind, PortState};
    use railwatch_runtime::Observed;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fatal.toml");
    let mut r = recorder_of_one_active_port(&path);
    r.flush(Millis(0)).unwrap();
    let fatal = AsyncEvent::new(EventKind::DeviceFatal.code(), Element::None);
    r.observe(Millis(500), Observed::Input(&railwatch_core::Input::Event { device: 0, event: fatal }));
    // The live re-open came late in the backoff's jitter (1000 ms ± 20%).
    r.observe(Millis(1690), Observed::Input(&railwatch_core::Input::Reopened { device: 0, result: Ok(()) }));
    r.observe(
        Millis(1690),
        Observed::Input(&railwatch_core::Input::PortState {
            device: 0,
            port: 1,
            answer: Ok(PortState::Down),
            carrier: None,
        }),
    );
    r.flush(Millis(3000)).unwrap();
    r.finish(Millis(3000), &no_rails(3000)).unwrap();
    let sc = Scenario::load(&path).unwrap();
    let down: Vec<u64> = sc.steps.iter().filter(|s| s.port_state.is_some()).map(|s| s.at_ms).collect();
    assert_eq!(down, [500], "{}", std::fs::read_to_string(&path).unwrap());
    let (replayed, _, _) = replay(&path);
    assert_eq!(
        replayed,
        [
            "mlx5_0/1 inert->active attach g1",
            "mlx5_0/1 active->inert device_fatal g1",
            "mlx5_0/1 inert->paused port_not_active g2"
        ],
        "{}",
        std::fs::read_to_string(&path).unwrap()
    );
}

/// `watch` with no device at the start, one appearing before the first
/// flush: declared absent at the start and plugged in when it came (it was
/// declared present from 0).
#[test]
fn a_device_appearing_before_the_first_flush_is_not_present_from_the_start() {
    use railwatch_core::PortState;
    use railwatch_runtime::Observed;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.toml");
    let sc = Scenario::parse("duration_ms = 1\n", "x").unwrap();
    let mut r = Recorder::create(&path, &options(&sc, false)).unwrap();
    r.started();
    r.observe(Millis(30), Observed::Attached { device: 0, name: "rxe0", ports: &[1] });
    r.observe(
        Millis(30),
        Observed::Input(&railwatch_core::Input::PortState {
            device: 0,
            port: 1,
            answer: Ok(PortState::Active),
            carrier: None,
        }),
    );
    r.finish(Millis(100), &no_rails(100)).unwrap();
    let rec = Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert!(!rec.devices[0].present, "{}", std::fs::read_to_string(&path).unwrap());
    assert!(rec.steps.iter().any(|s| s.at_ms == 30 && s.fault == Some(railwatch_scenario::scenario::Fault::Plug)));
}
