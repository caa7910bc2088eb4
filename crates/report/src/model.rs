//! From JSON lines to lanes: each rail's state runs, its recoveries, its
//! generation changes and the marks (events, other lines, the tick's polls)
//! that fall on it. No drawing here.

use std::collections::HashMap;

use serde_json::Value;

use crate::{Line, Timeline};

/// The reasons a rail can be paused (or inert) for, as the JSON lines name
/// them; each has its own colour. Anything else is drawn as `other`.
pub const PAUSE_REASONS: [&str; 10] = [
    "port_err",
    "port_not_active",
    "device_fatal",
    "device_removed",
    "not_opened",
    "damped",
    "settling",
    "data_path",
    "no_address",
    "half_open",
];

/// A rail's state as a band shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Active: the gate admits.
    Active,
    /// Paused for a reason.
    Paused,
    /// Inert: its device is closed or gone.
    Inert,
}

impl Kind {
    fn parse(name: &str) -> Option<Kind> {
        match name {
            "active" => Some(Kind::Active),
            "paused" => Some(Kind::Paused),
            "inert" => Some(Kind::Inert),
            _ => None,
        }
    }

    /// The JSON name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Active => "active",
            Kind::Paused => "paused",
            Kind::Inert => "inert",
        }
    }
}

/// A state with its reason: two runs with equal `State`s are one band.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct State {
    /// Active, paused or inert.
    pub kind: Kind,
    /// For paused and inert: one of [`PAUSE_REASONS`], `"other"` for a name
    /// outside them, `"unknown"` when no line said. For active: `None`.
    pub reason: Option<&'static str>,
}

impl State {
    const ACTIVE: State = State { kind: Kind::Active, reason: None };

    /// The state after a transition line to `to` with `reason` (absent for
    /// activations), from `prev`. A reason that is not a pause reason
    /// (`cq_err`, `lid_change`, ... for a generation bump) keeps the
    /// previous reason.
    fn after(prev: State, to: Kind, reason: Option<&str>) -> State {
        if to == Kind::Active {
            return State::ACTIVE;
        }
        let named = reason.and_then(|r| PAUSE_REASONS.iter().copied().find(|p| *p == r));
        let reason = match (named, reason) {
            (Some(r), _) => r,
            (None, Some(_)) if prev.kind == to => prev.reason.unwrap_or("unknown"),
            (None, Some(_)) => "other",
            (None, None) if prev.kind == to => prev.reason.unwrap_or("unknown"),
            (None, None) => "unknown",
        };
        State { kind: to, reason: Some(reason) }
    }

    /// `paused (port_err)`, `active`.
    pub fn describe(self) -> String {
        match self.reason {
            Some(r) => format!("{} ({})", self.kind.name(), if r == "damped" { "held by damping" } else { r }),
            None => self.kind.name().to_string(),
        }
    }
}

/// One run of a state, `[start, end)` in ms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// Start, inclusive.
    pub start: u64,
    /// End, exclusive (greater than `start`).
    pub end: u64,
    /// The state.
    pub state: State,
    /// The transition line that started it, if one did.
    pub line: Option<usize>,
}

/// A transition to active from another state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovery {
    /// When.
    pub t: u64,
    /// How: `event`, `poll`, `attach`, ...
    pub by: String,
    /// How long the rail was not active (since the start of the timeline
    /// when it never was).
    pub out_ms: u64,
    /// The transition line.
    pub line: usize,
}

/// The rail's generation changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenChange {
    /// When.
    pub t: u64,
    /// The new generation.
    pub generation: u64,
    /// The line that said so.
    pub line: usize,
}

/// What a mark stands for; marks of different kinds are binned apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MarkKind {
    /// An `event` line.
    Event,
    /// A `drain`, `reseed`, `available` or `address` line.
    Note,
    /// An `expect` line that held.
    ExpectHeld,
    /// An `expect` line that failed.
    ExpectFailed,
    /// The recovery tick ran while the rail was not active (no line).
    Poll,
    /// A silent flap: a flap counter rose with no PORT_ERR (a transition
    /// line with reason `silent_flap`).
    SilentFlap,
}

