//! `railwatch watch`'s settings: the config file (`--config FILE`, TOML,
//! docs/CONFIG.md), the flags that override it, and `--check`.
//!
//! Everything is refused before anything starts: the file alone first (so a
//! bad file is an error even when a flag overrides the bad key), then the
//! file with the flags. Each error names where the bad value came from: the
//! file and line (`railwatch.toml:3: tick_ms: must be at least 1 ms`), the
//! flag (`--damping-half-life-ms: damping.half_life_ms: …`), or neither
//! when a default is what conflicts. The file is read only if it is a
//! regular file of at most [`MAX_FILE_BYTES`](toml_input::MAX_FILE_BYTES), so nothing a user writes can
//! hang the read or fill memory.
//!
//! This module needs no libibverbs: `--check` works in every build.

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use railwatch_runtime::{Config, ConfigError, DampingConfig, Setting, SettingKind, SettingValue};
use railwatch_scenario::toml_input::{self, Lines, TopLevel, article};
use serde::Deserialize;
use serde_json::{Value as Json, json};
use toml::{Spanned, Value};

use crate::WatchArgs;

/// Most names in `include` or `exclude`.
pub const MAX_NAMES: usize = 4096;

// ---- the settings --------------------------------------------------------

/// Where a setting's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Origin {
    /// Not written anywhere.
    Default,
    /// The config file, at this 1-based line.
    File(usize),
    /// A command-line flag.
    Flag(&'static str),
}

/// The `[metrics]` table, with `--metrics-listen` and `--textfile` over it
/// (docs/METRICS.md).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metrics {
    /// `metrics.listen` (`--metrics-listen`): where `/metrics` is served.
    pub listen: Option<SocketAddr>,
    /// `metrics.textfile` (`--textfile`): where the metrics text file for
    /// node_exporter's textfile collector is written.
    pub textfile: Option<PathBuf>,
    /// Whether the file has a `[metrics]` table at all.
    pub present: bool,
}

/// Which devices `watch` follows: a device is watched when it is included
/// (or there is no include list) and not excluded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceFilter {
    /// `include` (with `--include` and `--device`): `None` means every device.
    pub include: Option<Vec<String>>,
    /// `exclude` (or `--exclude`).
    pub exclude: Vec<String>,
}

impl DeviceFilter {
    /// Whether the device called `name` is watched.
    #[cfg_attr(not(feature = "verbs"), allow(dead_code))]
    pub fn watches(&self, name: &str) -> bool {
        self.include.as_ref().is_none_or(|names| names.iter().any(|n| n == name))
            && !self.exclude.iter().any(|n| n == name)
    }
}

/// `watch`'s effective settings: the monitor's [`Config`], the devices to
/// watch, and where metrics go, each with where it came from.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The monitor's settings (validated).
    pub config: Config,
    /// Which devices are watched.
    pub devices: DeviceFilter,
    /// Where metrics are served and written.
    pub metrics: Metrics,
    /// The state socket (`--state-socket`), if asked for.
    pub state_socket: Option<railwatch_cli::state::SocketSettings>,
    /// The config file as named on the command line, if one was given.
    pub file: Option<String>,
    /// Every key not at its default, with where it was set.
    origins: BTreeMap<&'static str, Origin>,
}

/// A setting refused: where it came from, which key, and why. Displays on
/// one line as `file:line: key: problem`, `--flag: key: problem`,
/// `file: problem` or `key: problem`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingsError {
    /// The config file, when the problem is in it.
    pub file: Option<String>,
    /// The 1-based line in the file, when there is one.
    pub line: Option<usize>,
    /// The flag that set the bad value, when a flag did.
    pub flag: Option<&'static str>,
    /// The key (`tick_ms`, `damping.half_life_ms`), when one is to blame.
    pub key: Option<String>,
    /// The problem, on one line.
    pub message: String,
}

