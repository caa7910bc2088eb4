//! A log replayed: a fresh machine with the recorded settings and seed is
//! fed every input at its time, and carries out its actions as the live
//! monitor does (one at a time, each question answered at once). So every
//! question the machine asks must be answered by the log's next input, and
//! every answer in the log must have been asked: the first input that is
//! not is a [`Divergence`], named, never argued away.

use std::fmt;

use railwatch_core::{Action, Handled, Happening, Input, Machine, Millis, Notification};
use railwatch_runtime::Observed;

use super::read::{Log, LogError};
use super::{Entry, Mark};

/// Where a replay and its log part: the machine asked something else than
/// the log answers, or the log answers what was not asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Divergence {
    /// The entry's index (0: the line after the header).
    pub index: usize,
    /// Its line in the file.
    pub line: usize,
    /// Its time.
    pub t: u64,
    /// What the machine asked (`"nothing"`: it waited for news).
    pub asked: String,
    /// What the log holds there.
    pub recorded: String,
}

impl fmt::Display for Divergence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the replay diverges at entry {} (line {}, {} ms): the machine asked {}, the log holds {}",
            self.index, self.line, self.t, self.asked, self.recorded
        )
    }
}

/// Why a replay stopped before the log's end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplayError {
    /// The log cannot be replayed (its settings, a device it lacks).
    Log(LogError),
    /// The replay and the log parted.
    Diverged(Divergence),
}

impl fmt::Display for ReplayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplayError::Log(e) => e.fmt(f),
            ReplayError::Diverged(d) => d.fmt(f),
        }
    }
}

/// A replay run to the log's end.
pub struct Replay {
    /// The machine as the log leaves it.
    pub machine: Machine,
    /// How many inputs it was fed.
    pub inputs: usize,
    /// How many wake-ups the log marks.
    pub wakeups: usize,
    /// The time of the last entry.
    pub end_ms: u64,
}

/// A question the live monitor answers with an input at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ask {
    Port(u32, u8),
    Link(u32, u8),
    Address(u32, u8),
    Counters(u32, u8),
    Open(u32),
    Reopen(u32),
}

impl fmt::Display for Ask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Ask::Port(d, p) => write!(f, "query_port of device {d} port {p}"),
            Ask::Link(d, p) => write!(f, "read_link of device {d} port {p}"),
            Ask::Address(d, p) => write!(f, "read_address of device {d} port {p}"),
            Ask::Counters(d, p) => write!(f, "read_counters of device {d} port {p}"),
            Ask::Open(d) => write!(f, "open of device {d}"),
            Ask::Reopen(d) => write!(f, "reopen of device {d}"),
        }
    }
}

fn ask_of(action: &Action) -> Option<Ask> {
    Some(match *action {
        Action::QueryPort { device, port } => Ask::Port(device, port),
        Action::ReadLink { device, port } => Ask::Link(device, port),
        Action::ReadAddress { device, port } => Ask::Address(device, port),
        Action::ReadCounters { device, port } => Ask::Counters(device, port),
        Action::Open { device } => Ask::Open(device),
        Action::Reopen { device } | Action::Revalidate { device, .. } => Ask::Reopen(device),
        _ => return None,
    })
}

/// The question `input` answers, if it is an answer.
fn answered(input: &Input<'_>) -> Option<Ask> {
    Some(match *input {
        Input::PortState { device, port, .. } => Ask::Port(device, port),
        Input::Link { device, port, .. } => Ask::Link(device, port),
        Input::Address { device, port, .. } => Ask::Address(device, port),
        Input::Counters { device, port, .. } => Ask::Counters(device, port),
        Input::Opened { device, .. } => Ask::Open(device),
        Input::Reopened { device, .. } => Ask::Reopen(device),
        _ => return None,
    })
}

/// An input as the divergence names it: its JSON.
fn shown(input: &Input<'_>) -> String {
    serde_json::to_string(input).unwrap_or_else(|_| format!("{input:?}"))
}

