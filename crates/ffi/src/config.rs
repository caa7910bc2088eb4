//! Settings from C: an opaque `rw_config` set and read by key, through the
//! one settings table (`railwatch_core::MachineConfig::SETTINGS` and the
//! driver's own), so a setting added to the table is a key C can use with
//! no new function, no new field and no change of the ABI.
//!
//! The value functions are typed (`u64`, `f64`, `bool`, a string), each
//! key takes the type its kind says (docs/CONFIG.md): whole numbers and
//! milliseconds `u64`, the damping penalties `f64`, flags and sections
//! `bool`, names (`require_address`, `port_witness`, `device_owner`) a
//! string. A key that is not a setting, a value of the wrong type or out of
//! the key's range is refused with an error naming both, and the config is
//! left as it was; the rules between keys (`reopen_max_ms` at least
//! `reopen_initial_ms`) are checked when the config is used.

use std::ffi::c_char;

use railwatch_core::{ConfigError, MachineConfig, Problem, Setting, SettingKind, SettingValue};
use railwatch_runtime::Config;

use crate::args::{handle, handle_mut, put, put_new, take, text};
use crate::status::{Error, Result, guard, rw_status};

/// The jitter's seed: not a file setting (the table leaves it out), but a
/// C engine fixes it to replay a run. 0 draws one per process.
const SEED: &str = "seed";

/// Every setting, at its default until set. Made by `rw_config_new`,
/// destroyed by `rw_config_free`; a machine or monitor made from it keeps
/// its own copy.
pub struct rw_config {
    config: Config,
}

impl rw_config {
    /// The monitor's settings, validated: the one conversion from C.
    pub(crate) fn runtime(&self) -> Result<Config> {
        self.config.validate().map_err(|e| invalid(&e))?;
        Ok(self.config.clone())
    }

    /// The machine's settings, validated (its seed drawn when unset, as
    /// the monitor's is).
    pub(crate) fn machine(&self) -> Result<MachineConfig> {
        Ok(self.runtime()?.machine_seeded())
    }
}

/// The settings at `p`, or the defaults for NULL.
///
/// # Safety
/// `p` is NULL or a live config made by `rw_config_new`.
pub(crate) unsafe fn read(p: *const rw_config) -> Result<rw_config> {
    // SAFETY: NULL or a live config, by the caller's promise.
    Ok(rw_config { config: unsafe { p.as_ref() }.map_or_else(Config::default, |c| c.config.clone()) })
}

/// A config refused as a whole, naming the key.
fn invalid(e: &ConfigError) -> Error {
    Error::new(rw_status::RW_ERR_INVALID, format!("rw_config: {e}"))
}

/// The setting called `key` (the jitter's seed included).
fn spec(key: &str) -> Result<&'static Setting> {
    const SEED_SETTING: Setting = Setting {
        key: SEED,
        kind: SettingKind::Count { min: 0, max: u64::MAX },
        doc: "the jitter's seed; 0 draws one",
    };
    if key == SEED {
        return Ok(&SEED_SETTING);
    }
    Config::setting(key).ok_or_else(|| Error::new(rw_status::RW_ERR_NOT_FOUND, format!("{key:?} is no setting")))
}

/// Sets `key` to `value` (`shown` as the caller gave it), checking the
/// key's own range first: refused, nothing changes.
fn set(config: &mut rw_config, key: &str, value: SettingValue, shown: &dyn std::fmt::Display) -> Result<()> {
    let spec = spec(key)?;
    let refused = |e: ConfigError| {
        let status = match e.problem {
            Problem::WrongType { .. } | Problem::NotAChoice { .. } => rw_status::RW_ERR_INVALID,
            _ => rw_status::RW_ERR_RANGE,
        };
        Error::new(status, format!("{key} = {shown}: {}", e.problem))
    };
    if key == SEED {
        // `rw_config_set_u64` takes it; every other type is wrong.
        return Err(refused(spec.wrong_type(&value)));
    }
    // The key's own range, on a copy: a refused value changes nothing.
    let mut next = config.config.clone();
    next.set(key, value).map_err(refused)?;
    if let Some(held) = next.get(key) {
        spec.check(held).map_err(refused)?;
    }
    config.config = next;
    Ok(())
}

