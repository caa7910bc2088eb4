//! # railwatch-runtime
//!
//! The monitor (work in progress).

mod clock;

pub use clock::{Clock, SystemClock};
