//! `simulate --metrics-series`: the metrics a Prometheus server scraping
//! the agent would have stored during a run, as promtool's `input_series`
//! (docs/METRICS.md, "Alerts and dashboards").
//!
//! The run feeds a [`Metrics`] registry exactly as `watch` does (every
//! notification, and a snapshot before the scrapes that follow an
//! instant); at every scrape time, in virtual time, its Prometheus text is
//! read back as a scraper reads it and each series' value appended. The
//! values are written in promtool's expanding notation (`1x40`,
//! `0+1x3`), so a long quiet run stays small; a series that leaves the
//! exposition gets a `stale` marker, as Prometheus writes one.
//!
//! Bounded: a run that would take more than [`MAX_SCRAPES`] scrapes is
//! refused before it starts, and a file that would pass [`MAX_BYTES`]
//! stops the run with an error; neither writes anything.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use railwatch_runtime::lines::Names;
use railwatch_runtime::{Notification, Snapshot};

use super::{Format, Metrics};

/// The most scrapes one run may take (a week at 15 s is 40,320).
pub const MAX_SCRAPES: u64 = 100_000;

/// The largest series file written (64 MiB).
pub const MAX_BYTES: usize = 64 << 20;

/// The `job` label every series gets, as a scrape config names it.
pub const JOB: &str = "railwatch";

/// Parses a scrape interval: a whole number and `ms`, `s`, `m` or `h`
/// (`15s`, `500ms`, `1m`), at least 1 ms. Returns milliseconds.
pub fn parse_interval(text: &str) -> Result<u64, String> {
    let bad = || format!("{text:?} is not an interval: a whole number and ms, s, m or h, such as 15s or 500ms");
    let split = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (number, unit) = text.split_at(split);
    let n: u64 = number.parse().map_err(|_| bad())?;
    let scale = match unit {
        "ms" => 1,
        "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => return Err(bad()),
    };
    match n.checked_mul(scale) {
        Some(0) => Err(format!("{text:?}: the interval must be at least 1ms")),
        Some(ms) => Ok(ms),
        None => Err(bad()),
    }
}

/// An interval as promtool writes a duration (`15s`, `1m`, `250ms`).
pub fn interval_text(ms: u64) -> String {
    match ms {
        ms if ms % 3_600_000 == 0 => format!("{}h", ms / 3_600_000),
        ms if ms % 60_000 == 0 => format!("{}m", ms / 60_000),
        ms if ms % 1000 == 0 => format!("{}s", ms / 1000),
        ms => format!("{ms}ms"),
    }
}

/// Why a series file could not be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SeriesError {
    /// The run would take more than [`MAX_SCRAPES`] scrapes.
    TooManyScrapes {
        /// How many it would take.
        scrapes: u64,
        /// The shortest interval that keeps it within the bound, in ms.
        shortest_ms: u64,
    },
    /// The file would be larger than [`MAX_BYTES`].
    TooLarge {
        /// The virtual time it passed the bound at.
        at_ms: u64,
    },
}

impl std::fmt::Display for SeriesError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SeriesError::TooManyScrapes { scrapes, shortest_ms } => write!(
                f,
                "the run would take {scrapes} scrapes, more than the {MAX_SCRAPES} a series file may hold; \
                 give a --scrape-interval of at least {}",
                interval_text(*shortest_ms)
            ),
            SeriesError::TooLarge { at_ms } => write!(
                f,
                "the series file passed {} MiB at {at_ms} ms of virtual time (a series changing at every scrape); \
                 give a longer --scrape-interval",
                MAX_BYTES >> 20
            ),
        }
    }
}

impl std::error::Error for SeriesError {}

/// A run of equal steps in one series' values, not yet written.
#[derive(Debug, Clone, Copy)]
enum Run {
    /// Nothing yet.
    Empty,
    /// `count` scrapes without the series (`_`).
    Missing { count: u64 },
    /// `start`, then `more` values each `step` apart (`start+stepxmore`).
    Values { start: f64, step: f64, more: u64 },
}

/// One series' values so far.
#[derive(Debug)]
struct Values {
    text: String,
    run: Run,
    /// Present at the last scrape (so the next absence is `stale`).
    present: bool,
}