impl SettingsError {
    fn in_file(file: &str, line: Option<usize>, key: Option<String>, message: impl Into<String>) -> SettingsError {
        // One line, always: fold whatever the TOML parser wrapped.
        let message = message.into().lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(": ");
        // Whatever of the file it repeats: escaped and bounded.
        let message = railwatch_core::error_line(&message);
        SettingsError { file: Some(file.to_owned()), line, flag: None, key, message }
    }

    fn of_flag(flag: &'static str, key: Option<&str>, message: impl Into<String>) -> SettingsError {
        let message = railwatch_core::error_line(&message.into());
        SettingsError { file: None, line: None, flag: Some(flag), key: key.map(str::to_owned), message }
    }

    fn json(&self) -> Json {
        json!({"kind": "config_error", "valid": false, "file": self.file, "line": self.line, "flag": self.flag,
            "key": self.key, "message": self.message, "error": self.to_string()})
    }
}

impl fmt::Display for SettingsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.file, self.line, self.flag) {
            (Some(file), Some(line), _) => write!(f, "{file}:{line}: ")?,
            (Some(file), None, _) => write!(f, "{file}: ")?,
            (None, _, Some(flag)) => write!(f, "{flag}: ")?,
            (None, _, None) => {}
        }
        match &self.key {
            Some(key) => write!(f, "{key}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for SettingsError {}

type Res<T> = Result<T, SettingsError>;

impl Settings {
    /// The defaults, with no file.
    fn defaults() -> Settings {
        let mut config = Config::default();
        // The agent audits; the library's default is off (zero idle wake-ups).
        config.machine.audit_ms = Some(railwatch_core::AGENT_AUDIT_MS);
        Settings {
            config,
            devices: DeviceFilter::default(),
            metrics: Metrics::default(),
            state_socket: None,
            file: None,
            origins: BTreeMap::new(),
        }
    }

    /// Where `key` was set.
    fn origin(&self, key: &str) -> Origin {
        self.origins.get(key).cloned().unwrap_or(Origin::Default)
    }

    /// Checks the monitor's settings and the device lists, naming where the
    /// bad value came from.
    fn validate(&self) -> Res<()> {
        if let Err(ConfigError { key, problem }) = self.config.validate_for_monitor() {
            return Err(self.blame(key, problem.to_string()));
        }
        // A name both included and excluded is excluded (so a flag can take
        // one device out of a file's include), but not every one of them.
        if let Some(include) = &self.devices.include {
            if include.iter().all(|n| self.devices.exclude.contains(n)) {
                return Err(self.blame("exclude", "excludes every included device, so nothing would be watched".into()));
            }
        }
        Ok(())
    }

    /// An error for `key`, located where it was set, or failing that where
    /// the setting it conflicts with was set.
    fn blame(&self, key: &str, message: String) -> SettingsError {
        let mut origin = self.origin(key);
        if origin == Origin::Default {
            // A default refused: point at what made it wrong.
            let related = toml_input::related_keys(key);
            if let Some(o) = related.iter().map(|k| self.origin(k)).find(|o| *o != Origin::Default) {
                origin = o;
            }
        }
        let key = Some(key.to_owned());
        match origin {
            Origin::File(line) => {
                SettingsError::in_file(self.file.as_deref().unwrap_or("config"), Some(line), key, message)
            }
            Origin::Flag(flag) => SettingsError { file: None, line: None, flag: Some(flag), key, message },
            Origin::Default => match &self.file {
                Some(file) => SettingsError::in_file(file, None, key, message),
                None => SettingsError { file: None, line: None, flag: None, key, message },
            },
        }
    }

    /// Overrides the file with the flags given.
    fn apply_flags(&mut self, args: &WatchArgs) -> Res<()> {
        let c = &mut self.config;
        let set = |origins: &mut BTreeMap<_, _>, key: &'static str, flag: &'static str| {
            origins.insert(key, Origin::Flag(flag));
        };
        if let Some(v) = args.tick_ms {
            c.machine.tick_ms = v;
            set(&mut self.origins, "tick_ms", "--tick-ms");
        }
        if let Some(v) = args.audit_ms {
            c.machine.audit_ms = v.0;
            set(&mut self.origins, "audit_ms", "--audit-ms");
        }
        if let Some(v) = args.settle_ms {
            c.machine.settle_ms = v;
            set(&mut self.origins, "settle_ms", "--settle-ms");
        }
        if let Some(v) = args.drain_budget {
            c.drain_budget = v;
            set(&mut self.origins, "drain_budget", "--drain-budget");
        }
        if args.no_damping {
            c.machine.damping = None;
            set(&mut self.origins, "damping", "--no-damping");
            self.origins.retain(|key, _| !key.starts_with("damping."));
        }
        if args.damping && c.machine.damping.is_none() {
            c.machine.damping = Some(DampingConfig::default());
            set(&mut self.origins, "damping", "--damping");
        }
        if let Some(v) = args.damping_half_life_ms {
            if c.machine.damping.is_none() {
                set(&mut self.origins, "damping", "--damping-half-life-ms");
            }
            c.machine.damping.get_or_insert_with(DampingConfig::default).half_life_ms = v;
            set(&mut self.origins, "damping.half_life_ms", "--damping-half-life-ms");
        }
        if args.device.is_some() || !args.include.is_empty() {
            let mut names = Vec::new();
            for name in &args.include {
                check_name(name).map_err(|e| SettingsError::of_flag("--include", Some("include"), e))?;
                names.push(name.clone());
            }
            // `--device` is an include of one (its own check, that the
            // device exists, comes when the devices are listed).
            names.extend(args.device.iter().cloned());
            names.dedup();
            let flag = if args.include.is_empty() { "--device" } else { "--include" };
            self.devices.include = Some(names);
            set(&mut self.origins, "include", flag);
        }
        if !args.exclude.is_empty() {
            for name in &args.exclude {
                check_name(name).map_err(|e| SettingsError::of_flag("--exclude", Some("exclude"), e))?;
            }
            self.devices.exclude = args.exclude.clone();
            set(&mut self.origins, "exclude", "--exclude");
        }
        if let Some(addr) = args.metrics_listen {
            check_listen(&addr).map_err(|e| SettingsError::of_flag("--metrics-listen", Some("metrics.listen"), e))?;
            self.metrics.listen = Some(addr);
            set(&mut self.origins, "metrics.listen", "--metrics-listen");
        }
        if let Some(path) = &args.textfile {
            let text = path.to_str().ok_or_else(|| {
                SettingsError::of_flag("--textfile", Some("metrics.textfile"), "must be a UTF-8 path")
            })?;
            check_textfile(text).map_err(|e| SettingsError::of_flag("--textfile", Some("metrics.textfile"), e))?;
            self.metrics.textfile = Some(path.clone());
            set(&mut self.origins, "metrics.textfile", "--textfile");
        }
        self.apply_state_flags(args)
    }

    /// `--state-socket` and its mode and group.
    fn apply_state_flags(&mut self, args: &WatchArgs) -> Res<()> {
        use railwatch_cli::state::{DEFAULT_SOCKET_MODE, SocketSettings, check_socket_path};
        let Some(path) = &args.state_socket else {
            if args.state_socket_mode.is_some() || args.state_socket_group.is_some() {
                return Err(SettingsError::of_flag("--state-socket-mode", None, "needs --state-socket"));
            }
            return Ok(());
        };
        check_socket_path(path).map_err(|e| SettingsError::of_flag("--state-socket", None, e))?;
        if let Some(group) = &args.state_socket_group {
            railwatch_cli::state::group_id(group)
                .map_err(|e| SettingsError::of_flag("--state-socket-group", None, e.to_string()))?;
        }
        self.state_socket = Some(SocketSettings {
            path: path.clone(),
            mode: args.state_socket_mode.unwrap_or(DEFAULT_SOCKET_MODE),
            group: args.state_socket_group.clone(),
        });
        Ok(())
    }
}

/// The files `watch` reads and writes are distinct: neither the recording
/// (nor where an earlier one is kept, `FILE.old`) nor the metrics text
/// file may replace the config file, nor each other.
/// The error names both roles and the path.
pub fn distinct_files(args: &WatchArgs, settings: &Settings) -> Result<(), SettingsError> {
    let kept = args.rec.record.as_deref().map(railwatch_cli::record::kept_as);
    let files = [
        ("--config", args.config.as_deref()),
        ("--record", args.rec.record.as_deref()),
        ("the earlier recording's FILE.old", kept.as_deref()),
        ("metrics.textfile", settings.metrics.textfile.as_deref()),
    ];
    railwatch_cli::outfile::distinct(&files).map_err(|message| SettingsError {
        file: None,
        line: None,
        flag: None,
        key: None,
        message,
    })
}

/// The settings for `watch`: the file (if `--config`), checked alone, then
/// overridden by the flags and checked again.
pub fn resolve(args: &WatchArgs) -> Res<Settings> {
    let mut settings = match &args.config {
        Some(path) => load(path)?,
        None => Settings::defaults(),
    };
    settings.validate()?;
    settings.apply_flags(args)?;
    settings.validate()?;
    Ok(settings)
}

// ---- reading the file ----------------------------------------------------

/// Reads and parses a config file: a regular file of at most
/// [`MAX_FILE_BYTES`](toml_input::MAX_FILE_BYTES), UTF-8 text without NUL bytes.
pub fn load(path: &Path) -> Res<Settings> {
    let shown = path.display().to_string();
    let text =
        toml_input::read_text(path, "a config file").map_err(|msg| SettingsError::in_file(&shown, None, None, msg))?;
    parse(&text, &shown)
}

/// The config file's own top-level keys; the monitor's settings
/// (`tick_ms`, `[damping]`, …) are read by the shared loader, as in a
/// scenario file.
const OWN_KEYS: [&str; 3] = ["include", "exclude", "metrics"];

#[derive(Deserialize)]
#[serde(expecting = "a table of railwatch settings")]
struct RawFile {
    include: Option<Spanned<Value>>,
    exclude: Option<Spanned<Value>>,
    metrics: Option<RawMetrics>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "the [metrics] table")]
struct RawMetrics {
    listen: Option<Spanned<Value>>,
    textfile: Option<Spanned<Value>>,
}

struct Ctx<'a> {
    file: &'a str,
    text: &'a str,
    lines: Lines,
}

