//! One self-contained HTML page of a railwatch run (`railwatch simulate
//! --html FILE`): a lane per rail with its state as coloured bands over
//! time, the events as marks, the recovery tick's polls as faint marks,
//! generation changes labelled, each recovery annotated with how and how
//! long the rail was out, and the summary table below. Hovering a mark shows
//! the JSON line behind it (an SVG `<title>`, no script needed).
//!
//! The page loads nothing (no font, script, style sheet or image from
//! anywhere; its Content-Security-Policy forbids it), follows the reader's
//! light or dark colour scheme, and stays small however long the run: marks
//! are binned per lane and pixel column, bands merged, see [`MARK_BUDGET`]
//! and [`BAND_BUDGET`].
//!
//! The input is the run's JSON lines as documented in `docs/JSON.md` (this
//! crate knows nothing of the monitor), plus the times the recovery tick
//! ran.
//!
//! ```
//! use railwatch_report::{Timeline, render_html};
//! use serde_json::json;
//!
//! let timeline = Timeline {
//!     title: "burst-hides-port-active".into(),
//!     duration_ms: 5000,
//!     rails: vec![], // the summary's order
//!     lines: vec![
//!         json!({"t_ms":100,"kind":"transition","rail":"mlx5_0/1","from":"active","to":"paused",
//!                "generation":1,"reason":"port_err"}).into(),
//!         json!({"t_ms":2000,"kind":"transition","rail":"mlx5_0/1","from":"paused","to":"active",
//!                "generation":2,"by":"event"}).into(),
//!         json!({"t_ms":5000,"kind":"summary","rails":[{"rail":"mlx5_0/1","state":"active",
//!                "available":true,"bandwidth_gbps":400.0,"generation":2}],
//!                "events_queued":2,"events_read":2,"events_acked":2,
//!                "expectations":{"passed":0,"failed":0}}).into(),
//!     ],
//!     ticks: vec![1100],
//!     cut: None,
//! };
//! let page = render_html(&timeline);
//! assert!(page.starts_with("<!DOCTYPE html>"));
//! assert!(page.contains(r#"data-lanes="1""#));
//! assert!(page.contains(r#"data-bands="3""#)); // active, paused (port_err), active
//! assert!(page.contains(r#"class="mark poll""#));
//! ```

mod draw;
mod fold;
mod model;
mod page;

pub use draw::{BAND_BUDGET, MARK_BUDGET, MIN_BANDS_PER_LANE, PLOT_W, TITLE_MAX, is_bidi_control};
pub use fold::MAX_LANES;
pub use model::PAUSE_REASONS;

use serde_json::Value;

/// A run to draw.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    /// The page's title (the scenario's name).
    pub title: String,
    /// How long the run was, in ms: the time axis ends here (or at the last
    /// line's `t_ms`, if later).
    pub duration_ms: u64,
    /// Lane order. Rails named by the `summary` line or any other line but
    /// missing here follow in that order, so an empty list means the
    /// summary's order.
    pub rails: Vec<String>,
    /// The run's JSON lines (docs/JSON.md), in time order, the `summary`
    /// last.
    pub lines: Vec<Line>,
    /// The virtual times at which the recovery tick ran: each is a faint
    /// mark on the lanes of the rails that were not active just before it.
    pub ticks: Vec<u64>,
    /// Where [`push`](Self::push) stopped keeping lines (a run too long to
    /// hold): the picture ends there and the page says so.
    pub cut: Option<Cut>,
}

/// Where a timeline stopped keeping what it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    /// The time of the first line (or tick) not kept.
    pub at_ms: u64,
    /// Lines not kept from there on (the `summary` is always kept).
    pub left_out: u64,
}

/// The most JSON lines a timeline built with [`Timeline::push`] keeps:
/// 10⁵ events with their transitions, drains and availability fit; a
/// longer run is drawn up to where it reached the limit, so the page and
/// the memory it takes to make it stay bounded whatever the run.
pub const MAX_LINES: usize = 500_000;

/// The most tick times kept (a paused rail ticked every millisecond for
/// days would be hundreds of millions).
pub const MAX_TICKS: usize = 1_000_000;

impl Timeline {
    /// Adds the run's next JSON line (in time order), unless the timeline
    /// is full ([`MAX_LINES`]): then the picture is cut at the line's time
    /// and the rest only counted. The `summary` line is always kept.
    pub fn push(&mut self, line: Value) {
        if line.get("kind").and_then(Value::as_str) == Some("summary") {
            self.lines.push(line.into());
            return;
        }
        let t = line.get("t_ms").and_then(Value::as_u64).unwrap_or(0);
        if self.keeps(t, self.lines.len() < MAX_LINES) {
            self.lines.push(line.into());
        }
    }

    /// Adds a time at which the recovery tick ran, unless the timeline is
    /// full ([`MAX_TICKS`] ticks, or cut already).
    pub fn push_tick(&mut self, t: u64) {
        if self.keeps(t, self.ticks.len() < MAX_TICKS) {
            self.ticks.push(t);
        }
    }

    /// Whether something at `t` is kept: not once cut, and not when there
    /// is no `room` (that cuts here).
    fn keeps(&mut self, t: u64, room: bool) -> bool {
        match &mut self.cut {
            Some(cut) => {
                cut.left_out += 1;
                false
            }
            None if !room => {
                self.cut = Some(Cut { at_ms: t, left_out: 1 });
                false
            }
            None => true,
        }
    }
}

/// One JSON line of a run, kept as its compact text: a parsed line takes
/// about ten times the memory, and a run may have half a million. Read
/// ([`Line::value`]) where it is needed, one at a time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line(Box<str>);

impl Line {
    /// The line parsed (`Null` for text that is not JSON, which a `Line`
    /// made from a `Value` never is).
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.0).unwrap_or(Value::Null)
    }

    /// The line's text (compact JSON).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<Value> for Line {
    fn from(value: Value) -> Line {
        Line(value.to_string().into_boxed_str())
    }
}

impl std::fmt::Display for Line {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What [`render`] drew: element counts, as also written on the SVG root
/// (`data-lanes`, `data-bands`, `data-marks`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Lanes (`class="lane"`), one per rail.
    pub lanes: usize,
    /// Bands (`class="band …"`): the rails' state runs, equal neighbours
    /// merged and zero-length runs left out (a lane with more runs than its
    /// share of [`BAND_BUDGET`] is drawn per column).
    pub bands: usize,
    /// Marks (`class="mark …"`) after binning.
    pub marks: usize,
    /// Recovery annotations (`class="recovery"`), binned like marks.
    pub recoveries: usize,
    /// Generation labels (`class="gen-label"`) drawn; one that would run
    /// into the previous label of its lane is left out.
    pub gen_labels: usize,
    /// The width in pixels of a mark bin (1 unless the budget needed more).
    pub bin_px: u32,
    /// The page's length in bytes.
    pub bytes: usize,
}

/// The page, as one string of HTML.
pub fn render_html(timeline: &Timeline) -> String {
    render(timeline).0
}

/// The page and what was drawn in it.
pub fn render(timeline: &Timeline) -> (String, Stats) {
    let mut model = model::Model::build(timeline);
    // Past its bound in rails, the quietest are folded into one line.
    let folded = fold::fold(&mut model);
    let (svg, mut stats) = draw::draw(&model, &timeline.lines);
    let html = page::page(timeline, &model, folded.as_ref(), &svg);
    stats.bytes = html.len();
    (html, stats)
}

#[cfg(test)]
mod tests;
