//! The HTML around the picture (maud escapes everything it interpolates),
//! the style sheet (light and dark) and the one tiny inline script.

use maud::{DOCTYPE, Markup, PreEscaped, html};
use serde_json::Value;

use crate::Timeline;
use crate::draw::{clip, secs};
use crate::fold::Folded;
use crate::model::{Model, PAUSE_REASONS};

/// Nothing may be fetched: no font, image, style sheet, script or
/// connection from anywhere; only the page's own inline style and script.
const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'";

/// Colours are CSS variables: one set for light, one for dark.
const CSS: &str = r#"
:root {
  color-scheme: light dark;
  --bg: #ffffff; --fg: #1f2328; --muted: #59636e; --grid: #d8dee4;
  --lane: #ffffff; --lane-alt: #f3f5f7; --rule: #d0d7de;
  --active: #2da44e; --inert: #8c959f; --other: #b7bec6;
  --port_err: #cf222e; --port_not_active: #e16f24; --device_fatal: #8e1537;
  --device_removed: #8250df; --not_opened: #57606a; --damped: #bf8700;
  --settling: #1b8ca0; --data_path: #953800; --no_address: #0550ae; --unknown: #b7bec6;
  --half_open: #a0d9a8; --silent: #9a6700;
  --event: #1f2328; --note: #8c959f; --poll: #ffffff;
  --held: #1a7f37; --failed: #cf222e; --recovery: #1a7f37;
}
@media (prefers-color-scheme: dark) {
  :root {
    --bg: #0d1117; --fg: #e6edf3; --muted: #9198a1; --grid: #30363d;
    --lane: #0d1117; --lane-alt: #161b22; --rule: #30363d;
    --active: #2ea043; --inert: #6e7681; --other: #545d68;
    --port_err: #f85149; --port_not_active: #f0883e; --device_fatal: #db61a2;
    --device_removed: #a371f7; --not_opened: #8b949e; --damped: #d29922;
    --settling: #39c5cf; --data_path: #ffa657; --no_address: #79c0ff; --unknown: #545d68;
    --half_open: #1f6f2e; --silent: #e3b341;
    --event: #e6edf3; --note: #7d8590; --poll: #0d1117;
    --held: #3fb950; --failed: #f85149; --recovery: #3fb950;
  }
}
body { background: var(--bg); color: var(--fg); margin: 16px 20px;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; }
h1 { font-size: 20px; margin: 0 0 4px; }
h2 { font-size: 16px; margin: 20px 0 6px; }
p.sub { color: var(--muted); margin: 0 0 10px; }
ul.legend { list-style: none; padding: 0; margin: 0 0 10px; display: flex; flex-wrap: wrap; gap: 4px 14px;
  font-size: 12px; color: var(--muted); }
ul.legend li { display: flex; align-items: center; gap: 5px; }
.sw { display: inline-block; width: 14px; height: 10px; border-radius: 2px; }
.sw.thin { width: 3px; height: 12px; border-radius: 0; }
.sw-active { background: var(--active); } .sw-inert { background: var(--inert); }
.sw-event { background: var(--event); } .sw-note { background: var(--note); }
.sw-poll { background: linear-gradient(90deg, var(--port_err) 0 6px, var(--poll) 6px 8px, var(--port_err) 8px); }
.sw-held { background: var(--held); }
.sw-silent { background: var(--silent); }
.sw-failed { background: var(--failed); } .sw-recovery { background: var(--recovery); }
.picture { overflow-x: auto; }
svg.timeline { display: block; max-width: 100%; height: auto;
  font: 11px system-ui, -apple-system, "Segoe UI", sans-serif; }
