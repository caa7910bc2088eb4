//! The machine's settings, defined once: each field of [`MachineConfig`],
//! its key as every front end spells it, its range, and the one check.
//!
//! Front ends (the scenario parser, `watch`'s config file and flags, the C
//! API's `rw_config`, the scenario writer) never restate a setting: they
//! look keys up in [`MachineConfig::SETTINGS`], assign with
//! [`MachineConfig::set`], read with [`MachineConfig::get`] and check with
//! [`MachineConfig::validate`], whose [`ConfigError`] names the full key
//! (`damping.half_life_ms`). Adding a setting means adding its field, its
//! entry in `SETTINGS` and its docs; the exhaustive pattern in `slot` (and
//! in `rw_config`'s conversion) makes the compiler point at the rest.

use std::fmt;

use crate::address::AddressRequirement;
use crate::breaker::{DataPathConfig, MAX_MIN_PEERS};
use crate::damping::DampingConfig;
use crate::time::MAX_DELAY_MS;
use crate::witness::PortWitness;

/// The host agent's audit period (`railwatch watch`'s `audit_ms` default):
/// a port that went down with no event, or flapped with its events lost,
/// is found within two of them. The library's default is off.
pub const AGENT_AUDIT_MS: u64 = 1000;

/// Policy settings. `Default` gives the documented defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct MachineConfig {
    /// Recovery tick period in milliseconds (default 1000). The tick runs
    /// only while something needs it (a paused rail, a poll-only device).
    pub tick_ms: u64,
    /// Opt-in audit period: every this many milliseconds the port state of
    /// every active rail is re-read, so a port that went down with no event
    /// at all is noticed. `None` (the default) keeps a healthy host at zero
    /// idle wake-ups.
    pub audit_ms: Option<u64>,
    /// How often a paused rail is explained in the log (default 30 s).
    pub explain_every_ms: u64,
    /// First delay before re-opening a device that went away, or opening
    /// again one that appeared and would not open (default 1 s).
    pub reopen_initial_ms: u64,
    /// Longest delay between (re-)open attempts (default 60 s).
    pub reopen_max_ms: u64,
    /// Each (re-)open delay is lengthened by a random 0..=this percent of it
    /// (default 20, at most 100), so hosts do not all re-open at once.
    pub reopen_jitter_pct: u32,
    /// Seed of that jitter. `None` (the default): the driver draws one per
    /// process (the runtime does; a machine made with `None` uses 1). The
    /// simulator fixes it so runs are reproducible. Not a file setting.
    pub seed: Option<u64>,
    /// After the port reads ACTIVE, wait this long and re-check before
    /// activating (default 0: activate at once). mlx5/RoCE can reject
    /// connection setup right after link-up; the port going down during the
    /// wait cancels it. Applies to re-attached devices too.
    pub settle_ms: u64,
    /// Flap damping (default off): a rail that flaps too often stays paused
    /// (`damped`) until its penalty decays.
    pub damping: Option<DampingConfig>,
    /// The data-path breaker (default on): transfer failures against the
    /// local path, reported by the engine through enough distinct peers,
    /// take a rail out (`data_path`) until a probe after a backoff succeeds.
    /// `None`: reports are counted, never acted on.
    pub data_path: Option<DataPathConfig>,
    /// A rise of the port's `link_downed` or the netdev's carrier counters
    /// with no PORT_ERR seen is a silent flap: the generation moves and
    /// damping is charged (default on).
    pub silent_flaps: bool,
    /// What a rail needs in its GID table before it is made available
    /// (default `none`): a port that reads ACTIVE without it stays paused
    /// (`no_address`).
    pub require_address: AddressRequirement,
    /// Which witness says a port is usable (default `both`): the port
    /// state, the netdev's carrier, or both (a port that reads ACTIVE with
    /// its carrier down is paused `no_carrier`). Ports with no netdev have
    /// only the port state.
    pub port_witness: PortWitness,
}

impl Default for MachineConfig {
    fn default() -> Self {
        MachineConfig {
            tick_ms: 1000,
            audit_ms: None,
            explain_every_ms: 30_000,
            reopen_initial_ms: 1000,
            reopen_max_ms: 60_000,
            reopen_jitter_pct: 20,
            seed: None,
            settle_ms: 0,
            damping: None,
            data_path: Some(DataPathConfig::default()),
            silent_flaps: true,
            require_address: AddressRequirement::None,
            port_witness: PortWitness::Both,
        }
    }
}

