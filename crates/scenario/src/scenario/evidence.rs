//! The scenario keys for evidence beyond the port state: a step's
//! `transfers` (outcomes the engine reports), `probe` (the engine takes the
//! half-open breaker's probe and reports it) and `counters` (a port's flap
//! counters, read with the next port query), and a port's initial
//! `counters`. Parsed, checked and written here; applied by the driver.

use railwatch_core::{PortCounters, TransferReport, WC_STATUSES, wc_name};
use serde::Deserialize;
use toml::{Spanned, Value};

/// A step's `transfers = { port, peer, status, count }`: `count`
/// completions with `status` through `peer`, reported on the rail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransferStep {
    /// The rail's port (declared on the device).
    pub port: u8,
    /// The report line.
    pub report: TransferReport,
}

/// A step's `probe = { port, outcome }`: the engine asks the rail's gate
/// for the half-open breaker's probe. `taken`: it takes it and reports
/// nothing yet (a later step reports it, or it times out). `success`,
/// `failure`: it reports that outcome for the probe it was just granted,
/// or for the one it took earlier (still out); otherwise (refused, none
/// out) it sends nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeStep {
    /// The rail's port (declared on the device).
    pub port: u8,
    /// What the engine reports.
    pub outcome: ProbeOutcome,
}

/// What became of a probe the gate granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeOutcome {
    /// Reported successful.
    Success,
    /// Reported failed.
    Failure,
    /// Taken, not reported by this step.
    Taken,
}

impl ProbeOutcome {
    /// Every outcome, by its name in a scenario file.
    pub const ALL: [(&'static str, ProbeOutcome); 3] =
        [("success", ProbeOutcome::Success), ("failure", ProbeOutcome::Failure), ("taken", ProbeOutcome::Taken)];

    /// Its name in a scenario file.
    pub fn name(self) -> &'static str {
        ProbeOutcome::ALL.iter().find(|(_, o)| *o == self).map_or("taken", |(n, _)| n)
    }

    /// The outcome called `name`.
    pub fn named(name: &str) -> Option<ProbeOutcome> {
        ProbeOutcome::ALL.iter().find(|(n, _)| *n == name).map(|(_, o)| *o)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProbe {
    pub(super) port: Spanned<i64>,
    pub(super) outcome: Spanned<String>,
}

/// The `probe` table as a scenario file writes it.
pub(super) fn write_probe(p: &ProbeStep) -> String {
    format!("probe = {{ port = {}, outcome = \"{}\" }}", p.port, p.outcome.name())
}

/// A step's (or a port's) `counters = { port, link_downed, carrier_changes,
/// carrier_down }`: what a counter read returns from now on (silent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CountersChange {
    /// The port (declared on the device).
    pub port: u8,
    /// The counters.
    pub counters: PortCounters,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTransfers {
    pub(super) port: Spanned<i64>,
    pub(super) peer: Option<Spanned<Value>>,
    pub(super) status: Spanned<Value>,
    pub(super) count: Option<Spanned<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCounters {
    pub(super) port: Option<Spanned<i64>>,
    pub(super) link_downed: Option<Spanned<Value>>,
    pub(super) carrier_changes: Option<Spanned<Value>>,
    pub(super) carrier_down: Option<Spanned<Value>>,
}

/// A whole number of the full `u64` range: a TOML integer (at most
/// `i64::MAX`), or beyond it a string of decimal digits, as
/// [`write_u64`] writes it. `None` when it is neither.
pub(super) fn u64_value(v: &Value) -> Option<u64> {
    match v {
        Value::Integer(i) => u64::try_from(*i).ok(),
        Value::String(s) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => s.parse().ok(),
        _ => None,
    }
}

/// A `u64` as [`u64_value`] reads it: a TOML integer, or a string of digits
/// beyond `i64::MAX` (a peer id, a counter, as the engine or the driver
/// gave it).
pub(super) fn write_u64(v: u64) -> String {
    if i64::try_from(v).is_ok() { v.to_string() } else { format!("\"{v}\"") }
}

/// The names `status` takes, for errors.
pub(super) fn status_names() -> String {
    let names: Vec<&str> = WC_STATUSES.iter().map(|s| s.name).collect();
    format!("{} or a raw ibv_wc_status code", names.join(", "))
}

/// A `status` value: an `ibv_wc_status` name (`"retry_exc_err"`) or a raw
/// code; `None` when it is neither.
pub(super) fn status_code(v: &Value) -> Option<u32> {
    match v {
        Value::String(s) => WC_STATUSES.iter().find(|w| w.name == s).map(|w| w.code),
        Value::Integer(i) => u32::try_from(*i).ok(),
        _ => None,
    }
}

/// The `transfers` table as a scenario file writes it.
pub(super) fn write_transfers(t: &TransferStep) -> String {
    let r = t.report;
    let status = match wc_name(r.wc_status) {
        Some(name) => format!("\"{name}\""),
        None => r.wc_status.to_string(),
    };
    let peer = write_u64(r.peer);
    format!("transfers = {{ port = {}, peer = {peer}, status = {status}, count = {} }}", t.port, r.count)
}

/// The `counters` table as a scenario file writes it (with `port` for a
/// step; without for a port's initial counters).
pub(super) fn write_counters(c: &PortCounters, port: Option<u8>) -> String {
    let mut parts = Vec::new();
    if let Some(p) = port {
        parts.push(format!("port = {p}"));
    }
    for (key, v) in
        [("link_downed", c.link_downed), ("carrier_changes", c.carrier_changes), ("carrier_down", c.carrier_down)]
    {
        if let Some(v) = v {
            parts.push(format!("{key} = {}", write_u64(v)));
        }
    }
    format!("counters = {{ {} }}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_by_name_or_code() {
        assert_eq!(status_code(&Value::String("retry_exc_err".into())), Some(12));
        assert_eq!(status_code(&Value::Integer(99)), Some(99));
        assert_eq!(status_code(&Value::String("retry".into())), None);
        assert_eq!(status_code(&Value::Integer(-1)), None);
        let t = TransferStep { port: 1, report: TransferReport { peer: 7, wc_status: 12, count: 3 } };
        assert_eq!(write_transfers(&t), "transfers = { port = 1, peer = 7, status = \"retry_exc_err\", count = 3 }");
        let c = PortCounters { link_downed: Some(2), carrier_changes: None, carrier_down: Some(1) };
        assert_eq!(write_counters(&c, Some(1)), "counters = { port = 1, link_downed = 2, carrier_down = 1 }");
    }
}
