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
//! One job per file:
//!
//! - `host.rs`: the host packages the VM is built from;
//! - `kernel.rs`: the kernel package, its ELF image and its modules;
//! - `guest.rs`: the programs that go into the guest (host tools, the
//!   programs under test and how each is built);
//! - `initramfs.rs`: the cpio writer, the base image and the run's overlay;
//! - `boot.rs`: the qemu command, the run with its timeout;
//! - `progress.rs`: the results file read live, the markers protocol;
//! - `cases/`: the case table and the host-side checks, a file per group;
//! - `json.rs`: the few JSON fields the host reads (xtask is std-only).
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
//!   `modules/*.ko` (the modules `kernel.rs` lists and their dependencies,
//!   read from each module's `.modinfo` section, and `modules/order`, the
//!   load order) and an `ok` stamp naming that module list. The unpacked
//!   package (~400 MB) is deleted once those are taken; other kernels'
//!   directories are removed when a new one is complete.
//! - `base-<key>.cpio.gz`: the base initramfs: busybox-static and its applet
//!   links in `/bin`, the modules, the rxe provider and
//!   `/etc/libibverbs.d/rxe.driver`, the host tools (`ip`, `rdma`,
//!   `ibv_devinfo`, `ibv_asyncwatch`, `stdbuf` and its `libstdbuf.so`), and
//!   every shared library (`ldd`) plus the dynamic loader of those and of
//!   the programs under test. The key hashes every file's host path, size
//!   and mtime, so a package upgrade or a new library rebuilds it; the
//!   programs under test are not part of it.
//! - `run/`: this run's files: `overlay.cpio.gz` (`/init` from
//!   `xtask/vm/init.sh`, `xtask/vm/lib.sh` and the case scripts
//!   `xtask/vm/cases/*.sh`, the case list, and the programs under test:
//!   `railwatch`, the verbs backend's `system` test binary and its
//!   `gate_latency` example (built optimised: it measures), the traffic
//!   engine and `stamp`, all with their debug info stripped), `initrd.img` (base then overlay: concatenated
//!   gzip'd cpio archives are one initramfs), `results.txt` and
//!   `console.log`.
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
//! seconds (default 300); a warm run takes 2–3 min in all, 90–115 s of it
//! the traffic cases.
//!
//! # How results come back
//!
//! The guest's `/init` loads the modules, creates `veth0`/`veth1`, adds
//! `rxe0` on `veth0`, waits for its port to be ACTIVE, runs each case and
//! powers off. It writes line markers to `ttyS1` (`progress.rs` reads them;
//! the protocol is at the top of `xtask/vm/lib.sh`). The host reads the
//! file while the VM runs and judges each case as its `END` arrives; every
//! wait in the guest is a poll with a deadline, never a sleep.
//!
//! The cases (`cases::CASES`, `cargo xtask vmtest CASE...` runs some) run
//! in that order, those that remove devices last; after each one the guest
//! restores the baseline (`veth0`/`veth1` up, `rxe0` ACTIVE, nothing left
//! running), and a case that cannot leave it so fails. A case can be marked
//! pending (a feature railwatch does not have yet): it still runs and
//! prints its measurements, but a failure is reported as skipped, and a
//! pass says the mark can go.
//!
//! The traffic cases (`traffic_*`, last) run a C++ transfer engine over two
//! bridged rails of four rxe devices, through cable pulls (of a rail's own
//! cable and of its far end's), a burst ahead of a `PORT_ACTIVE`, device
//! removal and an address change, next to the one-event-per-wake-up loop
//! and the seed's fixed loop; the latencies are measured from the kernel's
//! own time of each event (a kprobe on `ib_dispatch_event`, `ktrace_start`
//! in `xtask/vm/traffic.sh`); their figures, the data-path breaker's and
//! the ledger's included, go to
//! `target/vmtest/traffic.json` (`cases/traffic.rs`).
//!
//! # Adding a case, adding a guest-side tool
//!
//! A case is a script `xtask/vm/cases/<name>.sh`, a check function in the
//! file of its group under `cases/` and an entry in `cases::CASES`; the
//! steps are in the doc of `cases/mod.rs`. A program a case runs in the
//! guest besides railwatch (a traffic engine, a probe) is an entry in
//! `guest::PROGRAMS` (built by a function there, copied stripped into the
//! overlay at its guest path) or, for a Debian package's binary,
//! `guest::HOST_TOOLS` (copied into the base image, its package added to
//! the host packages); its shared libraries follow by `ldd` either way. A
//! kernel module the case needs is one more entry in `kernel.rs`'s module
//! list (its dependencies follow from `.modinfo`).

