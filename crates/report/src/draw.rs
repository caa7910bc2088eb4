//! The picture: one SVG built with the `svg` crate's typed elements (its
//! text nodes and attribute values are escaped by the crate; user text only
//! ever goes into text nodes, never into an attribute).
//!
//! Bounded output: marks are binned per lane, per kind, per column of
//! `bin_px` pixels, `bin_px` the smallest that keeps every bin within
//! [`MARK_BUDGET`]; a lane with more state runs than its share of
//! [`BAND_BUDGET`] is drawn per column (each column its dominant state).

use std::collections::BTreeMap;

use crate::Line as JsonLine;
use svg::Document;
use svg::node::element::{Group, Line, Polygon, Rectangle, Text, Title};

use crate::Stats;
use crate::model::{GenChange, Kind, Lane, MarkKind, Model, Recovery, Run, State};

/// At most this many binned marks (events, other lines, expectations,
/// polls and recoveries, all lanes together) unless there are so many lanes
/// that one bin per lane and kind exceeds it.
pub const MARK_BUDGET: usize = 10_000;
/// Band elements, all lanes together: a lane gets
/// `max(MIN_BANDS_PER_LANE, BAND_BUDGET / lanes)` before it is drawn per
/// column.
pub const BAND_BUDGET: usize = 6_000;
/// See [`BAND_BUDGET`].
pub const MIN_BANDS_PER_LANE: usize = 24;
/// A title (tooltip) is cut to about this many characters.
pub const TITLE_MAX: usize = 600;
/// A binned mark's title shows this many of its lines.
pub const TITLE_LINES: usize = 2;

/// Left margin: the lane labels.
const LEFT: f64 = 170.0;
/// The time axis is this wide (px).
pub const PLOT_W: f64 = 1000.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 30.0;
const LANE_H: f64 = 58.0;
const BOTTOM: f64 = 8.0;
/// Offsets inside a lane: two rows of annotations (their baselines), then
/// the band, then the marks.
const TEXT_ROWS: [f64; 2] = [11.0, 22.0];
const BAND_Y: f64 = 26.0;
const BAND_H: f64 = 18.0;
/// Rough width of one character of the 10 px annotation font.
const CHAR_W: f64 = 5.8;
const LABEL_CHARS: usize = 24;
/// Bin widths tried, in px.
const BIN_STEPS: [u32; 19] = [1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 25, 32, 40, 50, 100, 200, 500, 1000];

fn px(v: f64) -> String {
    let s = format!("{v:.1}");
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

/// Seconds with up to three decimals: `2 s`, `0.15 s`.
pub fn secs(ms: u64) -> String {
    let s = format!("{}.{:03}", ms / 1000, ms % 1000);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s} s")
}

/// A duration for an annotation: `120 ms`, `1.9 s`.
fn duration(ms: u64) -> String {
    if ms < 1000 { format!("{ms} ms") } else { secs(ms - ms % 10) }
}

/// `text` cut to `max` characters (with `…`), control characters shown
/// escaped.
/// The invisible characters that reorder text around them (LRM, RLM, the
/// embeddings, overrides and isolates): shown escaped, so a name cannot
/// make a label read backwards.
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// A lane's label: the rail name, its device part shortened in the middle
/// when it is long, so the port (`/1`) always shows and two ports of a
/// long-named device stay apart.
pub(crate) fn lane_label(name: &str) -> String {
    if name.chars().count() <= LABEL_CHARS {
        return clip(name, LABEL_CHARS);
    }
    let (device, port) = name.rsplit_once('/').map_or((name, ""), |(d, p)| (d, p));
    let port: String = port.chars().take(6).collect();
    let keep = LABEL_CHARS.saturating_sub(port.chars().count() + 2);
    let head: String = device.chars().take(keep / 2).collect();
    let tail: Vec<char> = device.chars().rev().take(keep - keep / 2).collect();
    let tail: String = tail.into_iter().rev().collect();
    clip(&format!("{head}…{tail}/{port}"), LABEL_CHARS + 1)
}

