//! The container image, from the root the package was installed into: the
//! files of railwatch's package and of the packages it needs at run time
//! (its `Depends`, followed; none of the tools that only install them),
//! with no documentation, then an OCI layout written by umoci (no base
//! image pulled from anywhere). Then, where podman can run a container
//! here, the image runs as the agent under the fake libibverbs and its
//! `/metrics` and state socket are read from outside.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::build::Deb;
use super::operator::Root;
use crate::run::step;

/// Packages that install others but that nothing needs at run time.
const NOT_AT_RUN_TIME: [&str; 4] = ["adduser", "debconf", "init-system-helpers", "passwd"];
/// What no one reads in a container: documentation and translations,
/// completions, the package's unit, and glibc's character-set converters.
const UNNEEDED: [&str; 8] = [
    "usr/share/doc/",
    "usr/share/man/",
    "usr/share/locale/",
    "usr/share/lintian/",
    "usr/share/bash-completion/",
    "usr/share/zsh/",
    "usr/share/fish/",
    "usr/lib/x86_64-linux-gnu/gconv/",
];
/// The port the image's command serves `/metrics` and the state API on.
pub const PORT: u16 = 9477;

/// The packages railwatch needs at run time, by name: its `Depends` and
/// `Pre-Depends`, followed (an alternative's first choice).
fn closure(root: &Root) -> Result<BTreeSet<String>, String> {
    let status = root.run(&["dpkg-query", "-W", "-f", "${Package}\t${Pre-Depends}, ${Depends}\n"])?;
    let depends = |pkg: &str| -> Vec<String> {
        status
            .lines()
            .find_map(|l| l.split_once('\t').filter(|(p, _)| *p == pkg).map(|(_, d)| d))
            .unwrap_or("")
            .split(',')
            .filter_map(|d| d.split('|').next()?.split_whitespace().next())
            .map(|d| d.split(':').next().unwrap_or(d).to_owned())
            .filter(|d| !d.is_empty())
            .collect()
    };
    let mut seen = BTreeSet::new();
    let mut todo = vec!["railwatch".to_owned()];
    while let Some(pkg) = todo.pop() {
        if NOT_AT_RUN_TIME.contains(&pkg.as_str()) || !seen.insert(pkg.clone()) {
            continue;
        }
        todo.extend(depends(&pkg));
    }
    Ok(seen)
}

/// The image's files, copied out of the root into `out`: the packages'
/// files (through the root's /lib -> usr/lib links), a passwd and group
/// with root and nobody, /tmp and /run/railwatch.
pub fn rootfs(root: &Root, out: &Path) -> Result<Vec<String>, String> {
    let packages = closure(root)?;
    let mut paths = BTreeSet::new();
    for pkg in &packages {
        for path in root.run(&["dpkg-query", "-L", pkg])?.lines() {
            let rel = path.trim_start_matches('/');
            if rel.is_empty() || rel == "." || UNNEEDED.iter().any(|u| rel.starts_with(u)) {
                continue;
            }
            paths.insert(canonical(&root.dir, rel));
        }
    }
    paths.insert("etc/ld.so.cache".into());
    // The top directories that are links (usrmerge) are made as links;
    // everything was copied through them above.
    let _ = std::fs::remove_dir_all(out);
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    for top in ["bin", "sbin", "lib", "lib64"] {
        if let Ok(target) = std::fs::read_link(root.dir.join(top)) {
            std::os::unix::fs::symlink(&target, out.join(top)).map_err(|e| format!("{top}: {e}"))?;
        }
    }
    let paths: Vec<String> =
        paths.into_iter().filter(|p| !["bin", "sbin", "lib", "lib64"].contains(&p.as_str())).collect();
    let list = out.with_extension("list");
    std::fs::write(&list, paths.join("\n") + "\n").map_err(|e| e.to_string())?;
    let copy = format!(
        "tar -C '{}' --no-recursion -cf - -T '{}' | tar -C '{}' -xf -",
        root.dir.display(),
        list.display(),
        out.display()
    );
    step("deb: the image's files", Command::new("sh").args(["-c", &copy]))?;
    let write = |rel: &str, text: &str| std::fs::write(out.join(rel), text).map_err(|e| format!("{rel}: {e}"));
    write(
        "etc/passwd",
        "root:x:0:0:root:/:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
    )?;
    write("etc/group", "root:x:0:\nnogroup:x:65534:\n")?;
    for dir in ["tmp", "run/railwatch"] {
        std::fs::create_dir_all(out.join(dir)).map_err(|e| format!("{dir}: {e}"))?;
    }
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(out.join("tmp"), std::fs::Permissions::from_mode(0o1777)).map_err(|e| e.to_string())?;
    eprintln!("==> deb: image files: {} paths of {}", paths.len(), packages.into_iter().collect::<Vec<_>>().join(", "));
    Ok(paths)
}

