//! docs/state.schema.json against what the agent's code writes: state
//! documents of generated hosts (devices, ports in any state, GIDs,
//! warm or not) and the stream's lines, checked by a validator of the
//! subset of JSON Schema the file uses (`$ref`, `type`, `required`,
//! `properties`, `additionalProperties`, `items`, `enum`, `const`,
//! `oneOf`, `allOf`, `minimum`, `maximum`, `maxLength`). `cargo xtask
//! python` checks the same file with the `jsonschema` package against a
//! live agent.

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use railwatch_cli::state::{DEFAULT_SOCKET_MODE, Published, SocketSettings, StateSocket};
use railwatch_cli::state_client::Changes;
use railwatch_core::PortState;
use railwatch_runtime::state::{STATE_SCHEMA, StateJson};
use railwatch_runtime::{Config, Monitor, NoSelector, Snapshot, SystemClock};
use railwatch_sim_backend::{PortSpec, SimDevice};
use serde_json::Value;

fn schema() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/state.schema.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("docs/state.schema.json")).expect("JSON")
}

/// Where `value` breaks `rule` (of `root`), as `path: why` lines.
fn errors(root: &Value, rule: &Value, value: &Value, at: &str, out: &mut Vec<String>) {
    let mut local: Vec<String> = Vec::new();
    if let Some(target) = rule.get("$ref").and_then(Value::as_str) {
        let pointer = target.strip_prefix('#').expect("a local $ref");
        let target = root.pointer(pointer).unwrap_or_else(|| panic!("{target} is not in the schema"));
        errors(root, target, value, at, out);
    }
    if let Some(ty) = rule.get("type") {
        let types: Vec<&str> =
            ty.as_array().map_or_else(|| vec![ty.as_str().unwrap()], |a| a.iter().filter_map(Value::as_str).collect());
        let is = |t: &str| match t {
            "object" => value.is_object(),
            "array" => value.is_array(),
            "string" => value.is_string(),
            "boolean" => value.is_boolean(),
            "null" => value.is_null(),
            "integer" => value.is_u64() || value.is_i64(),
            "number" => value.is_number(),
            other => panic!("type {other} is not in this validator"),
        };
        if !types.iter().any(|t| is(t)) {
            local.push(format!("{value} is not {types:?}"));
        }
    }
    if let Some(options) = rule.get("enum").and_then(Value::as_array) {
        if !options.contains(value) {
            local.push(format!("{value} is not one of {options:?}"));
        }
    }
    if let Some(c) = rule.get("const") {
        if c != value {
            local.push(format!("{value} is not {c}"));
        }
    }
    if let (Some(min), Some(n)) = (rule.get("minimum").and_then(Value::as_f64), value.as_f64()) {
        if n < min {
            local.push(format!("{n} < {min}"));
        }
    }
    if let (Some(max), Some(n)) = (rule.get("maximum").and_then(Value::as_f64), value.as_f64()) {
        if n > max {
            local.push(format!("{n} > {max}"));
        }
    }
    if let (Some(max), Some(s)) = (rule.get("maxLength").and_then(Value::as_u64), value.as_str()) {
        if s.chars().count() as u64 > max {
            local.push(format!("{s:?} is longer than {max}"));
        }
    }
    for all in rule.get("allOf").and_then(Value::as_array).into_iter().flatten() {
        errors(root, all, value, at, out);
    }
    if let Some(one) = rule.get("oneOf").and_then(Value::as_array) {
        let held = one.iter().filter(|r| check(root, r, value).is_empty()).count();
        if held != 1 {
            out.push(format!("{at}: {held} of oneOf's {} hold", one.len()));
        }
    }
    out.extend(local.into_iter().map(|why| format!("{at}: {why}")));
    object(root, rule, value, at, out);
}

/// The object and array keywords.
fn object(root: &Value, rule: &Value, value: &Value, at: &str, out: &mut Vec<String>) {
    if let (Some(items), Some(list)) = (rule.get("items"), value.as_array()) {
        for (i, v) in list.iter().enumerate() {
            errors(root, items, v, &format!("{at}/{i}"), out);
        }
    }
    let Some(fields) = value.as_object() else { return };
    for key in rule.get("required").and_then(Value::as_array).into_iter().flatten() {
        if !fields.contains_key(key.as_str().unwrap()) {
            out.push(format!("{at}: {key} missing"));
        }
    }
    let properties = rule.get("properties").and_then(Value::as_object);
    for (key, v) in fields {
        match properties.and_then(|p| p.get(key)) {
            Some(r) => errors(root, r, v, &format!("{at}/{key}"), out),
            None => {
                if let Some(extra) = rule.get("additionalProperties") {
                    errors(root, extra, v, &format!("{at}/{key}"), out);
                }
            }
        }
    }
}

