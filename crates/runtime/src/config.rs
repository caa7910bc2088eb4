//! Monitor settings: the machine's policy settings, and the driver's own
//! two (how much one drain reads, how much a subscriber may lag).

use railwatch_core::{ConfigError, DeviceOwner, MachineConfig, Problem, Setting, SettingKind, SettingValue};

/// Most `get_event` calls per device per wake-up unless told otherwise;
/// the C API's drain uses the same.
pub const DEFAULT_DRAIN_BUDGET: usize = 256;

/// The largest drain budget: a drain's scratch space is this many events,
/// so a budget is a memory reservation, and past this nothing is gained.
pub const MAX_DRAIN_BUDGET: u64 = 65_536;

/// The largest subscriber channel, in notifications.
pub const MAX_NOTIFY_CAPACITY: u64 = 1 << 20;

/// How the monitor behaves. `Default` gives the documented defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The machine's policy settings (tick, audit, settle, damping,
    /// re-open, the jitter's seed).
    pub machine: MachineConfig,
    /// Most `get_event` calls per device per wake-up (default 256, at most
    /// 65536); a device that hits it is serviced again before the next
    /// blocking wait, so one noisy NIC cannot starve the others.
    pub drain_budget: usize,
    /// Capacity of each subscriber's notification channel (default 4096,
    /// at most 2^20); when one is full, its notifications are dropped and
    /// counted, the monitor never blocks.
    pub notify_capacity: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config { machine: MachineConfig::default(), drain_budget: DEFAULT_DRAIN_BUDGET, notify_capacity: 4096 }
    }
}

impl From<MachineConfig> for Config {
    /// The machine's settings with the driver's defaults.
    fn from(machine: MachineConfig) -> Self {
        Config { machine, ..Config::default() }
    }
}

impl Config {
    /// The driver's own settings; with [`MachineConfig::SETTINGS`], every
    /// setting a file or flag may give.
    pub const SETTINGS: &'static [Setting] = &[
        Setting {
            key: "drain_budget",
            kind: SettingKind::Count { min: 1, max: MAX_DRAIN_BUDGET },
            doc: "most events read per device per wake-up",
        },
        Setting {
            key: "notify_capacity",
            kind: SettingKind::Count { min: 1, max: MAX_NOTIFY_CAPACITY },
            doc: "notifications a subscriber may lag before they are dropped",
        },
    ];

    /// Every setting, the machine's then the driver's.
    pub fn settings() -> impl Iterator<Item = &'static Setting> {
        MachineConfig::SETTINGS.iter().chain(Self::SETTINGS)
    }

    /// The setting called `key`, the machine's or the driver's.
    pub fn setting(key: &str) -> Option<&'static Setting> {
        Self::settings().find(|s| s.key == key)
    }

    fn own(&mut self, key: &str) -> Option<(&'static Setting, &mut usize)> {
        let Config { machine: _, drain_budget, notify_capacity } = self;
        let spec = Self::SETTINGS.iter().find(|s| s.key == key)?;
        match key {
            "drain_budget" => Some((spec, drain_budget)),
            "notify_capacity" => Some((spec, notify_capacity)),
            _ => None,
        }
    }

    /// Sets `key` to `value` (the range is [`validate`](Self::validate)'s).
    pub fn set(&mut self, key: &str, value: SettingValue) -> Result<(), ConfigError> {
        match self.own(key) {
            Some((spec, slot)) => {
                *slot = usize::try_from(spec.whole(value)?).unwrap_or(usize::MAX);
                Ok(())
            }
            None => self.machine.set(key, value),
        }
    }

    /// The value of `key`, if it is a setting.
    pub fn get(&self, key: &str) -> Option<SettingValue> {
        match key {
            "drain_budget" => Some(count(self.drain_budget)),
            "notify_capacity" => Some(count(self.notify_capacity)),
            _ => self.machine.get(key),
        }
    }

    /// Checks every setting; the error names the first bad one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for spec in Self::SETTINGS {
            if let Some(value) = self.get(spec.key) {
                spec.check(value)?;
            }
        }
        self.machine.validate()
    }

    /// [`validate`](Self::validate), and what only a monitor refuses: it
    /// opens its devices itself, so no engine owns them (`device_owner`).
    pub fn validate_for_monitor(&self) -> Result<(), ConfigError> {
        self.validate()?;
        if self.machine.device_owner != DeviceOwner::Railwatch {
            let why =
                "\"engine\" is for an engine that drives the machine itself; the monitor owns the devices it opens";
            return Err(ConfigError { key: "device_owner", problem: Problem::NotHere(why) });
        }
        Ok(())
    }

    /// The machine's settings with the jitter's seed drawn when unset, as
    /// the monitor gives them to its machine.
    pub fn machine_seeded(&self) -> MachineConfig {
        MachineConfig { seed: Some(self.machine.seed.unwrap_or_else(process_seed)), ..self.machine.clone() }
    }
}

fn count(n: usize) -> SettingValue {
    SettingValue::Integer(i64::try_from(n).unwrap_or(i64::MAX))
}

/// A seed that differs between processes, from std's randomly keyed hasher.
fn process_seed() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_drivers_settings_have_ranges() {
        let mut c = Config::default();
        c.set("drain_budget", SettingValue::Integer(10_000_000_000)).unwrap();
        assert_eq!(c.validate().unwrap_err().to_string(), "drain_budget: 10000000000 is more than the limit of 65536");
        c.set("drain_budget", SettingValue::Integer(0)).unwrap();
        assert_eq!(c.validate().unwrap_err().to_string(), "drain_budget: must be at least 1");
        c.set("drain_budget", SettingValue::Integer(65_536)).unwrap();
        c.set("notify_capacity", SettingValue::Integer(1 << 20)).unwrap();
        assert_eq!(c.validate(), Ok(()));
        c.set("tick_ms", SettingValue::Integer(5)).unwrap();
        assert_eq!(c.machine.tick_ms, 5, "machine keys reach the machine");
        assert_eq!(c.get("drain_budget"), Some(SettingValue::Integer(65_536)));
    }

    #[test]
    fn every_setting_is_reachable() {
        let c = Config::default();
        for spec in Config::settings().filter(|s| !s.key.starts_with("damping.")) {
            assert!(c.get(spec.key).is_some(), "{}", spec.key);
        }
    }
}
