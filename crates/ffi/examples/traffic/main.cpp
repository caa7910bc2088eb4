// traffic_engine: a C++ transfer engine that moves data over two rails of
// RC QPs while railwatch's machine (through the C API) keeps its gates, or,
// with --one-event-per-wakeup, while the loop before the fix does, or, with
// --seed-fix, the seed's fixed loop (drain to EAGAIN, a 1 Hz poll).
//
//   traffic_engine [--one-event-per-wakeup | --seed-fix] [--rail NAME:LOCAL:PEER]...
//                  [--pairs K] [--workers W] [--depth D] [--timeout EXP]
//                  [--retry-cnt N] [--idle-qps N] [--seconds S] [--gap-ms G]
//                  [--max-records N] [--rate N] [--path-wait-ms N]
//                  [--breaker-failures N] [--breaker-min-peers N] [--peers-at PATH]
//   traffic_engine --serve-peers PATH [--rail NAME:LOCAL:PEER]...
//
// Defaults: rails A:rxe0:rxe1 and B:rxe2:rxe3, 4 QP pairs a rail, 2
// workers, 8 writes in flight per QP, timeout 14 (67 ms a try), retry_cnt
// 6, no idle QPs, 300 s at most, gaps of 5 ms and more reported, 4 million
// records, 1000 writes a second in all (0: as fast as the QPs take them;
// under software emulation an unpaced engine starves everything else in
// the VM, the kernel's own network processing included), paths resolved
// before the RTRs for 1.5 s at most (path.hpp; 0: not at all), the
// data-path breaker opened by 2 failures through 1 peer (evidence.hpp).
// It runs until SIGTERM or SIGINT (or --seconds); SIGUSR1 moves the idle
// QPs (of the first rail's local device) to SQD: a burst of SQ_DRAINED on
// its async fd. With --peers-at, the far ends are not opened here: the
// responder listening at PATH serves them (remote.hpp), which is what
// `--serve-peers PATH` makes of this program (it opens the rails' PEER
// devices and serves until SIGTERM or SIGINT).
//
// Output: JSON lines on stdout as things happen (gates, sets built and
// destroyed, drains, devices), then what the records say (report.hpp).
// Exit status 0 after a clean stop, 1 when a device cannot be set up, 2
// for bad arguments.
//
// The parts: verbs.* (the libibverbs objects), path.* (the peer's
// neighbour resolved before an RTR), rails.* (a rail, its builder and the
// reaper), workers.* (posting, polling, records), evidence.* (transfer
// reports, flap counters), loop.* with railwatch_loop.cpp (railwatch's
// machine) and old_loop.cpp (one event per wake-up), burst.*, report.*,
// remote.* (the far ends served by another process).
#include "burst.hpp"
#include "evidence.hpp"
#include "loop.hpp"
#include "remote.hpp"
#include "report.hpp"

#include <pthread.h>

#include <csignal>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <iostream>

