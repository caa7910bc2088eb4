//! The guest's kernel: the current Debian kernel package, downloaded once
//! (`apt-get download`, never installed on the host), its ELF image taken
//! out of `vmlinuz` and the modules of [`MODULES`] with their dependencies
//! (read from each module's `.modinfo` section) put in load order. All of it
//! is cached under `target/vm-cache/<package>_<version>/`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use super::host::{apt_update, mkdir, output_bytes, output_of};
use crate::run::step;

/// The Debian package whose dependency names the current kernel package.
const KERNEL_META: &str = "linux-image-amd64";

/// Kernel modules in load order, with their parameters; dependencies found
/// in `.modinfo` are loaded before the module that needs them.
const MODULES: [(&str, &str); 9] = [
    ("veth", ""),
    ("dummy", "numdummies=0"),
    // rxe asks the crypto layer for crc32: load it explicitly.
    ("crc32_generic", ""),
    ("ib_core", ""),
    ("ib_uverbs", ""),
    ("udp_tunnel", ""),
    ("ip6_udp_tunnel", ""),
    ("rdma_rxe", ""),
    // The traffic cases' rails: veths on bridges, a cable pull a port down.
    ("bridge", ""),
];

/// The cached kernel: the ELF image and the modules in load order.
pub struct Kernel {
    /// `<package>_<version>`: the cache key.
    pub key: String,
    /// The ELF kernel qemu starts through its PVH entry point.
    pub vmlinux: PathBuf,
    /// (name, parameters, file), in load order.
    pub modules: Vec<(String, String, PathBuf)>,
}

/// The current kernel package and its version, from the package lists.
fn lookup_kernel() -> Option<(String, String)> {
    let deps = output_of(Command::new("apt-cache").args(["depends", KERNEL_META]))?;
    let package = deps
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Depends: "))
        .find(|p| p.starts_with("linux-image-") && !p.starts_with('<'))?
        .to_string();
    let show = output_of(Command::new("apt-cache").args(["show", "--no-all-versions", &package]))?;
    let version = show.lines().find_map(|l| l.strip_prefix("Version: "))?.trim().to_string();
    Some((package, version))
}

/// A description of [`MODULES`], stored in the kernel's `ok` stamp.
fn module_spec() -> String {
    MODULES.iter().map(|(m, p)| format!("{m} {p}\n")).collect()
}

/// The kernel of the current package: from the cache when its `ok` stamp
/// names today's module list, else prepared afresh (and other kernels'
/// directories removed).
pub fn kernel(cache: &Path) -> Result<Kernel, String> {
    let (package, version) = match lookup_kernel() {
        Some(found) => found,
        None => {
            apt_update()?;
            lookup_kernel().ok_or_else(|| format!("vmtest: apt-cache names no kernel package for {KERNEL_META}"))?
        }
    };
    let key = format!("{package}_{version}");
    let dir = cache.join(&key);
    let vmlinux = dir.join("vmlinux");
    let stamp = dir.join("ok");
    let spec = module_spec();
    if fs::read_to_string(&stamp).ok().as_deref() != Some(spec.as_str()) || !vmlinux.exists() {
        let started = Instant::now();
        prepare_kernel(&dir, &package, &version)?;
        fs::write(&stamp, &spec).map_err(|e| format!("{}: {e}", stamp.display()))?;
        eprintln!("==> vmtest: kernel {key} prepared in {:.1} s", started.elapsed().as_secs_f64());
        remove_other_kernels(cache, &key)?;
    } else {
        eprintln!("==> vmtest: kernel {key} (cached)");
    }
    let order = fs::read_to_string(dir.join("modules/order")).map_err(|e| format!("{key}: modules/order: {e}"))?;
    let modules = order
        .lines()
        .map(|l| {
            let (name, params) = l.split_once(' ').unwrap_or((l, ""));
            (name.to_string(), params.to_string(), dir.join(format!("modules/{name}.ko")))
        })
        .collect();
    Ok(Kernel { key, vmlinux, modules })
}

