//! Encoding the registry for a scrape or the text file: the two text
//! formats, the choice between them from an `Accept` header, and reads
//! that never see half a batch of the watch loop's updates.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use prometheus_client::encoding::{prometheus_text, text};
use prometheus_client::registry::Registry;

/// The `Content-Type` of the OpenMetrics text format.
pub const OPENMETRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The `Content-Type` of the Prometheus text format (0.0.4).
pub const PROMETHEUS_CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

/// Which text format to encode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The Prometheus text format, version 0.0.4 (the default).
    Prometheus,
    /// OpenMetrics 1.0 text (ends with `# EOF`).
    OpenMetrics,
}

impl Format {
    /// The format a request's `Accept` header asks for: OpenMetrics when it
    /// lists `application/openmetrics-text` (with a non-zero `q`), else the
    /// Prometheus text format.
    pub fn from_accept(accept: Option<&str>) -> Format {
        let wants_openmetrics = accept.is_some_and(|accept| {
            accept.split(',').any(|range| {
                let mut parts = range.split(';').map(str::trim);
                let media = parts.next().unwrap_or("");
                let refused = parts.any(|p| {
                    p.split_once('=')
                        .is_some_and(|(k, v)| k.trim() == "q" && v.trim().parse::<f64>().is_ok_and(|q| q <= 0.0))
                });
                media.eq_ignore_ascii_case("application/openmetrics-text") && !refused
            })
        });
        if wants_openmetrics { Format::OpenMetrics } else { Format::Prometheus }
    }

    /// Its `Content-Type`.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => PROMETHEUS_CONTENT_TYPE,
            Format::OpenMetrics => OPENMETRICS_CONTENT_TYPE,
        }
    }
}

/// Batches of updates begun plus ended: odd while one is under way. The
/// watch loop counts its batches here ([`crate::metrics::Metrics::batch`]);
/// an encoding that overlapped one is made again.
#[derive(Debug, Default)]
pub(super) struct Batches(AtomicU64);

impl Batches {
    /// A batch begins (the count goes odd).
    pub(super) fn begin(&self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }

    /// It ended (even again).
    pub(super) fn end(&self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }

    fn count(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}

/// The registry, shared with the threads that encode it.
#[derive(Clone)]
pub struct Exporter {
    registry: Arc<Registry>,
    batches: Arc<Batches>,
}

/// How many times an encoding that overlapped a batch of updates is tried
/// (batches take microseconds and come at most a few thousand times a
/// second, so a scrape is answered within milliseconds whatever happens).
const ENCODE_TRIES: usize = 50;

impl Exporter {
    /// A handle on `registry`, whose updates are counted in `batches`.
    pub(super) fn new(registry: Arc<Registry>, batches: Arc<Batches>) -> Exporter {
        Exporter { registry, batches }
    }

    /// The metrics as text in `format`: one that no batch of updates
    /// overlapped (the watch loop's updates are counted, odd while one is
    /// under way), so a rail's series agree with each other; tried up to
    /// 50 times if one did, and the last try returned if they
    /// keep overlapping. The watch loop never waits on it.
    pub fn encode(&self, format: Format) -> String {
        let mut out = String::new();
        for _ in 0..ENCODE_TRIES {
            let before = self.batches.count();
            if before % 2 == 1 {
                thread::sleep(Duration::from_micros(200));
                continue;
            }
            out = self.encode_once(format);
            if self.batches.count() == before {
                return out;
            }
            thread::yield_now();
        }
        if out.is_empty() { self.encode_once(format) } else { out }
    }

    fn encode_once(&self, format: Format) -> String {
        let mut out = String::with_capacity(4096);
        let done = match format {
            Format::Prometheus => prometheus_text::encode(&mut out, &self.registry),
            Format::OpenMetrics => text::encode(&mut out, &self.registry),
        };
        // Writing to a String cannot fail; the encoder's own errors are
        // bugs, and the text so far is still the best answer.
        if let Err(e) = done {
            log::error!("encoding the metrics failed: {e}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_headers_choose_the_format() {
        assert_eq!(Format::from_accept(None), Format::Prometheus);
        assert_eq!(Format::from_accept(Some("text/plain")), Format::Prometheus);
        assert_eq!(Format::from_accept(Some("*/*")), Format::Prometheus);
        assert_eq!(
            Format::from_accept(Some(
                "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4,*/*;q=0.1"
            )),
            Format::OpenMetrics
        );
        assert_eq!(Format::from_accept(Some("application/openmetrics-text; q=0")), Format::Prometheus);
        assert_eq!(Format::from_accept(Some("text/plain, application/OpenMetrics-Text")), Format::OpenMetrics);
        assert!(Format::OpenMetrics.content_type().starts_with("application/openmetrics-text"));
        assert!(Format::Prometheus.content_type().starts_with("text/plain; version=0.0.4"));
    }
}
