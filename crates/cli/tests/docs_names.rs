//! Every name a doc table lists is the code's, both ways: a name the doc
//! has and the code lacks fails, and so does a name the code has and the
//! doc lacks (as `every_setting_is_documented_in_both_file_formats` holds
//! the settings). Each check names the doc file, the table and the name.
//!
//! The code's lists: `PauseReason::ALL`, `RecoveredBy::ALL`, `Cause::ALL`,
//! `EventKind::KNOWN`, `Body::KINDS`, the report's `PAUSE_REASONS`; the
//! machine's `pub fn handle_*` in its source; the families and types the
//! metrics encode; the alerts of the shipped rules; the keys of a
//! snapshot's JSON and of a line of every kind; the keys each scenario
//! table accepts (its parser's own list, from the error an unknown key
//! gets); the functions and constants of `railwatch.h` (tested equal to
//! the exports by `crates/ffi/tests/header.rs`).

mod doc_tables;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use doc_tables::{Doc, ticked};
use railwatch_core::{Cause, PauseReason, RecoveredBy};

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn set<S: Into<String>>(names: impl IntoIterator<Item = S>) -> BTreeSet<String> {
    names.into_iter().map(Into::into).collect()
}

fn reasons() -> BTreeSet<String> {
    set(PauseReason::ALL.map(PauseReason::name))
}

fn paths() -> BTreeSet<String> {
    set(RecoveredBy::ALL.map(RecoveredBy::name))
}

fn causes() -> BTreeSet<String> {
    set(Cause::ALL.map(Cause::name))
}

/// The causes that are no recovery path: pause reasons, bumps, silent flap.
fn causes_not_by() -> BTreeSet<String> {
    set(Cause::ALL.into_iter().filter(|c| !matches!(c, Cause::By(_))).map(Cause::name))
}

// ---- causes and reasons ---------------------------------------------------------

/// `Cause::ALL` is what transitions carry: every cause of every built-in's
/// transitions is in it.
#[test]
fn every_built_in_transition_has_a_cause_of_the_list() {
    let bin = env!("CARGO_BIN_EXE_railwatch");
    let list = std::process::Command::new(bin).arg("scenarios").output().unwrap();
    let builtins: Vec<String> = String::from_utf8(list.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| Some(l.split_whitespace().next()?.to_owned()))
        .collect();
    assert!(builtins.len() > 10, "{builtins:?}");
    let mut seen = BTreeSet::new();
    for name in builtins {
        let run = std::process::Command::new(bin).args(["simulate", "--builtin", &name, "--json"]).output().unwrap();
        for line in String::from_utf8(run.stdout).unwrap().lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            if v["kind"] == "transition" {
                let cause = v["reason"].as_str().or(v["by"].as_str()).unwrap_or_else(|| panic!("{name}: {line}"));
                seen.insert(cause.to_owned());
            }
        }
    }
    let listed = causes();
    let unlisted: Vec<_> = seen.difference(&listed).collect();
    assert!(unlisted.is_empty(), "built-ins' transitions carry {unlisted:?}, which Cause::ALL lacks");
}

#[test]
fn state_machine_md_lists_every_pause_reason() {
    let doc = Doc::read(root(), "docs/STATE-MACHINE.md");
    doc.table("Pause reasons (kept in the word", "| reason | meaning |").first_column().same_as(&reasons());
}

#[test]
fn json_md_lists_every_cause_and_recovery_path() {
    let doc = Doc::read(root(), "docs/JSON.md");
    let transition = doc.table("## `transition`", "| field | type | meaning |");
    transition.cell("reason", 2).same_as(&causes_not_by());
    transition.cell("by", 2).same_as(&paths());
    let rail = doc.table("A rail:", "| field | type | meaning |");
    rail.cell("recovered_by", 2).same_as(&paths());
    rail.cell("reason", 2).same_as(&reasons());
}

#[test]
fn metrics_md_lists_every_transition_cause() {
    let doc = Doc::read(root(), "docs/METRICS.md");
    let metrics = doc.table("## The metrics", "| metric | type | labels | what |");
    metrics.cell_after("railwatch_transitions_total", 3, "the cause:").same_as(&causes());
}

#[test]
fn scenarios_md_lists_every_reason_and_recovery_path_an_expect_takes() {
    let doc = Doc::read(root(), "docs/SCENARIOS.md");
    let expect = doc.table("## `[[expect]]`", "| key | type | default | meaning |");
    expect.cell("reason", 1).same_as(&reasons());
    expect.cell("recovered_by", 1).same_as(&paths());
}

