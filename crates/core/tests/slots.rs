//! Devices at slots the driver chose (`Machine::add_device_at`): empty
//! slots below stay empty and quiet until taken.

use railwatch_core::{Action, DeviceMode, Machine, MachineConfig, Millis, PortState, RailId, RailState, SlotError};

fn machine() -> Machine {
    Machine::new(MachineConfig::default()).expect("the defaults are valid")
}

/// Answers every port query ACTIVE and the rest with nothing.
fn serve(m: &mut Machine, now: Millis) -> Vec<Action> {
    let mut seen = Vec::new();
    while let Some(a) = m.poll_action() {
        match a {
            Action::QueryPort { device, port } => m.handle_port_state(device, port, Ok(PortState::Active), now),
            Action::ReadLink { device, port } => m.handle_link(device, port, Ok(Default::default()), now),
            _ => {}
        }
        seen.push(a);
    }
    seen
}

#[test]
fn a_device_at_slot_two_leaves_zero_and_one_empty_and_unasked() {
    let mut m = machine();
    assert_eq!(m.add_device_at(2, "mlx5_2", &[1], Millis(0)), Ok(2));
    let actions = serve(&mut m, Millis(0));
    assert!(actions.iter().all(|a| !matches!(a, Action::QueryPort { device: 0 | 1, .. } | Action::Open { .. })));
    assert_eq!(m.devices().len(), 3);
    for empty in 0..2 {
        let d = m.device(empty).expect("the slot exists");
        assert_eq!((d.name, d.mode), ("", DeviceMode::Removed));
    }
    assert_eq!(m.rail(RailId { device: 2, port: 1 }).map(|r| r.word.state), Some(RailState::Active));
    // Time passes: nothing is asked about the empty slots.
    m.handle_timeout(Millis(600_000));
    assert!(serve(&mut m, Millis(600_000)).iter().all(|a| !matches!(a, Action::Reopen { device: 0 | 1 })));
}

#[test]
fn an_empty_slot_is_taken_later_and_a_held_one_is_refused() {
    let mut m = machine();
    m.add_device_at(1, "mlx5_1", &[1], Millis(0)).expect("slot 1");
    assert_eq!(m.add_device_at(0, "mlx5_0", &[1, 2], Millis(5)), Ok(0));
    serve(&mut m, Millis(5));
    assert_eq!(m.rail(RailId { device: 0, port: 2 }).map(|r| r.word.state), Some(RailState::Active));
    assert_eq!(m.add_device_at(1, "mlx5_9", &[1], Millis(6)), Err(SlotError::Taken("mlx5_1".into())));
    // add_device after slots appends after the last.
    assert_eq!(m.add_device("mlx5_3", &[1], Millis(7)), Some(2));
}

#[test]
fn a_name_that_left_comes_back_only_at_its_own_slot() {
    let mut m = machine();
    m.add_device_at(3, "mlx5_3", &[1], Millis(0)).expect("slot 3");
    serve(&mut m, Millis(0));
    m.handle_removed(3, Millis(1));
    assert_eq!(m.add_device_at(0, "mlx5_3", &[1], Millis(2)), Err(SlotError::NameElsewhere(3)));
    assert_eq!(m.add_device_at(3, "mlx5_3", &[1], Millis(2)), Ok(3));
    serve(&mut m, Millis(2));
    assert_eq!(m.rail(RailId { device: 3, port: 1 }).map(|r| r.word.state), Some(RailState::Active));
}

#[test]
fn a_device_that_left_comes_back_at_its_index_with_other_ports() {
    let mut m = machine();
    m.add_device_at(2, "mlx5_2", &[1], Millis(0)).expect("slot 2");
    let first = m.add_device("mlx5_5", &[1], Millis(0)).expect("a device");
    serve(&mut m, Millis(0));
    m.handle_removed(2, Millis(1));
    m.handle_removed(first, Millis(1));
    // Back with two ports: the same slot, a rail per port now.
    assert_eq!(m.add_device_at(2, "mlx5_2", &[1, 2], Millis(2)), Ok(2));
    assert_eq!(m.add_device("mlx5_5", &[2], Millis(2)), Some(first), "add_device keeps the index too");
    serve(&mut m, Millis(2));
    assert_eq!(m.rail(RailId { device: 2, port: 2 }).map(|r| r.word.state), Some(RailState::Active));
    assert_eq!(m.rail(RailId { device: first, port: 2 }).map(|r| r.word.state), Some(RailState::Active));
    assert_eq!(m.devices().len(), 4, "no new index for a device that came back");
}

#[test]
fn no_more_than_max_devices_whatever_comes_and_goes() {
    use railwatch_core::MAX_DEVICES;
    let mut m = machine();
    assert_eq!(m.add_device_at(MAX_DEVICES as u32, "mlx5_0", &[1], Millis(0)), Err(SlotError::Full));
    m.add_device_at(MAX_DEVICES as u32 - 2, "last", &[1], Millis(0)).expect("the slot below the last but one");
    assert_eq!(m.add_device("one_more", &[1], Millis(0)), Some(MAX_DEVICES as u32 - 1));
    assert_eq!(m.add_device("over", &[1], Millis(0)), None, "a new name past the bound");
    // A list churning new names adds none; a device that left still comes back.
    m.handle_removed(MAX_DEVICES as u32 - 2, Millis(1));
    for round in 0..3 {
        let name = format!("churn{round}");
        let change = m.handle_device_list(["one_more", name.as_str()], Millis(2 + round));
        assert!(change.appeared.is_empty(), "{name} got an index: {change:?}");
    }
    assert_eq!(m.devices().len(), MAX_DEVICES);
    assert_eq!(m.add_device("last", &[1, 2], Millis(9)), Some(MAX_DEVICES as u32 - 2));
}
