// remote.hpp: a rail's far end served by another process, as a NIC on
// another host is.
//
// Why: when one engine opens both ends of a rail, it reads the far end's
// PORT_ERR and stops posting, so a pull of the far end's cable fails
// nothing (the breaker's case never happens). A remote NIC's failure is
// the local port ACTIVE and the QPs failing. The responder
// (`traffic_engine --serve-peers PATH`) alone opens the far ends; the
// engine (`--peers-at PATH`) asks it over a unix socket for each set it
// builds. (A responder in another network namespace would hang: rxe on
// 6.1 opens its UDP sockets in the initial namespace only.)
//
// The exchange, one per set: the engine connects, sends a request (the far
// end's device, its own QP numbers, GID and MTU), the responder creates a
// QP per pair, moves them to RTR towards the engine's and answers (its QP
// numbers, GID, buffer and key, or an errno). The responder keeps those
// QPs until the engine closes the connection (the set destroyed).
#pragma once

#include "verbs.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace traffic {

// The most QP pairs a set asks for (main.cpp's --pairs bound).
inline constexpr size_t max_remote_pairs = 256;

// What the engine sends. Both sides are this one program on one host: the
// structs go as they are.
struct remote_request {
    char device[64] = {};  // the far end's device, NUL-terminated
    uint8_t port = 1;
    uint8_t gid[16] = {};  // the engine's GID (the RTRs' destination)
    uint32_t mtu = 0;      // an ibv_mtu
    uint32_t path_wait_ms = 0;
    uint32_t pairs = 0;
    uint32_t qpn[max_remote_pairs] = {};
};

// What the responder answers.
struct remote_answer {
    int32_t err = 0;  // 0, or the errno of what failed
    char what[96] = {};  // what failed, NUL-terminated
    uint8_t gid[16] = {};
    uint8_t gid_index = 0;
    uint32_t mtu = 0;  // the lower of both ends' (an ibv_mtu)
    uint32_t rkey = 0;
    uint64_t addr = 0, slots = 0;
    double path_ms = 0;  // its wait for the path to the engine
    uint32_t qpn[max_remote_pairs] = {};
};

// The engine's side: connects to `path`, sends `req`, reads the answer (a
// bounded wait). Returns the connected socket, which keeps the
// responder's QPs; throws verbs_error when the exchange fails or the
// answer carries an errno.
int ask_responder(const std::string &path, const remote_request &req, remote_answer &ans);

// The responder: opens `devices`, listens on `path` and serves each
// connection on a thread of its own, until SIGTERM or SIGINT (blocked by
// the caller, read here from a signalfd). JSON lines on stdout
// ("serving", then "served" per request, "released" per close). Throws
// when a device does not open or the socket cannot be made.
void serve_peers(const std::string &path, const std::vector<std::string> &devices);

}  // namespace traffic