/// The value of `key`; `RW_ERR_STATE` for a key of a section that is off.
fn get(config: &rw_config, key: &str) -> Result<SettingValue> {
    let spec = spec(key)?;
    if key == SEED {
        // Saturated past i64: `rw_config_get_u64` reads it whole.
        let seed = config.config.machine.seed.unwrap_or(0);
        return Ok(SettingValue::Integer(i64::try_from(seed).unwrap_or(i64::MAX)));
    }
    config.config.get(spec.key).ok_or_else(|| {
        let section = key.split('.').next().unwrap_or(key);
        Error::new(rw_status::RW_ERR_STATE, format!("{key}: {section} is off"))
    })
}

/// A choice's name as a static C string: every name of every choice
/// setting, made once with its NUL.
fn c_name(name: &str) -> *const c_char {
    static NAMES: std::sync::OnceLock<Vec<std::ffi::CString>> = std::sync::OnceLock::new();
    let names = NAMES.get_or_init(|| {
        let choices = Config::settings().filter_map(|s| match s.kind {
            SettingKind::Choice(names) => Some(names),
            _ => None,
        });
        choices.flatten().filter_map(|n| std::ffi::CString::new(*n).ok()).collect()
    });
    // Every value a choice setting holds is one of its names.
    names.iter().find(|n| n.as_bytes() == name.as_bytes()).map_or(c"".as_ptr(), |n| n.as_ptr())
}

/// `value` is not of the type `key` holds.
fn wrong_type(key: &str, value: &SettingValue, function: &str) -> Error {
    Error::new(rw_status::RW_ERR_INVALID, format!("{key} holds {value}, which {function} does not read"))
}

/// Reads `key` of the config at `config` into `*out`, as `pick` takes its
/// value (`None`: a value of another type than `function` reads).
fn read_key<T>(
    config: *const rw_config,
    key: *const c_char,
    out: *mut T,
    function: &str,
    pick: impl FnOnce(&rw_config, &str, SettingValue) -> Option<T>,
) -> rw_status {
    crate::status::quiet_panics();
    guard(|| {
        // SAFETY: a live config or NULL, and a NUL-terminated string or
        // NULL, by the API's contract.
        let (config, key) = unsafe { (handle(config, "config")?, key_text(key)?) };
        let value = get(config, key)?;
        let v = pick(config, key, value).ok_or_else(|| wrong_type(key, &value, function))?;
        // SAFETY: the caller passes a writable pointer or NULL.
        unsafe { put(out, v, "out") }
    })
}

/// Runs `f` on the config at `config` (to change) and the key at `key`.
fn with_key_mut(
    config: *mut rw_config,
    key: *const c_char,
    f: impl FnOnce(&mut rw_config, &str) -> Result<()>,
) -> rw_status {
    crate::status::quiet_panics();
    guard(|| {
        // SAFETY: as in `read_key`.
        let (config, key) = unsafe { (handle_mut(config, "config")?, key_text(key)?) };
        f(config, key)
    })
}

/// The key at `key`: one that is not UTF-8 is no setting
/// (`RW_ERR_NOT_FOUND`, named as `rw_config_*` names any unknown key).
///
/// # Safety
/// `key` is NULL or a NUL-terminated string.
unsafe fn key_text<'a>(key: *const c_char) -> Result<&'a str> {
    if key.is_null() {
        return Err(crate::status::null("key"));
    }
    // SAFETY: non-null, and NUL-terminated by the caller's promise.
    let k = unsafe { std::ffi::CStr::from_ptr(key) };
    k.to_str().map_err(|_| {
        Error::new(rw_status::RW_ERR_NOT_FOUND, format!("{:?} is no setting (not UTF-8)", k.to_string_lossy()))
    })
}

