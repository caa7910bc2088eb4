// evidence.hpp: what the engine tells railwatch's machine beyond the port
// state. Its completions per rail (rw_machine_report_transfers: the
// data-path breaker), and a port's flap counters from sysfs, the answer to
// RW_ACTION_READ_COUNTERS (a flap whose events were lost).
#pragma once

#include "rails.hpp"

#include <string>
#include <vector>

namespace traffic {

// The data-path breaker as the engine configures it: local-path failures
// that open it within its window (10 s), and through how many distinct
// peers. A rail here has one peer, its far-end device, so min_peers is 1
// (railwatch's default, 2, would never open; with many peers a rail keeps
// 2, so that one peer's outage does not take it down). A path that breaks
// fails each QP of the rail once (what was queued behind flushes, which
// is never counted), so a rail of K QPs shows at most K such failures a
// break: 2 of them is the signal.
struct breaker_settings {
    uint64_t failures = 2;
    uint64_t min_peers = 1;
};

// The report lines for what `tally` counted since the loop last took:
// one line per status that moved, through `peer`. Counts above what a
// line holds are split over several lines.
std::vector<rw_transfer_report> report_lines(completion_tally &tally, uint64_t peer);

// `device`'s `port` flap counters, read where railwatch's verbs backend
// reads them: `link_downed` in the port's counters/ (or hw_counters/, as
// rxe keeps it), the netdev's carrier_changes and carrier_down_count.
// RW_COUNTER_NONE for one that is missing; `error` ENOENT when all are.
struct flap_counters {
    int error = 0;
    uint64_t link_downed = RW_COUNTER_NONE, carrier_changes = RW_COUNTER_NONE, carrier_down = RW_COUNTER_NONE;
};
flap_counters read_flap_counters(const std::string &device, uint8_t port);

}  // namespace traffic