#[test]
fn report_md_gives_every_reason_the_report_colours() {
    let doc = Doc::read(root(), "docs/REPORT.md");
    let bands = doc.table("## What it shows", "| colour (light) | band |").paused_bands();
    bands.same_as(&set(railwatch_report::PAUSE_REASONS));
}

/// The machine's inputs: its `pub fn handle_*` and `add_device`, as the
/// source of `crates/core/src/machine/` declares them.
fn machine_inputs() -> BTreeSet<String> {
    let dir = root().join("crates/core/src/machine");
    let sources = std::fs::read_dir(&dir).unwrap().map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap());
    let text: String = sources.collect();
    let inputs = text.lines().filter_map(|l| {
        let name = l.trim().strip_prefix("pub fn ")?.split(['(', '<']).next()?;
        (name.starts_with("handle_") || name == "add_device").then(|| name.to_owned())
    });
    set(inputs)
}

#[test]
fn state_machine_md_lists_every_input_of_the_machine() {
    let doc = Doc::read(root(), "docs/STATE-MACHINE.md");
    let table = doc.table("**Inputs**", "| input | what it says |");
    table.first_column().before('(').same_as(&machine_inputs());
}

// ---- metrics and alerts -------------------------------------------------------

/// Every family the agent encodes and its type, as its `# TYPE` line
/// names them.
fn metric_families() -> std::collections::BTreeMap<String, String> {
    let text =
        railwatch_cli::metrics::Metrics::new("0.0.0").exporter().encode(railwatch_cli::metrics::Format::Prometheus);
    let types = text.lines().filter_map(|l| {
        let (name, kind) = l.strip_prefix("# TYPE ")?.split_once(' ')?;
        Some((name.to_owned(), kind.to_owned()))
    });
    let families: std::collections::BTreeMap<_, _> = types.collect();
    assert!(families.len() > 20, "the encoding names its families: {text}");
    families
}

#[test]
fn metrics_md_lists_every_metric_with_its_type() {
    let doc = Doc::read(root(), "docs/METRICS.md");
    let table = doc.table("## The metrics", "| metric | type | labels | what |");
    let families = metric_families();
    table.first_column().same_as(&set(families.keys().cloned()));
    for (name, kind) in families {
        table.cell_text(&name, 1).starts_with_word(&kind);
    }
}

#[test]
fn metrics_md_lists_every_alert() {
    let rules = std::fs::read_to_string(root().join("crates/cli/dist/prometheus/railwatch.rules.yml")).unwrap();
    let alerts = set(rules.lines().filter_map(|l| Some(l.trim().strip_prefix("- alert: ")?.to_owned())));
    let doc = Doc::read(root(), "docs/METRICS.md");
    doc.table("## Alerts and dashboards", "| alert | fires when |").first_column().same_as(&alerts);
}

// ---- JSON ---------------------------------------------------------------------

#[test]
fn json_md_has_a_section_for_every_kind_of_line() {
    let doc = Doc::read(root(), "docs/JSON.md");
    let timeline = doc.headings("## ", "# `--json` output", "## Real devices");
    let watch = doc.headings("#### ", "### `railwatch watch --json`", "## Snapshot");
    let kinds = set(railwatch_runtime::lines::Body::KINDS);
    let documented = timeline.and(watch);
    documented.same_as(&kinds);
}

/// One happening of every kind, with every optional field given by one of
/// them (a transition's `reason` and `by`, an event's `rail` and `device`).
fn happenings() -> Vec<railwatch_core::Happening> {
    use railwatch_core::{EventKind, Happening as H, LinkRate, ObjectHandle, RailId, RailState, WorkScope};
    let rail = RailId { device: 0, port: 1 };
    let qp = WorkScope::Qp { kind: EventKind::QpFatal, handle: Some(ObjectHandle(1)) };
    let (paused, active) = (RailState::Paused, RailState::Active);
    vec![
        H::Event { device: 0, port: Some(1), kind: EventKind::PortErr },
        H::Event { device: 0, port: None, kind: EventKind::DeviceFatal },
        H::Transition { rail, from: active, to: paused, cause: Cause::Reason(PauseReason::PortErr), generation: 1 },
        H::Transition { rail, from: paused, to: active, cause: Cause::By(RecoveredBy::Poll), generation: 2 },
        H::Reseed { rail, from: None, to: LinkRate::gbps(400) },
        H::Available { rail, available: true },
        H::Drain { device: 0, events: 1, errno: Some(5) },
        H::AddressChanged { rail, generation: 3 },
        H::PeerFailing { rail, peer: 7 },
        H::HalfOpen { rail },
        H::ProbeFailed { rail, timed_out: true },
        H::GidIndex { rail, index: 1 },
        H::WorkLost { device: 0, scope: qp },
        H::WorkLost { device: 0, scope: WorkScope::Device(PauseReason::DeviceFatal) },
    ]
}

