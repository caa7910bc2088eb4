//! `railwatch watch`'s metrics (docs/METRICS.md), one job per file:
//!
//! - `values`: what a scrape reads, every series' value at one moment,
//!   as one immutable record;
//! - [`registry`]: the watch loop's side, building the next record from
//!   the monitor's notifications and snapshots and publishing it whole at
//!   the end of each turn ([`Metrics`]);
//! - `collect`: every metric's name, help and type, encoded from one
//!   record at scrape time (prometheus-client's `Collector`);
//! - [`export`]: the published record in either text format, chosen from
//!   a request's `Accept` header ([`Exporter`], [`Format`]);
//! - [`serve`]: the `/metrics` endpoint (`--metrics-listen`) on threads of
//!   its own ([`Server`]);
//! - [`textfile`]: the file for node_exporter's textfile collector
//!   (`--textfile`), written by a thread of its own ([`TextfileWriter`]);
//! - [`series`]: `simulate --metrics-series`, the registry sampled in
//!   virtual time as a scraper would have stored it, as promtool's
//!   `input_series` ([`Series`]).
//!
//! A scrape takes the published record (a lock held for a pointer's copy)
//! and encodes it on its own thread, into a `String`; the socket or file is
//! written only after it is done. So the watch loop never waits on a
//! scrape, and a scrape never sees half a turn.
//!
//! This module needs no libibverbs; the watch loop that feeds it does.

mod collect;
pub mod export;
pub mod registry;
pub mod series;
pub mod serve;
pub mod textfile;
mod values;

pub use export::{Exporter, Format, OPENMETRICS_CONTENT_TYPE, PROMETHEUS_CONTENT_TYPE};
pub use registry::Metrics;
pub use series::{Series, SeriesError};
pub use serve::{BindError, Server};
pub use textfile::{TEXTFILE_EVERY, TEXTFILE_REFRESH, Textfile, TextfileWriter, write_atomically};
pub use values::{UNAVAILABLE_BUCKETS, bytes_per_second, rail_state_code};
