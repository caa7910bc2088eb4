//! Every metric `watch` exports (docs/METRICS.md), encoded from one
//! published `Values` at scrape time (prometheus-client's `Collector`):
//! a scrape reads one moment of the loop, whole, by construction. Each
//! family is declared here once, name, help and type together, in the
//! order the exposition lists them. Labels `device` and `port` are
//! node_exporter's, so series join with `node_infiniband_*`.

use std::fmt;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;
use railwatch_core::{WC_STATUSES, WcClass};

use super::values::{RailKey, Values};

/// One published record, encoded on a scrape.
#[derive(Debug)]
pub(super) struct Collected(pub(super) Arc<Values>);

/// A series' labels: (name, value) pairs.
type Labels<'a> = Vec<(&'a str, &'a str)>;

/// The labels of a rail: `device` and `port` (its number as text, kept
/// by the caller).
fn rail<'a>(device: &'a str, port: &'a str) -> Labels<'a> {
    vec![("device", device), ("port", port)]
}

/// Encodes one family: its descriptor, then `series`, which writes each
/// of its series through [`Family::gauge`] or [`Family::counter`].
fn family(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    metric_type: MetricType,
    series: impl FnOnce(&mut Family) -> fmt::Result,
) -> fmt::Result {
    // The registry's own register() ends every help with a full stop.
    let help = format!("{help}.");
    let metric = encoder.encode_descriptor(name, &help, unit, metric_type)?;
    series(&mut Family(metric))
}

/// The series of one family being encoded.
struct Family<'a>(MetricEncoder<'a>);

impl Family<'_> {
    fn gauge(&mut self, labels: &Labels, value: i64) -> fmt::Result {
        self.0.encode_family(labels)?.encode_gauge(&value)
    }

    fn counter(&mut self, labels: &Labels, value: u64) -> fmt::Result {
        self.0.encode_family(labels)?.encode_counter::<NoLabelSet, _, u64>(&value, None)
    }

    /// A gauge per rail, where `value` has one.
    fn per_rail(&mut self, v: &Values, value: impl Fn(&super::values::RailGauges) -> Option<i64>) -> fmt::Result {
        for ((device, port), g) in &v.rails {
            if let Some(value) = value(g) {
                self.gauge(&rail(device, &port.to_string()), value)?;
            }
        }
        Ok(())
    }

    /// A counter per rail from `counts`.
    fn per_rail_count<'k>(&mut self, counts: impl Iterator<Item = (&'k RailKey, u64)>) -> fmt::Result {
        for ((device, port), n) in counts {
            self.counter(&rail(device, &port.to_string()), n)?;
        }
        Ok(())
    }
}

impl Collector for Collected {
    fn encode(&self, mut e: DescriptorEncoder) -> fmt::Result {
        let v = &*self.0;
        encode_evidence(&mut e, v)?;
        encode_host(&mut e, v)?;
        family(
            &mut e,
            "railwatch_output_lines_dropped",
            "Lines of watch's output dropped because stdout or stderr was not read fast enough (its queue was full)",
            None,
            MetricType::Counter,
            |f| {
                for (stream, n) in ["stdout", "stderr"].into_iter().zip(v.output_dropped.into_iter().flatten()) {
                    f.counter(&vec![("stream", stream)], n)?;
                }
                Ok(())
            },
        )?;
        encode_rails(&mut e, v)?;
        encode_counted(&mut e, v)?;
        family(&mut e, "railwatch_build", "railwatch's version; the value is always 1", None, MetricType::Info, |f| {
            f.0.encode_info(&vec![("version", v.build.as_str())])
        })
    }
}

