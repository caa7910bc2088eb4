//! How a setting is declared once: [`settings!`] turns one line per field
//! (its doc, type, default, kind and one-line summary) into the struct, its
//! `Default`, its rows of the settings table and the lookup of a field by
//! key; [`Field`] is how a front end's value reaches a field of any type.

use crate::address::AddressRequirement;
use crate::owner::DeviceOwner;
use crate::setting::{ConfigError, Problem, Setting, SettingKind, SettingValue};
use crate::witness::PortWitness;

/// Declares a settings struct. Each field is one line: its doc comment,
/// `pub name: Type = default`, and, for a setting front ends may give,
/// `=> kind, "one-line summary"` (a field without it, like the jitter's
/// seed, is set by code only). The struct's keys are `prefix` + the field's
/// name (`"damping."`, or `""` at the top). Generates the struct, its
/// `Default`, `ROWS` (its table rows, in declaration order) and the
/// [`Fields`] lookup.
macro_rules! settings {
    (
        $(#[$meta:meta])*
        pub struct $name:ident (prefix $prefix:literal) {
            $(
                $(#[$fmeta:meta])*
                pub $field:ident : $ty:ty = $default:expr $(=> $kind:expr, $line:literal)? ;
            )*
        }
    ) => {
        $(#[$meta])*
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl Default for $name {
            fn default() -> Self {
                $name { $( $field: $default, )* }
            }
        }

        impl $name {
            /// This struct's settings as front ends name them, in the
            /// order the docs list them.
            pub const ROWS: &'static [$crate::setting::Setting] = &[
                $( $( $crate::setting::Setting {
                    key: concat!($prefix, stringify!($field)),
                    kind: $kind,
                    doc: $line,
                }, )? )*
            ];
        }

        impl $crate::declare::Fields for $name {
            fn field(&self, key: &str) -> Option<&dyn $crate::declare::Field> {
                match key {
                    $( $( stringify!($field) if !$line.is_empty() => Some(&self.$field), )? )*
                    _ => None,
                }
            }

            fn field_mut(&mut self, key: &str) -> Option<&mut dyn $crate::declare::Field> {
                match key {
                    $( $( stringify!($field) if !$line.is_empty() => Some(&mut self.$field), )? )*
                    _ => None,
                }
            }
        }
    };
}
pub(crate) use settings;

/// A settings struct's fields by key (its own keys, without its prefix).
pub(crate) trait Fields {
    /// The field called `key`.
    fn field(&self, key: &str) -> Option<&dyn Field>;
    /// The field called `key`, to assign.
    fn field_mut(&mut self, key: &str) -> Option<&mut dyn Field>;
}

/// A field a setting's value goes into, whatever its type.
pub(crate) trait Field {
    /// Its value as front ends read it.
    fn value(&self) -> SettingValue;
    /// The whole number it holds, checked as held (a `u64` past `i64::MAX`
    /// would read as another number).
    fn held_whole(&self) -> Option<u64> {
        None
    }
    /// Takes `value`, refusing a wrong type or sign (ranges are
    /// `validate`'s, which judges the whole config).
    fn assign(&mut self, spec: &Setting, value: SettingValue) -> Result<(), ConfigError>;
    /// A section's fields, while it is on.
    fn section(&self) -> Option<&dyn Fields> {
        None
    }
    /// A section's fields, turning it on with its defaults: writing one of
    /// its keys means it.
    fn section_mut(&mut self) -> Option<&mut dyn Fields> {
        None
    }
}

impl Field for u64 {
    fn value(&self) -> SettingValue {
        SettingValue::Integer(whole(*self))
    }
    fn held_whole(&self) -> Option<u64> {
        Some(*self)
    }
    fn assign(&mut self, spec: &Setting, value: SettingValue) -> Result<(), ConfigError> {
        *self = spec.whole(value)?;
        Ok(())
    }
}

/// Milliseconds or off.
impl Field for Option<u64> {
    fn value(&self) -> SettingValue {
        self.map_or(SettingValue::Bool(false), |ms| SettingValue::Integer(whole(ms)))
    }
    fn held_whole(&self) -> Option<u64> {
        *self
    }
    fn assign(&mut self, spec: &Setting, value: SettingValue) -> Result<(), ConfigError> {
        *self = match value {
            SettingValue::Bool(false) => None,
            other => Some(spec.whole(other)?),
        };
        Ok(())
    }
}

/// A percentage.
impl Field for u32 {
    fn value(&self) -> SettingValue {
        SettingValue::Integer(i64::from(*self))
    }
    fn held_whole(&self) -> Option<u64> {
        Some(u64::from(*self))
    }
    fn assign(&mut self, spec: &Setting, value: SettingValue) -> Result<(), ConfigError> {
        *self = u32::try_from(spec.whole(value)?).unwrap_or(u32::MAX);
        Ok(())
    }
}

impl Field for f64 {
    fn value(&self) -> SettingValue {
        SettingValue::Float(*self)
    }
    fn assign(&mut self, spec: &Setting, value: SettingValue) -> Result<(), ConfigError> {
        *self = match value {
            SettingValue::Integer(i) => i as f64,
            SettingValue::Float(x) => x,
            other => return Err(spec.wrong_type(&other)),
        };
        Ok(())
    }
}

impl Field for bool {
    fn value(&self) -> SettingValue {
        SettingValue::Bool(*self)
    }
    fn assign(&mut self, spec: &Setting, value: SettingValue) -> Result<(), ConfigError> {
        let SettingValue::Bool(b) = value else { return Err(spec.wrong_type(&value)) };
        *self = b;
        Ok(())
    }
}

/// A type whose values are named (a `Choice` setting).
pub(crate) trait Named: Copy + 'static {
    /// Every value, in the order of the setting's names.
    const ALL: &'static [Self];
    /// Its name.
    fn name(self) -> &'static str;
}

impl Named for AddressRequirement {
    const ALL: &'static [Self] = &AddressRequirement::ALL;
    fn name(self) -> &'static str {
        AddressRequirement::name(self)
    }
}

