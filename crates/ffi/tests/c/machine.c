/*
 * machine.c: embedding 1, the engine keeps its loop. Drives rw_machine
 * through rw_machine_drain with a scripted event queue (the five drain
 * cases), the recovery poll and the gates (the three transport cases),
 * and checks the header's inline word decoders against the library.
 */
#include "check.h" /* first: it sets the feature macros */

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

#include "railwatch.h"

#define CODE_COMM_EST 4
#define CODE_PORT_ACTIVE 9
#define CODE_PORT_ERR 10
#define PORT_DOWN 1
#define PORT_ACTIVE 4
#define QP_HANDLE 0x7f00deadbe00ull

/* ---- a scripted async event queue -------------------------------------- */

/* One entry: `ret` 0 is an event (`code`, `element`), else the errno the
 * read returns. */
struct entry {
	int32_t ret;
	uint32_t code;
	uint64_t element;
};

struct queue {
	struct entry entries[512];
	size_t n;    /* entries queued */
	size_t pos;  /* entries consumed */
	uint64_t gets;
	uint64_t acks;
};

static void q_reset(struct queue *q)
{
	memset(q, 0, sizeof(*q));
}

static void q_push(struct queue *q, int32_t ret, uint32_t code, uint64_t element)
{
	if (q->n < sizeof(q->entries) / sizeof(q->entries[0]))
		q->entries[q->n++] = (struct entry){ .ret = ret, .code = code, .element = element };
}

/* rw_get_event_fn: the next entry; it acknowledges an event (as
 * ibv_ack_async_event would) before returning it. EAGAIN once empty. */
static int32_t q_get(void *user, uint32_t *code, uint64_t *element)
{
	struct queue *q = user;
	struct entry e;

	q->gets++;
	if (q->pos >= q->n)
		return EAGAIN;
	e = q->entries[q->pos++];
	if (e.ret != 0)
		return e.ret;
	*code = e.code;
	*element = e.element;
	q->acks++;
	return 0;
}

/* ---- carrying out the machine's actions ------------------------------- */

/* What the engine saw while carrying out actions. */
struct seen {
	unsigned queries[4][4];  /* QUERY_PORT per device, port */
	unsigned stops[4];       /* STOP_READING per device */
	unsigned read_failed_logs;
	unsigned transitions;
	rw_notification last_transition;
	unsigned actions;
};

/* Polls every action and carries it out: port queries answered with
 * `port_state`, link reads with NDR (128) 4x (2), address reads with
 * EOPNOTSUPP. */
static void pump(rw_machine *m, uint64_t now, uint32_t port_state, struct seen *s)
{
	rw_action a;

	for (int guard = 0; guard < 10000; guard++) {
		if (rw_machine_poll_action(m, &a) != RW_OK || a.kind == RW_ACTION_NONE)
			return;
		s->actions++;
		switch (a.kind) {
		case RW_ACTION_QUERY_PORT:
			if (a.device < 4 && a.port < 4)
				s->queries[a.device][a.port]++;
			rw_machine_handle_port_state(m, a.device, a.port, 0, port_state, now);
			break;
		case RW_ACTION_READ_LINK:
			rw_machine_handle_link(m, a.device, a.port, 0, 128, 2, 0, now);
			break;
		case RW_ACTION_READ_ADDRESS:
			rw_machine_handle_address(m, a.device, a.port, 95 /* EOPNOTSUPP */, NULL, now);
			break;
		case RW_ACTION_STOP_READING:
			if (a.device < 4)
				s->stops[a.device]++;
			break;
		case RW_ACTION_LOG:
			if (a.log.kind == RW_LOG_READ_FAILED)
				s->read_failed_logs++;
			break;
		case RW_ACTION_NOTIFY:
			if (a.notification.kind == RW_HAPPENING_TRANSITION) {
				s->transitions++;
				s->last_transition = a.notification;
			}
			break;
		default:
			break;
		}
	}
}

/* A machine with `ndev` attached devices mlx5_0.. of one ACTIVE port each. */
static rw_machine *attached(unsigned ndev)
{
	rw_config *c = NULL;
	rw_status st;
	rw_machine *m = NULL;
	struct seen s;
	const uint8_t ports[] = { 1 };

	memset(&s, 0, sizeof(s));
	rw_config_new(&c);
	rw_config_set_u64(c, "tick_ms", 100);
	st = rw_machine_new(c, &m);
	rw_config_free(&c); /* the machine keeps its own copy */
	if (st != RW_OK) {
		check(false, "machine_new_with_tick_100_succeeds", "%s", rw_last_error());
		return NULL;
	}
	for (unsigned i = 0; i < ndev; i++) {
		char name[16];
		uint32_t dev = 99;

		snprintf(name, sizeof(name), "mlx5_%u", i);
		if (rw_machine_add_device(m, name, ports, 1, 0, &dev) != RW_OK || dev != i)
			check(false, "add_device_gives_the_next_index", "%s -> %u (%s)", name, dev, rw_last_error());
	}
	pump(m, 0, PORT_ACTIVE, &s);
	return m;
}

/* The rail's word through its gate (freed here). */
static uint64_t word_of(rw_machine *m, uint32_t dev, uint32_t port)
{
	rw_gate *g = NULL;
	uint64_t w;

	if (rw_machine_gate(m, dev, port, &g) != RW_OK)
		return UINT64_MAX;
	w = rw_gate_load(rw_gate_word(g));
	rw_gate_free(&g);
	return w;
}

/* Pauses rail (dev, 1) with a PORT_ERR through a drain. */
static void pause_rail(rw_machine *m, uint32_t dev, uint64_t now, struct seen *s)
{
	struct queue q;
	rw_drain_report r;

	q_reset(&q);
	q_push(&q, 0, CODE_PORT_ERR, 1);
	rw_machine_drain(m, dev, q_get, &q, 0, now, &r);
	pump(m, now, PORT_DOWN, s);
}

/* ---- the five drain cases -------------------------------------------- */

/* A `get` that calls back into the machine it is draining for: a poll,
 * a nested drain and a free, each refused with RW_ERR_STATE (the drain
 * is the machine's one user while it runs); the drain goes on. */
struct reentrant {
	struct queue q, inner;
	rw_machine *m;
	int poll_status, drain_status;
	rw_machine *freed;
	uint64_t deadline;
	unsigned calls;
};

static int32_t reentrant_get(void *user, uint32_t *code, uint64_t *element)
{
	struct reentrant *r = user;

	if (r->calls++ == 0) {
		r->poll_status = rw_machine_poll_timeout(r->m, &r->deadline);
		r->drain_status = rw_machine_drain(r->m, 0, q_get, &r->inner, 0, 1000, NULL);
		r->freed = r->m;
		rw_machine_free(&r->freed);
	}
	return q_get(&r->q, code, element);
}

