//! Unit tests: bands from transitions, binning, escaping, the size bound,
//! the style sheet and the absence of anything fetched.

use serde_json::{Value, json};

use crate::model::{Kind, MarkKind, Model, State};
use crate::{Line, MARK_BUDGET, Timeline, render};

fn transition(t: u64, rail: &str, from: &str, to: &str, generation: u64, cause: (&str, &str)) -> Value {
    let mut v = json!({"t_ms": t, "kind": "transition", "rail": rail, "from": from, "to": to,
        "generation": generation});
    v[cause.0] = json!(cause.1);
    v
}

fn summary(t: u64, rails: &[(&str, &str)]) -> Value {
    let rails: Vec<Value> = rails
        .iter()
        .map(|(r, s)| {
            json!({"rail": r, "state": s, "available": *s == "active", "bandwidth_gbps": 400.0,
            "generation": 1})
        })
        .collect();
    json!({"t_ms": t, "kind": "summary", "rails": rails, "events_queued": 0, "events_read": 0,
        "events_acked": 0, "expectations": {"passed": 0, "failed": 0}})
}

fn timeline(duration_ms: u64, lines: Vec<Value>, ticks: Vec<u64>) -> Timeline {
    Timeline { title: "test".into(), duration_ms, rails: vec![], lines: texts(lines), ticks, cut: None }
}

fn texts(lines: Vec<Value>) -> Vec<Line> {
    lines.into_iter().map(Line::from).collect()
}

/// How often `needle` occurs in `hay`.
fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

fn paused(reason: &'static str) -> State {
    State { kind: Kind::Paused, reason: Some(reason) }
}

const ACTIVE: State = State { kind: Kind::Active, reason: None };