svg.timeline text { fill: var(--fg); }
.lane-bg { fill: var(--lane); } .lane-bg.lane-alt { fill: var(--lane-alt); }
.lane-label { text-anchor: end; }
.grid { stroke: var(--grid); stroke-width: 1; }
svg.timeline .tick-label { fill: var(--muted); text-anchor: middle; font-size: 10px; }
.band-active { fill: var(--active); }
.band-inert { fill: var(--inert); }
.band-paused { fill: var(--other); }
.band-flapping { fill-opacity: .5; }
.mark.event { fill: var(--event); } .mark.note { fill: var(--note); }
.mark.poll { fill: var(--poll); opacity: .55; }
.mark.silent { fill: var(--silent); }
.mark.expect-held { fill: var(--held); } .mark.expect-failed { fill: var(--failed); }
.mark:hover, .band:hover { stroke: var(--fg); stroke-width: 1; }
.recovery-mark { fill: var(--recovery); }
svg.timeline .recovery-label { font-size: 10px; }
svg.timeline .gen-label text { fill: var(--muted); font-size: 10px; }
.gen-tick { stroke: var(--muted); stroke-width: 1; stroke-dasharray: 2 2; }
table { border-collapse: collapse; font-size: 13px; }
th, td { text-align: left; padding: 3px 12px 3px 0; border-bottom: 1px solid var(--rule); }
td.num, th.num { text-align: right; }
.state-active { color: var(--held); } .state-paused { color: var(--port_not_active); }
.state-inert { color: var(--muted); }
.counters { margin: 10px 0 0; } .failed { color: var(--failed); }
ul.failures { margin: 4px 0; padding-left: 20px; }
code { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: 12px; }
"#;

/// On load, counts the lanes and bands that were laid out with a non-zero
/// size and writes them on the picture (`data-rendered-lanes`,
/// `data-rendered-bands`), so a headless browser's dump shows that the
/// picture was rendered, not only parsed. Loads nothing.
const SCRIPT: &str = r#"
addEventListener("load", function () {
  var svg = document.querySelector("svg.timeline");
  if (!svg) return;
  function sized(selector) {
    var n = 0;
    svg.querySelectorAll(selector).forEach(function (e) {
      var r = e.getBoundingClientRect();
      if (r.width > 0 && r.height > 0) n++;
    });
    return n;
  }
  svg.setAttribute("data-rendered-lanes", sized(".lane"));
  svg.setAttribute("data-rendered-bands", sized(".band"));
});
"#;

fn reason_rules() -> String {
    let mut css = String::new();
    for r in PAUSE_REASONS.iter().chain(&["unknown"]) {
        css.push_str(&format!(
            ".band-paused.reason-{r} {{ fill: var(--{r}); }} .sw-{r} {{ background: var(--{r}); }}\n"
        ));
    }
    css
}

fn reason_label(reason: &str) -> &str {
    match reason {
        "damped" => "held by damping",
        "data_path" => "data-path breaker",
        "no_address" => "no address",
        "half_open" => "breaker half-open (one probe at a time)",
        other => other,
    }
}

fn text(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "–".to_string(),
        Some(Value::String(s)) => clip(s, 200),
        Some(Value::Bool(true)) => "yes".to_string(),
        Some(Value::Bool(false)) => "no".to_string(),
        Some(other) => clip(&other.to_string(), 200),
    }
}

