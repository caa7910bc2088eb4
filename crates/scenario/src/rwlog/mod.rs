//! The input log (`railwatch watch --record incident.rwlog`): the machine's
//! inputs as the live monitor fed them, replayed exactly by a fresh machine
//! (`railwatch replay`), as rr records a program's non-deterministic inputs
//! at its boundary and replays the same code.
//!
//! A log is JSON lines (docs/RECORDING.md): a [`Header`] (the format, the
//! railwatch version, the machine's effective settings with the jitter
//! seed), then one [`Entry`] per line: `{"t":…,"input":{…}}` for each
//! input ([`Input`], with the time the machine was given) or
//! `{"t":…,"mark":"woke"}` where the monitor woke.
//!
//! Four parts: this module the format, `read.rs` a log read back (every
//! problem named by its line), `replay.rs` the replay and its divergence
//! check, `lift.rs` a log turned into a scenario (the recorder's placement
//! rules, run off the agent's path) and checked against the log.

mod lift;
mod read;
mod replay;
mod write;

use std::collections::BTreeMap;

use railwatch_core::{Input, MachineConfig, SettingValue};
use serde::{Deserialize, Serialize};

pub use lift::{Lifted, Transition, lift};
pub use read::{Log, LogError, read};
pub use replay::{Divergence, Replay, ReplayError, Watcher, replay, replay_watched};
pub use write::LogWriter;

/// The format's name and version, the header's `format`.
pub const FORMAT: &str = "railwatch.rwlog/1";

/// The first line of a log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    /// [`FORMAT`].
    pub format: String,
    /// The railwatch version that recorded it.
    pub railwatch: String,
    /// The command that recorded it (`"railwatch watch --record"`).
    pub recorded_by: String,
    /// Every machine setting in force, by key (docs/CONFIG.md).
    pub settings: BTreeMap<String, serde_json::Value>,
    /// The seed of the re-open jitter in force.
    pub seed: u64,
}

/// A line after the header.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Entry<'a> {
    /// An input, at the time the machine was given.
    Input {
        /// Milliseconds on the monitor's clock.
        t: u64,
        /// The input.
        input: Input<'a>,
    },
    /// A marker of the monitor's own (no machine input).
    Mark {
        /// Milliseconds on the monitor's clock.
        t: u64,
        /// Which.
        mark: Mark,
    },
}

impl Entry<'_> {
    /// Its time.
    pub fn t(&self) -> u64 {
        match *self {
            Entry::Input { t, .. } | Entry::Mark { t, .. } => t,
        }
    }
}

/// A marker of the monitor's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mark {
    /// The monitor woke: what follows, up to `done`, is that wake-up's,
    /// and its notifications are held until then.
    Woke,
    /// The wake-up is done: its notifications are sent, lost work first.
    Done,
}

impl Header {
    /// The header for a machine run with `config` (its seed set).
    pub fn new(config: &MachineConfig, recorded_by: &str) -> Header {
        let settings = MachineConfig::SETTINGS
            .iter()
            .filter_map(|s| Some((s.key.to_owned(), json_of(config.get(s.key)?)?)))
            .collect();
        Header {
            format: FORMAT.to_owned(),
            railwatch: env!("CARGO_PKG_VERSION").to_owned(),
            recorded_by: recorded_by.to_owned(),
            settings,
            seed: config.seed.unwrap_or(1),
        }
    }

    /// The machine's settings it names, or what is wrong with one.
    pub fn config(&self) -> Result<MachineConfig, String> {
        let mut config = MachineConfig::default();
        // In the table's order: a section's own key before its keys.
        for spec in MachineConfig::SETTINGS {
            let Some(json) = self.settings.get(spec.key) else { continue };
            let value = match json {
                serde_json::Value::Bool(b) => SettingValue::Bool(*b),
                serde_json::Value::String(s) => spec.choice(s).map_err(|e| e.to_string())?,
                serde_json::Value::Number(n) => match n.as_i64() {
                    Some(i) => SettingValue::Integer(i),
                    None => SettingValue::Float(n.as_f64().unwrap_or(f64::NAN)),
                },
                other => return Err(format!("setting {}: {other} is not a setting's value", spec.key)),
            };
            config.set(spec.key, value).map_err(|e| e.to_string())?;
        }
        if let Some(key) = self.settings.keys().find(|k| MachineConfig::setting(k).is_none()) {
            return Err(format!("setting {key} is not one this railwatch knows"));
        }
        config.validate().map_err(|e| e.to_string())?;
        config.seed = Some(self.seed);
        Ok(config)
    }
}

/// A setting's value as JSON (a section that is on: `true`).
fn json_of(value: SettingValue) -> Option<serde_json::Value> {
    Some(match value {
        SettingValue::Integer(i) => i.into(),
        SettingValue::Float(f) => serde_json::Number::from_f64(f)?.into(),
        SettingValue::Bool(b) => b.into(),
        SettingValue::Choice(c) => c.into(),
        SettingValue::Table => true.into(),
        SettingValue::Other(_) => return None,
    })
}