/// Every field each kind of line has, by kind, as the lines encode them
/// (`t_ms` and `kind` apart): `watch`'s address with its address, and an
/// expectation's verdict.
fn fields_by_kind() -> std::collections::BTreeMap<String, BTreeSet<String>> {
    use railwatch_runtime::lines::{ExpectResult, Line, Names, Record};
    let names =
        Names::new(vec!["mlx5_0".to_owned()], [(railwatch_core::RailId { device: 0, port: 1 }, "mlx5_0/1".into())]);
    let address = railwatch_core::PortAddress::default();
    let notes: Vec<_> = happenings()
        .into_iter()
        .map(|what| railwatch_core::Notification { t: railwatch_core::Millis(1), what })
        .collect();
    let verdict = ExpectResult { at_ms: 1, rail: "mlx5_0/1".into(), passed: true, detail: String::new() };
    let records = notes.iter().map(Record::Note).chain([Record::Expect(&verdict)]);
    let mut out = std::collections::BTreeMap::<String, BTreeSet<String>>::new();
    for record in records {
        let line = Line::of(&names, &record).expect("a line").with_address(Some(&address));
        let v = serde_json::to_value(&line).unwrap();
        let kind = v["kind"].as_str().unwrap().to_owned();
        out.entry(kind).or_default().extend(keys(&v).into_iter().filter(|k| k != "t_ms" && k != "kind"));
    }
    out
}

#[test]
fn json_md_lists_every_field_of_every_kind_of_line() {
    let doc = Doc::read(root(), "docs/JSON.md");
    let by_kind = fields_by_kind();
    // Summaries are below; `output_dropped` has one field, in its text.
    for kind in railwatch_runtime::lines::Body::KINDS.into_iter().filter(|k| !["summary", "output_dropped"].contains(k))
    {
        assert!(by_kind.contains_key(kind), "no sample line of kind {kind}: add one to happenings()");
    }
    for (kind, fields) in by_kind {
        doc.table(&format!("## `{kind}`"), "| field | type | meaning |").all_cells(0).same_as(&fields);
    }
}

