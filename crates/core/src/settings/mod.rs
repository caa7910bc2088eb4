//! The machine's settings, declared once: each is one line in a
//! [`settings!`] declaration (its field, type, default, kind and one-line
//! summary; the struct's doc comment is its prose), which makes the struct,
//! its `Default`, its rows of [`MachineConfig::SETTINGS`] and its lookup by
//! key. `DampingConfig` and `DataPathConfig` are declared the same way,
//! their keys under `damping.` and `data_path.`.
//!
//! Front ends (the scenario parser, `watch`'s config file and flags, the C
//! API, the scenario writer) never restate a setting: they look keys up in
//! [`MachineConfig::SETTINGS`], assign with [`MachineConfig::set`], read
//! with [`MachineConfig::get`] and check with [`MachineConfig::validate`],
//! whose [`ConfigError`] names the full key (`damping.half_life_ms`).
//! Adding a setting is its line, and its rows in docs/CONFIG.md and
//! docs/SCENARIOS.md (tests check both tables against this one).

pub use crate::setting::{ConfigError, Problem, Setting, SettingKind, SettingValue};

use crate::address::AddressRequirement;
use crate::breaker::DataPathConfig;
use crate::damping::DampingConfig;
use crate::declare::{Field, Fields, flatten, settings};
use crate::owner::DeviceOwner;
use crate::setting::refuse;
use crate::time::MAX_DELAY_MS;
use crate::witness::PortWitness;

/// The host agent's audit period (`railwatch watch`'s `audit_ms` default):
/// a port that went down with no event, or flapped with its events lost,
/// is found within two of them. The library's default is off.
pub const AGENT_AUDIT_MS: u64 = 1000;

settings! {
    /// Policy settings. `Default` gives the documented defaults.
    #[derive(Debug, Clone, PartialEq)]
    pub struct MachineConfig (prefix "") {
        /// Recovery tick period in milliseconds (default 1000). The tick runs
        /// only while something needs it (a paused rail, a poll-only device).
        pub tick_ms: u64 = 1000
            => SettingKind::Millis { min: 1 }, "recovery tick period; runs only while needed";
        /// Opt-in audit period: every this many milliseconds the port state of
        /// every active rail is re-read, so a port that went down with no event
        /// at all is noticed. `None` (the default) keeps a healthy host at zero
        /// idle wake-ups.
        pub audit_ms: Option<u64> = None
            => SettingKind::OptionalMillis { min: 1 }, "re-read every active rail this often (off)";
        /// After the port reads ACTIVE, wait this long and re-check before
        /// activating (default 0: activate at once). mlx5/RoCE can reject
        /// connection setup right after link-up; the port going down during the
        /// wait cancels it. Applies to re-attached devices too.
        pub settle_ms: u64 = 0
            => SettingKind::Millis { min: 0 }, "wait after a port reads ACTIVE before activating";
        /// How often a paused rail is explained in the log (default 30 s).
        pub explain_every_ms: u64 = 30_000
            => SettingKind::Millis { min: 0 }, "how often a paused rail is explained";
        /// First delay before re-opening a device that went away, or opening
        /// again one that appeared and would not open (default 1 s).
        pub reopen_initial_ms: u64 = 1000
            => SettingKind::Millis { min: 1 }, "first delay before a (re-)open";
        /// Longest delay between (re-)open attempts (default 60 s).
        pub reopen_max_ms: u64 = 60_000
            => SettingKind::Millis { min: 1 }, "longest delay between (re-)opens";
        /// Each (re-)open delay is lengthened by a random 0..=this percent of it
        /// (default 20, at most 100), so hosts do not all re-open at once.
        pub reopen_jitter_pct: u32 = 20
            => SettingKind::Percent, "random lengthening of each (re-)open delay";
        /// Seed of that jitter. `None` (the default): the driver draws one per
        /// process (the runtime does; a machine made with `None` uses 1). The
        /// simulator fixes it so runs are reproducible. Not a file setting.
        pub seed: Option<u64> = None;
        /// Port-query failures in a row that are retried at the next ticks
        /// before the device counts as gone (default 0: the first failure
        /// closes it and re-opens it with backoff). An engine whose driver
        /// fails a query now and then without the device being gone keeps
        /// its rails through up to this many.
        pub query_retries: u64 = 0
            => SettingKind::Count { min: 0, max: 1000 }, "port-query failures in a row retried before a device is gone";
        /// Who owns each device's context (default `railwatch`): with
        /// `engine`, a device that is gone is never closed, only re-validated
        /// by the engine when asked ([`DeviceOwner`]); the runtime's monitor,
        /// which opens its own devices, refuses it.
        pub device_owner: DeviceOwner = DeviceOwner::Railwatch
            => SettingKind::Choice(&OWNER_NAMES), "who owns a device's context: railwatch or engine";
        /// Flap damping (default off): a rail that flaps too often stays paused
        /// (`damped`) until its penalty decays.
        pub damping: Option<DampingConfig> = None
            => SettingKind::Section, "flap damping; on when the table is present";
        /// The data-path breaker (default on): transfer failures against the
        /// local path, reported by the engine through enough distinct peers,
        /// take a rail out (`data_path`) until a probe after a backoff succeeds.
        /// `None`: reports are counted, never acted on.
        pub data_path: Option<DataPathConfig> = Some(DataPathConfig::default())
            => SettingKind::Section, "the data-path breaker; on unless false";
        /// A rise of the port's `link_downed` or the netdev's carrier counters
        /// with no PORT_ERR seen is a silent flap: the generation moves and
        /// damping is charged (default on).
        pub silent_flaps: bool = true
            => SettingKind::Flag, "a counter rise with no PORT_ERR bumps the generation";
        /// What a rail needs in its GID table before it is made available
        /// (default `none`): a port that reads ACTIVE without it stays paused
        /// (`no_address`).
        pub require_address: AddressRequirement = AddressRequirement::None
            => SettingKind::Choice(&ADDRESS_NAMES), "a GID a rail needs before it is used";
        /// Which witness says a port is usable (default `both`): the port
        /// state, the netdev's carrier, or both (a port that reads ACTIVE with
        /// its carrier down is paused `no_carrier`). Ports with no netdev have
        /// only the port state.
        pub port_witness: PortWitness = PortWitness::Both
            => SettingKind::Choice(&WITNESS_NAMES), "what says a port is up: port, carrier or both";
    }
}

