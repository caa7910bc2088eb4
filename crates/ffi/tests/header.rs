//! `include/railwatch.h` is what cbindgen makes of the code today: a header
//! that drifts from the exports fails here. `RAILWATCH_BLESS=1 cargo test
//! -p railwatch-ffi --test header` rewrites it.

use std::path::Path;

#[test]
fn the_committed_header_is_the_generated_one() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen reads the crate")
        .write(&mut generated);
    let path = dir.join("include/railwatch.h");
    if std::env::var_os("RAILWATCH_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write the header");
        return;
    }
    let committed = std::fs::read(&path).unwrap_or_default();
    if committed != generated {
        let (c, g) = (String::from_utf8_lossy(&committed), String::from_utf8_lossy(&generated));
        let line =
            c.lines().zip(g.lines()).position(|(a, b)| a != b).unwrap_or(c.lines().count().min(g.lines().count()));
        panic!(
            "{} differs from what cbindgen generates (first at line {}: committed {:?}, generated {:?}); \
             run RAILWATCH_BLESS=1 cargo test -p railwatch-ffi --test header and commit it",
            path.display(),
            line + 1,
            c.lines().nth(line),
            g.lines().nth(line)
        );
    }
}
