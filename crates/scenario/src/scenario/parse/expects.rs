//! `[[expect]]` tables: a rail and what must hold for it at a time.

use std::collections::HashMap;

use railwatch_core::{LinkRate, PauseReason, RailState};
use serde::Deserialize;
use toml::{Spanned, Value};

use super::{Ctx, Res};
use crate::scenario::{DeviceDecl, Expect, RailRef, RecoveredBy};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawExpect {
    at_ms: Spanned<i64>,
    rail: Spanned<String>,
    state: Option<Spanned<String>>,
    available: Option<bool>,
    bandwidth_gbps: Option<Spanned<Value>>,
    recovered_by: Option<Spanned<String>>,
    reason: Option<Spanned<String>>,
    half_open: Option<bool>,
    generation: Option<Spanned<i64>>,
}

pub(super) fn parse_expects(
    cx: &Ctx<'_>,
    raw: &[Spanned<RawExpect>],
    devices: &[DeviceDecl],
    index: &HashMap<&str, usize>,
    duration_ms: u64,
) -> Res<Vec<Expect>> {
    let mut expects = Vec::with_capacity(raw.len());
    for (i, spanned) in raw.iter().enumerate() {
        let n = i + 1;
        let e = spanned.get_ref();
        let pre = format!("expect {n}: ");
        let at_ms = cx.non_negative(&e.at_ms, &format!("{pre}at_ms"))?;
        if at_ms > duration_ms {
            return Err(cx.err(e.at_ms.span(), format!("{pre}at_ms {at_ms} is after duration_ms {duration_ms}")));
        }
        let rail = parse_rail(cx, &e.rail, devices, index, &pre)?;
        let state = match &e.state {
            None => None,
            Some(v) => Some(match v.get_ref().as_str() {
                "active" => RailState::Active,
                "paused" => RailState::Paused,
                "inert" => RailState::Inert,
                other => {
                    return Err(cx.err(
                        v.span(),
                        format!("{pre}unknown rail state \"{other}\" (expected active, paused or inert)"),
                    ));
                }
            }),
        };
        let bandwidth = e.bandwidth_gbps.as_ref().map(|v| parse_gbps(cx, v, &pre)).transpose()?;
        let recovered_by = match &e.recovered_by {
            None => None,
            Some(v) => Some(match v.get_ref().as_str() {
                "event" => RecoveredBy::Event,
                "poll" => RecoveredBy::Poll,
                "attach" => RecoveredBy::Attach,
                "probe" => RecoveredBy::Probe,
                other => {
                    return Err(cx.err(
                        v.span(),
                        format!("{pre}unknown recovered_by \"{other}\" (expected event, poll, attach or probe)"),
                    ));
                }
            }),
        };
        let reason = match &e.reason {
            None => None,
            Some(v) => Some(PauseReason::ALL.into_iter().find(|r| r.name() == v.get_ref()).ok_or_else(|| {
                let names: Vec<&str> = PauseReason::ALL.iter().map(|r| r.name()).collect();
                cx.err(v.span(), format!("{pre}unknown reason \"{}\" (expected {})", v.get_ref(), names.join(", ")))
            })?),
        };
        let generation = e.generation.as_ref().map(|g| cx.non_negative(g, &format!("{pre}generation"))).transpose()?;
        let checks = [state.is_some(), e.available.is_some(), bandwidth.is_some(), recovered_by.is_some()];
        if !checks.iter().any(|&c| c) && reason.is_none() && e.half_open.is_none() && generation.is_none() {
            return Err(cx.err(
                spanned.span(),
                format!(
                    "expect {n} checks nothing: give state, available, bandwidth_gbps, recovered_by, reason, \
                     half_open or generation"
                ),
            ));
        }
        expects.push(Expect {
            index: n,
            line: cx.line(spanned.span().start),
            at_ms,
            rail,
            state,
            available: e.available,
            bandwidth,
            recovered_by,
            reason,
            half_open: e.half_open,
            generation,
        });
    }
    Ok(expects)
}

fn parse_rail(
    cx: &Ctx<'_>,
    v: &Spanned<String>,
    devices: &[DeviceDecl],
    index: &HashMap<&str, usize>,
    pre: &str,
) -> Res<RailRef> {
    let text = v.get_ref();
    let bad_form = || cx.err(v.span(), format!("{pre}rail \"{text}\" must be \"device/port\" (like \"mlx5_0/1\")"));
    let (device, port) = text.rsplit_once('/').ok_or_else(bad_form)?;
    // Plain decimal digits, no sign and no leading zero: "d/+1" and "d/01"
    // are typos, refused like any other.
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) || (port.len() > 1 && port.starts_with('0')) {
        return Err(bad_form());
    }
    let port: u64 = port.parse().map_err(|_| bad_form())?;
    let port = match u8::try_from(port) {
        Ok(p) if p >= 1 => p,
        _ => return Err(cx.err(v.span(), format!("{pre}rail \"{text}\": port {port} out of range (1..=255)"))),
    };
    let Some(&device_index) = index.get(device) else {
        return Err(cx.err(v.span(), format!("{pre}unknown rail \"{text}\" (no device {device})")));
    };
    if !devices[device_index].has_port(port) {
        return Err(cx.err(v.span(), format!("{pre}unknown rail \"{text}\" (device {device} has no port {port})")));
    }
    Ok(RailRef { device: device.to_owned(), device_index, port })
}

fn parse_gbps(cx: &Ctx<'_>, v: &Spanned<Value>, pre: &str) -> Res<LinkRate> {
    let gbps = match v.get_ref() {
        Value::Integer(i) => *i as f64,
        Value::Float(f) => *f,
        other => {
            return Err(cx.err(v.span(), format!("{pre}bandwidth_gbps must be a number, not a {}", other.type_str())));
        }
    };
    let mbps = gbps * 1000.0;
    if !mbps.is_finite() || mbps <= 0.0 || (mbps - mbps.round()).abs() > 1e-6 || mbps > u64::MAX as f64 {
        return Err(cx.err(v.span(), format!("{pre}bandwidth_gbps {gbps} must be positive, in whole Mb/s")));
    }
    Ok(LinkRate::Known { mbps: mbps.round() as u64 })
}
