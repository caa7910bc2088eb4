//! Encoding the metrics for a scrape or the text file: the record the
//! watch loop published, in either text format, chosen from an `Accept`
//! header.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use prometheus_client::encoding::{prometheus_text, text};
use prometheus_client::registry::Registry;

use super::collect::Collected;
use super::values::Values;

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

/// The record scrapes read: replaced whole by the watch loop at the end
/// of each turn, taken whole by an encoding (a lock held for a pointer's
/// copy, never while encoding, so the loop never waits on a scrape).
#[derive(Debug)]
pub(super) struct Published(Mutex<Arc<Values>>);

impl Published {
    pub(super) fn new(values: Values) -> Published {
        Published(Mutex::new(Arc::new(values)))
    }

    /// `values` is what scrapes read from now on.
    pub(super) fn replace(&self, values: Values) {
        let values = Arc::new(values);
        // The old record is dropped outside the lock.
        let _old = std::mem::replace(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner), values);
    }

    fn current(&self) -> Arc<Values> {
        Arc::clone(&self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// The published metrics, for the threads that encode them.
#[derive(Clone)]
pub struct Exporter {
    published: Arc<Published>,
    recent: Arc<Mutex<[Option<Recent>; 2]>>,
}

/// An encoding lately made, per format: a flood of requests is answered
/// from it, not encoded anew each time.
struct Recent {
    version: u64,
    at: Instant,
    text: String,
}

/// How long an encoding is reused while nothing new was published.
pub const REUSE_FOR: Duration = Duration::from_millis(250);

impl Exporter {
    /// A handle on what the watch loop publishes in `published`.
    pub(super) fn new(published: Arc<Published>) -> Exporter {
        Exporter { published, recent: Arc::default() }
    }

    /// The metrics as text in `format`: one published record, whole (a
    /// rail's series agree with each other by construction). The watch
    /// loop never waits on it. An encoding of the same record made less
    /// than [`REUSE_FOR`] ago is reused.
    pub fn encode(&self, format: Format) -> String {
        let slot = usize::from(format == Format::OpenMetrics);
        let values = self.published.current();
        {
            let recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(r) = recent[slot].as_ref().filter(|r| r.version == values.version) {
                if r.at.elapsed() < REUSE_FOR {
                    return r.text.clone();
                }
            }
        }
        let at = Instant::now();
        let version = values.version;
        let text = encode_values(values, format);
        let mut recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        recent[slot] = Some(Recent { version, at, text: text.clone() });
        text
    }
}

/// `values` as text in `format`.
fn encode_values(values: Arc<Values>, format: Format) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Collected(values)));
    let mut out = String::with_capacity(8192);
    let done = match format {
        Format::Prometheus => prometheus_text::encode(&mut out, &registry),
        Format::OpenMetrics => text::encode(&mut out, &registry),
    };
    // Writing to a String cannot fail; the encoder's own errors are
    // bugs, and the text so far is still the best answer.
    if let Err(e) = done {
        log::error!("encoding the metrics failed: {e}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A flood is answered from one encoding; a record published anew
    /// makes the next one anew.
    #[test]
    fn an_encoding_is_reused_until_a_record_is_published() {
        let published = Arc::new(Published::new(Values { output_dropped: Some([0, 0]), ..Values::default() }));
        let exporter = Exporter::new(Arc::clone(&published));
        let first = exporter.encode(Format::Prometheus);
        assert!(first.contains("railwatch_output_lines_dropped_total{stream=\"stdout\"} 0"), "{first}");
        // Other values under the same version: the recent encoding stands
        // (the version is what says a record is new).
        published.replace(Values { version: 0, output_dropped: Some([5, 0]), ..Values::default() });
        assert_eq!(exporter.encode(Format::Prometheus), first);
        published.replace(Values { version: 1, output_dropped: Some([5, 0]), ..Values::default() });
        assert!(exporter.encode(Format::Prometheus).contains("{stream=\"stdout\"} 5"));
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
