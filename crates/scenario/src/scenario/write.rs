//! [`Scenario`] → canonical TOML text.

use std::fmt::Write as _;

use railwatch_core::{Element, EventKind, LinkAttrs, LinkRate, PortState, speed_by_code, width_by_code};
use railwatch_runtime::{Config, SettingKind, SettingValue};
use toml::Value;

use super::{DeviceDecl, Expect, Fault, Scenario, Step, evidence};

fn quoted(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

fn state(s: PortState) -> String {
    match s {
        PortState::Unknown(code) => code.to_string(),
        known => quoted(known.name()),
    }
}

/// `speed = .., width = ..[, effective_mbps = ..]`
fn link(l: &LinkAttrs) -> String {
    let code = l.speed_code();
    let speed = speed_by_code(code).map_or_else(|| code.to_string(), |s| quoted(s.name));
    let width = width_by_code(l.active_width).map_or_else(|| l.active_width.to_string(), |w| quoted(w.name));
    let mut out = format!("speed = {speed}, width = {width}");
    if let Some(eff) = l.effective_100mbps {
        let _ = write!(out, ", effective_mbps = {}", eff.saturating_mul(100));
    }
    out
}

fn gbps(rate: LinkRate) -> String {
    match rate {
        LinkRate::Known { mbps } if mbps % 1000 == 0 => (mbps / 1000).to_string(),
        LinkRate::Known { mbps } => format!("{}", mbps as f64 / 1000.0),
        // Never produced by the parser.
        LinkRate::Unknown => "0".to_owned(),
    }
}

pub(super) fn to_toml(sc: &Scenario) -> String {
    let mut out = header(sc);
    for d in &sc.devices {
        out.push_str(&device(d));
    }
    for s in &sc.steps {
        out.push_str(&step(s));
    }
    for e in &sc.expects {
        out.push_str(&expect(e));
    }
    out
}

/// The top-level keys, `duration_ms` included.
pub(crate) fn header(sc: &Scenario) -> String {
    let mut out = String::new();
    let w = &mut out;
    let _ = writeln!(w, "name = {}", quoted(&sc.name));
    if let Some(d) = &sc.description {
        let _ = writeln!(w, "description = {}", quoted(d));
    }
    let c = &sc.config;
    let _ = writeln!(w, "tick_ms = {}", setting(c, "tick_ms"));
    let _ = writeln!(w, "duration_ms = {}", sc.duration_ms);
    let _ = writeln!(w, "settle_ms = {}", setting(c, "settle_ms"));
    out.push_str(&settings(c));
    out
}

/// One setting's value as TOML.
fn setting(c: &Config, key: &str) -> String {
    match c.get(key) {
        Some(SettingValue::Integer(i)) => i.to_string(),
        // `{:?}`: a float keeps its point (1000.0), so it reads back a float.
        Some(SettingValue::Float(x)) => format!("{x:?}"),
        Some(SettingValue::Bool(b)) => b.to_string(),
        Some(SettingValue::Choice(name)) => quoted(name),
        _ => String::new(),
    }
}

/// Every other setting not at its default, one per line; a section (such
/// as damping) on, as an inline table with all its keys.
fn settings(c: &Config) -> String {
    let defaults = Config::default();
    let mut out = String::new();
    for spec in Config::settings() {
        let key = spec.key;
        if matches!(key, "tick_ms" | "settle_ms") || key.contains('.') {
            continue;
        }
        if spec.kind == SettingKind::Section {
            let prefix = format!("{key}.");
            let keys = || Config::settings().filter(|s| s.key.starts_with(&prefix));
            let on = c.get(key) == Some(SettingValue::Bool(true));
            let same = c.get(key) == defaults.get(key) && keys().all(|s| c.get(s.key) == defaults.get(s.key));
            if same {
                continue;
            }
            if on {
                let inner: Vec<String> = keys()
                    .filter_map(|s| Some(format!("{} = {}", s.key.strip_prefix(&prefix)?, setting(c, s.key))))
                    .collect();
                let _ = writeln!(out, "{key} = {{ {} }}", inner.join(", "));
            } else {
                let _ = writeln!(out, "{key} = false");
            }
        } else if c.get(key) != defaults.get(key) && c.get(key) != Some(SettingValue::Bool(false)) {
            let _ = writeln!(out, "{key} = {}", setting(c, key));
        } else if c.get(key) != defaults.get(key) && spec.kind == SettingKind::Flag {
            let _ = writeln!(out, "{key} = false");
        }
    }
    out
}

fn address(raw: [u8; 16]) -> String {
    quoted(&std::net::Ipv6Addr::from(raw).to_string())
}

/// One `[[device]]` table.
pub(crate) fn device(d: &DeviceDecl) -> String {
    let mut out = String::new();
    let w = &mut out;
    let _ = writeln!(w, "\n[[device]]\nname = {}", quoted(&d.name));
    if !d.present {
        let _ = writeln!(w, "present = false");
    }
    let _ = writeln!(w, "ports = [");
    for p in &d.ports {
        let mut gids = String::new();
        if let Some(table) = &d.gids {
            let entries: Vec<String> = table
                .iter()
                .filter(|g| g.port == p.port)
                .filter_map(|g| g.gid.map(|raw| format!("{{ index = {}, address = {} }}", g.index, address(raw))))
                .collect();
            gids = format!(", gids = [{}]", entries.join(", "));
        }
        let counters = d
            .counters
            .iter()
            .find(|c| c.port == p.port)
            .map(|c| format!(", {}", evidence::write_counters(&c.counters, None)))
            .unwrap_or_default();
        let carrier = d
            .carriers
            .iter()
            .find(|c| c.port == p.port)
            .map(|c| format!(", carrier = {}", quoted(c.carrier.name())))
            .unwrap_or_default();
        let (port, state, link) = (p.port, state(p.state), link(&p.link));
        let _ = writeln!(w, "    {{ port = {port}, state = {state}, {link}{gids}{counters}{carrier} }},");
    }
    let _ = writeln!(w, "]");
    out
}

/// One `[[step]]` table.
pub(crate) fn step(s: &Step) -> String {
    let mut out = String::new();
    let w = &mut out;
    let _ = writeln!(w, "\n[[step]]\nat_ms = {}\ndevice = {}", s.at_ms, quoted(&s.device));
    if s.drain {
        let _ = writeln!(w, "drain = true");
    }
    if let Some(ps) = s.port_state {
        let _ = writeln!(w, "port_state = {{ port = {}, state = {} }}", ps.port, state(ps.state));
    }
    if let Some(l) = s.link {
        let _ = writeln!(w, "link = {{ port = {}, {} }}", l.port, link(&l.link));
    }
    if let Some(g) = s.gid {
        let addr = g.gid.map(|raw| format!(", address = {}", address(raw))).unwrap_or_default();
        let _ = writeln!(w, "gid = {{ port = {}, index = {}{addr} }}", g.port, g.index);
    }
    if let Some(c) = s.counters {
        let _ = writeln!(w, "{}", evidence::write_counters(&c.counters, Some(c.port)));
    }
    if let Some(c) = s.carrier {
        let silent = if c.notify { "" } else { ", notify = false" };
        let _ = writeln!(w, "carrier = {{ port = {}, state = {}{silent} }}", c.port, quoted(c.carrier.name()));
    }
    if let Some(t) = &s.transfers {
        let _ = writeln!(w, "{}", evidence::write_transfers(t));
    }
    if let Some(p) = &s.probe {
        let _ = writeln!(w, "{}", evidence::write_probe(p));
    }
    if let Some(f) = s.fault {
        let _ = writeln!(w, "fault = {}", quoted(f.name()));
        if let Fault::Eintr { count } = f {
            let _ = writeln!(w, "count = {count}");
        }
    }
    if let Some(ev) = s.event {
        match ev.event.kind() {
            EventKind::Unknown(code) => {
                let _ = writeln!(w, "event = {code}");
            }
            kind => {
                let _ = writeln!(w, "event = {}", quoted(kind.name()));
            }
        }
        match ev.event.element {
            Element::Port(p) => {
                let _ = writeln!(w, "port = {p}");
            }
            Element::Object(h) => {
                let _ = writeln!(w, "object = {}", h.0);
            }
            Element::None => {}
        }
        if ev.repeat != 1 {
            let _ = writeln!(w, "repeat = {}", ev.repeat);
        }
    }
    out
}

/// One `[[expect]]` table.
pub(crate) fn expect(e: &Expect) -> String {
    let mut out = String::new();
    let w = &mut out;
    let _ = writeln!(w, "\n[[expect]]\nat_ms = {}\nrail = {}", e.at_ms, quoted(&e.rail.to_string()));
    if let Some(s) = e.state {
        let _ = writeln!(w, "state = {}", quoted(s.name()));
    }
    if let Some(a) = e.available {
        let _ = writeln!(w, "available = {a}");
    }
    if let Some(b) = e.bandwidth {
        let _ = writeln!(w, "bandwidth_gbps = {}", gbps(b));
    }
    if let Some(r) = e.recovered_by {
        let _ = writeln!(w, "recovered_by = {}", quoted(r.name()));
    }
    if let Some(r) = e.reason {
        let _ = writeln!(w, "reason = {}", quoted(r.name()));
    }
    if let Some(h) = e.half_open {
        let _ = writeln!(w, "half_open = {h}");
    }
    if let Some(g) = e.generation {
        let _ = writeln!(w, "generation = {g}");
    }
    out
}
