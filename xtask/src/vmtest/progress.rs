//! The results protocol, read while the VM runs: the guest writes line
//! markers to `ttyS1`, which qemu puts in `run/results.txt` (the markers are
//! listed at the top of `xtask/vm/init.sh` and `xtask/vm/lib.sh`):
//!
//! - `BOOT t=S`, `READY t=S`, `SETUP FAIL msg`, `DONE t=S`: the guest's own
//!   progress (S is its uptime);
//! - `CASE name BEGIN t=S` … `CASE name END rc=N t=S`: one case, with in
//!   between its `OUT label line` (a command's output: railwatch's JSON
//!   lines), `STEP label name at=N` (the output had N lines when the case
//!   did something, so the host looks for the reaction after it), `RC label
//!   N`, `TIME what S`, `NOTE text` and `FAIL text`.
//!
//! [`Live`] hands each case over as its `END` arrives, so its verdict is
//! printed while the next one runs.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// One case's lines, between its BEGIN and END.
pub struct CaseRun {
    /// The case's name, as in its BEGIN marker.
    pub name: String,
    /// Guest uptime at BEGIN.
    pub begin: f64,
    /// Guest uptime at END (None: it never ended).
    pub end: Option<f64>,
    /// The case script's exit status, from END.
    pub rc: Option<i32>,
    lines: Vec<String>,
}

/// A case handed over for judging.
pub struct Ended {
    /// Its lines.
    pub run: CaseRun,
    /// Why it is broken without looking further (no END marker, the VM
    /// stopped): a failure before any check.
    pub broken: Option<&'static str>,
}

/// The guest's progress, read from the results file as it grows.
pub struct Live {
    started: Instant,
    results: PathBuf,
    /// Opened once the file exists (qemu creates it).
    file: Option<File>,
    /// Bytes read that do not end a line yet.
    partial: Vec<u8>,
    /// Host instant and guest uptime of each marker.
    boot: Option<(Instant, f64)>,
    ready: Option<(Instant, f64)>,
    done: Option<(Instant, f64)>,
    setup_failed: Option<String>,
    current: Option<CaseRun>,
}

/// The `t=S` of a marker (0 when absent).
fn uptime_of(line: &str) -> f64 {
    line.split_whitespace().find_map(|w| w.strip_prefix("t=")).and_then(|t| t.parse().ok()).unwrap_or(0.0)
}

impl Live {
    /// Progress of a VM started at `started` that writes `results`.
    pub fn new(started: Instant, results: &Path) -> Live {
        Live {
            started,
            results: results.to_path_buf(),
            file: None,
            partial: Vec::new(),
            boot: None,
            ready: None,
            done: None,
            setup_failed: None,
            current: None,
        }
    }

    /// Reads what the guest wrote since the last call; each case that
    /// ended is given to `on_end`.
    pub fn read(&mut self, on_end: &mut dyn FnMut(Ended)) {
        if self.file.is_none() {
            self.file = File::open(&self.results).ok();
        }
        if let Some(f) = &mut self.file {
            let _ = f.read_to_end(&mut self.partial);
        }
        while let Some(nl) = self.partial.iter().position(|&b| b == b'\n') {
            let bytes: Vec<u8> = self.partial.drain(..=nl).collect();
            let text = String::from_utf8_lossy(&bytes);
            if let Some(ended) = self.line(text.trim_end_matches(['\n', '\r']), Instant::now()) {
                on_end(ended);
            }
        }
    }

    /// One marker line, read at `at`; a case that ended with it.
    fn line(&mut self, line: &str, at: Instant) -> Option<Ended> {
        let mut words = line.splitn(4, ' ');
        match (words.next(), words.next(), words.next()) {
            (Some("BOOT"), ..) => {
                self.boot = Some((at, uptime_of(line)));
                eprintln!(
                    "==> vmtest: /init started {:.2} s after qemu (guest uptime {:.2} s)",
                    at.duration_since(self.started).as_secs_f64(),
                    uptime_of(line)
                );
            }
            (Some("READY"), ..) => {
                self.ready = Some((at, uptime_of(line)));
                let since = self.boot.map_or(0.0, |b| uptime_of(line) - b.1);
                eprintln!("==> vmtest: rxe0 ACTIVE on veth0 {since:.2} s after /init started");
            }
            (Some("DONE"), ..) => self.done = Some((at, uptime_of(line))),
            (Some("SETUP"), ..) => self.setup_failed = Some(line.trim_start_matches("SETUP ").to_string()),
            (Some("CASE"), Some(name), Some("BEGIN")) => {
                let unended = self.current.take().map(|run| Ended { run, broken: Some("no END marker") });
                self.current = Some(CaseRun {
                    name: name.to_string(),
                    begin: uptime_of(line),
                    end: None,
                    rc: None,
                    lines: Vec::new(),
                });
                return unended;
            }
            (Some("CASE"), Some(name), Some("END")) => {
                let mut run = self.current.take().filter(|r| r.name == name)?;
                run.end = Some(uptime_of(line));
                run.rc = line.split_whitespace().find_map(|w| w.strip_prefix("rc=")).and_then(|n| n.parse().ok());
                return Some(Ended { run, broken: None });
            }
            _ => {
                if let Some(run) = &mut self.current {
                    run.lines.push(line.to_string());
                }
            }
        }
        None
    }