impl Ctx<'_> {
    fn line(&self, offset: usize) -> usize {
        self.lines.line(offset)
    }

    fn err(&self, span: Range<usize>, key: &str, message: impl Into<String>) -> SettingsError {
        SettingsError::in_file(self.file, Some(self.line(span.start)), Some(key.to_owned()), message)
    }

    /// A list of device names.
    fn names(&self, key: &str, v: &Spanned<Value>) -> Res<Vec<String>> {
        let Value::Array(items) = v.get_ref() else {
            return Err(self.err(
                v.span(),
                key,
                format!("must be a list of device names, like [\"mlx5_0\"], not {}", article(v.get_ref())),
            ));
        };
        if items.len() > MAX_NAMES {
            return Err(self.err(v.span(), key, format!("{} names; at most {MAX_NAMES}", items.len())));
        }
        let mut names: Vec<String> = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let Value::String(name) = item else {
                return Err(self.err(
                    v.span(),
                    key,
                    format!("item {} must be a device name (a string), not {}", i + 1, article(item)),
                ));
            };
            check_name(name).map_err(|e| self.err(v.span(), key, e))?;
            if names.contains(name) {
                return Err(self.err(v.span(), key, format!("{} is listed twice", railwatch_core::shown_name(name))));
            }
            names.push(name.clone());
        }
        Ok(names)
    }
}

