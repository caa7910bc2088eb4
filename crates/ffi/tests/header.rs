//! `include/railwatch.h` and `include/railwatch_sim.h` are what cbindgen
//! makes of the code today: a header that drifts from the exports fails
//! here. The simulator's items (`rw_sim*`, `RW_SIM*`, and
//! `rw_monitor_start_sim`) go to railwatch_sim.h, everything else to
//! railwatch.h: each item in exactly one. `RAILWATCH_BLESS=1 cargo test -p
//! railwatch-ffi --test header` rewrites both.

use std::collections::BTreeSet;
use std::path::Path;

fn dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn config(file: &str) -> cbindgen::Config {
    cbindgen::Config::from_file(dir().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

fn generate(config: cbindgen::Config) -> String {
    let mut out = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir())
        .with_config(config)
        .generate()
        .expect("cbindgen reads the crate")
        .write(&mut out);
    String::from_utf8(out).expect("a header is UTF-8")
}

/// Every `rw_`/`RW_` name in a header: its items (and more, which
/// excluding is harmless: enum variants are no items).
fn names(header: &str) -> BTreeSet<String> {
    header
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("rw_") || w.starts_with("RW_"))
        .map(str::to_owned)
        .collect()
}

fn is_simulator(name: &str) -> bool {
    name.starts_with("rw_sim") || name.starts_with("RW_SIM") || name == "rw_monitor_start_sim"
}

/// railwatch.h and railwatch_sim.h as cbindgen makes them now.
fn headers() -> (String, String) {
    let all = names(&generate(config("cbindgen.toml")));
    let (sim, rest): (Vec<String>, Vec<String>) = all.into_iter().partition(|n| is_simulator(n));
    let mut main = config("cbindgen.toml");
    main.export.exclude.extend(sim);
    let mut simulator = config("cbindgen_sim.toml");
    simulator.export.exclude.extend(rest);
    (generate(main), generate(simulator))
}

fn check(name: &str, generated: &str) {
    let path = dir().join("include").join(name);
    if std::env::var_os("RAILWATCH_BLESS").is_some() {
        std::fs::write(&path, generated).expect("write the header");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != generated {
        let line = committed
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(committed.lines().count().min(generated.lines().count()));
        panic!(
            "{} differs from what cbindgen generates (first at line {}: committed {:?}, generated {:?}); \
             run RAILWATCH_BLESS=1 cargo test -p railwatch-ffi --test header and commit it",
            path.display(),
            line + 1,
            committed.lines().nth(line),
            generated.lines().nth(line)
        );
    }
}

#[test]
fn the_committed_headers_are_the_generated_ones() {
    let (main, simulator) = headers();
    check("railwatch.h", &main);
    check("railwatch_sim.h", &simulator);
}

#[test]
fn each_function_is_in_exactly_one_header() {
    let (main, simulator) = headers();
    let declared = |h: &str| -> BTreeSet<String> {
        names(h).into_iter().filter(|n| h.contains(&format!(" {n}(")) && n.starts_with("rw_")).collect()
    };
    let (m, s) = (declared(&main), declared(&simulator));
    assert!(m.iter().all(|n| !is_simulator(n)), "railwatch.h declares the simulator's {m:?}");
    assert!(s.iter().all(|n| is_simulator(n)), "railwatch_sim.h declares more than the simulator: {s:?}");
    assert!(s.contains("rw_sim_new") && m.contains("rw_machine_new"));
}