    /// The case still running when the VM stopped.
    pub fn unfinished(&mut self) -> Option<Ended> {
        let run = self.current.take()?;
        Some(Ended { run, broken: Some("did not end (the VM stopped or was killed)") })
    }

    /// What went wrong in the guest outside the cases, once the VM stopped.
    pub fn problem(&self) -> Option<String> {
        if let Some(setup) = &self.setup_failed {
            Some(format!("guest setup failed: {setup}"))
        } else if self.done.is_none() {
            Some("the VM stopped before the guest said DONE".into())
        } else {
            None
        }
    }

    /// qemu start to `/init`, `/init` to READY (modules, veth, rxe0) and
    /// READY to DONE (the cases), where the markers came.
    pub fn timings(&self) -> [Option<Duration>; 3] {
        let between =
            |from: Option<(Instant, f64)>, to: Option<(Instant, f64)>| Some(to?.0.saturating_duration_since(from?.0));
        [
            self.boot.map(|b| b.0.duration_since(self.started)),
            between(self.boot, self.ready),
            between(self.ready, self.done),
        ]
    }
}

impl CaseRun {
    /// The rest of every line starting with `tag ` (`NOTE`, `FAIL`, `TIME`).
    pub fn all(&self, tag: &str) -> Vec<&str> {
        self.lines.iter().filter_map(|l| l.strip_prefix(tag).and_then(|r| r.strip_prefix(' '))).collect()
    }

    /// Every line of the case, markers and all.
    pub fn lines(&self) -> &[String] {
        &self.lines
    }

    /// The lines of output `label` (`OUT label line`).
    pub fn out(&self, label: &str) -> Vec<&str> {
        self.all("OUT")
            .into_iter()
            .filter_map(|l| match l.split_once(' ') {
                Some((lab, rest)) if lab == label => Some(rest),
                None if l == label => Some(""),
                _ => None,
            })
            .collect()
    }

    /// `STEP label name at=N`: N.
    pub fn step(&self, label: &str, name: &str) -> Option<usize> {
        self.all("STEP").into_iter().find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some(label) && w.next() == Some(name))
                .then(|| w.next()?.strip_prefix("at=")?.parse().ok())
                .flatten()
        })
    }

    /// `RC label N`: N.
    pub fn rc(&self, label: &str) -> Option<i32> {
        self.all("RC").into_iter().find_map(|l| {
            let (lab, n) = l.split_once(' ')?;
            (lab == label).then(|| n.trim().parse().ok()).flatten()
        })
    }

    /// `TIME what S`: S.
    pub fn time(&self, what: &str) -> Option<f64> {
        self.all("TIME").into_iter().find_map(|l| {
            let (w, s) = l.split_once(' ')?;
            (w == what).then(|| s.trim().parse().ok()).flatten()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(live: &mut Live, lines: &[&str]) -> Vec<Ended> {
        lines.iter().filter_map(|l| live.line(l, Instant::now())).collect()
    }

    #[test]
    fn a_case_is_handed_over_at_its_end_with_its_markers() {
        let mut live = Live::new(Instant::now(), Path::new("results.txt"));
        let ended = feed(
            &mut live,
            &[
                "BOOT t=1.5",
                "READY t=3.0",
                "CASE flap BEGIN t=3.1",
                "OUT watch {\"kind\":\"event\"}",
                "OUT watch",
                "STEP watch down at=4",
                "RC watch 0",
                "TIME ip_link_del 0.125",
                "NOTE seen",
                "CASE flap END rc=0 t=5.6",
            ],
        );
        assert_eq!(ended.len(), 1);
        let Ended { run, broken } = &ended[0];
        assert!(broken.is_none());
        assert_eq!((run.name.as_str(), run.begin, run.end, run.rc), ("flap", 3.1, Some(5.6), Some(0)));
        assert_eq!(run.out("watch"), ["{\"kind\":\"event\"}", ""]);
        assert_eq!(run.step("watch", "down"), Some(4));
        assert_eq!(run.step("watch", "up"), None);
        assert_eq!(run.rc("watch"), Some(0));
        assert_eq!(run.time("ip_link_del"), Some(0.125));
        assert_eq!(run.all("NOTE"), ["seen"]);
        assert!(live.problem().is_some(), "no DONE yet");
        feed(&mut live, &["DONE t=6.0"]);
        assert!(live.problem().is_none());
        assert!(live.timings().iter().all(Option::is_some));
    }

    #[test]
    fn a_case_without_end_is_broken_at_the_next_begin_or_when_the_vm_stops() {
        let mut live = Live::new(Instant::now(), Path::new("results.txt"));
        let ended = feed(&mut live, &["CASE a BEGIN t=1", "NOTE x", "CASE b BEGIN t=2"]);
        assert_eq!(ended.len(), 1);
        assert_eq!((ended[0].run.name.as_str(), ended[0].broken), ("a", Some("no END marker")));
        let last = live.unfinished().expect("b never ended");
        assert_eq!(last.run.name, "b");
        assert!(last.broken.is_some());
        assert!(live.unfinished().is_none());
    }

    #[test]
    fn a_setup_failure_is_the_problem() {
        let mut live = Live::new(Instant::now(), Path::new("results.txt"));
        feed(&mut live, &["SETUP FAIL insmod veth", "DONE t=1"]);
        assert_eq!(live.problem().as_deref(), Some("guest setup failed: FAIL insmod veth"));
    }
}