pub fn clip(text: &str, max: usize) -> String {
    let mut out = String::new();
    for (n, c) in text.chars().enumerate() {
        if n >= max {
            out.push('…');
            break;
        }
        if (c.is_control() && c != '\n') || is_bidi_control(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Class-safe: only `[a-z0-9_-]`, else `other`.
fn class_word(word: &str) -> &str {
    if !word.is_empty() && word.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
    {
        word
    } else {
        "other"
    }
}

fn band_class(state: State) -> String {
    match (state.kind, state.reason) {
        (Kind::Active, _) => "band band-active".to_string(),
        (kind, reason) => format!("band band-{} reason-{}", kind.name(), class_word(reason.unwrap_or("unknown"))),
    }
}

/// Where annotation texts go in a lane: each row is filled left to right; a
/// text goes in the first row where it starts within `SHIFT_MAX` px of its
/// mark, else it is left out (its mark and title stay).
struct Rows {
    ends: [f64; 2],
}

const SHIFT_MAX: f64 = 30.0;

/// A text's place: its start x (in the plot), its row's baseline offset.
struct Place {
    x: f64,
    y: f64,
}

impl Rows {
    fn new() -> Rows {
        Rows { ends: [f64::NEG_INFINITY; 2] }
    }

    fn place(&mut self, x: f64, gap: f64, chars: usize) -> Option<Place> {
        let w = chars as f64 * CHAR_W;
        for (end, y) in self.ends.iter_mut().zip(TEXT_ROWS) {
            let mut lx = (x + gap).max(*end);
            if lx + w > PLOT_W + RIGHT {
                // Near the right edge the text ends at its mark instead.
                lx = x - gap - w;
                if lx < *end {
                    continue;
                }
            } else if lx - x > SHIFT_MAX {
                continue;
            }
            *end = lx + w + 6.0;
            return Some(Place { x: lx, y });
        }
        None
    }
}

struct Geometry {
    duration: f64,
}

impl Geometry {
    /// x within the plot, 0..=PLOT_W.
    fn x(&self, t: u64) -> f64 {
        (t as f64 / self.duration * PLOT_W).clamp(0.0, PLOT_W)
    }
    fn col(&self, t: u64, bin_px: u32) -> u64 {
        let cols = (PLOT_W / f64::from(bin_px)).ceil() as u64;
        ((self.x(t) / f64::from(bin_px)) as u64).min(cols.saturating_sub(1))
    }
}

/// What a binned mark shows: the count, the time span and its first lines.
fn bin_title(lines: &[JsonLine], noun: &str, count: usize, first: u64, last: u64, shown: &[usize]) -> String {
    if count == 1 {
        return match shown.first() {
            Some(&i) => clip(&lines[i].to_string(), TITLE_MAX),
            None => format!("{noun} at {}", secs(first)),
        };
    }
    let mut title = format!("{count} × {noun}, {} – {}", secs(first), secs(last));
    for &i in shown {
        title.push('\n');
        title.push_str(&lines[i].to_string());
    }
    if count > shown.len() && !shown.is_empty() {
        title.push_str("\n…");
    }
    clip(&title, TITLE_MAX)
}

/// One bin of marks of one kind in one lane.
struct Bin {
    first: u64,
    last: u64,
    count: usize,
    shown: Vec<usize>,
}

impl Bin {
    fn add(&mut self, t: u64, line: Option<usize>) {
        self.last = t;
        self.count += 1;
        if let Some(i) = line
            && self.shown.len() < TITLE_LINES
        {
            self.shown.push(i);
        }
    }
}

/// The smallest bin width whose bins (marks and recoveries) fit the budget.
fn choose_bin_px(model: &Model, geo: &Geometry) -> u32 {
    for &b in &BIN_STEPS {
        let mut bins = 0usize;
        for lane in &model.lanes {
            let mut last: BTreeMap<MarkKind, u64> = BTreeMap::new();
            for m in &lane.marks {
                let c = geo.col(m.t, b);
                if last.insert(m.kind, c) != Some(c) {
                    bins += 1;
                }
            }
            for times in [
                lane.recoveries.iter().map(|r| r.t).collect::<Vec<_>>(),
                lane.gens.iter().map(|g| g.t).collect::<Vec<_>>(),
            ] {
                bins += runs_of(&times, |t| geo.col(t, b)).len();
            }
        }
        if bins <= MARK_BUDGET {
            return b;
        }
    }
    *BIN_STEPS.last().unwrap_or(&1000)
}

/// `items` (in time order) grouped into runs of equal `key`.
fn runs_of<T: Copy>(items: &[T], key: impl Fn(T) -> u64) -> Vec<&[T]> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=items.len() {
        if i == items.len() || key(items[i]) != key(items[start]) {
            if i > start {
                out.push(&items[start..i]);
            }
            start = i;
        }
    }
    out
}

/// A lane's recovery groups and generation labels, binned per column of
/// `bin_px`, in time order (at equal times the label first).
fn annotations(lines: &[JsonLine], lane: &Lane, geo: &Geometry, bin_px: u32, y: f64, counts: &mut Stats) -> Vec<Group> {
    let recs: Vec<&Recovery> = lane.recoveries.iter().collect();
    let gens: Vec<&GenChange> = lane.gens.iter().collect();
    let rec_bins = runs_of(&recs, |r| geo.col(r.t, bin_px));
    let gen_bins = runs_of(&gens, |g| geo.col(g.t, bin_px));
    // (t, recovery?, index)
    let mut order: Vec<(u64, bool, usize)> = gen_bins.iter().enumerate().map(|(i, b)| (b[0].t, false, i)).collect();
    order.extend(rec_bins.iter().enumerate().map(|(i, b)| (b[0].t, true, i)));
    order.sort_unstable();
    let mut rows = Rows::new();
    let mut out = Vec::with_capacity(order.len());
    for (t, is_recovery, i) in order {
        let x = geo.x(t);
        if is_recovery {
            let bin = rec_bins[i];
            let tip = y + BAND_Y;
            let mut grp = Group::new().set("class", "recovery").add(Polygon::new().set("class", "recovery-mark").set(
                "points",
                format!(
                    "{},{} {},{} {},{}",
                    px(LEFT + x - 4.0),
                    px(tip),
                    px(LEFT + x + 4.0),
                    px(tip),
                    px(LEFT + x),
                    px(tip - 5.0)
                ),
            ));
            let label = match bin {
                [one] if one.out_ms > 0 => format!("by {} · out {}", one.by, duration(one.out_ms)),
                [one] => format!("by {}", one.by),
                many => format!("{} recoveries", many.len()),
            };
            let label = clip(&label, 40);
            if let Some(at) = rows.place(x, 5.0, label.chars().count()) {
                grp = grp.add(
                    Text::new(label.clone())
                        .set("class", "recovery-label")
                        .set("x", px(LEFT + at.x))
                        .set("y", px(y + at.y)),
                );
            }
            let title = match bin {
                [one] => clip(&format!("{label}\n{}", lines[one.line]), TITLE_MAX),
                many => {
                    let shown: Vec<usize> = many.iter().take(TITLE_LINES).map(|r| r.line).collect();
                    bin_title(lines, "recovery", many.len(), t, many[many.len() - 1].t, &shown)
                }
            };
            out.push(grp.add(Title::new(title)));
            counts.recoveries += 1;
        } else {
            let bin = gen_bins[i];
            let last = bin[bin.len() - 1];
            let label = format!("g{}", last.generation);
            let Some(at) = rows.place(x, 2.0, label.len()) else { continue };
            let title = match bin {
                [one] => clip(&format!("generation {}\n{}", one.generation, lines[one.line]), TITLE_MAX),
                many => {
                    let shown: Vec<usize> = many.iter().take(TITLE_LINES).map(|g| g.line).collect();
                    let noun = format!("generation change (to {})", last.generation);
                    bin_title(lines, &noun, many.len(), t, last.t, &shown)
                }
            };
            out.push(
                Group::new()
                    .set("class", "gen-label")
                    .add(
                        Line::new()
                            .set("class", "gen-tick")
                            .set("x1", px(LEFT + x))
                            .set("x2", px(LEFT + x))
                            .set("y1", px(y + at.y - 9.0))
                            .set("y2", px(y + BAND_Y + BAND_H)),
                    )
                    .add(Text::new(label).set("x", px(LEFT + at.x)).set("y", px(y + at.y)))
                    .add(Title::new(title)),
            );
            counts.gen_labels += 1;
        }
    }
    out
}

/// A rectangle with a class and a title.
fn rect(class: &str, x: f64, y: f64, w: f64, h: f64, title: Option<String>) -> Rectangle {
    let r =
        Rectangle::new().set("class", class).set("x", px(x)).set("y", px(y)).set("width", px(w)).set("height", px(h));
    match title {
        Some(t) => r.add(Title::new(t)),
        None => r,
    }
}

fn band_title(lines: &[JsonLine], run: &Run) -> String {
    let mut t = format!("{} from {} to {}", run.state.describe(), secs(run.start), secs(run.end));
    if let Some(i) = run.line {
        t.push('\n');
        t.push_str(&lines[i].to_string());
    }
    clip(&t, TITLE_MAX)
}

/// The band elements of one lane.
fn bands(lines: &[JsonLine], lane: &Lane, geo: &Geometry, y: f64, cap: usize) -> Vec<Rectangle> {
    let top = y + BAND_Y;
    if lane.runs.len() <= cap {
        return lane
            .runs
            .iter()
            .map(|run| {
                let (x0, x1) = (geo.x(run.start), geo.x(run.end));
                rect(&band_class(run.state), LEFT + x0, top, (x1 - x0).max(1.0), BAND_H, Some(band_title(lines, run)))
            })
            .collect();
    }
    // Too many runs: one dominant state per column, equal columns merged.
    let col_w = (PLOT_W / cap as f64).max(1.0);
    let cols = (PLOT_W / col_w).ceil() as usize;
    let ms_per_px = geo.duration / PLOT_W;
    let mut out = Vec::new();
    let mut r = 0;
    // (state, first col, last col, state changes inside)
    let mut cur: Option<(State, usize, usize, usize)> = None;
    let flush = |cur: (State, usize, usize, usize), out: &mut Vec<Rectangle>| {
        let (state, c0, c1, changes) = cur;
        let x0 = c0 as f64 * col_w;
        let x1 = ((c1 + 1) as f64 * col_w).min(PLOT_W);
        let (t0, t1) = ((x0 * ms_per_px) as u64, (x1 * ms_per_px) as u64);
        let (class, title) = if changes == 0 {
            (
                format!("{} band-binned", band_class(state)),
                format!("{} from {} to {}", state.describe(), secs(t0), secs(t1)),
            )
        } else {
            (
                format!("{} band-binned band-flapping", band_class(state)),
                format!(
                    "mostly {} from {} to {}; {changes} state change(s) in it",
                    state.describe(),
                    secs(t0),
                    secs(t1)
                ),
            )
        };
        out.push(rect(&class, LEFT + x0, top, x1 - x0, BAND_H, Some(title)));
    };
    for c in 0..cols {
        let t0 = (c as f64 * col_w * ms_per_px) as u64;
        let t1 = (((c + 1) as f64 * col_w).min(PLOT_W) * ms_per_px).ceil() as u64;
        let mut time: Vec<(State, u64)> = Vec::new();
        let mut changes = 0;
        while r < lane.runs.len() && lane.runs[r].end <= t0 {
            r += 1;
        }
        let mut k = r;
        while k < lane.runs.len() && lane.runs[k].start < t1 {
            let run = &lane.runs[k];
            if run.start >= t0 && run.start > 0 {
                changes += 1;
            }
            let span = run.end.min(t1) - run.start.max(t0);
            match time.iter_mut().find(|(s, _)| *s == run.state) {
                Some((_, ms)) => *ms += span,
                None => time.push((run.state, span)),
            }
            k += 1;
        }
        let Some(&(state, _)) = time.iter().max_by_key(|(_, ms)| *ms) else { continue };
        // Columns merge when their state is the same and both are calm or
        // both are flapping.
        cur = match cur {
            Some((s, c0, _, n)) if s == state && (n == 0) == (changes == 0) => Some((s, c0, c, n + changes)),
            Some(prev) => {
                flush(prev, &mut out);
                Some((state, c, c, changes))
            }
            None => Some((state, c, c, changes)),
        };
    }
    if let Some(prev) = cur {
        flush(prev, &mut out);
    }
    out
}

/// Time axis step: 1, 2 or 5 × 10^k ms, at least ~90 px apart.
fn axis_step(duration_ms: u64) -> u64 {
    let min = (duration_ms as f64 * 90.0 / PLOT_W).max(1.0);
    let mut step = 1u64;
    loop {
        for m in [1, 2, 5] {
            if (step * m) as f64 >= min {
                return step * m;
            }
        }
        step *= 10;
    }
}

/// Draws the model; the SVG's text and its counts.
pub fn draw(model: &Model, lines: &[JsonLine]) -> (String, Stats) {
    let geo = Geometry { duration: model.duration_ms.max(1) as f64 };
    let n = model.lanes.len();
    let height = TOP + LANE_H * n as f64 + BOTTOM;
    let width = LEFT + PLOT_W + RIGHT;
    let bin_px = choose_bin_px(model, &geo);
    let band_cap = MIN_BANDS_PER_LANE.max(BAND_BUDGET / n.max(1));
    let mut counts = Stats { lanes: n, bin_px, ..Stats::default() };

    // Axis and grid.
    let mut axis = Group::new().set("class", "axis");
    let step = axis_step(model.duration_ms);
    let mut t = 0;
    while t <= model.duration_ms {
        let x = LEFT + geo.x(t);
        axis = axis
            .add(
                Line::new()
                    .set("class", "grid")
                    .set("x1", px(x))
                    .set("x2", px(x))
                    .set("y1", px(TOP - 6.0))
                    .set("y2", px(height - BOTTOM)),
            )
            .add(Text::new(secs(t)).set("class", "tick-label").set("x", px(x)).set("y", px(TOP - 10.0)));
        t += step;
    }

    let mut lanes_g = Vec::with_capacity(n);
    for (i, lane) in model.lanes.iter().enumerate() {
        let y = TOP + LANE_H * i as f64;
        let mut g = Group::new().set("class", "lane");
        g = g.add(rect(if i % 2 == 0 { "lane-bg" } else { "lane-bg lane-alt" }, 0.0, y, width, LANE_H, None));
        g = g.add(
            Text::new(lane_label(&lane.name))
                .set("class", "lane-label")
                .set("x", px(LEFT - 10.0))
                .set("y", px(y + BAND_Y + BAND_H - 4.0))
                .add(Title::new(clip(&lane.name, TITLE_MAX))),
        );
        for b in bands(lines, lane, &geo, y, band_cap) {
            counts.bands += 1;
            g = g.add(b);
        }

        // Marks, binned per kind and column.
        let mut bins: BTreeMap<(MarkKind, u64), Bin> = BTreeMap::new();
        for m in &lane.marks {
            bins.entry((m.kind, geo.col(m.t, bin_px)))
                .or_insert(Bin { first: m.t, last: m.t, count: 0, shown: Vec::new() })
                .add(m.t, m.line);
        }
        let bw = f64::from(bin_px);
        for ((kind, col), bin) in &bins {
            // A single mark sits at its time; a bin covers its column.
            let (x, w) = if bin.count == 1 || bin_px == 1 {
                (geo.x(bin.first) - 1.0, 2.0)
            } else {
                (*col as f64 * bw, bw.max(2.0))
            };
            let (my, mh) = match kind {
                MarkKind::Poll => (BAND_Y + 2.0, BAND_H - 4.0),
                MarkKind::Event | MarkKind::SilentFlap => (BAND_Y + BAND_H + 1.0, 10.0),
                MarkKind::Note => (BAND_Y + BAND_H + 3.0, 6.0),
                MarkKind::ExpectHeld | MarkKind::ExpectFailed => (BAND_Y - 4.0, 4.0),
            };
            let (x, w) =
                if matches!(kind, MarkKind::ExpectHeld | MarkKind::ExpectFailed) { (x - 1.5, w + 3.0) } else { (x, w) };
            let title = bin_title(lines, kind.noun(), bin.count, bin.first, bin.last, &bin.shown);
            g = g.add(rect(kind.class(), LEFT + x, y + my, w, mh, Some(title)));
            counts.marks += 1;
        }

        // Recoveries and generation labels, binned like marks; their
        // text only where it does not run into another.
        for grp in annotations(lines, lane, &geo, bin_px, y, &mut counts) {
            g = g.add(grp);
        }
        lanes_g.push(g);
    }

    let mut doc = Document::new()
        .set("class", "timeline")
        .set("viewBox", format!("0 0 {} {}", px(width), px(height)))
        .set("width", px(width))
        .set("height", px(height))
        .set("role", "img")
        .set("data-lanes", counts.lanes)
        .set("data-bands", counts.bands)
        .set("data-marks", counts.marks)
        .set("data-bin-px", bin_px)
        .add(axis);
    for g in lanes_g {
        doc = doc.add(g);
    }
    (doc.to_string(), counts)
}
