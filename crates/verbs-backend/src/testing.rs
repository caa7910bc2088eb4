//! Test support: the fake `libibverbs.so.1` build.rs compiles, and running
//! a test (or any command) against it. Not part of the stable API.
//!
//! A test binary links libibverbs, so the library it gets is chosen when
//! the process starts. [`rerun_under_fake`] re-executes the current test
//! binary for one test with `LD_LIBRARY_PATH` pointing at the fake and
//! [`CHILD_ENV`] set; in that child it returns `true` and the test runs
//! its body, driving the fake through [`Fake`]:
//!
//! ```no_run
//! use railwatch_verbs_backend::testing::{Fake, FakeLib, rerun_under_fake};
//!
//! // A #[test] function:
//! fn one_device() {
//!     if !rerun_under_fake("one_device", FakeLib::Basic) {
//!         return; // the parent: the child passed
//!     }
//!     let fake = Fake::get();
//!     fake.set_devices(1);
//!     assert_eq!(railwatch_verbs_backend::list_devices().unwrap(), ["mlx5_0"]);
//! }
//! ```
//!
//! For another process (the CLI), [`command_under_fake`] sets up a
//! `Command`; the fake then reads its configuration from the environment
//! (`FAKE_IBVERBS_DEVICES`, `FAKE_IBVERBS_EVENTS`, `FAKE_IBVERBS_LIST_ERRNO`,
//! `FAKE_IBVERBS_OPEN_ERRNO`, documented at the top of fake/fake_ibverbs.c).

use std::ffi::{CStr, CString, OsString, c_char, c_int, c_long, c_longlong, c_void};
use std::path::Path;
use std::process::Command;

/// Set (to the variant's name) in a child re-executed under the fake.
pub const CHILD_ENV: &str = "RAILWATCH_UNDER_FAKE_IBVERBS";

/// Which build of the fake library.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FakeLib {
    /// Without `ibv_query_port_speed`, like rdma-core before 62.
    Basic,
    /// With `ibv_query_port_speed`, like rdma-core 62+.
    PortSpeed,
}

impl FakeLib {
    /// The directory holding this variant's `libibverbs.so.1`.
    ///
    /// # Panics
    ///
    /// When build.rs could not compile the fake (its warning says why).
    pub fn dir(self) -> &'static Path {
        let dir = match self {
            FakeLib::Basic => env!("RAILWATCH_FAKE_IBVERBS_BASIC"),
            FakeLib::PortSpeed => env!("RAILWATCH_FAKE_IBVERBS_PORT_SPEED"),
        };
        assert!(
            !dir.is_empty(),
            "the fake libibverbs was not built: see the build warnings of railwatch-verbs-backend"
        );
        Path::new(dir)
    }

    fn name(self) -> &'static str {
        match self {
            FakeLib::Basic => "basic",
            FakeLib::PortSpeed => "port-speed",
        }
    }
}

/// `LD_LIBRARY_PATH` with the fake's directory first.
pub fn ld_library_path(lib: FakeLib) -> OsString {
    let mut path = OsString::from(lib.dir());
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|p| !p.is_empty()) {
        path.push(":");
        path.push(old);
    }
    path
}

/// Makes `cmd` load the fake instead of the system libibverbs.
pub fn command_under_fake(cmd: &mut Command, lib: FakeLib) -> &mut Command {
    cmd.env("LD_LIBRARY_PATH", ld_library_path(lib)).env(CHILD_ENV, lib.name())
}

/// True in a process re-executed by [`rerun_under_fake`].
pub fn under_fake() -> bool {
    std::env::var_os(CHILD_ENV).is_some()
}