/// `rel` with its first component resolved when it is one of the root's
/// links (`lib64/ld-linux-x86-64.so.2` is `usr/lib64/...`).
fn canonical(root: &Path, rel: &str) -> String {
    let (first, rest) = rel.split_once('/').unwrap_or((rel, ""));
    match std::fs::read_link(root.join(first)) {
        Ok(target) if !rest.is_empty() => {
            let target = target.to_string_lossy().trim_start_matches('/').to_owned();
            format!("{target}/{rest}")
        }
        _ => rel.to_owned(),
    }
}

/// The OCI layout at `layout`, tagged with the package's upstream
/// version: one layer of `rootfs`, railwatch as the entrypoint, `watch`
/// with the conffile, the state socket and `/metrics` as the command.
/// Returns the compressed size of its blobs.
pub fn build(rootfs: &Path, deb: &Deb, layout: &Path) -> Result<u64, String> {
    let _ = std::fs::remove_dir_all(layout);
    let image = format!("{}:{}", layout.display(), deb.upstream);
    step("deb: umoci init", Command::new("umoci").args(["init", "--layout"]).arg(layout))?;
    step("deb: umoci new", Command::new("umoci").args(["new", "--image", &image]))?;
    step("deb: umoci insert", Command::new("umoci").args(["insert", "--image", &image]).arg(rootfs).arg("/"))?;
    let listen = format!("0.0.0.0:{PORT}");
    let mut config = Command::new("umoci");
    config.args(["config", "--image", &image, "--config.entrypoint", "/usr/bin/railwatch"]);
    for arg in ["watch", "--config", "/etc/railwatch/railwatch.toml", "--state-socket", "/run/railwatch/state.sock"] {
        config.args(["--config.cmd", arg]);
    }
    config
        .args(["--config.cmd", "--metrics-listen", "--config.cmd", &listen])
        .args(["--config.exposedports", &format!("{PORT}/tcp"), "--config.workingdir", "/"])
        .args(["--config.label", "org.opencontainers.image.title=railwatch"])
        .args(["--config.label", &format!("org.opencontainers.image.version={}", deb.upstream)])
        .args(["--history.comment", "railwatch's Debian package and what it needs at run time"]);
    step("deb: umoci config", &mut config)?;
    step("deb: umoci gc", Command::new("umoci").args(["gc", "--layout"]).arg(layout))?;
    let blobs = layout.join("blobs/sha256");
    let size = std::fs::read_dir(&blobs)
        .map_err(|e| format!("{}: {e}", blobs.display()))?
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.len())
        .sum();
    Ok(size)
}

/// The bytes under `dir` (regular files), for the unpacked size.
pub fn du(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(e.path()),
                Ok(t) if t.is_file() => total += e.metadata().map(|m| m.len()).unwrap_or(0),
                _ => {}
            }
        }
    }
    total
}

/// podman with storage of its own under `dir` (the host's is left alone)
/// and the OCI runtime `runtime`.
fn podman(dir: &Path, runtime: &str) -> Command {
    let mut cmd = Command::new("podman");
    cmd.arg("--root")
        .arg(dir.join("storage"))
        .arg("--runroot")
        .arg(dir.join("run"))
        .args(["--storage-driver", "vfs", "--cgroup-manager", "cgroupfs", "--events-backend", "none"])
        .args(["--runtime", runtime]);
    cmd
}

/// `podman run` of the image with `args`, and what every run here needs:
/// the host's network, and limits the runtime may set without
/// CAP_SYS_RESOURCE (podman's default of 1048576 open files needs it).
fn podman_run(dir: &Path, runtime: &str, layout: &Path, tag: &str, options: &[&str], args: &[&str]) -> Command {
    let mut cmd = podman(dir, runtime);
    cmd.args(["run", "--rm", "--network", "host", "--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096"])
        .args(options)
        .arg(format!("oci:{}:{tag}", layout.display()))
        .args(args);
    cmd
}

/// The first OCI runtime with which podman runs the image here (crun,
/// podman's default, then runc: crun refuses cgroups in hybrid mode), or
/// why none does.
pub fn podman_runtime(dir: &Path, layout: &Path, tag: &str) -> Result<&'static str, String> {
    let mut why = Vec::new();
    for runtime in ["crun", "runc"] {
        match podman_run(dir, runtime, layout, tag, &[], &["--version"]).output() {
            Ok(out) if out.status.success() => return Ok(runtime),
            Ok(out) => why.push(format!(
                "{runtime}: {}",
                String::from_utf8_lossy(&out.stderr).trim().lines().last().unwrap_or_default()
            )),
            Err(e) => why.push(format!("podman cannot start: {e}")),
        }
    }
    Err(why.join("; "))
}

