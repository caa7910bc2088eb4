//! `cargo xtask vmtest`: railwatch against the real kernel RDMA stack.
//!
//! A Debian kernel boots in qemu with Soft-RoCE (`rdma_rxe` on a veth pair),
//! and the `verbs` build of railwatch runs in it over rdma-core's real
//! libibverbs and rxe provider, taken from the host's Debian packages (the
//! guest's userland is the host's: the binaries and their libraries are
//! copied as they are). Each case drives the kernel from a guest shell script
//! and the host checks railwatch's own JSON output. The facts this relies on
//! are in the project's shared kernel notes (KERNEL.md).
//!
//! # What is cached where
//!
//! Everything lives under `target/vm-cache/`:
//!
//! - `<kernel package>_<version>/`: the kernel, keyed by the Debian package
//!   version (`apt-cache depends linux-image-amd64` names the package). It
//!   holds the downloaded `.deb` (`apt-get download`; never installed on
//!   the host), `vmlinux` (the ELF kernel: the xz stream inside `vmlinuz`,
//!   from the bytes `FD 37 7A 58 5A 00`, decompressed with `xz`),
//!   `modules/*.ko` (the modules of [`MODULES`] and their dependencies, read
//!   from each module's `.modinfo` section, and `modules/order`, the load
//!   order) and an `ok` stamp naming that module list. The unpacked package
//!   (~400 MB) is deleted once those are taken; other kernels' directories
//!   are removed when a new one is complete.
//! - `base-<key>.cpio.gz`: the base initramfs: busybox-static and its applet
//!   links in `/bin`, the modules, the rxe provider and
//!   `/etc/libibverbs.d/rxe.driver`, `ip`, `rdma`, `ibv_devinfo`,
//!   `ibv_asyncwatch`, `stdbuf` and its `libstdbuf.so`, and every shared library (`ldd`) plus the dynamic
//!   loader of those and of the binaries under test. The key hashes every
//!   file's host path, size and mtime, so a package upgrade or a new library
//!   rebuilds it; the binaries under test are not part of it.
//! - `run/`: this run's files: `overlay.cpio.gz` (`/init` from
//!   `xtask/vm/init.sh`, `xtask/vm/lib.sh` and the case scripts
//!   `xtask/vm/cases/*.sh`, the case list, `railwatch`, the verbs
//!   backend's `system` test binary and its `gate_latency` example (built
//!   optimised: it measures), all with their debug info stripped),
//!   `initrd.img` (base then overlay: concatenated gzip'd cpio archives are
//!   one initramfs), `results.txt` and `console.log`.
//!
//! The initramfs archives are written here (newc format, piped through
//! `gzip`), so the `cpio` tool is not needed.
//!
//! # The boot
//!
//! `qemu-system-x86_64 -kernel vmlinux` starts the ELF kernel through its PVH
//! entry point (no real-mode setup, no in-guest decompression): ~4 s to
//! `/init` under software emulation. `-accel tcg -cpu max` unless
//! `/proc/cpuinfo` shows `vmx` or `svm` (the `/dev/kvm` of these machines
//! is not hardware virtualisation). Two serial ports: `ttyS0` is the console
//! (`run/console.log`: stray stderr, then the kernel's log, dumped at the
//! end because a serial console slows the boot), `ttyS1` carries the
//! results (`run/results.txt`). The whole VM is killed after `--timeout`
//! seconds (default 120); a warm run takes ~12 s in all.
//!
//! # How results come back
//!
//! The guest's `/init` loads the modules, creates `veth0`/`veth1`, adds
//! `rxe0` on `veth0`, waits for its port to be ACTIVE, runs each case and
//! powers off. It writes line markers to `ttyS1` (the protocol is at the
//! top of `xtask/vm/lib.sh`): `BOOT`, `READY`, `CASE name BEGIN`, the case's
//! `OUT label line` (a command's output: railwatch's JSON lines),
//! `STEP label name at=N` (the output had N lines when the case did
//! something, so the host looks for the reaction after it), `RC`, `TIME`,
//! `NOTE`, `FAIL`, then `CASE name END rc=N`, and `DONE`. The host reads
//! the file while the VM runs and judges each case as its `END` arrives;
//! every wait in the guest is a poll with a deadline, never a sleep.
//!
//! The cases ([`CASES`], `cargo xtask vmtest CASE...` runs some) run in
//! that order, those that remove devices last; after each one the guest
//! restores the baseline (`veth0`/`veth1` up, `rxe0` ACTIVE, nothing left
//! running), and a case that cannot leave it so fails. A new case is a
//! script `xtask/vm/cases/<name>.sh` and an entry with its host-side check.
//!
//! The host parses the few JSON fields it needs by string matching (xtask
//! is std-only). A case can be marked pending (`Case::pending`: a feature
//! railwatch does not have yet): it still runs and prints its
//! measurements, but a failure is reported as skipped, and a pass says
//! the mark can go.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::fs::{self, File};
use std::io::{BufWriter, Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, UNIX_EPOCH};

use crate::deps::{installed, is_root};
use crate::run::{cargo, root, step, target_dir};

/// The Debian package whose dependency names the current kernel package.
const KERNEL_META: &str = "linux-image-amd64";

/// Kernel modules in load order, with their parameters; dependencies found
/// in `.modinfo` are loaded before the module that needs them.
const MODULES: [(&str, &str); 8] = [
    ("veth", ""),
    ("dummy", "numdummies=0"),
    // rxe asks the crypto layer for crc32: load it explicitly.
    ("crc32_generic", ""),
    ("ib_core", ""),
    ("ib_uverbs", ""),
    ("udp_tunnel", ""),
    ("ip6_udp_tunnel", ""),
    ("rdma_rxe", ""),
];

/// Host packages the VM is built from (`dpkg-query` checks them):
/// qemu, the guest's shell, rdma-core's tools and providers (the rxe one),
/// `ip` and `rdma`, and `xz` for the kernel image.
const HOST_PACKAGES: [&str; 6] =
    ["qemu-system-x86", "busybox-static", "ibverbs-utils", "ibverbs-providers", "iproute2", "xz-utils"];

/// Host programs copied into the guest at their own paths.
/// `stdbuf` and its preload library line-buffer `ibv_asyncwatch` for the
/// gate_latency case.
const HOST_TOOLS: [&str; 6] = [
    "/usr/sbin/ip",
    "/usr/bin/rdma",
    "/usr/bin/ibv_devinfo",
    "/usr/bin/ibv_asyncwatch",
    "/usr/bin/stdbuf",
    "/usr/libexec/coreutils/libstdbuf.so",
];

const RXE_DRIVER: &str = "/etc/libibverbs.d/rxe.driver";
const BUSYBOX: &str = "/bin/busybox";
/// Where the binaries under test go in the guest.
const GUEST_RAILWATCH: &str = "usr/local/bin/railwatch";
const GUEST_SYSTEM_TESTS: &str = "usr/local/bin/verbs-system-tests";
const GUEST_GATE_LATENCY: &str = "usr/local/bin/gate_latency";

