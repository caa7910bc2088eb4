//! The one loader for the TOML files railwatch reads (scenario files and
//! `watch`'s config file): a size-checked read that refuses what is not a
//! plain text file, line numbers for byte offsets, the settings written at
//! the top level (every key of [`Config::settings`], parsed and assigned the
//! same way for both files), and TOML errors turned into one line with the
//! line and key.

use std::fmt;
use std::io::{self, Read};
use std::path::Path;

use railwatch_runtime::{Config, ConfigError, SettingKind, SettingValue};
use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};
use toml::{Spanned, Value};

/// Largest file read: 16 MiB.
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// Reads `path` as text: a regular file (a FIFO with no writer would block
/// the open, a device such as /dev/zero would be read until memory runs
/// out) of at most [`MAX_FILE_BYTES`], UTF-8 without NUL bytes. `what`
/// names the kind of file in the refusals ("a scenario file"). The error is
/// one line, without the path (the caller prefixes it).
pub fn read_text(path: &Path, what: &str) -> Result<String, String> {
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => "no such file".to_owned(),
        _ => format!("cannot read: {e}"),
    })?;
    if meta.is_dir() {
        return Err(format!("is a directory, not {what}"));
    }
    if !meta.is_file() {
        return Err(format!("not a regular file (a FIFO, socket or device); {what} is a plain file"));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!("{} bytes is more than the limit of {MAX_FILE_BYTES} (16 MiB)", meta.len()));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(format!("grew past the limit of {MAX_FILE_BYTES} bytes while being read"));
    }
    if let Some(at) = bytes.iter().position(|&b| b == 0) {
        return Err(format!("not a text file (NUL byte at offset {at})"));
    }
    String::from_utf8(bytes)
        .map_err(|e| format!("not a text file (invalid UTF-8 at offset {})", e.utf8_error().valid_up_to()))
}

/// Line numbers of byte offsets, by binary search (a big file's many lookups
/// stay cheap).
#[derive(Debug, Clone)]
pub struct Lines {
    starts: Vec<usize>,
    len: usize,
}

impl Lines {
    /// The line index of `text`.
    pub fn new(text: &str) -> Lines {
        let starts = text.bytes().enumerate().filter(|&(_, b)| b == b'\n').map(|(i, _)| i + 1).collect();
        Lines { starts, len: text.len() }
    }

    /// The 1-based line of byte `offset`.
    pub fn line(&self, offset: usize) -> usize {
        let end = offset.min(self.len);
        self.starts.partition_point(|&start| start <= end) + 1
    }
}

// ---- the settings at the top level -----------------------------------------------

/// One setting written in a file: its key, its value and its line.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    /// The full key (`"tick_ms"`, `"damping.reuse"`).
    pub key: &'static str,
    /// The 1-based line it was written on.
    pub line: usize,
}

/// A setting refused where it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct SettingError {
    /// The 1-based line.
    pub line: usize,
    /// The full key, when one is to blame (`None`: the key is not a setting).
    pub key: Option<String>,
    /// The problem, on one line.
    pub message: String,
}

impl fmt::Display for SettingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.key {
            Some(key) => write!(f, "{key}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// The top-level keys of a document: the settings with their values, and
/// the other keys (the front end's own) by name and offset.
#[derive(Debug, Default)]
pub struct TopLevel {
    settings: Vec<(Spanned<String>, RawSetting)>,
    /// Every other top-level key, with the offset where it is written.
    pub others: Vec<(String, usize)>,
}

/// A setting's value as read: a leaf with its span, or a section's table
/// (toml cannot span a table written with dotted keys).
#[derive(Debug)]
enum RawSetting {
    Leaf(Spanned<Value>),
    Section(Value),
}

impl<'de> Deserialize<'de> for TopLevel {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Keys;
        impl<'de> Visitor<'de> for Keys {
            type Value = TopLevel;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a table of settings")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TopLevel, A::Error> {
                let mut top = TopLevel::default();
                while let Some(key) = map.next_key::<Spanned<String>>()? {
                    match Config::setting(key.get_ref()).map(|s| s.kind) {
                        Some(SettingKind::Section) => {
                            let v = map.next_value::<Value>()?;
                            top.settings.push((key, RawSetting::Section(v)));
                        }
                        Some(_) => {
                            let v = map.next_value::<Spanned<Value>>()?;
                            top.settings.push((key, RawSetting::Leaf(v)));
                        }
                        None => {
                            map.next_value::<IgnoredAny>()?;
                            top.others.push((key.get_ref().clone(), key.span().start));
                        }
                    }
                }
                Ok(top)
            }
        }
        d.deserialize_map(Keys)
    }
}

