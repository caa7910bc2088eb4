//! The package installed, upgraded and removed in the clean root as an
//! operator does it: `apt install ./railwatch_*.deb` (apt resolving the
//! dependencies), the first commands, the unit verified, the man pages
//! read; `apt remove` keeps the conffile, `apt purge` leaves nothing of
//! the package; an upgrade from the previous build keeps an edited
//! conffile and asks nothing.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use super::build::Deb;

/// The conffile.
const CONFFILE: &str = "etc/railwatch/railwatch.toml";
/// The installed unit (usrmerge: /lib is /usr/lib).
const UNIT: &str = "/lib/systemd/system/railwatch.service";

/// The unpacked root, commands run in it with chroot.
pub struct Root {
    pub dir: PathBuf,
}

impl Root {
    /// Runs `args` in the root (no standard input, as CI has none):
    /// its output, whatever the exit.
    pub fn output(&self, args: &[&str]) -> Result<Output, String> {
        Command::new("chroot")
            .arg(&self.dir)
            .args(["env", "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C.UTF-8", "MANWIDTH=80"])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("chroot {}: {e}", self.dir.display()))
    }

    /// Runs `args` in the root; its standard output, or an error with
    /// both streams when it fails.
    pub fn run(&self, args: &[&str]) -> Result<String, String> {
        let out = self.output(args)?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() {
            return Err(format!(
                "in the root, {args:?} failed ({}):\n{stdout}{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(stdout)
    }

    /// `apt-get ARGS -y`, echoed with its last lines.
    fn apt(&self, args: &[&str]) -> Result<(), String> {
        let mut all = vec!["apt-get", "-y", "-q", "-o", "Dpkg::Use-Pty=0"];
        all.extend_from_slice(args);
        eprintln!("==> deb: in the root: {}", all.join(" "));
        let stdout = self.run(&all)?;
        for line in stdout.lines().filter(|l| {
            l.starts_with("Setting up")
                || l.starts_with("Removing")
                || l.starts_with("Purging")
                || l.starts_with("Created symlink")
                || l.starts_with("Removed")
        }) {
            eprintln!("    {line}");
        }
        Ok(())
    }

    /// Every path in the root, but apt's and dpkg's own records, caches
    /// and logs, /tmp, and /run (a tmpfs on a host: adduser's and
    /// systemctl's marks there are gone at the next boot).
    pub fn files(&self) -> Result<BTreeSet<String>, String> {
        const SKIP: [&str; 7] =
            ["var/lib/dpkg/", "var/lib/apt/", "var/cache/", "var/log/", "tmp/", "run/", "etc/ld.so.cache"];
        let mut out = BTreeSet::new();
        let mut stack = vec![self.dir.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?.flatten() {
                let path = entry.path();
                let rel = path.strip_prefix(&self.dir).unwrap_or(&path).to_string_lossy().into_owned();
                if SKIP.iter().any(|s| rel.starts_with(s) || format!("{rel}/") == *s) {
                    continue;
                }
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    stack.push(path);
                }
                out.insert(rel);
            }
        }
        Ok(out)
    }

    fn exists(&self, rel: &str) -> bool {
        self.dir.join(rel).symlink_metadata().is_ok()
    }

    /// Copies `deb` into the root's /tmp: its path inside.
    fn put(&self, deb: &Path, name: &str) -> Result<String, String> {
        std::fs::copy(deb, self.dir.join("tmp").join(name)).map_err(|e| format!("{}: {e}", deb.display()))?;
        Ok(format!("/tmp/{name}"))
    }
}

/// Fresh install and the first checks.
pub fn install(root: &Root, deb: &Deb) -> Result<(), String> {
    let name = deb.path.file_name().unwrap_or_default().to_string_lossy().into_owned();
    let inside = root.put(&deb.path, &name)?;
    root.apt(&["install", &inside])?;
    let version = root.run(&["railwatch", "--version"])?;
    if version.trim() != format!("railwatch {}", deb.upstream) {
        return Err(format!("railwatch --version said {version:?}"));
    }
    eprintln!("==> deb: railwatch --version: {}", version.trim());
    let check = root.run(&["railwatch", "watch", "--config", "/etc/railwatch/railwatch.toml", "--check"])?;
    // Valid, and every key at its default (none set from a line of it).
    let from_file = check.lines().skip(1).any(|l| l.contains("railwatch.toml:"));
    if !check.starts_with("/etc/railwatch/railwatch.toml: valid") || from_file {
        return Err(format!("watch --check of the conffile:\n{check}"));
    }
    eprintln!("==> deb: watch --check: {}", check.lines().next().unwrap_or_default());
    // Enabled on install, not started: the postinst has no start.
    let enabled = root.run(&["systemctl", "is-enabled", "railwatch.service"])?;
    if enabled.trim() != "enabled" {
        return Err(format!("systemctl is-enabled railwatch: {enabled:?}"));
    }
    let postinst = std::fs::read_to_string(root.dir.join("var/lib/dpkg/info/railwatch.postinst")).unwrap_or_default();
    if postinst.contains("deb-systemd-invoke start") || postinst.contains("systemctl start") {
        return Err("the postinst starts the service; it must only enable it".into());
    }
    eprintln!("==> deb: railwatch.service enabled, not started");
    // The unit, with its Documentation= man page.
    let verify = root.output(&["systemd-analyze", "verify", UNIT])?;
    let said = format!("{}{}", String::from_utf8_lossy(&verify.stdout), String::from_utf8_lossy(&verify.stderr));
    if !verify.status.success() || said.contains("railwatch") {
        return Err(format!("systemd-analyze verify {UNIT} ({}):\n{said}", verify.status));
    }
    eprintln!("==> deb: systemd-analyze verify {UNIT}: clean");
    man_pages(root)?;
    let complete =
        root.run(&["bash", "-c", ". /usr/share/bash-completion/completions/railwatch && complete -p railwatch"])?;
    eprintln!("==> deb: bash completion: {}", complete.trim());
    Ok(())
}

/// Every installed page read with `man`, each with its NAME and the
/// top page naming every other.
fn man_pages(root: &Root) -> Result<(), String> {
    let dir = root.dir.join("usr/share/man/man1");
    let mut pages: Vec<String> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(".1.gz").map(str::to_owned))
        .filter(|p| p.starts_with("railwatch"))
        .collect();
    pages.sort();
    for page in &pages {
        let text = root.run(&["man", "-P", "cat", page])?;
        if !text.contains("NAME") || !text.contains("SYNOPSIS") {
            return Err(format!("man {page} reads:\n{text}"));
        }
    }
    let top = root.run(&["man", "-P", "cat", "railwatch"])?;
    for page in pages.iter().filter_map(|p| p.strip_prefix("railwatch-")) {
        if !top.contains(page) {
            return Err(format!("man railwatch does not name {page}"));
        }
    }
    eprintln!("==> deb: man pages read: {}", pages.join(", "));
    Ok(())
}

