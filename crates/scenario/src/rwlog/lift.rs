//! A log lifted to a scenario (`railwatch lift`): the log replayed with
//! the scenario recorder watching the replay as it would have watched the
//! live monitor, so the placement rules run here, off the agent's path;
//! then the scenario is run and its transitions held to the log's (the
//! log is the oracle).

use std::fs::File;
use std::io;

use railwatch_core::{Happening, Machine, Millis, Notification};
use railwatch_runtime::Config;

use super::read::{Log, LogError};
use super::replay::{ReplayError, replay_watched};
use crate::driver::{self, RunOptions};
use crate::record::{RailEnd, RecordOptions, Recorder};
use crate::scenario::Scenario;

/// One transition as both runs name it: `mlx5_0/1 active->paused port_err
/// g2`, with its time.
pub type Transition = (u64, String);

/// What a lift made: the transitions of the log's replay, and those of the
/// lifted scenario's run (when it parses and runs).
pub struct Lifted {
    /// The log replayed.
    pub logged: Vec<Transition>,
    /// The scenario run, or why it could not run.
    pub lifted: Result<Vec<Transition>, String>,
}

impl Lifted {
    /// Where the two part, if they do: the first transition that differs
    /// (rail, from, to, cause, generation; not the time, which a scenario
    /// may place a millisecond off where a live wake-up read late), or a
    /// count that differs.
    pub fn difference(&self) -> Option<String> {
        let lifted = match &self.lifted {
            Ok(l) => l,
            Err(e) => return Some(e.clone()),
        };
        let first = self.logged.iter().zip(lifted).position(|(a, b)| a.1 != b.1);
        match first {
            Some(i) => Some(format!(
                "transition {i}: the log's replay has {} ms {}, the scenario {} ms {}",
                self.logged[i].0, self.logged[i].1, lifted[i].0, lifted[i].1
            )),
            None if self.logged.len() != lifted.len() => {
                Some(format!("the log's replay has {} transitions, the scenario {}", self.logged.len(), lifted.len()))
            }
            None => None,
        }
    }
}

fn named(names: impl Fn(railwatch_core::RailId) -> String, note: &Notification) -> Option<Transition> {
    let Happening::Transition { rail, from, to, cause, generation } = note.what else { return None };
    Some((note.t.0, format!("{} {}->{} {} g{generation}", names(rail), from.name(), to.name(), cause.name())))
}

fn rail_name(m: &Machine, rail: railwatch_core::RailId) -> String {
    let device = m.device(rail.device).map(|d| d.name.to_owned()).unwrap_or_default();
    format!("{device}/{}", rail.port)
}

/// Lifts `log` into `file` (new, empty, readable) as a scenario, then runs
/// it and compares.
pub fn lift(log: &Log, file: File, recorded_by: &str) -> Result<Lifted, ReplayError> {
    let machine = log.header.config().map_err(|problem| ReplayError::Log(LogError { line: 1, problem }))?;
    let config = Config { machine, ..Config::default() };
    let opts = RecordOptions {
        recorded_by: recorded_by.to_owned(),
        name: "lifted".to_owned(),
        description: Some(format!("lifted from an input log recorded by {}", log.header.recorded_by)),
        config,
        notes: Vec::new(),
        anonymize: false,
    };
    let io_error = |e: io::Error| ReplayError::Log(LogError { line: 1, problem: format!("writing the scenario: {e}") });
    let mut recorder = Recorder::create_in(file, &opts).map_err(io_error)?;
    let handle = recorder.file_handle().map_err(io_error)?;
    let mut logged = Vec::new();
    let mut woke_once = false;
    let replay =
        replay_watched(log, |m, note| logged.extend(named(|r| rail_name(m, r), note)), &mut |_, now, what| {
            if matches!(what, railwatch_runtime::Observed::Woke) && !std::mem::replace(&mut woke_once, true) {
                // The devices attached before the first wake-up were there
                // at the start.
                recorder.started();
            }
            recorder.observe(now, what);
        })?;
    let end = Millis(replay.end_ms);
    let rails: Vec<RailEnd> = replay
        .machine
        .rails()
        .map(|r| RailEnd {
            id: r.id,
            state: r.word.state,
            available: r.available,
            rate: r.rate,
            recovered_by: r.recovered_by,
        })
        .collect();
    recorder.flush(end).and_then(|_| recorder.finish_rails(end, &rails)).map_err(io_error)?;
    Ok(Lifted { logged, lifted: run_lifted(&handle) })
}

/// The lifted scenario's transitions, run as `simulate` runs it.
fn run_lifted(file: &File) -> Result<Vec<Transition>, String> {
    use std::os::unix::fs::FileExt;
    let mut text = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read_at(&mut buf, text.len() as u64).map_err(|e| format!("reading the scenario back: {e}"))?;
        if n == 0 {
            break;
        }
        text.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8(text).map_err(|e| format!("the scenario is not text: {e}"))?;
    let sc = Scenario::parse(&text, "lifted.toml").map_err(|e| format!("the scenario does not parse: {e}"))?;
    let mut out = Vec::new();
    driver::run_observed(&sc, &RunOptions::default(), None, |names, record| {
        if let railwatch_runtime::lines::Record::Note(note) = record {
            out.extend(named(|r| names.rail(r).to_owned(), note));
        }
    })
    .map_err(|e| format!("the scenario does not run: {e}"))?;
    Ok(out)
}
