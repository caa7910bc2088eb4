// evidence.cpp: see evidence.hpp.
#include "evidence.hpp"

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <limits>

namespace traffic {

std::vector<rw_transfer_report> report_lines(completion_tally &tally, uint64_t peer) {
    std::vector<rw_transfer_report> lines;
    const completion_tally::counts since = tally.take();
    for (size_t status = 0; status < since.size(); ++status) {
        for (uint64_t left = since[status]; left > 0;) {
            const uint32_t n = uint32_t(std::min<uint64_t>(left, std::numeric_limits<uint32_t>::max()));
            lines.push_back(rw_transfer_report{peer, uint32_t(status), n});
            left -= n;
        }
    }
    return lines;
}

namespace {

// A sysfs number (a decimal on one line), or RW_COUNTER_NONE.
uint64_t sysfs_number(const std::string &path) {
    std::ifstream in(path);
    std::string text;
    if (!(in >> text) || text.size() > 20) return RW_COUNTER_NONE;
    char *end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
    return errno || *end || end == text.c_str() ? RW_COUNTER_NONE : uint64_t(v);
}

// The netdev under a RoCE port (its first GID's), or "" when there is none
// or the name could climb out of the netdev directory.
std::string port_netdev(const std::string &port_dir) {
    std::ifstream in(port_dir + "/gid_attrs/ndevs/0");
    std::string name;
    if (!(in >> name) || name.size() > 15 || name == "." || name == ".." ||
        name.find('/') != std::string::npos)
        return "";
    return name;
}

}  // namespace

flap_counters read_flap_counters(const std::string &device, uint8_t port) {
    flap_counters c;
    const std::string dir = "/sys/class/infiniband/" + device + "/ports/" + std::to_string(port);
    c.link_downed = sysfs_number(dir + "/counters/link_downed");
    if (c.link_downed == RW_COUNTER_NONE) c.link_downed = sysfs_number(dir + "/hw_counters/link_downed");
    if (const std::string netdev = port_netdev(dir); !netdev.empty()) {
        c.carrier_changes = sysfs_number("/sys/class/net/" + netdev + "/carrier_changes");
        c.carrier_down = sysfs_number("/sys/class/net/" + netdev + "/carrier_down_count");
    }
    if (c.link_downed == RW_COUNTER_NONE && c.carrier_changes == RW_COUNTER_NONE && c.carrier_down == RW_COUNTER_NONE)
        c.error = ENOENT;
    return c;
}

}  // namespace traffic