/// The rail every case watches.
const RAIL: &str = "rxe0/1";

/// One case: its guest script is `xtask/vm/cases/<name>.sh`.
struct Case {
    /// The number in the plan (1 status, 2 flap, ...).
    id: u8,
    name: &'static str,
    what: &'static str,
    check: fn(&CaseRun, &mut Verdict),
    /// Some(reason): a failure is reported as skipped.
    pending: Option<&'static str>,
}

/// The cases, in the order they run: the ones that remove devices last.
const CASES: [Case; 10] = [
    Case { id: 1, name: "status", what: "status --json on rxe0", check: check_status, pending: None },
    Case { id: 2, name: "flap", what: "veth0 down/up while watching", check: check_flap, pending: None },
    Case {
        id: 8,
        name: "gate_latency",
        what: "PORT_ACTIVE to gate open, next to ibv_asyncwatch printing it",
        check: check_gate_latency,
        pending: None,
    },
    Case { id: 9, name: "metrics", what: "the flap through /metrics", check: check_metrics, pending: None },
    Case {
        id: 10,
        name: "record",
        what: "watch --record through a flap and a GID change, replayed",
        check: check_record,
        pending: None,
    },
    Case { id: 6, name: "gid_change", what: "an IPv4 address on veth0", check: check_gid_change, pending: None },
    Case {
        id: 7,
        name: "system_tests",
        what: "verbs-backend tests/system.rs in the guest",
        check: check_system_tests,
        pending: None,
    },
    Case {
        id: 3,
        name: "netdev_deleted",
        what: "ip link del veth0 while watching",
        check: check_netdev_deleted,
        pending: None,
    },
    Case {
        id: 4,
        name: "rdma_link_delete",
        what: "rdma link delete rxe0 while watching",
        check: check_rdma_link_delete,
        pending: None,
    },
    Case { id: 5, name: "hotplug_add", what: "rdma link add while watching", check: check_hotplug_add, pending: None },
];

/// Command-line options.
struct Options {
    timeout: Duration,
    cases: Vec<&'static Case>,
}

fn options(args: &[String]) -> Result<Options, String> {
    let mut timeout = Duration::from_secs(120);
    let mut cases = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        if arg == "--timeout" {
            let secs = it.next().and_then(|s| s.parse::<u64>().ok()).ok_or("--timeout needs a number of seconds")?;
            timeout = Duration::from_secs(secs);
        } else if let Some(case) = CASES.iter().find(|c| c.name == arg || c.id.to_string() == *arg) {
            cases.push(case);
        } else {
            let names: Vec<&str> = CASES.iter().map(|c| c.name).collect();
            return Err(format!("vmtest: unknown argument {arg:?} (cases: {})", names.join(", ")));
        }
    }
    if cases.is_empty() {
        cases = CASES.iter().collect();
    }
    Ok(Options { timeout, cases })
}

/// `cargo xtask vmtest [--timeout S] [CASE...]`.
pub fn run(args: &[String]) -> Result<(), String> {
    let started = Instant::now();
    let opts = options(args)?;
    host_packages()?;
    let cache = target_dir().join("vm-cache");
    let kernel = kernel(&cache)?;
    let bins = build()?;
    let run_dir = cache.join("run");
    if run_dir.exists() {
        fs::remove_dir_all(&run_dir).map_err(|e| format!("{}: {e}", run_dir.display()))?;
    }
    mkdir(&run_dir)?;
    let base = base_image(&cache, &kernel, &bins)?;
    let overlay = overlay_image(&run_dir, &bins, &opts.cases)?;
    let initrd = run_dir.join("initrd.img");
    let mut image = fs::read(&base).map_err(|e| format!("{}: {e}", base.display()))?;
    image.extend(fs::read(&overlay).map_err(|e| format!("{}: {e}", overlay.display()))?);
    fs::write(&initrd, &image).map_err(|e| format!("{}: {e}", initrd.display()))?;
    let prepared = started.elapsed();
    eprintln!("==> vmtest: prepared in {:.1} s (initramfs {:.1} MiB)", prepared.as_secs_f64(), mib(image.len()));

    let vm = boot(&kernel.vmlinux, &initrd, &run_dir, &opts)?;

    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    for (_, outcome) in &vm.outcomes {
        match outcome {
            Outcome::Passed => passed += 1,
            Outcome::Failed => failed += 1,
            Outcome::Skipped => skipped += 1,
        }
    }
    let secs = |d: Option<Duration>| d.map_or_else(|| "-".to_string(), |d| format!("{:.2} s", d.as_secs_f64()));
    println!(
        "vmtest: boot {} (qemu start to /init), setup {} (modules, veth, rxe0), cases {}, VM {:.2} s, whole step {:.1} s",
        secs(vm.boot),
        secs(vm.setup),
        secs(vm.cases),
        vm.total.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    println!("vmtest: {passed} cases passed, {failed} failed, {skipped} skipped");
    if failed > 0 || vm.problem.is_some() {
        let why = vm.problem.unwrap_or_else(|| format!("{failed} case(s) failed"));
        return Err(format!("vmtest: {why} (results: {}, console: {})", vm.results.display(), vm.console.display()));
    }
    Ok(())
}

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn mkdir(dir: &Path) -> Result<(), String> {
    fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))
}

// ---- host packages -----------------------------------------------------------

fn apt_update() -> Result<(), String> {
    if !is_root() {
        return Err("vmtest: the package lists lack what is needed; run `sudo apt-get update`".into());
    }
    step("apt-get update", Command::new("apt-get").args(["update", "-q"]))
}

