//! Running commands with a visible trace.

use std::path::PathBuf;
use std::process::Command;

/// The workspace root (xtask lives one level below it).
pub fn root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}

/// Cargo's target directory: `CARGO_TARGET_DIR` (a relative one is taken
/// from the workspace root, where every `cargo` here runs) or `target/`.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root().join("target"), |dir| root().join(dir))
}

/// A `cargo` command run from the workspace root.
pub fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(root());
    cmd
}

/// Runs `cmd`, echoing it first; an unsuccessful exit is an error naming it.
pub fn step(what: &str, cmd: &mut Command) -> Result<(), String> {
    eprintln!("==> {what}: {cmd:?}");
    let status = cmd.status().map_err(|e| format!("{what}: cannot start: {e}"))?;
    if status.success() { Ok(()) } else { Err(format!("{what} failed ({status})")) }
}

/// `f` over every item, on as many threads as the machine has cores (the C
/// programs' compiles and valgrind runs are independent, and a fresh CI run
/// is counted in minutes); the results in the items' order.
pub fn parallel<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let workers = std::thread::available_parallelism().map_or(1, usize::from).min(items.len().max(1));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new(items.iter().map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let r = f(item);
                    results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
                }
            });
        }
    });
    results.into_inner().unwrap_or_else(|e| e.into_inner()).into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn parallel_keeps_the_order_and_runs_every_item() {
        let items: Vec<u64> = (0..100).collect();
        assert_eq!(super::parallel(&items, |x| x * 2), (0..100).map(|x| x * 2).collect::<Vec<_>>());
        assert!(super::parallel(&[] as &[u64], |x| *x).is_empty());
    }
}
