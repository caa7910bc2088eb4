//! The scenario parser on arbitrary input.
//!
//! - Never panics, whatever the bytes (invalid UTF-8 is skipped: the CLI
//!   refuses it before parsing, in `Scenario::load`).
//! - A refusal is one line naming the file, with a line number inside the
//!   text.
//! - An accepted scenario keeps the parser's promises (steps in time order,
//!   times within `duration_ms`, repeats in `1..=MAX_REPEAT`, ...), and
//!   `to_toml()` re-parses to an equal scenario, line numbers aside
//!   (`Scenario::to_toml` promises exactly that), and is a fixed point.

#![no_main]

use libfuzzer_sys::fuzz_target;
use railwatch_scenario::Scenario;
use railwatch_scenario::scenario::{MAX_DEVICES, MAX_REPEAT};

const FILE: &str = "fuzz.toml";

/// The scenario with every line number zeroed: the only thing `to_toml`
/// does not keep.
fn without_lines(s: &Scenario) -> Scenario {
    let mut s = s.clone();
    s.devices.iter_mut().for_each(|d| d.line = 0);
    s.steps.iter_mut().for_each(|st| st.line = 0);
    s.expects.iter_mut().for_each(|e| e.line = 0);
    s
}

fn check_accepted(text: &str, sc: &Scenario) {
    assert!(sc.config.machine.tick_ms >= 1 && sc.duration_ms >= 1);
    assert!(sc.config.validate().is_ok(), "an accepted scenario has valid settings");
    // No device at all is a host that never had one (a recording of it):
    // then no step or expectation names one (checked below, by index).
    assert!(sc.devices.len() <= MAX_DEVICES);
    assert!(!sc.name.trim().is_empty());
    for d in &sc.devices {
        assert!(!d.ports.is_empty());
        assert!(d.ports.iter().all(|p| p.port >= 1));
    }
    let mut last = 0;
    for (i, st) in sc.steps.iter().enumerate() {
        assert_eq!(st.index, i + 1);
        assert!(st.at_ms >= last && st.at_ms <= sc.duration_ms, "step {} at {}", st.index, st.at_ms);
        last = st.at_ms;
        assert_eq!(sc.devices[st.device_index].name, st.device);
        if let Some(ev) = st.event {
            assert!((1..=MAX_REPEAT).contains(&ev.repeat));
        }
        let _ = st.to_string();
    }
    for e in &sc.expects {
        assert!(e.at_ms <= sc.duration_ms);
        assert!(sc.devices[e.rail.device_index].has_port(e.rail.port));
    }

    let written = sc.to_toml();
    let again = match Scenario::parse(&written, FILE) {
        Ok(again) => again,
        Err(e) => panic!("to_toml() output does not parse: {e}\n--- input ---\n{text}\n--- written ---\n{written}"),
    };
    assert_eq!(
        without_lines(&again),
        without_lines(sc),
        "to_toml() does not round-trip\n--- input ---\n{text}\n--- written ---\n{written}"
    );
    assert_eq!(again.to_toml(), written, "to_toml() is not a fixed point");
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match Scenario::parse(text, FILE) {
        Ok(sc) => check_accepted(text, &sc),
        Err(e) => {
            let shown = e.to_string();
            assert!(!shown.contains('\n'), "a refusal must be one line: {shown:?}");
            assert!(shown.starts_with(FILE), "a refusal names the file: {shown:?}");
            assert_eq!(e.file(), FILE);
            if let Some(line) = e.line() {
                let lines = text.bytes().filter(|&b| b == b'\n').count() + 1;
                assert!((1..=lines).contains(&line), "line {line} outside the text's {lines} lines");
            }
        }
    }
});
