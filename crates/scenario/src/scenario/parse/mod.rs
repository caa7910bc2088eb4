//! TOML → raw serde structs (spans kept) → validated [`Scenario`].

use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;

use railwatch_core::{
    AsyncEvent, Carrier, Element, EventKind, LinkAttrs, ObjectHandle, PortCounters, PortState, SPEEDS, Scope,
    TransferReport, WIDTHS, speed_by_name, width_by_name,
};
use serde::Deserialize;
use toml::{Spanned, Value};

mod expects;

use super::evidence::{self, ProbeOutcome, ProbeStep, RawCounters, RawProbe, RawTransfers};
use super::{
    CarrierChange, CountersChange, DeviceDecl, Fault, GidChange, LinkChange, MAX_DEVICES, MAX_DURATION_MS, MAX_RAILS,
    MAX_REPEAT, MAX_TOTAL_EVENTS, PortStateChange, Scenario, ScenarioError, Step, StepEvent, TransferStep,
};
use expects::{RawExpect, parse_expects};
use railwatch_core::{EventClass, classify};
use railwatch_runtime::Config;

use crate::toml_input::{Lines, SettingError, TopLevel, blame, toml_error, unknown_key};
use railwatch_sim_backend::PortSpec;

/// The scenario's own top-level keys; the settings (`tick_ms`,
/// `[damping]`, …) are read by [`toml_input`], as in a config file. Unknown
/// top-level keys are refused there; nested tables refuse theirs here.
const OWN_KEYS: [&str; 6] = ["name", "description", "duration_ms", "device", "step", "expect"];

