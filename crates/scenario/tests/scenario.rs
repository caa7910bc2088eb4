//! Scenario files: the documented format parses, round-trips and drives the
//! simulated devices; every bad file is refused with file, line and problem.

use std::io;
use std::path::PathBuf;

use railwatch_core::{
    AsyncEvent, Element, EventKind, LinkAttrs, LinkRate, ObjectHandle, PortState, RailState, VerbsPort,
};
use railwatch_scenario::scenario::{Expect, Fault, LinkChange, PortStateChange, RecoveredBy, Step, StepEvent};
use railwatch_scenario::{Scenario, ScenarioError};
use railwatch_sim_backend::PortSpec;

const DOC: &str = include_str!("../../../docs/SCENARIOS.md");

/// The ```toml blocks of docs/SCENARIOS.md, with the line each starts on.
fn doc_blocks() -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (i, line) in DOC.lines().enumerate() {
        match &mut current {
            None if line.trim() == "```toml" => current = Some((i + 2, String::new())),
            Some(_) if line.trim() == "```" => blocks.push(current.take().unwrap()),
            Some((_, text)) => {
                text.push_str(line);
                text.push('\n');
            }
            None => {}
        }
    }
    blocks
}

fn full_example() -> String {
    doc_blocks().into_iter().next().expect("docs/SCENARIOS.md has a full example").1
}

/// The example in DESIGN.md ("Scenario files"), verbatim.
const DESIGN_EXAMPLE: &str = r#"
name = "burst-hides-port-active"
tick_ms = 1000                 # recovery tick period, default 1000
duration_ms = 5000             # run until this virtual time

[[device]]
name = "mlx5_0"
ports = [ { port = 1, state = "active", speed = "ndr", width = "4x" } ]
# state: down|init|armed|active|active_defer ; speed: sdr|ddr|qdr|fdr10|fdr|edr|hdr|ndr|xdr
# width: 1x|2x|4x|8x|12x ; optional effective_mbps = 400000

[[step]]                       # each step happens at at_ms, in file order for equal times
at_ms = 100
device = "mlx5_0"
port_state = { port = 1, state = "down" }   # what a port query returns from now on (silent)
event = "port_err"             # queue an async event: snake_case name or a raw code
port = 1                       # element.port_num for port events
repeat = 1                     # queue the event this many times
# other keys: link = { port, speed, width, effective_mbps }  (renegotiated rate)
#             fault = "eintr" (the next `count` reads fail with EINTR)
#                   | "eio" | "ebadf" (from now on reads fail so; the device itself lives)
#                   | "remove" (device gone: EPOLLERR, reads EIO, port queries ENODEV)
#                   | "restore" (the device can be opened again)

[[expect]]
at_ms = 1500                   # checked at this virtual time
rail = "mlx5_0/1"
state = "active"               # optional: active|paused|inert
available = true               # optional
bandwidth_gbps = 400           # optional
recovered_by = "poll"          # optional: event|poll — how the last activation happened
"#;

fn parse(text: &str) -> Scenario {
    Scenario::parse(text, "scenarios/x.toml").unwrap_or_else(|e| panic!("{e}"))
}

fn without_lines(mut sc: Scenario) -> Scenario {
    sc.devices.iter_mut().for_each(|d| d.line = 0);
    sc.steps.iter_mut().for_each(|s| s.line = 0);
    sc.expects.iter_mut().for_each(|e| e.line = 0);
    sc
}

#[test]
fn every_toml_block_in_the_docs_parses() {
    let blocks = doc_blocks();
    assert!(blocks.len() >= 2);
    for (line, text) in blocks {
        Scenario::parse(&text, "docs/SCENARIOS.md").unwrap_or_else(|e| panic!("block at docs line {line}: {e}"));
    }
}

#[test]
fn the_design_example_parses() {
    let sc = parse(DESIGN_EXAMPLE);
    assert_eq!(sc.name, "burst-hides-port-active");
    assert_eq!((sc.config.machine.tick_ms, sc.duration_ms), (1000, 5000));
    assert_eq!(sc.steps.len(), 1);
    let step = &sc.steps[0];
    assert_eq!(step.line, 12);
    assert_eq!(step.port_state, Some(PortStateChange { port: 1, state: PortState::Down }));
    assert_eq!(step.event, Some(StepEvent { event: AsyncEvent::port(EventKind::PortErr, 1), repeat: 1 }));
    assert_eq!(sc.expects[0].recovered_by, Some(RecoveredBy::Poll));
    assert_eq!(sc.expects[0].bandwidth, Some(LinkRate::gbps(400)));
}

