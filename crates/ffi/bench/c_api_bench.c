/*
 * c_api_bench.c: the C API's two figures for docs/PERFORMANCE.md, each a
 * ratio against a baseline measured in the same process, round by round
 * (alternating which side goes first), the median of the per-round ratios.
 * Built -O2 against librailwatch.a and run by `cargo xtask bench`, which
 * builds the library with the `bench-exports` feature (the rw_bench_*
 * functions below; the shipped library has none).
 *
 *   gate: rw_gate_check_inline (an acquire load and a decode) vs a relaxed
 *         atomic load of the same words, per check, as a latency (a
 *         dependent chain over 16 rails).
 *   event: COMM_EST events (what an engine drains in bursts) fed one by
 *         one through rw_machine_handle_event vs Machine::handle_event in
 *         Rust (rw_bench_comm_est_rust), per event.
 *   flap: PORT_ERR/PORT_ACTIVE flaps fed through the C API (actions
 *         polled in batches and answered at once) vs the same flaps fed
 *         to the machine in Rust (rw_bench_feed_rust), per event.
 *
 * Prints "key<TAB>value" lines (ns and ratios) on stdout.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "railwatch.h"

/* The Rust sides of the feed figures; not in the header, only in a
 * library built with the `bench-exports` feature. */
extern uint64_t rw_bench_feed_rust(uint64_t flaps);
extern uint64_t rw_bench_comm_est_rust(uint64_t count);

#define ROUNDS 15
#define CHECKS 20000000ull
#define FLAPS 100000ull
#define COMM_EST 1000000ull

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what, rw_status s) {
    fprintf(stderr, "c_api_bench: %s: %s: %s\n", what, rw_status_name(s), rw_last_error());
    exit(1);
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp);
    return v[n / 2];
}

/* Answers every action at once, polled in batches as an engine would:
 * ports read `state`, links NDR 4x, addresses unsupported. A short batch
 * with no answer given means the queue is empty (the machine adds actions
 * only in response to an input). */
static void serve(rw_machine *m, uint32_t state, uint64_t now) {
    rw_action batch[16];
    for (;;) {
        size_t n = 0;
        bool answered = false;
        rw_status s = rw_machine_poll_actions(m, batch, 16, &n);
        if (s != RW_OK) die("poll_actions", s);
        for (size_t i = 0; i < n; i++) {
            const rw_action *a = &batch[i];
            switch (a->kind) {
            case RW_ACTION_QUERY_PORT:
                rw_machine_handle_port_state(m, a->device, a->port, 0, state, now);
                answered = true;
                break;
            case RW_ACTION_READ_LINK:
                rw_machine_handle_link(m, a->device, a->port, 0, 128, 2, 0, now);
                answered = true;
                break;
            case RW_ACTION_READ_ADDRESS:
                rw_machine_handle_address(m, a->device, a->port, 95, NULL, now);
                answered = true;
                break;
            default: break;
            }
        }
        if (n < 16 && !answered) return;
    }
}

static volatile uint64_t sink;

/* A worker before each transfer: the gate check, the generation kept
 * for its endpoints when admitted, a refusal counted otherwise. */
/* A worker's check, as a latency: each check's rail depends on the
 * previous check's result (a dependent chain over 16 rails), so the loop
 * measures what one check costs a worker, not how many the core can
 * overlap. Both loops have the same shape and branch hint; each function
 * starts on its own cache line. (Measured as throughput instead, code
 * layout alone moved the ratio between 0.5x and 2x.) */
#define LOOP_FN __attribute__((noinline, aligned(64)))
#define RAILS 16

/* The gate check, the generation kept for the next rail's pick. */
LOOP_FN static uint64_t gate_inline(const uint64_t *const *words) {
    uint64_t idx = 0, refused = 0, gen = 0, t0 = now_ns();
    for (uint64_t i = 0; i < CHECKS; i++) {
        if (__builtin_expect(rw_gate_check_inline(words[idx], &gen), 1)) idx = (idx + gen + 1) & (RAILS - 1);
        else { refused++; idx = (idx + 1) & (RAILS - 1); }
    }
    sink = idx + refused;
    return now_ns() - t0;
}

/* The floor, as engines check a rail today: a relaxed load of a shared
 * flag word and a branch on it, the value used for the next pick. */
LOOP_FN static uint64_t gate_relaxed(const uint64_t *const *words) {
    uint64_t idx = 0, refused = 0, t0 = now_ns();
    for (uint64_t i = 0; i < CHECKS; i++) {
        uint64_t w = atomic_load_explicit((const _Atomic uint64_t *)words[idx], memory_order_relaxed);
        if (__builtin_expect(w != 0, 1)) idx = (idx + w + 1) & (RAILS - 1);
        else { refused++; idx = (idx + 1) & (RAILS - 1); }
    }
    sink = idx + refused;
    return now_ns() - t0;
}

static uint64_t comm_est_c(void) {
    rw_machine *m = NULL;
    rw_status s = rw_machine_new(NULL, &m);
    if (s != RW_OK) die("machine_new", s);
    const uint8_t ports[] = {1};
    uint32_t dev;
    if ((s = rw_machine_add_device(m, "bench0", ports, 1, 0, &dev)) != RW_OK) die("add_device", s);
    serve(m, 4, 0);
    uint64_t t0 = now_ns();
    for (uint64_t i = 0; i < COMM_EST; i++) rw_machine_handle_event(m, dev, 4, 0x1000 + (i & 0xff), 1);
    uint64_t ns = now_ns() - t0;
    rw_machine_free(&m);
    return ns;
}