fn check(root: &Value, rule: &Value, value: &Value) -> Vec<String> {
    let mut out = Vec::new();
    errors(root, rule, value, "", &mut out);
    out
}

/// The schema's definition `name`.
fn def(name: &str) -> Value {
    serde_json::json!({"$ref": format!("#/$defs/{name}")})
}

/// A host of `ports` (per device, each port active or down), with GIDs on
/// the first port of each device, after its monitor's first turn.
fn host(ports: &[Vec<bool>]) -> Snapshot {
    let mut monitor = Monitor::new(Config::default(), NoSelector, SystemClock::new()).expect("a monitor");
    for (d, states) in ports.iter().enumerate() {
        let specs: Vec<PortSpec> = (1u8..)
            .zip(states)
            .map(|(p, &up)| PortSpec::active(p).with_state(if up { PortState::Active } else { PortState::Down }))
            .collect();
        let dev = SimDevice::new(format!("mlx5_{d}"), &specs).expect("a sim device");
        dev.handle().set_gid(1, 0, Some([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]));
        monitor.add_device(dev);
    }
    monitor.poll_once(Some(Duration::from_millis(5))).expect("poll");
    monitor.snapshot()
}

#[test]
fn the_schema_is_of_this_version_and_refuses_what_it_should() {
    let root = schema();
    assert_eq!(root["title"], STATE_SCHEMA);
    assert_eq!(root["$defs"]["document"]["properties"]["schema"]["const"], STATE_SCHEMA);
    let broken = serde_json::json!({"kind": "rail", "t_ms": 1, "warm": true, "rail": {"rail": "mlx5_0/1"}});
    assert!(!check(&root, &def("stream_line"), &broken).is_empty());
    let other = serde_json::json!({"schema": "railwatch.state/2", "t_ms": 0, "warm": true, "host": {}, "rails": []});
    assert!(!check(&root, &root, &other).is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Any host (1-4 devices of 1-2 ports in any state), warm or not: the
    /// document holds to the schema.
    #[test]
    fn every_state_document_holds_to_the_schema(
        ports in proptest::collection::vec(proptest::collection::vec(any::<bool>(), 1..=2), 1..=4),
        warm in any::<bool>(),
    ) {
        let snapshot = host(&ports);
        let doc = serde_json::to_value(StateJson::of(&snapshot, warm)).unwrap();
        let root = schema();
        let broken = check(&root, &root, &doc);
        prop_assert!(broken.is_empty(), "{broken:#?}\n{doc:#}");
    }
}

/// The stream's lines, as the agent's server writes them: the whole state,
/// a rail that changed, and the cut.
#[test]
fn every_stream_line_holds_to_the_schema() {
    let root = schema();
    let published = Arc::new(Published::default());
    let mut snapshot = host(&[vec![true, false]]);
    published.update(&snapshot);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.sock");
    let settings = SocketSettings { path: path.clone(), mode: DEFAULT_SOCKET_MODE, group: None };
    let _socket = StateSocket::start(&settings, Arc::clone(&published)).unwrap();
    let mut changes = Changes::open(&path, Duration::from_secs(5)).unwrap();
    let mut next = || changes.next_line(Duration::from_secs(5)).unwrap().expect("a line");
    let first: Value = serde_json::from_str(&next()).unwrap();
    snapshot.rails[1].generation += 1;
    published.update(&snapshot);
    let rail: Value = serde_json::from_str(&next()).unwrap();
    assert_eq!((&first["kind"], &rail["kind"]), (&Value::from("state"), &Value::from("rail")));
    let cut = serde_json::json!({"kind": "cut", "t_ms": 5, "reason": "slow_reader", "message": "64 lines behind"});
    for line in [first, rail, cut] {
        let broken = check(&root, &def("stream_line"), &line);
        assert!(broken.is_empty(), "{broken:#?}\n{line:#}");
    }
}
