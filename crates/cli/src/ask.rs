//! `railwatch rails` and `railwatch check`: the running agent's answer
//! (docs/STATE-API.md) for a job script, a launcher or a scheduler, in one
//! line each.
//!
//! Exit codes, both: 0 yes (a usable rail; healthy), 1 no (none usable;
//! a problem), 2 unknown (the agent cannot be reached, or is not warm: a
//! restarted node is never reported healthy before it has looked).

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use railwatch_cli::state_client::{DEFAULT_SOCKET, ask_warm, usable_rails};
use railwatch_runtime::state::{RailReply, StateReply};

use crate::output::write_failed;

/// How long the agent has to answer.
const PATIENCE: Duration = Duration::from_secs(5);

/// The longest line `check` prints (node-problem-detector's message).
const CHECK_LINE_MAX: usize = 80;

/// How `rails` prints the usable rails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RailsFormat {
    /// One `device:port` per line.
    Plain,
    /// One JSON object: `warm`, `usable` (each rail's name, device, port
    /// and health).
    Json,
}

/// `railwatch rails`.
#[derive(clap::Args, Debug)]
pub struct RailsArgs {
    /// The agent's state socket.
    #[arg(long, value_name = "PATH", default_value = DEFAULT_SOCKET)]
    socket: PathBuf,
    /// How to print them.
    #[arg(long, value_enum, default_value = "plain")]
    format: RailsFormat,
    /// Print `NCCL_IB_HCA==mlx5_0:1,...` (NCCL's exact-match form).
    #[arg(long, conflicts_with_all = ["ucx", "format"])]
    nccl: bool,
    /// Print `UCX_NET_DEVICES=mlx5_0:1,...`.
    #[arg(long, conflicts_with = "format")]
    ucx: bool,
    /// No agent: read the devices here (a port is usable when it reads
    /// ACTIVE; nothing of damping, the breaker or addresses), and say so
    /// on stderr. Needs the `verbs` feature.
    #[arg(long)]
    direct: bool,
}

/// `railwatch check`.
#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    /// The agent's state socket.
    #[arg(long, value_name = "PATH", default_value = DEFAULT_SOCKET)]
    socket: PathBuf,
    /// node-problem-detector's custom plugin protocol: exit 0 OK, 1
    /// problem, 2 unknown, and one line of at most 80 characters.
    #[arg(long, conflicts_with = "nhc")]
    npd: bool,
    /// For Slurm's Node Health Check (dist/nhc/railwatch.nhc): the same
    /// exit codes and line.
    #[arg(long)]
    nhc: bool,
    /// A problem when fewer rails than this are usable (default 1).
    #[arg(long, value_name = "N", conflicts_with = "max_unusable")]
    min_usable: Option<usize>,
    /// A problem when more rails than this are not usable.
    #[arg(long, value_name = "N")]
    max_unusable: Option<usize>,
}

/// The agent's state when it can be trusted; otherwise why, as exit 2.
fn warm_state(socket: &std::path::Path) -> Result<StateReply, String> {
    ask_warm(socket, PATIENCE).map_err(|e| e.to_string())
}

/// The rails as the devices read now, with no agent (`rails --direct`).
#[cfg(feature = "verbs")]
fn direct() -> Result<StateReply, String> {
    use railwatch_core::{PortState, VerbsPort};
    use railwatch_runtime::state::{Health, STATE_SCHEMA, Verdict};
    eprintln!("railwatch: --direct: no agent asked; a port counts as usable when it reads ACTIVE");
    let names = crate::devices::list().map_err(|_| "the devices cannot be listed".to_owned())?;
    let mut failures = Vec::new();
    let mut rails = Vec::new();
    for mut dev in crate::devices::open_all(&names, &mut failures) {
        for port in dev.ports() {
            let state = dev.port_state(port);
            let usable = matches!(state, Ok(PortState::Active));
            let message = state.map_or_else(|e| format!("cannot be read: {e}"), |s| format!("reads {}", s.name()));
            let verdict = if usable { Verdict::Healthy } else { Verdict::Unhealthy };
            let name = dev.name().to_owned();
            let health = Health::new(verdict, message);
            rails.push(RailReply { rail: format!("{name}/{port}"), device: name, port, usable, health });
        }
    }
    for f in &failures {
        eprintln!("{}", f.human());
    }
    Ok(StateReply { schema: STATE_SCHEMA.to_owned(), warm: true, rails })
}

/// Without libibverbs there is nothing to read.
#[cfg(not(feature = "verbs"))]
fn direct() -> Result<StateReply, String> {
    Err("--direct reads the devices through libibverbs: this build has no `verbs` feature".to_owned())
}

/// `railwatch rails`: the usable rails, 0 with at least one, 1 with none
/// (nothing printed: an empty `NCCL_IB_HCA` or `UCX_NET_DEVICES` would
/// read as "any device"), 2 when the agent cannot say.
pub fn rails(args: &RailsArgs) -> ExitCode {
    let state = match if args.direct { direct() } else { warm_state(&args.socket) } {
        Ok(state) => state,
        Err(why) => {
            eprintln!("railwatch: {why}");
            return ExitCode::from(2);
        }
    };
    let usable: Vec<&RailReply> = state.rails.iter().filter(|r| r.usable).collect();
    let list = || usable_rails(&state);
    let text = if usable.is_empty() {
        // Nothing to give: an empty list would read as "any device" to some.
        String::new()
    } else if args.nccl {
        format!("NCCL_IB_HCA=={}\n", list().join(","))
    } else if args.ucx {
        format!("UCX_NET_DEVICES={}\n", list().join(","))
    } else if args.format == RailsFormat::Json {
        let rails: Vec<serde_json::Value> = usable
            .iter()
            .map(|r| serde_json::json!({"rail": r.rail, "device": r.device, "port": r.port, "health": r.health}))
            .collect();
        format!("{}\n", serde_json::json!({"warm": state.warm, "usable": rails}))
    } else {
        list().iter().map(|r| format!("{r}\n")).collect()
    };
    if let Err(e) = io::stdout().write_all(text.as_bytes()) {
        return write_failed(&e);
    }
    ExitCode::from(if usable.is_empty() { 1 } else { 0 })
}

/// `railwatch check`: one line, 0 OK, 1 a problem, 2 unknown.
pub fn check(args: &CheckArgs) -> ExitCode {
    let (code, line) = match warm_state(&args.socket) {
        Err(why) => (2, format!("unknown: {why}")),
        Ok(state) => verdict(&state, args),
    };
    let line = railwatch_runtime::state::cut(line, CHECK_LINE_MAX);
    if let Err(e) = writeln!(io::stdout(), "{line}") {
        return write_failed(&e);
    }
    ExitCode::from(code)
}

/// The exit code and line for a warm agent's state.
fn verdict(state: &StateReply, args: &CheckArgs) -> (u8, String) {
    let total = state.rails.len();
    let usable = state.rails.iter().filter(|r| r.usable).count();
    let unusable: Vec<&str> = state.rails.iter().filter(|r| !r.usable).map(|r| r.rail.as_str()).collect();
    let problem = match (args.min_usable, args.max_unusable) {
        (_, Some(max)) => unusable.len() > max,
        (min, None) => usable < min.unwrap_or(1),
    };
    let counts = format!("{usable}/{total} rails usable");
    if !problem {
        return (0, format!("ok: {counts}"));
    }
    match unusable.as_slice() {
        [] => (1, format!("problem: {counts}")),
        names => (1, format!("problem: {counts}; down: {}", names.join(","))),
    }
}