static uint64_t feed_c(void) {
    rw_machine *m = NULL;
    rw_status s = rw_machine_new(NULL, &m);
    if (s != RW_OK) die("machine_new", s);
    const uint8_t ports[] = {1};
    uint32_t dev;
    if ((s = rw_machine_add_device(m, "bench0", ports, 1, 0, &dev)) != RW_OK) die("add_device", s);
    serve(m, 4, 0);
    uint64_t now = 1, t0 = now_ns();
    for (uint64_t i = 0; i < FLAPS; i++) {
        rw_machine_handle_event(m, dev, 10, 1, now); /* PORT_ERR */
        serve(m, 1, now);                            /* DOWN */
        rw_machine_handle_event(m, dev, 9, 1, now + 1); /* PORT_ACTIVE */
        serve(m, 4, now + 1);                           /* ACTIVE */
        now += 2;
    }
    uint64_t ns = now_ns() - t0;
    rw_machine_free(&m);
    return ns;
}

int main(void) {
    if (rw_word_layout_version() != RW_WORD_LAYOUT_VERSION) {
        fprintf(stderr, "c_api_bench: header and library disagree on the word layout\n");
        return 1;
    }
    /* Real gate words: 16 active rails (one device, ports 1..16). */
    rw_machine *m = NULL;
    rw_status s = rw_machine_new(NULL, &m);
    if (s != RW_OK) die("machine_new", s);
    uint8_t ports[RAILS];
    for (int p = 0; p < RAILS; p++) ports[p] = (uint8_t)(p + 1);
    uint32_t dev;
    if ((s = rw_machine_add_device(m, "gate0", ports, RAILS, 0, &dev)) != RW_OK) die("add_device", s);
    serve(m, 4, 0);
    rw_gate *gates[RAILS];
    const uint64_t *words[RAILS];
    for (int p = 0; p < RAILS; p++) {
        if ((s = rw_machine_gate(m, dev, (uint32_t)p + 1, &gates[p])) != RW_OK) die("gate", s);
        words[p] = rw_gate_word(gates[p]);
        uint64_t gen;
        if (!rw_gate_check_inline(words[p], &gen)) {
            fprintf(stderr, "c_api_bench: rail %d is not active\n", p + 1);
            return 1;
        }
    }

    double ratio[ROUNDS], a_ns[ROUNDS], b_ns[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        uint64_t a, b;
        if (r % 2) { b = gate_relaxed(words); a = gate_inline(words); }
        else { a = gate_inline(words); b = gate_relaxed(words); }
        a_ns[r] = (double)a / CHECKS;
        b_ns[r] = (double)b / CHECKS;
        ratio[r] = (double)a / (double)b;
    }
    printf("c_gate_inline_ns\t%.4f\n", median(a_ns, ROUNDS));
    printf("c_gate_relaxed_ns\t%.4f\n", median(b_ns, ROUNDS));
    printf("c_gate_ratio\t%.4f\n", median(ratio, ROUNDS));
    for (int p = 0; p < RAILS; p++) rw_gate_free(&gates[p]);
    rw_machine_free(&m);

    for (int r = 0; r < ROUNDS; r++) {
        uint64_t a, b;
        if (r % 2) { b = rw_bench_comm_est_rust(COMM_EST); a = comm_est_c(); }
        else { a = comm_est_c(); b = rw_bench_comm_est_rust(COMM_EST); }
        if (b == 0) {
            fprintf(stderr, "c_api_bench: rw_bench_comm_est_rust failed: %s\n", rw_last_error());
            return 1;
        }
        a_ns[r] = (double)a / COMM_EST;
        b_ns[r] = (double)b / COMM_EST;
        ratio[r] = (double)a / (double)b;
    }
    printf("c_event_capi_ns\t%.2f\n", median(a_ns, ROUNDS));
    printf("c_event_rust_ns\t%.2f\n", median(b_ns, ROUNDS));
    printf("c_event_ratio\t%.4f\n", median(ratio, ROUNDS));

    const double events = 2.0 * FLAPS;
    for (int r = 0; r < ROUNDS; r++) {
        uint64_t a, b;
        if (r % 2) { b = rw_bench_feed_rust(FLAPS); a = feed_c(); }
        else { a = feed_c(); b = rw_bench_feed_rust(FLAPS); }
        if (b == 0) {
            fprintf(stderr, "c_api_bench: rw_bench_feed_rust failed: %s\n", rw_last_error());
            return 1;
        }
        a_ns[r] = (double)a / events;
        b_ns[r] = (double)b / events;
        ratio[r] = (double)a / (double)b;
    }
    printf("c_feed_capi_ns\t%.2f\n", median(a_ns, ROUNDS));
    printf("c_feed_rust_ns\t%.2f\n", median(b_ns, ROUNDS));
    printf("c_feed_ratio\t%.4f\n", median(ratio, ROUNDS));
    return 0;
}
