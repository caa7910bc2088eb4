//! `railwatch`: watch RDMA rails, or simulate their failure modes.
//!
//! Exit codes: 0 all expectations held (or the command succeeded), 1 an
//! expectation failed (or `watch --check` found the settings bad), 2 bad
//! input (or a command this build lacks).

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

/// `eprintln!` and `println!` that never panic: a line that cannot be
/// written (stderr or stdout closed, or on a full disk) is dropped; the
/// exit status still says what happened. Defined before the modules, so
/// every module's `eprintln!` is this one: under `watch` it goes through
/// the stderr queue (`railwatch_cli::lineout`), which never blocks.
macro_rules! eprintln {
    ($($arg:tt)*) => {{
        railwatch_cli::lineout::eprint(format_args!($($arg)*));
    }};
}
#[allow(unused_macros)] // `watch` (feature `verbs`) and `generate` print this way
macro_rules! println {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

mod ask;
mod builtin;
mod config;
#[cfg(feature = "verbs")]
mod devices;
mod generate;
#[cfg(feature = "verbs")]
use railwatch_cli::metrics;
mod output;
mod replay;
#[cfg(feature = "verbs")]
mod sdnotify;
mod simulate;
#[cfg(feature = "verbs")]
mod status;
#[cfg(feature = "verbs")]
mod watch;

/// Keep RDMA NIC ports ("rails") usable: drain async events correctly,
/// recover rails whose PORT_ACTIVE was lost, and show why a rail is down.
#[derive(Parser, Debug)]
#[command(name = "railwatch", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the real monitor against simulated devices following a scenario
    /// (the built-in default when no FILE is given).
    Simulate(SimulateArgs),
    /// List the built-in scenarios.
    Scenarios,
    /// Watch real devices and print what happens (needs the `verbs` feature).
    Watch(WatchArgs),
    /// Show every rail of every real device (needs the `verbs` feature).
    Status(StatusArgs),
    /// The rails a job may use, from the running agent (docs/STATE-API.md):
    /// exit 0 with at least one, 1 with none, 2 when the agent cannot say.
    Rails(ask::RailsArgs),
    /// A health check for schedulers (node-problem-detector, Slurm's NHC):
    /// exit 0 OK, 1 a problem, 2 unknown, with one line.
    Check(ask::CheckArgs),
    /// Replay an input log (`watch --record FILE.rwlog`) on a fresh machine
    /// and check that it asks what the log answers: exit 0 replayed, 1
    /// diverged (named), 2 the log cannot be read.
    Replay(replay::ReplayArgs),
    /// Turn an input log into a scenario (for `simulate`, and for editing:
    /// "would settle_ms = 200 have helped?"), checked against the log:
    /// exit 0 the scenario replays the log's transitions, 1 it does not
    /// (said; written all the same), 2 the log cannot be read.
    Lift(replay::LiftArgs),
    /// Write the man pages or shell completions (for packagers).
    #[command(hide = true)]
    Generate(generate::GenerateArgs),
}

#[derive(Args, Debug)]
struct SimulateArgs {
    /// A scenario file (TOML, see docs/SCENARIOS.md).
    #[arg(conflicts_with = "builtin")]
    file: Option<std::path::PathBuf>,
    /// Run a built-in scenario instead (`railwatch scenarios` lists them).
    #[arg(long, value_name = "NAME")]
    builtin: Option<String>,
    /// Print JSON lines (docs/JSON.md) instead of the timeline.
    #[arg(long)]
    json: bool,
    /// Run in real time instead of virtual time.
    #[arg(long)]
    realtime: bool,
    /// Override the scenario's recovery tick period, in milliseconds.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    tick_ms: Option<u64>,
    /// Also write the run as one self-contained HTML page: a lane per rail,
    /// its state over time, the events and the summary.
    #[arg(long, value_name = "FILE")]
    html: Option<std::path::PathBuf>,
    /// Also write the metrics a Prometheus server would have scraped during
    /// the run, sampled in virtual time, as promtool's `input_series`: a
    /// test file for `promtool test rules` (docs/METRICS.md, "Alerts and
    /// dashboards").
    #[arg(long, value_name = "FILE")]
    metrics_series: Option<std::path::PathBuf>,
    /// How often that scraper scrapes (`15s`, `500ms`, `1m`).
    #[arg(long, value_name = "INTERVAL", default_value = "15s", requires = "metrics_series",
          value_parser = railwatch_cli::metrics::series::parse_interval)]
    scrape_interval: u64,
    /// Run to this virtual time instead of the scenario's `duration_ms`
    /// (only longer: the state its last step left holds), so a short
    /// recording's aftermath reaches alerts that wait minutes (at most a
    /// week, 604800000).
    #[arg(long, value_name = "MS")]
    duration_ms: Option<u64>,
    #[command(flatten)]
    rec: RecordArgs,
}