#[test]
fn bands_follow_the_transitions_merging_equal_states_and_dropping_empty_ones() {
    let r = "mlx5_0/1";
    let t = timeline(
        5000,
        vec![
            transition(0, r, "inert", "active", 1, ("by", "attach")), // zero-length inert run
            transition(100, r, "active", "paused", 1, ("reason", "port_err")),
            transition(100, r, "paused", "paused", 1, ("reason", "port_err")), // no change
            transition(300, r, "paused", "paused", 1, ("reason", "damped")),   // a new reason, a new band
            transition(900, r, "paused", "paused", 2, ("reason", "gid_change")), // a bump keeps the reason
            transition(1200, r, "paused", "active", 2, ("by", "poll")),
            transition(1500, r, "active", "active", 3, ("reason", "cq_err")), // bump: same band
            transition(2000, r, "active", "inert", 3, ("reason", "device_removed")),
            transition(2000, r, "inert", "active", 4, ("by", "attach")), // zero-length inert run
            summary(5000, &[(r, "active")]),
        ],
        vec![],
    );
    let model = Model::build(&t);
    assert_eq!(model.lanes.len(), 1);
    let runs: Vec<(u64, u64, State)> = model.lanes[0].runs.iter().map(|r| (r.start, r.end, r.state)).collect();
    assert_eq!(
        runs,
        vec![(0, 100, ACTIVE), (100, 300, paused("port_err")), (300, 1200, paused("damped")), (1200, 5000, ACTIVE)]
    );
    // Each run keeps the line that started it.
    assert_eq!(model.lanes[0].runs[1].line, Some(1));
    // Recoveries: the first attach, the poll after 1.1 s out, the re-attach.
    let recs: Vec<(u64, &str, u64)> =
        model.lanes[0].recoveries.iter().map(|r| (r.t, r.by.as_str(), r.out_ms)).collect();
    assert_eq!(recs, vec![(0, "attach", 0), (1200, "poll", 1100), (2000, "attach", 0)]);
    // Generations: 1 at the attach, then 2, 3, 4.
    let gens: Vec<(u64, u64)> = model.lanes[0].gens.iter().map(|g| (g.t, g.generation)).collect();
    assert_eq!(gens, vec![(0, 1), (900, 2), (1500, 3), (2000, 4)]);

    let (html, stats) = render(&t);
    assert_eq!(stats.bands, 4);
    assert_eq!(count(&html, r#"class="band "#), 4);
    assert_eq!(count(&html, r#"class="band band-active""#), 2);
    assert_eq!(count(&html, r#"class="band band-paused reason-port_err""#), 1);
    assert_eq!(count(&html, r#"class="band band-paused reason-damped""#), 1);
    assert!(html.contains(r#"data-bands="4""#));
    assert_eq!(count(&html, r#"class="recovery""#), 3);
    assert_eq!(count(&html, r#"class="gen-label""#), stats.gen_labels);
    assert!(html.contains("by poll · out 1.1 s"), "the recovery is annotated");
    // A band's tooltip is the transition line behind it.
    assert!(html.contains(&format!("paused (port_err) from 0.1 s to 0.3 s\n{}</title>", t.lines[1])));
}

#[test]
fn a_lane_without_lines_is_active_unless_the_summary_says_otherwise() {
    let t = timeline(1000, vec![summary(1000, &[("a/1", "active"), ("b/1", "inert"), ("c/1", "paused")])], vec![]);
    let model = Model::build(&t);
    let states: Vec<State> = model.lanes.iter().map(|l| l.runs[0].state).collect();
    assert_eq!(
        states,
        vec![
            ACTIVE,
            State { kind: Kind::Inert, reason: Some("unknown") },
            State { kind: Kind::Paused, reason: Some("unknown") }
        ]
    );
    assert!(model.lanes.iter().all(|l| l.runs.len() == 1 && l.runs[0].end == 1000));
    let (html, stats) = render(&t);
    assert_eq!((stats.lanes, stats.bands), (3, 3));
    assert_eq!(count(&html, r#"<g class="lane">"#), 3);
    assert!(html.contains(r#"class="band band-inert reason-unknown""#));
}

#[test]
fn the_initial_state_is_the_first_transitions_from_and_lanes_follow_the_summary_order() {
    let t = timeline(
        1000,
        vec![
            transition(500, "z/1", "paused", "active", 2, ("by", "event")),
            summary(1000, &[("a/1", "active"), ("z/1", "active")]),
        ],
        vec![],
    );
    let model = Model::build(&t);
    let names: Vec<&str> = model.lanes.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["a/1", "z/1"]);
    let z = &model.lanes[1];
    assert_eq!(z.runs[0].state, paused("unknown"));
    assert_eq!((z.runs[0].start, z.runs[0].end), (0, 500));
    // Out since the start: nothing said it was ever active before.
    assert_eq!(z.recoveries[0].out_ms, 500);
}

#[test]
fn polls_mark_only_the_lanes_that_were_out_at_the_tick() {
    let t = timeline(
        3000,
        vec![
            transition(100, "a/1", "active", "paused", 1, ("reason", "port_err")),
            transition(1100, "a/1", "paused", "active", 2, ("by", "poll")),
            summary(3000, &[("a/1", "active"), ("b/1", "active")]),
        ],
        vec![50, 600, 1100, 1600],
    );
    let model = Model::build(&t);
    let polls = |l: usize| -> Vec<u64> {
        model.lanes[l].marks.iter().filter(|m| m.kind == MarkKind::Poll).map(|m| m.t).collect()
    };
    // The tick at 1100 is the one that found the port ACTIVE.
    assert_eq!(polls(0), vec![600, 1100]);
    assert!(polls(1).is_empty());
    let (html, _) = render(&t);
    assert_eq!(count(&html, r#"class="mark poll""#), 2);
}

#[test]
fn device_lines_mark_every_lane_of_their_device() {
    let t = timeline(
        1000,
        vec![
            json!({"t_ms": 10, "kind": "drain", "device": "mlx5_0", "events": 3, "result": "drained"}),
            json!({"t_ms": 20, "kind": "event", "event": "device_fatal", "code": 8, "device": "mlx5_0"}),
            json!({"t_ms": 30, "kind": "expect", "at_ms": 30, "rail": "mlx5_1/1", "passed": false, "detail": "nope"}),
            summary(1000, &[("mlx5_0/1", "active"), ("mlx5_0/2", "active"), ("mlx5_1/1", "active")]),
        ],
        vec![],
    );
    let (html, _) = render(&t);
    assert_eq!(count(&html, r#"class="mark note""#), 2);
    assert_eq!(count(&html, r#"class="mark event""#), 2);
    assert_eq!(count(&html, r#"class="mark expect expect-failed""#), 1);
    // The failed expectation is listed under the summary.
    assert!(html.contains("Failed expectations"));
    assert!(html.contains("nope"));
}

#[test]
fn marks_in_one_pixel_column_are_one_binned_mark_whose_title_is_bounded() {
    // 500 events within 1 ms of a 10 s run: one pixel column.
    let mut lines: Vec<Value> = (0..500)
        .map(|i| {
            json!({"t_ms": 5000 + i / 500, "kind": "event", "event": "port_err", "code": 10, "rail": "a/1",
                "pad": "x".repeat(400)})
        })
        .collect();
    lines.push(json!({"t_ms": 9000, "kind": "event", "event": "port_active", "code": 9, "rail": "a/1"}));
    lines.push(summary(10_000, &[("a/1", "active")]));
    let t = timeline(10_000, lines, vec![]);
    let (html, stats) = render(&t);
    assert_eq!(stats.marks, 2);
    assert_eq!(count(&html, r#"class="mark event""#), 2);
    assert!(html.contains("500 × event line"), "the bin says how many");
    // A single mark's tooltip is exactly its JSON line.
    let single = t.lines[500].to_string();
    assert!(html.contains(&format!("<title>{}</title>", single.replace('<', "&lt;"))));
    // Every title is bounded.
    for title in html.split("<title>").skip(1) {
        let text = title.split("</title>").next().unwrap_or("");
        assert!(text.chars().count() <= crate::TITLE_MAX + 40, "title too long: {} chars", text.len());
    }
}

#[test]
fn everything_from_the_input_is_escaped() {
    let evil = r#"<script>alert("x")</script>&'"#;
    let rail = format!("{evil}/1");
    let t = Timeline {
        title: format!("<u>{evil}</u>"),
        duration_ms: 1000,
        rails: vec![],
        lines: texts(vec![
            transition(100, &rail, "active", "paused", 1, ("reason", "<img src=x onerror=alert(1)>")),
            json!({"t_ms": 200, "kind": "expect", "at_ms": 200, "rail": rail, "passed": false, "detail": evil}),
            summary(1000, &[(&rail, "<i>paused</i>")]),
        ]),
        ticks: vec![],
        cut: None,
    };
    let (html, _) = render(&t);
    assert!(!html.contains("<script>alert"), "no raw script from the input");
    assert!(!html.contains("<u>"), "no raw markup from the title");
    assert!(!html.contains("<img"), "no raw markup from a reason");
    assert!(!html.contains("<i>"), "no raw markup from the summary");
    assert!(html.contains("&lt;script&gt;alert"), "the name is shown, escaped");
    // An unknown reason is not a class either.
    assert!(html.contains("reason-other"));
    // Exactly one script element: the page's own.
    assert_eq!(count(&html, "<script"), 1);
}

#[test]
fn the_page_has_light_and_dark_colours_and_fetches_nothing() {
    let t = timeline(1000, vec![summary(1000, &[("a/1", "active")])], vec![]);
    let html = crate::render_html(&t);
    assert!(html.contains("@media (prefers-color-scheme: dark)"));
    assert!(html.contains("color-scheme: light dark"));
    assert!(html.contains("--active:"));
    assert!(html.contains("Content-Security-Policy"));
    let lower = html.to_ascii_lowercase();
    for attr in ["src=", "href=", "url(", "@import"] {
        for scheme in ["http://", "https://", "//"] {
            for quote in ["", "\"", "'"] {
                let needle = format!("{attr}{quote}{scheme}");
                assert!(!lower.contains(&needle), "the page refers to {needle}");
            }
        }
    }
    assert!(!lower.contains("<link"), "no external style sheet");
    assert!(!lower.contains("<img"), "no image");
    assert!(!lower.contains("<script src"), "no external script");
}

/// 100 rails, 10^5 events (plus their drains, 20 000 transitions and 6 000
/// ticks) over ten minutes: the page stays a few MB.
#[test]
fn a_hundred_rails_and_a_hundred_thousand_events_stay_bounded() {
    let rails: Vec<String> = (0..100).map(|i| format!("mlx5_{}/{}", i / 2, i % 2 + 1)).collect();
    let mut lines = Vec::with_capacity(230_000);
    let mut generation = vec![1u64; 100];
    for i in 0..100_000u64 {
        let r = (i % 100) as usize;
        let t = i * 6;
        let rail = &rails[r];
        let device = rail.split('/').next().unwrap_or_default();
        let round = (i / 100) % 10;
        let event = if round == 0 {
            "port_err"
        } else if round == 1 {
            "port_active"
        } else {
            "gid_change"
        };
        lines.push(json!({"t_ms": t, "kind": "event", "event": event, "code": 10, "rail": rail}));
        if round == 0 {
            lines.push(transition(t, rail, "active", "paused", generation[r], ("reason", "port_err")));
        } else if round == 1 {
            generation[r] += 1;
            lines.push(transition(t, rail, "paused", "active", generation[r], ("by", "event")));
        }
        lines.push(json!({"t_ms": t, "kind": "drain", "device": device, "events": 1, "result": "drained"}));
    }
    let names: Vec<(&str, &str)> = rails.iter().map(|r| (r.as_str(), "active")).collect();
    lines.push(summary(600_000, &names));
    let ticks: Vec<u64> = (1..6000).map(|k| k * 100).collect();
    let lines = texts(lines);
    let t = Timeline { title: "synthetic".into(), duration_ms: 600_000, rails: vec![], lines, ticks, cut: None };

    let (html, stats) = render(&t);
    eprintln!("100 rails × 1e5 events: {stats:?}");
    assert!(stats.bytes < 4_000_000, "the page is {} bytes", stats.bytes);
    assert_eq!(stats.bytes, html.len());
    assert_eq!(stats.lanes, 100);
    assert_eq!(count(&html, r#"<g class="lane">"#), 100);
    assert!(stats.marks + stats.recoveries <= MARK_BUDGET, "{stats:?}");
    assert_eq!(count(&html, r#"class="mark "#), stats.marks);
    assert!(stats.bands <= crate::BAND_BUDGET + 100, "{stats:?}");
    assert_eq!(count(&html, r#"class="band "#), stats.bands);
    assert_eq!(count(&html, r#"class="recovery""#), stats.recoveries);
    assert_eq!(count(&html, r#"class="gen-label""#), stats.gen_labels);
    assert!(stats.gen_labels <= 100 * 200, "{stats:?}");
    let elements = count(&html, "<rect") + count(&html, "<g ") + count(&html, "<text") + count(&html, "<line");
    assert!(elements < 40_000, "{elements} elements");
}

/// A long rail name keeps its port in the lane label (two ports of one
/// long-named device stay apart), and a bidirectional override is shown
/// escaped, so it cannot make a label read backwards.
#[test]
fn long_names_keep_their_port_and_bidi_controls_are_escaped() {
    let a = super::draw::lane_label("a_device_with_a_very_long_name_indeed/1");
    let b = super::draw::lane_label("a_device_with_a_very_long_name_indeed/2");
    assert!(a.ends_with("/1") && b.ends_with("/2") && a != b, "{a} {b}");
    assert!(a.chars().count() <= 25, "{a}");
    assert_eq!(super::draw::lane_label("mlx5_0/1"), "mlx5_0/1");
    assert!(super::is_bidi_control('\u{202e}'));
    assert!(!super::draw::clip("x\u{202e}y", 10).contains('\u{202e}'));
}

/// A run longer than a timeline holds: `push` keeps the first
/// `MAX_LINES` lines and the summary, cuts the picture at the first line
/// it left out, counts the rest, and the page says so.
#[test]
fn a_run_too_long_to_hold_is_cut_and_says_so() {
    let rail = "mlx5_0/1";
    let mut t = Timeline { title: "long".into(), duration_ms: 10_000_000, ..Timeline::default() };
    t.push(transition(0, rail, "inert", "active", 1, ("by", "attach")));
    for i in 1..crate::MAX_LINES as u64 {
        t.push(json!({"t_ms": i, "kind": "drain", "device": "mlx5_0"}));
    }
    assert_eq!(t.cut, None);
    t.push_tick(1_000);
    // The first line left out cuts the picture at its time.
    let at = crate::MAX_LINES as u64 + 5;
    t.push(transition(at, rail, "active", "paused", 1, ("reason", "port_err")));
    t.push_tick(at + 1);
    t.push(json!({"t_ms": at + 2, "kind": "drain", "device": "mlx5_0"}));
    t.push(summary(10_000_000, &[(rail, "paused")]));
    assert_eq!(t.cut, Some(crate::Cut { at_ms: at, left_out: 3 }));
    assert_eq!(t.lines.len(), crate::MAX_LINES + 1);
    assert_eq!(t.ticks, [1_000]);
    let (html, stats) = render(&t);
    assert!(html.contains("The picture stops at"), "no word of the cut");
    // Active to the cut: the pause after it is not drawn.
    assert_eq!(stats.bands, 1, "{stats:?}");
}

/// The largest scenario allowed (4,096 devices × 16 ports): lanes past
/// `MAX_LANES` are folded into one line, the summary table shows the drawn
/// rails only, and the page stays far under 10 MB (it was 92 MB).
#[test]
fn the_largest_scenario_s_rails_are_folded_into_a_bounded_page() {
    let rails: Vec<String> = (0..4096 * 16).map(|i| format!("mlx5_{}/{}", i / 16, i % 16 + 1)).collect();
    let mut lines = Vec::with_capacity(rails.len() + 400);
    for rail in &rails {
        lines.push(json!({"t_ms": 0, "kind": "transition", "rail": rail, "from": "inert", "to": "active", "generation": 1, "by": "attach"}));
    }
    // A few rails flap: those are drawn.
    for rail in rails.iter().step_by(1000) {
        lines.push(transition(100, rail, "active", "paused", 1, ("reason", "port_err")));
    }
    let names: Vec<(&str, &str)> = rails.iter().map(|r| (r.as_str(), "active")).collect();
    lines.push(summary(1000, &names));
    let t = Timeline {
        title: "largest".into(),
        duration_ms: 1000,
        rails: vec![],
        lines: texts(lines),
        ticks: vec![],
        cut: None,
    };
    let (html, stats) = render(&t);
    assert_eq!(stats.lanes, crate::MAX_LANES);
    assert!(stats.bytes < 10_000_000, "the page is {} bytes", stats.bytes);
    assert!(
        html.contains(&format!("{} more rail(s) are not drawn", rails.len() - crate::MAX_LANES)),
        "the fold is told"
    );
    assert!(html.contains("65536 rail(s)"), "the header counts every rail");
    assert!(
        html.contains("<code>mlx5_0/1</code>") && html.contains("<code>mlx5_62/9</code>"),
        "the flapped rails are drawn"
    );
    assert!(count(&html, "<tr>") <= crate::MAX_LANES + 1, "the table shows the drawn rails");
}