/// The image run as the agent under the fake libibverbs (its directory
/// mounted, one device with an active port), with the host's network and
/// a host directory at /run/railwatch; `/metrics` read over TCP and
/// `GET /v1/state` over the socket, from outside the container.
pub fn run_agent(dir: &Path, runtime: &str, layout: &Path, deb: &Deb) -> Result<(), String> {
    let port =
        std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map_err(|e| e.to_string())?.port();
    let sockets = dir.join("railwatch-run");
    let _ = std::fs::remove_dir_all(&sockets);
    std::fs::create_dir_all(&sockets).map_err(|e| e.to_string())?;
    let name = format!("railwatch-ci-{}", std::process::id());
    let fake = format!("{}:/opt/fake-ibverbs:ro", deb.fake_dir.display());
    let run = format!("{}:/run/railwatch", sockets.display());
    let options = [
        "--name",
        &name,
        "--read-only",
        "--cap-drop",
        "all",
        "--security-opt",
        "no-new-privileges",
        "-v",
        &fake,
        "-v",
        &run,
        "-e",
        "LD_LIBRARY_PATH=/opt/fake-ibverbs",
        "-e",
        "FAKE_IBVERBS_DEVICES=mlx5_0:4/128/2",
    ];
    let listen = format!("127.0.0.1:{port}");
    let args = [
        "watch",
        "--config",
        "/etc/railwatch/railwatch.toml",
        "--state-socket",
        "/run/railwatch/state.sock",
        "--metrics-listen",
        &listen,
    ];
    let mut cmd = podman_run(dir, runtime, layout, &deb.upstream, &options, &args);
    cmd.stdout(Stdio::null());
    eprintln!("==> deb: the image as the agent: {cmd:?}");
    let mut child = cmd.spawn().map_err(|e| format!("podman run: {e}"))?;
    let result = read_from_outside(port, &sockets.join("state.sock"));
    let _ = podman(dir, runtime).args(["stop", "-t", "5", &name]).stdout(Stdio::null()).stderr(Stdio::null()).status();
    let _ = child.kill();
    let _ = child.wait();
    let (metrics, state) = result?;
    eprintln!("==> deb: from outside the container: /metrics {metrics} lines; GET /v1/state on the socket: {state}");
    Ok(())
}

/// `/metrics` and the state document once warm, within 60 s.
fn read_from_outside(port: u16, socket: &Path) -> Result<(usize, String), String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = String::from("nothing yet");
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(250));
        let state = match std::os::unix::net::UnixStream::connect(socket)
            .map_err(|e| e.to_string())
            .and_then(|s| get(s, "/v1/state"))
        {
            Ok(body) => body,
            Err(e) => {
                last = e;
                continue;
            }
        };
        let doc: serde_json::Value = serde_json::from_str(&state).map_err(|e| format!("/v1/state: {e}: {state}"))?;
        if doc["warm"] != true {
            last = "not warm".into();
            continue;
        }
        let rail = &doc["rails"][0];
        if rail["rail"] != "mlx5_0/1" || rail["usable"] != true {
            return Err(format!("/v1/state: expected mlx5_0/1 usable: {state}"));
        }
        let stream = std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("/metrics: {e}"))?;
        let metrics = get(stream, "/metrics")?;
        let line = metrics.lines().find(|l| l.starts_with("railwatch_rail_available{"));
        if !line.is_some_and(|l| l.contains("mlx5_0") && l.ends_with(" 1")) {
            return Err(format!("/metrics has no railwatch_rail_available of mlx5_0 at 1:\n{metrics}"));
        }
        return Ok((metrics.lines().count(), format!("warm, mlx5_0/1 usable ({})", rail["health"]["verdict"])));
    }
    Err(format!("the agent in the container did not answer warm within 60 s: {last}"))
}

/// A plain HTTP/1.0 GET: the body of a 200.
fn get(mut stream: impl Read + Write, path: &str) -> Result<String, String> {
    write!(stream, "GET {path} HTTP/1.0\r\nHost: railwatch\r\n\r\n").map_err(|e| e.to_string())?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply).map_err(|e| e.to_string())?;
    let (head, body) = reply.split_once("\r\n\r\n").ok_or_else(|| format!("GET {path}: no header end"))?;
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        return Err(format!("GET {path}: {}", head.lines().next().unwrap_or_default()));
    }
    Ok(body.to_owned())
}
