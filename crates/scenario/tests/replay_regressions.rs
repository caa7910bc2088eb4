//! One scenario per class of recording that did not replay exactly
//! (`tests/replay/*.toml`, each found by `replay_props.rs` and saying at
//! its top what went wrong): recorded as `simulate --record` records and
//! replayed, each gives the same transitions at the same times.

mod common;

use std::path::Path;

use railwatch_scenario::Scenario;

#[test]
fn every_mismatch_class_replays_exactly() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/replay");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(files.len() >= 25, "the regression scenarios in {}", dir.display());
    let out = tempfile::tempdir().unwrap();
    // Every file is tried, so a change that breaks several classes says
    // which ones, not only the first.
    let mut failures = Vec::new();
    for file in &files {
        let sc = Scenario::load(file).unwrap_or_else(|e| panic!("{e}"));
        let (live, path) = common::record(&sc, out.path());
        let replayed = common::replay(&path);
        if let Some(diff) = common::differ_shown(&live, &replayed, &path) {
            failures.push(format!("{}: {diff}", file.display()));
        } else if live.is_empty() {
            failures.push(format!("{}: no transition at all", file.display()));
        }
    }
    common::assert_none_differ(&failures, files.len(), files.len());
}