/// In a child under the fake, returns `true`: run the test's body. In the
/// parent, re-runs test `test` (its full name as libtest prints it) alone
/// in the current test binary under the fake, asserts that exactly that one
/// test ran and passed, and returns `false`.
///
/// # Panics
///
/// In the parent, when the child fails, runs no test, or cannot start.
pub fn rerun_under_fake(test: &str, lib: FakeLib) -> bool {
    if under_fake() {
        return true;
    }
    let exe = std::env::current_exe().expect("the path of the test binary");
    let out = command_under_fake(&mut Command::new(&exe), lib)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .output()
        .unwrap_or_else(|e| panic!("cannot re-run {} for {test}: {e}", exe.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("test result: ok. 1 passed"),
        "{test} under the fake libibverbs ({}) failed: {}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        lib.name(),
        out.status,
    );
    false
}

/// Whether `fd` is open with `O_NONBLOCK` set.
pub fn fd_is_nonblocking(fd: std::os::fd::RawFd) -> bool {
    // SAFETY: F_GETFL on an fd number has no memory effects.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    flags >= 0 && flags & libc::O_NONBLOCK != 0
}

/// Counters kept by the fake since the process started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FakeCounters {
    /// `ibv_get_device_list` calls that returned a list.
    pub lists: i64,
    /// `ibv_free_device_list` calls.
    pub lists_freed: i64,
    /// Successful `ibv_open_device` calls.
    pub opens: i64,
    /// `ibv_close_device` calls.
    pub closes: i64,
    /// `ibv_get_async_event` calls, failed ones included.
    pub gets: i64,
    /// `ibv_get_async_event` calls that returned an event.
    pub gets_ok: i64,
    /// `ibv_ack_async_event` calls.
    pub acks: i64,
    /// Port queries through the extended context's `query_port` op.
    pub ext_queries: i64,
    /// Port queries through the exported compatibility `ibv_query_port`.
    pub compat_queries: i64,
    /// `ibv_query_port_speed` calls.
    pub speed_queries: i64,
    /// `ibv_query_device` calls.
    pub device_queries: i64,
}

/// The control API of the fake library loaded in this process, looked up
/// with `dlsym` (test binaries never link it).
#[derive(Debug)]
pub struct Fake {
    lib: *mut c_void,
}

/// Calls a control function of the fake with the given C signature.
macro_rules! fake_call {
    ($fake:expr, $name:literal, fn($($ty:ty),*) -> $ret:ty, $($arg:expr),*) => {{
        let symbol = $fake.symbol($name);
        // SAFETY: fake_ibverbs.c defines this function with this signature.
        let f = unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($ty),*) -> $ret>(symbol) };
        // SAFETY: the arguments are plain values or pointers valid for the call.
        unsafe { f($($arg),*) }
    }};
}

