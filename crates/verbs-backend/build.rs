//! Build script of railwatch-verbs-backend.
//!
//! 1. Probes the installed `infiniband/verbs.h` for `active_speed_ex` in
//!    `struct ibv_port_attr` (rdma-core 49+) and emits
//!    `cfg(rdma_core_active_speed_ex)` when it is there. rdma-sys generates its
//!    bindings from the same header, so the field exists in
//!    `rdma_sys::ibv_port_attr` exactly when the cfg is set.
//! 2. Builds the fake `libibverbs.so.1` the tests run against (fake/), twice:
//!    `OUT_DIR/fake-ibverbs/basic` without `ibv_query_port_speed` (like
//!    rdma-core before 62) and `OUT_DIR/fake-ibverbs/port-speed` with it. The
//!    directories reach the crate as `RAILWATCH_FAKE_IBVERBS_{BASIC,PORT_SPEED}`
//!    (empty when the C compiler failed: only the fake-backed tests need them).

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=fake/fake_ibverbs.c");
    println!("cargo::rerun-if-changed=fake/fake_ibverbs.map");
    println!("cargo::rerun-if-env-changed=CC");
    println!("cargo::rustc-check-cfg=cfg(rdma_core_active_speed_ex)");

    let include_dirs = include_dirs();
    let has_speed_ex = match find_header(&include_dirs) {
        Some(header) => {
            println!("cargo::rerun-if-changed={}", header.display());
            let text = fs::read_to_string(&header).unwrap_or_default();
            port_attr_has_active_speed_ex(&text)
        }
        None => {
            println!("cargo::warning=infiniband/verbs.h not found; assuming rdma-core older than 49");
            false
        }
    };
    if has_speed_ex {
        println!("cargo::rustc-cfg=rdma_core_active_speed_ex");
    }

    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo")).join("fake-ibverbs");
    for (variant, env_name, defines) in [
        ("basic", "RAILWATCH_FAKE_IBVERBS_BASIC", &[][..]),
        ("port-speed", "RAILWATCH_FAKE_IBVERBS_PORT_SPEED", &["-DFAKE_WITH_QUERY_PORT_SPEED"][..]),
    ] {
        let dir = out.join(variant);
        let built = build_fake(&dir, &include_dirs, has_speed_ex, defines);
        let value = if built { dir.display().to_string() } else { String::new() };
        println!("cargo::rustc-env={env_name}={value}");
    }
}

/// Where the verbs headers are: pkg-config's include paths, then /usr/include.
fn include_dirs() -> Vec<PathBuf> {
    let mut dirs = pkg_config::Config::new()
        .cargo_metadata(false)
        .env_metadata(false)
        .probe("libibverbs")
        .map(|lib| lib.include_paths)
        .unwrap_or_default();
    dirs.push(PathBuf::from("/usr/include"));
    dirs
}

fn find_header(dirs: &[PathBuf]) -> Option<PathBuf> {
    dirs.iter().map(|d| d.join("infiniband/verbs.h")).find(|p| p.is_file())
}

/// True when the body of `struct ibv_port_attr` declares `active_speed_ex`.
fn port_attr_has_active_speed_ex(header: &str) -> bool {
    let Some(start) = header.find("struct ibv_port_attr {") else {
        return false;
    };
    let body = &header[start..];
    let body = &body[..body.find("};").unwrap_or(body.len())];
    body.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).any(|word| word == "active_speed_ex")
}

/// Compiles fake/fake_ibverbs.c into `dir/libibverbs.so.1`; false (with a
/// warning) when that fails.
fn build_fake(dir: &Path, include_dirs: &[PathBuf], has_speed_ex: bool, defines: &[&str]) -> bool {
    if let Err(e) = fs::create_dir_all(dir) {
        println!("cargo::warning=fake libibverbs not built: cannot create {}: {e}", dir.display());
        return false;
    }
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR is set by cargo"));
    let cc = env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let mut cmd = Command::new(&cc);
    cmd.args(["-shared", "-fPIC", "-O2", "-g", "-Wall", "-Wextra", "-std=gnu11"])
        .arg("-Wl,-soname,libibverbs.so.1")
        .arg(format!("-Wl,--version-script={}", manifest.join("fake/fake_ibverbs.map").display()))
        .args(include_dirs.iter().map(|d| format!("-I{}", d.display())))
        .args(defines)
        .arg("-o")
        .arg(dir.join("libibverbs.so.1"))
        .arg(manifest.join("fake/fake_ibverbs.c"));
    if has_speed_ex {
        cmd.arg("-DFAKE_HAVE_ACTIVE_SPEED_EX");
    }
    match cmd.output() {
        Ok(out) if out.status.success() => true,
        Ok(out) => {
            for line in String::from_utf8_lossy(&out.stderr).lines().take(20) {
                println!("cargo::warning=fake libibverbs: {line}");
            }
            println!("cargo::warning=fake libibverbs not built ({cc} failed); the fake-backed tests will fail");
            false
        }
        Err(e) => {
            println!("cargo::warning=fake libibverbs not built: cannot run {cc}: {e}");
            false
        }
    }
}
