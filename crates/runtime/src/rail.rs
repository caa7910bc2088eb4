//! The monitor's record of one rail: the shared state cell plus what only
//! the monitor needs (the cached rate, what it last told the selector).

use std::sync::Arc;

use railwatch_core::{FlapPenalty, LinkRate, Millis, RailCell, RailId};

use crate::notify::RecoveredBy;

/// One rail under the monitor.
pub(crate) struct Rail {
    pub(crate) id: RailId,
    /// `"mlx5_0/1"`.
    pub(crate) name: String,
    pub(crate) cell: Arc<RailCell>,
    /// The rate last seeded into the selector; `None` until seeded.
    pub(crate) seeded: Option<LinkRate>,
    /// What the selector was last told.
    pub(crate) available: bool,
    /// How the last activation happened.
    pub(crate) recovered_by: Option<RecoveredBy>,
    /// When the log last explained why this rail is paused.
    pub(crate) explained_at: Option<Millis>,
    /// The port read ACTIVE; activation waits until then (settle delay).
    pub(crate) settle_until: Option<Millis>,
    /// What made the port read ACTIVE, for the settled activation.
    pub(crate) settle_by: RecoveredBy,
    /// Flap damping penalty.
    pub(crate) penalty: FlapPenalty,
    /// Suppressed by damping until then.
    pub(crate) damped_until: Option<Millis>,
}