/// `--audit-ms`: a period, or off.
#[derive(Clone, Copy, Debug)]
struct Audit(Option<u64>);

fn parse_audit(s: &str) -> Result<Audit, String> {
    match s {
        "off" => Ok(Audit(None)),
        _ => s.parse().map(|ms| Audit(Some(ms))).map_err(|_| format!("{s:?} is neither `off` nor a number of ms")),
    }
}

#[derive(Args, Debug)]
struct WatchArgs {
    /// Read the settings from this file (TOML, see docs/CONFIG.md); the
    /// flags below override it.
    #[arg(long, value_name = "FILE")]
    config: Option<std::path::PathBuf>,
    /// Check the settings, print the effective ones and exit: 0 valid,
    /// 1 not. Opens no device (works without the `verbs` feature).
    #[arg(long)]
    check: bool,
    /// Watch only this device (an include of one; default: every device).
    #[arg(long, value_name = "D")]
    device: Option<String>,
    /// Watch this device (repeatable; replaces the file's `include`).
    #[arg(long, value_name = "NAME")]
    include: Vec<String>,
    /// Do not watch this device (repeatable; replaces the file's `exclude`).
    #[arg(long, value_name = "NAME")]
    exclude: Vec<String>,
    /// Print JSON lines instead of the timeline.
    #[arg(long)]
    json: bool,
    /// With no RDMA device at start, exit (0, "no RDMA devices found")
    /// instead of waiting for one to appear.
    #[arg(long)]
    exit_without_devices: bool,
    /// Stop after this many milliseconds (default: run until interrupted;
    /// 0 to 31536000000, a year).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(0..=MAX_FOR_MS))]
    for_ms: Option<u64>,
    /// Recovery tick period in milliseconds (default 1000; 1 ms to one
    /// week, checked with the other settings).
    #[arg(long, value_name = "N")]
    tick_ms: Option<u64>,
    /// Re-read the port state of every active rail this often, in
    /// milliseconds, or `off` (default 1000).
    #[arg(long, value_name = "MS|off", value_parser = parse_audit)]
    audit_ms: Option<Audit>,
    /// After a port reads ACTIVE, wait this long and re-check before
    /// activating its rail, in milliseconds (default 0).
    #[arg(long, value_name = "MS")]
    settle_ms: Option<u64>,
    /// Most events read from one device per wake-up (default 256).
    #[arg(long, value_name = "N")]
    drain_budget: Option<usize>,
    /// Turn flap damping on (the file's `[damping]` keys, or the defaults).
    #[arg(long, conflicts_with = "no_damping")]
    damping: bool,
    /// Turn flap damping off, whatever the file says.
    #[arg(long)]
    no_damping: bool,
    /// Flap damping's penalty half-life in milliseconds (turns damping on).
    #[arg(long, value_name = "MS", conflicts_with = "no_damping")]
    damping_half_life_ms: Option<u64>,
    /// Serve metrics at http://ADDR:PORT/metrics (an IP address and a
    /// non-zero port; default: not served). See docs/METRICS.md.
    #[arg(long, value_name = "ADDR:PORT")]
    metrics_listen: Option<std::net::SocketAddr>,
    /// Write the metrics to this file for node_exporter's textfile
    /// collector, at most once a second and at exit (default: none).
    #[arg(long, value_name = "PATH")]
    textfile: Option<std::path::PathBuf>,
    /// Serve the rails' state read-only at GET /v1/state on this Unix
    /// socket (docs/STATE-API.md; the systemd unit uses
    /// /run/railwatch/state.sock). Also served on --metrics-listen.
    #[arg(long, value_name = "PATH")]
    state_socket: Option<std::path::PathBuf>,
    /// The state socket's mode, in octal (default 0660: owner and group).
    #[arg(long, value_name = "MODE", value_parser = parse_mode)]
    state_socket_mode: Option<u32>,
    /// The state socket's group, a name or a number (default: the
    /// agent's own).
    #[arg(long, value_name = "GROUP")]
    state_socket_group: Option<String>,
    #[command(flatten)]
    rec: RecordArgs,
}