/// Other kernels' caches are stale once a new one is complete.
fn remove_other_kernels(cache: &Path, key: &str) -> Result<(), String> {
    for entry in fs::read_dir(cache).map_err(|e| format!("{}: {e}", cache.display()))?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("linux-image-") && name != key {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
    Ok(())
}

/// Downloads (unless cached) and unpacks the kernel package, and takes the
/// ELF kernel and the modules from it.
fn prepare_kernel(dir: &Path, package: &str, version: &str) -> Result<(), String> {
    mkdir(dir)?;
    let find_deb =
        || fs::read_dir(dir).ok()?.flatten().map(|e| e.path()).find(|p| p.extension().is_some_and(|x| x == "deb"));
    let deb = match find_deb() {
        Some(deb) => deb,
        None => {
            let download = || {
                step(
                    "apt-get download (kernel)",
                    Command::new("apt-get")
                        // Root downloads into our directory, no `_apt` sandbox warning.
                        .args(["download", "-q", "-o", "APT::Sandbox::User=root", &format!("{package}={version}")])
                        .current_dir(dir),
                )
            };
            if download().is_err() {
                apt_update()?;
                download()?;
            }
            find_deb().ok_or_else(|| format!("vmtest: apt-get download left no .deb in {}", dir.display()))?
        }
    };
    let unpacked = dir.join("unpacked");
    if unpacked.exists() {
        fs::remove_dir_all(&unpacked).map_err(|e| format!("{}: {e}", unpacked.display()))?;
    }
    step("dpkg-deb -x (kernel)", Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&unpacked))?;
    let result = take_from_package(dir, &unpacked);
    let _ = fs::remove_dir_all(&unpacked);
    result
}

/// The first entry of `dir` whose path `pick` accepts.
fn first_entry(dir: &Path, pick: impl Fn(&Path) -> bool) -> Result<Option<PathBuf>, String> {
    Ok(fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?.flatten().map(|e| e.path()).find(|p| pick(p)))
}

/// The ELF kernel and the modules (decompressed, in `modules/`, with their
/// load order in `modules/order`) from the unpacked package.
fn take_from_package(dir: &Path, unpacked: &Path) -> Result<(), String> {
    let vmlinuz = first_entry(&unpacked.join("boot"), |p| {
        p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-"))
    })?
    .ok_or("vmtest: no boot/vmlinuz-* in the kernel package")?;
    extract_vmlinux(&vmlinuz, &dir.join("vmlinux"))?;

    let release = first_entry(&unpacked.join("lib/modules"), |_| true)?
        .ok_or("vmtest: no lib/modules/<release> in the kernel package")?;
    let mut by_name = HashMap::new();
    index_modules(&release.join("kernel"), &mut by_name)?;
    let mut order = Vec::new();
    for (name, _) in MODULES {
        add_module(name, &by_name, &mut order, 0)?;
    }
    let modules = dir.join("modules");
    if modules.exists() {
        fs::remove_dir_all(&modules).map_err(|e| format!("{}: {e}", modules.display()))?;
    }
    mkdir(&modules)?;
    let mut list = String::new();
    for name in &order {
        let src = &by_name[name];
        let dst = modules.join(format!("{name}.ko"));
        if src.extension().is_some_and(|x| x == "xz") {
            let out = File::create(&dst).map_err(|e| format!("{}: {e}", dst.display()))?;
            step("xz -d (module)", Command::new("xz").arg("-dc").arg(src).stdout(out))?;
        } else {
            fs::copy(src, &dst).map_err(|e| format!("{}: {e}", src.display()))?;
        }
        let params = MODULES.iter().find(|(m, _)| m == name).map_or("", |(_, p)| p);
        let _ = writeln!(list, "{name} {params}");
    }
    fs::write(modules.join("order"), list).map_err(|e| format!("modules/order: {e}"))
}

