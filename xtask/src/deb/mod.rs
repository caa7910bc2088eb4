//! The Debian package and the container image (issue 33), built and
//! checked as an operator installs them; `cargo xtask package` runs it
//! after the C library's checks, `cargo xtask ci` as its `deb` phase.
//!
//! 1. [`build`]: the package (cargo-deb) and lintian.
//! 2. [`root`]: a clean Debian root from the archive (mmdebstrap, cached
//!    outside the work tree), unpacked under `target/deb-test/root`.
//! 3. [`operator`]: install (the first commands, the unit verified, the
//!    man pages read), the image's files taken, remove, purge (nothing
//!    left), an upgrade from the previous build over an edited conffile.
//! 4. [`image`]: the OCI layout (umoci) at `target/deb-test/oci`, run
//!    with podman as the agent where podman can run here.
//!
//! The previous build, for the upgrade, is the last package that passed,
//! kept in the cache (`previous.deb`); the first run, with none, upgrades
//! from this build relabelled as older.

mod build;
mod image;
mod operator;
mod root;

use std::time::Instant;

pub use build::{ensure_cargo_deb, prebuild};

use crate::run::target_dir;

/// `cargo xtask deb`: everything above.
pub fn run() -> Result<(), String> {
    let started = Instant::now();
    let deb = build::build()?;
    let built = started.elapsed().as_secs_f64();
    let tar = root::tarball()?;
    let dir = target_dir().join("deb-test");
    let root = operator::Root { dir: dir.join("root") };
    root::unpack(&tar, &root.dir)?;
    let before = root.files()?;
    operator::install(&root, &deb)?;
    let rootfs = dir.join("rootfs");
    image::rootfs(&root, &rootfs)?;
    operator::remove_and_purge(&root, &before)?;
    let cache = root::cache_dir()?;
    let kept = cache.join("previous.deb");
    let previous = operator::relabel(if kept.is_file() { &kept } else { &deb.path }, &deb, &dir)?;
    operator::upgrade(&root, &deb, &previous)?;
    let layout = dir.join("oci");
    let compressed = image::build(&rootfs, &deb, &layout)?;
    let unpacked = image::du(&rootfs);
    eprintln!(
        "==> deb: image {}:{} (OCI layout): {:.1} MB compressed, {:.1} MB unpacked",
        layout.display(),
        deb.upstream,
        compressed as f64 / 1e6,
        unpacked as f64 / 1e6
    );
    let podman = dir.join("podman");
    match image::podman_runtime(&podman, &layout, &deb.upstream) {
        Ok(runtime) => image::run_agent(&podman, runtime, &layout, &deb)?,
        Err(why) => eprintln!(
            "==> deb: NOT RUN: the image under podman, which cannot run a container here ({why}); \
             checked instead: the image's files (the package's, as installed above) and its layout"
        ),
    }
    std::fs::create_dir_all(&cache).map_err(|e| format!("{}: {e}", cache.display()))?;
    std::fs::copy(&deb.path, &kept).map_err(|e| format!("{}: {e}", kept.display()))?;
    let _ = std::fs::remove_dir_all(&root.dir);
    eprintln!(
        "==> deb: package built in {built:.0} s; installed, upgraded, purged and the image built and run in {:.0} s",
        started.elapsed().as_secs_f64() - built
    );
    Ok(())
}
