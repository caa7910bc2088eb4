//! The parts of the `railwatch` binary that are a library too, so benches
//! can measure them as `watch` uses them: the Prometheus metrics of
//! `railwatch watch` (docs/METRICS.md), its recorder (`record`,
//! docs/RECORDING.md), and the rule for the files it writes (`outfile`:
//! regular files only), and its local state API (`state`, docs/STATE-API.md).
//!
//! ```
//! let metrics = railwatch_cli::metrics::Metrics::new("0.0.0");
//! let text = metrics.exporter().encode(railwatch_cli::metrics::Format::Prometheus);
//! assert!(text.contains("railwatch_build_info"));
//! ```

pub mod inputlog;
pub mod lineout;
pub mod metrics;
pub mod outfile;
pub mod record;
pub mod state;
pub mod state_client;
