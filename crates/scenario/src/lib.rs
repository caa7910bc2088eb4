//! # railwatch-scenario
//!
//! Scenario files (docs/SCENARIOS.md) and the deterministic driver that
//! steps a real `railwatch_runtime::Monitor` through one, over the
//! simulator's devices, in virtual time.
//!
//! - [`Scenario`] parses and validates a file, refusing a bad one with the
//!   file, line and problem before anything runs; it builds the scenario's
//!   devices and applies its steps.
//! - [`driver`] runs it: [`driver::run`] to the end, or
//!   [`driver::Run`] step by step, handing every notification and
//!   expectation verdict to a sink.
//!
//! ```
//! use railwatch_scenario::{Scenario, driver};
//!
//! let text = r#"
//! duration_ms = 2000
//!
//! [[device]]
//! name = "mlx5_0"
//! ports = [ { port = 1, state = "active", speed = "ndr", width = "4x" } ]
//!
//! [[step]]
//! at_ms = 100
//! device = "mlx5_0"
//! port_state = { port = 1, state = "down" }
//! event = "port_err"
//! port = 1
//!
//! [[expect]]
//! at_ms = 200
//! rail = "mlx5_0/1"
//! state = "paused"
//! available = false
//! "#;
//! let scenario = Scenario::parse(text, "flap.toml").unwrap();
//! assert_eq!(scenario.name, "flap");
//! let summary = driver::run(&scenario, &Default::default(), |_, _| {}).unwrap();
//! assert_eq!((summary.passed(), summary.failed()), (1, 0));
//! ```

#![cfg_attr(not(test), deny(missing_docs))]

pub mod driver;
pub mod record;
pub mod rwlog;
pub mod scenario;
pub mod toml_input;

pub use scenario::{Scenario, ScenarioError};