impl Named for PortWitness {
    const ALL: &'static [Self] = &PortWitness::ALL;
    fn name(self) -> &'static str {
        PortWitness::name(self)
    }
}

impl Named for DeviceOwner {
    const ALL: &'static [Self] = &DeviceOwner::ALL;
    fn name(self) -> &'static str {
        DeviceOwner::name(self)
    }
}

impl<T: Named> Field for T {
    fn value(&self) -> SettingValue {
        SettingValue::Choice(self.name())
    }
    fn assign(&mut self, spec: &Setting, value: SettingValue) -> Result<(), ConfigError> {
        let SettingValue::Choice(given) = value else { return Err(spec.wrong_type(&value)) };
        let names = match spec.kind {
            SettingKind::Choice(names) => names,
            _ => &[],
        };
        *self = T::ALL.iter().copied().find(|c| c.name() == given).ok_or_else(|| ConfigError {
            key: spec.key,
            problem: Problem::NotAChoice { given: given.to_owned(), names },
        })?;
        Ok(())
    }
}

/// A section (`[damping]`): on when written as a table or `true`, off with
/// `false`.
impl<T: Fields + Default> Field for Option<T> {
    fn value(&self) -> SettingValue {
        SettingValue::Bool(self.is_some())
    }
    fn assign(&mut self, spec: &Setting, value: SettingValue) -> Result<(), ConfigError> {
        match value {
            SettingValue::Table | SettingValue::Bool(true) => {
                self.get_or_insert_with(T::default);
            }
            SettingValue::Bool(false) => *self = None,
            other => return Err(spec.wrong_type(&other)),
        }
        Ok(())
    }
    fn section(&self) -> Option<&dyn Fields> {
        self.as_ref().map(|s| s as &dyn Fields)
    }
    fn section_mut(&mut self) -> Option<&mut dyn Fields> {
        Some(self.get_or_insert_with(T::default))
    }
}

/// `v` as a setting's whole number (saturated: validate checks it as held).
fn whole(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Every row of `top`, each section's rows (keys `section.…`, from
/// `sections`) right after its own: the whole table, in the docs' order.
/// `N` must be the number of rows in all; a row no section takes fails
/// the build.
pub(crate) const fn flatten<const N: usize>(top: &[Setting], sections: &[&[Setting]]) -> [Setting; N] {
    const BLANK: Setting = Setting { key: "", kind: SettingKind::Flag, doc: "" };
    let mut out = [BLANK; N];
    let mut n = 0;
    let mut i = 0;
    while i < top.len() {
        out[n] = top[i];
        n += 1;
        let mut s = 0;
        while s < sections.len() {
            let mut j = 0;
            while j < sections[s].len() {
                if in_section(sections[s][j].key, top[i].key) {
                    out[n] = sections[s][j];
                    n += 1;
                }
                j += 1;
            }
            s += 1;
        }
        i += 1;
    }
    assert!(n == N, "the settings table's size is not the rows declared");
    out
}

/// Whether `key` is `section.…`.
const fn in_section(key: &str, section: &str) -> bool {
    let (k, s) = (key.as_bytes(), section.as_bytes());
    if k.len() <= s.len() || k[s.len()] != b'.' {
        return false;
    }
    let mut i = 0;
    while i < s.len() {
        if k[i] != s[i] {
            return false;
        }
        i += 1;
    }
    true
}
