//! The guest's initramfs: a newc cpio writer (piped through `gzip`, so the
//! `cpio` tool is not needed), the cached base image and the run's overlay.
//! Concatenated gzip'd cpio archives are one initramfs: the kernel unpacks
//! the base, then the overlay over it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Instant, UNIX_EPOCH};

use super::guest::{BUSYBOX, Built, HOST_TOOLS, RXE_DRIVER};
use super::host::output_of;
use super::kernel::Kernel;
use crate::run::{root, step};

/// What one cpio entry holds.
enum Node {
    Dir,
    /// A host file's content (symlinks followed).
    File(PathBuf),
    Data(Vec<u8>),
    Symlink(String),
    CharDev(u32, u32),
}

/// An initramfs being assembled: guest path (no leading `/`) to entry and
/// mode bits. Parents sort before their children.
#[derive(Default)]
struct Archive {
    entries: BTreeMap<String, (Node, u32)>,
}

impl Archive {
    fn parents(&mut self, path: &str) {
        let mut at = 0;
        while let Some(slash) = path[at..].find('/') {
            let dir = &path[..at + slash];
            self.entries.entry(dir.to_string()).or_insert((Node::Dir, 0o755));
            at += slash + 1;
        }
    }

    fn add(&mut self, path: &str, node: Node, mode: u32) {
        let path = path.trim_start_matches('/');
        self.parents(path);
        self.entries.insert(path.to_string(), (node, mode));
    }

    /// A host file at `guest`, keeping its permission bits.
    fn file(&mut self, guest: &str, host: &Path) -> Result<(), String> {
        let meta = fs::metadata(host).map_err(|e| format!("{}: {e}", host.display()))?;
        self.add(guest, Node::File(host.to_path_buf()), meta.permissions().mode() & 0o7777);
        Ok(())
    }

    /// A host file at the same path in the guest: under its directory's
    /// real path (`/lib` is `usr/lib` on a merged-/usr host) with its own
    /// name (a library's soname link keeps its name).
    fn host_file(&mut self, host: &Path) -> Result<(), String> {
        let parent = host.parent().ok_or_else(|| format!("{}: no directory", host.display()))?;
        let dir = fs::canonicalize(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        let name = host.file_name().ok_or_else(|| format!("{}: no file name", host.display()))?;
        self.file(&dir.join(name).to_string_lossy(), host)
    }

    /// A hash of everything that goes in (host files by path, size and
    /// mtime): the cache key of a stored image.
    fn key(&self) -> Result<u64, String> {
        let mut h = Fnv::default();
        for (path, (node, mode)) in &self.entries {
            h.write(path.as_bytes());
            h.write(&mode.to_le_bytes());
            match node {
                Node::Dir => h.write(b"d"),
                Node::File(src) => {
                    let meta = fs::metadata(src).map_err(|e| format!("{}: {e}", src.display()))?;
                    let mtime = meta.modified().ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok());
                    h.write(src.to_string_lossy().as_bytes());
                    h.write(&meta.len().to_le_bytes());
                    h.write(&mtime.map_or(0, |t| t.as_nanos()).to_le_bytes());
                    h.write(&meta.ino().to_le_bytes());
                }
                Node::Data(data) => h.write(data),
                Node::Symlink(target) => h.write(target.as_bytes()),
                Node::CharDev(major, minor) => {
                    h.write(&major.to_le_bytes());
                    h.write(&minor.to_le_bytes());
                }
            }
        }
        Ok(h.0)
    }

