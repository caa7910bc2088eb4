//! One setting as every front end names it: its key, kind and range
//! ([`Setting`]), a value handed in or read out ([`SettingValue`]), and
//! what is wrong with one ([`ConfigError`]). Settings structs are declared
//! with these (`declare.rs`); `settings/` holds the machine's.

use std::fmt;

use crate::time::MAX_DELAY_MS;

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
    /// A value this front end cannot carry out (why, in a few words).
    NotHere(&'static str),
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
            Problem::NotHere(why) => f.write_str(why),
            Problem::NotAChoice { ref given, names } => write!(f, "{given:?} is not one of {}", names.join(", ")),
            Problem::HoldTooLong { seconds } => write!(
                f,
                "a capped penalty would hold a rail for {seconds:.0} s (half_life_ms × log2(max_penalty / reuse)); \
                 the limit is one week"
            ),
        }
    }
}

pub(crate) fn refuse(key: &'static str, problem: Problem) -> Result<(), ConfigError> {
    Err(ConfigError { key, problem })
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

    /// The error for `value`, of a type this setting does not hold.
    pub fn wrong_type(&self, value: &SettingValue) -> ConfigError {
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
    pub(crate) fn check_whole(&self, n: u64) -> Result<(), ConfigError> {
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
