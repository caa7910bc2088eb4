//! # railwatch's C API
//!
//! `include/railwatch.h` (generated from this crate by cbindgen, checked
//! by `tests/header.rs`) and the header-only C++ wrapper
//! `include/railwatch.hpp`, over `librailwatch.so` / `librailwatch.a`.
//! Two ways to embed railwatch, both complete:
//!
//! 1. **The engine keeps its loop** ([`rw_machine`]): it reads its devices'
//!    async events itself (or through [`rw_machine_drain`], the
//!    edge-triggered drain done right), feeds them, its answers and the
//!    time to the machine, and carries out the actions it polls: query
//!    this port, read this link, set this rail available, re-seed it,
//!    close or re-open a device. The whole policy, none of the I/O.
//! 2. **railwatch owns a thread** ([`rw_monitor`]): a monitor over
//!    libibverbs devices (feature `verbs`) or simulated ones ([`rw_sim`]),
//!    calling the engine's selector and subscribers on its thread, with a
//!    snapshot (structs or JSON) any thread reads without waiting.
//!
//! Either way workers check a rail's gate without a call: the header's
//! inline `rw_gate_check_inline` loads the rail's 64-bit state word with
//! acquire semantics and decodes state and generation; the word's layout
//! is the `RW_WORD_*` constants, versioned by `RW_WORD_LAYOUT_VERSION`.
//!
//! ## The boundary
//!
//! - Every function returns an [`rw_status`]; on failure
//!   [`rw_last_error`] says what happened, per thread. The simulator's
//!   context calls ([`rw_sim_open`], ...) answer an errno instead, as
//!   libibverbs does. No panic crosses: each export catches it
//!   (`RW_ERR_PANIC`), and none prints to the host's stderr (the text goes
//!   to the last error and to [`rw_set_log_callback`]'s callback).
//! - NULL and out-of-range arguments are errors, never crashes; every
//!   count is bounded by what can be valid (`RW_MAX_*`) before its array
//!   is read. Enums passed in are plain integers, validated.
//! - Every handle has one destroy function: [`rw_machine_free`],
//!   [`rw_monitor_free`], [`rw_sim_free`], [`rw_gate_free`],
//!   [`rw_string_free`], [`rw_uevents_free`]. Each takes the handle's
//!   address and sets it to NULL (move/drop), so a second destroy through
//!   the same pointer is a no-op.
//! - Callbacks (selector, subscribers) run on the monitor thread only,
//!   those for the devices attached at start included (after
//!   `rw_monitor_start_*` returned); they may call back into the API (a
//!   snapshot, a gate, unsubscribing) without deadlock, because snapshot
//!   and gates are published, not requested. Events are read and
//!   acknowledged before any callback runs.
//! - The simulator ([`rw_sim`]) serves both embeddings: a monitor over it,
//!   or an engine's own loop opening its devices ([`rw_sim_open`]) as it
//!   would libibverbs ones.
//!
//! ## Example (from Rust, as C calls it)
//!
//! ```
//! use railwatch::*;
//!
//! let mut m = std::ptr::null_mut();
//! assert_eq!(rw_machine_new(std::ptr::null(), &mut m), rw_status::RW_OK);
//! let mut dev = 0;
//! let ports = [1u8];
//! assert_eq!(rw_machine_add_device(m, c"mlx5_0".as_ptr(), ports.as_ptr(), 1, 0, &mut dev), rw_status::RW_OK);
//! // Carry out the attach: answer the port query (ACTIVE = 4) and the
//! // link read (NDR = 128, 4x = 2).
//! let mut a: rw_action = unsafe { std::mem::zeroed() };
//! loop {
//!     assert_eq!(rw_machine_poll_action(m, &mut a), rw_status::RW_OK);
//!     match a.kind {
//!         k if k == rw_action_kind::RW_ACTION_NONE as u32 => break,
//!         k if k == rw_action_kind::RW_ACTION_QUERY_PORT as u32 => {
//!             rw_machine_handle_port_state(m, a.device, a.port, 0, 4, 0);
//!         }
//!         k if k == rw_action_kind::RW_ACTION_READ_LINK as u32 => {
//!             rw_machine_handle_link(m, a.device, a.port, 0, 128, 2, 0, 0);
//!         }
//!         _ => {}
//!     }
//! }
//! let mut gate = std::ptr::null_mut();
//! assert_eq!(rw_machine_gate(m, dev, 1, &mut gate), rw_status::RW_OK);
//! let mut t: rw_ticket = unsafe { std::mem::zeroed() };
//! assert_eq!(rw_gate_check(gate, &mut t), rw_status::RW_OK);
//! assert!(t.admitted);
//! // A NULL handle is an error with a message, not a crash.
//! assert_eq!(rw_machine_handle_timeout(std::ptr::null_mut(), 0), rw_status::RW_ERR_NULL);
//! rw_gate_free(&mut gate);
//! rw_machine_free(&mut m);
//! ```
// The C API is this crate's reason to exist: `unsafe` is allowed here, and
// every block says why it is sound (`// SAFETY:`).
#![allow(unsafe_code)]
// C names: `rw_machine`, `RW_OK`.
#![allow(non_camel_case_types)]
// The exports take raw pointers from C, where nothing is `unsafe`: each
// one checks its pointers (NULL is an error) and documents what it needs;
// marking them `unsafe fn` would change nothing for their callers.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

mod action;
mod args;
// The benchmark's own exports (`rw_bench_*`), only in a library built for
// it: `cargo xtask bench` turns the feature on.
#[cfg(feature = "bench-exports")]
mod bench;
mod config;
mod evidence;
mod gate;
mod lifecycle;
mod limits;
mod log_sink;
mod logging;
mod machine;
mod monitor;
mod notify;
mod sim;
mod status;
mod uevents;
mod verbs;
mod version;

pub use action::*;
pub use config::{
    rw_config, rw_config_check, rw_config_free, rw_config_get_bool, rw_config_get_f64, rw_config_get_str,
    rw_config_get_u64, rw_config_new, rw_config_set_bool, rw_config_set_f64, rw_config_set_str, rw_config_set_u64,
};
pub use evidence::*;
pub use gate::*;
pub use lifecycle::*;
pub use limits::{RW_MAX_DEVICES, RW_MAX_GIDS, RW_MAX_PORTS, RW_MAX_TRANSFER_REPORTS, RW_SIM_MAX_REPEAT};
pub use log_sink::{rw_log_callback_fn, rw_log_level};
pub use logging::rw_set_log_callback;
pub use machine::*;
pub use monitor::*;
pub use notify::{rw_cause, rw_happening, rw_log, rw_log_kind, rw_notification, rw_recovered_by, rw_work_scope};
pub use sim::*;
pub use status::{rw_last_error, rw_status, rw_status_name};
pub use uevents::*;
pub use verbs::rw_machine_answer_verbs;
pub use version::*;