    /// Writes the archive (newc) through `gzip` to `out`.
    fn write_gz(&self, out: &Path) -> Result<(), String> {
        let tmp = out.with_extension("tmp");
        let file = File::create(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
        let mut gzip = Command::new("gzip")
            .args(["-6", "-n", "-c"])
            .stdin(Stdio::piped())
            .stdout(file)
            .spawn()
            .map_err(|e| format!("vmtest: cannot run gzip: {e}"))?;
        let stdin = gzip.stdin.take().ok_or("gzip: no stdin")?;
        let mut w = BufWriter::new(stdin);
        let written = self.write_newc(&mut w).and_then(|()| w.flush().map_err(|e| format!("gzip: {e}")));
        drop(w);
        let status = gzip.wait().map_err(|e| format!("gzip: {e}"))?;
        written?;
        if !status.success() {
            return Err(format!("gzip failed ({status})"));
        }
        fs::rename(&tmp, out).map_err(|e| format!("{}: {e}", out.display()))
    }

    fn write_newc(&self, w: &mut impl Write) -> Result<(), String> {
        let io = |e: std::io::Error| format!("writing the initramfs: {e}");
        for (ino, (path, (node, mode))) in (1..).zip(&self.entries) {
            let (kind, data, rdev): (u32, Vec<u8>, (u32, u32)) = match node {
                Node::Dir => (0o040000, Vec::new(), (0, 0)),
                Node::File(src) => (0o100000, fs::read(src).map_err(|e| format!("{}: {e}", src.display()))?, (0, 0)),
                Node::Data(data) => (0o100000, data.clone(), (0, 0)),
                Node::Symlink(target) => (0o120000, target.as_bytes().to_vec(), (0, 0)),
                Node::CharDev(major, minor) => (0o020000, Vec::new(), (*major, *minor)),
            };
            let mode = if matches!(node, Node::Symlink(_)) { 0o777 } else { *mode };
            newc_entry(w, ino, kind | mode, path, &data, rdev).map_err(io)?;
        }
        newc_entry(w, 0, 0, "TRAILER!!!", &[], (0, 0)).map_err(io)
    }
}

fn newc_entry(
    w: &mut impl Write,
    ino: u32,
    mode: u32,
    name: &str,
    data: &[u8],
    rdev: (u32, u32),
) -> std::io::Result<()> {
    let nlink = if mode & 0o170000 == 0o040000 { 2 } else { 1 };
    let fields = [ino, mode, 0, 0, nlink, 0, data.len() as u32, 0, 0, rdev.0, rdev.1, name.len() as u32 + 1, 0];
    let mut header = String::from("070701");
    for f in fields {
        let _ = write!(header, "{f:08x}");
    }
    w.write_all(header.as_bytes())?;
    w.write_all(name.as_bytes())?;
    w.write_all(&[0])?;
    let pad = |n: usize| (4 - n % 4) % 4;
    w.write_all(&[0; 3][..pad(header.len() + name.len() + 1)])?;
    w.write_all(data)?;
    w.write_all(&[0; 3][..pad(data.len())])
}

/// FNV-1a, 64 bits: a stable hash for cache keys (std's is not promised
/// to stay the same across releases).
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        // A separator, so ("ab", "c") and ("a", "bc") differ.
        self.0 = (self.0 ^ 0xff).wrapping_mul(0x0100_0000_01b3);
    }
}

/// The shared libraries `bin` needs (and the dynamic loader), as `ldd`
/// names them.
fn ldd(bin: &Path) -> Result<Vec<PathBuf>, String> {
    let out = Command::new("ldd").arg(bin).output().map_err(|e| format!("ldd: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        // "not a dynamic executable": nothing to copy.
        return Ok(Vec::new());
    }
    let mut libs = Vec::new();
    for line in text.lines().map(str::trim) {
        let path = match line.split_once("=>") {
            Some((name, rest)) => {
                let rest = rest.trim();
                if rest.starts_with("not found") {
                    return Err(format!("vmtest: {} needs {} which is not installed", bin.display(), name.trim()));
                }
                rest.split(" (").next().unwrap_or("").trim()
            }
            None => line.split(" (").next().unwrap_or("").trim(),
        };
        if path.starts_with('/') {
            libs.push(PathBuf::from(path));
        }
    }
    Ok(libs)
}

/// The rxe provider, from the ibverbs-providers file list.
fn rxe_provider() -> Result<PathBuf, String> {
    let list = output_of(Command::new("dpkg").args(["-L", "ibverbs-providers"])).unwrap_or_default();
    list.lines()
        .find(|l| l.rsplit('/').next().is_some_and(|f| f.starts_with("librxe-rdmav") && f.ends_with(".so")))
        .map(PathBuf::from)
        .ok_or_else(|| "vmtest: ibverbs-providers lists no librxe-rdmav*.so".to_string())
}

/// The base image's content: the root's directories, busybox and its
/// applet links, the modules, the rxe provider, the host tools and every
/// shared library of those and of the programs under test.
fn base_archive(kernel: &Kernel, built: &[Built]) -> Result<Archive, String> {
    let mut a = Archive::default();
    for dir in ["proc", "sys", "dev", "tmp", "run", "etc", "root"] {
        a.add(dir, Node::Dir, 0o755);
    }
    a.add("dev/console", Node::CharDev(5, 1), 0o600);
    // Merged /usr: /lib and /lib64 are links on the host, so in the guest.
    for dir in ["lib", "lib64", "lib32", "libx32"] {
        let host = Path::new("/").join(dir);
        if let Ok(target) = fs::read_link(&host) {
            a.add(dir, Node::Symlink(target.to_string_lossy().into_owned()), 0o777);
        }
    }
    // busybox in /bin with a link per applet (our ip is /usr/sbin/ip).
    a.file("bin/busybox", Path::new(BUSYBOX))?;
    let applets = output_of(Command::new(BUSYBOX).arg("--list")).ok_or("vmtest: busybox --list failed")?;
    for applet in applets.lines().map(str::trim).filter(|l| !l.is_empty() && *l != "busybox") {
        a.add(&format!("bin/{applet}"), Node::Symlink("busybox".into()), 0o777);
    }
    let mut order = String::new();
    for (name, params, file) in &kernel.modules {
        a.file(&format!("modules/{name}.ko"), file)?;
        let _ = writeln!(order, "{name} {params}");
    }
    a.add("modules/order", Node::Data(order.into_bytes()), 0o644);
    a.add("modules/kernel", Node::Data(kernel.key.clone().into_bytes()), 0o644);
    a.host_file(Path::new(RXE_DRIVER))?;
    let provider = rxe_provider()?;
    a.host_file(&provider)?;
    let mut needs_libs: Vec<PathBuf> = HOST_TOOLS.iter().map(PathBuf::from).collect();
    for tool in &needs_libs {
        a.host_file(tool)?;
    }
    needs_libs.push(provider);
    needs_libs.extend(built.iter().map(|b| b.host.clone()));
    for bin in &needs_libs {
        for lib in ldd(bin)? {
            a.host_file(&lib)?;
        }
    }
    Ok(a)
}

/// The cached base image: rebuilt when anything in it changed (the other
/// base images are removed then).
pub fn base_image(cache: &Path, kernel: &Kernel, built: &[Built]) -> Result<PathBuf, String> {
    let a = base_archive(kernel, built)?;
    let key = a.key()?;
    let image = cache.join(format!("base-{key:016x}.cpio.gz"));
    if image.exists() {
        eprintln!("==> vmtest: base initramfs {} (cached)", image.display());
        return Ok(image);
    }
    let started = Instant::now();
    a.write_gz(&image)?;
    eprintln!("==> vmtest: base initramfs {} built in {:.1} s", image.display(), started.elapsed().as_secs_f64());
    for entry in fs::read_dir(cache).map_err(|e| format!("{}: {e}", cache.display()))?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("base-") && entry.path() != image {
            let _ = fs::remove_file(entry.path());
        }
    }
    Ok(image)
}