/// A device name as the kernel allows it (core's one rule).
fn check_name(name: &str) -> Result<(), String> {
    match railwatch_core::device_name_problem(name) {
        Some(why) => Err(format!("invalid device name {}: {why}", railwatch_core::shown_name(name))),
        None => Ok(()),
    }
}

/// The key a TOML error is about, found from the text: the key written on
/// the error's line (or the `[table]` it opens), under the table it is in.
fn key_at(text: &str, line: usize, unknown: Option<&str>) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let here = lines.get(line.checked_sub(1)?)?.trim();
    let header = |l: &str| -> Option<String> {
        let l = l.split('#').next()?.trim();
        let inner = l.strip_prefix('[')?.strip_suffix(']')?;
        let inner = inner.trim();
        (!inner.starts_with('[') && !inner.is_empty()).then(|| inner.to_owned())
    };
    if let Some(table) = header(here) {
        return Some(table);
    }
    let table = lines[..line - 1].iter().rev().find_map(|l| header(l.trim()));
    let written = here
        .split_once('=')
        .map(|(k, _)| k.trim())
        .filter(|k| !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')));
    let key = match (unknown, written) {
        (Some(u), Some(w)) if w.ends_with(u) => w.to_owned(),
        (Some(u), _) => u.to_owned(),
        (None, Some(w)) => w.to_owned(),
        (None, None) => return None,
    };
    Some(match table {
        Some(t) => format!("{t}.{key}"),
        None => key,
    })
}

