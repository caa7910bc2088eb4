// report.hpp: what the records say, written once the workers stopped.
//
//   {"kind":"failed",...}    every write that failed: rail, set, status,
//                            post and completion times;
//   {"kind":"first_ok",...}  per set, its first successful completion;
//   {"kind":"gap",...}       per rail, every gap of at least gap_ms between
//                            successive successful completions;
//   {"kind":"summary",...}   the totals, and each rail at the end (with
//                            what was reported to railwatch's machine).
#pragma once

#include "loop.hpp"
#include "workers.hpp"

namespace traffic {

struct run_info {
    const char *engine = "";
    uint64_t started_ns = 0, stopped_ns = 0;
    uint64_t gap_ns = 0;
    std::vector<end_state> ends;  // per rail
};

void report(const std::vector<rail *> &rails, const workers &w, const run_info &info);

// "retry_exc_err" for IBV_WC_RETRY_EXC_ERR, ...
const char *wc_status_name(uint32_t status);

}  // namespace traffic