#[test]
fn the_full_example_parses_into_typed_structs() {
    let text = full_example();
    let sc = Scenario::parse(&text, "docs/example.toml").unwrap();
    assert_eq!(sc.file, "docs/example.toml");
    assert_eq!(sc.name, "burst-hides-port-active");
    assert!(sc.description.as_deref().unwrap().starts_with("a COMM_EST burst"));
    assert_eq!((sc.config.machine.tick_ms, sc.duration_ms), (1000, 12000));

    assert_eq!(sc.devices.len(), 2);
    let d0 = &sc.devices[0];
    assert_eq!((d0.name.as_str(), d0.line), ("mlx5_0", 7));
    assert_eq!(
        d0.ports,
        vec![
            PortSpec::new(1, PortState::Active, LinkAttrs::new(128, 2)),
            PortSpec::new(2, PortState::Active, LinkAttrs::new(64, 16)),
        ]
    );
    let p = sc.devices[1].ports[0];
    assert_eq!(p.state, PortState::Active, "state defaults to active");
    assert_eq!(p.link.active_speed_ex, 256, "XDR lives in active_speed_ex");
    assert_eq!(p.link.effective_100mbps, Some(4000));
    assert_eq!(p.link.rate(), LinkRate::gbps(400), "the effective speed wins");

    assert_eq!(sc.steps.len(), 11);
    assert_eq!(sc.steps.iter().map(|s| s.index).collect::<Vec<_>>(), (1..=11).collect::<Vec<_>>());
    let burst = &sc.steps[1];
    assert_eq!((burst.at_ms, burst.device_index, burst.line), (500, 0, 25));
    assert_eq!(
        burst.event,
        Some(StepEvent { event: AsyncEvent::new(4, Element::Object(ObjectHandle(0x7f00))), repeat: 64 })
    );
    assert_eq!(sc.steps[4].port_state, Some(PortStateChange { port: 2, state: PortState::Active }));
    assert_eq!(sc.steps[4].event, None, "a silent recovery");
    assert_eq!(sc.steps[5].link, Some(LinkChange { port: 1, link: LinkAttrs::new(128, 16) }));
    assert_eq!(sc.steps[5].event.unwrap().event, AsyncEvent::new(20, Element::None));
    assert_eq!(sc.steps[6].event.unwrap().event, AsyncEvent::new(99, Element::None), "raw code kept");
    assert_eq!(sc.steps[7].fault, Some(Fault::Eintr { count: 2 }));
    assert_eq!(sc.steps[7].event.unwrap().event, AsyncEvent::port(EventKind::LidChange, 1));
    assert_eq!(sc.steps[8].event.unwrap().event, AsyncEvent::new(8, Element::None));
    assert_eq!(sc.steps[9].fault, Some(Fault::Remove));
    assert_eq!(sc.steps[10].fault, Some(Fault::Restore));
    assert_eq!(sc.steps[10].device_index, 1);

    assert_eq!(sc.expects.len(), 4);
    let e = &sc.expects[0];
    assert_eq!(
        (e.index, e.at_ms, e.rail.to_string(), e.rail.device_index, e.rail.port),
        (1, 600, "mlx5_0/1".to_owned(), 0, 1)
    );
    assert_eq!(
        (e.state, e.available, e.bandwidth, e.recovered_by),
        (Some(RailState::Active), Some(true), Some(LinkRate::gbps(400)), Some(RecoveredBy::Event))
    );
    let last: &Expect = &sc.expects[3];
    assert_eq!(
        (last.state, last.available, last.bandwidth, last.recovered_by),
        (Some(RailState::Inert), Some(false), None, None)
    );
}

#[test]
fn the_full_example_round_trips_through_to_toml() {
    let sc = parse(&full_example());
    let text = sc.to_toml();
    let again = Scenario::parse(&text, "scenarios/x.toml").unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(without_lines(again.clone()), without_lines(sc));
    assert_eq!(again.to_toml(), text, "canonical text is a fixed point");
}

#[test]
fn odd_values_round_trip_too() {
    let text = r#"
name = "odd \"quoted\" name"
duration_ms = 10
[[device]]
name = "d"
ports = [ { port = 255, state = 7, speed = 3, width = 5, effective_mbps = 0 } ]
[[step]]
at_ms = 0
device = "d"
event = "4000000000"
port = 255
[[step]]
at_ms = 0
device = "d"
event = 77
object = 9223372036854775807
[[expect]]
at_ms = 10
rail = "d/255"
bandwidth_gbps = 12.5
"#;
    let sc = parse(text);
    assert_eq!(sc.devices[0].ports[0].state, PortState::Unknown(7));
    assert_eq!(sc.devices[0].ports[0].link.rate(), LinkRate::Unknown);
    assert_eq!(sc.steps[0].event.unwrap().event, AsyncEvent::new(4_000_000_000, Element::Port(255)));
    assert_eq!(sc.steps[1].event.unwrap().event, AsyncEvent::new(77, Element::Object(ObjectHandle(i64::MAX as u64))));
    assert_eq!(sc.expects[0].bandwidth, Some(LinkRate::Known { mbps: 12_500 }));
    let again = parse(&sc.to_toml());
    assert_eq!(without_lines(again), without_lines(sc));
}