/// Installs the missing host packages (as root), with `apt-get update` only
/// when the first attempt fails.
fn host_packages() -> Result<(), String> {
    let missing: Vec<&str> = HOST_PACKAGES.iter().copied().filter(|p| !installed(p)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    if !is_root() {
        return Err(format!(
            "vmtest: missing host packages: {}. Install them with: sudo apt-get install -y --no-install-recommends {}",
            missing.join(" "),
            missing.join(" ")
        ));
    }
    let install = || {
        step(
            "apt-get install (vmtest)",
            Command::new("apt-get")
                .args(["install", "-y", "-q", "--no-install-recommends"])
                .args(&missing)
                .env("DEBIAN_FRONTEND", "noninteractive"),
        )
    };
    if install().is_err() {
        apt_update()?;
        install()?;
    }
    Ok(())
}

// ---- the kernel --------------------------------------------------------------

/// The cached kernel: the ELF image and the modules in load order.
struct Kernel {
    /// `<package>_<version>`: the cache key.
    key: String,
    vmlinux: PathBuf,
    /// (name, parameters, file), in load order.
    modules: Vec<(String, String, PathBuf)>,
}

fn output_of(cmd: &mut Command) -> Option<String> {
    let out = cmd.output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
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

fn kernel(cache: &Path) -> Result<Kernel, String> {
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
        // Other kernels' caches are stale now.
        for entry in fs::read_dir(cache).map_err(|e| format!("{}: {e}", cache.display()))?.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with("linux-image-") && name != key {
                let _ = fs::remove_dir_all(entry.path());
            }
        }
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

fn take_from_package(dir: &Path, unpacked: &Path) -> Result<(), String> {
    let boot = unpacked.join("boot");
    let vmlinuz = fs::read_dir(&boot)
        .map_err(|e| format!("{}: {e}", boot.display()))?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-")))
        .ok_or("vmtest: no boot/vmlinuz-* in the kernel package")?;
    extract_vmlinux(&vmlinuz, &dir.join("vmlinux"))?;

    let lib_modules = unpacked.join("lib/modules");
    let release = fs::read_dir(&lib_modules)
        .map_err(|e| format!("{}: {e}", lib_modules.display()))?
        .flatten()
        .map(|e| e.path())
        .next()
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

fn output_bytes(cmd: &mut Command) -> Result<Vec<u8>, String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() { Ok(out.stdout) } else { Err(format!("{cmd:?} failed ({})", out.status)) }
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

// ---- the binaries under test -------------------------------------------------

struct Binaries {
    railwatch: PathBuf,
    system_tests: PathBuf,
    /// `crates/verbs-backend/examples/gate_latency.rs`, optimised: it
    /// measures.
    gate_latency: PathBuf,
}

fn build() -> Result<Binaries, String> {
    step("build railwatch (verbs)", cargo().args(["build", "-p", "railwatch", "--features", "verbs"]))?;
    let railwatch = target_dir().join("debug/railwatch");
    step(
        "build the gate_latency probe (release)",
        cargo().args(["build", "--release", "-p", "railwatch-verbs-backend", "--example", "gate_latency"]),
    )?;
    let gate_latency = target_dir().join("release/examples/gate_latency");
    let mut cmd = cargo();
    cmd.args(["test", "-p", "railwatch-verbs-backend", "--test", "system", "--no-run", "--message-format=json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    eprintln!("==> build the verbs backend's system tests: {cmd:?}");
    let out = cmd.output().map_err(|e| format!("cargo test --no-run: {e}"))?;
    if !out.status.success() {
        return Err(format!("building the system tests failed ({})", out.status));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let system_tests = text
        .lines()
        .filter(|l| l.contains("\"reason\":\"compiler-artifact\"") && l.contains("\"name\":\"system\""))
        .find_map(|l| json::raw(l, "executable").filter(|e| *e != "null"))
        .map(PathBuf::from)
        .ok_or("vmtest: cargo named no executable for the system test")?;
    Ok(Binaries { railwatch, system_tests, gate_latency })
}

// ---- initramfs -----------------------------------------------------------------

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

/// The cached base image: rebuilt when anything in it changed.
fn base_image(cache: &Path, kernel: &Kernel, bins: &Binaries) -> Result<PathBuf, String> {
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
    needs_libs.extend([provider, bins.railwatch.clone(), bins.system_tests.clone(), bins.gate_latency.clone()]);
    for bin in &needs_libs {
        for lib in ldd(bin)? {
            a.host_file(&lib)?;
        }
    }
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

/// This run's overlay: /init, the scripts, the case list, the binaries.
fn overlay_image(run_dir: &Path, bins: &Binaries, cases: &[&Case]) -> Result<PathBuf, String> {
    let vm = root().join("xtask/vm");
    let mut a = Archive::default();
    a.add("init", Node::File(vm.join("init.sh")), 0o755);
    a.file("vm/lib.sh", &vm.join("lib.sh"))?;
    let mut list = String::new();
    for case in cases {
        let script = vm.join(format!("cases/{}.sh", case.name));
        a.file(&format!("vm/cases/{}.sh", case.name), &script)?;
        let _ = writeln!(list, "{}", case.name);
    }
    a.add("vm/cases.list", Node::Data(list.into_bytes()), 0o644);
    let railwatch = run_dir.join("railwatch");
    stripped(&bins.railwatch, &railwatch)?;
    a.add(GUEST_RAILWATCH, Node::File(railwatch), 0o755);
    let tests = run_dir.join("verbs-system-tests");
    stripped(&bins.system_tests, &tests)?;
    a.add(GUEST_SYSTEM_TESTS, Node::File(tests), 0o755);
    let probe = run_dir.join("gate_latency");
    stripped(&bins.gate_latency, &probe)?;
    a.add(GUEST_GATE_LATENCY, Node::File(probe), 0o755);
    let image = run_dir.join("overlay.cpio.gz");
    a.write_gz(&image)?;
    Ok(image)
}

// ---- the VM --------------------------------------------------------------------

/// What one VM run gave.
struct VmRun {
    outcomes: Vec<(&'static str, Outcome)>,
    boot: Option<Duration>,
    setup: Option<Duration>,
    cases: Option<Duration>,
    total: Duration,
    /// Something went wrong outside the cases (timeout, setup).
    problem: Option<String>,
    results: PathBuf,
    console: PathBuf,
}

fn hardware_virtualisation() -> bool {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags =
        cpuinfo.lines().any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "vmx" || f == "svm"));
    flags && Path::new("/dev/kvm").exists()
}

fn boot(vmlinux: &Path, initrd: &Path, run_dir: &Path, opts: &Options) -> Result<VmRun, String> {
    let results = run_dir.join("results.txt");
    let console = run_dir.join("console.log");
    let qemu_log = run_dir.join("qemu.log");
    let accel: &[&str] =
        if hardware_virtualisation() { &["-accel", "kvm", "-cpu", "host"] } else { &["-accel", "tcg", "-cpu", "max"] };
    let log = File::create(&qemu_log).map_err(|e| format!("{}: {e}", qemu_log.display()))?;
    let log2 = log.try_clone().map_err(|e| format!("{}: {e}", qemu_log.display()))?;
    let mut cmd = Command::new("qemu-system-x86_64");
    cmd.args(accel)
        .args(["-m", "1024", "-smp", "2", "-display", "none", "-no-reboot", "-nodefaults", "-net", "none"])
        .arg("-serial")
        .arg(format!("file:{}", console.display()))
        .arg("-serial")
        .arg(format!("file:{}", results.display()))
        .arg("-kernel")
        .arg(vmlinux)
        .arg("-initrd")
        .arg(initrd)
        .args(["-append", "console=ttyS0 quiet panic=-1 8250.nr_uarts=2"])
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log2);
    eprintln!("==> vmtest: boot ({}; timeout {} s): {cmd:?}", accel[1], opts.timeout.as_secs());
    let started = Instant::now();
    let child = cmd.spawn().map_err(|e| format!("vmtest: cannot start qemu: {e}"))?;
    let mut live = Live::new(started, &opts.cases);
    let timed_out = follow(child, &results, opts.timeout, &mut live)?;
    let total = started.elapsed();
    let mut problem = None;
    if timed_out {
        problem = Some(format!("the VM did not finish within {} s and was killed", opts.timeout.as_secs()));
    } else if let Some(setup) = &live.setup_failed {
        problem = Some(format!("guest setup failed: {setup}"));
    } else if live.done.is_none() {
        problem = Some("the VM stopped before the guest said DONE".into());
    }
    if let Some(p) = &problem {
        eprintln!("==> vmtest: {p}; the console's last lines:");
        let text = fs::read_to_string(&console).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        for l in &lines[lines.len().saturating_sub(30)..] {
            eprintln!("    | {l}");
        }
    }
    // Cases that never ended.
    if let Some(run) = live.current.take() {
        live.judge(run, Some("did not end (the VM stopped or was killed)"));
    }
    for case in &opts.cases {
        if !live.outcomes.iter().any(|(name, _)| name == &case.name) {
            println!("case {} {}: FAILED: did not run", case.id, case.name);
            live.outcomes.push((case.name, Outcome::Failed));
        }
    }
    let cases = match (live.ready, live.done) {
        (Some(ready), Some(done)) => Some(done.0.saturating_duration_since(ready.0)),
        _ => None,
    };
    Ok(VmRun {
        outcomes: live.outcomes,
        boot: live.boot.map(|b| b.0.duration_since(started)),
        setup: match (live.boot, live.ready) {
            (Some(b), Some(r)) => Some(r.0.duration_since(b.0)),
            _ => None,
        },
        cases,
        total,
        problem,
        results,
        console,
    })
}

/// Reads the results file while qemu runs, feeding complete lines to
/// `live`. True when the VM was killed at the timeout.
fn follow(mut child: Child, results: &Path, timeout: Duration, live: &mut Live) -> Result<bool, String> {
    let started = Instant::now();
    let mut file: Option<File> = None;
    let mut pending = Vec::new();
    let mut read_more = |file: &mut Option<File>, live: &mut Live| {
        if file.is_none() {
            *file = File::open(results).ok();
        }
        if let Some(f) = file {
            let _ = f.read_to_end(&mut pending);
        }
        while let Some(nl) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=nl).collect();
            let text = String::from_utf8_lossy(&line);
            live.line(text.trim_end_matches(['\n', '\r']), Instant::now());
        }
    };
    loop {
        read_more(&mut file, live);
        if child.try_wait().map_err(|e| format!("qemu: {e}"))?.is_some() {
            read_more(&mut file, live);
            return Ok(false);
        }
        if started.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            read_more(&mut file, live);
            return Ok(true);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Outcome {
    Passed,
    Failed,
    Skipped,
}

/// The results protocol, read as it arrives.
struct Live {
    started: Instant,
    cases: Vec<&'static Case>,
    /// Host instant and guest uptime of each marker.
    boot: Option<(Instant, f64)>,
    ready: Option<(Instant, f64)>,
    done: Option<(Instant, f64)>,
    setup_failed: Option<String>,
    current: Option<CaseRun>,
    outcomes: Vec<(&'static str, Outcome)>,
}

/// One case's lines, between its BEGIN and END.
struct CaseRun {
    name: String,
    begin: f64,
    end: Option<f64>,
    rc: Option<i32>,
    lines: Vec<String>,
}

fn uptime_of(line: &str) -> f64 {
    line.split_whitespace().find_map(|w| w.strip_prefix("t=")).and_then(|t| t.parse().ok()).unwrap_or(0.0)
}

impl Live {
    fn new(started: Instant, cases: &[&'static Case]) -> Live {
        Live {
            started,
            cases: cases.to_vec(),
            boot: None,
            ready: None,
            done: None,
            setup_failed: None,
            current: None,
            outcomes: Vec::new(),
        }
    }

    fn line(&mut self, line: &str, at: Instant) {
        let mut words = line.splitn(4, ' ');
        match (words.next(), words.next(), words.next()) {
            (Some("BOOT"), ..) => {
                self.boot = Some((at, uptime_of(line)));
                eprintln!(
                    "==> vmtest: /init started {:.2} s after qemu (guest uptime {:.2} s)",
                    at.duration_since(self.started).as_secs_f64(),
                    uptime_of(line)
                );
            }
            (Some("READY"), ..) => {
                self.ready = Some((at, uptime_of(line)));
                let since = self.boot.map_or(0.0, |b| uptime_of(line) - b.1);
                eprintln!("==> vmtest: rxe0 ACTIVE on veth0 {since:.2} s after /init started");
            }
            (Some("DONE"), ..) => self.done = Some((at, uptime_of(line))),
            (Some("SETUP"), ..) => self.setup_failed = Some(line.trim_start_matches("SETUP ").to_string()),
            (Some("CASE"), Some(name), Some("BEGIN")) => {
                if let Some(run) = self.current.take() {
                    self.judge(run, Some("no END marker"));
                }
                self.current = Some(CaseRun {
                    name: name.to_string(),
                    begin: uptime_of(line),
                    end: None,
                    rc: None,
                    lines: Vec::new(),
                });
            }
            (Some("CASE"), Some(name), Some("END")) => {
                if let Some(mut run) = self.current.take().filter(|r| r.name == name) {
                    run.end = Some(uptime_of(line));
                    run.rc = line.split_whitespace().find_map(|w| w.strip_prefix("rc=")).and_then(|n| n.parse().ok());
                    self.judge(run, None);
                }
            }
            _ => {
                if let Some(run) = &mut self.current {
                    run.lines.push(line.to_string());
                }
            }
        }
    }

    /// Checks a finished case and prints its verdict.
    fn judge(&mut self, run: CaseRun, broken: Option<&str>) {
        let Some(case) = self.cases.iter().find(|c| c.name == run.name) else { return };
        let mut v = Verdict::default();
        if let Some(why) = broken {
            v.fail(why);
        }
        for fail in run.all("FAIL") {
            v.fail(format!("guest: {fail}"));
        }
        if run.end.is_some() && run.rc != Some(0) && run.all("FAIL").is_empty() {
            v.fail(format!("the case script exited {:?}", run.rc));
        }
        if broken.is_none() {
            (case.check)(&run, &mut v);
        }
        let took = run.end.map_or_else(|| "unfinished".to_string(), |end| format!("{:.2} s", end - run.begin));
        let outcome = match (v.problems.is_empty(), case.pending) {
            (true, _) => Outcome::Passed,
            (false, None) => Outcome::Failed,
            (false, Some(_)) => Outcome::Skipped,
        };
        let head = format!("case {} {} ({})", case.id, case.name, case.what);
        match (outcome, case.pending) {
            (Outcome::Passed, None) => println!("{head}: passed ({took})"),
            (Outcome::Passed, Some(_)) => {
                println!("{head}: passed ({took}); it is marked pending: remove the mark in xtask/src/vmtest.rs")
            }
            (Outcome::Failed, _) => println!("{head}: FAILED ({took})"),
            (Outcome::Skipped, reason) => println!("{head}: skipped, {} ({took})", reason.unwrap_or("pending")),
        }
        for time in run.all("TIME") {
            let (what, secs) = time.split_once(' ').unwrap_or((time, "?"));
            println!("    time  {what}: {secs} s");
        }
        for note in run.all("NOTE").into_iter().map(str::to_string).chain(v.notes) {
            println!("    note  {note}");
        }
        let label = if outcome == Outcome::Skipped { "fails today" } else { "problem" };
        for p in &v.problems {
            println!("    {label}  {p}");
        }
        if outcome == Outcome::Failed {
            println!("    the case's output:");
            for l in run.lines.iter().take(200) {
                println!("    | {l}");
            }
        }
        self.outcomes.push((case.name, outcome));
    }
}

impl CaseRun {
    /// The rest of every line starting with `tag ` (`NOTE`, `FAIL`, `TIME`).
    fn all(&self, tag: &str) -> Vec<&str> {
        self.lines.iter().filter_map(|l| l.strip_prefix(tag).and_then(|r| r.strip_prefix(' '))).collect()
    }

    /// The lines of output `label` (`OUT label line`).
    fn out(&self, label: &str) -> Vec<&str> {
        self.all("OUT")
            .into_iter()
            .filter_map(|l| match l.split_once(' ') {
                Some((lab, rest)) if lab == label => Some(rest),
                None if l == label => Some(""),
                _ => None,
            })
            .collect()
    }

    /// `STEP label name at=N`: N.
    fn step(&self, label: &str, name: &str) -> Option<usize> {
        self.all("STEP").into_iter().find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some(label) && w.next() == Some(name))
                .then(|| w.next()?.strip_prefix("at=")?.parse().ok())
                .flatten()
        })
    }

    /// `RC label N`: N.
    fn rc(&self, label: &str) -> Option<i32> {
        self.all("RC").into_iter().find_map(|l| {
            let (lab, n) = l.split_once(' ')?;
            (lab == label).then(|| n.trim().parse().ok()).flatten()
        })
    }

    /// `TIME what S`: S.
    fn time(&self, what: &str) -> Option<f64> {
        self.all("TIME").into_iter().find_map(|l| {
            let (w, s) = l.split_once(' ')?;
            (w == what).then(|| s.trim().parse().ok()).flatten()
        })
    }
}

/// A case's problems (any fails it) and notes.
#[derive(Default)]
struct Verdict {
    problems: Vec<String>,
    notes: Vec<String>,
}

impl Verdict {
    fn fail(&mut self, problem: impl Into<String>) {
        self.problems.push(problem.into());
    }

    fn require(&mut self, ok: bool, problem: impl Into<String>) -> bool {
        if !ok {
            self.fail(problem);
        }
        ok
    }

    fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }
}

// ---- reading railwatch's JSON lines (std only) ---------------------------------

mod json {
    /// The raw value of `"key":` in a JSON object's text: a string without
    /// its quotes (no escapes expected), an array or object with its
    /// brackets, or the number / `true` / `false` / `null` token. The first occurrence: pass
    /// a flat object (see [`object_with`]) when the key also appears nested.
    pub fn raw<'a>(obj: &'a str, key: &str) -> Option<&'a str> {
        let pat = format!("\"{key}\":");
        let at = obj.find(&pat)? + pat.len();
        let rest = obj[at..].trim_start();
        if let Some(s) = rest.strip_prefix('"') {
            return s.find('"').map(|end| &s[..end]);
        }
        if rest.starts_with(['[', '{']) {
            let mut depth = 0;
            for (i, c) in rest.char_indices() {
                match c {
                    '[' | '{' => depth += 1,
                    ']' | '}' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(&rest[..=i]);
                        }
                    }
                    _ => {}
                }
            }
            return None;
        }
        let end = rest.find([',', '}', ']']).unwrap_or(rest.len());
        Some(rest[..end].trim())
    }

    pub fn num(obj: &str, key: &str) -> Option<f64> {
        raw(obj, key)?.parse().ok()
    }

    /// The innermost flat `{...}` of `line` that contains `needle`
    /// (`"rail":"rxe0/1"` in a summary's `rails`).
    pub fn object_with<'a>(line: &'a str, needle: &str) -> Option<&'a str> {
        let at = line.find(needle)?;
        let start = line[..at].rfind('{')?;
        let end = at + line[at..].find('}')?;
        Some(&line[start..=end])
    }

    /// Every `(key, value)` of `pairs` is in `obj` (values compared raw).
    pub fn is(obj: &str, pairs: &[(&str, &str)]) -> bool {
        pairs.iter().all(|(k, v)| raw(obj, k) == Some(*v))
    }
}