impl TopLevel {
    /// Reads the top-level keys of `text` (settings parsed, the rest only
    /// named).
    pub fn parse(text: &str) -> Result<TopLevel, toml::de::Error> {
        toml::from_str(text)
    }

    /// Assigns every setting written to `config`, in file order; returns
    /// where each was written. A value of the wrong type or sign, or an
    /// unknown key inside a section, is refused at its line. Ranges are
    /// [`Config::validate`]'s (see [`blame`]).
    pub fn apply(&self, text: &str, lines: &Lines, config: &mut Config) -> Result<Vec<Written>, SettingError> {
        let mut written = Vec::new();
        for (key, value) in &self.settings {
            let spec = Config::setting(key.get_ref()).expect("only settings are kept");
            let line = lines.line(key.span().start);
            match value {
                RawSetting::Leaf(v) => {
                    let line = lines.line(v.span().start);
                    set(config, spec.key, v.get_ref(), line)?;
                    written.push(Written { key: spec.key, line });
                }
                RawSetting::Section(table) => {
                    set(config, spec.key, table, line)?;
                    written.push(Written { key: spec.key, line });
                    // `data_path = false` (or `damping = true`): on or off,
                    // no keys of its own.
                    if !matches!(table, Value::Boolean(_)) {
                        written.extend(apply_section(spec.key, table, text, line, config)?);
                    }
                }
            }
        }
        Ok(written)
    }
}

/// The keys of a section table (`[damping]`), each found on its line in the
/// text when it can be (else the section's line).
fn apply_section(
    section: &'static str,
    table: &Value,
    text: &str,
    section_line: usize,
    config: &mut Config,
) -> Result<Vec<Written>, SettingError> {
    let Value::Table(table) = table else {
        return Err(SettingError {
            line: section_line,
            key: Some(section.to_owned()),
            message: format!("must be {}, not {}", SettingKind::Section.expected(), article(table)),
        });
    };
    let mut written = Vec::new();
    for (sub, value) in table {
        let full = format!("{section}.{sub}");
        let line = key_line(text, section, sub).unwrap_or(section_line);
        let Some(spec) = Config::setting(&full) else {
            let known: Vec<&str> =
                Config::settings().filter_map(|s| s.key.strip_prefix(section)?.strip_prefix('.')).collect();
            return Err(SettingError {
                line,
                key: Some(shown(&full)),
                message: format!("unknown key (known here: {})", known.join(", ")),
            });
        };
        set(config, spec.key, value, line)?;
        written.push(Written { key: spec.key, line });
    }
    Ok(written)
}

fn set(config: &mut Config, key: &'static str, value: &Value, line: usize) -> Result<(), SettingError> {
    let refused = |e: ConfigError| SettingError { line, key: Some(key.to_owned()), message: e.problem.to_string() };
    let value = match (value, Config::setting(key)) {
        // A choice's names are text: the setting reads them.
        (Value::String(text), Some(spec)) if matches!(spec.kind, SettingKind::Choice(_)) => {
            spec.choice(text).map_err(refused)?
        }
        _ => setting_value(value),
    };
    config.set(key, value).map_err(refused)
}
/// A TOML value as a setting's value.
pub fn setting_value(v: &Value) -> SettingValue {
    match v {
        Value::Integer(i) => SettingValue::Integer(*i),
        Value::Float(f) => SettingValue::Float(*f),
        Value::Boolean(b) => SettingValue::Bool(*b),
        Value::Table(_) => SettingValue::Table,
        Value::String(_) => SettingValue::Other("a string"),
        Value::Array(_) => SettingValue::Other("an array"),
        Value::Datetime(_) => SettingValue::Other("a datetime"),
    }
}

/// A TOML value's type with its article: "a string", "an integer".
pub fn article(v: &Value) -> String {
    let t = v.type_str();
    let a = if t.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" };
    format!("{a} {t}")
}

