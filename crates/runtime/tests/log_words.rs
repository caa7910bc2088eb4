//! The words of a log request depend on who owns the devices: railwatch
//! closes and re-opens its own; an engine's are taken out of use and
//! re-validated, never closed.

use railwatch_core::{DeviceOwner, Log, Machine, MachineConfig, Millis, PauseReason};
use railwatch_runtime::log_text;

fn words(owner: DeviceOwner, line: Log) -> String {
    let config = MachineConfig { device_owner: owner, ..MachineConfig::default() };
    let mut m = Machine::new(config).expect("valid");
    m.add_device("mlx5_0", &[1], Millis(0));
    log_text(&m, &line).1
}

#[test]
fn a_device_gone_is_closed_or_out_of_use_by_its_owner() {
    let gone = Log::DeviceGone { device: 0, reason: PauseReason::DeviceFatal, retry_at: Millis(1000) };
    assert!(words(DeviceOwner::Railwatch, gone).contains("closed"));
    let engine = words(DeviceOwner::Engine, gone);
    assert!(engine.contains("out of use") && engine.contains("re-validates") && !engine.contains("closed"), "{engine}");
}

#[test]
fn an_attach_is_opened_or_in_use_by_its_owner() {
    let attached = Log::Attached { device: 0 };
    assert!(words(DeviceOwner::Railwatch, attached).contains("opened"));
    assert!(words(DeviceOwner::Engine, attached).contains("in use"));
}