/// The first line at or after `from` matching `pairs`.
fn find(lines: &[&str], from: usize, pairs: &[(&str, &str)]) -> Option<usize> {
    lines.iter().enumerate().skip(from).find(|(_, l)| json::is(l, pairs)).map(|(i, _)| i)
}

fn count(lines: &[&str], from: usize, pairs: &[(&str, &str)]) -> usize {
    lines.iter().skip(from).filter(|l| json::is(l, pairs)).count()
}

fn generation(line: &str) -> Option<u64> {
    json::raw(line, "generation")?.parse().ok()
}

/// The last generation `rail` reached in transitions before line `before`.
fn generation_before(lines: &[&str], rail: &str, before: usize) -> Option<u64> {
    lines[..before.min(lines.len())]
        .iter()
        .filter(|l| json::is(l, &[("kind", "transition"), ("rail", rail)]))
        .filter_map(|l| generation(l))
        .next_back()
}

/// Checks shared by every watch case: the attach, the exit status, the
/// summary (the rail as `state`/`available`, its rate, the generation of
/// its last transition, the counters). Returns the summary's rail object.
fn check_watch<'a>(run: &'a CaseRun, v: &mut Verdict, rail: &str, state: &str, available: bool) -> Vec<&'a str> {
    let w = run.out("watch");
    v.require(
        run.rc("watch") == Some(0),
        format!("railwatch watch exited {:?}, not 0 (after SIGTERM)", run.rc("watch")),
    );
    match find(&w, 0, &[("kind", "transition"), ("rail", RAIL), ("by", "attach")]) {
        Some(i) => {
            v.require(
                json::is(w[i], &[("from", "inert"), ("to", "active")]),
                format!("rxe0/1's attach is not inert -> active: {}", w[i]),
            );
        }
        None => v.fail("no attach transition for rxe0/1"),
    }
    let Some(summary) = w.iter().rev().find(|l| json::is(l, &[("kind", "summary")])) else {
        v.fail("no summary line after SIGTERM");
        return w;
    };
    v.require(w.last() == Some(summary), "the summary is not the last line");
    let Some(r) = json::object_with(summary, &format!("\"rail\":\"{rail}\"")) else {
        v.fail(format!("the summary has no rail {rail}"));
        return w;
    };
    let available_s = if available { "true" } else { "false" };
    v.require(
        json::is(r, &[("state", state), ("available", available_s)]),
        format!("summary: {rail} is not {state} with available {available_s}: {r}"),
    );
    if state == "active" {
        v.require(json::num(r, "bandwidth_gbps") == Some(10.0), format!("summary: {rail} is not at 10 Gb/s: {r}"));
    }
    let last = generation_before(&w, rail, w.len());
    v.require(
        generation(r).is_some() && generation(r) == last,
        format!("summary: {rail} generation {:?}, its last transition said {last:?}", generation(r)),
    );
    let (read, acked) = (json::num(summary, "events_read"), json::num(summary, "events_acked"));
    v.require(read.is_some() && read == acked, format!("summary: events_read {read:?} != events_acked {acked:?}"));
    let printed = count(&w, 0, &[("kind", "event")]);
    v.require(
        read.is_some_and(|r| r >= printed as f64),
        format!("summary: events_read {read:?} < {printed} event lines printed"),
    );
    if let Some(dev) = json::object_with(summary, "\"device\":\"rxe0\"")
        && state != "inert"
    {
        v.require(
            json::is(dev, &[("mode", "events"), ("read_errors", "0")]),
            format!("summary: rxe0 not in events mode without read errors: {dev}"),
        );
    }
    w
}

