//! The one place atomics come from, so `cfg(loom)` can swap in loom's
//! model-checked versions (the pattern tokio uses).
//!
//! Under `RUSTFLAGS="--cfg loom"` every atomic in this crate is loom's;
//! otherwise it is `std`'s, at no cost.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU64, Ordering};

#[cfg(loom)]
pub(crate) use loom::sync::Arc;
#[cfg(not(loom))]
pub(crate) use std::sync::Arc;