/// Where a config refused by [`Config::validate`] is to blame: the line its
/// key (or, for a default, the setting it conflicts with) was written on.
pub fn blame(e: &ConfigError, written: &[Written]) -> Option<usize> {
    let at = |key: &str| written.iter().find(|w| w.key == key).map(|w| w.line);
    at(e.key).or_else(|| related_keys(e.key).iter().find_map(|k| at(k)))
}

/// The keys to blame, in order, when `key` is refused at its default: the
/// ones whose written value made the default wrong.
pub fn related_keys(key: &str) -> &'static [&'static str] {
    match key {
        "reopen_max_ms" => &["reopen_initial_ms"],
        "data_path.backoff_max_ms" => &["data_path.backoff_initial_ms", "data_path"],
        k if k.starts_with("damping.") => &["damping"],
        k if k.starts_with("data_path.") => &["data_path"],
        _ => &[],
    }
}

/// The line where `key` of section `section` is written: under a
/// `[section]` header, as `section.key = …`, or inside `section = { … }`.
pub fn key_line(text: &str, section: &str, key: &str) -> Option<usize> {
    let mut in_section = false;
    for (i, raw) in text.lines().enumerate() {
        let l = raw.split('#').next().unwrap_or("").trim();
        if let Some(inner) = l.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            in_section = inner.trim() == section;
            continue;
        }
        let assigns = |l: &str, k: &str| l.strip_prefix(k).is_some_and(|r| r.trim_start().starts_with('='));
        let dotted = l.strip_prefix(section).and_then(|r| r.trim_start().strip_prefix('.'));
        let inline = l.strip_prefix(section).is_some_and(|r| r.trim_start().starts_with('=')) && l.contains('{');
        if (in_section && assigns(l, key))
            || dotted.is_some_and(|r| assigns(r.trim_start(), key))
            || (inline && l.split(['{', ',']).any(|part| assigns(part.trim(), key)))
        {
            return Some(i + 1);
        }
    }
    None
}

/// A key from the file as an error line shows it: control characters
/// escaped, at most [`MAX_SHOWN_KEY`] characters (a line stays a line, and
/// short, whatever the file holds).
pub fn shown(key: &str) -> String {
    let mut out: String = key.chars().take(MAX_SHOWN_KEY).flat_map(char::escape_default).collect();
    if key.chars().count() > MAX_SHOWN_KEY {
        out.push('…');
    }
    out
}

/// Longest key an error line repeats.
pub const MAX_SHOWN_KEY: usize = 64;

// ---- TOML errors ------------------------------------------------------------------

/// A TOML error on one line: its line, the key it is about when one can be
/// told, and the message.
pub fn toml_error(text: &str, lines: &Lines, e: &toml::de::Error) -> SettingError {
    let line = e.span().map_or(1, |s| lines.line(s.start));
    let message = match e.message().trim() {
        // The parser says nothing for a key with no value at the end of the
        // file (a cut-off file).
        "" if e.span().is_some_and(|s| s.start >= text.trim_end().len()) => {
            "the file ends where a value was expected (cut off?)".to_owned()
        }
        "" => "invalid TOML here".to_owned(),
        m => m.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(": "),
    };
    SettingError { line, key: None, message }
}