// ---- the cases' host-side checks -----------------------------------------------

/// Case 1: `status --json` shows rxe0/1 as the kernel (and ibv_devinfo) does.
fn check_status(run: &CaseRun, v: &mut Verdict) {
    v.require(run.rc("status") == Some(0), format!("railwatch status exited {:?}", run.rc("status")));
    let out = run.out("status");
    let Some(row) = out.iter().find(|l| json::is(l, &[("kind", "rail"), ("rail", RAIL)])) else {
        v.fail("no rail line for rxe0/1");
        return;
    };
    let want = [
        ("device", "rxe0"),
        ("port", "1"),
        ("port_state", "active"),
        ("port_state_code", "4"),
        ("speed", "fdr10"),
        ("speed_code", "8"),
        ("width", "1x"),
        ("width_code", "1"),
    ];
    for (key, value) in want {
        v.require(json::raw(row, key) == Some(value), format!("rail {key} is {:?}, not {value}", json::raw(row, key)));
    }
    v.require(json::num(row, "bandwidth_gbps") == Some(10.0), format!("bandwidth_gbps not 10: {row}"));
    match out.last() {
        Some(last) if json::is(last, &[("kind", "status"), ("rails", "1"), ("errors", "0")]) => {
            v.require(json::raw(last, "devices") == Some("[\"rxe0\"]"), format!("status devices: {last}"));
        }
        other => v.fail(format!("the last line is not a status line with 1 rail, 0 errors: {other:?}")),
    }
    // The same port through ibv_devinfo (rdma-core's own tool).
    let devinfo = run.out("devinfo");
    let field =
        |name: &str| devinfo.iter().find_map(|l| l.trim().strip_prefix(name)?.trim().strip_prefix(':').map(str::trim));
    for (name, want) in [("state", "PORT_ACTIVE (4)"), ("active_width", "1X (1)"), ("active_speed", "10.0 Gbps (8)")] {
        v.require(field(name) == Some(want), format!("ibv_devinfo {name} is {:?}, not {want}", field(name)));
    }
    // The address, against the kernel's own view (sysfs).
    let sysfs = run.out("sysfs");
    let sys = |key: &str| sysfs.iter().find_map(|l| l.strip_prefix(key)?.strip_prefix('='));
    v.note(format!("kernel: rate {}, link layer {}", sys("rate").unwrap_or("?"), sys("link_layer").unwrap_or("?")));
    match json::raw(row, "address").filter(|a| *a != "null") {
        Some(address) => check_address(v, address, sys("link_layer"), sys("netdev"), &[(0, sys("gid0"))]),
        None => v.fail(format!("status --json has no address for rxe0/1: {row}")),
    }
}

