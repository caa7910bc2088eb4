//! `railwatch generate man|completions DIR` (hidden): the man pages (one
//! per subcommand, clap_mangen) and the shell completions (bash, zsh,
//! fish; clap_complete) that the Debian package installs, written from the
//! same clap definition that parses the command line, so they cannot
//! drift from it. `cargo xtask package` runs it on the binary it packs.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// What to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum What {
    /// `railwatch.1` and `railwatch-SUBCOMMAND.1`, roff.
    Man,
    /// `railwatch.bash`, `_railwatch` (zsh) and `railwatch.fish`.
    Completions,
}

/// `railwatch generate`.
#[derive(clap::Args, Debug)]
pub struct GenerateArgs {
    /// Man pages or shell completions.
    #[arg(value_enum)]
    what: What,
    /// The directory to write them into (made if missing).
    dir: PathBuf,
}

/// Writes the files; prints each one's path.
pub fn run(cmd: clap::Command, args: &GenerateArgs) -> ExitCode {
    match write(cmd, args.what, &args.dir) {
        Ok(files) => {
            for file in files {
                println!("{}", file.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("railwatch generate: {}: {e}", args.dir.display());
            ExitCode::from(2)
        }
    }
}

/// The files written, in order.
fn write(cmd: clap::Command, what: What, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    match what {
        What::Man => {
            clap_mangen::generate_to(cmd, dir)?;
            let mut pages: Vec<PathBuf> = std::fs::read_dir(dir)?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "1"))
                .collect();
            pages.sort();
            Ok(pages)
        }
        What::Completions => {
            use clap_complete::Shell;
            let mut cmd = without_hidden(&cmd);
            [Shell::Bash, Shell::Zsh, Shell::Fish]
                .into_iter()
                .map(|shell| clap_complete::generate_to(shell, &mut cmd, "railwatch", dir))
                .collect()
        }
    }
}

/// `railwatch` without its hidden subcommands (`generate`), which
/// clap_complete would otherwise offer: `cmd`'s visible arguments and
/// subcommands, and `--version` when it has one.
fn without_hidden(cmd: &clap::Command) -> clap::Command {
    let visible = cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned();
    let pruned = clap::Command::new("railwatch")
        .args(cmd.get_arguments().filter(|a| !a.is_hide_set()).cloned())
        .subcommands(visible);
    match cmd.get_version() {
        Some(_) => pruned.version(env!("CARGO_PKG_VERSION")),
        None => pruned,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli() -> clap::Command {
        clap::Command::new("railwatch")
            .version("1.2.3")
            .about("Keep rails usable")
            .subcommand(clap::Command::new("watch").about("Watch").arg(clap::arg!(--check "Check")))
            .subcommand(clap::Command::new("generate").hide(true))
    }

    #[test]
    fn a_page_per_visible_subcommand_and_three_shells() {
        let dir = tempfile::tempdir().unwrap();
        let pages = write(cli(), What::Man, dir.path()).unwrap();
        let names: Vec<String> = pages.iter().map(|p| p.file_name().unwrap().to_string_lossy().into()).collect();
        assert_eq!(names, ["railwatch-watch.1", "railwatch.1"]);
        let watch = std::fs::read_to_string(&pages[0]).unwrap();
        assert!(watch.contains("railwatch\\-watch") && watch.contains("\\-\\-check"), "{watch}");
        let files = write(cli(), What::Completions, dir.path()).unwrap();
        let names: Vec<String> = files.iter().map(|p| p.file_name().unwrap().to_string_lossy().into()).collect();
        assert_eq!(names, ["railwatch.bash", "_railwatch", "railwatch.fish"]);
        let bash = std::fs::read_to_string(&files[0]).unwrap();
        assert!(bash.contains("watch") && bash.contains("--version"), "{bash}");
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap();
            assert!(!text.contains("generate"), "{}: offers the hidden subcommand", file.display());
        }
    }
}