#[derive(Deserialize)]
struct RawScenario {
    name: Option<Spanned<String>>,
    description: Option<String>,
    duration_ms: Option<Spanned<i64>>,
    #[serde(default)]
    device: Vec<Spanned<RawDevice>>,
    #[serde(default)]
    step: Vec<Spanned<RawStep>>,
    #[serde(default)]
    expect: Vec<Spanned<RawExpect>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDevice {
    name: Spanned<String>,
    ports: Spanned<Vec<Spanned<RawPort>>>,
    present: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPort {
    port: Spanned<i64>,
    state: Option<Spanned<Value>>,
    speed: Option<Spanned<Value>>,
    width: Option<Spanned<Value>>,
    effective_mbps: Option<Spanned<i64>>,
    gids: Option<Vec<Spanned<RawInitialGid>>>,
    counters: Option<Spanned<RawCounters>>,
    carrier: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawInitialGid {
    index: Spanned<i64>,
    address: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    at_ms: Spanned<i64>,
    device: Spanned<String>,
    port_state: Option<Spanned<RawPortState>>,
    event: Option<Spanned<Value>>,
    port: Option<Spanned<i64>>,
    object: Option<Spanned<i64>>,
    repeat: Option<Spanned<i64>>,
    link: Option<Spanned<RawLink>>,
    fault: Option<Spanned<String>>,
    count: Option<Spanned<i64>>,
    gid: Option<Spanned<RawGid>>,
    counters: Option<Spanned<RawCounters>>,
    carrier: Option<Spanned<RawCarrier>>,
    transfers: Option<Spanned<RawTransfers>>,
    probe: Option<Spanned<RawProbe>>,
    drain: Option<Spanned<bool>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGid {
    port: Spanned<i64>,
    index: Spanned<i64>,
    address: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table { port, state, notify? }")]
struct RawCarrier {
    port: Spanned<i64>,
    state: Spanned<String>,
    notify: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPortState {
    port: Spanned<i64>,
    state: Spanned<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLink {
    port: Spanned<i64>,
    speed: Spanned<Value>,
    width: Spanned<Value>,
    effective_mbps: Option<Spanned<i64>>,
}

const STATE_NAMES: &str = "down, init, armed, active, active_defer, nop or a raw integer code";
const EVENT_HINT: &str = "a snake_case name such as port_err, port_active, comm_est, device_fatal, or a raw code";

struct Ctx<'a> {
    file: &'a str,
    /// A step's line is a binary search, not a count from the top (which
    /// made a big file quadratic).
    lines: Lines,
}

type Res<T> = Result<T, ScenarioError>;

impl<'a> Ctx<'a> {
    fn new(file: &'a str, text: &'a str) -> Self {
        Ctx { file, lines: Lines::new(text) }
    }

    /// The 1-based line of byte `offset`.
    fn line(&self, offset: usize) -> usize {
        self.lines.line(offset)
    }

    fn err(&self, span: Range<usize>, message: impl Into<String>) -> ScenarioError {
        ScenarioError::new(self.file, Some(self.line(span.start)), message)
    }

    fn non_negative(&self, v: &Spanned<i64>, what: &str) -> Res<u64> {
        u64::try_from(*v.get_ref()).map_err(|_| self.err(v.span(), format!("{what} must not be negative")))
    }

    /// A whole number of the `u64` range ([`evidence::u64_value`]).
    fn whole(&self, v: &Spanned<Value>, what: &str) -> Res<u64> {
        evidence::u64_value(v.get_ref()).ok_or_else(|| {
            let shown = match v.get_ref() {
                Value::String(s) => format!("{s:?}"),
                other => other.to_string(),
            };
            self.err(
                v.span(),
                format!(
                    "{what} must be a whole number from 0 to {} (beyond {}, a string of digits), not {shown}",
                    u64::MAX,
                    i64::MAX
                ),
            )
        })
    }

    fn port_num(&self, v: &Spanned<i64>, what: &str) -> Res<u8> {
        match u8::try_from(*v.get_ref()) {
            Ok(p) if p >= 1 => Ok(p),
            _ => Err(self.err(v.span(), format!("{what}port {} out of range (1..=255)", v.get_ref()))),
        }
    }

    fn declared_port(&self, dev: &DeviceDecl, v: &Spanned<i64>, what: &str) -> Res<u8> {
        let port = self.port_num(v, what)?;
        if dev.has_port(port) {
            return Ok(port);
        }
        let declared: Vec<String> = dev.ports.iter().map(|p| p.port.to_string()).collect();
        Err(self.err(
            v.span(),
            format!("{what}device {} has no port {port} (it declares {})", dev.name, declared.join(", ")),
        ))
    }

    /// A name looked up by `by_name`, or a bare integer taken as a raw code.
    fn name_or_code<T>(
        &self,
        v: &Spanned<Value>,
        what: &str,
        names: &str,
        by_name: impl Fn(&str) -> Option<T>,
        by_code: impl Fn(i64) -> Option<T>,
    ) -> Res<T> {
        match v.get_ref() {
            Value::String(s) => {
                by_name(s).ok_or_else(|| self.err(v.span(), format!("unknown {what} \"{s}\" (expected {names})")))
            }
            Value::Integer(i) => by_code(*i).ok_or_else(|| self.err(v.span(), format!("{what} code {i} out of range"))),
            other => {
                Err(self.err(v.span(), format!("{what} must be a name or an integer code, not a {}", other.type_str())))
            }
        }
    }

    fn state(&self, v: &Spanned<Value>) -> Res<PortState> {
        self.name_or_code(v, "port state", STATE_NAMES, PortState::from_name, |i| {
            u32::try_from(i).ok().map(PortState::from_code)
        })
    }

    fn carrier(&self, v: &Spanned<String>, pre: &str) -> Res<Carrier> {
        Carrier::from_name(v.get_ref())
            .ok_or_else(|| self.err(v.span(), format!("{pre}carrier {:?}: use up or down", v.get_ref())))
    }

    fn speed(&self, v: &Spanned<Value>) -> Res<u32> {
        let names = format!("{} or a raw integer code", SPEEDS.map(|s| s.name).join(", "));
        self.name_or_code(v, "speed", &names, |n| speed_by_name(n).map(|s| s.code), |i| u32::try_from(i).ok())
    }

    fn width(&self, v: &Spanned<Value>) -> Res<u8> {
        let names = format!("{} or a raw integer code", WIDTHS.map(|w| w.name).join(", "));
        self.name_or_code(v, "width", &names, |n| width_by_name(n).map(|w| w.code), |i| u8::try_from(i).ok())
    }

    /// A GID table index, 0..=255.
    fn gid_index(&self, v: &Spanned<i64>, prefix: &str) -> Res<u32> {
        match self.non_negative(v, &format!("{prefix}gid index"))? {
            i if i <= 255 => Ok(i as u32),
            i => Err(self.err(v.span(), format!("{prefix}gid index {i} out of range (0..=255)"))),
        }
    }

    /// A GID written as an IPv6 address.
    fn gid_address(&self, v: &Spanned<String>, prefix: &str) -> Res<[u8; 16]> {
        v.get_ref().parse::<std::net::Ipv6Addr>().map(|ip| ip.octets()).map_err(|_| {
            self.err(
                v.span(),
                format!(
                    "{prefix}gid address \"{}\" is not an IPv6 address (\"fe80::1\", \"::ffff:10.1.1.1\")",
                    v.get_ref()
                ),
            )
        })
    }

    /// A `counters` table: each counter a whole number, at least one given.
    fn counters(&self, c: &Spanned<RawCounters>, pre: &str) -> Res<PortCounters> {
        let r = c.get_ref();
        let read = |v: &Option<Spanned<Value>>, key: &str| {
            v.as_ref().map(|v| self.whole(v, &format!("{pre}counters.{key}"))).transpose()
        };
        let counters = PortCounters {
            link_downed: read(&r.link_downed, "link_downed")?,
            carrier_changes: read(&r.carrier_changes, "carrier_changes")?,
            carrier_down: read(&r.carrier_down, "carrier_down")?,
        };
        if !counters.any() {
            return Err(
                self.err(c.span(), format!("{pre}counters gives none of link_downed, carrier_changes, carrier_down"))
            );
        }
        Ok(counters)
    }

    /// A `transfers` table: a declared port, a peer id, a status by name or
    /// code, a count of 1 to 2^32-1 (default 1).
    fn transfers(&self, t: &Spanned<RawTransfers>, dev: &DeviceDecl, pre: &str) -> Res<TransferStep> {
        let r = t.get_ref();
        let port = self.declared_port(dev, &r.port, pre)?;
        let peer = r.peer.as_ref().map(|p| self.whole(p, &format!("{pre}transfers.peer"))).transpose()?;
        let wc_status = evidence::status_code(r.status.get_ref()).ok_or_else(|| {
            self.err(r.status.span(), format!("{pre}transfers.status: expected {}", evidence::status_names()))
        })?;
        let count = match &r.count {
            None => 1,
            Some(c) => match u32::try_from(*c.get_ref()) {
                Ok(n) if n >= 1 => n,
                _ => return Err(self.err(c.span(), format!("{pre}transfers.count must be 1 to {}", u32::MAX))),
            },
        };
        Ok(TransferStep { port, report: TransferReport { peer: peer.unwrap_or(0), wc_status, count } })
    }

    /// A `probe` table: a declared port and an outcome by name.
    fn probe(&self, p: &Spanned<RawProbe>, dev: &DeviceDecl, pre: &str) -> Res<ProbeStep> {
        let r = p.get_ref();
        let port = self.declared_port(dev, &r.port, pre)?;
        let outcome = ProbeOutcome::named(r.outcome.get_ref()).ok_or_else(|| {
            self.err(r.outcome.span(), format!("{pre}probe.outcome: expected success, failure or taken"))
        })?;
        Ok(ProbeStep { port, outcome })
    }

    fn effective(&self, v: Option<&Spanned<i64>>, prefix: &str) -> Res<Option<u64>> {
        let Some(v) = v else { return Ok(None) };
        let mbps = self.non_negative(v, &format!("{prefix}effective_mbps"))?;
        if mbps % 100 != 0 {
            return Err(self.err(
                v.span(),
                format!("{prefix}effective_mbps {mbps} is not a multiple of 100 (devices report units of 100 Mb/s)"),
            ));
        }
        Ok(Some(mbps / 100))
    }

    fn link(&self, speed: u32, width: u8, effective_100mbps: Option<u64>) -> LinkAttrs {
        LinkAttrs { effective_100mbps, ..LinkAttrs::new(speed, width) }
    }

    fn event_code(&self, v: &Spanned<Value>, prefix: &str) -> Res<u32> {
        match v.get_ref() {
            Value::Integer(i) => u32::try_from(*i)
                .map_err(|_| self.err(v.span(), format!("{prefix}event code {i} out of range (0..={})", u32::MAX))),
            Value::String(s) => {
                if let Some(kind) = EventKind::from_name(s) {
                    Ok(kind.code())
                } else if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
                    s.parse::<u32>().map_err(|_| {
                        self.err(v.span(), format!("{prefix}event code {s} out of range (0..={})", u32::MAX))
                    })
                } else {
                    Err(self.err(v.span(), format!("{prefix}unknown event \"{s}\" (expected {EVENT_HINT})")))
                }
            }
            other => Err(self
                .err(v.span(), format!("{prefix}event must be a name or an integer code, not a {}", other.type_str()))),
        }
    }
}

fn default_name(file_name: &str) -> String {
    Path::new(file_name).file_stem().and_then(|s| s.to_str()).filter(|s| !s.is_empty()).unwrap_or(file_name).to_owned()
}

pub(super) fn parse(text: &str, file_name: &str) -> Res<Scenario> {
    let cx = Ctx::new(file_name, text);
    if text.trim().is_empty() {
        return Err(ScenarioError::new(file_name, None, "empty file"));
    }
    if let Some(at) = text.find('\0') {
        return Err(ScenarioError::new(file_name, Some(cx.line(at)), "not a text file (NUL byte)"));
    }
    let config = parse_settings(&cx, text)?;
    let raw: RawScenario = toml::from_str(text).map_err(|e| setting_error(&cx, toml_error(text, &cx.lines, &e)))?;

    let name = match &raw.name {
        Some(n) if n.get_ref().trim().is_empty() => return Err(cx.err(n.span(), "name must not be empty")),
        Some(n) => n.get_ref().clone(),
        None => default_name(file_name),
    };
    let duration_ms = match &raw.duration_ms {
        None => {
            return Err(ScenarioError::new(
                file_name,
                Some(1),
                "missing duration_ms (how long the scenario runs, in virtual ms)",
            ));
        }
        Some(v) => match cx.non_negative(v, "duration_ms")? {
            0 => return Err(cx.err(v.span(), "duration_ms must be at least 1")),
            d if d > MAX_DURATION_MS => {
                return Err(
                    cx.err(v.span(), format!("duration_ms {d} is more than the limit of {MAX_DURATION_MS} (7 days)"))
                );
            }
            d => d,
        },
    };

    let devices = parse_devices(&cx, &raw.device)?;
    let index: HashMap<&str, usize> = devices.iter().enumerate().map(|(i, d)| (d.name.as_str(), i)).collect();
    let steps = parse_steps(&cx, &raw.step, &devices, &index, duration_ms)?;
    // What the whole run queues is bounded, not only each step: every
    // queued event (and every scripted EINTR) costs time, and an event every
    // rail of its device acts on (CQ_ERR, DEVICE_SPEED_CHANGE) costs it once
    // per rail, with a line each.
    let mut total: u64 = 0;
    for step in &steps {
        let eintr = match step.fault {
            Some(Fault::Eintr { count }) => count,
            _ => 0,
        };
        let events = step.event.map_or(0, |e| {
            let kind = e.event.kind();
            let per_rail = classify(kind) == EventClass::Handled && kind.scope() != Scope::Port;
            let weight = if per_rail { devices[step.device_index].ports.len() as u64 } else { 1 };
            e.repeat.saturating_mul(weight)
        });
        total = total.saturating_add(events).saturating_add(eintr);
        if total > MAX_TOTAL_EVENTS {
            return Err(ScenarioError::new(
                file_name,
                Some(step.line),
                format!(
                    "step {}: the scenario queues more than {MAX_TOTAL_EVENTS} events and EINTRs in all \
                     (a device-wide event counts once per port of its device)",
                    step.index
                ),
            ));
        }
    }
    let expects = parse_expects(&cx, &raw.expect, &devices, &index, duration_ms)?;

    Ok(Scenario {
        file: file_name.to_owned(),
        name,
        description: raw.description,
        config,
        duration_ms,
        devices,
        steps,
        expects,
    })
}

/// The settings written at the top level, checked as the monitor will
/// check them, each refusal at the line where the bad key was written.
fn parse_settings(cx: &Ctx<'_>, text: &str) -> Res<Config> {
    let top = TopLevel::parse(text).map_err(|e| setting_error(cx, toml_error(text, &cx.lines, &e)))?;
    if let Some(e) = unknown_key(&top, &OWN_KEYS, &cx.lines) {
        return Err(setting_error(cx, e));
    }
    let mut config = Config::default();
    let written = top.apply(text, &cx.lines, &mut config).map_err(|e| setting_error(cx, e))?;
    if let Err(e) = config.validate_for_monitor() {
        return Err(ScenarioError::new(cx.file, Some(blame(&e, &written).unwrap_or(1)), e.to_string()));
    }
    Ok(config)
}

fn setting_error(cx: &Ctx<'_>, e: SettingError) -> ScenarioError {
    ScenarioError::new(cx.file, Some(e.line), e.to_string())
}

fn parse_devices(cx: &Ctx<'_>, raw: &[Spanned<RawDevice>]) -> Res<Vec<DeviceDecl>> {
    // No device at all is a host with none (a recording of one that never
    // had a device): nothing happens, and that replays.
    if raw.len() > MAX_DEVICES {
        let span = raw[MAX_DEVICES].span();
        return Err(cx.err(span, format!("more than {MAX_DEVICES} devices")));
    }
    let ports: usize = raw.iter().map(|d| d.get_ref().ports.get_ref().len()).sum();
    if ports > MAX_RAILS {
        return Err(ScenarioError::new(cx.file, Some(1), format!("{ports} ports in all; at most {MAX_RAILS}")));
    }
    let mut devices: Vec<DeviceDecl> = Vec::with_capacity(raw.len());
    let mut seen: HashMap<&str, usize> = HashMap::with_capacity(raw.len());
    for d in raw {
        let d = d.get_ref();
        let name = d.name.get_ref();
        if let Some(why) = railwatch_core::device_name_problem(name) {
            return Err(
                cx.err(d.name.span(), format!("invalid device name {}: {why}", railwatch_core::shown_name(name)))
            );
        }
        if let Some(&first) = seen.get(name.as_str()) {
            return Err(cx.err(
                d.name.span(),
                format!("duplicate device name \"{name}\" (first declared on line {})", devices[first].line),
            ));
        }
        seen.insert(name, devices.len());
        let ports_raw = d.ports.get_ref();
        if ports_raw.is_empty() {
            return Err(cx.err(d.ports.span(), format!("device {name} declares no ports")));
        }
        let mut ports: Vec<PortSpec> = Vec::with_capacity(ports_raw.len());
        let mut gids: Option<Vec<GidChange>> = None;
        let mut counters = Vec::new();
        let mut carriers = Vec::new();
        let prefix = format!("device {name}: ");
        for p in ports_raw {
            let p = p.get_ref();
            let port = cx.port_num(&p.port, &prefix)?;
            if ports.iter().any(|x| x.port == port) {
                return Err(cx.err(p.port.span(), format!("{prefix}port {port} declared twice")));
            }
            let state = p.state.as_ref().map(|v| cx.state(v)).transpose()?.unwrap_or(PortState::Active);
            let speed = p.speed.as_ref().map(|v| cx.speed(v)).transpose()?.unwrap_or(PortSpec::NDR);
            let width = p.width.as_ref().map(|v| cx.width(v)).transpose()?.unwrap_or(PortSpec::WIDTH_4X);
            let effective = cx.effective(p.effective_mbps.as_ref(), &prefix)?;
            ports.push(PortSpec::new(port, state, cx.link(speed, width, effective)));
            if let Some(c) = &p.carrier {
                let carrier = cx.carrier(c, &format!("{prefix}port {port}: "))?;
                carriers.push(CarrierChange { port, carrier, notify: false });
            }
            if let Some(c) = &p.counters {
                if c.get_ref().port.is_some() {
                    return Err(cx.err(c.span(), format!("{prefix}port {port}: counters takes no port here")));
                }
                counters.push(CountersChange { port, counters: cx.counters(c, &prefix)? });
            }
            if let Some(list) = &p.gids {
                let table = gids.get_or_insert_with(Vec::new);
                for g in list {
                    let g = g.get_ref();
                    let pre = format!("{prefix}port {port}: ");
                    let index = cx.gid_index(&g.index, &pre)?;
                    if table.iter().any(|x| x.port == port && x.index == index) {
                        return Err(cx.err(g.index.span(), format!("{pre}gid index {index} given twice")));
                    }
                    let gid = Some(cx.gid_address(&g.address, &pre)?);
                    table.push(GidChange { port, index, gid });
                }
            }
        }
        let present = d.present.unwrap_or(true);
        let line = cx.line(d.name.span().start);
        devices.push(DeviceDecl { line, name: name.clone(), ports, gids, present, counters, carriers });
    }
    Ok(devices)
}

fn parse_steps(
    cx: &Ctx<'_>,
    raw: &[Spanned<RawStep>],
    devices: &[DeviceDecl],
    index: &HashMap<&str, usize>,
    duration_ms: u64,
) -> Res<Vec<Step>> {
    let mut steps: Vec<Step> = Vec::with_capacity(raw.len());
    for (i, spanned) in raw.iter().enumerate() {
        let n = i + 1;
        let s = spanned.get_ref();
        let pre = format!("step {n}: ");
        let at_ms = cx.non_negative(&s.at_ms, &format!("{pre}at_ms"))?;
        if at_ms > duration_ms {
            return Err(cx.err(s.at_ms.span(), format!("{pre}at_ms {at_ms} is after duration_ms {duration_ms}")));
        }
        if let Some(prev) = steps.last().filter(|p| p.at_ms > at_ms) {
            return Err(cx.err(
                s.at_ms.span(),
                format!("{pre}at_ms {at_ms} goes backwards (step {} is at {})", prev.index, prev.at_ms),
            ));
        }
        let device_name = s.device.get_ref();
        let Some(&device_index) = index.get(device_name.as_str()) else {
            return Err(cx.err(s.device.span(), format!("{pre}unknown device \"{device_name}\"")));
        };
        let dev = &devices[device_index];

        let port_state = match &s.port_state {
            None => None,
            Some(ps) => {
                let ps = ps.get_ref();
                let port = cx.declared_port(dev, &ps.port, &pre)?;
                let state = cx.state(&ps.state).map_err(|e| prefixed(e, &pre))?;
                Some(PortStateChange { port, state })
            }
        };
        let link = match &s.link {
            None => None,
            Some(l) => {
                let l = l.get_ref();
                let port = cx.declared_port(dev, &l.port, &pre)?;
                let speed = cx.speed(&l.speed).map_err(|e| prefixed(e, &pre))?;
                let width = cx.width(&l.width).map_err(|e| prefixed(e, &pre))?;
                let effective = cx.effective(l.effective_mbps.as_ref(), &pre)?;
                Some(LinkChange { port, link: cx.link(speed, width, effective) })
            }
        };
        let gid = match &s.gid {
            None => None,
            Some(g) => {
                let g = g.get_ref();
                let port = cx.declared_port(dev, &g.port, &pre)?;
                let index = cx.gid_index(&g.index, &pre)?;
                let gid = g.address.as_ref().map(|a| cx.gid_address(a, &pre)).transpose()?;
                Some(GidChange { port, index, gid })
            }
        };
        let counters = match &s.counters {
            None => None,
            Some(c) => {
                let port = match &c.get_ref().port {
                    Some(p) => cx.declared_port(dev, p, &pre)?,
                    None => return Err(cx.err(c.span(), format!("{pre}counters needs the port"))),
                };
                Some(CountersChange { port, counters: cx.counters(c, &pre)? })
            }
        };
        let carrier = match &s.carrier {
            None => None,
            Some(c) => {
                let c = c.get_ref();
                let port = cx.declared_port(dev, &c.port, &pre)?;
                Some(CarrierChange { port, carrier: cx.carrier(&c.state, &pre)?, notify: c.notify.unwrap_or(true) })
            }
        };
        let transfers = s.transfers.as_ref().map(|t| cx.transfers(t, dev, &pre)).transpose()?;
        let probe = s.probe.as_ref().map(|p| cx.probe(p, dev, &pre)).transpose()?;
        let fault = parse_fault(cx, s, &pre)?;
        let event = parse_event(cx, s, dev, &pre)?;
        let drain = s.drain.as_ref().is_some_and(|d| *d.get_ref());
        let something = [port_state.is_some(), link.is_some(), fault.is_some(), event.is_some(), gid.is_some()]
            .into_iter()
            .chain([counters.is_some(), carrier.is_some(), transfers.is_some(), probe.is_some(), drain]);
        if !something.into_iter().any(|g| g) {
            return Err(cx.err(
                spanned.span(),
                format!(
                    "step {n} does nothing: give port_state, link, gid, counters, carrier, transfers, probe, event, \
                     fault or drain"
                ),
            ));
        }
        steps.push(Step {
            index: n,
            line: cx.line(spanned.span().start),
            at_ms,
            device: device_name.clone(),
            device_index,
            port_state,
            link,
            fault,
            event,
            gid,
            counters,
            carrier,
            transfers,
            probe,
            drain,
        });
    }
    Ok(steps)
}

/// Re-issues a name/code error with a step prefix.
fn prefixed(e: ScenarioError, pre: &str) -> ScenarioError {
    ScenarioError::new(e.file(), e.line(), format!("{pre}{}", e.message()))
}

fn parse_fault(cx: &Ctx<'_>, s: &RawStep, pre: &str) -> Res<Option<Fault>> {
    let Some(f) = &s.fault else {
        if let Some(c) = &s.count {
            return Err(cx.err(c.span(), format!("{pre}count only applies to fault = \"eintr\"")));
        }
        return Ok(None);
    };
    let fault = match f.get_ref().as_str() {
        "eintr" => {
            let Some(c) = &s.count else {
                return Err(cx.err(f.span(), format!("{pre}fault \"eintr\" needs count (how many reads fail)")));
            };
            match cx.non_negative(c, &format!("{pre}count"))? {
                0 => return Err(cx.err(c.span(), format!("{pre}count must be at least 1"))),
                n if n > MAX_REPEAT => {
                    return Err(cx.err(c.span(), format!("{pre}count {n} is more than the maximum {MAX_REPEAT}")));
                }
                count => Fault::Eintr { count },
            }
        }
        other => {
            let fault = match other {
                "eio" => Fault::Eio,
                "ebadf" => Fault::Ebadf,
                "remove" => Fault::Remove,
                "restore" => Fault::Restore,
                "unplug" => Fault::Unplug,
                "plug" => Fault::Plug,
                _ => {
                    return Err(cx.err(
                        f.span(),
                        format!(
                            "{pre}unknown fault \"{other}\" (expected eintr, eio, ebadf, remove, restore, unplug or plug)"
                        ),
                    ));
                }
            };
            if let Some(c) = &s.count {
                return Err(cx.err(c.span(), format!("{pre}count only applies to fault = \"eintr\"")));
            }
            fault
        }
    };
    Ok(Some(fault))
}

fn parse_event(cx: &Ctx<'_>, s: &RawStep, dev: &DeviceDecl, pre: &str) -> Res<Option<StepEvent>> {
    let Some(ev) = &s.event else {
        for (key, span) in [
            ("port", s.port.as_ref().map(|v| v.span())),
            ("object", s.object.as_ref().map(|v| v.span())),
            ("repeat", s.repeat.as_ref().map(|v| v.span())),
        ] {
            if let Some(span) = span {
                return Err(cx.err(span, format!("{pre}{key} without event")));
            }
        }
        return Ok(None);
    };
    let code = cx.event_code(ev, pre)?;
    let kind = EventKind::from_code(code);
    let name = kind.name();
    let element = match (&s.port, &s.object) {
        (Some(p), Some(_)) => return Err(cx.err(p.span(), format!("{pre}give port or object, not both"))),
        (Some(p), None) => match kind.scope() {
            Scope::Port | Scope::Unknown => Element::Port(u32::from(cx.declared_port(dev, p, pre)?)),
            Scope::Device => {
                return Err(cx.err(p.span(), format!("{pre}event {name} is a device event: it takes no port")));
            }
            Scope::Cq | Scope::Qp | Scope::Srq | Scope::Wq => {
                return Err(cx.err(
                    p.span(),
                    format!("{pre}event {name} is about an object, not a port: use object = <handle>"),
                ));
            }
        },
        (None, Some(o)) => match kind.scope() {
            Scope::Port => {
                return Err(cx.err(o.span(), format!("{pre}event {name} is a port event: give port, not object")));
            }
            Scope::Device => {
                return Err(cx.err(o.span(), format!("{pre}event {name} is a device event: it takes no object")));
            }
            Scope::Cq | Scope::Qp | Scope::Srq | Scope::Wq | Scope::Unknown => {
                Element::Object(ObjectHandle(cx.non_negative(o, &format!("{pre}object"))?))
            }
        },
        (None, None) => match kind.scope() {
            Scope::Port => {
                return Err(cx.err(ev.span(), format!("{pre}event {name} needs port (the port it is for)")));
            }
            Scope::Device | Scope::Unknown => Element::None,
            Scope::Cq | Scope::Qp | Scope::Srq | Scope::Wq => Element::Object(ObjectHandle(0)),
        },
    };
    let repeat = match &s.repeat {
        None => 1,
        Some(r) => match cx.non_negative(r, &format!("{pre}repeat"))? {
            0 => return Err(cx.err(r.span(), format!("{pre}repeat must be at least 1"))),
            n if n > MAX_REPEAT => {
                return Err(cx.err(r.span(), format!("{pre}repeat {n} is more than the maximum {MAX_REPEAT}")));
            }
            n => n,
        },
    };
    Ok(Some(StepEvent { event: AsyncEvent::new(code, element), repeat }))
}