#[test]
fn json_md_lists_every_field_of_simulates_summary() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_railwatch"))
        .args(["simulate", "--builtin", "missed-port-active", "--json"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let summary: serde_json::Value = serde_json::from_str(text.lines().last().expect("a summary")).unwrap();
    let fields = set(keys(&summary).into_iter().filter(|k| k != "t_ms" && k != "kind"));
    let doc = Doc::read(root(), "docs/JSON.md");
    let table = doc.table("## `summary`: last line", "| field | type | meaning |");
    table.first_column().same_as(&fields);
    table.cell_after("rails", 2, "rail,").in_order(&keys(&summary["rails"][0]));
}

/// A snapshot of one simulated rail, as JSON.
fn snapshot_json() -> serde_json::Value {
    use railwatch_runtime::{BandwidthSelector, Config, Monitor};
    use railwatch_sim_backend::{PortSpec, SimClock, SimDevice};
    let mut monitor = Monitor::new(Config::default(), Arc::new(BandwidthSelector::new()), SimClock::new()).unwrap();
    monitor.add_device(SimDevice::new("mlx5_0", &[PortSpec::active(1)]).unwrap());
    monitor.poll_once(Some(std::time::Duration::ZERO)).unwrap();
    serde_json::to_value(railwatch_runtime::json::SnapshotJson::of(&monitor.snapshot())).unwrap()
}

fn keys(v: &serde_json::Value) -> Vec<String> {
    v.as_object().expect("an object").keys().cloned().collect()
}

#[test]
fn json_md_lists_every_snapshot_field_in_order() {
    let doc = Doc::read(root(), "docs/JSON.md");
    let snapshot = snapshot_json();
    let top = doc.table("## Snapshot", "| field | type | meaning |");
    top.first_column().in_order(&keys(&snapshot));
    doc.table("A rail:", "| field | type | meaning |").first_column().in_order(&keys(&snapshot["rails"][0]));
    doc.table("A device:", "| field | type | meaning |").first_column().in_order(&keys(&snapshot["devices"][0]));
}

// ---- scenario files -------------------------------------------------------------

/// The keys the scenario parser accepts in the table `place` puts an
/// unknown key `zzz` into: its own list, from serde's error.
fn accepted(place: &str) -> BTreeSet<String> {
    let text = format!("duration_ms = 10\n[[device]]\nname = \"d\"\nports = [{{ port = 1 }}]\n{place}");
    let err = railwatch_scenario::Scenario::parse(&text, "keys.toml").expect_err("zzz is no key").to_string();
    let (_, list) =
        err.split_once("expected").unwrap_or_else(|| panic!("an unknown key's error lists the keys: {err}"));
    let names = ticked(list);
    assert!(!names.is_empty(), "{err}");
    names
}

const STEP: &str = "[[step]]\nat_ms = 1\ndevice = \"d\"\n";

#[test]
fn scenarios_md_lists_every_key_of_a_step() {
    let doc = Doc::read(root(), "docs/SCENARIOS.md");
    let steps = doc.table("## `[[step]]`", "| key | type | default | meaning |");
    steps.first_column().same_as(&accepted(&format!("{STEP}zzz = 1\n")));
    // Each step table's form, `{ port, state, notify? }`, is its keys.
    for key in ["port_state", "link", "gid", "counters", "carrier", "transfers", "probe"] {
        let form = steps.cell_form(key);
        form.same_as(&accepted(&format!("{STEP}{key} = {{ zzz = 1 }}\n")));
    }
}

#[test]
fn scenarios_md_lists_every_key_of_an_expect_and_a_device() {
    let doc = Doc::read(root(), "docs/SCENARIOS.md");
    let expect = doc.table("## `[[expect]]`", "| key | type | default | meaning |");
    expect.first_column().same_as(&accepted("[[expect]]\nat_ms = 1\nrail = \"d/1\"\nzzz = 1\n"));
    let device = doc.table("## `[[device]]`", "| key | type | default | meaning |");
    device.first_column().same_as(&accepted("zzz = 1\n"));
    let port = doc.table("Each entry of `ports`:", "| key | type | default | meaning |");
    port.first_column().same_as(&accepted("[[device]]\nname = \"e\"\nports = [{ port = 1, zzz = 1 }]\n"));
}

#[test]
fn scenarios_md_lists_every_event_by_its_scope() {
    use railwatch_core::{EventKind, Scope};
    let doc = Doc::read(root(), "docs/SCENARIOS.md");
    let scopes = doc.table("**Events.**", "| scope | events | element |");
    let of = |scopes: &[Scope]| set(EventKind::KNOWN.iter().filter(|k| scopes.contains(&k.scope())).map(|k| k.name()));
    scopes.cell("port", 1).same_as(&of(&[Scope::Port]));
    scopes.cell("device", 1).same_as(&of(&[Scope::Device]));
    scopes.cell_until("object", 1, "(").same_as(&of(&[Scope::Cq, Scope::Qp, Scope::Srq, Scope::Wq]));
}

#[test]
fn scenarios_md_lists_every_probe_outcome() {
    let doc = Doc::read(root(), "docs/SCENARIOS.md");
    let steps = doc.table("## `[[step]]`", "| key | type | default | meaning |");
    let outcomes = set(railwatch_scenario::scenario::ProbeOutcome::ALL.map(|(name, _)| name));
    steps.cell_after("probe", 3, "by outcome:").same_as(&outcomes);
}

// ---- the C API ------------------------------------------------------------------

/// The C API's two generated headers, railwatch.h and railwatch_sim.h
/// (the simulator), as one text.
fn header() -> String {
    ["railwatch.h", "railwatch_sim.h"]
        .map(|f| std::fs::read_to_string(root().join("crates/ffi/include").join(f)).expect(f))
        .concat()
}

/// The functions the headers declare.
fn c_functions(h: &str) -> BTreeSet<String> {
    let declared = h.lines().filter(|l| l.starts_with(|c: char| c.is_ascii_lowercase()) && l.contains('('));
    set(declared.filter_map(|l| {
        let name = l[..l.find('(')?].rsplit([' ', '*']).next()?;
        name.starts_with("rw_").then(|| name.to_owned())
    }))
}

/// The constants of one `typedef enum NAME { ... }` of `railwatch.h`.
fn c_enum(h: &str, name: &str) -> Vec<String> {
    let start = h.find(&format!("typedef enum {name} {{")).unwrap_or_else(|| panic!("railwatch.h has no enum {name}"));
    let body = &h[start..start + h[start..].find('}').expect("the enum ends")];
    body.lines()
        .filter_map(|l| Some(l.trim().split([' ', ',']).next()?.to_owned()))
        .filter(|c| c.starts_with("RW_"))
        .collect()
}

fn c_enums(h: &str) -> Vec<String> {
    h.lines().filter_map(|l| Some(l.strip_prefix("typedef enum ")?.split(' ').next()?.to_owned())).collect()
}

fn c_macros(h: &str) -> Vec<String> {
    h.lines()
        .filter_map(|l| Some(l.strip_prefix("#define ")?.split([' ', '(']).next()?.to_owned()))
        .filter(|m| m.starts_with("RW_"))
        .collect()
}

#[test]
fn the_ffi_readme_lists_every_function_of_the_header() {
    let h = header();
    let doc = Doc::read(root(), "crates/ffi/README.md");
    let table = doc.table("### Every name in the header", "| functions | names |");
    table.all_cells(1).same_as(&c_functions(&h));
}

#[test]
fn the_ffi_readme_lists_every_constant_of_the_header() {
    let h = header();
    let doc = Doc::read(root(), "crates/ffi/README.md");
    let table = doc.table("### Every name in the header", "| type | constants |");
    table.first_column().same_as(&set(c_enums(&h).into_iter().chain(["macros".to_owned()])));
    for e in c_enums(&h) {
        table.cell(&e, 1).same_as(&set(c_enum(&h, &e)));
    }
    table.cell("macros", 1).same_as(&set(c_macros(&h)));
}

#[test]
fn the_c_names_of_reasons_and_paths_are_the_codes() {
    let h = header();
    let upper =
        |prefix: &str, names: &BTreeSet<String>| set(names.iter().map(|n| format!("{prefix}{}", n.to_uppercase())));
    assert_eq!(set(c_enum(&h, "rw_pause_reason")), upper("RW_REASON_", &reasons()), "rw_pause_reason");
    assert_eq!(set(c_enum(&h, "rw_recovered_by")), upper("RW_BY_", &paths()), "rw_recovered_by");
}

/// Every `rw_*` / `RW_*` name a doc gives is in a header (or the bench
/// build's exports); a name ending in `_` is a prefix of one.
#[test]
fn every_c_name_in_the_docs_exists() {
    let headers = ["railwatch.h", "railwatch_sim.h", "railwatch_verbs.h", "railwatch.hpp"]
        .map(|f| std::fs::read_to_string(root().join("crates/ffi/include").join(f)).expect(f));
    let bench = std::fs::read_to_string(root().join("crates/ffi/src/bench.rs")).expect("bench.rs");
    let known: BTreeSet<String> = headers.iter().chain([&bench]).flat_map(|t| doc_tables::c_names(t)).collect();
    let mut docs: Vec<String> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .filter_map(|e| Some(e.ok()?.path().file_name()?.to_str()?.to_owned()))
        .filter(|f| f.ends_with(".md"))
        .map(|f| format!("docs/{f}"))
        .collect();
    docs.push("crates/ffi/README.md".to_owned());
    let changelog = std::fs::read_to_string(root().join("CHANGELOG.md")).unwrap();
    let texts = docs.into_iter().map(|f| (std::fs::read_to_string(root().join(&f)).unwrap(), f));
    // The changelog names what was removed too: what it says is added is there.
    let added = (unreleased_added(&changelog), "CHANGELOG.md ([Unreleased], Added)".to_owned());
    for (text, file) in texts.chain([added]) {
        for name in doc_tables::c_names(&text) {
            let found = match name.strip_suffix('_') {
                Some(prefix) => known.iter().any(|k| k.starts_with(prefix)),
                None => known.contains(&name),
            };
            assert!(found, "{file} names `{name}`, which no header of crates/ffi/include declares");
        }
    }
}

/// The "### Added" part of the changelog's "## [Unreleased]".
fn unreleased_added(changelog: &str) -> String {
    let unreleased = &changelog[changelog.find("## [Unreleased]").expect("CHANGELOG.md has [Unreleased]")..];
    let added = &unreleased[unreleased.find("### Added").expect("[Unreleased] has ### Added")..];
    added[3..].split("\n### ").next().unwrap_or_default().to_owned()
}
