//! A device that left the host and comes back with other ports: the rail
//! of a port it had keeps its id and its gates and gets a new generation
//! (a re-attach), whichever way it comes back (`add_device`,
//! `add_device_at`, the device list and `handle_opened`); a new port gets
//! a new rail; a port it no longer has stays inert and is no longer the
//! device's.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use railwatch_core::{Action, Gate, Machine, MachineConfig, Millis, PauseReason, PortState, RailId, RailState};

fn machine() -> Machine {
    Machine::new(MachineConfig::default()).expect("the defaults are valid")
}

/// Answers every port query ACTIVE, every link read, and every open with
/// `ports`.
fn serve(m: &mut Machine, ports: &[u8], now: Millis) {
    while let Some(a) = m.poll_action() {
        match a {
            Action::QueryPort { device, port } => m.handle_port_state(device, port, Ok(PortState::Active), now),
            Action::ReadLink { device, port } => m.handle_link(device, port, Ok(Default::default()), now),
            Action::Open { device } => m.handle_opened(device, Ok(ports), now),
            _ => {}
        }
    }
}

fn id(device: u32, port: u8) -> RailId {
    RailId { device, port }
}

fn state_gen(gate: &Gate) -> (RailState, u64) {
    let w = gate.word();
    (w.state, w.generation)
}

/// How a device that left comes back.
#[derive(Debug, Clone, Copy)]
enum Back {
    AddDevice,
    AddDeviceAt,
    Listed,
}

/// `mlx5_1` at index 1 (after `mlx5_0`) with `before`, attached, removed,
/// then back with `after` the way `back` says, served.
fn come_back(back: Back, before: &[u8], after: &[u8]) -> (Machine, BTreeMap<u8, Gate>) {
    let mut m = machine();
    m.add_device("mlx5_0", &[1], Millis(0)).expect("a device");
    assert_eq!(m.add_device("mlx5_1", before, Millis(0)), Some(1));
    serve(&mut m, before, Millis(0));
    let gates: BTreeMap<u8, Gate> = before.iter().map(|&p| (p, m.gate(id(1, p)).expect("a gate"))).collect();
    for g in gates.values() {
        assert_eq!(state_gen(g), (RailState::Active, 1));
    }
    match back {
        Back::Listed => {
            m.handle_device_list(["mlx5_0"], Millis(1));
            serve(&mut m, after, Millis(1));
            m.handle_device_list(["mlx5_0", "mlx5_1"], Millis(2));
        }
        Back::AddDevice | Back::AddDeviceAt => {
            m.handle_removed(1, Millis(1));
            serve(&mut m, after, Millis(1));
            let index = match back {
                Back::AddDevice => m.add_device("mlx5_1", after, Millis(2)),
                _ => m.add_device_at(1, "mlx5_1", after, Millis(2)).ok(),
            };
            assert_eq!(index, Some(1), "back at its own index");
        }
    }
    serve(&mut m, after, Millis(2));
    (m, gates)
}

#[test]
fn a_kept_port_gets_a_new_generation_and_keeps_its_gates_whatever_the_other_ports() {
    for back in [Back::AddDevice, Back::AddDeviceAt, Back::Listed] {
        for after in [&[1u8, 2][..], &[1], &[1, 3], &[3, 1]] {
            let (m, gates) = come_back(back, &[1, 2], after);
            let what = format!("{back:?}, {{1,2}} -> {after:?}");
            // Port 1 is kept: the same rail, generation 1 -> 2.
            let v = m.rail(id(1, 1)).expect("port 1's rail");
            assert_eq!((v.word.state, v.word.generation), (RailState::Active, 2), "{what}");
            assert_eq!(state_gen(&gates[&1]), (RailState::Active, 2), "the gate taken before follows: {what}");
            assert_eq!(state_gen(&m.gate(id(1, 1)).expect("a gate")), (RailState::Active, 2), "{what}");
            // Port 3 is new: a new rail, first attach.
            if after.contains(&3) {
                assert_eq!(m.rail(id(1, 3)).map(|v| (v.word.state, v.word.generation)), Some((RailState::Active, 1)));
            }
            // Port 2, when gone: inert, no longer the device's.
            if !after.contains(&2) {
                assert!(m.rail(id(1, 2)).is_none() && m.gate(id(1, 2)).is_none(), "{what}");
                let w = gates[&2].word();
                assert_eq!((w.state, w.reason, w.generation), (RailState::Inert, PauseReason::DeviceRemoved, 1));
            }
            // Each rail listed once (a port it no longer has included).
            let names: Vec<&str> = m.rails().map(|r| r.name).collect();
            let unique: BTreeSet<&str> = names.iter().copied().collect();
            assert_eq!(names.len(), unique.len(), "{what}: {names:?}");
            assert_eq!(m.rails().len(), names.len(), "{what}");
            let ever: BTreeSet<u8> = [1, 2].iter().chain(after).copied().collect();
            assert_eq!(names.len(), 1 + ever.len(), "{what}: {names:?}");
            // Found by name as listed, the placeholders of moved rails never.
            for r in m.rails() {
                assert_eq!(m.rail_named(r.name).map(|v| v.id), Some(r.id), "{what}: {}", r.name);
            }
            assert!(m.rail_named("").is_none() && m.rail_named("mlx5_9/1").is_none(), "{what}");
            let gate_of = m.gate_of("mlx5_1/1").expect("by name");
            assert_eq!(state_gen(&gate_of), (RailState::Active, 2), "{what}");
        }
    }
}