// ---- the table ------------------------------------------------------------

/// What a setting holds, and its range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SettingKind {
    /// Milliseconds, `min..=MAX_DELAY_MS`.
    Millis {
        /// The least allowed.
        min: u64,
    },
    /// Milliseconds or off (`None`), `min..=MAX_DELAY_MS` when on.
    OptionalMillis {
        /// The least allowed when on.
        min: u64,
    },
    /// A whole number `min..=max`.
    Count {
        /// The least allowed.
        min: u64,
        /// The most allowed.
        max: u64,
    },
    /// A whole percentage, 0..=100.
    Percent,
    /// A finite number above zero.
    Positive,
    /// On or off.
    Flag,
    /// One of these names.
    Choice(&'static [&'static str]),
    /// A table of settings (`[damping]`): on when written as a table or
    /// `true`, off with `false`; absent, its default. Its keys are
    /// `NAME.key`.
    Section,
}

impl SettingKind {
    /// What the value must be, as an error says it ("a whole number of
    /// milliseconds").
    pub fn expected(self) -> &'static str {
        match self {
            SettingKind::Millis { .. } | SettingKind::OptionalMillis { .. } => "a whole number of milliseconds",
            SettingKind::Count { .. } | SettingKind::Percent => "a whole number",
            SettingKind::Positive => "a number",
            SettingKind::Flag => "true or false",
            SettingKind::Choice(_) => "a name",
            SettingKind::Section => "a table (or false to turn it off)",
        }
    }

    /// The range, as docs and `--check` print it ("1..=604800000 ms").
    pub fn range(self) -> String {
        match self {
            SettingKind::Millis { min } => format!("{min}..={MAX_DELAY_MS} ms"),
            SettingKind::OptionalMillis { min } => format!("off, or {min}..={MAX_DELAY_MS} ms"),
            SettingKind::Count { min, max } => format!("{min}..={max}"),
            SettingKind::Percent => "0..=100".to_owned(),
            SettingKind::Positive => "> 0".to_owned(),
            SettingKind::Flag => "true or false".to_owned(),
            SettingKind::Choice(names) => names.join(", "),
            SettingKind::Section => "a table, or false".to_owned(),
        }
    }
}

/// One setting as front ends name it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Setting {
    /// Its full key (`"tick_ms"`, `"damping.half_life_ms"`).
    pub key: &'static str,
    /// What it holds and its range.
    pub kind: SettingKind,
    /// One line on what it does.
    pub doc: &'static str,
}

const fn setting(key: &'static str, kind: SettingKind, doc: &'static str) -> Setting {
    Setting { key, kind, doc }
}

/// A setting's value as a front end hands it in or reads it out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SettingValue {
    /// A whole number (negative ones are refused by the setting).
    Integer(i64),
    /// A number with a fraction.
    Float(f64),
    /// On or off (a flag, a section, or an optional period: `false` turns
    /// it off).
    Bool(bool),
    /// One of a choice setting's names (from [`Setting::choice`]).
    Choice(&'static str),
    /// A table (a section written out: on).
    Table,
    /// Anything else, by the name of its type ("a string"), to be refused.
    Other(&'static str),
}

impl fmt::Display for SettingValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SettingValue::Integer(i) => write!(f, "{i}"),
            // `{:?}`: 1e308 stays short, 1.0 keeps its point.
            SettingValue::Float(x) => write!(f, "{x:?}"),
            SettingValue::Bool(b) => write!(f, "{b}"),
            SettingValue::Choice(name) => write!(f, "{name:?}"),
            SettingValue::Table => f.write_str("a table"),
            SettingValue::Other(what) => f.write_str(what),
        }
    }
}

/// The kind of value a front end got, with its article ("an integer").
fn found(value: &SettingValue) -> &'static str {
    match value {
        SettingValue::Integer(_) => "an integer",
        SettingValue::Float(_) => "a float",
        SettingValue::Bool(_) => "a boolean",
        SettingValue::Choice(_) => "a string",
        SettingValue::Table => "a table",
        SettingValue::Other(what) => what,
    }
}