/// A rail's `address` object against the kernel's: link layer, LID 0,
/// netdev, and the GID entries `(index, sysfs text)` given.
fn check_address(
    v: &mut Verdict,
    address: &str,
    link_layer: Option<&str>,
    netdev: Option<&str>,
    gids: &[(u32, Option<&str>)],
) {
    let ll = json::raw(address, "link_layer");
    v.require(
        ll.is_some() && ll.map(str::to_lowercase) == link_layer.map(str::to_lowercase),
        format!("address link_layer {ll:?}, the kernel says {link_layer:?}"),
    );
    v.require(json::raw(address, "lid") == Some("0"), format!("address lid not 0 on RoCE: {address}"));
    v.require(json::raw(address, "netdev") == netdev, format!("address netdev, the kernel says {netdev:?}: {address}"));
    for (index, kernel) in gids {
        let entry = json::object_with(address, &format!("\"index\":{index},"));
        let parsed = |text: Option<&str>| text.and_then(|t| t.parse::<std::net::Ipv6Addr>().ok());
        let ours = parsed(entry.and_then(|e| json::raw(e, "gid")));
        v.require(
            ours.is_some() && ours == parsed(*kernel),
            format!("address GID[{index}] {:?}, the kernel says {kernel:?}: {address}", entry),
        );
        v.require(
            entry.and_then(|e| json::raw(e, "type")) == Some("roce_v2"),
            format!("address GID[{index}] is not roce_v2: {entry:?}"),
        );
    }
}

/// Case 2: down -> PORT_ERR -> paused; up -> PORT_ACTIVE (x2) -> active,
/// generation bumped, available; the second PORT_ACTIVE changes nothing.
fn check_flap(run: &CaseRun, v: &mut Verdict) {
    let w = check_watch(run, v, RAIL, "active", true);
    let (Some(down), Some(up)) = (run.step("watch", "down"), run.step("watch", "up")) else {
        v.fail("the guest recorded no down/up steps");
        return;
    };
    let rail = ("rail", RAIL);
    match find(&w, down, &[("kind", "event"), ("event", "port_err"), ("code", "10"), rail]) {
        Some(i) => {
            v.require(i < up, "the PORT_ERR came after the link was brought up");
        }
        None => v.fail("no port_err event after veth0 went down"),
    }
    let Some(paused) = find(&w, down, &[("kind", "transition"), rail, ("to", "paused")]) else {
        v.fail("no transition to paused after veth0 went down");
        return;
    };
    v.require(
        json::is(w[paused], &[("from", "active"), ("reason", "port_err")]),
        format!("the pause is not active -> paused because port_err: {}", w[paused]),
    );
    v.require(
        find(&w, paused, &[("kind", "available"), rail, ("available", "false")]).is_some(),
        "no available:false after the pause",
    );
    let port_active = count(&w, up, &[("kind", "event"), ("event", "port_active"), ("code", "9"), rail]);
    v.require(port_active >= 1, "no port_active event after veth0 came up");
    v.note(format!("railwatch read PORT_ACTIVE {port_active} time(s) after the link came up (KERNEL.md: 2)"));
    let Some(active) = find(&w, up, &[("kind", "transition"), rail, ("from", "paused"), ("to", "active")]) else {
        v.fail("no transition paused -> active after veth0 came up");
        return;
    };
    v.require(json::raw(w[active], "by") == Some("event"), format!("reactivated not by event: {}", w[active]));
    let before = generation_before(&w, RAIL, active);
    v.require(
        generation(w[active]).zip(before).is_some_and(|(now, was)| now > was),
        format!("no generation bump on reactivation ({before:?} -> {:?})", generation(w[active])),
    );
    v.require(
        find(&w, active, &[("kind", "available"), rail, ("available", "true")]).is_some(),
        "no available:true after the reactivation",
    );
    // The second PORT_ACTIVE (and any GID_CHANGE) must not pause the rail.
    for l in &w[active + 1..] {
        if json::is(l, &[("kind", "transition"), rail]) {
            if json::raw(l, "to") == Some("active") {
                v.note(format!("after the reactivation: {l}"));
            } else {
                v.fail(format!("the rail left active after the reactivation: {l}"));
            }
        }
    }
    // ibv_asyncwatch saw the same kernel events on its own context.
    let aw = run.out("asyncwatch");
    let seen = |name: &str| aw.iter().filter(|l| l.contains(name)).count();
    if aw.iter().any(|l| l.contains("event")) {
        let ours = |name: &str| count(&w, 0, &[("kind", "event"), ("event", name), rail]);
        v.note(format!(
            "ibv_asyncwatch: PORT_ERR x{}, PORT_ACTIVE x{}, GID_CHANGE x{}; railwatch: x{}, x{}, x{}",
            seen("PORT_ERR"),
            seen("PORT_ACTIVE"),
            seen("GID_CHANGE"),
            ours("port_err"),
            ours("port_active"),
            ours("gid_change"),
        ));
        v.require(
            seen("PORT_ERR") == ours("port_err") && seen("PORT_ACTIVE") == ours("port_active"),
            "railwatch and ibv_asyncwatch read different PORT_ERR/PORT_ACTIVE counts",
        );
    } else {
        v.note("ibv_asyncwatch printed no events (nothing to compare)");
    }
}