fn summary(timeline: &Timeline, model: &Model, folded: Option<&Folded>) -> Markup {
    let Some(summary) = model.summary.map(|i| timeline.lines[i].value()) else {
        return html! { p.sub { "No summary line: the run did not finish." } };
    };
    let all: &[Value] = summary.get("rails").and_then(Value::as_array).map_or(&[], Vec::as_slice);
    // The rails drawn only, when some were folded (their line says how many).
    let rails: Vec<&Value> = all
        .iter()
        .filter(|r| folded.is_none_or(|f| r.get("rail").and_then(Value::as_str).is_some_and(|n| f.drawn.contains(n))))
        .collect();
    let failures: Vec<Value> = timeline
        .lines
        .iter()
        .map(crate::Line::value)
        .filter(|l| {
            l.get("kind").and_then(Value::as_str) == Some("expect") && l.get("passed") == Some(&Value::Bool(false))
        })
        .collect();
    let ex = summary.get("expectations");
    html! {
        h2 { "Summary at " (secs(summary.get("t_ms").and_then(Value::as_u64).unwrap_or(0))) }
        table.summary {
            thead { tr { th { "rail" } th { "state" } th { "available" } th.num { "Gb/s" } th.num { "generation" } } }
            tbody {
                @for r in rails {
                    @let state = text(r.get("state"));
                    @let class = if matches!(state.as_str(), "active" | "paused" | "inert") { state.as_str() } else { "other" };
                    tr {
                        td { code { (text(r.get("rail"))) } }
                        td class={ "state-" (class) } { (state) }
                        td { (text(r.get("available"))) }
                        td.num { (text(r.get("bandwidth_gbps"))) }
                        td.num { (text(r.get("generation"))) }
                    }
                }
            }
        }
        p.counters {
            "Events queued " b { (text(summary.get("events_queued"))) }
            ", read " b { (text(summary.get("events_read"))) }
            ", acked " b { (text(summary.get("events_acked"))) }
            ". Expectations held " b { (text(ex.and_then(|e| e.get("passed")))) }
            ", failed " b.failed[!failures.is_empty()] { (text(ex.and_then(|e| e.get("failed")))) }
            "."
        }
        @if !failures.is_empty() {
            h2.failed { "Failed expectations" }
            ul.failures {
                @for f in failures.iter().take(200) {
                    li {
                        (secs(f.get("t_ms").and_then(Value::as_u64).unwrap_or(0))) " "
                        code { (text(f.get("rail"))) } ": " (text(f.get("detail")))
                    }
                }
                @if failures.len() > 200 { li { "… and " (failures.len() - 200) " more" } }
            }
        }
    }
}

fn legend() -> Markup {
    html! {
        ul.legend {
            li { span.sw.sw-active {} "active" }
            @for r in PAUSE_REASONS {
                li { span class={ "sw sw-" (r) } {} "paused: " (reason_label(r)) }
            }
            li { span.sw.sw-inert {} "inert" }
            li { span.sw.thin.sw-event {} "event" }
            li { span.sw.thin.sw-silent {} "silent flap" }
            li { span.sw.thin.sw-note {} "drain, reseed, available, address" }
            li { span.sw.sw-poll {} "recovery tick's poll (faint)" }
            li { span.sw.sw-held {} "expectation held" }
            li { span.sw.sw-failed {} "failed" }
            li { span.sw.sw-recovery {} "recovery (by, time out)" }
        }
    }
}

/// The whole page.
pub fn page(timeline: &Timeline, model: &Model, folded: Option<&Folded>, svg: &str) -> String {
    let title = clip(&timeline.title, 200);
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="color-scheme" content="light dark";
                meta http-equiv="Content-Security-Policy" content=(CSP);
                title { "railwatch: " (title) }
                style { (PreEscaped(CSS)) (PreEscaped(reason_rules())) }
            }
            body {
                h1 { "railwatch · " (title) }
                p.sub {
                    (secs(model.duration_ms)) ", " (model.lanes.len() + folded.map_or(0, |f| f.rails)) " rail(s), "
                    (timeline.lines.len()) " JSON line(s). Hover a mark or band for the line behind it."
                }
                @if let Some(cut) = timeline.cut {
                    p.sub.cut {
                        "The picture stops at " (secs(cut.at_ms)) ", where it reached its limit of "
                        (crate::MAX_LINES) " lines (or " (crate::MAX_TICKS) " ticks); the run went on to "
                        (secs(timeline.duration_ms)) " and " (cut.left_out)
                        " more line(s) and tick(s) are not drawn. The table below is the run's end."
                    }
                }
                (legend())
                @if let Some(f) = folded {
                    p.sub.cut {
                        (f.rails) " more rail(s) are not drawn: the picture keeps the " (crate::MAX_LANES)
                        " with the most happening. Of those left out, at the end " (f.active) " were active, "
                        (f.paused) " paused and " (f.inert) " inert; they had " (f.recoveries) " recovery(ies) and "
                        (f.marks) " mark(s)."
                    }
                }
                div.picture { (PreEscaped(svg)) }
                (summary(timeline, model, folded))
                script { (PreEscaped(SCRIPT)) }
            }
        }
    };
    markup.into_string()
}