/// A TOML error, on one line, with its line and the key it is about.
fn toml_error(cx: &Ctx<'_>, e: &toml::de::Error) -> SettingsError {
    let line = e.span().map_or(1, |s| cx.line(s.start));
    let message = e.message();
    if let Some(rest) = message.strip_prefix("unknown field `") {
        if let Some((field, expected)) = rest.split_once('`') {
            let key = key_at(cx.text, line, Some(field)).unwrap_or_else(|| field.to_owned());
            let expected = expected.trim_start_matches(',').trim();
            let expected = expected.strip_prefix("expected one of ").or_else(|| expected.strip_prefix("expected "));
            let message = match expected {
                Some(known) => format!("unknown key (known here: {known})"),
                None => "unknown key".to_owned(),
            };
            return SettingsError::in_file(cx.file, Some(line), Some(key), message);
        }
    }
    SettingsError::in_file(cx.file, Some(line), key_at(cx.text, line, None), message)
}

/// Parses and checks config text; `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Res<Settings> {
    let cx = Ctx { file, text, lines: Lines::new(text) };
    let top = TopLevel::parse(text).map_err(|e| toml_error(&cx, &e))?;
    if let Some(e) = toml_input::unknown_key(&top, &OWN_KEYS, &cx.lines) {
        return Err(SettingsError::in_file(file, Some(e.line), e.key, e.message));
    }
    let raw: RawFile = toml::from_str(text).map_err(|e| toml_error(&cx, &e))?;
    let mut s = Settings::defaults();
    s.file = Some(file.to_owned());
    let written = top
        .apply(text, &cx.lines, &mut s.config)
        .map_err(|e| SettingsError::in_file(file, Some(e.line), e.key, e.message))?;
    for w in written {
        s.origins.insert(w.key, Origin::File(w.line));
    }
    let mut at = |key: &'static str, span: Range<usize>| {
        s.origins.insert(key, Origin::File(cx.line(span.start)));
    };

    if let Some(v) = &raw.include {
        let names = cx.names("include", v)?;
        if names.is_empty() {
            return Err(cx.err(
                v.span(),
                "include",
                "is empty, so nothing would be watched (leave it out to watch every device)",
            ));
        }
        s.devices.include = Some(names);
        at("include", v.span());
    }
    if let Some(v) = &raw.exclude {
        s.devices.exclude = cx.names("exclude", v)?;
        at("exclude", v.span());
    }
    if let Some(m) = &raw.metrics {
        s.metrics.present = true;
        if let Some(v) = &m.listen {
            s.metrics.listen = Some(listen_addr(&cx, v)?);
            at("metrics.listen", v.span());
        }
        if let Some(v) = &m.textfile {
            s.metrics.textfile = Some(textfile_path(&cx, v)?);
            at("metrics.textfile", v.span());
        }
    }
    Ok(s)
}