/// Copies `bin` to `dst` without its debug info (a debug railwatch is
/// ~60 MB, ~10 without).
fn stripped(bin: &Path, dst: &Path) -> Result<(), String> {
    step("strip", Command::new("objcopy").arg("--strip-debug").arg(bin).arg(dst))
}

/// This run's overlay: /init, `lib.sh` and `traffic.sh`, the scripts of
/// `cases` and their list (the order they run in), the programs under
/// test.
pub fn overlay_image(run_dir: &Path, built: &[Built], cases: &[&str]) -> Result<PathBuf, String> {
    let vm = root().join("xtask/vm");
    let mut a = Archive::default();
    a.add("init", Node::File(vm.join("init.sh")), 0o755);
    a.file("vm/lib.sh", &vm.join("lib.sh"))?;
    a.file("vm/traffic.sh", &vm.join("traffic.sh"))?;
    let mut list = String::new();
    for name in cases {
        let script = vm.join(format!("cases/{name}.sh"));
        a.file(&format!("vm/cases/{name}.sh"), &script)?;
        let _ = writeln!(list, "{name}");
    }
    a.add("vm/cases.list", Node::Data(list.into_bytes()), 0o644);
    for program in built {
        let name = program.guest.rsplit('/').next().unwrap_or(program.guest);
        let copy = run_dir.join(name);
        stripped(&program.host, &copy)?;
        a.add(program.guest, Node::File(copy), 0o755);
    }
    let image = run_dir.join("overlay.cpio.gz");
    a.write_gz(&image)?;
    Ok(image)
}

/// `initrd.img` in `run_dir`: the base image, then the overlay. Returns it
/// and its size.
pub fn initrd(run_dir: &Path, base: &Path, overlay: &Path) -> Result<(PathBuf, usize), String> {
    let initrd = run_dir.join("initrd.img");
    let mut image = fs::read(base).map_err(|e| format!("{}: {e}", base.display()))?;
    image.extend(fs::read(overlay).map_err(|e| format!("{}: {e}", overlay.display()))?);
    fs::write(&initrd, &image).map_err(|e| format!("{}: {e}", initrd.display()))?;
    Ok((initrd, image.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The newc layout: a 110-byte header, the name NUL-terminated and
    /// padded to 4, the data padded to 4, and parents before children.
    #[test]
    fn newc_entries_are_aligned_and_parents_come_first() {
        let mut a = Archive::default();
        a.add("/vm/cases.list", Node::Data(b"flap\n".to_vec()), 0o644);
        let mut out = Vec::new();
        a.write_newc(&mut out).unwrap();
        let text = String::from_utf8_lossy(&out);
        let vm = text.find("vm\0").unwrap();
        let list = text.find("vm/cases.list\0").unwrap();
        assert!(vm < list, "the parent directory comes first");
        assert_eq!(&out[..6], b"070701");
        // Header (110) + "vm\0" (3) padded to 116; the directory has no data.
        assert_eq!(&out[116..122], b"070701");
        let trailer = text.find("TRAILER!!!").unwrap();
        assert_eq!(out.len() % 4, 0);
        assert!(trailer > list);
        assert!(text.contains("flap\n"));
    }

    #[test]
    fn fnv_separates_the_pieces_it_is_fed() {
        let (mut one, mut two) = (Fnv::default(), Fnv::default());
        one.write(b"ab");
        one.write(b"c");
        two.write(b"a");
        two.write(b"bc");
        assert_ne!(one.0, two.0);
    }
}