static void drain_get_may_not_call_the_machine(void)
{
	struct reentrant r;
	rw_drain_report rep;

	memset(&r, 0, sizeof(r));
	r.m = attached(1);
	if (!r.m)
		return;
	q_push(&r.q, 0, CODE_COMM_EST, QP_HANDLE);
	q_push(&r.q, 0, CODE_PORT_ERR, 1);
	q_push(&r.inner, 0, CODE_PORT_ERR, 1);
	CHECK_OK("reentrant_drain_ok", rw_machine_drain(r.m, 0, reentrant_get, &r, 0, 1000, &rep));
	CHECK_STATUS("reentrant_poll_refused", r.poll_status, RW_ERR_STATE);
	CHECK_STATUS("reentrant_drain_refused", r.drain_status, RW_ERR_STATE);
	CHECK_EQ("reentrant_drain_read_nothing", r.inner.gets, 0);
	check(r.freed == r.m, "reentrant_free_refused_left_the_pointer", "freed %p, machine %p", (void *)r.freed,
	      (void *)r.m);
	check(strstr(rw_last_error(), "inside a callback") != NULL, "reentrant_free_refusal_says_why",
	      "last error \"%s\"", rw_last_error());
	CHECK_EQ("reentrant_drain_read_both_events", rep.events, 2);
	CHECK_EQ("reentrant_drain_emptied_the_queue", rep.end, 0);
	/* The machine is still whole: it took the PORT_ERR, and answers. */
	CHECK_EQ("reentrant_drain_fed_the_machine", rw_word_state(word_of(r.m, 0, 1)), RW_RAIL_PAUSED);
	CHECK_OK("machine_answers_after_the_drain", rw_machine_poll_timeout(r.m, &r.deadline));
	rw_machine_free(&r.m);
	check(r.m == NULL, "machine_freed_after_the_drain", "machine %p", (void *)r.m);
}

static void drain_burst(void)
{
	rw_machine *m = attached(1);
	struct queue q;
	rw_drain_report r;

	if (!m)
		return;
	q_reset(&q);
	for (int i = 0; i < 5; i++)
		q_push(&q, 0, CODE_COMM_EST, QP_HANDLE + (uint64_t)i);
	memset(&r, 0xAB, sizeof(r));
	CHECK_OK("burst_drain_returns_ok", rw_machine_drain(m, 0, q_get, &q, 0, 1000, &r));
	CHECK_EQ("burst_of_5_takes_6_gets", q.gets, 6);
	CHECK_EQ("burst_of_5_acks_5", q.acks, 5);
	CHECK_EQ("burst_report_counts_5_events", r.events, 5);
	CHECK_EQ("burst_report_counts_6_gets", r.gets, 6);
	CHECK_EQ("burst_report_no_eintr", r.interrupted, 0);
	CHECK_EQ_I("burst_report_end_is_0_queue_emptied", r.end, 0);
	check(rw_word_admits(word_of(m, 0, 1)), "burst_of_comm_est_leaves_rail_admitted", "word %#llx",
	      (unsigned long long)word_of(m, 0, 1));
	rw_machine_free(&m);
}

static void drain_port_active_behind_burst(void)
{
	rw_machine *m = attached(1);
	struct seen s;
	struct queue q;
	rw_drain_report r;
	rw_gate *g = NULL;
	const uint64_t *word;
	uint64_t gen_paused, gen = 0;

	if (!m)
		return;
	memset(&s, 0, sizeof(s));
	CHECK_OK("behind_burst_gate", rw_machine_gate(m, 0, 1, &g));
	if (!g)
		goto out;
	word = rw_gate_word(g);
	check(word != NULL, "gate_word_is_not_null", "rw_gate_word returned NULL");
	if (!word)
		goto out;
	pause_rail(m, 0, 1000, &s);
	check(!rw_gate_check_inline(word, NULL), "port_err_pauses_rail_inline_gate_refuses", "word %#llx",
	      (unsigned long long)rw_gate_load(word));
	CHECK_EQ("port_err_rail_state_is_paused", rw_word_state(rw_gate_load(word)), RW_RAIL_PAUSED);
	CHECK_EQ("port_err_reason_is_port_err", rw_word_reason(rw_gate_load(word)), RW_REASON_PORT_ERR);
	gen_paused = rw_word_generation(rw_gate_load(word));

	q_reset(&q);
	for (int i = 0; i < 100; i++)
		q_push(&q, 0, CODE_COMM_EST, QP_HANDLE + (uint64_t)i);
	q_push(&q, 0, CODE_PORT_ACTIVE, 1);
	CHECK_OK("behind_burst_drain_ok", rw_machine_drain(m, 0, q_get, &q, 0, 2000, &r));
	CHECK_EQ("behind_burst_one_drain_reads_all_101", r.events, 101);
	CHECK_EQ("behind_burst_one_drain_reaches_eagain", q.gets, 102);
	CHECK_EQ("behind_burst_acks_101", q.acks, 101);
	CHECK_EQ_I("behind_burst_end_0", r.end, 0);
	memset(&s, 0, sizeof(s));
	pump(m, 2000, PORT_ACTIVE, &s);
	check(rw_gate_check_inline(word, &gen), "port_active_behind_burst_admits_after_one_drain", "word %#llx",
	      (unsigned long long)rw_gate_load(word));
	check(gen > gen_paused, "port_active_bumps_generation", "generation %llu, paused at %llu",
	      (unsigned long long)gen, (unsigned long long)gen_paused);
	CHECK_EQ("port_active_transition_to_active", s.last_transition.to_state, RW_RAIL_ACTIVE);
	CHECK_EQ("port_active_transition_cause_by", s.last_transition.cause, RW_CAUSE_BY);
	CHECK_EQ("port_active_transition_by_event", s.last_transition.cause_code, RW_BY_EVENT);
	CHECK_EQ("port_active_transition_names_rail_port", s.last_transition.port, 1);
out:
	rw_gate_free(&g);
	rw_machine_free(&m);
}

static void drain_empty(void)
{
	rw_machine *m = attached(1);
	struct queue q;
	rw_drain_report r;

	if (!m)
		return;
	q_reset(&q);
	CHECK_OK("empty_drain_ok", rw_machine_drain(m, 0, q_get, &q, 0, 1000, &r));
	CHECK_EQ("empty_queue_takes_1_get", q.gets, 1);
	CHECK_EQ("empty_queue_acks_nothing", q.acks, 0);
	CHECK_EQ("empty_report_0_events", r.events, 0);
	CHECK_EQ_I("empty_report_end_0", r.end, 0);
	rw_machine_free(&m);
}

