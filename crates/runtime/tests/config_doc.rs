//! docs/CONFIG.md's table of keys says what the settings table says: every
//! setting of the machine and the driver has its row with its default, and
//! every row names a setting or one of the agent's own keys.

use std::collections::BTreeMap;
use std::path::Path;

use railwatch_core::{AGENT_AUDIT_MS, SettingKind, SettingValue};
use railwatch_runtime::Config;

/// The agent's own keys (devices and metrics), which are not settings of
/// the library.
const AGENT_KEYS: [&str; 5] = ["include", "exclude", "[metrics]", "metrics.listen", "metrics.textfile"];

/// The table's rows: each key (a section as `[damping]`) and its default
/// column, with the backquotes taken off.
fn rows() -> BTreeMap<String, String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/CONFIG.md");
    let doc = std::fs::read_to_string(&path).expect("docs/CONFIG.md");
    let mut rows = BTreeMap::new();
    for line in doc.lines().skip_while(|l| !l.starts_with("| key | default |")).skip(2) {
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.split(" | ").map(|c| c.trim_matches(['|', ' ', '`'])).collect();
        assert!(cells.len() >= 4, "docs/CONFIG.md: a row of the key table with too few columns: {line}");
        assert!(rows.insert(cells[0].to_owned(), cells[1].to_owned()).is_none(), "docs/CONFIG.md: {} twice", cells[0]);
    }
    assert!(!rows.is_empty(), "docs/CONFIG.md: no table of keys (| key | default | …)");
    rows
}

/// A default as the table writes it.
fn shown(value: Option<SettingValue>, kind: SettingKind) -> String {
    match (value, kind) {
        (_, SettingKind::Section) => if value == Some(SettingValue::Bool(true)) { "on" } else { "off" }.to_owned(),
        (Some(SettingValue::Integer(i)), _) => i.to_string(),
        (Some(SettingValue::Float(x)), _) => format!("{x}"),
        (Some(SettingValue::Bool(b)), _) => b.to_string(),
        (Some(SettingValue::Choice(name)), _) => format!("\"{name}\""),
        (other, _) => format!("{other:?}"),
    }
}

#[test]
fn config_md_lists_every_setting_with_its_default() {
    let rows = rows();
    // A section's keys default as when it is turned on.
    let mut defaults = Config::default();
    for spec in Config::settings().filter(|s| s.kind == SettingKind::Section) {
        defaults.set(spec.key, SettingValue::Table).expect("a section turns on");
    }
    let off = Config::default();
    for spec in Config::settings() {
        let key = if spec.kind == SettingKind::Section { format!("[{}]", spec.key) } else { spec.key.to_owned() };
        let Some(doc) = rows.get(&key) else { panic!("docs/CONFIG.md: the table has no row for {key}") };
        // The agent audits by default; the library does not.
        let value = match spec.key {
            "audit_ms" => Some(SettingValue::Integer(AGENT_AUDIT_MS as i64)),
            _ if spec.kind == SettingKind::Section => off.get(spec.key),
            _ => defaults.get(spec.key),
        };
        assert_eq!(doc, &shown(value, spec.kind), "docs/CONFIG.md: the default of {key}");
    }
}

#[test]
fn every_row_of_config_md_is_a_setting_or_the_agents_own() {
    for key in rows().keys() {
        let bare = key.trim_matches(['[', ']']);
        assert!(
            Config::setting(bare).is_some() || AGENT_KEYS.contains(&key.as_str()),
            "docs/CONFIG.md lists {key}, which is no setting"
        );
    }
}