/// The ELF kernel inside a `vmlinuz`: the xz stream from its magic bytes.
fn extract_vmlinux(vmlinuz: &Path, out: &Path) -> Result<(), String> {
    const XZ_MAGIC: [u8; 6] = [0xFD, 0x37, 0x7A, 0x58, 0x5A, 0x00];
    let image = fs::read(vmlinuz).map_err(|e| format!("{}: {e}", vmlinuz.display()))?;
    let at = image
        .windows(XZ_MAGIC.len())
        .position(|w| w == XZ_MAGIC)
        .ok_or_else(|| format!("vmtest: no xz stream in {}", vmlinuz.display()))?;
    let tmp = out.with_extension("tmp");
    let file = File::create(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    // --single-stream: the kernel's size trailer follows the stream.
    let mut child = Command::new("xz")
        .args(["-dc", "--single-stream"])
        .stdin(Stdio::piped())
        .stdout(file)
        .spawn()
        .map_err(|e| format!("vmtest: cannot run xz: {e}"))?;
    let mut stdin = child.stdin.take().ok_or("xz: no stdin")?;
    // xz stops reading at the end of the stream: a broken pipe is expected.
    let written = stdin.write_all(&image[at..]).or_else(|e| match e.kind() {
        std::io::ErrorKind::BrokenPipe => Ok(()),
        _ => Err(e),
    });
    drop(stdin);
    let status = child.wait().map_err(|e| format!("xz: {e}"))?;
    if !status.success() || written.is_err() {
        return Err(format!("vmtest: xz could not decompress the kernel in {} ({status})", vmlinuz.display()));
    }
    let mut magic = [0u8; 4];
    File::open(&tmp).and_then(|mut f| f.read_exact(&mut magic)).map_err(|e| format!("{}: {e}", tmp.display()))?;
    if magic != *b"\x7fELF" {
        return Err(format!("vmtest: the xz stream in {} is not an ELF kernel", vmlinuz.display()));
    }
    fs::rename(&tmp, out).map_err(|e| format!("{}: {e}", out.display()))
}

/// Module name (`-` read as `_`) to file, for every module under `dir`.
fn index_modules(dir: &Path, by_name: &mut HashMap<String, PathBuf>) -> Result<(), String> {
    for entry in fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?.flatten() {
        let path = entry.path();
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            index_modules(&path, by_name)?;
            continue;
        }
        let file = entry.file_name().to_string_lossy().into_owned();
        if let Some(stem) = file.strip_suffix(".ko").or_else(|| file.strip_suffix(".ko.xz")) {
            by_name.insert(stem.replace('-', "_"), path);
        }
    }
    Ok(())
}

/// Appends `name` to `order` after its dependencies.
fn add_module(
    name: &str,
    by_name: &HashMap<String, PathBuf>,
    order: &mut Vec<String>,
    depth: usize,
) -> Result<(), String> {
    let name = name.replace('-', "_");
    if order.contains(&name) {
        return Ok(());
    }
    if depth > 32 {
        return Err(format!("vmtest: module dependencies loop at {name}"));
    }
    let path = by_name.get(&name).ok_or_else(|| format!("vmtest: the kernel package has no module {name}"))?;
    let mut data = fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if path.extension().is_some_and(|x| x == "xz") {
        data = output_bytes(Command::new("xz").arg("-dc").arg(path))?;
    }
    for dep in modinfo(&data, "depends").split(',').filter(|d| !d.is_empty()) {
        add_module(dep, by_name, order, depth + 1)?;
    }
    order.push(name);
    Ok(())
}

/// A `key=value` of a module's `.modinfo` ELF section ("" when absent).
fn modinfo(elf: &[u8], key: &str) -> String {
    let u16_at = |at: usize| elf.get(at..at + 2).map_or(0, |b| u16::from_le_bytes([b[0], b[1]]) as usize);
    let u32_at = |at: usize| elf.get(at..at + 4).map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
    let u64_at = |at: usize| {
        elf.get(at..at + 8).map_or(0, |b| u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) as usize)
    };
    // ELF64 little-endian: section headers at e_shoff, e_shentsize each.
    if elf.get(..5) != Some(b"\x7fELF\x02") {
        return String::new();
    }
    let (shoff, shentsize, shnum, shstrndx) = (u64_at(0x28), u16_at(0x3A), u16_at(0x3C), u16_at(0x3E));
    let section = |i: usize| {
        let h = shoff + i * shentsize;
        (u32_at(h), u64_at(h + 0x18), u64_at(h + 0x20))
    };
    let (_, strtab, _) = section(shstrndx);
    for i in 0..shnum {
        let (name, offset, size) = section(i);
        let name_bytes = elf.get(strtab + name..).unwrap_or_default();
        let end = name_bytes.iter().position(|&b| b == 0).unwrap_or(0);
        if &name_bytes[..end] != b".modinfo" {
            continue;
        }
        let body = elf.get(offset..offset + size).unwrap_or_default();
        let prefix = format!("{key}=");
        for item in body.split(|&b| b == 0) {
            if let Some(value) = item.strip_prefix(prefix.as_bytes()) {
                return String::from_utf8_lossy(value).into_owned();
            }
        }
    }
    String::new()
}