impl MarkKind {
    /// The classes after `mark`.
    pub fn class(self) -> &'static str {
        match self {
            MarkKind::Event => "mark event",
            MarkKind::Note => "mark note",
            MarkKind::ExpectHeld => "mark expect expect-held",
            MarkKind::ExpectFailed => "mark expect expect-failed",
            MarkKind::Poll => "mark poll",
            MarkKind::SilentFlap => "mark silent",
        }
    }

    /// What one of them is called in a binned mark's title.
    pub fn noun(self) -> &'static str {
        match self {
            MarkKind::Event => "event line",
            MarkKind::Note => "line",
            MarkKind::ExpectHeld => "expectation held",
            MarkKind::ExpectFailed => "expectation failed",
            MarkKind::Poll => "poll by the recovery tick",
            MarkKind::SilentFlap => "silent flap",
        }
    }
}

/// A mark before binning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    /// When.
    pub t: u64,
    /// What.
    pub kind: MarkKind,
    /// The line behind it (none for polls).
    pub line: Option<usize>,
}

/// Everything drawn in one rail's lane.
#[derive(Debug, Clone, Default)]
pub struct Lane {
    /// The rail's name.
    pub name: String,
    /// Its state runs: positive length, in order, no two neighbours equal.
    pub runs: Vec<Run>,
    /// Its recoveries, in order.
    pub recoveries: Vec<Recovery>,
    /// Its generation changes, in order.
    pub gens: Vec<GenChange>,
    /// Its marks, in time order.
    pub marks: Vec<Mark>,
}

/// The whole picture's data.
#[derive(Debug, Clone, Default)]
pub struct Model {
    /// One per rail, in lane order.
    pub lanes: Vec<Lane>,
    /// The time axis ends here (ms, at least 1).
    pub duration_ms: u64,
    /// The `summary` line, if there is one.
    pub summary: Option<usize>,
}

fn t_of(line: &Value) -> u64 {
    line.get("t_ms").and_then(Value::as_u64).unwrap_or(0)
}

fn str_of<'v>(line: &'v Value, key: &str) -> Option<&'v str> {
    line.get(key).and_then(Value::as_str)
}

/// The device part of a rail's name (`mlx5_0` of `mlx5_0/1`).
fn device_of(rail: &str) -> &str {
    rail.rsplit_once('/').map_or(rail, |(d, _)| d)
}

/// Per lane, what the transitions say before they become runs.
#[derive(Default)]
struct Changes {
    /// (t, state, line) in order.
    points: Vec<(u64, State, usize)>,
    initial: Option<State>,
}

impl Model {
    /// Builds the model of a timeline.
    pub fn build(timeline: &Timeline) -> Model {
        let lines = &timeline.lines;
        // The summary is last, or near it (a cut run's too).
        let summary = lines.iter().rposition(|l| str_of(&l.value(), "kind") == Some("summary"));
        // Of the summary, each rail's name and final state (the line itself,
        // parsed, is the largest thing here: not kept).
        let summary_rails = summary.map_or_else(Vec::new, |i| summary_rails(&lines[i]));
        let (mut lanes, index) = lanes_of(timeline, &summary_rails);
        let (changes, last_t) = read_lines(lines, &index, &mut lanes);
        // The run's end, or a cut run's cut (the summary's later time only
        // feeds the table).
        let end = match timeline.cut {
            Some(cut) => cut.at_ms.max(1),
            None => timeline.ticks.iter().copied().fold(timeline.duration_ms.max(1).max(last_t), u64::max),
        };
        let summary_state: HashMap<&str, State> =
            summary_rails.iter().filter_map(|(rail, state)| Some((rail.as_str(), (*state)?))).collect();
        for (lane, ch) in lanes.iter_mut().zip(&changes) {
            let initial =
                ch.initial.or_else(|| summary_state.get(lane.name.as_str()).copied()).unwrap_or(State::ACTIVE);
            finish_lane(lane, ch, initial, &timeline.ticks, end);
        }
        Model { lanes, duration_ms: end, summary }
    }
}

