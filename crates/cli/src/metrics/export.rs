//! Encoding the registry for a scrape or the text file: the two text
//! formats, the choice between them from an `Accept` header, and reads
//! that never see half a batch of the watch loop's updates.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

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
    /// The format a request's `Accept` header asks for, by q-value
    /// (RFC 9110 §12.5.1): each format takes the `q` of the most specific
    /// range that matches it (`application/openmetrics-text`, then
    /// `application/*`, then `*/*`; `text/plain`, `text/*`, `*/*`), and the
    /// higher wins. OpenMetrics only when it is named and at least as
    /// wanted as the Prometheus text format, which is the answer to
    /// anything else (no header, a tie through wildcards, nothing
    /// acceptable).
    pub fn from_accept(accept: Option<&str>) -> Format {
        let Some(accept) = accept else { return Format::Prometheus };
        let (mut om, mut prom) = (Wanted::default(), Wanted::default());
        for range in accept.split(',') {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or("").to_ascii_lowercase();
            let q = parts
                .filter_map(|p| p.split_once('='))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
                .map_or(1.0, |(_, v)| v.trim().parse::<f64>().ok().filter(|q| (0.0..=1.0).contains(q)).unwrap_or(0.0));
            let (kind, sub) = media.split_once('/').unwrap_or((media.as_str(), ""));
            match (kind, sub) {
                ("application", "openmetrics-text") => om.offer(3, q),
                ("application", "*") => om.offer(2, q),
                ("text", "plain") => prom.offer(3, q),
                ("text", "*") => prom.offer(2, q),
                ("*", "*") => {
                    om.offer(1, q);
                    prom.offer(1, q);
                }
                _ => {}
            }
        }
        if om.specificity == 3 && om.q > 0.0 && om.q >= prom.q_or_default() {
            Format::OpenMetrics
        } else {
            Format::Prometheus
        }
    }

    /// Its `Content-Type`.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => PROMETHEUS_CONTENT_TYPE,
            Format::OpenMetrics => OPENMETRICS_CONTENT_TYPE,
        }
    }
}

/// How much a format is wanted: the `q` of the most specific range that
/// matched it so far.
#[derive(Debug, Default)]
struct Wanted {
    specificity: u8,
    q: f64,
}

impl Wanted {
    fn offer(&mut self, specificity: u8, q: f64) {
        if specificity > self.specificity || (specificity == self.specificity && q > self.q) {
            *self = Wanted { specificity, q };
        }
    }

    /// Its `q`; a format no range named is acceptable at any `q` (it is
    /// the default), but loses to a named one.
    fn q_or_default(&self) -> f64 {
        if self.specificity == 0 { 0.0 } else { self.q }
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
    recent: Arc<Mutex<[Option<Recent>; 2]>>,
}

/// An encoding lately made, per format: a flood of requests is answered
/// from it, not encoded anew each time.
struct Recent {
    batches: u64,
    at: Instant,
    text: String,
}

/// How long an encoding is reused while no batch of updates began (an
/// update outside a batch, such as a reload's, shows within this).
pub const REUSE_FOR: Duration = Duration::from_millis(250);

/// How many times an encoding that overlapped a batch of updates is tried
/// (batches take microseconds and come at most a few thousand times a
/// second, so a scrape is answered within milliseconds whatever happens).
const ENCODE_TRIES: usize = 50;

impl Exporter {
    /// A handle on `registry`, whose updates are counted in `batches`.
    pub(super) fn new(registry: Arc<Registry>, batches: Arc<Batches>) -> Exporter {
        Exporter { registry, batches, recent: Arc::default() }
    }

    /// The metrics as text in `format`: one that no batch of updates
    /// overlapped (the watch loop's updates are counted, odd while one is
    /// under way), so a rail's series agree with each other; tried up to
    /// 50 times if one did, and the last try returned if they
    /// keep overlapping. The watch loop never waits on it. An encoding
    /// made less than [`REUSE_FOR`] ago with no batch since is reused.
    pub fn encode(&self, format: Format) -> String {
        let slot = usize::from(format == Format::OpenMetrics);
        let before = self.batches.count();
        let recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(r) = &recent[slot] {
            if r.batches == before && r.at.elapsed() < REUSE_FOR {
                return r.text.clone();
            }
        }
        drop(recent);
        let at = Instant::now();
        let (text, batches) = self.encode_whole(format);
        if let Some(batches) = batches {
            let mut recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
            recent[slot] = Some(Recent { batches, at, text: text.clone() });
        }
        text
    }

    /// An encoding no batch overlapped, and the batch count it saw (none
    /// if every try overlapped one).
    fn encode_whole(&self, format: Format) -> (String, Option<u64>) {
        let mut out = String::new();
        for _ in 0..ENCODE_TRIES {
            let before = self.batches.count();
            if before % 2 == 1 {
                thread::sleep(Duration::from_micros(200));
                continue;
            }
            out = self.encode_once(format);
            if self.batches.count() == before {
                return (out, Some(before));
            }
            thread::yield_now();
        }
        if out.is_empty() { (self.encode_once(format), None) } else { (out, None) }
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

    /// A flood is answered from one encoding; a batch of updates makes
    /// the next one anew.
    #[test]
    fn an_encoding_is_reused_until_a_batch() {
        use prometheus_client::metrics::counter::Counter;
        let mut registry = Registry::default();
        let counter: Counter = Counter::default();
        registry.register("things", "Things", counter.clone());
        let batches = Arc::new(Batches::default());
        let exporter = Exporter::new(Arc::new(registry), Arc::clone(&batches));
        let first = exporter.encode(Format::Prometheus);
        assert!(first.contains("things_total 0"), "{first}");
        counter.inc(); // outside a batch: the recent encoding still stands
        assert_eq!(exporter.encode(Format::Prometheus), first);
        batches.begin();
        batches.end();
        assert!(exporter.encode(Format::Prometheus).contains("things_total 1"));
        assert!(exporter.encode(Format::OpenMetrics).ends_with("# EOF\n"), "one cache per format");
    }

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
        // The q-values decide (the case: text/plain at 1 beats
        // OpenMetrics at 0.1), from any number of headers joined.
        assert_eq!(Format::from_accept(Some("text/plain;q=1,application/openmetrics-text;q=0.1")), Format::Prometheus);
        assert_eq!(Format::from_accept(Some("text/plain;q=0.1, application/openmetrics-text")), Format::OpenMetrics);
        assert_eq!(Format::from_accept(Some("text/*;q=0.9, application/openmetrics-text;q=0.95")), Format::OpenMetrics);
        assert_eq!(Format::from_accept(Some("application/*")), Format::Prometheus);
        assert_eq!(Format::from_accept(Some("application/openmetrics-text;q=bogus")), Format::Prometheus);
        assert_eq!(Format::from_accept(Some("application/openmetrics-text;q=7")), Format::Prometheus);
        // Prometheus's own header.
        assert_eq!(
            Format::from_accept(Some(
                "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
            )),
            Format::OpenMetrics
        );
        assert!(Format::OpenMetrics.content_type().starts_with("application/openmetrics-text"));
        assert!(Format::Prometheus.content_type().starts_with("text/plain; version=0.0.4"));
    }
}