// ---- assigning and reading ---------------------------------------------------

/// The names `device_owner` takes.
const OWNER_NAMES: [&str; 2] = [DeviceOwner::ALL[0].name(), DeviceOwner::ALL[1].name()];

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

/// How many rows the whole table has.
const ROW_COUNT: usize = MachineConfig::ROWS.len() + DampingConfig::ROWS.len() + DataPathConfig::ROWS.len();

impl MachineConfig {
    /// Every setting a file or flag may give (not `seed`), in the order
    /// docs list them: each section's keys follow its own.
    pub const SETTINGS: &'static [Setting] =
        &flatten::<ROW_COUNT>(MachineConfig::ROWS, &[DampingConfig::ROWS, DataPathConfig::ROWS]);

    /// The setting called `key`, if there is one.
    pub fn setting(key: &str) -> Option<&'static Setting> {
        Self::SETTINGS.iter().find(|s| s.key == key)
    }

    /// The field of `key` (a section's key only while the section is on).
    fn field_of(&self, key: &str) -> Option<&dyn Field> {
        match key.split_once('.') {
            Some((section, sub)) => self.field(section)?.section()?.field(sub),
            None => self.field(key),
        }
    }

    /// Sets `key` to `value`, refusing a value of the wrong type or sign
    /// (the range is [`validate`](Self::validate)'s, so the whole config is
    /// judged together). A section's key turns the section on (with its
    /// defaults) when it was off: writing one of its keys means it.
    pub fn set(&mut self, key: &str, value: SettingValue) -> Result<(), ConfigError> {
        // An unknown key has no static name to give: front ends look keys
        // up in SETTINGS first, so this is their bug, named as such.
        let spec = Self::setting(key).ok_or(ConfigError { key: "(unknown key)", problem: Problem::Unknown })?;
        let field = match key.split_once('.') {
            Some((section, sub)) => {
                self.field_mut(section).and_then(|f| f.section_mut()).and_then(|s| s.field_mut(sub))
            }
            None => self.field_mut(key),
        };
        field.ok_or(ConfigError { key: spec.key, problem: Problem::Unknown })?.assign(spec, value)
    }

    /// The value of `key`, if it is a setting (a section's key only while
    /// the section is on).
    pub fn get(&self, key: &str) -> Option<SettingValue> {
        Some(self.field_of(key)?.value())
    }

    /// Checks every setting against its range and the rules between them;
    /// the error names the first bad one by its full key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for spec in Self::SETTINGS {
            // A whole number is checked as it is held (a `u64`): past
            // `i64::MAX` its `SettingValue` would say another number.
            let Some(field) = self.field_of(spec.key) else { continue };
            match field.held_whole() {
                Some(n) => spec.check_whole(n)?,
                None => spec.check(field.value())?,
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