/// A new config with every setting at its default, in `*out`; destroy it
/// with `rw_config_free`.
#[unsafe(no_mangle)]
pub extern "C" fn rw_config_new(out: *mut *mut rw_config) -> rw_status {
    crate::status::quiet_panics();
    guard(|| {
        // SAFETY: the caller passes a writable pointer or NULL.
        unsafe { put_new(out, || Ok(rw_config { config: Config::default() })) }
    })
}

/// Destroys the config at `*config` and sets `*config` to NULL; NULL
/// (either) is ignored. Machines and monitors made from it are not
/// affected.
#[unsafe(no_mangle)]
pub extern "C" fn rw_config_free(config: *mut *mut rw_config) {
    // SAFETY: NULL or the address of a handle, by the API's contract.
    if let Some(config) = unsafe { take(config) } {
        // SAFETY: made by `rw_config_new` and not freed (its slot held it).
        drop(unsafe { Box::from_raw(config) });
    }
}

/// Sets the whole-number or milliseconds setting `key` (`"tick_ms"`,
/// `"damping.half_life_ms"`, `"seed"`), or a number setting to a whole
/// number (`"damping.reuse"` 3 is 3.0; `rw_config_set_f64` on a
/// whole-number key is refused, a fraction it cannot hold). For an
/// optional period (`audit_ms`) 0 turns it off. A key of a section that
/// is off (`"damping.half_life_ms"` after `"damping"` false) turns the
/// section on, its other keys at their defaults: writing one of its keys
/// means it (any `rw_config_set_*`). `RW_ERR_NOT_FOUND` for a key that is no
/// setting, `RW_ERR_INVALID` for a key of another type, `RW_ERR_RANGE`
/// for a value outside the key's range; the message names key and value.
#[unsafe(no_mangle)]
pub extern "C" fn rw_config_set_u64(config: *mut rw_config, key: *const c_char, value: u64) -> rw_status {
    with_key_mut(config, key, |c, key| {
        if key == SEED {
            // Any 64-bit number; 0 draws one per process.
            c.config.machine.seed = Some(value).filter(|&s| s != 0);
            return Ok(());
        }
        let v = match (spec(key)?.kind, i64::try_from(value)) {
            (SettingKind::OptionalMillis { .. }, _) if value == 0 => SettingValue::Bool(false),
            (SettingKind::Section, _) => SettingValue::Other("a number"),
            (_, Ok(i)) => SettingValue::Integer(i),
            // Past i64: any limit refuses it.
            (_, Err(_)) => {
                return Err(Error::new(rw_status::RW_ERR_RANGE, format!("{key} = {value}: more than any limit")));
            }
        };
        set(c, key, v, &value)
    })
}

/// Sets the number setting `key` (the damping penalties:
/// `"damping.reuse"`). Errors as `rw_config_set_u64`'s.
#[unsafe(no_mangle)]
pub extern "C" fn rw_config_set_f64(config: *mut rw_config, key: *const c_char, value: f64) -> rw_status {
    with_key_mut(config, key, |c, key| match spec(key)?.kind {
        SettingKind::Positive => set(c, key, SettingValue::Float(value), &value),
        _ => set(c, key, SettingValue::Other("a float"), &value),
    })
}

/// Sets the flag or section `key` (`"silent_flaps"`, `"damping"`: true
/// turns it on with its defaults, false off; `"audit_ms"`: false turns it
/// off). Errors as `rw_config_set_u64`'s.
#[unsafe(no_mangle)]
pub extern "C" fn rw_config_set_bool(config: *mut rw_config, key: *const c_char, value: bool) -> rw_status {
    with_key_mut(config, key, |c, key| set(c, key, SettingValue::Bool(value), &value))
}

/// Sets the named setting `key` to one of its names
/// (`rw_config_set_str(c, "port_witness", "carrier")`). Errors as
/// `rw_config_set_u64`'s (a name the key does not take is
/// `RW_ERR_INVALID`, the message lists the names it takes).
#[unsafe(no_mangle)]
pub extern "C" fn rw_config_set_str(config: *mut rw_config, key: *const c_char, value: *const c_char) -> rw_status {
    with_key_mut(config, key, |c, key| {
        // SAFETY: a NUL-terminated string or NULL, by the API's contract.
        let value = unsafe { text(value, "value") }?;
        let v = spec(key)?
            .choice(value)
            .map_err(|e| Error::new(rw_status::RW_ERR_INVALID, format!("{key} = {value:?}: {}", e.problem)))?;
        set(c, key, v, &format_args!("{value:?}"))
    })
}