fn listen_addr(cx: &Ctx<'_>, v: &Spanned<Value>) -> Res<SocketAddr> {
    const KEY: &str = "metrics.listen";
    let Value::String(text) = v.get_ref() else {
        return Err(cx.err(v.span(), KEY, format!("must be a string \"ADDR:PORT\", not {}", article(v.get_ref()))));
    };
    let addr: SocketAddr = text.parse().map_err(|_| {
        cx.err(
            v.span(),
            KEY,
            format!("{text:?} is not an ADDR:PORT socket address (an IP address and a port, like \"127.0.0.1:9464\" or \"[::1]:9464\")"),
        )
    })?;
    check_listen(&addr).map_err(|e| cx.err(v.span(), KEY, format!("{text:?}: {e}")))?;
    Ok(addr)
}

/// A metrics address: any IP, a port that is not 0 (no port is chosen for
/// the user).
fn check_listen(addr: &SocketAddr) -> Result<(), String> {
    if addr.port() == 0 {
        return Err("the port must not be 0".to_owned());
    }
    Ok(())
}

/// A metrics text file's path: not empty, no NUL, not a directory.
fn check_textfile(text: &str) -> Result<(), String> {
    if text.is_empty() {
        return Err("must not be empty".to_owned());
    }
    if text.contains('\0') {
        return Err("must not contain a NUL character".to_owned());
    }
    if text.ends_with('/') {
        return Err(format!("{text:?} names a directory; give the file to write"));
    }
    Ok(())
}

fn textfile_path(cx: &Ctx<'_>, v: &Spanned<Value>) -> Res<PathBuf> {
    const KEY: &str = "metrics.textfile";
    let Value::String(text) = v.get_ref() else {
        return Err(cx.err(v.span(), KEY, format!("must be a path (a string), not {}", article(v.get_ref()))));
    };
    check_textfile(text).map_err(|e| cx.err(v.span(), KEY, e))?;
    Ok(PathBuf::from(text))
}

// ---- reloading -------------------------------------------------------------

/// The keys a running `watch` applies on SIGHUP; every other key needs a
/// restart (docs/CONFIG.md, "Reloading").
#[cfg_attr(not(feature = "verbs"), allow(dead_code))]
pub const RELOADABLE: [&str; 3] = ["include", "exclude", "metrics.textfile"];

/// The keys whose effective value differs between `old` and `new`, in the
/// order `--check` prints them.
#[cfg_attr(not(feature = "verbs"), allow(dead_code))]
pub fn changed_keys(old: &Settings, new: &Settings) -> Vec<&'static str> {
    let old_rows: BTreeMap<&'static str, Json> = effective(old).into_iter().collect();
    let new_rows = effective(new);
    let mut changed: Vec<&'static str> = Vec::new();
    for (key, value) in &new_rows {
        if old_rows.get(key) != Some(value) {
            changed.push(key);
        }
    }
    for key in old_rows.keys() {
        if !new_rows.iter().any(|(k, _)| k == key) {
            changed.push(key);
        }
    }
    changed
}

// ---- telling the user ----------------------------------------------------

/// Reports a refused setting: on stderr, and for `--check --json` as a
/// JSON line too. Exit 1 for `--check`, 2 (bad input) otherwise.
pub fn refuse(e: &SettingsError, args: &WatchArgs) -> ExitCode {
    eprintln!("railwatch: {e}");
    if args.check && args.json {
        let _ = writeln!(io::stdout(), "{}", e.json());
    }
    if args.check { ExitCode::from(1) } else { ExitCode::from(2) }
}

fn origin_text(settings: &Settings, key: &str) -> String {
    match settings.origin(key) {
        Origin::Default => "default".to_owned(),
        Origin::File(line) => format!("{}:{line}", settings.file.as_deref().unwrap_or("config")),
        Origin::Flag(flag) => flag.to_owned(),
    }
}

