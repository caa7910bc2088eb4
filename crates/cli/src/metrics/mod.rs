//! `railwatch watch`'s metrics (docs/METRICS.md), one job per file:
//!
//! - [`registry`]: a prometheus-client registry, updated by the watch loop
//!   from the monitor's notifications and snapshots ([`Metrics`]);
//! - [`export`]: its encoding in either text format, chosen from a
//!   request's `Accept` header, never half a batch of updates
//!   ([`Exporter`], [`Format`]);
//! - [`serve`]: the `/metrics` endpoint (`--metrics-listen`) on threads of
//!   its own ([`Server`]);
//! - [`textfile`]: the file for node_exporter's textfile collector
//!   (`--textfile`), written by a thread of its own ([`TextfileWriter`]);
//! - [`series`]: `simulate --metrics-series`, the registry sampled in
//!   virtual time as a scraper would have stored it, as promtool's
//!   `input_series` ([`Series`]).
//!
//! The metrics are atomics (a family's label map and a histogram's buckets
//! sit behind short in-memory locks), so the watch loop never waits on a
//! scrape: encoding runs on the serving threads, into a `String`, and the
//! socket or file is written only after it is done.
//!
//! This module needs no libibverbs; the watch loop that feeds it does.

pub mod export;
mod host;
pub mod registry;
pub mod series;
pub mod serve;
pub mod textfile;

pub use export::{Exporter, Format, OPENMETRICS_CONTENT_TYPE, PROMETHEUS_CONTENT_TYPE};
pub use registry::{Metrics, UNAVAILABLE_BUCKETS, bytes_per_second, rail_state_code};
pub use series::{Series, SeriesError};
pub use serve::{BindError, Server};
pub use textfile::{TEXTFILE_EVERY, TEXTFILE_REFRESH, TextfileWriter, write_atomically};
