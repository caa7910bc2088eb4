//! The bound of every count the C API reads an array by: what can be
//! valid, checked before the array is read, so a count C got wrong is an
//! error naming it, never a read past the caller's array.

/// Most ports a device can have (port numbers are 1..=255).
pub const RW_MAX_PORTS: usize = 255;

/// Most names one device list may hold, and most devices one machine
/// holds (removed ones and empty slots included).
pub const RW_MAX_DEVICES: usize = 4096;

// cbindgen writes the literal; the machine's own bound is core's.
const _: () = assert!(RW_MAX_DEVICES == railwatch_core::MAX_DEVICES);

/// Most entries a port's GID table can have (an `ibv_ah_attr`'s
/// `sgid_index` is 8 bits), and one more than the largest GID index.
pub const RW_MAX_GIDS: usize = 256;

/// Most lines one transfer report may hold.
pub const RW_MAX_TRANSFER_REPORTS: usize = 65_536;

/// Most copies of an event one `rw_sim_push_event` queues, and most
/// EINTRs one `rw_sim_eintr` arms: more than any test needs (2^20), few
/// enough that no count wraps and no monitor reads for hours.
pub const RW_SIM_MAX_REPEAT: u64 = 1 << 20;

/// A count's bound, for [`crate::args::slice`]: the largest valid count
/// and the constant C knows it by.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limit {
    pub(crate) max: usize,
    pub(crate) name: &'static str,
}

/// Port numbers of one device.
pub(crate) const PORTS: Limit = Limit { max: RW_MAX_PORTS, name: "RW_MAX_PORTS" };
/// Names of one device list.
pub(crate) const DEVICES: Limit = Limit { max: RW_MAX_DEVICES, name: "RW_MAX_DEVICES" };
/// Entries of one GID table.
pub(crate) const GIDS: Limit = Limit { max: RW_MAX_GIDS, name: "RW_MAX_GIDS" };
/// Lines of one transfer report.
pub(crate) const TRANSFER_REPORTS: Limit = Limit { max: RW_MAX_TRANSFER_REPORTS, name: "RW_MAX_TRANSFER_REPORTS" };