/// Case 9: `watch --metrics-listen` in the guest; a veth0 flap reads 1, 0,
/// 1 in `railwatch_rail_available`, and the counters follow.
fn check_metrics(run: &CaseRun, v: &mut Verdict) {
    check_watch(run, v, RAIL, "active", true);
    let series = |scrape: &[&str], name: &str| -> Option<f64> {
        scrape.iter().find_map(|l| l.strip_prefix(name).and_then(|rest| rest.trim().parse().ok()))
    };
    let available = r#"railwatch_rail_available{device="rxe0",port="1"}"#;
    let (before, down, after) = (run.out("metrics.before"), run.out("metrics.down"), run.out("metrics.after"));
    for (what, scrape, want) in [("before", &before, 1.0), ("while down", &down, 0.0), ("after", &after, 1.0)] {
        v.require(
            series(scrape, available) == Some(want),
            format!("rail_available {what}: {:?}, want {want}", series(scrape, available)),
        );
    }
    let errs = r#"railwatch_async_events_total{device="rxe0",event="port_err"}"#;
    let actives = r#"railwatch_async_events_total{device="rxe0",event="port_active"}"#;
    v.require(
        series(&down, errs).is_some_and(|n| n >= 1.0),
        format!("no port_err counted while down: {:?}", series(&down, errs)),
    );
    v.require(
        series(&after, actives).is_some_and(|n| n >= 1.0),
        format!("no port_active counted after: {:?}", series(&after, actives)),
    );
    let by_event = r#"railwatch_transitions_total{device="rxe0",port="1",to="active",cause="event"}"#;
    v.require(
        series(&after, by_event) == Some(1.0),
        format!("reactivations by event after: {:?}", series(&after, by_event)),
    );
    let generation = r#"railwatch_rail_generation{device="rxe0",port="1"}"#;
    match (series(&before, generation), series(&after, generation)) {
        (Some(b), Some(a)) if a > b => v.note(format!("generation {b} -> {a}; {} lines per scrape", after.len())),
        other => v.fail(format!("no generation bump in /metrics: {other:?}")),
    }
}

/// `rail from->to cause gN` for every transition line.
fn transitions(lines: &[&str]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| json::is(l, &[("kind", "transition")]))
        .map(|l| {
            let cause = json::raw(l, "reason").or_else(|| json::raw(l, "by")).unwrap_or("?");
            let field = |k| json::raw(l, k).unwrap_or("?");
            format!("{} {}->{} {cause} g{}", field("rail"), field("from"), field("to"), field("generation"))
        })
        .collect()
}

/// Case 10: the recording of a flap and a GID change replays with the
/// live run's transitions, in order.
fn check_record(run: &CaseRun, v: &mut Verdict) {
    let w = check_watch(run, v, RAIL, "active", true);
    let text = check_replay(run, v, &w, "recorded.toml");
    v.require(text.contains("event = \"port_err\""), "the recording has no port_err step");
    v.require(text.contains("gid = {"), "the recording has no gid step");
    v.require(transitions(&w).iter().any(|t| t.contains("gid_change")), "no gid_change bump live");
}

/// The guest's recording (kept beside the run as `keep`) replayed in the
/// guest: its closing expectations hold and its transitions are the live
/// run's `w`, in order. Returns the recording.
fn check_replay(run: &CaseRun, v: &mut Verdict, w: &[&str], keep: &str) -> String {
    let live = transitions(w);
    let text = run.out("recording").join("\n");
    let kept = target_dir().join("vm-cache").join("run").join(keep);
    if let Err(e) = fs::write(&kept, format!("{text}\n")) {
        v.note(format!("could not keep the recording at {}: {e}", kept.display()));
    }
    v.require(
        text.contains("[[device]]") && text.contains("[[expect]]"),
        "the recording has no device or no expectations",
    );
    v.require(
        run.rc("replay") == Some(0),
        format!("the replay exited {:?}: {:?}", run.rc("replay"), run.out("replay.err")),
    );
    let replayed = transitions(&run.out("replay"));
    if replayed == live {
        v.note(format!(
            "the replay's {} transitions are the live run's; recording {} bytes, {} steps",
            live.len(),
            text.len() + 1,
            text.matches("[[step]]").count()
        ));
    } else {
        v.fail(format!("the replay's transitions {replayed:?} are not the live run's {live:?}"));
    }
    text
}