impl Fake {
    /// The fake loaded in this process.
    ///
    /// # Panics
    ///
    /// When the libibverbs loaded is not the fake (the test did not go
    /// through [`rerun_under_fake`]).
    pub fn get() -> Fake {
        // SAFETY: RTLD_NOLOAD only returns a handle to the libibverbs.so.1
        // already loaded; the handle is never closed.
        let lib = unsafe { libc::dlopen(c"libibverbs.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
        assert!(!lib.is_null(), "libibverbs.so.1 is not loaded in this process");
        let fake = Fake { lib };
        // SAFETY: a valid handle and a NUL-terminated name.
        let probe = unsafe { libc::dlsym(fake.lib, c"fake_set_devices".as_ptr()) };
        assert!(!probe.is_null(), "the libibverbs loaded is not the fake: run the test through rerun_under_fake");
        fake
    }

    fn symbol(&self, name: &CStr) -> *mut c_void {
        // SAFETY: a valid handle and a NUL-terminated name.
        let symbol = unsafe { libc::dlsym(self.lib, name.as_ptr()) };
        assert!(!symbol.is_null(), "the fake libibverbs has no {name:?}");
        symbol
    }

    fn check(rc: c_int, what: &str) {
        assert_eq!(rc, 0, "fake libibverbs refused {what}");
    }

    /// Replaces the devices with `n` named `mlx5_0`.., each with one ACTIVE
    /// NDR 4x port. Configure before opening.
    pub fn set_devices(&self, n: usize) {
        let n = c_int::try_from(n).expect("a small device count");
        Self::check(fake_call!(self, c"fake_set_devices", fn(c_int) -> c_int, n), "set_devices");
    }

    /// Renames device `dev`.
    pub fn set_device_name(&self, dev: usize, name: &str) {
        let name = CString::new(name).expect("a name without NUL");
        let rc =
            fake_call!(self, c"fake_set_device_name", fn(c_int, *const c_char) -> c_int, dev as c_int, name.as_ptr());
        Self::check(rc, "set_device_name");
    }

    /// Sets device `dev`'s `ibdev_path` (its sysfs entry, where the
    /// backend finds the PCI address behind the `device` link).
    pub fn set_ibdev_path(&self, dev: usize, path: &Path) {
        let path = CString::new(path.as_os_str().as_encoded_bytes()).expect("a path without NUL");
        let rc =
            fake_call!(self, c"fake_set_ibdev_path", fn(c_int, *const c_char) -> c_int, dev as c_int, path.as_ptr());
        Self::check(rc, "set_ibdev_path");
    }

    /// The node GUID `ibv_query_device` reports for `dev` from its next
    /// open (0: none).
    pub fn set_node_guid(&self, dev: usize, guid: u64) {
        Self::check(
            fake_call!(self, c"fake_set_node_guid", fn(c_int, u64) -> c_int, dev as c_int, guid),
            "set_node_guid",
        );
    }

    /// Makes `ibv_get_device_list` return NULL with `errno` (0: normal).
    pub fn set_list_errno(&self, errno: i32) {
        Self::check(fake_call!(self, c"fake_set_list_errno", fn(c_int) -> c_int, errno), "set_list_errno");
    }

    /// Sets the port count of device `dev` (at most 4).
    pub fn set_ports(&self, dev: usize, ports: u8) {
        let rc = fake_call!(self, c"fake_set_ports", fn(c_int, c_int) -> c_int, dev as c_int, c_int::from(ports));
        Self::check(rc, "set_ports");
    }

    /// What a query of `port` returns from now on: state, `active_speed`,
    /// `active_width` and `active_speed_ex` codes.
    pub fn set_port(&self, dev: usize, port: u8, state: u32, speed: u8, width: u8, speed_ex: u32) {
        let rc = fake_call!(
            self,
            c"fake_set_port",
            fn(c_int, c_int, u32, u32, u32, u32) -> c_int,
            dev as c_int,
            c_int::from(port),
            state,
            u32::from(speed),
            u32::from(width),
            speed_ex
        );
        Self::check(rc, "set_port");
    }

    /// What a query of `port` returns as its state from now on.
    pub fn set_port_state(&self, dev: usize, port: u8, state: u32) {
        let rc = fake_call!(
            self,
            c"fake_set_port_state",
            fn(c_int, c_int, u32) -> c_int,
            dev as c_int,
            c_int::from(port),
            state
        );
        Self::check(rc, "set_port_state");
    }

    /// What `ibv_query_port_speed` returns for `port` (100 Mb/s units), or
    /// the errno it fails with when `errno` is not 0.
    pub fn set_effective_speed(&self, dev: usize, port: u8, speed_100mbps: u64, errno: i32) {
        let rc = fake_call!(
            self,
            c"fake_set_effective_speed",
            fn(c_int, c_int, u64, c_int) -> c_int,
            dev as c_int,
            c_int::from(port),
            speed_100mbps,
            errno
        );
        Self::check(rc, "set_effective_speed");
    }

    /// Makes every port and device query of `dev` fail with `errno` (0: off).
    pub fn set_query_errno(&self, dev: usize, errno: i32) {
        let rc = fake_call!(self, c"fake_set_query_errno", fn(c_int, c_int) -> c_int, dev as c_int, errno);
        Self::check(rc, "set_query_errno");
    }

    /// Takes `dev` out of the device list (`false`, a silent hot-unplug:
    /// its open contexts keep working) or puts it back.
    pub fn set_listed(&self, dev: usize, listed: bool) {
        let rc = fake_call!(self, c"fake_set_listed", fn(c_int, c_int) -> c_int, dev as c_int, c_int::from(listed));
        Self::check(rc, "set_listed");
    }

    /// Sets GID table entry `index` (0..4) of a port; all zeros empties it.
    pub fn set_gid(&self, dev: usize, port: u8, index: usize, raw: [u8; 16]) {
        let rc = fake_call!(
            self,
            c"fake_set_gid",
            fn(c_int, c_int, c_int, *const u8) -> c_int,
            dev as c_int,
            c_int::from(port),
            index as c_int,
            raw.as_ptr()
        );
        Self::check(rc, "set_gid");
    }

    /// Makes `ibv_open_device` of `dev` fail with `errno` (0: off).
    pub fn set_open_errno(&self, dev: usize, errno: i32) {
        let rc = fake_call!(self, c"fake_set_open_errno", fn(c_int, c_int) -> c_int, dev as c_int, errno);
        Self::check(rc, "set_open_errno");
    }

    /// After `after` more `ibv_get_async_event` calls, the next `count`
    /// (-1: all) fail with `errno` without reading an event.
    pub fn set_get_fault(&self, dev: usize, errno: i32, after: i64, count: i64) {
        let rc = fake_call!(
            self,
            c"fake_set_get_fault",
            fn(c_int, c_int, c_long, c_long) -> c_int,
            dev as c_int,
            errno,
            after as c_long,
            count as c_long
        );
        Self::check(rc, "set_get_fault");
    }

    /// Queues an event (raw code, element: port number or object pointer)
    /// on the open device's async fd.
    pub fn push_event(&self, dev: usize, code: u32, element: u64) {
        let rc = fake_call!(self, c"fake_push_event", fn(c_int, u32, u64) -> c_int, dev as c_int, code, element);
        Self::check(rc, "push_event (is the device open?)");
    }

    /// Closes the write end of the open device's event queue: reads then
    /// fail with EIO, as after a device removal.
    pub fn close_event_queue(&self, dev: usize) {
        let rc = fake_call!(self, c"fake_close_event_queue", fn(c_int) -> c_int, dev as c_int);
        Self::check(rc, "close_event_queue (is the device open?)");
    }

    /// One named counter (see [`FakeCounters`]).
    pub fn counter(&self, name: &str) -> i64 {
        let name = CString::new(name).expect("a name without NUL");
        let value = fake_call!(self, c"fake_counter", fn(*const c_char) -> c_longlong, name.as_ptr());
        assert!(value >= 0, "the fake has no counter {name:?}");
        value
    }

    /// Every counter.
    pub fn counters(&self) -> FakeCounters {
        FakeCounters {
            lists: self.counter("lists"),
            lists_freed: self.counter("lists_freed"),
            opens: self.counter("opens"),
            closes: self.counter("closes"),
            gets: self.counter("gets"),
            gets_ok: self.counter("gets_ok"),
            acks: self.counter("acks"),
            ext_queries: self.counter("ext_queries"),
            compat_queries: self.counter("compat_queries"),
            speed_queries: self.counter("speed_queries"),
            device_queries: self.counter("device_queries"),
        }
    }

    fn log(&self, which: c_int) -> Vec<(u32, u64)> {
        let mut events = Vec::new();
        loop {
            let (mut code, mut element) = (0u32, 0u64);
            let rc = fake_call!(
                self,
                c"fake_logged_event",
                fn(c_int, c_long, *mut u32, *mut u64) -> c_int,
                which,
                events.len() as c_long,
                &mut code,
                &mut element
            );
            if rc != 0 {
                return events;
            }
            events.push((code, element));
        }
    }

    /// The events handed out by `ibv_get_async_event`, as (code, element).
    pub fn got(&self) -> Vec<(u32, u64)> {
        self.log(0)
    }

    /// The events passed to `ibv_ack_async_event`, as (code, element).
    pub fn acked(&self) -> Vec<(u32, u64)> {
        self.log(1)
    }
}

/// Defines a `#[test]` that re-runs itself under the fake library `lib`
/// ([`rerun_under_fake`](crate::testing::rerun_under_fake)) and, in that child process, runs `body` with
/// `fake` bound to [`Fake::get`](crate::testing::Fake::get):
/// `fake_test!(name, FakeLib::Basic, |fake| { ... });`
#[doc(hidden)]
#[macro_export]
macro_rules! fake_test {
    ($(#[$meta:meta])* $name:ident, $lib:expr, |$fake:ident| $body:block) => {
        $(#[$meta])*
        #[test]
        fn $name() {
            if !$crate::testing::rerun_under_fake(stringify!($name), $lib) {
                return;
            }
            let $fake = $crate::testing::Fake::get();
            $body
        }
    };
}