/// The summary line's rails, in order: each name and, if it says one, its
/// final state (a reason only as "unknown": the summary does not say it).
fn summary_rails(line: &Line) -> Vec<(String, Option<State>)> {
    let value = line.value();
    let Some(rails) = value.get("rails").and_then(Value::as_array) else { return Vec::new() };
    rails
        .iter()
        .filter_map(|r| {
            let state = str_of(r, "state").and_then(Kind::parse).map(|kind| {
                let reason = if kind == Kind::Active { None } else { Some("unknown") };
                State { kind, reason }
            });
            Some((str_of(r, "rail")?.to_owned(), state))
        })
        .collect()
}

/// The lanes, in order: the given rails, the summary's, then any other rail
/// a line names, each once; and each name's lane.
fn lanes_of(timeline: &Timeline, summary_rails: &[(String, Option<State>)]) -> (Vec<Lane>, HashMap<String, usize>) {
    let mut lanes: Vec<Lane> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let names = timeline
        .rails
        .iter()
        .map(String::as_str)
        .map(str::to_owned)
        .chain(summary_rails.iter().map(|(rail, _)| rail.clone()))
        .chain(timeline.lines.iter().filter_map(|l| str_of(&l.value(), "rail").map(str::to_owned)));
    for name in names {
        if !index.contains_key(&name) {
            index.insert(name.clone(), lanes.len());
            lanes.push(Lane { name, ..Lane::default() });
        }
    }
    (lanes, index)
}

/// What the lines say, lane by lane: state changes (kept in `Changes`),
/// recoveries, generation changes and marks (put in the lanes); and the
/// latest time a line has.
fn read_lines(lines: &[Line], index: &HashMap<String, usize>, lanes: &mut [Lane]) -> (Vec<Changes>, u64) {
    let mut by_device: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, lane) in lanes.iter().enumerate() {
        by_device.entry(device_of(&lane.name).to_string()).or_default().push(i);
    }
    let mut changes: Vec<Changes> = (0..lanes.len()).map(|_| Changes::default()).collect();
    let mut last_gen: Vec<Option<u64>> = vec![None; lanes.len()];
    let mut last_t = 0;
    for (i, text) in lines.iter().enumerate() {
        let line = &text.value();
        let t = t_of(line);
        last_t = last_t.max(t);
        let rail = str_of(line, "rail").and_then(|r| index.get(r).copied());
        match str_of(line, "kind").unwrap_or("") {
            "transition" => {
                let Some(l) = rail else { continue };
                transition(&mut lanes[l], &mut changes[l], &mut last_gen[l], line, i);
            }
            "address" => {
                let Some(l) = rail else { continue };
                if let Some(g) = line.get("generation").and_then(Value::as_u64) {
                    if last_gen[l].is_some_and(|p| p != g) {
                        lanes[l].gens.push(GenChange { t, generation: g, line: i });
                    }
                    last_gen[l] = Some(g);
                }
                lanes[l].marks.push(Mark { t, kind: MarkKind::Note, line: Some(i) });
            }
            "summary" => {}
            other => {
                let mark = match other {
                    "event" => MarkKind::Event,
                    "expect" if line.get("passed") == Some(&Value::Bool(false)) => MarkKind::ExpectFailed,
                    "expect" => MarkKind::ExpectHeld,
                    _ => MarkKind::Note,
                };
                let targets: &[usize] = match rail {
                    Some(ref l) => std::slice::from_ref(l),
                    None => str_of(line, "device").and_then(|d| by_device.get(d)).map_or(&[], Vec::as_slice),
                };
                for &l in targets {
                    lanes[l].marks.push(Mark { t, kind: mark, line: Some(i) });
                }
            }
        }
    }
    (changes, last_t)
}