/// Case 6: an IPv4 address -> GID_CHANGE -> a generation bump.
fn check_gid_change(run: &CaseRun, v: &mut Verdict) {
    let w = check_watch(run, v, RAIL, "active", true);
    let Some(added) = run.step("watch", "addr_add") else {
        v.fail("the guest recorded no addr_add step");
        return;
    };
    let rail = ("rail", RAIL);
    v.require(
        find(&w, added, &[("kind", "event"), ("event", "gid_change"), ("code", "18"), rail]).is_some(),
        "no gid_change event after the address was added",
    );
    match find(&w, added, &[("kind", "transition"), rail, ("reason", "gid_change")]) {
        Some(i) => {
            v.require(
                json::is(w[i], &[("from", "active"), ("to", "active")]),
                format!("the gid_change bump changed state: {}", w[i]),
            );
            let before = generation_before(&w, RAIL, i);
            v.require(
                generation(w[i]).zip(before).is_some_and(|(now, was)| now > was),
                format!("no generation bump ({before:?} -> {:?})", generation(w[i])),
            );
        }
        None => v.fail("no transition with reason gid_change after the address was added"),
    }
    let sysfs = run.out("sysfs");
    let sys = |key: &str| sysfs.iter().find_map(|l| l.strip_prefix(key)?.strip_prefix('='));
    v.require(
        sys("gid1").and_then(|g| g.parse::<std::net::Ipv6Addr>().ok()) == "::ffff:10.1.1.1".parse().ok(),
        format!("the kernel's GID[1] is not ::ffff:10.1.1.1: {sysfs:?}"),
    );
    // The new address, read again after the GID_CHANGE.
    match find(&w, added, &[("kind", "address"), ("rail", RAIL)]) {
        Some(i) => {
            let bumped = find(&w, added, &[("kind", "transition"), ("rail", RAIL), ("reason", "gid_change")]);
            v.require(
                bumped.is_some_and(|b| generation(w[b]) == generation(w[i])),
                format!("the address line's generation is not the bump's: {}", w[i]),
            );
            match json::raw(w[i], "address") {
                Some(address) => {
                    check_address(v, address, Some("ethernet"), sys("netdev"), &[(0, sys("gid0")), (1, sys("gid1"))])
                }
                None => v.fail(format!("the address line has no address: {}", w[i])),
            }
        }
        None => v.fail("no address line for rxe0/1 after the address was added"),
    }
    let n = count(&w, 0, &[("kind", "event"), ("event", "gid_change")]);
    v.note(format!("{n} gid_change event(s) in all (IPv6 link-local ones come and go)"));
}

/// Case 7: the verbs backend's system tests pass in the guest.
fn check_system_tests(run: &CaseRun, v: &mut Verdict) {
    let out = run.out("test");
    v.require(run.rc("test") == Some(0), format!("the system test binary exited {:?}", run.rc("test")));
    match out.iter().find(|l| l.starts_with("test result:")) {
        Some(result) => {
            v.require(result.starts_with("test result: ok."), result.to_string());
            v.note(result.to_string());
        }
        None => v.fail("no `test result:` line"),
    }
}

/// Case 8: the figure for docs/PERFORMANCE.md. The probe times, from the
/// same `ip link set veth1 up`, the rail's gate admitting and
/// `ibv_asyncwatch` printing the PORT_ACTIVE; its summary line has the
/// medians and their ratio.
fn check_gate_latency(run: &CaseRun, v: &mut Verdict) {
    let out = run.out("probe");
    v.require(run.rc("probe") == Some(0), format!("the gate_latency probe exited {:?}", run.rc("probe")));
    for line in run.out("probe.err") {
        v.note(format!("probe: {line}"));
    }
    let rounds = out.iter().filter(|l| l.contains("\"round\"")).count();
    let Some(summary) = out.iter().find(|l| json::is(l, &[("summary", "true")])) else {
        v.fail("the probe printed no summary line");
        return;
    };
    let field = |k| json::raw(summary, k).and_then(|s| s.parse::<f64>().ok());
    match (field("median_gate_us"), field("median_asyncwatch_us"), field("ratio"), field("median_extra_us")) {
        (Some(gate), Some(print), Some(ratio), Some(extra)) => {
            v.require(rounds >= 1 && gate > 0.0 && print > 0.0, format!("no timed round: {summary}"));
            v.note(format!(
                "veth1 up -> gate admits: median {:.2} ms; -> ibv_asyncwatch prints PORT_ACTIVE: median {:.2} ms; \
                 ratio {ratio:.3}; gate minus print per round: median {extra:+.0} us ({rounds} rounds)",
                gate / 1000.0,
                print / 1000.0
            ));
        }
        _ => v.fail(format!("the summary line lacks a field: {summary}")),
    }
}

/// What the removal cases expect of railwatch once the device leaves: the
/// rail inert (device_removed) while railwatch still runs, so the kernel's
/// removal did not wait for its exit.
fn check_removed(run: &CaseRun, v: &mut Verdict, step_name: &str, delete: &str) {
    let w = check_watch(run, v, RAIL, "inert", false);
    let Some(at) = run.step("watch", step_name) else {
        v.fail(format!("the guest recorded no {step_name} step"));
        return;
    };
    v.require(
        find(&w, at, &[("kind", "transition"), ("rail", RAIL), ("to", "inert"), ("reason", "device_removed")])
            .is_some(),
        "no transition of rxe0/1 to inert because device_removed",
    );
    match (run.time(delete), run.time(&format!("{delete}_after_sigterm"))) {
        (Some(t), None) => v.note(format!("{delete} returned after {t:.3} s with railwatch watching")),
        (Some(t), Some(after)) => v.fail(format!(
            "{delete} blocked until railwatch was stopped: {t:.3} s in all, {after:.3} s after its SIGTERM"
        )),
        (None, _) => v.fail(format!("{delete} did not return")),
    }
    if let Some(summary) = w.iter().rev().find(|l| json::is(l, &[("kind", "summary")])) {
        let dev = json::object_with(summary, "\"device\":\"rxe0\"");
        v.require(
            dev.is_some_and(|d| json::is(d, &[("mode", "removed")])),
            format!("summary: rxe0 is not in mode removed: {dev:?}"),
        );
    }
}

/// Case 3: veth0 deleted under rxe0.
fn check_netdev_deleted(run: &CaseRun, v: &mut Verdict) {
    check_removed(run, v, "netdev_del", "ip_link_del");
}

/// Case 4: `rdma link delete rxe0`.
fn check_rdma_link_delete(run: &CaseRun, v: &mut Verdict) {
    check_removed(run, v, "rdma_delete", "rdma_link_delete");
}

/// Case 5: a new device (rxe1), then rxe0 deleted and added again.
fn check_hotplug_add(run: &CaseRun, v: &mut Verdict) {
    let w = check_watch(run, v, "rxe1/1", "active", true);
    let text = check_replay(run, v, &w, "recorded-hotplug.toml");
    v.require(text.contains("present = false"), "rxe1 is not declared as appearing later");
    v.require(text.contains("fault = \"unplug\""), "the recording has no unplug of rxe0");
    if let Some(at) = run.step("watch", "add_rxe1") {
        v.require(
            find(&w, at, &[("kind", "transition"), ("rail", "rxe1/1"), ("from", "inert")]).is_some(),
            "rxe1/1 was not attached after `rdma link add rxe1`",
        );
    } else {
        v.fail("the guest recorded no add_rxe1 step");
    }
    match run.step("watch", "readd_rxe0") {
        Some(at) => {
            v.require(
                find(&w, at, &[("kind", "transition"), ("rail", RAIL), ("by", "attach")]).is_some(),
                "rxe0/1 was not attached again after `rdma link add rxe0`",
            );
        }
        None => v.fail("rxe0 was not added again (its delete did not finish)"),
    }
}