/// The top-level keys that are neither settings nor in `own`: an error for
/// the first, at its line, naming what is known.
pub fn unknown_key(top: &TopLevel, own: &[&str], lines: &Lines) -> Option<SettingError> {
    let (key, at) = top.others.iter().find(|(k, _)| !own.contains(&k.as_str()))?;
    let known: Vec<&str> =
        own.iter().copied().chain(Config::settings().map(|s| s.key).filter(|k| !k.contains('.'))).collect();
    Some(SettingError {
        line: lines.line(*at),
        key: Some(shown(key)),
        message: format!("unknown key (known here: {})", known.join(", ")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(text: &str) -> Result<(Config, Vec<Written>), SettingError> {
        let lines = Lines::new(text);
        let top = TopLevel::parse(text).map_err(|e| toml_error(text, &lines, &e))?;
        let mut c = Config::default();
        let w = top.apply(text, &lines, &mut c)?;
        Ok((c, w))
    }

    #[test]
    fn settings_are_read_with_their_lines_in_every_table_form() {
        for text in [
            "tick_ms = 5\n\n[damping]\nreuse = 300\n",
            "tick_ms = 5\n\ndamping.reuse = 300\n",
            "tick_ms = 5\n\n# a comment\ndamping = { suppress = 2000, reuse = 300 }\n",
        ] {
            let (c, w) = apply(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(c.machine.tick_ms, 5);
            assert_eq!(c.machine.damping.map(|d| d.reuse), Some(300.0), "{text}");
            let reuse = w.iter().find(|w| w.key == "damping.reuse").expect("reuse written");
            assert_eq!(reuse.line, text.lines().position(|l| l.contains("reuse")).unwrap() + 1, "{text}");
        }
    }

    #[test]
    fn refusals_name_line_and_key() {
        let e = apply("name = 'x'\ntick_ms = 'soon'\n").unwrap_err();
        assert_eq!(
            (e.line, e.to_string()),
            (2, "tick_ms: must be a whole number of milliseconds, not a string".into())
        );
        let e = apply("[damping]\nhalf_life = 3\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.to_string().starts_with("damping.half_life: unknown key (known here: penalty_per_flap"), "{e}");
        let e = apply("damping = 3\n").unwrap_err();
        assert_eq!(
            (e.line, e.to_string()),
            (1, "damping: must be a table (or false to turn it off), not an integer".into())
        );
        // `[[damping]]` is an array of tables: named, with its line.
        let e = apply("tick_ms = 5\n[[damping]]\nhalf_life_ms = 3\n").unwrap_err();
        assert_eq!(
            (e.line, e.to_string()),
            (2, "damping: must be a table (or false to turn it off), not an array".into())
        );
        // Off, and on with the defaults.
        apply("data_path = false\ndamping = true\n").unwrap();
        let e = apply("tick_ms = \n").unwrap_err();
        assert_eq!(e.line, 1);
    }

    #[test]
    fn a_section_is_turned_off_by_false_and_on_by_true() {
        // `data_path = false` is what the docs say turns the breaker off,
        // and what the scenario writer writes for it.
        let (c, w) = apply("data_path = false\ndamping = true\n").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.machine.data_path, None);
        assert!(c.machine.damping.is_some());
        assert_eq!(w.iter().find(|w| w.key == "data_path").map(|w| w.line), Some(1));
        let (c, _) = apply("damping = false\n").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.machine.damping, None);
    }

    #[test]
    fn a_default_refused_for_a_written_key_blames_that_key() {
        for (text, line) in [
            ("tick_ms = 5\nreopen_initial_ms = 70000\n", 2),
            ("tick_ms = 5\n[data_path]\nfailures = 3\nbackoff_initial_ms = 70000\n", 4),
            // Damping's own conflicts name its header.
            ("tick_ms = 5\n[damping]\nsuppress = 7000\n", 2),
        ] {
            let (c, w) = apply(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            let e = c.validate().expect_err(text);
            assert_eq!(blame(&e, &w), Some(line), "{text}: {e}");
        }
    }

    #[test]
    fn a_choice_is_written_as_its_name() {
        let (c, w) = apply("tick_ms = 5\nrequire_address = \"roce_v2_ipv4\"\n").unwrap();
        assert_eq!(c.machine.require_address, railwatch_core::AddressRequirement::RoceV2Ipv4);
        assert_eq!(w.iter().find(|w| w.key == "require_address").map(|w| w.line), Some(2));
        let e = apply("require_address = \"ipv4\"\n").unwrap_err();
        assert_eq!(e.line, 1);
        assert!(e.to_string().starts_with("require_address: \"ipv4\" is not one of none, any, roce_v2"), "{e}");
        let e = apply("require_address = 4\n").unwrap_err();
        assert_eq!((e.line, e.to_string()), (1, "require_address: must be a name, not an integer".into()));
    }

    #[test]
    fn keys_are_shown_escaped_and_short() {
        assert_eq!(shown("tick\u{1b}[31m"), "tick\\u{1b}[31m");
        let long = shown(&"k".repeat(10_000));
        assert_eq!(long.chars().count(), MAX_SHOWN_KEY + 1);
    }

    #[test]
    fn other_keys_are_named_with_their_lines() {
        let text = "tick_ms = 1\nnmae = 'x'\n";
        let top = TopLevel::parse(text).unwrap();
        let e = unknown_key(&top, &["name"], &Lines::new(text)).expect("nmae is unknown");
        assert_eq!(e.line, 2);
        assert!(e.message.contains("name, tick_ms"), "{e}");
    }
}