static void drain_eintr(void)
{
	rw_machine *m = attached(1);
	struct queue q;
	rw_drain_report r;

	if (!m)
		return;
	q_reset(&q);
	q_push(&q, EINTR, 0, 0);
	q_push(&q, 0, CODE_COMM_EST, QP_HANDLE);
	q_push(&q, EINTR, 0, 0);
	q_push(&q, EINTR, 0, 0);
	q_push(&q, 0, CODE_COMM_EST, QP_HANDLE + 1);
	CHECK_OK("eintr_drain_ok", rw_machine_drain(m, 0, q_get, &q, 0, 1000, &r));
	CHECK_EQ("eintr_counted_as_interrupted", r.interrupted, 3);
	CHECK_EQ("eintr_events_behind_it_still_read", r.events, 2);
	CHECK_EQ("eintr_queue_read_to_eagain", q.gets, 6);
	CHECK_EQ("eintr_acks_the_2_events", q.acks, 2);
	CHECK_EQ_I("eintr_end_0", r.end, 0);
	rw_machine_free(&m);
}

static void drain_eio(void)
{
	rw_machine *m = attached(1);
	struct queue q;
	struct seen s;
	rw_drain_report r;
	rw_action a;
	uint64_t deadline = 0;

	if (!m)
		return;
	memset(&s, 0, sizeof(s));
	q_reset(&q);
	q_push(&q, 0, CODE_COMM_EST, QP_HANDLE);
	q_push(&q, EIO, 0, 0);
	q_push(&q, 0, CODE_COMM_EST, QP_HANDLE + 1);
	q_push(&q, 0, CODE_COMM_EST, QP_HANDLE + 2);
	CHECK_OK("eio_drain_ok", rw_machine_drain(m, 0, q_get, &q, 0, 1000, &r));
	CHECK_EQ_I("eio_end_is_5", r.end, EIO);
	CHECK_EQ("eio_stops_drain_no_get_after_it", q.gets, 2);
	CHECK_EQ("eio_report_gets_2", r.gets, 2);
	CHECK_EQ("eio_events_before_it_read", r.events, 1);
	CHECK_EQ("eio_later_events_not_acked", q.acks, 1);
	pump(m, 1000, PORT_ACTIVE, &s);
	CHECK_EQ("eio_machine_stops_reading_device", s.stops[0], 1);
	CHECK_EQ("eio_machine_logs_read_failed", s.read_failed_logs, 1);
	CHECK_OK("eio_poll_timeout_ok", rw_machine_poll_timeout(m, &deadline));
	check(deadline != RW_NO_DEADLINE && deadline > 1000, "eio_machine_asks_for_polling_deadline",
	      "deadline %llu", (unsigned long long)deadline);
	CHECK_OK("eio_handle_timeout_ok", rw_machine_handle_timeout(m, deadline));
	CHECK_OK("eio_poll_action_ok", rw_machine_poll_action(m, &a));
	check(a.kind == RW_ACTION_QUERY_PORT && a.device == 0 && a.port == 1, "eio_tick_queries_the_port",
	      "first action after the tick: kind %u device %u port %u", a.kind, a.device, a.port);
	if (a.kind == RW_ACTION_QUERY_PORT)
		rw_machine_handle_port_state(m, a.device, a.port, 0, PORT_ACTIVE, deadline);
	pump(m, deadline, PORT_ACTIVE, &s);
	check(rw_word_admits(word_of(m, 0, 1)), "eio_polled_rail_stays_admitted", "word %#llx",
	      (unsigned long long)word_of(m, 0, 1));
	rw_machine_free(&m);
}

/* ---- the three transport cases ---------------------------------------- */

/* The recovery poll leaves inert rails alone, and an inert rail's gate
 * refuses. */
static void poll_skips_inert(void)
{
	rw_machine *m = attached(2);
	struct seen s;
	rw_gate *g = NULL;
	rw_ticket t;
	uint64_t now = 1000, deadline = 0;

	if (!m)
		return;
	memset(&s, 0, sizeof(s));
	CHECK_OK("removed_ok", rw_machine_handle_removed(m, 0, now));
	pump(m, now, PORT_ACTIVE, &s);
	/* Rail mlx5_1/1 paused keeps the tick running. */
	pause_rail(m, 1, now, &s);
	memset(&s, 0, sizeof(s));
	for (int tick = 0; tick < 3; tick++) {
		if (rw_machine_poll_timeout(m, &deadline) != RW_OK || deadline == RW_NO_DEADLINE)
			break;
		now = deadline;
		rw_machine_handle_timeout(m, now);
		pump(m, now, PORT_DOWN, &s);
	}
	check(s.queries[1][1] >= 3, "poll_queries_the_paused_rail_every_tick", "%u queries of mlx5_1/1 in 3 ticks",
	      s.queries[1][1]);
	CHECK_EQ("poll_never_queries_a_removed_devices_rail", s.queries[0][1], 0);

	CHECK_OK("inert_rail_gate", rw_machine_gate(m, 0, 1, &g));
	if (g) {
		uint64_t gen = 12345;

		check(!rw_gate_check_inline(rw_gate_word(g), &gen), "inert_rail_inline_gate_refuses", "word %#llx",
		      (unsigned long long)rw_gate_load(rw_gate_word(g)));
		CHECK_EQ("refused_inline_check_leaves_generation_alone", gen, 12345);
		memset(&t, 0xFF, sizeof(t));
		CHECK_OK("inert_rail_gate_check_ok", rw_gate_check(g, &t));
		check(!t.admitted, "inert_rail_gate_check_refuses", "admitted");
		CHECK_EQ("inert_rail_gate_check_state_inert", t.state, RW_RAIL_INERT);
		CHECK_EQ("inert_rail_reason_device_removed", t.reason, RW_REASON_DEVICE_REMOVED);
	}
	rw_gate_free(&g);
	rw_machine_free(&m);
}

/* A paused rail whose PORT_ACTIVE was lost: the tick's query reads ACTIVE
 * and activates it. */