/// The evidence beyond the port state: the breaker half-open, silent flaps, breaker
/// trips, probes, peers failing, transfers by status.
fn encode_evidence(e: &mut DescriptorEncoder, v: &Values) -> fmt::Result {
    family(
        e,
        "railwatch_rail_half_open",
        "Whether the data-path breaker is half-open on the rail: its backoff is over and one probe at a time may test the path (the rail stays unavailable until a probe succeeds)",
        None,
        MetricType::Gauge,
        |f| f.per_rail(v, |g| Some(i64::from(g.half_open))),
    )?;
    family(
        e,
        "railwatch_silent_flaps",
        "Flaps no event said: a flap counter (link_downed, carrier_changes) rose with no PORT_ERR",
        None,
        MetricType::Counter,
        |f| f.per_rail_count(v.evidence.iter().map(|(k, ev)| (k, ev.silent_flaps))),
    )?;
    family(
        e,
        "railwatch_breaker_trips",
        "Times the data-path breaker took the rail out (local-path transfer failures through several peers)",
        None,
        MetricType::Counter,
        |f| f.per_rail_count(v.evidence.iter().map(|(k, ev)| (k, ev.breaker_trips))),
    )?;
    encode_probes(e, v)?;
    family(
        e,
        "railwatch_peer_failing",
        "Times transfers through one peer failed against the local path through no other peer (the rail stayed)",
        None,
        MetricType::Counter,
        |f| f.per_rail_count(v.peer_failing.iter().map(|(k, n)| (k, *n))),
    )?;
    family(
        e,
        "railwatch_transfers",
        "Transfers the engine reported on the rail, by completion status and what it says (success, local_path, peer_or_app, consequence, unknown)",
        None,
        MetricType::Counter,
        |f| {
            for ((device, port), ev) in &v.evidence {
                let port = port.to_string();
                let failed =
                    WC_STATUSES.iter().skip(1).map(|s| (s.name, s.class, ev.failed_by_status[s.code as usize]));
                let all = [("success", WcClass::Success, ev.transfers_ok)].into_iter().chain(failed).chain([(
                    "unknown",
                    WcClass::Unknown,
                    ev.failed_unknown,
                )]);
                // A status is a series once it was seen.
                for (status, class, n) in all.filter(|&(_, _, n)| n > 0) {
                    let labels =
                        vec![("device", device.as_str()), ("port", &port), ("status", status), ("class", class.name())];
                    f.counter(&labels, n)?;
                }
            }
            Ok(())
        },
    )
}

/// The half-open breaker's probes, by outcome.
fn encode_probes(e: &mut DescriptorEncoder, v: &Values) -> fmt::Result {
    family(
        e,
        "railwatch_probes_ok",
        "Probes of the half-open data-path breaker that succeeded: each one closed the breaker and re-admitted the rail",
        None,
        MetricType::Counter,
        |f| f.per_rail_count(v.probes_ok.iter().map(|(k, n)| (k, *n))),
    )?;
    family(
        e,
        "railwatch_probes_failed",
        "Probes of the half-open data-path breaker that failed, or were not reported within probe_timeout_ms (timed_out), each re-opening the breaker with the next backoff",
        None,
        MetricType::Counter,
        |f| {
            for (((device, port), timed_out), n) in &v.probes_failed {
                let port = port.to_string();
                let timed_out = if *timed_out { "true" } else { "false" };
                f.counter(&vec![("device", device.as_str()), ("port", &port), ("timed_out", timed_out)], *n)?;
            }
            Ok(())
        },
    )
}

/// The host's condition, the devices it lists, what names each rail.
fn encode_host(e: &mut DescriptorEncoder, v: &Values) -> fmt::Result {
    family(
        e,
        "railwatch_host_degraded",
        "1 when no device is usable: every device left the host or closed at once (a driver reload), one condition of the host, not a failure of each port",
        None,
        MetricType::Gauge,
        |f| f.0.encode_gauge(&i64::from(v.host_degraded)),
    )?;
    family(
        e,
        "railwatch_device_present",
        "Whether the host lists the device: 1 present, 0 left the host (its rails are inert)",
        None,
        MetricType::Gauge,
        |f| {
            for (device, present) in &v.present {
                f.gauge(&vec![("device", device.as_str())], i64::from(*present))?;
            }
            Ok(())
        },
    )?;
    family(
        e,
        "railwatch_rail_info",
        "What names the rail across boots, as labels (node_guid, port_guid, pci_address, netdev, where known); the value is always 1",
        None,
        MetricType::Gauge,
        |f| {
            for ((device, port), g) in &v.rails {
                let port = port.to_string();
                let mut labels = rail(device, &port);
                labels.extend(g.info.iter().map(|(name, value)| (*name, value.as_str())));
                f.gauge(&labels, 1)?;
            }
            Ok(())
        },
    )
}