/// What watches a replay as an observer watches the live monitor: each
/// input, and the monitor's markers rebuilt (woke, timers due, attached,
/// left, done), with the machine before the input.
pub type Watcher<'w> = &'w mut dyn FnMut(&Machine, Millis, Observed<'_>);

/// The entries still to feed, with their indices.
struct Feed<'l, 'w> {
    watcher: Watcher<'w>,
    entries: std::iter::Peekable<std::iter::Enumerate<std::slice::Iter<'l, Entry<'static>>>>,
    machine: Machine,
    inputs: usize,
    /// A wake-up's notifications, held until it is done, as the monitor
    /// holds them (`None`: not in a wake-up, each goes at once).
    held: Option<Vec<Notification>>,
}

impl Feed<'_, '_> {
    /// Feeds entry `index` (an input at `t`), checking that it names a
    /// device the machine has; the watcher sees it as the monitor's
    /// observer would, with the markers the monitor adds around it.
    fn feed(&mut self, index: usize, t: u64, input: &Input<'_>) -> Result<(), ReplayError> {
        if let Some(device) = input.device().filter(|&d| d as usize >= self.machine.devices().len()) {
            let problem = format!("the input names device {device}, which the log never added");
            return Err(ReplayError::Log(LogError { line: index + 2, problem }));
        }
        let now = Millis(t);
        match input {
            // The log holds a timeout only when a timer was due.
            Input::Timeout => (self.watcher)(&self.machine, now, Observed::Timers),
            Input::Opened { device, result: Ok(ports) } => {
                let name = self.machine.device(*device).map(|d| d.name.to_owned()).unwrap_or_default();
                (self.watcher)(&self.machine, now, Observed::Attached { device: *device, name: &name, ports });
            }
            _ => {}
        }
        (self.watcher)(&self.machine, now, Observed::Input(input));
        match (self.machine.handle(now, input), input) {
            (Handled::Added(Some(device)), Input::AddDevice { name, ports }) => {
                (self.watcher)(&self.machine, now, Observed::Attached { device, name, ports });
            }
            (Handled::Listed(change), _) => {
                for device in change.left {
                    (self.watcher)(&self.machine, now, Observed::Left { device });
                }
            }
            _ => {}
        }
        self.inputs += 1;
        Ok(())
    }

    /// Carries out the machine's actions as the monitor does: each
    /// question answered by the next entry, which must be its answer.
    fn carry_out(&mut self, on_note: &mut impl FnMut(&Machine, &Notification)) -> Result<(), ReplayError> {
        // (Each action is taken out before the machine is fed again.)
        while let Some(action) = self.machine.poll_action() {
            if let Action::Notify(note) = action {
                match self.held.as_mut() {
                    Some(held) => held.push(note),
                    None => on_note(&self.machine, &note),
                }
            }
            // A failed registration is answered with a read error, at once.
            if let Action::StartReading { device } = action {
                if let Some(&(i, Entry::Input { t, input: input @ Input::ReadError { device: d, .. } })) =
                    self.entries.peek()
                    && *d == device
                {
                    self.entries.next();
                    self.feed(i, *t, input)?;
                }
                continue;
            }
            let Some(ask) = ask_of(&action) else { continue };
            // The log may end here (the agent stopped): nothing to check.
            let Some((i, entry)) = self.entries.next() else { return Ok(()) };
            let diverged = |recorded: String| {
                let (line, asked) = (i + 2, ask.to_string());
                ReplayError::Diverged(Divergence { index: i, line, t: entry.t(), asked, recorded })
            };
            match entry {
                Entry::Input { t, input } if answered(input) == Some(ask) => self.feed(i, *t, input)?,
                Entry::Input { input, .. } => return Err(diverged(shown(input))),
                Entry::Mark { mark, .. } => return Err(diverged(format!("the mark {mark:?}"))),
            }
        }
        Ok(())
    }
}

/// Replays `log` on a fresh machine, handing each notification to
/// `on_note` with the machine that made it.
pub fn replay(log: &Log, on_note: impl FnMut(&Machine, &Notification)) -> Result<Replay, ReplayError> {
    replay_watched(log, on_note, &mut |_, _, _| {})
}

/// [`replay`], with `watcher` seeing what a live monitor's observer saw.
pub fn replay_watched(
    log: &Log,
    mut on_note: impl FnMut(&Machine, &Notification),
    watcher: Watcher<'_>,
) -> Result<Replay, ReplayError> {
    let config = log.header.config().map_err(|problem| ReplayError::Log(LogError { line: 1, problem }))?;
    let machine = Machine::new(config).map_err(|e| ReplayError::Log(LogError { line: 1, problem: e.to_string() }))?;
    let mut feed = Feed { watcher, entries: log.entries.iter().enumerate().peekable(), machine, inputs: 0, held: None };
    let (mut wakeups, mut end_ms) = (0, 0);
    while let Some((i, entry)) = feed.entries.next() {
        end_ms = entry.t();
        let (t, input) = match entry {
            Entry::Mark { mark: Mark::Woke, t } => {
                (feed.watcher)(&feed.machine, Millis(*t), Observed::Woke);
                wakeups += 1;
                feed.held.get_or_insert_with(Vec::new);
                continue;
            }
            Entry::Mark { mark: Mark::Done, t } => {
                (feed.watcher)(&feed.machine, Millis(*t), Observed::Done);
                release(&feed.machine, feed.held.take().unwrap_or_default(), &mut on_note);
                continue;
            }
            Entry::Input { t, input } => (*t, input),
        };
        if answered(input).is_some() {
            let (asked, recorded) = ("nothing".to_owned(), shown(input));
            return Err(ReplayError::Diverged(Divergence { index: i, line: i + 2, t, asked, recorded }));
        }
        feed.feed(i, t, input)?;
        feed.carry_out(&mut on_note)?;
    }
    release(&feed.machine, feed.held.take().unwrap_or_default(), &mut on_note);
    Ok(Replay { machine: feed.machine, inputs: feed.inputs, wakeups, end_ms })
}

/// A wake-up's notifications as the monitor sends them: lost work first.
fn release(machine: &Machine, held: Vec<Notification>, on_note: &mut impl FnMut(&Machine, &Notification)) {
    let lost = |n: &&Notification| matches!(n.what, Happening::WorkLost { .. });
    for note in held.iter().filter(lost).chain(held.iter().filter(|n| !lost(n))) {
        on_note(machine, note);
    }
}
