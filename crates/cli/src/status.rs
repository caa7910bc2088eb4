//! `railwatch status`: every port of every device, read once through
//! libibverbs (no monitor runs), as a table or as JSON lines (docs/JSON.md,
//! "railwatch status --json").
//!
//! Exit codes: 0 every device and port was read (also when there is no RDMA
//! device at all: "no RDMA devices found"), 1 one could not be (said on
//! stderr, naming the device and the call) or listing the devices failed,
//! 2 output that cannot be written.

use std::io::{self, Write};
use std::process::ExitCode;

use railwatch_core::{
    LinkAttrs, LinkRate, PortAddress, PortCounters, PortState, RailIdentity, VerbsPort, speed_by_code, width_by_code,
};
use railwatch_runtime::HostCondition;
use railwatch_runtime::json::{AddressJson, identity_fields};
use railwatch_verbs_backend::VerbsDevice;
use serde::Serialize;

use crate::StatusArgs;
use crate::devices::{self, Failure, NO_DEVICES};
use crate::output::{self, write_failed};

/// One port as `status` shows it.
struct Row {
    rail: String,
    device: String,
    port: u8,
    state: PortState,
    link: LinkAttrs,
    /// `None` when it could not be read (said as a failure).
    address: Option<PortAddress>,
    /// The flap counters (`None` where the driver has none).
    counters: Option<PortCounters>,
    /// What names it across boots (`None` where the backend cannot say).
    identity: Option<RailIdentity>,
}

/// A row as its `rail` line.
#[derive(Serialize)]
struct RailLine<'a> {
    kind: &'static str,
    rail: &'a str,
    device: &'a str,
    port: u8,
    port_state: &'static str,
    port_state_code: u32,
    bandwidth_gbps: Option<f64>,
    speed: Option<&'static str>,
    speed_code: u32,
    width: Option<&'static str>,
    width_code: u8,
    effective_gbps: Option<f64>,
    address: Option<AddressJson<'a>>,
    link_downed: Option<u64>,
    carrier_changes: Option<u64>,
    carrier_down: Option<u64>,
    node_guid: Option<String>,
    port_guid: Option<String>,
    pci_address: Option<&'a str>,
}

/// The closing `status` line.
#[derive(Serialize)]
struct StatusLine<'a> {
    kind: &'static str,
    devices: &'a [String],
    rails: usize,
    errors: usize,
    /// `ok`, or `all_devices_gone` when no device opened.
    host: &'static str,
}

impl Row {
    fn rate(&self) -> LinkRate {
        self.link.rate()
    }

    fn speed_name(&self) -> Option<&'static str> {
        speed_by_code(self.link.speed_code()).map(|s| s.name)
    }

    fn width_name(&self) -> Option<&'static str> {
        width_by_code(self.link.active_width).map(|w| w.name)
    }

    fn line(&self) -> RailLine<'_> {
        let (node_guid, port_guid, pci_address) = identity_fields(self.identity.as_ref());
        RailLine {
            kind: "rail",
            rail: &self.rail,
            device: &self.device,
            port: self.port,
            port_state: self.state.name(),
            port_state_code: self.state.code(),
            bandwidth_gbps: self.rate().as_gbps(),
            speed: self.speed_name(),
            speed_code: self.link.speed_code(),
            width: self.width_name(),
            width_code: self.link.active_width,
            effective_gbps: self.link.effective_100mbps.filter(|&s| s != 0).map(|s| s as f64 / 10.0),
            address: self.address.as_ref().map(AddressJson::of),
            link_downed: self.counters.and_then(|c| c.link_downed),
            carrier_changes: self.counters.and_then(|c| c.carrier_changes),
            carrier_down: self.counters.and_then(|c| c.carrier_down),
            node_guid,
            port_guid,
            pci_address,
        }
    }

    fn human(&self) -> String {
        let state = match self.state {
            PortState::Unknown(_) => self.state.to_string(),
            known => known.ibv_str().to_string(),
        };
        let rate = self.rate().as_gbps().map_or_else(|| "unknown".to_string(), |g| g.to_string());
        let speed = self.speed_name().map_or_else(|| format!("?({})", self.link.speed_code()), str::to_string);
        let width = self.width_name().map_or_else(|| format!("?({})", self.link.active_width), str::to_string);
        let mut line = format!("{:<16} {:<14} {:>9} {:<7} {}", self.rail, state, rate, speed, width);
        if let Some(a) = &self.address {
            let layer = a.link_layer.map_or("?", |l| l.name());
            let netdev = a.netdev.as_deref().map(|n| format!(" on {n}")).unwrap_or_default();
            let gids: Vec<String> = a.gids.iter().map(|g| format!("[{}] {g} ({})", g.index, g.kind.name())).collect();
            line.push_str(&format!("  {layer}{netdev}, lid {}, gids {}", a.lid, gids.join(", ")));
        }
        let (node_guid, port_guid, pci) = identity_fields(self.identity.as_ref());
        let named: Vec<String> = [("node", node_guid), ("port guid", port_guid), ("pci", pci.map(str::to_owned))]
            .into_iter()
            .filter_map(|(what, v)| Some(format!("{what} {}", v?)))
            .collect();
        if !named.is_empty() {
            line.push_str(&format!("; {}", named.join(", ")));
        }
        line
    }
}