namespace traffic {

void note(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::fprintf(stderr, "traffic_engine: ");
    std::vfprintf(stderr, fmt, ap);
    std::fprintf(stderr, "\n");
    va_end(ap);
}

namespace {

struct options {
    bool old_loop = false;
    bool seed_fix = false;  // with old_loop
    std::vector<std::array<std::string, 3>> rails;
    set_options set;
    size_t workers = 2;
    size_t idle_qps = 0;
    uint64_t seconds = 300;
    uint64_t gap_ms = 5;
    uint64_t rate = 1000;
    size_t max_records = 4'000'000;
    breaker_settings breaker;
    std::string peers_at;     // the responder serving the far ends
    std::string serve_peers;  // be that responder, on this socket
};

struct usage_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

uint64_t number(const std::string &flag, const char *value, uint64_t lo, uint64_t hi) {
    if (!value) throw usage_error(flag + " needs a value");
    char *end = nullptr;
    errno = 0;
    const unsigned long long n = std::strtoull(value, &end, 10);
    if (errno || end == value || *end || n < lo || n > hi)
        throw usage_error(flag + " " + value + ": not a number from " + std::to_string(lo) + " to " + std::to_string(hi));
    return n;
}

std::string path(const std::string &flag, const char *value) {
    if (!value || !*value) throw usage_error(flag + " needs a path");
    return value;
}

std::array<std::string, 3> rail_spec(const char *value) {
    const std::string v = value ? value : "";
    const size_t a = v.find(':'), b = a == std::string::npos ? a : v.find(':', a + 1);
    if (b == std::string::npos || a == 0 || b == a + 1 || b + 1 == v.size() || v.find(':', b + 1) != std::string::npos)
        throw usage_error("--rail " + v + ": not NAME:LOCAL:PEER");
    return {v.substr(0, a), v.substr(a + 1, b - a - 1), v.substr(b + 1)};
}

options parse(int argc, char **argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        const std::string f = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (f == "--one-event-per-wakeup" || f == "--seed-fix") {
            o.old_loop = true;
            o.seed_fix = f == "--seed-fix";
            continue;
        }
        ++i;
        if (f == "--rail") o.rails.push_back(rail_spec(v));
        else if (f == "--pairs") o.set.pairs = number(f, v, 1, 256);
        else if (f == "--workers") o.workers = number(f, v, 1, 64);
        else if (f == "--depth") o.set.depth = uint32_t(number(f, v, 1, 1024));
        else if (f == "--timeout") o.set.timeout = uint8_t(number(f, v, 1, 31));
        else if (f == "--retry-cnt") o.set.retry_cnt = uint8_t(number(f, v, 0, 7));
        else if (f == "--idle-qps") o.idle_qps = number(f, v, 0, 100'000);
        else if (f == "--seconds") o.seconds = number(f, v, 1, 86'400);
        else if (f == "--gap-ms") o.gap_ms = number(f, v, 1, 60'000);
        else if (f == "--max-records") o.max_records = number(f, v, 1, 100'000'000);
        else if (f == "--rate") o.rate = number(f, v, 0, 10'000'000);
        else if (f == "--path-wait-ms") o.set.path_wait_ms = unsigned(number(f, v, 0, 60'000));
        else if (f == "--breaker-failures") o.breaker.failures = number(f, v, 1, 1'000'000);
        else if (f == "--breaker-min-peers") o.breaker.min_peers = number(f, v, 1, 16);
        else if (f == "--peers-at") o.peers_at = path(f, v);
        else if (f == "--serve-peers") o.serve_peers = path(f, v);
        else throw usage_error("unknown argument " + f);
    }
    if (o.rails.empty()) o.rails = {{"A", "rxe0", "rxe1"}, {"B", "rxe2", "rxe3"}};
    if (o.rails.size() > max_rails) throw usage_error("at most " + std::to_string(max_rails) + " rails");
    if (o.workers > o.set.pairs) throw usage_error("--workers: more workers than QP pairs a rail");
    if (!o.peers_at.empty() && !o.serve_peers.empty()) throw usage_error("--peers-at and --serve-peers: one or the other");
    return o;
}

// The loop reads the signals from a signalfd: block them in every thread,
// before any thread starts.
void block_signals() {
    sigset_t set;
    sigemptyset(&set);
    for (int s : {SIGTERM, SIGINT, SIGUSR1}) sigaddset(&set, s);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int run(const options &o) {
    reaper reap;  // first made, last gone: it destroys what the rest retire
    std::vector<std::unique_ptr<rail>> owned;
    std::vector<rail *> rails;
    for (const auto &[name, local, peer] : o.rails) {
        owned.push_back(std::make_unique<rail>(name, local, peer, o.set, reap, o.peers_at));
        rails.push_back(owned.back().get());
    }
    burster burst;
    auto loop = o.old_loop ? make_old_loop(rails, [&] { burst.trigger(); }, o.seed_fix)
                           : make_railwatch_loop(rails, [&] { burst.trigger(); }, o.breaker);
    loop->attach_all();
    if (o.idle_qps) burst.start(loop->device(rails[0]->local.device), o.idle_qps, o.set.port);
    for (rail *r : rails) r->start();
    workers work(rails, o.workers, o.max_records, o.rate);
    work.start();
    run_info info;
    info.engine = loop->engine_name();
    info.started_ns = now_ns();
    info.gap_ns = o.gap_ms * 1'000'000;
    line("started").str("engine", info.engine).num("t_ns", info.started_ns).num("workers", o.workers)
        .num("qp_pairs", o.set.pairs).num("depth", o.set.depth).num("timeout", o.set.timeout)
        .num("retry_cnt", o.set.retry_cnt).num("rate", o.rate).num("path_wait_ms", o.set.path_wait_ms)
        .num("breaker_failures", o.breaker.failures).num("breaker_min_peers", o.breaker.min_peers).emit();
    loop->run(info.started_ns + o.seconds * 1'000'000'000);
    info.ends = loop->end_states();
    info.stopped_ns = now_ns();
    work.stop();
    report(rails, work, info);
    return 0;
}

}  // namespace
}  // namespace traffic

int main(int argc, char **argv) {
    traffic::options o;
    try {
        o = traffic::parse(argc, argv);
    } catch (const traffic::usage_error &e) {
        traffic::note("%s", e.what());
        return 2;
    }
    traffic::block_signals();
    try {
        if (!o.serve_peers.empty()) {
            std::vector<std::string> peers;
            for (const auto &r : o.rails) peers.push_back(r[2]);
            traffic::serve_peers(o.serve_peers, peers);
            return 0;
        }
        return traffic::run(o);
    } catch (const std::exception &e) {
        traffic::note("%s", e.what());
        return 1;
    }
}