static void poll_recovers_lost_port_active(void)
{
	rw_machine *m = attached(1);
	struct seen s;
	rw_gate *g = NULL;
	uint64_t deadline = 0, gen_paused, gen = 0;

	if (!m)
		return;
	memset(&s, 0, sizeof(s));
	pause_rail(m, 0, 1000, &s);
	CHECK_OK("lost_port_active_gate", rw_machine_gate(m, 0, 1, &g));
	if (!g)
		goto out;
	check(!rw_gate_check_inline(rw_gate_word(g), NULL), "lost_port_active_rail_paused_first", "word %#llx",
	      (unsigned long long)rw_gate_load(rw_gate_word(g)));
	gen_paused = rw_word_generation(rw_gate_load(rw_gate_word(g)));
	CHECK_OK("lost_port_active_poll_timeout", rw_machine_poll_timeout(m, &deadline));
	check(deadline != RW_NO_DEADLINE, "paused_rail_arms_the_tick", "no deadline");
	if (deadline == RW_NO_DEADLINE)
		goto out;
	memset(&s, 0, sizeof(s));
	rw_machine_handle_timeout(m, deadline);
	pump(m, deadline, PORT_ACTIVE, &s);
	CHECK_EQ("tick_queries_the_paused_port", s.queries[0][1], 1);
	check(rw_gate_check_inline(rw_gate_word(g), &gen), "poll_reading_active_admits", "word %#llx",
	      (unsigned long long)rw_gate_load(rw_gate_word(g)));
	check(gen > gen_paused, "poll_activation_bumps_generation", "generation %llu, paused at %llu",
	      (unsigned long long)gen, (unsigned long long)gen_paused);
	CHECK_EQ("poll_activation_notified_once", s.transitions, 1);
	CHECK_EQ("poll_transition_from_paused", s.last_transition.from_state, RW_RAIL_PAUSED);
	CHECK_EQ("poll_transition_to_active", s.last_transition.to_state, RW_RAIL_ACTIVE);
	CHECK_EQ("poll_transition_cause_by", s.last_transition.cause, RW_CAUSE_BY);
	CHECK_EQ("poll_transition_by_poll", s.last_transition.cause_code, RW_BY_POLL);
	CHECK_EQ("poll_transition_generation_is_the_words", s.last_transition.generation, gen);
	CHECK_OK("healthy_host_poll_timeout", rw_machine_poll_timeout(m, &deadline));
	CHECK_EQ("healthy_host_has_no_deadline", deadline, RW_NO_DEADLINE);
out:
	rw_gate_free(&g);
	rw_machine_free(&m);
}

/* ---- the word layout ------------------------------------------------- */

static void word_layout(void)
{
	static const uint32_t port_states[] = { 0, 1, 2, 3, 4, 5, RW_WORD_PORT_NONE };
	static const uint64_t gens[] = { 0, 1, 2, 255, 256, 65535, 123456789, (1ull << 39), RW_WORD_GEN_MASK - 1,
					 RW_WORD_GEN_MASK };
	unsigned words = 0, bad_state = 0, bad_reason = 0, bad_port = 0, bad_gen = 0, bad_admits = 0, bad_lib = 0;

	CHECK_EQ("layout_version_matches_header", rw_word_layout_version(), RW_WORD_LAYOUT_VERSION);
	for (uint32_t st = 0; st <= 2; st++)
		for (uint32_t re = 0; re <= RW_REASON_NO_CARRIER; re++)
			for (size_t p = 0; p < sizeof(port_states) / sizeof(port_states[0]); p++)
				for (size_t gi = 0; gi < sizeof(gens) / sizeof(gens[0]); gi++) {
					uint64_t w = rw_word_encode(st, re, port_states[p], gens[gi]);
					rw_ticket t;

					words++;
					bad_state += rw_word_state(w) != st;
					bad_reason += rw_word_reason(w) != re;
					bad_port += rw_word_port_state(w) != port_states[p];
					bad_gen += rw_word_generation(w) != gens[gi];
					bad_admits += rw_word_admits(w) != (st == RW_RAIL_ACTIVE);
					if (rw_word_decode(w, &t) != RW_OK || t.state != rw_word_state(w) ||
					    t.reason != rw_word_reason(w) || t.port_state != rw_word_port_state(w) ||
					    t.generation != rw_word_generation(w) || t.admitted != rw_word_admits(w))
						bad_lib++;
				}
	check(words == 3 * (RW_REASON_NO_CARRIER + 1) * 7 * 10, "layout_covers_every_combination", "%u words", words);
	check(bad_state == 0, "inline_state_decodes_library_words", "%u of %u words wrong", bad_state, words);
	check(bad_reason == 0, "inline_reason_decodes_library_words", "%u of %u words wrong", bad_reason, words);
	check(bad_port == 0, "inline_port_state_decodes_library_words", "%u of %u words wrong", bad_port, words);
	check(bad_gen == 0, "inline_generation_decodes_library_words", "%u of %u words wrong", bad_gen, words);
	check(bad_admits == 0, "inline_admits_iff_state_active", "%u of %u words wrong", bad_admits, words);
	check(bad_lib == 0, "inline_decoders_agree_with_rw_word_decode", "%u of %u words differ", bad_lib, words);
	/* Distinct fields land in distinct bits. */
	check(rw_word_encode(0, 0, 0, 1) == (1ull << RW_WORD_GEN_SHIFT), "generation_1_is_bit_24",
	      "encode(0,0,0,1) = %#llx", (unsigned long long)rw_word_encode(0, 0, 0, 1));
	check(rw_word_encode(1, 0, 0, 0) == 1, "paused_is_state_1_in_bits_0_1", "encode(1,0,0,0) = %#llx",
	      (unsigned long long)rw_word_encode(1, 0, 0, 0));
	check(rw_word_encode(0, 1, 0, 0) == (1ull << RW_WORD_REASON_SHIFT), "reason_1_is_bit_2",
	      "encode(0,1,0,0) = %#llx", (unsigned long long)rw_word_encode(0, 1, 0, 0));
	check(rw_word_encode(0, 0, 4, 0) == (4ull << RW_WORD_PORT_SHIFT), "port_state_4_at_bit_8",
	      "encode(0,0,4,0) = %#llx", (unsigned long long)rw_word_encode(0, 0, 4, 0));
	check(rw_word_reason(rw_word_encode(1, RW_REASON_NO_CARRIER + 1, 0, 0)) == RW_REASON_NONE,
	      "a_reason_past_the_last_is_clamped_to_none", "reason %u",
	      rw_word_reason(rw_word_encode(1, RW_REASON_NO_CARRIER + 1, 0, 0)));
}

/* A drain of PORT_ERR, QP_FATAL and CQ_ERR: the lost work is the first
 * two notifications polled, the QP's with its handle; then DEVICE_FATAL
 * loses the whole device's, first again. */