/// What `status` read: the devices listed, a row per port read, a failure
/// per device or port that could not be.
pub struct Status {
    names: Vec<String>,
    rows: Vec<Row>,
    failures: Vec<Failure>,
    /// Devices that opened.
    opened: usize,
}

impl Status {
    /// Lists the devices and reads every port of each that opens.
    fn read() -> Result<Status, ExitCode> {
        let names = devices::list()?;
        let mut failures = Vec::new();
        let mut rows = Vec::new();
        let mut opened = 0;
        for mut dev in devices::open_all(&names, &mut failures) {
            opened += 1;
            rows.extend(rows_of(&mut dev, &mut failures));
        }
        Ok(Status { names, rows, failures, opened })
    }

    fn write_json(&self, out: &mut impl Write) -> io::Result<()> {
        for row in &self.rows {
            output::write_json(out, &row.line())?;
        }
        for f in &self.failures {
            output::write_json(out, f)?;
        }
        let status = StatusLine {
            kind: "status",
            devices: &self.names,
            rails: self.rows.len(),
            errors: self.failures.len(),
            host: HostCondition::of(self.opened).name(),
        };
        output::write_json(out, &status)
    }

    fn write_human(&self, out: &mut impl Write) -> io::Result<()> {
        if self.names.is_empty() {
            return writeln!(out, "{NO_DEVICES}");
        }
        if HostCondition::of(self.opened) == HostCondition::AllDevicesGone {
            writeln!(out, "host: every RDMA device gone (none of the {} listed opened)", self.names.len())?;
        }
        if self.rows.is_empty() {
            return Ok(());
        }
        writeln!(out, "{:<16} {:<14} {:>9} {:<7} WIDTH", "RAIL", "PORT STATE", "GB/S", "SPEED")?;
        for row in &self.rows {
            writeln!(out, "{}", row.human())?;
        }
        Ok(())
    }
}

/// Reads every port of an opened device.
fn rows_of(dev: &mut VerbsDevice, failures: &mut Vec<Failure>) -> Vec<Row> {
    let name = dev.name().to_owned();
    let mut rows = Vec::new();
    for port in dev.ports() {
        let read = dev.port_state(port).and_then(|state| Ok((state, dev.link(port)?)));
        match read {
            Ok((state, link)) => {
                let address = dev.address(port).map_err(|e| failures.push(Failure::of_io(&name, port, &e))).ok();
                // Older drivers have none: not a failure.
                let counters = dev.flap_counters(port).ok();
                let identity = dev.identity(port).ok();
                let (rail, device) = (format!("{name}/{port}"), name.clone());
                rows.push(Row { rail, device, port, state, link, address, counters, identity });
            }
            Err(e) => failures.push(Failure::of_io(&name, port, &e)),
        }
    }
    rows
}

/// `railwatch status`: one row per rail of every device.
pub fn run(args: StatusArgs) -> ExitCode {
    let status = match Status::read() {
        Ok(s) => s,
        Err(code) => return code,
    };
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let written = if args.json { status.write_json(&mut out) } else { status.write_human(&mut out) };
    if let Err(e) = written.and_then(|()| out.flush()) {
        return write_failed(&e);
    }
    if status.names.is_empty() && args.json {
        // stdout stays pure JSON; say it to the person too.
        eprintln!("railwatch: {NO_DEVICES}");
    }
    for f in &status.failures {
        eprintln!("{}", f.human());
    }
    if status.failures.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) }
}
