//! [`Scenario`] → canonical TOML text.

use std::fmt::Write as _;

use railwatch_core::{Element, EventKind, LinkAttrs, LinkRate, PortState, speed_by_code, width_by_code};
use toml::Value;

use super::{Fault, Scenario};

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
    let mut out = String::new();
    let w = &mut out;
    let _ = writeln!(w, "name = {}", quoted(&sc.name));
    if let Some(d) = &sc.description {
        let _ = writeln!(w, "description = {}", quoted(d));
    }
    let _ = writeln!(w, "tick_ms = {}", sc.tick_ms);
    let _ = writeln!(w, "duration_ms = {}", sc.duration_ms);
    let _ = writeln!(w, "settle_ms = {}", sc.settle_ms);
    if let Some(d) = &sc.damping {
        let _ = writeln!(
            w,
            "damping = {{ penalty_per_flap = {:?}, suppress = {:?}, reuse = {:?}, half_life_ms = {}, max_penalty = {:?} }}",
            d.penalty_per_flap, d.suppress, d.reuse, d.half_life_ms, d.max_penalty
        );
    }
    for d in &sc.devices {
        let _ = writeln!(w, "\n[[device]]\nname = {}\nports = [", quoted(&d.name));
        for p in &d.ports {
            let _ = writeln!(w, "    {{ port = {}, state = {}, {} }},", p.port, state(p.state), link(&p.link));
        }
        let _ = writeln!(w, "]");
    }
    for s in &sc.steps {
        let _ = writeln!(w, "\n[[step]]\nat_ms = {}\ndevice = {}", s.at_ms, quoted(&s.device));
        if let Some(ps) = s.port_state {
            let _ = writeln!(w, "port_state = {{ port = {}, state = {} }}", ps.port, state(ps.state));
        }
        if let Some(l) = s.link {
            let _ = writeln!(w, "link = {{ port = {}, {} }}", l.port, link(&l.link));
        }
        if let Some(g) = s.gid {
            let address =
                g.gid.map(|raw| format!(", address = \"{}\"", std::net::Ipv6Addr::from(raw))).unwrap_or_default();
            let _ = writeln!(w, "gid = {{ port = {}, index = {}{address} }}", g.port, g.index);
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
    }
    for e in &sc.expects {
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
    }
    out
}