static void drain_tells_lost_work_first(void)
{
	rw_machine *m = attached(1);
	struct queue q;
	rw_drain_report r;
	rw_action a;
	rw_notification first[2];
	unsigned n = 0;

	if (!m)
		return;
	q_reset(&q);
	q_push(&q, 0, CODE_PORT_ERR, 1);
	q_push(&q, 0, 1 /* QP_FATAL */, 0x7f0010);
	q_push(&q, 0, 0 /* CQ_ERR */, 0x7f0020);
	CHECK_OK("lost_work_drain_ok", rw_machine_drain(m, 0, q_get, &q, 0, 1000, &r));
	while (n < 2 && rw_machine_poll_action(m, &a) == RW_OK && a.kind == RW_ACTION_NOTIFY)
		first[n++] = a.notification;
	CHECK_EQ("lost_work_two_first", n, 2);
	if (n == 2) {
		CHECK_EQ("lost_work_qp_first", first[0].kind, RW_HAPPENING_WORK_LOST);
		CHECK_EQ("lost_work_qp_scope", first[0].work_scope, RW_WORK_QP);
		CHECK_EQ("lost_work_qp_event", first[0].event_code, 1);
		CHECK_EQ("lost_work_qp_handle", first[0].object_handle, 0x7f0010);
		CHECK_EQ("lost_work_cq_second", first[1].kind, RW_HAPPENING_WORK_LOST);
		CHECK_EQ("lost_work_cq_scope", first[1].work_scope, RW_WORK_CQ);
	}
	{
		struct seen s;

		memset(&s, 0, sizeof(s));
		pump(m, 1, 1 /* DOWN */, &s);
	}
	q_reset(&q);
	q_push(&q, 0, 8 /* DEVICE_FATAL */, 0);
	CHECK_OK("device_fatal_drain_ok", rw_machine_drain(m, 0, q_get, &q, 2, 1000, &r));
	check(rw_machine_poll_action(m, &a) == RW_OK && a.kind == RW_ACTION_NOTIFY &&
		      a.notification.kind == RW_HAPPENING_WORK_LOST && a.notification.work_scope == RW_WORK_DEVICE &&
		      a.notification.cause == RW_CAUSE_REASON && a.notification.cause_code == RW_REASON_DEVICE_FATAL,
	      "device_fatal_loses_the_device_first", "action %u kind %u scope %u", a.kind, a.notification.kind,
	      a.notification.work_scope);
	rw_machine_free(&m);
}

/* A port event read through the wrong member of the union (element no
 * port number): the drain goes on and feeds the rest, and says so; the
 * machine never sees the misread ones (no notification), as
 * rw_machine_handle_event refuses them. */
static void drain_says_a_misread_port(void)
{
	rw_machine *m = attached(1);
	struct queue q;
	rw_drain_report r;
	rw_action a;
	unsigned events = 0, on_port_1 = 0;

	if (!m)
		return;
	q_reset(&q);
	q_push(&q, 0, CODE_PORT_ERR, 0x7f0030);
	q_push(&q, 0, CODE_PORT_ERR, 0);
	q_push(&q, 0, CODE_PORT_ERR, 256);
	q_push(&q, 0, CODE_PORT_ERR, 0xffffffffu);
	q_push(&q, 0, CODE_PORT_ERR, 1ull << 32);
	q_push(&q, 0, CODE_PORT_ERR, 1);
	CHECK_STATUS("misread_port_drain_says_range", rw_machine_drain(m, 0, q_get, &q, 0, 1000, &r), RW_ERR_RANGE);
	check(strstr(rw_last_error(), "not a port number") != NULL, "misread_port_named", "%s", rw_last_error());
	check(strstr(rw_last_error(), "0x7f0030") != NULL, "misread_port_names_the_first", "%s", rw_last_error());
	CHECK_EQ("misread_port_all_read", r.events, 6);
	CHECK_EQ_I("misread_port_queue_emptied", r.end, 0);
	check(!rw_word_admits(word_of(m, 0, 1)), "misread_port_the_rest_fed", "the PORT_ERR after it was lost");
	while (rw_machine_poll_action(m, &a) == RW_OK && a.kind != RW_ACTION_NONE)
		if (a.kind == RW_ACTION_NOTIFY && a.notification.kind == RW_HAPPENING_EVENT) {
			events++;
			on_port_1 += a.port == 1;
		}
	CHECK_EQ("misread_port_not_notified", events, 1);
	CHECK_EQ("misread_port_only_port_1_notified", on_port_1, 1);
	rw_machine_free(&m);
}

/* The carrier as a second witness: a loss pauses an ACTIVE port
 * (RW_REASON_NO_CARRIER), a reading with no carrier keeps it paused, the
 * carrier's return re-queries and resumes; bad codes are refused. */
static void carrier_witness(void)
{
	rw_machine *m = attached(1);
	struct seen s;
	rw_action a;

	if (!m)
		return;
	memset(&s, 0, sizeof(s));
	CHECK_STATUS("carrier_down_taken", rw_machine_handle_carrier(m, 0, 1, RW_CARRIER_DOWN, 10), RW_OK);
	CHECK_EQ("carrier_down_pauses", rw_word_state(word_of(m, 0, 1)), RW_RAIL_PAUSED);
	CHECK_EQ("carrier_down_reason", rw_word_reason(word_of(m, 0, 1)), RW_REASON_NO_CARRIER);
	while (rw_machine_poll_action(m, &a) == RW_OK && a.kind != RW_ACTION_NONE)
		;
	CHECK_STATUS("reading_taken",
		     rw_machine_handle_port_reading(m, 0, 1, 0, PORT_ACTIVE, RW_CARRIER_DOWN, 20), RW_OK);
	CHECK_EQ("active_without_carrier_stays_paused", rw_word_state(word_of(m, 0, 1)), RW_RAIL_PAUSED);
	while (rw_machine_poll_action(m, &a) == RW_OK && a.kind != RW_ACTION_NONE)
		;
	CHECK_STATUS("carrier_up_taken", rw_machine_handle_carrier(m, 0, 1, RW_CARRIER_UP, 30), RW_OK);
	CHECK_EQ("carrier_up_asks_a_query", rw_machine_poll_action(m, &a) == RW_OK ? a.kind : RW_ACTION_NONE,
		 RW_ACTION_QUERY_PORT);
	rw_machine_handle_port_reading(m, 0, 1, 0, PORT_ACTIVE, RW_CARRIER_UP, 31);
	pump(m, 31, PORT_ACTIVE, &s);
	CHECK_EQ("carrier_up_resumes", rw_word_state(word_of(m, 0, 1)), RW_RAIL_ACTIVE);
	CHECK_STATUS("carrier_code_refused", rw_machine_handle_carrier(m, 0, 1, 7, 40), RW_ERR_RANGE);
	CHECK_STATUS("carrier_unknown_is_no_change", rw_machine_handle_carrier(m, 0, 1, RW_CARRIER_UNKNOWN, 40),
		     RW_ERR_RANGE);
	CHECK_EQ("refused_codes_change_nothing", rw_word_state(word_of(m, 0, 1)), RW_RAIL_ACTIVE);
	rw_machine_free(&m);
}

/* A log request comes with its words and level: the engine writes them
 * as they are, valid until its next poll. */