/// One `transition` line of a lane: a state change, a generation change, a
/// recovery, a silent flap's mark.
fn transition(lane: &mut Lane, ch: &mut Changes, last_gen: &mut Option<u64>, line: &Value, i: usize) {
    let t = t_of(line);
    let (Some(from), Some(to)) = (str_of(line, "from").and_then(Kind::parse), str_of(line, "to").and_then(Kind::parse))
    else {
        return;
    };
    let prev = match ch.points.last() {
        Some(&(_, s, _)) => s,
        None => *ch.initial.get_or_insert(State::after(State { kind: from, reason: None }, from, None)),
    };
    let reason = str_of(line, "reason");
    ch.points.push((t, State::after(prev, to, reason), i));
    if reason == Some("silent_flap") {
        lane.marks.push(Mark { t, kind: MarkKind::SilentFlap, line: Some(i) });
    }
    if let Some(g) = line.get("generation").and_then(Value::as_u64) {
        let first_attach = last_gen.is_none() && from == Kind::Inert && to != Kind::Inert;
        if last_gen.is_some_and(|p| p != g) || first_attach {
            lane.gens.push(GenChange { t, generation: g, line: i });
        }
        *last_gen = Some(g);
    }
    if to == Kind::Active && from != Kind::Active {
        let by = str_of(line, "by").unwrap_or("?").to_string();
        // `out_ms` is filled from the runs (finish_lane).
        lane.recoveries.push(Recovery { t, by, out_ms: 0, line: i });
    }
}

/// A lane's runs from its changes, how long each recovery was out, and the
/// tick's polls while it was not active.
fn finish_lane(lane: &mut Lane, ch: &Changes, initial: State, ticks: &[u64], end: u64) {
    lane.runs = runs(initial, &ch.points, end);
    // How long each recovery was out: since the rail last left active (the
    // start, if it never was).
    let mut left_at = if initial.kind == Kind::Active { None } else { Some(0) };
    let mut rec = lane.recoveries.iter_mut().peekable();
    for &(t, s, i) in &ch.points {
        if s.kind == Kind::Active {
            if let Some(r) = rec.next_if(|r| r.line == i) {
                r.out_ms = t.saturating_sub(left_at.unwrap_or(t));
            }
            left_at = None;
        } else if left_at.is_none() {
            left_at = Some(t);
        }
    }
    // Polls: the tick ran while the rail was not active (its state just
    // before the tick's instant: what the tick polled).
    let mut state = initial;
    let mut p = 0;
    for &tick in ticks {
        while p < ch.points.len() && ch.points[p].0 < tick {
            state = ch.points[p].1;
            p += 1;
        }
        if state.kind != Kind::Active {
            lane.marks.push(Mark { t: tick, kind: MarkKind::Poll, line: None });
        }
    }
    lane.marks.sort_by_key(|m| m.t);
}

/// The runs of a lane: from `initial` at 0, changing at each point, to
/// `end`; zero-length runs dropped, equal neighbours merged (keeping the
/// first one's line).
pub fn runs(initial: State, points: &[(u64, State, usize)], end: u64) -> Vec<Run> {
    let mut raw = Vec::with_capacity(points.len() + 1);
    let mut cur = Run { start: 0, end, state: initial, line: None };
    for &(t, state, line) in points {
        let t = t.min(end);
        if state == cur.state {
            continue;
        }
        let at = t.max(cur.start);
        cur.end = at;
        raw.push(cur);
        cur = Run { start: at, end, state, line: Some(line) };
    }
    raw.push(cur);
    let mut out: Vec<Run> = Vec::with_capacity(raw.len());
    for run in raw.into_iter().filter(|r| r.end > r.start) {
        match out.last_mut() {
            Some(last) if last.state == run.state => last.end = run.end,
            _ => out.push(run),
        }
    }
    out
}