/// Each rail's gauges.
fn encode_rails(e: &mut DescriptorEncoder, v: &Values) -> fmt::Result {
    family(
        e,
        "railwatch_rail_available",
        "Whether the selector may pick the rail: 1 available, 0 not",
        None,
        MetricType::Gauge,
        |f| f.per_rail(v, |g| Some(i64::from(g.available))),
    )?;
    family(
        e,
        "railwatch_rail_state",
        "The rail's state: 0 active, 1 paused, 2 inert (no usable device)",
        None,
        MetricType::Gauge,
        |f| f.per_rail(v, |g| Some(g.state)),
    )?;
    family(
        e,
        "railwatch_port_state",
        "The port state last read (ibv_port_state, as node_infiniband_state_id: 1 down, 2 init, 3 armed, 4 active, 5 active_defer)",
        None,
        MetricType::Gauge,
        |f| f.per_rail(v, |g| g.port_state),
    )?;
    family(
        e,
        "railwatch_rail_generation",
        "The rail's generation: bumped by every re-activation, re-attach and address change",
        None,
        MetricType::Gauge,
        |f| f.per_rail(v, |g| Some(g.generation)),
    )?;
    let bytes_per_second = Unit::Other("bytes_per_second".to_owned());
    family(
        e,
        "railwatch_link_rate",
        "The link rate seeded into the selector",
        Some(&bytes_per_second),
        MetricType::Gauge,
        |f| f.per_rail(v, |g| g.rate),
    )
}

/// What the loop counts: events, transitions, recoveries, pauses, device
/// totals, unavailable times.
fn encode_counted(e: &mut DescriptorEncoder, v: &Values) -> fmt::Result {
    family(
        e,
        "railwatch_async_events",
        "Async events read from the device (each acknowledged once), by event name",
        None,
        MetricType::Counter,
        |f| {
            for ((device, event), n) in &v.events {
                f.counter(&vec![("device", device.as_str()), ("event", event)], *n)?;
            }
            // COMM_EST is counted by the monitor, not notified (a burst would
            // flood the channel): its series is the device's counter, there
            // from the first one.
            for (device, totals) in v.devices.iter().filter(|(_, t)| t.comm_est > 0) {
                f.counter(&vec![("device", device.as_str()), ("event", "comm_est")], totals.comm_est)?;
            }
            Ok(())
        },
    )?;
    family(
        e,
        "railwatch_transitions",
        "Rail transitions, by the state entered and the cause (the pause reason or the recovery path)",
        None,
        MetricType::Counter,
        |f| {
            for (((device, port), to, cause), n) in &v.transitions {
                let port = port.to_string();
                f.counter(&vec![("device", device.as_str()), ("port", &port), ("to", to), ("cause", cause)], *n)?;
            }
            Ok(())
        },
    )?;
    family(
        e,
        "railwatch_recoveries_by_poll",
        "Rails brought back by the recovery tick: each one a lost PORT_ACTIVE",
        None,
        MetricType::Counter,
        |f| f.per_rail_count(v.recoveries_by_poll.iter().map(|(k, n)| (k, *n))),
    )?;
    family(
        e,
        "railwatch_rail_pauses",
        "Times the rail was paused, whatever the cause (a change of reason while paused is not another pause); there from the rail's attach",
        None,
        MetricType::Counter,
        |f| f.per_rail_count(v.pauses.iter().map(|(k, n)| (k, *n))),
    )?;
    family(
        e,
        "railwatch_read_errors",
        "Drains of the device's async-event fd that stopped on a real read error",
        None,
        MetricType::Counter,
        |f| {
            for (device, totals) in &v.devices {
                f.counter(&vec![("device", device.as_str())], totals.read_errors)?;
            }
            Ok(())
        },
    )?;
    family(
        e,
        "railwatch_reopen_attempts",
        "Attempts to re-open the device after it went away",
        None,
        MetricType::Counter,
        |f| {
            for (device, totals) in &v.devices {
                f.counter(&vec![("device", device.as_str())], totals.reopen_attempts)?;
            }
            Ok(())
        },
    )?;
    family(
        e,
        "railwatch_rail_unavailable",
        "How long a rail stayed unavailable, observed when it comes back",
        Some(&Unit::Seconds),
        MetricType::Histogram,
        |f| {
            for ((device, port), h) in &v.unavailable {
                let port = port.to_string();
                let labels = rail(device, &port);
                f.0.encode_family(&labels)?.encode_histogram::<NoLabelSet>(h.sum, h.count, &h.bounded(), None)?;
            }
            Ok(())
        },
    )
}