#[test]
fn a_peer_and_counters_beyond_toml_integers_round_trip() {
    // An engine's peer id is any u64 (a hash, a GUID), as a counter read is:
    // the recorder writes what it was given, and the replay must read it.
    use railwatch_core::{PortCounters, TransferReport};
    use railwatch_scenario::scenario::{CountersChange, TransferStep};
    let mut sc = parse(
        "duration_ms = 10\n[[device]]\nname = \"d\"\nports = [{ port = 1 }]\n\
         [[step]]\nat_ms = 1\ndevice = \"d\"\ncounters = { port = 1, link_downed = 1 }\n\
         [[step]]\nat_ms = 2\ndevice = \"d\"\ntransfers = { port = 1, status = \"success\" }\n",
    );
    let huge = u64::MAX;
    let counters =
        PortCounters { link_downed: Some(huge), carrier_changes: Some(i64::MAX as u64 + 1), carrier_down: Some(0) };
    sc.steps[0].counters = Some(CountersChange { port: 1, counters });
    sc.steps[1].transfers =
        Some(TransferStep { port: 1, report: TransferReport { peer: huge, wc_status: u32::MAX, count: u32::MAX } });
    let text = sc.to_toml();
    let again = parse(&text);
    assert_eq!(without_lines(again.clone()), without_lines(sc));
    assert_eq!(again.to_toml(), text, "canonical text is a fixed point");
    // Written as a string of digits beyond i64; read back from one.
    assert!(text.contains("peer = \"18446744073709551615\""), "{text}");
    let step = "[[step]]\nat_ms = 1\ndevice = \"d\"\n";
    for (body, needle) in [
        ("transfers = { port = 1, peer = \"18446744073709551616\", status = 0 }", "transfers.peer"),
        ("transfers = { port = 1, peer = \"-1\", status = 0 }", "transfers.peer"),
        ("transfers = { port = 1, peer = \"0x10\", status = 0 }", "transfers.peer"),
        ("transfers = { port = 1, peer = 1.5, status = 0 }", "transfers.peer"),
        ("counters = { port = 1, link_downed = \"\" }", "counters.link_downed"),
    ] {
        let text = format!("duration_ms = 10\n[[device]]\nname = \"d\"\nports = [{{ port = 1 }}]\n{step}{body}\n");
        let e = Scenario::parse(&text, "x.toml").expect_err(body);
        assert_eq!(e.line(), Some(8), "{body}: {e}");
        assert!(e.message().contains(needle), "{body}: {e}");
    }
}

#[test]
fn defaults() {
    let sc = parse("duration_ms = 1\n[[device]]\nname = \"mlx5_0\"\nports = [ { port = 1 } ]\n");
    assert_eq!(sc.name, "x", "the file name without directory and extension");
    assert_eq!(sc.description, None);
    assert_eq!(sc.config.machine.tick_ms, 1000);
    assert_eq!(sc.devices[0].ports, vec![PortSpec::active(1)]);
    assert!(sc.steps.is_empty() && sc.expects.is_empty());
    let sc = parse(
        "duration_ms = 1\n[[device]]\nname = \"d\"\nports = [ { port = 1 } ]\n[[step]]\nat_ms = 0\ndevice = \"d\"\nevent = \"qp_fatal\"\n",
    );
    assert_eq!(
        sc.steps[0].event,
        Some(StepEvent { event: AsyncEvent::new(1, Element::Object(ObjectHandle(0))), repeat: 1 }),
        "object events default to handle 0"
    );
}