/// A file mode in octal (`0660`, `660`), at most 0777.
fn parse_mode(text: &str) -> Result<u32, String> {
    u32::from_str_radix(text, 8)
        .ok()
        .filter(|&m| m <= 0o777)
        .ok_or_else(|| format!("{text:?} is not a file mode in octal (0000 to 0777)"))
}

/// `--record FILE` and `--record-anonymize`, alike for `simulate` and
/// `watch` (docs/RECORDING.md).
/// The longest `watch --for-ms`: a year (a deadline past what a clock can
/// hold would end the process).
const MAX_FOR_MS: u64 = 365 * 24 * 3600 * 1000;

#[derive(Args, Debug)]
struct RecordArgs {
    /// Record what the devices say as a scenario file that `railwatch
    /// simulate FILE` replays (written as the run goes, at least once a
    /// second, so a cut-off file still replays). It names the devices; see
    /// --record-anonymize. A FILE ending in `.rwlog` records the machine's
    /// inputs instead, which `railwatch replay FILE` replays exactly.
    #[arg(long, value_name = "FILE")]
    record: Option<std::path::PathBuf>,
    /// Name the devices in the recording dev0, dev1, ... and replace their
    /// addresses by placeholders that keep which ones are equal.
    #[arg(long, requires = "record")]
    record_anonymize: bool,
}

#[derive(Args, Debug)]
struct StatusArgs {
    /// Print one JSON object per rail instead of a table.
    #[arg(long)]
    json: bool,
}

/// Colour only on a terminal, and never with `NO_COLOR` set.
fn use_color() -> bool {
    io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// The syslog priority journald reads from a `<N>` line prefix: 3 error,
/// 4 warning, 6 info, 7 debug (and trace).
fn syslog_priority(level: log::Level) -> u8 {
    match level {
        log::Level::Error => 3,
        log::Level::Warn => 4,
        log::Level::Info => 6,
        log::Level::Debug | log::Level::Trace => 7,
    }
}

/// Logs go to stderr. Under systemd (`JOURNAL_STREAM` set: stderr is the
/// journal) each line starts with its syslog priority, `<3>` to `<7>`, so
/// journald keeps the levels, and carries no timestamp (journald adds one).
fn init_logging() {
    let mut builder = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"));
    if std::env::var_os("JOURNAL_STREAM").is_some_and(|v| !v.is_empty()) {
        builder.format(|buf, record| {
            writeln!(
                buf,
                "<{}>{} {}: {}",
                syslog_priority(record.level()),
                record.level(),
                record.target(),
                record.args()
            )
        });
    } else {
        builder.format_timestamp_millis();
    }
    // Through `lineout` (direct until `watch` installs its queue).
    builder.target(env_logger::Target::Pipe(Box::new(railwatch_cli::lineout::LogPipe)));
    builder.init();
}

fn main() -> ExitCode {
    // A file-size limit makes a write fail (EFBIG), not end the process.
    railwatch_cli::outfile::ignore_file_size_signal();
    init_logging();
    let cli = match parse_args() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    match cli.command {
        Command::Simulate(args) => simulate::run(args),
        Command::Scenarios => scenarios(),
        Command::Watch(args) => watch(args),
        Command::Status(args) => status(args),
        Command::Rails(args) => ask::rails(&args),
        Command::Check(args) => ask::check(&args),
        Command::Replay(args) => replay::run(args),
        Command::Lift(args) => replay::lift(args),
        Command::Generate(args) => generate::run(<Cli as clap::CommandFactory>::command(), &args),
    }
}

/// The command line, or clap's error printed with each line bounded and
/// escaped as every other error line is (a 100 KB flag value is not echoed
/// whole, no control character reaches the terminal); help and version
/// print as clap prints them.
fn parse_args() -> Result<Cli, ExitCode> {
    use clap::error::ErrorKind;
    match Cli::try_parse() {
        Ok(cli) => Ok(cli),
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) =>
        {
            e.exit()
        }
        Err(e) => {
            for line in shortened_args(e.render().to_string()).lines() {
                eprintln!("{}", railwatch_core::error_line(line));
            }
            Err(ExitCode::from(2))
        }
    }
}