static void logs_come_in_words(void)
{
	rw_machine *m = attached(1);
	rw_action a;
	bool found = false;

	if (!m)
		return;
	CHECK_OK("unknown_event", rw_machine_handle_event(m, 0, 99, 0, 10));
	while (rw_machine_poll_action(m, &a) == RW_OK && a.kind != RW_ACTION_NONE) {
		if (a.kind != RW_ACTION_LOG || a.log.kind != RW_LOG_UNHANDLED)
			continue;
		found = true;
		check(a.log.text && strstr(a.log.text, "mlx5_0") && strstr(a.log.text, "code 99"),
		      "log_text_names_device_and_code", "\"%s\"", a.log.text ? a.log.text : "(null)");
		CHECK_EQ("log_level_warn", a.log.level, RW_LOG_LEVEL_WARN);
	}
	check(found, "unhandled_code_logged", "no RW_LOG_UNHANDLED");
	rw_machine_free(&m);
}

/* Every action names its device and port, NOTIFY and LOG included
 * (theirs, as the payload says), with the payload tagged by the kind: a
 * PORT_ERR (a transition of 1/1) and an unknown code (logged, 1/0). */
static void actions_name_their_rail(void)
{
	rw_machine *m = attached(2);
	struct queue q;
	rw_drain_report r;
	rw_action a;
	unsigned notes = 0, logs = 0;

	if (!m)
		return;
	q_reset(&q);
	q_push(&q, 0, CODE_PORT_ERR, 1);
	q_push(&q, 0, 99, 0);
	CHECK_OK("drain_port_err_on_device_1", rw_machine_drain(m, 1, q_get, &q, 0, 1000, &r));
	while (rw_machine_poll_action(m, &a) == RW_OK && a.kind != RW_ACTION_NONE) {
		if (a.kind == RW_ACTION_NOTIFY) {
			notes++;
			check(a.device == a.notification.device && a.port == a.notification.port,
			      "notify_names_its_rail", "action %u/%u, notification %u/%u", a.device, a.port,
			      a.notification.device, a.notification.port);
			if (a.notification.kind == RW_HAPPENING_TRANSITION)
				CHECK_EQ("transition_on_device_1_port_1", a.device * 10 + a.port, 11);
		} else if (a.kind == RW_ACTION_LOG) {
			logs++;
			check(a.device == a.log.device && a.port == a.log.port, "log_names_its_rail",
			      "action %u/%u, log %u/%u", a.device, a.port, a.log.device, a.log.port);
			if (a.log.kind == RW_LOG_UNHANDLED)
				CHECK_EQ("unhandled_code_on_device_1", a.device * 10 + a.port, 10);
		}
	}
	check(notes > 0 && logs > 0, "port_err_notified_and_logged", "%u notifications, %u logs", notes, logs);
	CHECK_EQ("union_payload_starts_at_16", offsetof(rw_action, notification), 16);
	CHECK_EQ("action_size_is_the_librarys", sizeof(rw_action), RW_ACTION_SIZE);
	rw_machine_free(&m);
}

/* A machine's own log callback: log requests go to it during the poll,
 * never as actions; it cannot call the machine; NULL goes back. */
struct heard {
	rw_machine *m;
	unsigned lines, warns;
	int inner_status;
	char last[256];
};

static void hear(void *user, uint32_t level, const char *target, const char *message)
{
	struct heard *h = user;

	h->lines++;
	h->warns += level == RW_LOG_LEVEL_WARN;
	snprintf(h->last, sizeof(h->last), "%s: %s", target, message);
	h->inner_status = rw_machine_handle_timeout(h->m, 0);
}

static void a_machine_has_its_own_logger(void)
{
	rw_machine *m = attached(1);
	struct heard h;
	rw_action a;
	unsigned log_actions = 0;

	if (!m)
		return;
	memset(&h, 0, sizeof(h));
	h.m = m;
	CHECK_OK("set_log_callback", rw_machine_set_log_callback(m, hear, &h, RW_LOG_LEVEL_INFO));
	CHECK_OK("unknown_event_to_logger", rw_machine_handle_event(m, 0, 99, 0, 10));
	while (rw_machine_poll_action(m, &a) == RW_OK && a.kind != RW_ACTION_NONE)
		log_actions += a.kind == RW_ACTION_LOG;
	CHECK_EQ("no_log_actions_with_a_logger", log_actions, 0);
	CHECK_EQ("logger_heard_one_warning", h.warns, 1);
	check(strstr(h.last, "railwatch: ") == h.last && strstr(h.last, "code 99"), "logger_heard_the_words", "\"%s\"",
	      h.last);
	CHECK_STATUS("logger_may_not_call_the_machine", h.inner_status, RW_ERR_STATE);
	/* Above max_level: dropped (an unknown code is said once; a second
	 * device's is another warning, so use the level cut instead). */
	CHECK_OK("logger_errors_only", rw_machine_set_log_callback(m, hear, &h, RW_LOG_LEVEL_ERROR));
	h.lines = 0;
	CHECK_OK("another_unknown_event", rw_machine_handle_event(m, 0, 98, 0, 11));
	while (rw_machine_poll_action(m, &a) == RW_OK && a.kind != RW_ACTION_NONE)
		log_actions += a.kind == RW_ACTION_LOG;
	CHECK_EQ("warnings_above_max_level_dropped", h.lines + log_actions, 0);
	CHECK_STATUS("logger_level_past_trace", rw_machine_set_log_callback(m, hear, &h, RW_LOG_LEVEL_TRACE + 1),
		     RW_ERR_INVALID);
	check(strstr(rw_last_error(), "max_level 6") != NULL, "logger_level_named", "%s", rw_last_error());
	CHECK_OK("logger_off", rw_machine_set_log_callback(m, NULL, NULL, 0));
	CHECK_OK("third_unknown_event", rw_machine_handle_event(m, 0, 97, 0, 12));
	while (rw_machine_poll_action(m, &a) == RW_OK && a.kind != RW_ACTION_NONE)
		log_actions += a.kind == RW_ACTION_LOG;
	CHECK_EQ("log_actions_again_without_a_logger", log_actions, 1);
	rw_machine_free(&m);
}