/// `apt remove`: the conffile stays, the rest goes; `apt purge
/// --autoremove`: the root is as before the install.
pub fn remove_and_purge(root: &Root, before: &BTreeSet<String>) -> Result<(), String> {
    root.apt(&["remove", "railwatch"])?;
    // The enablement link stays until a purge (deb-systemd-helper keeps
    // the admin's choice for a reinstall); the unit and program go.
    if root.exists("usr/bin/railwatch") || root.exists(UNIT.trim_start_matches('/')) {
        return Err("apt remove left the binary or the unit".into());
    }
    if !root.exists(CONFFILE) {
        return Err(format!("apt remove took the conffile /{CONFFILE}; only a purge may"));
    }
    eprintln!("==> deb: removed: /{CONFFILE} kept, as a conffile is");
    root.apt(&["purge", "--autoremove", "railwatch"])?;
    let after = root.files()?;
    let left: Vec<&String> = after.difference(before).collect();
    let lost: Vec<&String> = before.difference(&after).collect();
    if !left.is_empty() || !lost.is_empty() {
        return Err(format!("after the purge, left behind: {left:?}; gone that was there before: {lost:?}"));
    }
    eprintln!("==> deb: purged (with its dependencies): nothing left, the root as before the install");
    Ok(())
}

/// The previous build installed, the conffile edited, the new one
/// installed over it with no answer possible (no standard input): the
/// edit must survive, with nothing set aside.
pub fn upgrade(root: &Root, deb: &Deb, previous: &Path) -> Result<(), String> {
    let old = root.put(previous, "previous.deb")?;
    root.apt(&["install", &old])?;
    let conffile = root.dir.join(CONFFILE);
    let edited = std::fs::read_to_string(&conffile).map_err(|e| e.to_string())? + "\ntick_ms = 500\n";
    std::fs::write(&conffile, &edited).map_err(|e| e.to_string())?;
    let name = deb.path.file_name().unwrap_or_default().to_string_lossy().into_owned();
    let new = root.put(&deb.path, &name)?;
    root.apt(&["install", &new])?;
    let installed = root.run(&["dpkg-query", "-W", "-f", "${Version}", "railwatch"])?;
    if installed != deb.version {
        return Err(format!("after the upgrade, railwatch {installed} is installed, not {}", deb.version));
    }
    let now = std::fs::read_to_string(&conffile).map_err(|e| e.to_string())?;
    if now != edited {
        return Err(format!("the upgrade changed the edited /{CONFFILE}"));
    }
    for aside in [".dpkg-new", ".dpkg-dist", ".dpkg-old"] {
        if root.exists(&format!("{CONFFILE}{aside}")) {
            return Err(format!("the upgrade left /{CONFFILE}{aside}"));
        }
    }
    let check = root.run(&["railwatch", "watch", "--config", "/etc/railwatch/railwatch.toml", "--check"])?;
    if !check.lines().any(|l| l.starts_with("  tick_ms") && l.contains("500")) {
        return Err(format!("after the upgrade, watch --check does not read the edit:\n{check}"));
    }
    let enabled = root.run(&["systemctl", "is-enabled", "railwatch.service"])?;
    eprintln!(
        "==> deb: upgraded {} -> {}: the edited conffile kept (tick_ms 500), no prompt, still {}",
        root.run(&["dpkg-deb", "-f", &old, "Version"])?.trim(),
        deb.version,
        enabled.trim()
    );
    Ok(())
}

/// The previous build as a package that sorts before `deb`: its files
/// and scripts, its version `<upstream>-0`.
pub fn relabel(previous: &Path, deb: &Deb, dir: &Path) -> Result<PathBuf, String> {
    let tree = dir.join("previous");
    let _ = std::fs::remove_dir_all(&tree);
    let ok = |what: &str, cmd: &mut Command| crate::run::step(what, cmd.stdout(Stdio::null()));
    ok("deb: unpack the previous build", Command::new("dpkg-deb").arg("-R").arg(previous).arg(&tree))?;
    let control = tree.join("DEBIAN/control");
    let text = std::fs::read_to_string(&control).map_err(|e| format!("{}: {e}", control.display()))?;
    let version = format!("{}-0", deb.upstream);
    let text: Vec<String> = text
        .lines()
        .map(|l| if l.starts_with("Version: ") { format!("Version: {version}") } else { l.to_owned() })
        .collect();
    std::fs::write(&control, text.join("\n") + "\n").map_err(|e| e.to_string())?;
    let out = dir.join(format!("railwatch_{version}.deb"));
    ok("deb: pack it as the previous version", Command::new("dpkg-deb").args(["-Zgzip", "-b"]).arg(&tree).arg(&out))?;
    Ok(out)
}