/// An integer a float holds exactly, for steps promtool adds up exactly.
fn exact_integer(v: f64) -> bool {
    v.fract() == 0.0 && v.abs() < 9.0e15
}

impl Values {
    /// `missing` scrapes that did not have the series.
    fn new(missing: u64) -> Values {
        let run = if missing > 0 { Run::Missing { count: missing } } else { Run::Empty };
        Values { text: String::new(), run, present: false }
    }

    /// Appends `count` scrapes that saw `value` (`None`: not there).
    fn push(&mut self, value: Option<f64>, mut count: u64) {
        if count == 0 {
            return;
        }
        match value {
            None if self.present => {
                self.present = false;
                self.flush();
                self.text.push_str(" stale");
                count -= 1;
                if count > 0 {
                    self.run = Run::Missing { count };
                }
            }
            None => match &mut self.run {
                Run::Missing { count: n } => *n += count,
                _ => {
                    self.flush();
                    self.run = Run::Missing { count };
                }
            },
            Some(v) => {
                self.present = true;
                self.push_value(v);
                if count > 1 {
                    self.push_repeat(count - 1);
                }
            }
        }
    }

    /// One more value.
    fn push_value(&mut self, v: f64) {
        match &mut self.run {
            Run::Values { start, step, more } => {
                let last = *start + *step * *more as f64;
                if *more == 0 && exact_integer(*start) && exact_integer(v) && exact_integer(v - *start) {
                    *step = v - *start;
                    *more = 1;
                    return;
                }
                if v - last == *step && (*step == 0.0 || exact_integer(v)) {
                    *more += 1;
                    return;
                }
                if *more == 1 && *step != 0.0 {
                    // Two values are no climb: the second may start a hold.
                    let (first, second) = (*start, last);
                    self.run = Run::Values { start: first, step: 0.0, more: 0 };
                    self.flush();
                    self.run = Run::Values { start: second, step: 0.0, more: 0 };
                    return self.push_value(v);
                }
            }
            Run::Empty | Run::Missing { .. } => {}
        }
        self.flush();
        self.run = Run::Values { start: v, step: 0.0, more: 0 };
    }

    /// The last value again, `n` more times.
    fn push_repeat(&mut self, n: u64) {
        let Run::Values { start, step, more } = self.run else { return };
        if step == 0.0 {
            self.run = Run::Values { start, step, more: more + n };
        } else {
            // A climb then a hold: the climb's last value starts the hold.
            let last = start + step * more as f64;
            self.run = Run::Values { start, step, more: more - 1 };
            self.flush();
            self.run = Run::Values { start: last, step: 0.0, more: n };
        }
    }

    /// Writes the pending run.
    fn flush(&mut self) {
        let sep = if self.text.is_empty() { "" } else { " " };
        match std::mem::replace(&mut self.run, Run::Empty) {
            Run::Empty => {}
            Run::Missing { count: 1 } => {
                let _ = write!(self.text, "{sep}_");
            }
            Run::Missing { count } => {
                let _ = write!(self.text, "{sep}_x{count}");
            }
            Run::Values { start, more: 0, .. } => {
                let _ = write!(self.text, "{sep}{start}");
            }
            Run::Values { start, step: 0.0, more } => {
                let _ = write!(self.text, "{sep}{start}x{more}");
            }
            Run::Values { start, step, more } if step > 0.0 => {
                let _ = write!(self.text, "{sep}{start}+{step}x{more}");
            }
            Run::Values { start, step, more } => {
                let _ = write!(self.text, "{sep}{start}-{}x{more}", -step);
            }
        }
    }

    /// Bytes written so far (the pending run not counted).
    fn len(&self) -> usize {
        self.text.len()
    }
}

/// `name{labels}` and value of each sample line of a Prometheus text
/// exposition, with `extra` (`instance="…",job="…"`) added to its labels.
fn samples(text: &str, extra: &str) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty() && !l.starts_with('#')) {
        // The value is the last field: labels may hold spaces, values not.
        let Some((series, value)) = line.rsplit_once(' ') else { continue };
        let value = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => match v.parse::<f64>() {
                Ok(v) => v,
                Err(_) => continue,
            },
        };
        let key = match series.strip_suffix('}') {
            Some(open) => format!("{open},{extra}}}"),
            None => format!("{series}{{{extra}}}"),
        };
        out.push((key, value));
    }
    out
}