/* Devices at the engine's own slots; the slots below stay empty. */
static void devices_take_slots(void)
{
	rw_machine *m = NULL;
	struct seen s;
	const uint8_t ports[] = { 1 };
	char name[64];
	size_t len = 0;

	memset(&s, 0, sizeof(s));
	CHECK_OK("slots_machine", rw_machine_new(NULL, &m));
	CHECK_OK("device_at_slot_2", rw_machine_add_device_at(m, 2, "mlx5_2", ports, 1, 0));
	pump(m, 0, PORT_ACTIVE, &s);
	CHECK_EQ("slot_2_active", rw_word_state(word_of(m, 2, 1)), RW_RAIL_ACTIVE);
	CHECK_EQ("empty_slots_never_asked", s.queries[0][1] + s.queries[1][1], 0);
	CHECK_STATUS("empty_slot_has_no_name", rw_machine_device_name(m, 0, name, sizeof(name), &len),
		     RW_ERR_NOT_FOUND);
	CHECK_STATUS("empty_slot_has_no_rail", rw_machine_gate(m, 1, 1, &(rw_gate *){ NULL }), RW_ERR_RANGE);
	CHECK_STATUS("empty_slot_takes_no_event", rw_machine_handle_event(m, 1, 10 /* PORT_ERR */, 1, 1), RW_ERR_RANGE);
	check(strstr(rw_last_error(), "slot 1 is empty") != NULL, "empty_slot_said", "%s", rw_last_error());
	CHECK_STATUS("empty_slot_takes_no_hangup", rw_machine_handle_hangup(m, 0, 1), RW_ERR_RANGE);
	CHECK_STATUS("empty_slot_takes_no_read_error", rw_machine_handle_read_error(m, 0, EIO, 1), RW_ERR_RANGE);
	CHECK_STATUS("empty_slot_takes_no_open", rw_machine_handle_opened(m, 1, ports, 1, 0, 1), RW_ERR_RANGE);
	CHECK_STATUS("empty_slot_takes_no_reopen", rw_machine_handle_reopen(m, 1, 0, 1), RW_ERR_RANGE);
	CHECK_STATUS("empty_slot_takes_no_removal", rw_machine_handle_removed(m, 1, 1), RW_ERR_RANGE);
	CHECK_STATUS("held_slot_refused", rw_machine_add_device_at(m, 2, "mlx5_9", ports, 1, 1), RW_ERR_INVALID);
	check(strstr(rw_last_error(), "mlx5_2") != NULL, "held_slot_names_its_device", "%s", rw_last_error());
	CHECK_STATUS("slot_past_the_bound", rw_machine_add_device_at(m, RW_MAX_DEVICES, "x", ports, 1, 1),
		     RW_ERR_RANGE);
	CHECK_OK("empty_slot_taken_later", rw_machine_add_device_at(m, 0, "mlx5_0", ports, 1, 2));
	pump(m, 2, PORT_ACTIVE, &s);
	CHECK_EQ("slot_0_active", rw_word_state(word_of(m, 0, 1)), RW_RAIL_ACTIVE);
	CHECK_OK("slot_0_named", rw_machine_device_name(m, 0, name, sizeof(name), &len));
	check(strcmp(name, "mlx5_0") == 0, "slot_0_is_mlx5_0", "\"%s\"", name);
	{
		/* Back with two ports: its own slot, a rail for each. */
		const uint8_t two[] = { 1, 2 };
		uint32_t dev = 99;

		CHECK_OK("slot_2_leaves", rw_machine_handle_removed(m, 2, 3));
		CHECK_OK("slot_2_back_with_two_ports", rw_machine_add_device_at(m, 2, "mlx5_2", two, 2, 4));
		pump(m, 4, PORT_ACTIVE, &s);
		CHECK_EQ("slot_2_port_2_active", rw_word_state(word_of(m, 2, 2)), RW_RAIL_ACTIVE);
		CHECK_OK("slot_0_leaves", rw_machine_handle_removed(m, 0, 5));
		CHECK_OK("slot_0_back_by_add_device", rw_machine_add_device(m, "mlx5_0", two, 2, 6, &dev));
		CHECK_EQ("add_device_keeps_the_slot", dev, 0);
		/* No more than RW_MAX_DEVICES, whatever is added. */
		CHECK_OK("last_slot", rw_machine_add_device_at(m, RW_MAX_DEVICES - 1, "last", ports, 1, 7));
		CHECK_STATUS("no_device_past_the_bound", rw_machine_add_device(m, "over", ports, 1, 7, &dev),
			     RW_ERR_RANGE);
	}
	rw_machine_free(&m);
}

/* The four-value status an engine like TENT keeps, from any word. */
static void words_read_as_an_engine_status(void)
{
	for (uint32_t state = 0; state < 4; state++)
		for (uint32_t reason = 0; reason < 16; reason++)
			for (int read = 0; read < 2; read++) {
				uint64_t w = rw_word_encode(state, reason, read ? 4 : RW_WORD_PORT_NONE, 7);
				uint32_t want = state == RW_RAIL_ACTIVE ? RW_ENGINE_ENABLED
						: state == RW_RAIL_PAUSED ? RW_ENGINE_PAUSED
						: reason == RW_REASON_NOT_OPENED && !read ? RW_ENGINE_UNINITIALISED
											  : RW_ENGINE_DISABLED;
				if (rw_word_engine_status(w) != want) {
					check(false, "engine_status_of_every_word", "state %u reason %u read %d: %u, want %u",
					      state, reason, read, rw_word_engine_status(w), want);
					return;
				}
			}
	check(true, "engine_status_of_every_word", "%s", "all 128");
	{
		rw_machine *m = NULL;
		const uint8_t ports[] = { 1 };
		struct seen s;
		uint32_t dev;

		memset(&s, 0, sizeof(s));
		rw_machine_new(NULL, &m);
		rw_machine_add_device(m, "mlx5_0", ports, 1, 0, &dev);
		CHECK_EQ("before_the_attach_uninitialised", rw_word_engine_status(word_of(m, 0, 1)),
			 RW_ENGINE_UNINITIALISED);
		pump(m, 0, PORT_ACTIVE, &s);
		CHECK_EQ("attached_enabled", rw_word_engine_status(word_of(m, 0, 1)), RW_ENGINE_ENABLED);
		pause_rail(m, 0, 10, &s);
		CHECK_EQ("port_err_paused", rw_word_engine_status(word_of(m, 0, 1)), RW_ENGINE_PAUSED);
		rw_machine_handle_removed(m, 0, 20);
		pump(m, 20, PORT_ACTIVE, &s);
		CHECK_EQ("removed_disabled", rw_word_engine_status(word_of(m, 0, 1)), RW_ENGINE_DISABLED);
		rw_machine_free(&m);
	}
}

/* rw_machine_poll_wait: the epoll timeout, capped; -1 only with no cap
 * and no deadline. */