/// The whole-number or milliseconds setting `key`, in `*out` (an optional
/// period that is off reads 0). `RW_ERR_NOT_FOUND` for a key that is no
/// setting, `RW_ERR_INVALID` for a key of another type, `RW_ERR_STATE`
/// for a key of a section that is off.
#[unsafe(no_mangle)]
pub extern "C" fn rw_config_get_u64(config: *const rw_config, key: *const c_char, out: *mut u64) -> rw_status {
    read_key(config, key, out, "rw_config_get_u64", |c, key, v| match v {
        _ if key == SEED => Some(c.config.machine.seed.unwrap_or(0)),
        SettingValue::Integer(i) => Some(u64::try_from(i).unwrap_or(0)),
        // An optional period that is off.
        SettingValue::Bool(false) if matches!(spec(key).map(|s| s.kind), Ok(SettingKind::OptionalMillis { .. })) => {
            Some(0)
        }
        _ => None,
    })
}

/// The number setting `key`, in `*out`. Errors as `rw_config_get_u64`'s.
#[unsafe(no_mangle)]
pub extern "C" fn rw_config_get_f64(config: *const rw_config, key: *const c_char, out: *mut f64) -> rw_status {
    read_key(config, key, out, "rw_config_get_f64", |_, _, v| match v {
        SettingValue::Float(x) => Some(x),
        _ => None,
    })
}

/// The flag or section `key` (on or off), in `*out`. Errors as
/// `rw_config_get_u64`'s. An optional period (`audit_ms`) reads `false`
/// here while it is off and `RW_ERR_INVALID` while it holds a period:
/// read its value with `rw_config_get_u64` (0 when off).
#[unsafe(no_mangle)]
pub extern "C" fn rw_config_get_bool(config: *const rw_config, key: *const c_char, out: *mut bool) -> rw_status {
    read_key(config, key, out, "rw_config_get_bool", |_, _, v| match v {
        SettingValue::Bool(b) => Some(b),
        _ => None,
    })
}

/// The named setting `key`'s name, in `*out`: a static string, never
/// freed. Errors as `rw_config_get_u64`'s.
#[unsafe(no_mangle)]
pub extern "C" fn rw_config_get_str(
    config: *const rw_config,
    key: *const c_char,
    out: *mut *const c_char,
) -> rw_status {
    read_key(config, key, out, "rw_config_get_str", |_, _, v| match v {
        SettingValue::Choice(name) => Some(c_name(name)),
        _ => None,
    })
}