/// A PromQL string literal's content: `\` and `"` escaped, newlines as `\n`.
fn label_value(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// A YAML single-quoted scalar.
fn yaml_quoted(text: &str) -> String {
    let flat: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    format!("'{}'", flat.replace('\'', "''"))
}

/// A run's metrics as a scraper would have stored them: feed it the run's
/// notifications ([`note`](Self::note)) and, before each instant, the
/// monitor's snapshot ([`sample_before`](Self::sample_before)); then
/// [`finish`](Self::finish) gives the file.
pub struct Series {
    metrics: Metrics,
    name: String,
    interval_ms: u64,
    end_ms: u64,
    /// `instance="…",job="railwatch"`.
    extra: String,
    /// Scrapes taken so far (the next one is at `taken * interval_ms`).
    taken: u64,
    values: BTreeMap<String, Values>,
    /// The last scrape's samples, for scrapes with nothing new before them.
    last: Vec<(String, f64)>,
    /// A note or snapshot came since the last scrape.
    changed: bool,
}

impl Series {
    /// The series of a run of `name` to `end_ms` of virtual time, scraped
    /// every `interval_ms` (at 0, `interval_ms`, … up to `end_ms`),
    /// labelled `instance` = `name` and `job` = [`JOB`]. Refused when that
    /// is more than [`MAX_SCRAPES`] scrapes.
    pub fn new(version: &str, name: &str, interval_ms: u64, end_ms: u64) -> Result<Series, SeriesError> {
        let interval_ms = interval_ms.max(1);
        let scrapes = end_ms / interval_ms + 1;
        if scrapes > MAX_SCRAPES {
            let shortest_ms = end_ms.div_ceil(MAX_SCRAPES - 1).max(1);
            return Err(SeriesError::TooManyScrapes { scrapes, shortest_ms });
        }
        Ok(Series {
            metrics: Metrics::new(version),
            name: name.to_owned(),
            interval_ms,
            end_ms,
            extra: format!("instance=\"{}\",job=\"{JOB}\"", label_value(name)),
            taken: 0,
            values: BTreeMap::new(),
            last: Vec::new(),
            changed: true,
        })
    }

    /// The registry, for what a run feeds it beyond notes and snapshots.
    pub fn metrics(&mut self) -> &mut Metrics {
        &mut self.metrics
    }

    /// One notification of the run, as `watch` counts it.
    pub fn note(&mut self, names: &Names, note: &Notification) {
        self.metrics.note(names, note);
        self.changed = true;
    }

    /// Whether a scrape falls before virtual time `t` that was not taken
    /// yet (only then does [`sample_before`](Self::sample_before) need a
    /// snapshot).
    pub fn due_before(&self, t: u64) -> bool {
        self.next_scrape().is_some_and(|s| s < t)
    }

    /// The time of the next scrape not taken, if the run has one left.
    fn next_scrape(&self) -> Option<u64> {
        let at = self.taken.checked_mul(self.interval_ms)?;
        (at <= self.end_ms).then_some(at)
    }

    /// Virtual time moves to `t`; `snapshot` is the monitor as it stands
    /// until then: every scrape before `t` sees it.
    pub fn sample_before(&mut self, t: u64, snapshot: &Snapshot) -> Result<(), SeriesError> {
        self.metrics.update(snapshot);
        self.changed = true;
        self.scrape_until(t)
    }

    /// The run is over at `snapshot`: the scrapes left are taken (through
    /// the end), and the file is returned.
    pub fn finish(mut self, snapshot: &Snapshot) -> Result<String, SeriesError> {
        self.metrics.update(snapshot);
        self.changed = true;
        self.scrape_until(self.end_ms.saturating_add(1))?;
        Ok(self.render())
    }

    /// Takes every scrape before `t`.
    fn scrape_until(&mut self, t: u64) -> Result<(), SeriesError> {
        let Some(first) = self.next_scrape().filter(|&s| s < t) else { return Ok(()) };
        let last_due = (t - 1).min(self.end_ms) / self.interval_ms;
        let count = last_due + 1 - self.taken;
        if self.changed {
            let text = self.metrics.exporter().encode(Format::Prometheus);
            self.last = samples(&text, &self.extra);
            self.last.push((format!("up{{{}}}", self.extra), 1.0));
            self.changed = false;
        }
        let taken = self.taken;
        let mut seen = std::collections::HashSet::with_capacity(self.last.len());
        for (key, value) in &self.last {
            seen.insert(key.as_str());
            self.values.entry(key.clone()).or_insert_with(|| Values::new(taken)).push(Some(*value), count);
        }
        for (key, values) in self.values.iter_mut() {
            if !seen.contains(key.as_str()) {
                values.push(None, count);
            }
        }
        self.taken += count;
        let bytes: usize = self.values.iter().map(|(k, v)| k.len() + v.len() + 40).sum();
        if bytes > MAX_BYTES {
            return Err(SeriesError::TooLarge { at_ms: first });
        }
        Ok(())
    }

    /// The file: promtool's test layout, with the series and no rules or
    /// assertions yet.
    fn render(mut self) -> String {
        let interval = interval_text(self.interval_ms);
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# The metrics railwatch would have exported during the scenario {}, as a\n\
             # Prometheus server scraping it every {interval} would have stored them: {} scrapes,\n\
             # 0 to {} ms of virtual time; each series labelled instance and job as a scrape\n\
             # labels it, and `up` 1 at every scrape. Written by `railwatch simulate\n\
             # --metrics-series`. Add `rule_files` and the test's `alert_rule_test` or\n\
             # `promql_expr_test`, then run `promtool test rules` on it (docs/METRICS.md,\n\
             # \"Alerts and dashboards\").",
            self.name.replace(['\n', '\r'], " "),
            self.taken,
            self.end_ms
        );
        let _ = writeln!(out, "evaluation_interval: {interval}");
        let _ = writeln!(out, "tests:");
        let _ = writeln!(out, "  - name: {}", yaml_quoted(&self.name));
        let _ = writeln!(out, "    interval: {interval}");
        let _ = writeln!(out, "    input_series:");
        for (key, values) in self.values.iter_mut() {
            if let Run::Missing { .. } = values.run {
                // Trailing absences say nothing.
                values.run = Run::Empty;
            }
            values.flush();
            let _ = writeln!(out, "      - series: {}", yaml_quoted(key));
            let _ = writeln!(out, "        values: {}", yaml_quoted(values.text.trim_start()));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(pushes: &[(Option<f64>, u64)]) -> String {
        let mut v = Values::new(0);
        for &(value, count) in pushes {
            v.push(value, count);
        }
        if let Run::Missing { .. } = v.run {
            v.run = Run::Empty;
        }
        v.flush();
        v.text
    }

    #[test]
    fn values_use_the_expanding_notation() {
        assert_eq!(values(&[(Some(1.0), 5)]), "1x4");
        assert_eq!(values(&[(Some(1.0), 1)]), "1");
        assert_eq!(values(&[(Some(1.0), 3), (Some(0.0), 2), (Some(1.0), 1)]), "1x2 0x1 1");
        // A counter climbing by one a scrape, then holding.
        assert_eq!(
            values(&[(Some(0.0), 1), (Some(1.0), 1), (Some(2.0), 1), (Some(3.0), 1), (Some(3.0), 2)]),
            "0+1x3 3x1"
        );
        assert_eq!(values(&[(Some(0.0), 1), (Some(1.0), 1), (Some(2.0), 3)]), "0+1x1 2x2");
        assert_eq!(values(&[(Some(0.0), 1), (Some(1.0), 4)]), "0 1x3");
        // A gauge going down and up is values and holds, not steps.
        assert_eq!(values(&[(Some(1.0), 1), (Some(0.0), 2), (Some(1.0), 2)]), "1 0x1 1x1");
        assert_eq!(values(&[(Some(4.0), 2), (Some(1.0), 1), (Some(4.0), 2)]), "4x1 1 4x1");
        assert_eq!(values(&[(Some(5.0), 1), (Some(3.0), 1), (Some(1.0), 1)]), "5-2x2");
        // Non-integers compress only when equal.
        assert_eq!(values(&[(Some(0.5), 1), (Some(1.0), 1), (Some(1.5), 1)]), "0.5 1 1.5");
        assert_eq!(values(&[(Some(0.5), 3)]), "0.5x2");
        // Gone: a stale marker, then absences; back again.
        assert_eq!(values(&[(Some(1.0), 2), (None, 3), (Some(1.0), 1)]), "1x1 stale _x2 1");
        assert_eq!(values(&[(Some(1.0), 2), (None, 1), (Some(2.0), 1)]), "1x1 stale 2");
        // Trailing absences are left out.
        assert_eq!(values(&[(Some(1.0), 2), (None, 5)]), "1x1 stale");
        let mut late = Values::new(3);
        late.push(Some(7.0), 2);
        late.flush();
        assert_eq!(late.text, "_x3 7x1");
        let mut one_late = Values::new(1);
        one_late.push(Some(7.0), 1);
        one_late.flush();
        assert_eq!(one_late.text, "_ 7");
    }

    #[test]
    fn samples_are_read_as_a_scraper_reads_them() {
        let text = "# HELP a A.\n# TYPE a gauge\na{device=\"mlx5_0\",port=\"1\"} 1\nb_total 3\nc_bucket{le=\"+Inf\"} 2\nd +Inf\n";
        let got = samples(text, "instance=\"h\",job=\"railwatch\"");
        assert_eq!(
            got,
            vec![
                ("a{device=\"mlx5_0\",port=\"1\",instance=\"h\",job=\"railwatch\"}".to_owned(), 1.0),
                ("b_total{instance=\"h\",job=\"railwatch\"}".to_owned(), 3.0),
                ("c_bucket{le=\"+Inf\",instance=\"h\",job=\"railwatch\"}".to_owned(), 2.0),
                ("d{instance=\"h\",job=\"railwatch\"}".to_owned(), f64::INFINITY),
            ]
        );
    }

    #[test]
    fn intervals_parse_and_print() {
        assert_eq!(parse_interval("15s"), Ok(15_000));
        assert_eq!(parse_interval("250ms"), Ok(250));
        assert_eq!(parse_interval("2m"), Ok(120_000));
        assert_eq!(parse_interval("1h"), Ok(3_600_000));
        for bad in ["", "15", "s", "1.5s", "-1s", "15 s", "15sec", "99999999999999999999h"] {
            let e = parse_interval(bad).unwrap_err();
            assert!(e.contains("is not an interval"), "{bad}: {e}");
        }
        assert!(parse_interval("0s").unwrap_err().contains("at least 1ms"));
        assert_eq!(interval_text(15_000), "15s");
        assert_eq!(interval_text(250), "250ms");
        assert_eq!(interval_text(120_000), "2m");
        assert_eq!(interval_text(7_200_000), "2h");
        assert_eq!(interval_text(1_500), "1500ms");
    }

    #[test]
    fn a_run_too_long_for_its_interval_is_refused() {
        let week = 7 * 24 * 3_600_000;
        assert!(Series::new("0", "s", 15_000, week).is_ok());
        let e = Series::new("0", "s", 1000, week).err().unwrap();
        let SeriesError::TooManyScrapes { scrapes, shortest_ms } = e.clone() else { panic!("{e:?}") };
        assert_eq!(scrapes, 604_801);
        assert!(week / shortest_ms < MAX_SCRAPES, "{shortest_ms}");
        assert!(Series::new("0", "s", shortest_ms, week).is_ok());
        assert!(e.to_string().contains("give a --scrape-interval of at least 6049ms"), "{e}");
    }

    #[test]
    fn names_are_quoted_for_promql_and_yaml() {
        assert_eq!(label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(yaml_quoted("it's"), "'it''s'");
        assert_eq!(yaml_quoted("a\nb"), "'a b'");
    }
}
