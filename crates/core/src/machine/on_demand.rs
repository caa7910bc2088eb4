//! What a rail holds only once it needs it, boxed at that moment and kept
//! from then on: the record of failed transfers with the data-path breaker
//! ([`Trouble`]), and the settle delay and flap damping ([`Holds`]).
//!
//! A healthy rail with the default settings (no settle delay, no damping)
//! never allocates either, so the per-rail state of a large host stays small
//! (docs/PERFORMANCE.md, row 5). An absent box reads exactly as a default
//! one: no breaker, an empty window, no failures; no settle, no penalty, no
//! damping hold. A box, once there, is never freed (clearing resets its
//! contents), so the paths that use it allocate at most once per rail: the
//! first failure, trip, silent flap or hold is the rail's warm-up.

use super::{Breaker, Evidence, Rail, Settle};
use crate::breaker::FailureWindow;
use crate::damping::FlapPenalty;
use crate::time::Millis;
use crate::wc::WC_STATUSES;

/// A rail's record once something went wrong beyond its port state: a
/// failed transfer, a breaker trip or a silent flap.
#[derive(Debug, Clone, Default)]
pub(super) struct Trouble {
    /// The data-path breaker, when it has tripped.
    pub(super) breaker: Option<Breaker>,
    /// Local-path transfer failures in the current window.
    pub(super) window: FailureWindow,
    /// Transfers reported failed, by `ibv_wc_status` code (the table's).
    pub(super) failed_by_status: [u64; WC_STATUSES.len()],
    /// Failed transfers with a code this build does not know.
    pub(super) failed_unknown: u64,
    /// Times the breaker opened.
    pub(super) breaker_trips: u64,
    /// Silent flaps seen.
    pub(super) silent_flaps: u64,
}

/// A rail's holds: the settle delay and the flap-damping state (used only
/// when `settle_ms` or `damping` is set).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Holds {
    /// A settle delay in progress.
    pub(super) settle: Option<Settle>,
    /// The flap penalty (decays between flaps).
    pub(super) penalty: FlapPenalty,
    /// Held by damping until then.
    pub(super) damped_until: Option<Millis>,
}

impl Rail {
    /// The trouble record, created at its first use.
    #[inline]
    pub(super) fn trouble_mut(&mut self) -> &mut Trouble {
        if self.trouble.is_none() {
            self.new_trouble();
        }
        self.trouble.as_deref_mut().expect("created above")
    }

    /// Creates the trouble record: out of line, so the loop that counts a
    /// report's lines keeps its registers.
    #[cold]
    #[inline(never)]
    fn new_trouble(&mut self) {
        self.trouble = Some(Box::default());
    }

    /// The data-path breaker, if it has tripped.
    pub(super) fn breaker(&self) -> Option<Breaker> {
        self.trouble.as_ref().and_then(|t| t.breaker)
    }

    /// Sets the breaker (`None` closes it; that needs no record).
    pub(super) fn set_breaker(&mut self, breaker: Option<Breaker>) {
        match (breaker, self.trouble.as_mut()) {
            (None, None) => {}
            (None, Some(t)) => t.breaker = None,
            (Some(_), _) => self.trouble_mut().breaker = breaker,
        }
    }

    /// Forgets the failure window (a pause, a re-attach, a trip).
    pub(super) fn clear_window(&mut self) {
        if let Some(t) = self.trouble.as_mut() {
            t.window.clear();
        }
    }

    /// What transfer reports and counters said.
    pub(super) fn evidence(&self) -> Evidence {
        let mut e = Evidence { transfers_ok: self.transfers_ok, ..Evidence::default() };
        if let Some(t) = self.trouble.as_deref() {
            e.failed_by_status = t.failed_by_status;
            e.failed_unknown = t.failed_unknown;
            e.breaker_trips = t.breaker_trips;
            e.silent_flaps = t.silent_flaps;
        }
        e
    }

    /// The holds, created at their first use.
    pub(super) fn holds_mut(&mut self) -> &mut Holds {
        self.holds.get_or_insert_with(Box::default)
    }

    /// The settle delay in progress, if any.
    pub(super) fn settle(&self) -> Option<Settle> {
        self.holds.as_ref().and_then(|h| h.settle)
    }

    /// Ends a settle delay; returns the one that was in progress.
    pub(super) fn take_settle(&mut self) -> Option<Settle> {
        self.holds.as_mut().and_then(|h| h.settle.take())
    }

    /// When damping releases the rail, if it holds it.
    pub(super) fn damped_until(&self) -> Option<Millis> {
        self.holds.as_ref().and_then(|h| h.damped_until)
    }

    /// Ends a damping hold (the penalty is kept).
    pub(super) fn clear_damped(&mut self) {
        if let Some(h) = self.holds.as_mut() {
            h.damped_until = None;
        }
    }
}
