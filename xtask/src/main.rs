//! Project automation, in the rust-analyzer `xtask` style: `cargo xtask <task>`.
//!
//! - `ci`: everything CI checks, in order; the README's test command.
//! - `deps`: installs the system packages the verbs backend needs.
//! - `ffi`: the C API's C and C++ tests, linked both ways, under ASan and under valgrind.
//! - `install`: the C API's headers, libraries, CMake package and pkg-config file, into a prefix.
//! - `package`: the installed package built against with CMake and pkg-config, and run; then `deb`.
//! - `deb`: the Debian package and container image, installed, upgraded, purged and run as an operator would.
//! - `abi`: the C API's ABI (libabigail) against the recorded baseline; `--bless` records it.
//! - `bench`: the benchmarks, printed as one table of ratios.
//! - `attack`: `/metrics` and the state socket under attack: the loop's and a scraper's latency, failures.
//! - `scale`: the CLI under a million queued events, and under the largest
//!   scenario allowed (65,536 rails) with `--html`, timed, with peak memory.
//! - `fuzz`: the cargo-fuzz targets (scenario parser, event decoder).
//! - `soak`: ten million simulated events with faults and flaps, checked.
//! - `props`: the machine's, the monitor's and the recordings' property tests, long.
//! - `size`: lines of code, longest files and functions, against the limits.
//! - `vmtest`: railwatch against the real kernel RDMA stack (Soft-RoCE) in a qemu VM.

use std::process::ExitCode;

mod abi;
mod attack;
mod bench;
mod ci;
mod deb;
mod deps;
mod ffi;
mod fuzz;
mod install;
mod library;
mod package;
mod props;
mod python;
mod run;
mod scale;
mod size;
mod soak;
mod vmtest;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("abi") => abi::run(&args[1..]),
        Some("attack") => attack::run(&args[1..]),
        Some("bench") => bench::run(&args[1..]),
        Some("ci") => ci::run(),
        Some("deps") => deps::run(),
        Some("ffi") => ffi::run(&args[1..]).map(|_| ()),
        Some("install") => install::run(&args[1..]),
        Some("package") => package::run().and_then(|()| deb::run()),
        Some("deb") => deb::run(),
        Some("scale") => scale::run(&args[1..]),
        Some("fuzz") => fuzz::run(&args[1..]),
        Some("size") => size::run(&args[1..]),
        Some("soak") => soak::run(&args[1..]),
        Some("props") => props::run(&args[1..]),
        Some("python") => python::run(),
        Some("vmtest") => vmtest::run(&args[1..]),
        _ => {
            eprintln!(
                "usage: cargo xtask <ci|deps|ffi|install|package|deb|abi|python|bench|attack|scale|fuzz|soak|props|size|vmtest>"
            );
            eprintln!("  ci    format, lint, test (with loom), docs: what CI runs");
            eprintln!("  deps  install the Debian packages the verbs backend builds against");
            eprintln!("  ffi   [--no-valgrind] the C API's C/C++ tests, shared and static library, ASan, valgrind");
            eprintln!("  install --prefix DIR  the C API (headers, libraries, CMake and pkg-config files) into DIR");
            eprintln!(
                "  package install into target/package, then build and run a program with CMake and pkg-config; then deb"
            );
            eprintln!(
                "  deb   the Debian package (cargo-deb, lintian) installed, upgraded and purged in a clean Debian root, and the container image (umoci, podman)"
            );
            eprintln!("  abi   [--bless] the C API's ABI against crates/ffi/abi/ (abidiff); --bless records it");
            eprintln!("  python the Python module built with maturin, its pytest suite and mypy --strict");
            eprintln!("  bench [--table-only] the benchmarks, as one table of ratios (docs/PERFORMANCE.md)");
            eprintln!(
                "  attack [metrics|state] /metrics, and the state socket, under idle, slowloris, never-read, stream and 1 MiB-head clients"
            );
            eprintln!(
                "  scale [events|rails] time a 1,000,000-event scenario, and the largest (65,536 rails) with --html, against 30 s"
            );
            eprintln!("  fuzz  [--seconds N | --short] run each fuzz target N s (default 300; --short: 15)");
            eprintln!("  soak  [--events N] [--seed S] 10,000,000 simulated events with faults and flaps, checked");
            eprintln!(
                "  props [--cases N] the machine's, monitor's and recordings' property tests (default 100,000 cases)"
            );
            eprintln!(
                "  size  [--before REV] [--json | --markdown] lines of code per crate, the longest file and function; fails over the limits"
            );
            eprintln!(
                "  vmtest [--timeout S] [--dev] [CASE...] railwatch on Soft-RoCE (rdma_rxe) in a qemu VM, real kernel"
            );
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}