/// `text` with every long argument of the command line in it cut to its
/// head and its length, so the line still names the flag it was given to.
fn shortened_args(mut text: String) -> String {
    let most = railwatch_core::MAX_SHOWN_NAME_CHARS;
    for arg in std::env::args_os().skip(1) {
        let arg = arg.to_string_lossy();
        if arg.chars().count() > most {
            let head: String = arg.chars().take(most).collect();
            text = text.replace(&*arg, &format!("{head}… ({} bytes)", arg.len()));
        }
    }
    text
}

fn scenarios() -> ExitCode {
    let mut out = io::stdout().lock();
    for b in builtin::BUILTINS {
        let description = match railwatch_scenario::scenario::Scenario::parse(b.text, b.name) {
            Ok(s) => s.description.unwrap_or_default(),
            Err(e) => format!("(does not parse: {e})"),
        };
        let marker = if b.name == builtin::DEFAULT { " (default)" } else { "" };
        if writeln!(out, "{:<26} {description}{marker}", b.name).is_err() {
            return ExitCode::from(2);
        }
    }
    ExitCode::SUCCESS
}

#[cfg(not(feature = "verbs"))]
fn no_verbs(command: &str) -> ExitCode {
    eprintln!(
        "railwatch: `{command}` needs real RDMA devices, but this build has no verbs support. \
         Rebuild with `cargo build -p railwatch --features verbs` (system packages: `cargo xtask deps`)."
    );
    ExitCode::from(2)
}

/// `railwatch watch`: the settings are resolved and checked first, in
/// every build, so `--check` needs no libibverbs.
fn watch(args: WatchArgs) -> ExitCode {
    let settings = match config::resolve(&args) {
        Ok(s) => s,
        Err(e) => return config::refuse(&e, &args),
    };
    if let Err(e) = config::distinct_files(&args, &settings) {
        return config::refuse(&e, &args);
    }
    if args.check {
        return config::print_check(&settings, args.json);
    }
    run_watch(args, settings)
}

#[cfg(not(feature = "verbs"))]
fn run_watch(_args: WatchArgs, _settings: config::Settings) -> ExitCode {
    no_verbs("watch")
}

#[cfg(not(feature = "verbs"))]
fn status(_args: StatusArgs) -> ExitCode {
    no_verbs("status")
}

#[cfg(feature = "verbs")]
fn run_watch(args: WatchArgs, settings: config::Settings) -> ExitCode {
    // From here on, stderr (the log, the error lines) never blocks either.
    railwatch_cli::lineout::install_stderr();
    let code = watch::run(args, settings);
    railwatch_cli::lineout::finish_stderr(std::time::Duration::from_millis(300));
    code
}

#[cfg(feature = "verbs")]
fn status(args: StatusArgs) -> ExitCode {
    status::run(args)
}
