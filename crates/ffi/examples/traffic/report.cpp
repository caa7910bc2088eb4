// report.cpp: see report.hpp.
#include "report.hpp"

#include <algorithm>
#include <array>
#include <map>

namespace traffic {

// At most this many "failed" lines (the counts stay exact).
static constexpr size_t max_failed_lines = 5000;

const char *wc_status_name(uint32_t status) {
    static constexpr const char *names[] = {
        "success",         "loc_len_err",    "loc_qp_op_err",      "loc_eec_op_err",    "loc_prot_err",
        "wr_flush_err",    "mw_bind_err",    "bad_resp_err",       "loc_access_err",    "rem_inv_req_err",
        "rem_access_err",  "rem_op_err",     "retry_exc_err",      "rnr_retry_exc_err", "loc_rdd_viol_err",
        "rem_inv_rd_req_err", "rem_abort_err", "inv_eecn_err",     "inv_eec_state_err", "fatal_err",
        "resp_timeout_err", "general_err",   "tm_err",             "tm_rndv_incomplete",
    };
    if (status < std::size(names)) return names[status];
    if (status == post_failed) return "post_failed";
    if (status == work_lost) return "work_lost";
    if (status == abandoned) return "abandoned";
    return "unknown";
}

namespace {

// One rail's records, gathered from every worker.
struct rail_records {
    std::vector<uint64_t> ok_ns;        // completion times of the successes
    std::map<uint64_t, uint64_t> first_ok;  // set -> its first success
    std::array<uint64_t, 256> by_status{};
    uint64_t unfinished = 0;
    uint64_t lost_first_ns = 0, lost_last_ns = 0;  // when the ledger failed writes (0: never)
};

std::string status_object(const std::array<uint64_t, 256> &by_status) {
    std::string o = "{";
    for (size_t s = 1; s < by_status.size(); ++s) {
        if (!by_status[s] || s == pending) continue;
        if (o.size() > 1) o += ',';
        o += '"';
        o += wc_status_name(uint32_t(s));
        o += "\":" + std::to_string(by_status[s]);
    }
    return o + "}";
}

// What the loop reported to railwatch's machine, by status ("success"
// too); {} for the engine without a machine.
std::string reported_object(const completion_tally::counts &taken) {
    std::string o = "{";
    for (size_t s = 0; s < taken.size(); ++s) {
        if (!taken[s]) continue;
        if (o.size() > 1) o += ',';
        o += '"';
        o += wc_status_name(uint32_t(s));
        o += "\":" + std::to_string(taken[s]);
    }
    return o + "}";
}

uint64_t failed_total(const std::array<uint64_t, 256> &by_status) {
    uint64_t n = 0;
    for (size_t s = 1; s < by_status.size(); ++s)
        if (s != pending) n += by_status[s];
    return n;
}

std::vector<rail_records> gather(const std::vector<rail *> &rails, const workers &w, size_t &failed_lines) {
    std::vector<rail_records> out(rails.size());
    for (size_t i = 0; i < w.count(); ++i) {
        for (const record &rec : w.records(i)) {
            rail_records &rr = out[rec.rail];
            if (rec.status == pending) {
                ++rr.unfinished;
                continue;
            }
            ++rr.by_status[rec.status];
            if (rec.status == IBV_WC_SUCCESS) {
                rr.ok_ns.push_back(rec.done_ns);
                auto [it, fresh] = rr.first_ok.emplace(rec.set, rec.done_ns);
                if (!fresh) it->second = std::min(it->second, rec.done_ns);
            } else if (rec.status == work_lost) {
                rr.lost_first_ns = rr.lost_first_ns ? std::min(rr.lost_first_ns, rec.done_ns) : rec.done_ns;
                rr.lost_last_ns = std::max(rr.lost_last_ns, rec.done_ns);
            }
            if (rec.status != IBV_WC_SUCCESS && failed_lines++ < max_failed_lines) {
                line("failed").str("rail", rails[rec.rail]->name).num("set", rec.set)
                    .str("status", wc_status_name(rec.status)).num("post_ns", rec.post_ns).num("done_ns", rec.done_ns)
                    .emit();
            }
        }
    }
    return out;
}

void gaps(const rail &r, rail_records &rr, uint64_t gap_ns) {
    std::sort(rr.ok_ns.begin(), rr.ok_ns.end());
    for (size_t i = 1; i < rr.ok_ns.size(); ++i) {
        const uint64_t d = rr.ok_ns[i] - rr.ok_ns[i - 1];
        if (d >= gap_ns)
            line("gap").str("rail", r.name).num("from_ns", rr.ok_ns[i - 1]).num("to_ns", rr.ok_ns[i])
                .fixed("ms", double(d) / 1e6).emit();
    }
    for (auto [set, t] : rr.first_ok) line("first_ok").str("rail", r.name).num("set", set).num("t_ns", t).emit();
}

}  // namespace

void report(const std::vector<rail *> &rails, const workers &w, const run_info &info) {
    size_t failed_lines = 0;
    std::vector<rail_records> per = gather(rails, w, failed_lines);
    worker_counts total;
    for (size_t i = 0; i < w.count(); ++i) {
        const worker_counts &c = w.counts(i);
        total.refused += c.refused;
        total.not_ready += c.not_ready;
        total.abandoned += c.abandoned;
        total.lost += c.lost;
        total.records_full |= c.records_full;
    }
    std::array<uint64_t, 256> by_status{};
    uint64_t ok = 0, unfinished = 0;
    std::string rail_list = "[";
    for (size_t r = 0; r < rails.size(); ++r) {
        gaps(*rails[r], per[r], info.gap_ns);
        if (per[r].lost_first_ns)
            line("lost").str("rail", rails[r]->name).num("writes", per[r].by_status[work_lost])
                .num("first_ns", per[r].lost_first_ns).num("last_ns", per[r].lost_last_ns).emit();
        for (size_t s = 0; s < by_status.size(); ++s) by_status[s] += per[r].by_status[s];
        ok += per[r].by_status[IBV_WC_SUCCESS];
        unfinished += per[r].unfinished;
        const end_state &e = info.ends.at(r);
        rail_list += std::string(r ? "," : "") + "{\"rail\":\"" + rails[r]->name + "\",\"local\":\"" +
                     rails[r]->local.device + "\",\"peer\":\"" + rails[r]->peer.device +
                     "\",\"writes_ok\":" + std::to_string(per[r].by_status[IBV_WC_SUCCESS]) +
                     ",\"writes_failed\":" + std::to_string(failed_total(per[r].by_status)) +
                     ",\"admits\":" + (e.admits ? "true" : "false") + ",\"port_state\":\"" +
                     port_state_name(e.port_state) + "\",\"last_ok_ns\":" +
                     std::to_string(per[r].ok_ns.empty() ? 0 : per[r].ok_ns.back()) +
                     // Last: the host's reader takes a rail's flat fields up to here.
                     ",\"reported\":" + reported_object(rails[r]->tally.taken()) + "}";
    }
    rail_list += "]";
    line("summary").str("engine", info.engine).num("started_ns", info.started_ns).num("stopped_ns", info.stopped_ns)
        .num("workers", w.count()).num("writes_ok", ok).raw("writes_failed", status_object(by_status))
        .num("writes_unfinished", unfinished).num("refused", total.refused).num("not_ready", total.not_ready)
        .num("abandoned", total.abandoned).num("lost", total.lost).boolean("records_full", total.records_full)
        .num("failed_lines_dropped", failed_lines > max_failed_lines ? failed_lines - max_failed_lines : 0)
        .raw("rails", rail_list).emit();
}

}  // namespace traffic
