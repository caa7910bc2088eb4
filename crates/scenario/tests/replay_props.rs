//! Recordings replay exactly: for random valid scenarios (a seeded
//! generator covering every step kind, fault and setting: audit, settle,
//! damping, the data-path breaker, silent flaps, required addresses,
//! hotplug, GIDs, counters, transfers), the transitions of `simulate X`
//! and of the replay of its recording are the same: rail, from, to, cause
//! and generation, in order, and at the same times except where a re-open's
//! jitter is drawn anew (docs/RECORDING.md, "What a scenario cannot say").
//!
//! `RAILWATCH_REPLAY_CASES` sets the number of cases (default 500; `cargo
//! xtask props` runs many more), `RAILWATCH_REPLAY_SEED` the first seed.
//! A failing case prints its seed and its scenario.

mod common;

use common::{Gen, record, replay};
use railwatch_scenario::Scenario;

fn cases() -> u64 {
    std::env::var("RAILWATCH_REPLAY_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(500)
}

fn first_seed() -> u64 {
    std::env::var("RAILWATCH_REPLAY_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(1)
}

#[test]
fn random_scenarios_replay_from_their_recordings() {
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    let n = cases();
    for seed in first_seed()..first_seed() + n {
        let text = Gen::new(seed).scenario();
        let sc = Scenario::parse(&text, &format!("seed-{seed}.toml"))
            .unwrap_or_else(|e| panic!("seed {seed}: the generator wrote an invalid scenario: {e}\n{text}"));
        let (live, path) = record(&sc, dir.path());
        let replayed = replay(&path);
        if std::env::var_os("RAILWATCH_REPLAY_DUMP").is_some() {
            for (name, list) in [("live", &live), ("replayed", &replayed)] {
                for tr in list.iter() {
                    eprintln!("{name}: {:>6} {}", tr.t, tr.what);
                }
            }
        }
        if let Some(diff) = common::differ_shown(&live, &replayed, &path) {
            failures.push(format!("seed {seed}: {diff}\n--- scenario\n{text}"));
        }
    }
    common::assert_none_differ(&failures, n as usize, 20);
}

/// `RAILWATCH_REPLAY_WRITE=DIR`: writes the scenario of each seed in
/// `RAILWATCH_REPLAY_SEEDS` (comma-separated) to `DIR/seed-N.toml`.
#[test]
fn write_seeds_when_asked() {
    let (Some(dir), Some(seeds)) =
        (std::env::var_os("RAILWATCH_REPLAY_WRITE"), std::env::var("RAILWATCH_REPLAY_SEEDS").ok())
    else {
        return;
    };
    for seed in seeds.split(',').filter_map(|s| s.trim().parse::<u64>().ok()) {
        std::fs::write(std::path::Path::new(&dir).join(format!("seed-{seed}.toml")), Gen::new(seed).scenario())
            .unwrap();
    }
}