#[test]
fn inputs_naming_a_port_the_device_no_longer_has_are_stray() {
    let (mut m, gates) = come_back(Back::AddDevice, &[1, 2], &[1]);
    let stray = m.stray_inputs();
    m.handle_port_state(1, 2, Ok(PortState::Active), Millis(3));
    m.handle_link(1, 2, Ok(Default::default()), Millis(3));
    assert_eq!(m.stray_inputs(), stray + 2);
    serve(&mut m, &[1], Millis(3));
    assert_eq!(state_gen(&gates[&2]), (RailState::Inert, 1), "nothing revives it");
}

#[test]
fn a_port_that_comes_back_later_takes_its_rail_back() {
    let (mut m, gates) = come_back(Back::AddDevice, &[1, 2], &[1]);
    m.handle_removed(1, Millis(3));
    assert_eq!(m.add_device("mlx5_1", &[1, 2], Millis(4)), Some(1));
    serve(&mut m, &[1, 2], Millis(4));
    assert_eq!(state_gen(&gates[&1]), (RailState::Active, 3));
    assert_eq!(state_gen(&gates[&2]), (RailState::Active, 2), "port 2's gate from the first attach follows");
    assert_eq!(m.rails().map(|r| r.name).collect::<Vec<_>>(), ["mlx5_0/1", "mlx5_1/1", "mlx5_1/2"]);
}

proptest! {
    /// Any sequence of comings back with any ports: a port's rail is
    /// attached once per coming back that has it (its generation counts
    /// them), a gate taken once follows it for good, every rail is listed
    /// once, and the machine finds exactly the ports the device has now.
    #[test]
    fn generations_count_the_attaches_of_each_port(
        portsets in prop::collection::vec(prop::collection::btree_set(1u8..=5, 1..=4), 1..8),
        ways in prop::collection::vec(0u8..3, 8),
    ) {
        let mut m = machine();
        let mut attaches: BTreeMap<u8, u64> = BTreeMap::new();
        let mut gates: BTreeMap<u8, Gate> = BTreeMap::new();
        let mut now = 0;
        for (i, set) in portsets.iter().enumerate() {
            let ports: Vec<u8> = set.iter().copied().collect();
            if i > 0 {
                match ways[i] {
                    0 => {
                        m.handle_removed(0, Millis(now));
                        serve(&mut m, &ports, Millis(now));
                        prop_assert_eq!(m.add_device("mlx5_0", &ports, Millis(now)), Some(0));
                    }
                    1 => {
                        m.handle_removed(0, Millis(now));
                        serve(&mut m, &ports, Millis(now));
                        prop_assert_eq!(m.add_device_at(0, "mlx5_0", &ports, Millis(now)), Ok(0));
                    }
                    _ => {
                        m.handle_device_list([], Millis(now));
                        serve(&mut m, &ports, Millis(now));
                        m.handle_device_list(["mlx5_0"], Millis(now));
                    }
                }
            } else {
                prop_assert_eq!(m.add_device("mlx5_0", &ports, Millis(now)), Some(0));
            }
            serve(&mut m, &ports, Millis(now));
            for &p in &ports {
                *attaches.entry(p).or_default() += 1;
                gates.entry(p).or_insert_with(|| m.gate(id(0, p)).expect("a gate"));
            }
            for (&p, &n) in &attaches {
                let active = set.contains(&p);
                let expect = if active { RailState::Active } else { RailState::Inert };
                prop_assert_eq!(state_gen(&gates[&p]), (expect, n), "port {} after {:?}", p, portsets);
                prop_assert_eq!(m.rail(id(0, p)).is_some(), active);
            }
            let names: Vec<&str> = m.rails().map(|r| r.name).collect();
            prop_assert_eq!(names.len(), attaches.len());
            prop_assert_eq!(names.iter().collect::<BTreeSet<_>>().len(), attaches.len());
            now += 1000;
        }
    }
}