/// Every setting in order, as (key, JSON value): the monitor's (in the
/// order of their definition; a section's keys only while it is on), then
/// the devices and metrics.
fn effective(settings: &Settings) -> Vec<(&'static str, Json)> {
    let c = &settings.config;
    let mut rows: Vec<(&'static str, Json)> =
        Config::settings().filter_map(|spec| Some((spec.key, setting_json(spec, c.get(spec.key)?)))).collect();
    let m = &settings.metrics;
    rows.extend([
        ("include", json!(settings.devices.include)),
        ("exclude", json!(settings.devices.exclude)),
        ("metrics.listen", json!(m.listen.map(|a| a.to_string()))),
        ("metrics.textfile", json!(m.textfile.as_ref().map(|p| p.display().to_string()))),
    ]);
    rows
}

/// A setting's value as JSON: a number, `null` for a period that is off,
/// a boolean for a section.
fn setting_json(spec: &Setting, v: SettingValue) -> Json {
    match v {
        SettingValue::Integer(i) => json!(i),
        SettingValue::Float(x) => json!(x),
        SettingValue::Bool(false) if matches!(spec.kind, SettingKind::OptionalMillis { .. }) => Json::Null,
        SettingValue::Bool(b) => json!(b),
        SettingValue::Choice(name) => json!(name),
        SettingValue::Table | SettingValue::Other(_) => Json::Null,
    }
}

/// The rows as one object, a table's keys (`damping.reuse`,
/// `metrics.listen`) nested under it: a section that is off is `null`.
fn nested(rows: &[(&'static str, Json)]) -> Json {
    let mut values = serde_json::Map::new();
    for (key, value) in rows {
        match key.split_once('.') {
            Some((table, sub)) => {
                let entry = values.entry(table.to_owned()).or_insert_with(|| Json::Object(Default::default()));
                if let Json::Object(m) = entry {
                    m.insert(sub.to_owned(), value.clone());
                }
            }
            None if Config::setting(key).is_some_and(|s| s.kind == SettingKind::Section) => {
                let on = value == &Json::Bool(true);
                let entry = values.entry((*key).to_owned()).or_insert_with(|| Json::Object(Default::default()));
                if !on {
                    *entry = Json::Null;
                }
            }
            None => {
                values.insert((*key).to_owned(), value.clone());
            }
        }
    }
    Json::Object(values)
}

/// `--check`: prints the effective settings (a table, or one JSON object)
/// and where each came from.
pub fn print_check(settings: &Settings, json_out: bool) -> ExitCode {
    let rows = effective(settings);
    let mut out = io::stdout().lock();
    let written = if json_out {
        let line = json!({"kind": "config", "valid": true, "file": settings.file,
            "settings": nested(&rows), "from": rows.iter().map(|(k, _)| ((*k).to_owned(), json!(origin_text(settings, k)))).collect::<serde_json::Map<_, _>>(),
            "metrics_served": settings.metrics.listen.is_some() || settings.metrics.textfile.is_some()});
        writeln!(out, "{line}")
    } else {
        write_human(&mut out, settings, &rows)
    };
    match written.and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("railwatch: writing output failed: {e}");
            ExitCode::from(2)
        }
    }
}

fn write_human(out: &mut impl Write, settings: &Settings, rows: &[(&'static str, Json)]) -> io::Result<()> {
    match &settings.file {
        Some(file) => writeln!(out, "{file}: valid; effective settings:")?,
        None => writeln!(out, "no config file; effective settings (flags and defaults):")?,
    }
    for (key, value) in rows {
        let shown = match (*key, value) {
            ("audit_ms", Json::Null) => "off".to_owned(),
            ("damping", Json::Bool(on)) => (if *on { "on" } else { "off" }).to_owned(),
            ("include", Json::Null) => "every device".to_owned(),
            ("exclude", Json::Array(a)) if a.is_empty() => "none".to_owned(),
            (_, Json::Array(a)) => a.iter().filter_map(Json::as_str).collect::<Vec<_>>().join(", "),
            (_, Json::Null) => "-".to_owned(),
            (_, Json::String(s)) => s.clone(),
            (_, v) => v.to_string(),
        };
        writeln!(out, "  {key:<26} {shown:<24} {}", origin_text(settings, key))?;
    }
    Ok(())
}