use std::fs;
use std::time::{Duration, Instant};

mod boot;
mod cases;
mod guest;
mod host;
mod initramfs;
mod json;
mod kernel;
mod progress;

use crate::run::target_dir;
use cases::{CASES, Case, Judge};

/// Command-line options.
struct Options {
    timeout: Duration,
    cases: Vec<&'static Case>,
}

fn options(args: &[String]) -> Result<Options, String> {
    let mut timeout = Duration::from_secs(300);
    let mut cases = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        if arg == "--dev" {
            guest::optimise(false);
        } else if arg == "--timeout" {
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

/// `cargo xtask vmtest [--timeout S] [--dev] [CASE...]`.
pub fn run(args: &[String]) -> Result<(), String> {
    let started = Instant::now();
    let opts = options(args)?;
    host::host_packages()?;
    let cache = target_dir().join("vm-cache");
    let kernel = kernel::kernel(&cache)?;
    let built = guest::build()?;
    let run_dir = cache.join("run");
    if run_dir.exists() {
        fs::remove_dir_all(&run_dir).map_err(|e| format!("{}: {e}", run_dir.display()))?;
    }
    host::mkdir(&run_dir)?;
    let base = initramfs::base_image(&cache, &kernel, &built)?;
    let names: Vec<&str> = opts.cases.iter().map(|c| c.name).collect();
    let overlay = initramfs::overlay_image(&run_dir, &built, &names)?;
    let (initrd, size) = initramfs::initrd(&run_dir, &base, &overlay)?;
    let prepared = started.elapsed();
    eprintln!("==> vmtest: prepared in {:.1} s (initramfs {:.1} MiB)", prepared.as_secs_f64(), mib(size));

    let mut judge = Judge::new(&opts.cases);
    let vm = boot::boot(&kernel.vmlinux, &initrd, &run_dir, opts.timeout, &mut |ended| judge.ended(ended))?;
    judge.not_run();
    judge.write_figures()?;
    let (passed, failed, skipped) = judge.tally();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_take_cases_by_name_or_number_and_reject_the_rest() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let all = options(&[]).unwrap();
        assert_eq!((all.cases.len(), all.timeout), (CASES.len(), Duration::from_secs(300)));
        let some = options(&args(&["flap", "4", "--timeout", "30"])).unwrap();
        let names: Vec<&str> = some.cases.iter().map(|c| c.name).collect();
        assert_eq!(names, ["flap", "rdma_link_delete"]);
        assert_eq!(some.timeout, Duration::from_secs(30));
        assert!(options(&args(&["nope"])).err().is_some_and(|e| e.contains("cases: status, flap")));
        assert!(options(&args(&["--timeout"])).is_err());
    }

    #[test]
    fn every_case_has_a_script_and_a_unique_name_and_id() {
        let vm = crate::run::root().join("xtask/vm/cases");
        for (i, case) in CASES.iter().enumerate() {
            assert!(vm.join(format!("{}.sh", case.name)).is_file(), "no script for {}", case.name);
            for other in &CASES[i + 1..] {
                assert!(case.name != other.name && case.id != other.id, "{} and {} clash", case.name, other.name);
            }
        }
    }
}