// ---- errors ---------------------------------------------------------------

/// A setting refused: its full key and what is wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{key}: {problem}")]
pub struct ConfigError {
    /// The full key (`"tick_ms"`, `"damping.half_life_ms"`).
    pub key: &'static str,
    /// What is wrong with it.
    pub problem: Problem,
}

/// What is wrong with a setting.
#[derive(Debug, Clone, PartialEq)]
pub enum Problem {
    /// No such setting.
    Unknown,
    /// The value is of the wrong type.
    WrongType {
        /// What it must be ("a whole number of milliseconds").
        expected: &'static str,
        /// What it was ("a string").
        found: &'static str,
    },
    /// A negative whole number.
    Negative(i64),
    /// Below the least allowed.
    TooSmall {
        /// The least allowed.
        min: u64,
        /// `" ms"` or `""`.
        unit: &'static str,
    },
    /// Above the most allowed.
    TooLarge {
        /// The value.
        value: u64,
        /// The most allowed.
        max: u64,
        /// `" ms"` or `""`.
        unit: &'static str,
    },
    /// Less than another setting it must not be below.
    BelowOther {
        /// The value.
        value: u64,
        /// The other setting.
        other: &'static str,
        /// Its value.
        other_value: u64,
    },
    /// Not a finite number above zero.
    NotPositive(f64),
    /// Not above zero, or not in the order another setting asks.
    OutOfOrder {
        /// The value.
        value: f64,
        /// How it must relate: `"at least"`, `"less than"`.
        relation: &'static str,
        /// The other setting.
        other: &'static str,
        /// Its value.
        other_value: f64,
    },
    /// Damping's longest hold would pass the one-week limit.
    HoldTooLong {
        /// The hold, in seconds.
        seconds: f64,
    },
    /// Not one of a choice setting's names.
    NotAChoice {
        /// What was given (shown escaped).
        given: String,
        /// The names it may be.
        names: &'static [&'static str],
    },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Problem::Unknown => f.write_str("unknown setting"),
            Problem::WrongType { expected, found } => write!(f, "must be {expected}, not {found}"),
            Problem::Negative(i) => write!(f, "must not be negative ({i})"),
            Problem::TooSmall { min, unit } => write!(f, "must be at least {min}{unit}"),
            Problem::TooLarge { value, max, unit } if max == MAX_DELAY_MS && unit == " ms" => {
                write!(f, "{value} ms is more than the limit of {max} ms (one week)")
            }
            Problem::TooLarge { value, max, unit } => write!(f, "{value}{unit} is more than the limit of {max}{unit}"),
            Problem::BelowOther { value, other, other_value } => {
                write!(f, "{value} ms is less than {other} ({other_value} ms)")
            }
            Problem::NotPositive(x) => write!(f, "must be positive, not {x:?}"),
            Problem::OutOfOrder { value, relation, other, other_value } => {
                write!(f, "must be positive and {relation} {other} ({other_value:?}), not {value:?}")
            }
            Problem::NotAChoice { ref given, names } => write!(f, "{given:?} is not one of {}", names.join(", ")),
            Problem::HoldTooLong { seconds } => write!(
                f,
                "a capped penalty would hold a rail for {seconds:.0} s (half_life_ms × log2(max_penalty / reuse)); \
                 the limit is one week"
            ),
        }
    }
}

fn refuse(key: &'static str, problem: Problem) -> Result<(), ConfigError> {
    Err(ConfigError { key, problem })
}

// ---- assigning and reading ---------------------------------------------------