static void poll_wait_is_the_epoll_timeout(void)
{
	rw_machine *m = attached(1);
	uint64_t deadline = 0;
	int32_t wait = 99;

	if (!m)
		return;
	CHECK_OK("poll_timeout", rw_machine_poll_timeout(m, &deadline));
	if (deadline == RW_NO_DEADLINE) {
		CHECK_OK("poll_wait_no_deadline", rw_machine_poll_wait(m, 0, 50, &wait));
		CHECK_EQ_I("no_deadline_waits_the_cap", wait, 50);
		CHECK_OK("poll_wait_no_cap", rw_machine_poll_wait(m, 0, -1, &wait));
		CHECK_EQ_I("no_deadline_no_cap_waits_for_ever", wait, -1);
	} else {
		CHECK_OK("poll_wait_before", rw_machine_poll_wait(m, deadline - 7, 1000, &wait));
		CHECK_EQ_I("waits_until_the_deadline", wait, 7);
		CHECK_OK("poll_wait_capped", rw_machine_poll_wait(m, deadline - 7000, 50, &wait));
		CHECK_EQ_I("capped_at_50", wait, 50);
		CHECK_OK("poll_wait_late", rw_machine_poll_wait(m, deadline + 5, 50, &wait));
		CHECK_EQ_I("a_passed_deadline_waits_0", wait, 0);
	}
	CHECK_STATUS("poll_wait_null_out", rw_machine_poll_wait(m, 0, 50, NULL), RW_ERR_NULL);
	rw_machine_free(&m);
}

/* rw_machine_poll_wait follows the machine's clock: an earlier now_ms than
 * an input gave counts as that one; a saturated deadline is no deadline,
 * as rw_machine_poll_timeout says. */
static void poll_wait_follows_the_clock(void)
{
	rw_machine *m = attached(1);
	struct seen s;
	uint64_t deadline = 0;
	int32_t wait = 99;

	if (!m)
		return;
	memset(&s, 0, sizeof(s));
	CHECK_OK("clock_port_err", rw_machine_handle_event(m, 0, CODE_PORT_ERR, 1, 5000));
	pump(m, 5000, 1 /* DOWN */, &s);
	CHECK_OK("clock_poll_timeout", rw_machine_poll_timeout(m, &deadline));
	check(deadline > 5000 && deadline != RW_NO_DEADLINE, "clock_a_deadline", "%llu", (unsigned long long)deadline);
	CHECK_OK("clock_poll_wait_earlier", rw_machine_poll_wait(m, 0, -1, &wait));
	CHECK_EQ_I("clock_earlier_now_counts_as_the_latest", wait, (int64_t)(deadline - 5000));
	CHECK_OK("clock_poll_wait_later", rw_machine_poll_wait(m, 5001, -1, &wait));
	CHECK_EQ_I("clock_later_now_counts", wait, (int64_t)(deadline - 5001));
	CHECK_OK("clock_poll_wait_earlier_again", rw_machine_poll_wait(m, 0, -1, &wait));
	CHECK_EQ_I("clock_asking_is_no_input", wait, (int64_t)(deadline - 5000));

	CHECK_OK("clock_saturated_timeout", rw_machine_handle_timeout(m, UINT64_MAX - 10));
	pump(m, UINT64_MAX - 10, 1 /* DOWN */, &s);
	CHECK_OK("clock_saturated_poll_timeout", rw_machine_poll_timeout(m, &deadline));
	CHECK_EQ("clock_saturated_no_deadline", deadline, RW_NO_DEADLINE);
	CHECK_OK("clock_saturated_poll_wait", rw_machine_poll_wait(m, 100, -1, &wait));
	CHECK_EQ_I("clock_saturated_waits_for_ever", wait, -1);
	CHECK_OK("clock_saturated_poll_wait_capped", rw_machine_poll_wait(m, 100, 50, &wait));
	CHECK_EQ_I("clock_saturated_waits_the_cap", wait, 50);
	rw_machine_free(&m);
}

/* A refused drain still writes its report, with end EINVAL (never a stale
 * -1 that would keep a `while (end == -1)` loop going). */
static void a_refused_drain_writes_its_report(void)
{
	rw_machine *m = attached(1);
	rw_drain_report r;

	if (!m)
		return;
	r.end = -1;
	CHECK_STATUS("drain_device_7", rw_machine_drain(m, 7, q_get, NULL, 0, 0, &r), RW_ERR_RANGE);
	CHECK_EQ_I("refused_drain_end_einval", r.end, EINVAL);
	r.end = -1;
	CHECK_STATUS("drain_null_machine", rw_machine_drain(NULL, 0, q_get, NULL, 0, 0, &r), RW_ERR_NULL);
	CHECK_EQ_I("null_machine_end_einval", r.end, EINVAL);
	CHECK_EQ("refused_drain_read_nothing", r.gets, 0);
	rw_machine_free(&m);
}

/* RW_ACTION_REVALIDATE says why the device is out of use. */
static void revalidate_says_why(void)
{
	rw_config *c = NULL;
	rw_machine *m = NULL;
	struct seen s;
	const uint8_t ports[] = { 1 };
	uint32_t dev;
	rw_action a;
	uint32_t reason = 99;

	memset(&s, 0, sizeof(s));
	rw_config_new(&c);
	rw_config_set_str(c, "device_owner", "engine");
	rw_config_set_u64(c, "reopen_jitter_pct", 0);
	CHECK_OK("engine_owned_machine", rw_machine_new(c, &m));
	rw_config_free(&c);
	rw_machine_add_device(m, "mlx5_0", ports, 1, 0, &dev);
	pump(m, 0, PORT_ACTIVE, &s);
	CHECK_OK("device_fatal", rw_machine_handle_event(m, dev, 8 /* IBV_EVENT_DEVICE_FATAL */, 0, 10));
	pump(m, 10, PORT_ACTIVE, &s);
	CHECK_OK("after_the_backoff", rw_machine_handle_timeout(m, 120000));
	while (rw_machine_poll_action(m, &a) == RW_OK && a.kind != RW_ACTION_NONE)
		if (a.kind == RW_ACTION_REVALIDATE)
			reason = a.reason;
	CHECK_EQ("revalidate_reason_device_fatal", reason, RW_REASON_DEVICE_FATAL);
	check(rw_action_is_query(RW_ACTION_REVALIDATE) && rw_action_is_query(RW_ACTION_READ_COUNTERS) &&
		      !rw_action_is_query(RW_ACTION_NOTIFY) && !rw_action_is_query(RW_ACTION_SET_AVAILABLE),
	      "action_is_query", "%s", "wrong kinds");
	rw_machine_free(&m);
}

int main(void)
{
	poll_wait_is_the_epoll_timeout();
	poll_wait_follows_the_clock();
	a_refused_drain_writes_its_report();
	revalidate_says_why();
	actions_name_their_rail();
	a_machine_has_its_own_logger();
	devices_take_slots();
	words_read_as_an_engine_status();
	logs_come_in_words();
	carrier_witness();
	drain_says_a_misread_port();
	drain_tells_lost_work_first();
	drain_get_may_not_call_the_machine();
	drain_burst();
	drain_port_active_behind_burst();
	drain_empty();
	drain_eintr();
	drain_eio();
	poll_skips_inert();
	poll_recovers_lost_port_active();
	word_layout();
	return check_done();
}
