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
    /// A problem when fewer rails than this are usable (default 1). With
    /// `--max-unusable` too, a problem when either is crossed.
    #[arg(long, value_name = "N")]
    min_usable: Option<usize>,
    /// A problem when more rails than this are not usable (default: no
    /// bound).
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
    judge(&state.rails, Thresholds { min_usable: args.min_usable.unwrap_or(1), max_unusable: args.max_unusable })
}

/// What makes a problem: fewer usable rails than `min_usable`, or more
/// unusable ones than `max_unusable` (when given); either is enough.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Thresholds {
    min_usable: usize,
    max_unusable: Option<usize>,
}

/// The exit code and line (not yet cut) for `rails` under `thresholds`.
fn judge(rails: &[RailReply], thresholds: Thresholds) -> (u8, String) {
    let total = rails.len();
    let usable = rails.iter().filter(|r| r.usable).count();
    let unusable: Vec<&str> = rails.iter().filter(|r| !r.usable).map(|r| r.rail.as_str()).collect();
    let problem = usable < thresholds.min_usable || thresholds.max_unusable.is_some_and(|max| unusable.len() > max);
    let counts = format!("{usable}/{total} rails usable");
    if !problem {
        return (0, format!("ok: {counts}"));
    }
    match unusable.as_slice() {
        [] => (1, format!("problem: {counts}")),
        names => (1, format!("problem: {counts}; down: {}", names.join(","))),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use railwatch_runtime::state::{Health, Verdict, cut};

    use super::*;

    fn rails(usable: &[bool]) -> Vec<RailReply> {
        usable
            .iter()
            .enumerate()
            .map(|(i, &usable)| RailReply {
                rail: format!("mlx5_{i}/1"),
                device: format!("mlx5_{i}"),
                port: 1,
                usable,
                health: Health::new(if usable { Verdict::Healthy } else { Verdict::Unhealthy }, String::new()),
            })
            .collect()
    }

    #[test]
    fn both_thresholds_together_make_a_problem_when_either_is_crossed() {
        let both = Thresholds { min_usable: 2, max_unusable: Some(1) };
        assert_eq!(judge(&rails(&[true, true, false]), both).0, 0);
        assert_eq!(judge(&rails(&[true, false, false]), both).0, 1, "both crossed");
        assert_eq!(judge(&rails(&[true, true, false, false]), both).0, 1, "max crossed only");
        assert_eq!(judge(&rails(&[true]), both).0, 1, "min crossed only");
    }

    proptest! {
        /// Any host and thresholds: exit 1 exactly when a threshold is
        /// crossed, the counts right, and the line cut to 80 bytes with a
        /// mark when it is longer.
        #[test]
        fn check_says_a_problem_exactly_when_a_threshold_is_crossed(
            up in proptest::collection::vec(any::<bool>(), 0..40),
            min_usable in 0usize..10,
            max_unusable in proptest::option::of(0usize..10),
        ) {
            let (code, line) = judge(&rails(&up), Thresholds { min_usable, max_unusable });
            let usable = up.iter().filter(|&&u| u).count();
            let crossed = usable < min_usable || max_unusable.is_some_and(|m| up.len() - usable > m);
            prop_assert_eq!(code, u8::from(crossed));
            let counts = format!("{usable}/{} rails usable", up.len());
            prop_assert!(line.contains(&counts));
            let shown = cut(line.clone(), CHECK_LINE_MAX);
            prop_assert!(shown.len() <= CHECK_LINE_MAX);
            prop_assert!(shown == line || shown.ends_with("..."));
        }
    }
}