/// A place in a config a setting's value goes.
enum Slot<'a> {
    Millis(&'a mut u64),
    OptionalMillis(&'a mut Option<u64>),
    Count(&'a mut u64),
    Percent(&'a mut u32),
    Positive(&'a mut f64),
    Flag(&'a mut bool),
    Address(&'a mut AddressRequirement),
    Witness(&'a mut PortWitness),
    Damping(&'a mut Option<DampingConfig>),
    DataPath(&'a mut Option<DataPathConfig>),
}

/// The names `port_witness` takes.
const WITNESS_NAMES: [&str; 3] = [PortWitness::ALL[0].name(), PortWitness::ALL[1].name(), PortWitness::ALL[2].name()];

/// The names `require_address` takes.
const ADDRESS_NAMES: [&str; 5] = {
    let mut names = [""; 5];
    let mut i = 0;
    while i < 5 {
        names[i] = AddressRequirement::ALL[i].name();
        i += 1;
    }
    names
};

impl MachineConfig {
    /// Every setting a file or flag may give (not `seed`), in the order
    /// docs list them.
    pub const SETTINGS: &'static [Setting] = &[
        setting("tick_ms", SettingKind::Millis { min: 1 }, "recovery tick period; runs only while needed"),
        setting("audit_ms", SettingKind::OptionalMillis { min: 1 }, "re-read every active rail this often (off)"),
        setting("settle_ms", SettingKind::Millis { min: 0 }, "wait after a port reads ACTIVE before activating"),
        setting("explain_every_ms", SettingKind::Millis { min: 0 }, "how often a paused rail is explained"),
        setting("reopen_initial_ms", SettingKind::Millis { min: 1 }, "first delay before a (re-)open"),
        setting("reopen_max_ms", SettingKind::Millis { min: 1 }, "longest delay between (re-)opens"),
        setting("reopen_jitter_pct", SettingKind::Percent, "random lengthening of each (re-)open delay"),
        setting("damping", SettingKind::Section, "flap damping; on when the table is present"),
        setting("damping.penalty_per_flap", SettingKind::Positive, "penalty added per flap"),
        setting("damping.suppress", SettingKind::Positive, "at or above this a rail is held"),
        setting("damping.reuse", SettingKind::Positive, "a held rail is released below this"),
        setting("damping.half_life_ms", SettingKind::Millis { min: 1 }, "the penalty halves this often"),
        setting("damping.max_penalty", SettingKind::Positive, "the penalty's ceiling"),
        setting("data_path", SettingKind::Section, "the data-path breaker; on unless false"),
        setting(
            "data_path.failures",
            SettingKind::Count { min: 1, max: 1_000_000 },
            "local-path failures within the window that open it",
        ),
        setting("data_path.window_ms", SettingKind::Millis { min: 1 }, "the window they must fall in"),
        setting(
            "data_path.min_peers",
            SettingKind::Count { min: 1, max: MAX_MIN_PEERS as u64 },
            "the distinct peers they must come through",
        ),
        setting("data_path.backoff_initial_ms", SettingKind::Millis { min: 1 }, "the first wait before a probe"),
        setting("data_path.backoff_max_ms", SettingKind::Millis { min: 1 }, "the longest wait before a probe"),
        setting(
            "data_path.probe_timeout_ms",
            SettingKind::Millis { min: 1 },
            "a granted probe unreported this long counts as failed",
        ),
        setting("silent_flaps", SettingKind::Flag, "a counter rise with no PORT_ERR bumps the generation"),
        setting("require_address", SettingKind::Choice(&ADDRESS_NAMES), "a GID a rail needs before it is used"),
        setting("port_witness", SettingKind::Choice(&WITNESS_NAMES), "what says a port is up: port, carrier or both"),
    ];

    /// The setting called `key`, if there is one.
    pub fn setting(key: &str) -> Option<&'static Setting> {
        Self::SETTINGS.iter().find(|s| s.key == key)
    }

    /// Where `key`'s value lives. A `damping.` key turns damping on (with
    /// the defaults) when it was off: writing one of its settings means it.
    fn slot(&mut self, key: &str) -> Option<Slot<'_>> {
        // Exhaustive: a new field is a compile error here until it has a key.
        let MachineConfig {
            tick_ms,
            audit_ms,
            explain_every_ms,
            reopen_initial_ms,
            reopen_max_ms,
            reopen_jitter_pct,
            seed: _,
            settle_ms,
            damping,
            data_path,
            silent_flaps,
            require_address,
            port_witness,
        } = self;
        let slot = match key {
            "tick_ms" => Slot::Millis(tick_ms),
            "audit_ms" => Slot::OptionalMillis(audit_ms),
            "settle_ms" => Slot::Millis(settle_ms),
            "explain_every_ms" => Slot::Millis(explain_every_ms),
            "reopen_initial_ms" => Slot::Millis(reopen_initial_ms),
            "reopen_max_ms" => Slot::Millis(reopen_max_ms),
            "reopen_jitter_pct" => Slot::Percent(reopen_jitter_pct),
            "damping" => Slot::Damping(damping),
            "data_path" => Slot::DataPath(data_path),
            "silent_flaps" => Slot::Flag(silent_flaps),
            "require_address" => Slot::Address(require_address),
            "port_witness" => Slot::Witness(port_witness),
            _ => return section_slot(key, damping, data_path),
        };
        Some(slot)
    }

    /// Sets `key` to `value`, refusing a value of the wrong type or sign
    /// (the range is [`validate`](Self::validate)'s, so the whole config is
    /// judged together).
    pub fn set(&mut self, key: &str, value: SettingValue) -> Result<(), ConfigError> {
        // An unknown key has no static name to give: front ends look keys
        // up in SETTINGS first, so this is their bug, named as such.
        let spec = Self::setting(key).ok_or(ConfigError { key: "(unknown key)", problem: Problem::Unknown })?;
        let slot = self.slot(key).ok_or(ConfigError { key: spec.key, problem: Problem::Unknown })?;
        assign(spec, slot, value)
    }

    /// The value of `key`, if it is a setting (a section's key only while
    /// the section is on).
    pub fn get(&self, key: &str) -> Option<SettingValue> {
        if (key.starts_with("damping.") && self.damping.is_none())
            || (key.starts_with("data_path.") && self.data_path.is_none())
        {
            return None;
        }
        let mut copy = self.clone();
        let value = match copy.slot(key)? {
            Slot::Millis(v) | Slot::Count(v) => SettingValue::Integer(whole(*v)),
            Slot::OptionalMillis(v) => v.map_or(SettingValue::Bool(false), |ms| SettingValue::Integer(whole(ms))),
            Slot::Percent(v) => SettingValue::Integer(i64::from(*v)),
            Slot::Positive(v) => SettingValue::Float(*v),
            Slot::Flag(v) => SettingValue::Bool(*v),
            Slot::Address(v) => SettingValue::Choice(v.name()),
            Slot::Witness(v) => SettingValue::Choice(v.name()),
            Slot::Damping(d) => SettingValue::Bool(d.is_some()),
            Slot::DataPath(d) => SettingValue::Bool(d.is_some()),
        };
        Some(value)
    }

    /// The whole number `key` holds, if it is one (and on).
    fn held_whole(&self, key: &str) -> Option<u64> {
        if (key.starts_with("damping.") && self.damping.is_none())
            || (key.starts_with("data_path.") && self.data_path.is_none())
        {
            return None;
        }
        let mut copy = self.clone();
        match copy.slot(key)? {
            Slot::Millis(v) | Slot::Count(v) => Some(*v),
            Slot::OptionalMillis(v) => *v,
            _ => None,
        }
    }

    /// Checks every setting against its range and the rules between them;
    /// the error names the first bad one by its full key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for spec in Self::SETTINGS {
            // A whole number is checked as it is held (a `u64`): past
            // `i64::MAX` its `SettingValue` would say another number.
            if let Some(n) = self.held_whole(spec.key) {
                spec.check_whole(n)?;
            } else if let Some(value) = self.get(spec.key) {
                spec.check(value)?;
            }
        }
        if self.reopen_max_ms < self.reopen_initial_ms {
            return refuse(
                "reopen_max_ms",
                Problem::BelowOther {
                    value: self.reopen_max_ms,
                    other: "reopen_initial_ms",
                    other_value: self.reopen_initial_ms,
                },
            );
        }
        if let Some(d) = &self.damping {
            d.validate()?;
        }
        if let Some(d) = &self.data_path
            && d.backoff_max_ms < d.backoff_initial_ms
        {
            return refuse(
                "data_path.backoff_max_ms",
                Problem::BelowOther {
                    value: d.backoff_max_ms,
                    other: "data_path.backoff_initial_ms",
                    other_value: d.backoff_initial_ms,
                },
            );
        }
        Ok(())
    }
}

/// Where a section's key (`damping.reuse`, `data_path.window_ms`) lives; it
/// turns its section on (with the defaults) when it was off: writing one of
/// its keys means it.
fn section_slot<'a>(
    key: &str,
    damping: &'a mut Option<DampingConfig>,
    data_path: &'a mut Option<DataPathConfig>,
) -> Option<Slot<'a>> {
    if let Some(sub) = key.strip_prefix("damping.") {
        let d = damping.get_or_insert_with(DampingConfig::default);
        return Some(match sub {
            "penalty_per_flap" => Slot::Positive(&mut d.penalty_per_flap),
            "suppress" => Slot::Positive(&mut d.suppress),
            "reuse" => Slot::Positive(&mut d.reuse),
            "half_life_ms" => Slot::Millis(&mut d.half_life_ms),
            "max_penalty" => Slot::Positive(&mut d.max_penalty),
            _ => return None,
        });
    }
    let sub = key.strip_prefix("data_path.")?;
    let d = data_path.get_or_insert_with(DataPathConfig::default);
    Some(match sub {
        "failures" => Slot::Count(&mut d.failures),
        "window_ms" => Slot::Millis(&mut d.window_ms),
        "min_peers" => Slot::Count(&mut d.min_peers),
        "backoff_initial_ms" => Slot::Millis(&mut d.backoff_initial_ms),
        "backoff_max_ms" => Slot::Millis(&mut d.backoff_max_ms),
        "probe_timeout_ms" => Slot::Millis(&mut d.probe_timeout_ms),
        _ => return None,
    })
}

fn whole(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl Setting {
    /// `value` as a whole number for this setting, refusing another type or
    /// a negative number (the range is [`check`](Self::check)'s).
    pub fn whole(&self, value: SettingValue) -> Result<u64, ConfigError> {
        let key = self.key;
        match value {
            SettingValue::Integer(i) => {
                u64::try_from(i).map_err(|_| ConfigError { key, problem: Problem::Negative(i) })
            }
            other => Err(self.wrong_type(&other)),
        }
    }

    /// `text` as this choice setting's value, refusing a name it does not
    /// take (front ends read names as text).
    pub fn choice(&self, text: &str) -> Result<SettingValue, ConfigError> {
        let SettingKind::Choice(names) = self.kind else {
            return Err(self.wrong_type(&SettingValue::Other("a string")));
        };
        match names.iter().find(|n| **n == text) {
            Some(name) => Ok(SettingValue::Choice(name)),
            None => Err(ConfigError { key: self.key, problem: Problem::NotAChoice { given: text.to_owned(), names } }),
        }
    }

    fn wrong_type(&self, value: &SettingValue) -> ConfigError {
        ConfigError {
            key: self.key,
            problem: Problem::WrongType { expected: self.kind.expected(), found: found(value) },
        }
    }

    /// Checks `value` against this setting's range.
    pub fn check(&self, value: SettingValue) -> Result<(), ConfigError> {
        match value {
            SettingValue::Integer(i) => self.check_whole(u64::try_from(i).unwrap_or(0)),
            SettingValue::Float(x) if self.kind == SettingKind::Positive => {
                if x.is_finite() && x > 0.0 {
                    Ok(())
                } else {
                    refuse(self.key, Problem::NotPositive(x))
                }
            }
            _ => Ok(()),
        }
    }

    /// Checks the whole number `n` against this setting's range.
    fn check_whole(&self, n: u64) -> Result<(), ConfigError> {
        let key = self.key;
        let (min, max, unit) = match self.kind {
            SettingKind::Millis { min } | SettingKind::OptionalMillis { min } => (min, MAX_DELAY_MS, " ms"),
            SettingKind::Count { min, max } => (min, max, ""),
            SettingKind::Percent => (0, 100, ""),
            SettingKind::Positive | SettingKind::Flag | SettingKind::Choice(_) | SettingKind::Section => return Ok(()),
        };
        if n < min {
            return refuse(key, Problem::TooSmall { min, unit });
        }
        if n > max {
            return refuse(key, Problem::TooLarge { value: n, max, unit });
        }
        Ok(())
    }
}

fn assign(spec: &Setting, slot: Slot<'_>, value: SettingValue) -> Result<(), ConfigError> {
    match slot {
        Slot::Millis(v) | Slot::Count(v) => *v = spec.whole(value)?,
        Slot::OptionalMillis(v) => match value {
            SettingValue::Bool(false) => *v = None,
            other => *v = Some(spec.whole(other)?),
        },
        Slot::Percent(v) => *v = u32::try_from(spec.whole(value)?).unwrap_or(u32::MAX),
        Slot::Positive(v) => match value {
            SettingValue::Integer(i) => *v = i as f64,
            SettingValue::Float(x) => *v = x,
            other => return Err(spec.wrong_type(&other)),
        },
        Slot::Flag(v) => match value {
            SettingValue::Bool(b) => *v = b,
            other => return Err(spec.wrong_type(&other)),
        },
        Slot::Address(v) => *v = choose(spec, value, &AddressRequirement::ALL, |r| r.name(), &ADDRESS_NAMES)?,
        Slot::Witness(v) => *v = choose(spec, value, &PortWitness::ALL, |w| w.name(), &WITNESS_NAMES)?,
        Slot::Damping(d) => section(spec, d, value)?,
        Slot::DataPath(d) => section(spec, d, value)?,
    }
    Ok(())
}

/// The one of `all` whose name `value` gives (a `Choice` setting).
fn choose<T: Copy>(
    spec: &Setting,
    value: SettingValue,
    all: &[T],
    name: impl Fn(T) -> &'static str,
    names: &'static [&'static str],
) -> Result<T, ConfigError> {
    let SettingValue::Choice(given) = value else { return Err(spec.wrong_type(&value)) };
    all.iter()
        .copied()
        .find(|&c| name(c) == given)
        .ok_or_else(|| ConfigError { key: spec.key, problem: Problem::NotAChoice { given: given.to_owned(), names } })
}

/// A section turned on (a table, `true`: its values kept, or the defaults)
/// or off (`false`).
fn section<T: Default>(spec: &Setting, slot: &mut Option<T>, value: SettingValue) -> Result<(), ConfigError> {
    match value {
        SettingValue::Table | SettingValue::Bool(true) => {
            slot.get_or_insert_with(T::default);
        }
        SettingValue::Bool(false) => *slot = None,
        other => return Err(spec.wrong_type(&other)),
    }
    Ok(())
}

impl DampingConfig {
    /// Checks the damping settings; the error names the full key
    /// (`damping.reuse`).
    pub fn validate(&self) -> Result<(), ConfigError> {
        let ok = |v: f64| v.is_finite() && v > 0.0;
        if !ok(self.penalty_per_flap) {
            return refuse("damping.penalty_per_flap", Problem::NotPositive(self.penalty_per_flap));
        }
        if self.half_life_ms == 0 {
            return refuse("damping.half_life_ms", Problem::TooSmall { min: 1, unit: " ms" });
        }
        if !ok(self.suppress) {
            return refuse("damping.suppress", Problem::NotPositive(self.suppress));
        }
        let order =
            |value, relation, other_value| Problem::OutOfOrder { value, relation, other: "suppress", other_value };
        if !(ok(self.max_penalty) && self.suppress <= self.max_penalty) {
            return refuse("damping.max_penalty", order(self.max_penalty, "at least", self.suppress));
        }
        if !(ok(self.reuse) && self.reuse < self.suppress) {
            return refuse("damping.reuse", order(self.reuse, "less than", self.suppress));
        }
        let hold = self.longest_hold_ms();
        if hold > MAX_DELAY_MS as f64 {
            return refuse("damping.half_life_ms", Problem::HoldTooLong { seconds: hold / 1000.0 });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_setting_has_a_place_and_reads_back_what_was_set() {
        let mut c = MachineConfig::default();
        for spec in MachineConfig::SETTINGS {
            let value = match spec.kind {
                SettingKind::Millis { .. } | SettingKind::OptionalMillis { .. } => SettingValue::Integer(7),
                SettingKind::Count { min, .. } => SettingValue::Integer(min as i64),
                SettingKind::Percent => SettingValue::Integer(42),
                SettingKind::Positive => SettingValue::Float(3.5),
                SettingKind::Flag => SettingValue::Bool(false),
                SettingKind::Choice(names) => SettingValue::Choice(names[names.len() - 1]),
                SettingKind::Section => SettingValue::Table,
            };
            c.set(spec.key, value).unwrap_or_else(|e| panic!("{}: {e}", spec.key));
            let back = c.get(spec.key).unwrap_or_else(|| panic!("{} reads nothing", spec.key));
            let expected = if spec.kind == SettingKind::Section { SettingValue::Bool(true) } else { value };
            assert_eq!(back, expected, "{}", spec.key);
        }
    }

    #[test]
    fn wrong_types_and_signs_are_refused_with_the_full_key() {
        let mut c = MachineConfig::default();
        let e = c.set("tick_ms", SettingValue::Other("a string")).unwrap_err();
        assert_eq!(e.to_string(), "tick_ms: must be a whole number of milliseconds, not a string");
        let e = c.set("damping.half_life_ms", SettingValue::Integer(-5)).unwrap_err();
        assert_eq!(e.to_string(), "damping.half_life_ms: must not be negative (-5)");
        assert_eq!(c.set("nonsense", SettingValue::Integer(1)).unwrap_err().problem, Problem::Unknown);
        assert_eq!(c.set("damping.nonsense", SettingValue::Integer(1)).unwrap_err().problem, Problem::Unknown);
        assert_eq!(c, MachineConfig { damping: c.damping, ..MachineConfig::default() }, "nothing else changed");
    }

    #[test]
    fn a_number_past_i64_is_named_as_it_is() {
        let c = MachineConfig { audit_ms: Some(u64::MAX), ..MachineConfig::default() };
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "audit_ms: 18446744073709551615 ms is more than the limit of 604800000 ms (one week)"
        );
    }

    #[test]
    fn ranges_are_checked_by_validate() {
        let bad = |key: &str, value: SettingValue| {
            let mut c = MachineConfig::default();
            c.set(key, value).unwrap();
            c.validate().unwrap_err().to_string()
        };
        assert_eq!(bad("tick_ms", SettingValue::Integer(0)), "tick_ms: must be at least 1 ms");
        assert_eq!(
            bad("settle_ms", SettingValue::Integer(MAX_DELAY_MS as i64 + 1)),
            "settle_ms: 604800001 ms is more than the limit of 604800000 ms (one week)"
        );
        assert_eq!(
            bad("reopen_jitter_pct", SettingValue::Integer(101)),
            "reopen_jitter_pct: 101 is more than the limit of 100"
        );
        assert_eq!(bad("damping.reuse", SettingValue::Integer(0)), "damping.reuse: must be positive, not 0.0");
        assert_eq!(
            bad("reopen_initial_ms", SettingValue::Integer(120_000)),
            "reopen_max_ms: 60000 ms is less than reopen_initial_ms (120000 ms)"
        );
    }

    #[test]
    fn optional_and_section_settings_turn_off() {
        let mut c = MachineConfig::default();
        c.set("audit_ms", SettingValue::Integer(300)).unwrap();
        c.set("damping.reuse", SettingValue::Integer(500)).unwrap();
        assert_eq!(c.damping.map(|d| d.reuse), Some(500.0), "a damping key turns damping on");
        c.set("audit_ms", SettingValue::Bool(false)).unwrap();
        c.set("damping", SettingValue::Bool(false)).unwrap();
        assert_eq!(c, MachineConfig::default());
        c.set("data_path", SettingValue::Bool(false)).unwrap();
        assert_eq!((c.data_path, c.get("data_path.failures")), (None, None), "the breaker turns off");
        c.set("data_path.min_peers", SettingValue::Integer(3)).unwrap();
        assert_eq!(c.data_path.map(|d| d.min_peers), Some(3), "a key of it turns it on again");
        let spec = MachineConfig::setting("require_address").unwrap();
        c.set("require_address", spec.choice("roce_v2_ipv4").unwrap()).unwrap();
        assert_eq!(c.require_address, AddressRequirement::RoceV2Ipv4);
        assert_eq!(
            spec.choice("ipv4").unwrap_err().to_string(),
            "require_address: \"ipv4\" is not one of none, any, roce_v2, roce_v2_ipv4, ib"
        );
        assert_eq!(c.get("damping.reuse"), None, "no damping key while damping is off");
    }
}