fn drain(dev: &mut impl VerbsPort) -> Vec<AsyncEvent> {
    let mut out = Vec::new();
    loop {
        match dev.get_event() {
            Ok(ev) => out.push(ev),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return out,
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn build_devices_and_apply_steps() {
    let sc = parse(&full_example());
    let (mut devs, handles) = sc.build_devices().unwrap();
    assert_eq!(devs.iter().map(|d| d.name().to_owned()).collect::<Vec<_>>(), ["mlx5_0", "mlx5_1"]);
    assert_eq!(devs[0].ports(), vec![1, 2]);
    assert_eq!(devs[1].link(1).unwrap().rate(), LinkRate::gbps(400));

    let steps: Vec<&Step> = sc.steps_between(None, 500).collect();
    assert_eq!(steps.len(), 3);
    let queued: u64 = steps.iter().map(|s| sc.apply_step(s, &handles)).sum();
    assert_eq!(queued, 66);
    let evs = drain(&mut devs[0]);
    assert_eq!(evs.len(), 66);
    assert_eq!(evs[0], AsyncEvent::port(EventKind::PortErr, 1));
    assert_eq!(evs[65], AsyncEvent::port(EventKind::PortActive, 1), "PORT_ACTIVE behind the burst");
    assert_eq!(devs[0].port_state(1).unwrap(), PortState::Active);

    for s in sc.steps_between(Some(500), 1500) {
        sc.apply_step(s, &handles);
    }
    assert_eq!(drain(&mut devs[0]), vec![AsyncEvent::port(EventKind::PortErr, 2)]);
    assert_eq!(devs[0].port_state(2).unwrap(), PortState::Active, "came back silently");

    for s in sc.steps_between(Some(1500), 4100) {
        sc.apply_step(s, &handles);
    }
    assert_eq!(devs[0].link(1).unwrap().rate(), LinkRate::gbps(200));
    assert_eq!(drain(&mut devs[0]), vec![AsyncEvent::new(20, Element::None), AsyncEvent::new(99, Element::None)]);

    // eintr x2 then lid_change: the fault comes first, the event still arrives.
    sc.apply_step(&sc.steps[7], &handles);
    for _ in 0..2 {
        assert_eq!(devs[1].get_event().unwrap_err().kind(), io::ErrorKind::Interrupted);
    }
    assert_eq!(drain(&mut devs[1]), vec![AsyncEvent::port(EventKind::LidChange, 1)]);

    // device_fatal, then removal (which would drop it if still unread).
    sc.apply_step(&sc.steps[8], &handles);
    sc.apply_step(&sc.steps[9], &handles);
    assert_eq!(handles[1].counters().dropped, 1);
    assert_eq!(devs[1].get_event().unwrap_err().raw_os_error(), Some(libc::EIO));
    assert_eq!(devs[1].port_state(1).unwrap_err().raw_os_error(), Some(libc::ENODEV));
    devs[1].close();
    assert_eq!(devs[1].reopen().unwrap_err().raw_os_error(), Some(libc::ENODEV));
    sc.apply_step(&sc.steps[10], &handles);
    devs[1].reopen().unwrap();
    assert_eq!(devs[1].port_state(1).unwrap(), PortState::Active);
}

#[test]
fn order_inside_a_step_is_state_link_fault_event() {
    let text = r#"
duration_ms = 10
[[device]]
name = "d"
ports = [ { port = 1 } ]
[[step]]
at_ms = 1
device = "d"
event = "port_err"
port = 1
fault = "eintr"
count = 1
port_state = { port = 1, state = "down" }
link = { port = 1, speed = "edr", width = "4x" }
[[step]]
at_ms = 2
device = "d"
fault = "remove"
event = "device_fatal"
"#;
    let sc = parse(text);
    let (mut devs, handles) = sc.build_devices().unwrap();
    assert_eq!(sc.apply_step(&sc.steps[0], &handles), 1);
    assert_eq!(devs[0].port_state(1).unwrap(), PortState::Down);
    assert_eq!(devs[0].link(1).unwrap().rate(), LinkRate::gbps(100));
    assert_eq!(devs[0].get_event().unwrap_err().kind(), io::ErrorKind::Interrupted);
    assert_eq!(devs[0].get_event().unwrap(), AsyncEvent::port(EventKind::PortErr, 1));
    assert_eq!(sc.apply_step(&sc.steps[1], &handles), 0, "the event of a remove step is dropped");
    assert_eq!(handles[0].counters().dropped, 1);
}

#[test]
fn steps_describe_themselves() {
    let sc = parse(&full_example());
    assert_eq!(sc.steps[0].to_string(), "mlx5_0: port 1 -> down, event port_err port 1");
    assert_eq!(sc.steps[1].to_string(), "mlx5_0: event comm_est object 0x7f00 x64");
    assert_eq!(sc.steps[5].to_string(), "mlx5_0: port 1 link 200 Gb/s, event device_speed_change");
    assert_eq!(sc.steps[7].to_string(), "mlx5_1: fault eintr x2, event lid_change port 1");
    assert_eq!(sc.steps[9].to_string(), "mlx5_1: fault remove");
}

#[test]
fn steps_between_slices_the_timeline() {
    let sc = parse(&full_example());
    let at = |after, until| sc.steps_between(after, until).map(|s| s.index).collect::<Vec<_>>();
    assert_eq!(at(None, 99), Vec::<usize>::new());
    assert_eq!(at(None, 100), vec![1]);
    assert_eq!(at(Some(100), 500), vec![2, 3]);
    assert_eq!(at(Some(500), 12000), (4..=11).collect::<Vec<_>>());
}

// ---------------------------------------------------------------- errors

const FILE: &str = "scenarios/x.toml";

/// Lines 1-5: duration_ms, blank, [[device]], name = "mlx5_0", ports 1 and 2.
const HEAD: &str = "duration_ms = 5000\n\n[[device]]\nname = \"mlx5_0\"\nports = [ { port = 1 }, { port = 2 } ]\n";

fn refused(text: &str) -> ScenarioError {
    match Scenario::parse(text, FILE) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e,
    }
}

/// Asserts the error is on `line` and its message contains `needle`, and
/// that it renders as one line `file:line: message`.
#[track_caller]
fn assert_refused(text: &str, line: usize, needle: &str) {
    let e = refused(text);
    let shown = e.to_string();
    assert_eq!(e.line(), Some(line), "{shown}");
    assert!(e.message().contains(needle), "{shown:?} lacks {needle:?}");
    assert_eq!(e.file(), FILE);
    assert!(shown.starts_with(&format!("{FILE}:{line}: ")), "{shown}");
    assert!(!shown.contains('\n'), "one line: {shown:?}");
}

/// HEAD plus a step at line 7 (header) whose keys start at line 8.
fn step(body: &str) -> String {
    format!("{HEAD}\n[[step]]\n{body}")
}

#[test]
fn the_example_message_from_the_brief() {
    let text = format!(
        "{HEAD}\n[[step]]\nat_ms = 1\ndevice = \"mlx5_0\"\nfault = \"eio\"\n[[step]]\nat_ms = 2\ndevice = \"mlx5_0\"\nfault = \"eio\"\n[[step]]\nat_ms = 3\ndevice = \"mlx5_9\"\nfault = \"eio\"\n"
    );
    assert_eq!(refused(&text).to_string(), r#"scenarios/x.toml:17: step 3: unknown device "mlx5_9""#);
    // The same shape as the brief's `scenarios/x.toml:12: step 3: ...`.
    let text = concat!(
        "duration_ms = 5000\n",
        "step = [\n",
        "  { at_ms = 1, device = \"mlx5_0\", fault = \"eio\" },\n",
        "  { at_ms = 2, device = \"mlx5_0\", fault = \"eio\" },\n",
        "\n\n\n\n\n\n\n",
        "  { at_ms = 3, device = \"mlx5_9\", fault = \"eio\" },\n",
        "]\n",
        "[[device]]\nname = \"mlx5_0\"\nports = [ { port = 1 } ]\n",
    );
    assert_eq!(refused(text).to_string(), r#"scenarios/x.toml:12: step 3: unknown device "mlx5_9""#);
}

#[test]
fn syntax_errors_and_unknown_keys() {
    assert_refused("duration_ms = 5000\nname = \"x\n", 2, "");
    assert_refused("duration_ms = 5000\nname = \"a\"\nname = \"b\"\n", 3, "duplicate key");
    assert_refused("durration_ms = 5000\n", 1, "durration_ms: unknown key (known here: name, description, duration_ms");
    assert_refused(&format!("{HEAD}colour = \"red\"\n"), 6, "unknown field `colour`");
    assert_refused(&format!("{HEAD}\n[[bogus]]\nx = 1\n"), 7, "bogus: unknown key");
    assert_refused(&step("at_ms = 1\ndevice = \"mlx5_0\"\nevnet = \"port_err\"\n"), 10, "unknown field `evnet`");
    assert_refused(
        "duration_ms = 5000\n[[device]]\nname = \"d\"\nports = [\n  { port = 1 },\n  { port = 2, sped = \"hdr\" },\n]\n",
        6,
        "unknown field `sped`",
    );
    assert_refused(
        &step("at_ms = 1\ndevice = \"mlx5_0\"\nport_state = { port = 1, state = \"down\", why = 1 }\n"),
        10,
        "unknown field `why`",
    );
    assert_refused(
        &format!("{HEAD}\n[[expect]]\nat_ms = 1\nrail = \"mlx5_0/1\"\nstate = \"active\"\nbogus = 1\n"),
        11,
        "unknown field `bogus`",
    );
    assert_refused(&step("at_ms = \"100\"\ndevice = \"mlx5_0\"\nfault = \"eio\"\n"), 8, "invalid type");
    assert_refused(&step("device = \"mlx5_0\"\nfault = \"eio\"\n"), 7, "missing field `at_ms`");
    assert_refused("duration_ms = 5000\n[[device]]\nports = [ { port = 1 } ]\n", 2, "missing field `name`");
    assert_refused(&step("at_ms = 1\ndevice = \"mlx5_0\"\nport_state = { port = 1 }\n"), 10, "missing field `state`");
}

#[test]
fn top_level_rules() {
    let e = refused("");
    assert_eq!((e.line(), e.to_string()), (None, "scenarios/x.toml: empty file".to_owned()));
    assert_eq!(refused("  \n\t\n").message(), "empty file");
    assert_refused("# only a comment\n[[device]]\nname = \"d\"\nports = [ { port = 1 } ]\n", 1, "missing duration_ms");
    assert_refused("name = \"x\"\nduration_ms = 0\n", 2, "duration_ms must be at least 1");
    assert_refused("duration_ms = -5\n", 1, "duration_ms must not be negative");
    assert_refused("tick_ms = 0\nduration_ms = 10\n", 1, "tick_ms: must be at least 1 ms");
    // No device: a host with none, as a recording of it says (nothing runs).
    let none = Scenario::parse("duration_ms = 10\n", "none.toml").unwrap();
    assert!(none.devices.is_empty());
    assert_refused("name = \"\"\nduration_ms = 10\n", 1, "name must not be empty");
    assert_refused("duration_ms = 10\nname = \"a\0b\"\n", 2, "NUL");
}

#[test]
fn device_rules() {
    assert_refused(
        &format!(
            "{HEAD}\n[[device]]\nname = \"mlx5_1\"\nports = [ {{ port = 1 }} ]\n\n[[device]]\nname = \"mlx5_0\"\nports = [ {{ port = 1 }} ]\n"
        ),
        12,
        "duplicate device name \"mlx5_0\" (first declared on line 4)",
    );
    assert_refused("duration_ms = 10\n[[device]]\nname = \"d\"\nports = []\n", 4, "device d declares no ports");
    assert_refused(
        "duration_ms = 10\n[[device]]\nname = \"d\"\nports = [ { port = 0 } ]\n",
        4,
        "device d: port 0 out of range (1..=255)",
    );
    assert_refused(
        "duration_ms = 10\n[[device]]\nname = \"d\"\nports = [\n { port = 1 },\n { port = 256 } ]\n",
        6,
        "port 256 out of range",
    );
    assert_refused(
        "duration_ms = 10\n[[device]]\nname = \"d\"\nports = [ { port = 1 },\n { port = 1 } ]\n",
        5,
        "device d: port 1 declared twice",
    );
    assert_refused(
        "duration_ms = 10\n[[device]]\nname = \"a/b\"\nports = [ { port = 1 } ]\n",
        3,
        "invalid device name",
    );
    assert_refused(
        "duration_ms = 10\n[[device]]\nname = \"d\"\nports = [ { port = 1, state = \"up\" } ]\n",
        4,
        "unknown port state \"up\"",
    );
    assert_refused(
        "duration_ms = 10\n[[device]]\nname = \"d\"\nports = [ { port = 1, speed = \"zdr\" } ]\n",
        4,
        "unknown speed \"zdr\"",
    );
    assert_refused(
        "duration_ms = 10\n[[device]]\nname = \"d\"\nports = [ { port = 1, width = \"3x\" } ]\n",
        4,
        "unknown width \"3x\"",
    );
    assert_refused(
        "duration_ms = 10\n[[device]]\nname = \"d\"\nports = [ { port = 1, width = 300 } ]\n",
        4,
        "width code 300 out of range",
    );
    assert_refused(
        "duration_ms = 10\n[[device]]\nname = \"d\"\nports = [ { port = 1, speed = 1.5 } ]\n",
        4,
        "speed must be a name or an integer code",
    );
    assert_refused(
        "duration_ms = 10\n[[device]]\nname = \"d\"\nports = [ { port = 1, effective_mbps = 1250 } ]\n",
        4,
        "effective_mbps 1250 is not a multiple of 100",
    );
}

#[test]
fn step_device_port_and_time_rules() {
    assert_refused(&step("at_ms = 1\ndevice = \"mlx5_9\"\nfault = \"eio\"\n"), 9, "step 1: unknown device \"mlx5_9\"");
    assert_refused(
        &step("at_ms = 1\ndevice = \"mlx5_0\"\nport_state = { port = 3, state = \"down\" }\n"),
        10,
        "step 1: device mlx5_0 has no port 3 (it declares 1, 2)",
    );
    assert_refused(
        &step("at_ms = 1\ndevice = \"mlx5_0\"\nport_state = { port = 0, state = \"down\" }\n"),
        10,
        "step 1: port 0 out of range",
    );
    assert_refused(
        &step("at_ms = 1\ndevice = \"mlx5_0\"\nevent = \"port_err\"\nport = 7\n"),
        11,
        "step 1: device mlx5_0 has no port 7",
    );
    assert_refused(
        &step("at_ms = 1\ndevice = \"mlx5_0\"\nlink = { port = 4, speed = \"hdr\", width = \"4x\" }\n"),
        10,
        "has no port 4",
    );
    assert_refused(
        &format!(
            "{HEAD}\n[[step]]\nat_ms = 100\ndevice = \"mlx5_0\"\nfault = \"eio\"\n\n[[step]]\nat_ms = 50\ndevice = \"mlx5_0\"\nfault = \"eio\"\n"
        ),
        13,
        "step 2: at_ms 50 goes backwards (step 1 is at 100)",
    );
    assert_refused(
        &step("at_ms = 5001\ndevice = \"mlx5_0\"\nfault = \"eio\"\n"),
        8,
        "step 1: at_ms 5001 is after duration_ms 5000",
    );
    assert_refused(
        &step("at_ms = -1\ndevice = \"mlx5_0\"\nfault = \"eio\"\n"),
        8,
        "step 1: at_ms must not be negative",
    );
    assert_refused(&step("at_ms = 1\ndevice = \"mlx5_0\"\n"), 7, "step 1 does nothing");
    assert_refused(&step("at_ms = 1\ndevice = \"mlx5_0\"\ndrain = false\n"), 7, "step 1 does nothing");
    let drain = Scenario::parse(&step("at_ms = 1\ndevice = \"mlx5_0\"\ndrain = true\n"), FILE).unwrap();
    assert!(drain.steps[0].drain);
    assert_eq!(drain.steps[0].to_string(), "mlx5_0: drain");
    assert_refused(&step("at_ms = 1\ndevice = \"mlx5_0\"\ndrain = 1\n"), 10, "expected a boolean");
    assert_refused(
        &step("at_ms = 1\ndevice = \"mlx5_0\"\nport_state = { port = 1, state = \"sleepy\" }\n"),
        10,
        "step 1: unknown port state \"sleepy\"",
    );
    assert_refused(
        &step("at_ms = 1\ndevice = \"mlx5_0\"\nlink = { port = 1, speed = \"fast\", width = \"4x\" }\n"),
        10,
        "step 1: unknown speed \"fast\"",
    );
    assert_refused(
        &step("at_ms = 1\ndevice = \"mlx5_0\"\nlink = { port = 1, speed = \"hdr\", width = \"wide\" }\n"),
        10,
        "step 1: unknown width \"wide\"",
    );
    assert_refused(
        &step("at_ms = 1\ndevice = \"mlx5_0\"\nlink = { port = 1, speed = \"hdr\" }\n"),
        10,
        "missing field `width`",
    );
}

#[test]
fn step_event_rules() {
    let ev = |rest: &str| step(&format!("at_ms = 1\ndevice = \"mlx5_0\"\n{rest}"));
    assert_refused(&ev("event = \"port_eror\"\nport = 1\n"), 10, "step 1: unknown event \"port_eror\"");
    assert_refused(&ev("event = \"PORT_ERR\"\nport = 1\n"), 10, "unknown event \"PORT_ERR\"");
    assert_refused(&ev("event = -1\n"), 10, "step 1: event code -1 out of range");
    assert_refused(&ev("event = \"99999999999\"\n"), 10, "event code 99999999999 out of range");
    assert_refused(&ev("event = true\n"), 10, "event must be a name or an integer code");
    assert_refused(&ev("event = \"port_err\"\n"), 10, "step 1: event port_err needs port");
    assert_refused(&ev("event = \"device_fatal\"\nport = 1\n"), 11, "device event: it takes no port");
    assert_refused(&ev("event = \"device_fatal\"\nobject = 1\n"), 11, "device event: it takes no object");
    assert_refused(&ev("event = \"qp_fatal\"\nport = 1\n"), 11, "is about an object, not a port");
    assert_refused(&ev("event = \"port_active\"\nobject = 1\n"), 11, "is a port event: give port, not object");
    assert_refused(&ev("event = 99\nport = 1\nobject = 2\n"), 11, "give port or object, not both");
    assert_refused(&ev("event = \"comm_est\"\nrepeat = 0\n"), 11, "step 1: repeat must be at least 1");
    assert_refused(&ev("event = \"comm_est\"\nrepeat = 10000001\n"), 11, "more than the maximum 10000000");
    assert_refused(&ev("port = 1\nfault = \"eio\"\n"), 10, "step 1: port without event");
    assert_refused(&ev("fault = \"eio\"\nrepeat = 3\n"), 11, "step 1: repeat without event");
    assert_refused(&ev("fault = \"eio\"\nobject = 3\n"), 11, "step 1: object without event");
    // Raw codes are allowed, as integers or digit strings.
    for raw in ["event = 99", "event = \"99\""] {
        let sc = Scenario::parse(&ev(&format!("{raw}\n")), FILE).unwrap();
        assert_eq!(sc.steps[0].event.unwrap().event, AsyncEvent::new(99, Element::None));
    }
    let sc = Scenario::parse(&ev("event = \"9\"\nport = 2\n"), FILE).unwrap();
    assert_eq!(sc.steps[0].event.unwrap().event, AsyncEvent::port(EventKind::PortActive, 2), "a known code by number");
    let sc = Scenario::parse(&ev("event = 123\nport = 2\n"), FILE).unwrap();
    assert_eq!(sc.steps[0].event.unwrap().event, AsyncEvent::new(123, Element::Port(2)));
}

#[test]
fn step_fault_rules() {
    let f = |rest: &str| step(&format!("at_ms = 1\ndevice = \"mlx5_0\"\n{rest}"));
    assert_refused(&f("fault = \"eintr\"\n"), 10, "step 1: fault \"eintr\" needs count");
    assert_refused(&f("fault = \"eintr\"\ncount = 0\n"), 11, "step 1: count must be at least 1");
    assert_refused(&f("fault = \"eio\"\ncount = 2\n"), 11, "step 1: count only applies to fault = \"eintr\"");
    assert_refused(&f("count = 2\nevent = \"comm_est\"\n"), 10, "count only applies");
    assert_refused(
        &f("fault = \"explode\"\n"),
        10,
        "step 1: unknown fault \"explode\" (expected eintr, eio, ebadf, remove, restore, unplug or plug)",
    );
    for (name, fault) in
        [("eio", Fault::Eio), ("ebadf", Fault::Ebadf), ("remove", Fault::Remove), ("restore", Fault::Restore)]
    {
        let sc = Scenario::parse(&f(&format!("fault = \"{name}\"\n")), FILE).unwrap();
        assert_eq!(sc.steps[0].fault, Some(fault));
    }
}

#[test]
fn expect_rules() {
    let ex = |body: &str| format!("{HEAD}\n[[expect]]\n{body}");
    assert_refused(
        &ex("at_ms = 1\nrail = \"mlx5_9/1\"\nstate = \"active\"\n"),
        9,
        "expect 1: unknown rail \"mlx5_9/1\" (no device mlx5_9)",
    );
    assert_refused(
        &ex("at_ms = 1\nrail = \"mlx5_0/3\"\nstate = \"active\"\n"),
        9,
        "expect 1: unknown rail \"mlx5_0/3\" (device mlx5_0 has no port 3)",
    );
    assert_refused(&ex("at_ms = 1\nrail = \"mlx5_0\"\nstate = \"active\"\n"), 9, "must be \"device/port\"");
    assert_refused(&ex("at_ms = 1\nrail = \"mlx5_0/300\"\nstate = \"active\"\n"), 9, "port 300 out of range (1..=255)");
    assert_refused(&ex("at_ms = 1\nrail = \"mlx5_0/x\"\nstate = \"active\"\n"), 9, "must be \"device/port\"");
    assert_refused(
        &ex("at_ms = 5001\nrail = \"mlx5_0/1\"\nstate = \"active\"\n"),
        8,
        "expect 1: at_ms 5001 is after duration_ms 5000",
    );
    assert_refused(
        &ex("at_ms = 1\nrail = \"mlx5_0/1\"\nstate = \"up\"\n"),
        10,
        "unknown rail state \"up\" (expected active, paused or inert)",
    );
    assert_refused(
        &ex("at_ms = 1\nrail = \"mlx5_0/1\"\nrecovered_by = \"magic\"\n"),
        10,
        "unknown recovered_by \"magic\"",
    );
    assert_refused(&ex("at_ms = 1\nrail = \"mlx5_0/1\"\nbandwidth_gbps = -4\n"), 10, "must be positive");
    assert_refused(&ex("at_ms = 1\nrail = \"mlx5_0/1\"\nbandwidth_gbps = 0.0001\n"), 10, "whole Mb/s");
    assert_refused(
        &ex("at_ms = 1\nrail = \"mlx5_0/1\"\nbandwidth_gbps = \"400\"\n"),
        10,
        "bandwidth_gbps must be a number",
    );
    assert_refused(&ex("at_ms = 1\nrail = \"mlx5_0/1\"\navailable = \"yes\"\n"), 10, "invalid type");
    assert_refused(&ex("at_ms = 1\nrail = \"mlx5_0/1\"\n"), 7, "expect 1 checks nothing");
    assert_refused(&ex("rail = \"mlx5_0/1\"\nstate = \"active\"\n"), 7, "missing field `at_ms`");
    for (name, by) in [("event", RecoveredBy::Event), ("poll", RecoveredBy::Poll), ("attach", RecoveredBy::Attach)] {
        let sc = parse(&ex(&format!("at_ms = 1\nrail = \"mlx5_0/1\"\nrecovered_by = \"{name}\"\n")));
        assert_eq!(sc.expects[0].recovered_by, Some(by));
    }
    // Expectations need no time order; the last one may sit at duration_ms.
    let sc = parse(&format!(
        "{HEAD}\n[[expect]]\nat_ms = 5000\nrail = \"mlx5_0/2\"\navailable = false\n[[expect]]\nat_ms = 0\nrail = \"mlx5_0/1\"\nstate = \"paused\"\n"
    ));
    assert_eq!(sc.expects.iter().map(|e| (e.at_ms, e.line)).collect::<Vec<_>>(), vec![(5000, 7), (0, 11)]);
}

// ----------------------------------------------------------------- load

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("railwatch-sim-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn load_refuses_what_is_not_a_scenario_file() {
    let tmp = TempDir::new("load");
    let path = |name: &str| tmp.0.join(name);
    let shown = |name: &str| path(name).display().to_string();

    let e = Scenario::load(path("missing.toml")).unwrap_err();
    assert_eq!(e.to_string(), format!("{}: no such file", shown("missing.toml")));

    let e = Scenario::load(&tmp.0).unwrap_err();
    assert_eq!(e.to_string(), format!("{}: is a directory, not a scenario file", tmp.0.display()));

    std::fs::write(path("empty.toml"), "").unwrap();
    let e = Scenario::load(path("empty.toml")).unwrap_err();
    assert_eq!(e.to_string(), format!("{}: empty file", shown("empty.toml")));

    std::fs::write(path("nul.toml"), b"duration_ms = 1\n\0\x01\x02").unwrap();
    let e = Scenario::load(path("nul.toml")).unwrap_err();
    assert_eq!(e.to_string(), format!("{}: not a text file (NUL byte at offset 16)", shown("nul.toml")));

    std::fs::write(path("latin1.toml"), b"name = \"caf\xe9\"\n").unwrap();
    let e = Scenario::load(path("latin1.toml")).unwrap_err();
    assert_eq!(e.to_string(), format!("{}: not a text file (invalid UTF-8 at offset 11)", shown("latin1.toml")));

    std::fs::write(path("bad.toml"), format!("{HEAD}\n[[step]]\nat_ms = 1\ndevice = \"nope\"\nfault = \"eio\"\n"))
        .unwrap();
    let e = Scenario::load(path("bad.toml")).unwrap_err();
    assert_eq!(e.to_string(), format!("{}:9: step 1: unknown device \"nope\"", shown("bad.toml")));

    std::fs::write(path("burst.toml"), full_example()).unwrap();
    let sc = Scenario::load(path("burst.toml")).unwrap();
    assert_eq!(sc.file, shown("burst.toml"));
    assert_eq!(sc.steps.len(), 11);
}

/// A device name is what the kernel could call a device: each refusal
/// says what is wrong with it, on the name's line.
#[test]
fn device_names_are_refused_with_the_reason() {
    let long = "x".repeat(64);
    for (name, why) in [
        ("", "it is empty"),
        ("a/b", "it contains '/'"),
        ("a b", "it contains whitespace (U+0020)"),
        (r"a\tb", "it contains whitespace (U+0009)"),
        (r"a\u00A0b", "it contains whitespace (U+00A0)"),
        (r"e\u001bx", "it contains a control character (U+001B)"),
        (r"e\u007fx", "it contains a control character (U+007F)"),
        (long.as_str(), "64 bytes, at most 63"),
    ] {
        let text = format!("duration_ms = 10\n[[device]]\nname = \"{name}\"\nports = [{{ port = 1 }}]\n");
        assert_refused(&text, 3, why);
    }
    let ok = format!("duration_ms = 10\n[[device]]\nname = \"{}\"\nports = [{{ port = 1 }}]\n", "x".repeat(63));
    assert!(Scenario::parse(&ok, FILE).is_ok());
}

/// Adding a setting means documenting it: every key a file may give is in
/// the table of both the scenario format and the config file, with its
/// range where it has one.
#[test]
fn every_setting_is_documented_in_both_file_formats() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for doc in ["docs/SCENARIOS.md", "docs/CONFIG.md"] {
        let text = std::fs::read_to_string(root.join(doc)).expect(doc);
        for spec in railwatch_runtime::Config::settings() {
            // SCENARIOS.md lists a section's keys under its own heading.
            let key = match doc {
                "docs/SCENARIOS.md" => spec.key.rsplit('.').next().unwrap_or(spec.key),
                _ => spec.key,
            };
            let row = text
                .lines()
                .find(|l| l.starts_with(&format!("| `{key}` ")) || l.starts_with(&format!("| `[{key}]` ")))
                .unwrap_or_else(|| panic!("{doc} has no row for {}", spec.key));
            if let railwatch_runtime::SettingKind::Count { max, .. } = spec.kind {
                assert!(row.contains(&max.to_string()), "{doc}: the row of {} does not give its limit {max}", spec.key);
            }
        }
    }
}