/// Checks the whole config as a machine or monitor made from it would
/// (the rules between keys included): `RW_ERR_INVALID` naming the first
/// bad key.
#[unsafe(no_mangle)]
pub extern "C" fn rw_config_check(config: *const rw_config) -> rw_status {
    crate::status::quiet_panics();
    guard(|| {
        // SAFETY: a live config or NULL, by the API's contract.
        unsafe { handle(config, "config") }?.runtime().map(drop)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(k: &str) -> std::ffi::CString {
        std::ffi::CString::new(k).unwrap()
    }

    /// Every key of the table is set and read back through the C functions
    /// of its kind.
    #[test]
    fn every_setting_is_set_and_read_by_key() {
        let mut c = std::ptr::null_mut();
        assert_eq!(rw_config_new(&mut c), rw_status::RW_OK);
        for spec in Config::settings() {
            let k = key(spec.key);
            match spec.kind {
                SettingKind::Millis { min } | SettingKind::OptionalMillis { min } | SettingKind::Count { min, .. } => {
                    let v = min.max(2);
                    assert_eq!(rw_config_set_u64(c, k.as_ptr(), v), rw_status::RW_OK, "{}", spec.key);
                    let mut back = 0;
                    assert_eq!(rw_config_get_u64(c, k.as_ptr(), &mut back), rw_status::RW_OK, "{}", spec.key);
                    assert_eq!(back, v, "{}", spec.key);
                }
                SettingKind::Percent => assert_eq!(rw_config_set_u64(c, k.as_ptr(), 50), rw_status::RW_OK),
                SettingKind::Positive => {}
                SettingKind::Flag | SettingKind::Section => {
                    assert_eq!(rw_config_set_bool(c, k.as_ptr(), true), rw_status::RW_OK, "{}", spec.key);
                    let mut on = false;
                    assert_eq!(rw_config_get_bool(c, k.as_ptr(), &mut on), rw_status::RW_OK);
                    assert!(on, "{}", spec.key);
                }
                SettingKind::Choice(names) => {
                    let name = key(names[names.len() - 1]);
                    assert_eq!(rw_config_set_str(c, k.as_ptr(), name.as_ptr()), rw_status::RW_OK, "{}", spec.key);
                    let mut back = std::ptr::null();
                    assert_eq!(rw_config_get_str(c, k.as_ptr(), &mut back), rw_status::RW_OK);
                    // SAFETY: a static NUL-terminated name.
                    assert_eq!(unsafe { std::ffi::CStr::from_ptr(back) }, name.as_c_str());
                }
            }
        }
        rw_config_free(&mut c);
        assert!(c.is_null());
    }

    /// Every key, through every setter, with the values at and past every
    /// bound: a value is either taken and read back as given, or refused
    /// with a message naming the key, and the config is then as it was.
    #[test]
    fn every_key_takes_or_refuses_every_edge_value_and_a_refusal_changes_nothing() {
        let wholes = [0, 1, 2, 99, 100, 101, 1 << 20, 604_800_000, 604_800_001, i64::MAX as u64, 1 << 63, u64::MAX];
        let floats = [0.0, -0.0, -1.0, 1e-300, 0.5, 1.0, 2500.0, 1e300, f64::INFINITY, f64::NAN, f64::MIN];
        let names: Vec<&str> = Config::settings().map(|s| s.key).chain([SEED]).collect();
        for setting in names {
            let k = key(setting);
            for &v in &wholes {
                attempt(
                    setting,
                    |c| rw_config_set_u64(c, k.as_ptr(), v),
                    |c| {
                        // A penalty takes a whole number too.
                        read_u64(c, &k) == Some(v) || read_f64(c, &k) == Some(v as f64) || taken_off(c, &k, v)
                    },
                );
            }
            for &x in &floats {
                attempt(setting, |c| rw_config_set_f64(c, k.as_ptr(), x), |c| read_f64(c, &k).is_some_and(|y| y == x));
            }
            for b in [false, true] {
                attempt(
                    setting,
                    |c| rw_config_set_bool(c, k.as_ptr(), b),
                    |c| {
                        // `false` also turns an optional period off (it reads 0).
                        read_bool(c, &k) == Some(b) || (!b && read_u64(c, &k) == Some(0))
                    },
                );
            }
            for name in ["", "none", "both", "engine", "ENGINE", "carrier\u{7f}"] {
                let n = key(name);
                attempt(
                    setting,
                    |c| rw_config_set_str(c, k.as_ptr(), n.as_ptr()),
                    |c| read_str(c, &k).as_deref() == Some(name),
                );
            }
        }
    }

    /// The seed is any 64-bit number (0 draws one per process).
    #[test]
    fn the_seed_takes_every_u64() {
        let mut c = std::ptr::null_mut();
        rw_config_new(&mut c);
        let k = key(SEED);
        for v in [0, 1, i64::MAX as u64, 1 << 63, u64::MAX] {
            assert_eq!(rw_config_set_u64(c, k.as_ptr(), v), rw_status::RW_OK, "seed {v}");
            assert_eq!(read_u64(c, &k), Some(v), "seed {v}");
        }
        rw_config_free(&mut c);
    }

    /// An optional period set to 0 reads 0 (off).
    fn taken_off(c: *mut rw_config, k: &std::ffi::CStr, v: u64) -> bool {
        v == 0 && read_u64(c, k) == Some(0)
    }

    /// Runs `set` on a fresh config: taken, `taken` must hold; refused, the
    /// message names `key` and every setting reads as before.
    fn attempt(key: &str, set: impl Fn(*mut rw_config) -> rw_status, taken: impl Fn(*mut rw_config) -> bool) {
        let mut c = std::ptr::null_mut();
        assert_eq!(rw_config_new(&mut c), rw_status::RW_OK);
        let before = snapshot(c);
        let status = set(c);
        if status == rw_status::RW_OK {
            assert!(taken(c), "{key}: taken, but it does not read back");
        } else {
            let e = crate::status::last_error_text();
            assert!(e.contains(key), "{key}: the refusal does not name it: {e:?}");
            assert_eq!(snapshot(c), before, "{key}: a refused value changed the config");
        }
        rw_config_free(&mut c);
    }

    /// Every setting as it reads, for comparing.
    fn snapshot(c: *mut rw_config) -> Vec<String> {
        Config::settings()
            .map(|s| {
                let k = key(s.key);
                format!("{:?} {:?} {:?} {:?}", read_u64(c, &k), read_f64(c, &k), read_bool(c, &k), read_str(c, &k))
            })
            .chain([format!("{:?}", read_u64(c, &key(SEED)))])
            .collect()
    }

    fn read_u64(c: *mut rw_config, k: &std::ffi::CStr) -> Option<u64> {
        let mut v = 0;
        (rw_config_get_u64(c, k.as_ptr(), &mut v) == rw_status::RW_OK).then_some(v)
    }

    fn read_f64(c: *mut rw_config, k: &std::ffi::CStr) -> Option<f64> {
        let mut v = 0.0;
        (rw_config_get_f64(c, k.as_ptr(), &mut v) == rw_status::RW_OK).then_some(v)
    }

    fn read_bool(c: *mut rw_config, k: &std::ffi::CStr) -> Option<bool> {
        let mut v = false;
        (rw_config_get_bool(c, k.as_ptr(), &mut v) == rw_status::RW_OK).then_some(v)
    }

    fn read_str(c: *mut rw_config, k: &std::ffi::CStr) -> Option<String> {
        let mut v = std::ptr::null();
        (rw_config_get_str(c, k.as_ptr(), &mut v) == rw_status::RW_OK)
            // SAFETY: a static NUL-terminated name.
            .then(|| unsafe { std::ffi::CStr::from_ptr(v) }.to_string_lossy().into_owned())
    }

    #[test]
    fn bad_keys_types_and_ranges_are_refused_and_change_nothing() {
        let mut c = std::ptr::null_mut();
        rw_config_new(&mut c);
        assert_eq!(rw_config_set_u64(c, key("ticks_ms").as_ptr(), 5), rw_status::RW_ERR_NOT_FOUND);
        assert_eq!(rw_config_set_u64(c, key("tick_ms").as_ptr(), 0), rw_status::RW_ERR_RANGE);
        assert_eq!(rw_config_set_f64(c, key("tick_ms").as_ptr(), 5.0), rw_status::RW_ERR_INVALID);
        assert_eq!(rw_config_set_u64(c, key("tick_ms").as_ptr(), u64::MAX), rw_status::RW_ERR_RANGE);
        assert_eq!(rw_config_set_str(c, key("port_witness").as_ptr(), key("nic").as_ptr()), rw_status::RW_ERR_INVALID);
        assert_eq!(rw_config_set_f64(c, key("damping.reuse").as_ptr(), -1.0), rw_status::RW_ERR_RANGE);
        let mut tick = 0;
        rw_config_get_u64(c, key("tick_ms").as_ptr(), &mut tick);
        assert_eq!(tick, 1000, "a refused value changed nothing");
        let mut on = true;
        rw_config_get_bool(c, key("damping").as_ptr(), &mut on);
        assert!(!on, "the refused damping key did not turn damping on");
        let mut reuse = 0.0;
        assert_eq!(rw_config_get_f64(c, key("damping.reuse").as_ptr(), &mut reuse), rw_status::RW_ERR_STATE);
        // The rules between keys are the whole config's.
        assert_eq!(rw_config_set_u64(c, key("reopen_initial_ms").as_ptr(), 120_000), rw_status::RW_OK);
        assert_eq!(rw_config_check(c), rw_status::RW_ERR_INVALID);
        assert_eq!(rw_config_set_u64(c, key("audit_ms").as_ptr(), 0), rw_status::RW_OK, "0 turns audit_ms off");
        rw_config_free(&mut c);
    }

    /// A key that is not UTF-8 is no setting: `RW_ERR_NOT_FOUND`, named,
    /// for every setter and getter (it was `RW_ERR_INVALID`).
    #[test]
    fn a_key_that_is_not_utf8_is_not_found() {
        let mut c = std::ptr::null_mut();
        rw_config_new(&mut c);
        let bad = std::ffi::CString::new(b"tick_\xffms".to_vec()).unwrap();
        assert_eq!(rw_config_set_u64(c, bad.as_ptr(), 5), rw_status::RW_ERR_NOT_FOUND);
        assert!(crate::status::last_error_text().contains("is no setting (not UTF-8)"));
        assert!(crate::status::last_error_text().contains("tick_"), "named");
        let mut v = 0;
        assert_eq!(rw_config_get_u64(c, bad.as_ptr(), &mut v), rw_status::RW_ERR_NOT_FOUND);
        assert_eq!(rw_config_set_bool(c, bad.as_ptr(), true), rw_status::RW_ERR_NOT_FOUND);
        assert_eq!(rw_config_set_u64(c, std::ptr::null(), 5), rw_status::RW_ERR_NULL);
        rw_config_free(&mut c);
    }

    /// What the docs say of sections and types (issue 29's second attack):
    /// a section's key turns the section on; a whole number is taken for a
    /// number key, not the other way round; an optional period reads false
    /// through get_bool when off, its value through get_u64.
    #[test]
    fn sections_numbers_and_periods_read_as_documented() {
        let mut c = std::ptr::null_mut();
        rw_config_new(&mut c);
        assert_eq!(rw_config_set_bool(c, key("data_path").as_ptr(), false), rw_status::RW_OK);
        assert_eq!(rw_config_set_u64(c, key("data_path.failures").as_ptr(), 3), rw_status::RW_OK);
        let mut on = false;
        assert_eq!(rw_config_get_bool(c, key("data_path").as_ptr(), &mut on), rw_status::RW_OK);
        assert!(on, "writing a section's key turns it on");
        assert_eq!(rw_config_set_u64(c, key("damping.reuse").as_ptr(), 3), rw_status::RW_OK);
        let mut reuse = 0.0;
        assert_eq!(rw_config_get_f64(c, key("damping.reuse").as_ptr(), &mut reuse), rw_status::RW_OK);
        assert_eq!(reuse, 3.0);
        assert_eq!(rw_config_set_f64(c, key("tick_ms").as_ptr(), 3.0), rw_status::RW_ERR_INVALID);
        let (mut off, mut ms) = (true, 7);
        assert_eq!(rw_config_get_bool(c, key("audit_ms").as_ptr(), &mut off), rw_status::RW_OK);
        assert!(!off);
        assert_eq!(rw_config_get_u64(c, key("audit_ms").as_ptr(), &mut ms), rw_status::RW_OK);
        assert_eq!(ms, 0);
        assert_eq!(rw_config_set_u64(c, key("audit_ms").as_ptr(), 1000), rw_status::RW_OK);
        assert_eq!(rw_config_get_bool(c, key("audit_ms").as_ptr(), &mut off), rw_status::RW_ERR_INVALID);
        assert_eq!(rw_config_get_u64(c, key("audit_ms").as_ptr(), &mut ms), rw_status::RW_OK);
        assert_eq!(ms, 1000);
        rw_config_free(&mut c);
    }
}
