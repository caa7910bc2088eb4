//! A stated property of the agent's defaults (docs/STATE-MACHINE.md, the
//! audit): with `audit_ms` at the agent's default, a silent failure of an
//! active rail is detected within 2 s of virtual time, whatever the tick,
//! the other ports and when the failure falls. Silent: no event at all.
//!
//! - a port that goes down and stays down (the PORT_ERR lost): paused;
//! - a flap too quick for any read to see the port down, its events lost,
//!   the flap counter risen: a silent flap (the generation moves);
//! - a flap whose down the audit may or may not catch: one or the other;
//! - a carrier loss with the port still reading ACTIVE (the link message
//!   lost; `port_witness` at its default, `both`): paused, `no_carrier`.
//!
//! Port 1's `link_downed` may start stuck at a legacy width's maximum
//! (gpud #943): it cannot rise, and the carrier's counter witnesses alone.
//!
//! Detected means the rail's first transition out of `active` (to paused,
//! or active to active on a silent flap) at or after the failure.

use std::fmt::Write as _;

use proptest::prelude::*;
use railwatch_core::{AGENT_AUDIT_MS, RailState};
use railwatch_runtime::Happening;
use railwatch_runtime::lines::Record;
use railwatch_scenario::Scenario;
use railwatch_scenario::driver::{self, RunOptions};

/// The bound the property states.
const DETECTED_WITHIN_MS: u64 = 2000;

#[derive(Debug, Clone, Copy)]
enum Failure {
    /// Down, no event, and it stays down.
    Down,
    /// Down for this long, up again, no events; the flap counter rises.
    Flap { down_ms: u64 },
    /// Only the flap counter rises (a flap no read could have seen).
    CounterOnly,
    /// The netdev's carrier goes, silently; the port reads ACTIVE still.
    CarrierLoss,
}

#[derive(Debug, Clone)]
struct Case {
    tick_ms: u64,
    ports: u8,
    /// Announced flaps of the other ports before the failure (noise).
    noise: Vec<(u64, u8)>,
    at_ms: u64,
    failure: Failure,
    /// Port 1's `link_downed` at the start: 0, or stuck at a width's
    /// maximum (it cannot rise; the carrier's counter still does).
    link_downed: u64,
}

fn failure() -> impl Strategy<Value = Failure> {
    prop_oneof![
        Just(Failure::Down),
        (1u64..=1500).prop_map(|down_ms| Failure::Flap { down_ms }),
        Just(Failure::CounterOnly),
        Just(Failure::CarrierLoss),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    let link_downed = prop::sample::select(vec![0, 255, 65_535, u64::from(u32::MAX)]);
    (50u64..=5000, 1u8..=3, prop::collection::vec((1u64..=8000, 2u8..=3), 0..4), 1u64..=10_000, failure(), link_downed)
        .prop_map(|(tick_ms, ports, noise, at_ms, failure, link_downed)| Case {
            tick_ms,
            ports,
            noise,
            at_ms,
            failure,
            link_downed,
        })
}

fn text(c: &Case) -> String {
    let end = c.at_ms + DETECTED_WITHIN_MS + 1000;
    let mut t =
        format!("name = \"silent\"\nduration_ms = {end}\ntick_ms = {}\naudit_ms = {AGENT_AUDIT_MS}\n", c.tick_ms);
    t.push_str("\n[[device]]\nname = \"mlx5_0\"\nports = [\n");
    for p in 1..=c.ports {
        let ld = if p == 1 { c.link_downed } else { 0 };
        let _ = writeln!(
            t,
            "  {{ port = {p}, state = \"active\", carrier = \"up\", counters = {{ link_downed = {ld}, carrier_changes = 0 }} }},"
        );
    }
    t.push_str("]\n");
    let mut steps: Vec<(u64, String)> = Vec::new();
    for &(at, port) in c.noise.iter().filter(|&&(at, p)| p <= c.ports && at + 200 < c.at_ms) {
        let bounce = |state, event| {
            format!("port_state = {{ port = {port}, state = \"{state}\" }}\nevent = \"{event}\"\nport = {port}")
        };
        steps.push((at, bounce("down", "port_err")));
        steps.push((at + 200, bounce("active", "port_active")));
    }
    let risen = if c.link_downed == 0 { 1 } else { c.link_downed };
    let counter = format!("counters = {{ port = 1, link_downed = {risen}, carrier_changes = 2 }}");
    let down = "port_state = { port = 1, state = \"down\" }".to_owned();
    match c.failure {
        Failure::Down => steps.push((c.at_ms, down)),
        Failure::Flap { down_ms } => {
            steps.push((c.at_ms, down));
            steps.push((c.at_ms + down_ms, format!("port_state = {{ port = 1, state = \"active\" }}\n{counter}")));
        }
        Failure::CounterOnly => steps.push((c.at_ms, counter)),
        Failure::CarrierLoss => {
            steps.push((c.at_ms, "carrier = { port = 1, state = \"down\", notify = false }".to_owned()))
        }
    }
    steps.sort_by_key(|(at, _)| *at);
    for (at, body) in steps {
        let _ = write!(t, "\n[[step]]\nat_ms = {at}\ndevice = \"mlx5_0\"\n{body}\n");
    }
    t
}

/// When port 1's rail first left `active` at or after `from`, if it did.
fn detected_at(sc: &Scenario, from: u64) -> Option<u64> {
    let mut first = None;
    driver::run(sc, &RunOptions::default(), |names, record| {
        let Record::Note(n) = record else { return };
        let Happening::Transition { rail, from: RailState::Active, .. } = n.what else { return };
        if names.rail(rail) == "mlx5_0/1" && n.t.0 >= from && first.is_none() {
            first = Some(n.t.0);
        }
    })
    .expect("the run");
    first
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn a_silent_failure_is_detected_within_two_seconds(c in case()) {
        let text = text(&c);
        let sc = Scenario::parse(&text, "silent.toml").unwrap_or_else(|e| panic!("{e}\n{text}"));
        let at = detected_at(&sc, c.at_ms);
        let within = at.is_some_and(|t| t <= c.at_ms + DETECTED_WITHIN_MS);
        prop_assert!(within, "failure at {} ms detected at {at:?}\n{text}", c.at_ms);
    }
}
