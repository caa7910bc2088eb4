/*
 * verbs.c: railwatch_verbs.h, the libibverbs glue of embedding 1. The
 * conversion of a struct ibv_async_event for every code (the union filled
 * as the kernel fills it, with garbage above a port number), what the
 * machine makes of it, and a drain through rw_verbs_get_event over a
 * context of the fake libibverbs (the runner puts it first in
 * LD_LIBRARY_PATH; its control functions are looked up with dlsym).
 */
#define _GNU_SOURCE
#include "check.h" /* first: it sets the feature macros */

#include <dlfcn.h>

#include "railwatch_verbs.h"

static int (*fake_set_devices)(int n);
static int (*fake_push_event)(int dev, uint32_t code, uint64_t element);
static int (*fake_set_port_state)(int dev, int port, uint32_t state);
static long long (*fake_counter)(const char *name);

static bool find_fake(void)
{
	*(void **)&fake_set_devices = dlsym(RTLD_DEFAULT, "fake_set_devices");
	*(void **)&fake_push_event = dlsym(RTLD_DEFAULT, "fake_push_event");
	*(void **)&fake_set_port_state = dlsym(RTLD_DEFAULT, "fake_set_port_state");
	*(void **)&fake_counter = dlsym(RTLD_DEFAULT, "fake_counter");
	return fake_set_devices && fake_push_event && fake_set_port_state && fake_counter;
}

/* An event as the kernel leaves it: the union's 8 bytes hold a pointer's
 * bits, and a port event writes only port_num (an int) over them. */
static struct ibv_async_event event_of(enum ibv_event_type type)
{
	struct ibv_async_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.element.qp = (struct ibv_qp *)(uintptr_t)0x7f00deadbe00ull;
	ev.event_type = type;
	return ev;
}

static void conversion(void)
{
	static const enum ibv_event_type port_events[] = { IBV_EVENT_PORT_ACTIVE, IBV_EVENT_PORT_ERR,
							   IBV_EVENT_LID_CHANGE,  IBV_EVENT_PKEY_CHANGE,
							   IBV_EVENT_SM_CHANGE,   IBV_EVENT_CLIENT_REREGISTER,
							   IBV_EVENT_GID_CHANGE };
	static const enum ibv_event_type qp_events[] = { IBV_EVENT_QP_FATAL,  IBV_EVENT_QP_REQ_ERR,
							 IBV_EVENT_QP_ACCESS_ERR, IBV_EVENT_COMM_EST,
							 IBV_EVENT_SQ_DRAINED, IBV_EVENT_PATH_MIG,
							 IBV_EVENT_PATH_MIG_ERR, IBV_EVENT_QP_LAST_WQE_REACHED };
	struct ibv_async_event ev;
	uint32_t code;
	uint64_t element;
	char name[64];

	for (size_t i = 0; i < sizeof(port_events) / sizeof(port_events[0]); i++) {
		ev = event_of(port_events[i]);
		ev.element.port_num = 1;
		rw_verbs_event_input(&ev, &code, &element);
		snprintf(name, sizeof(name), "port_event_%d_gives_port_1", (int)port_events[i]);
		CHECK_EQ(name, element, 1);
		snprintf(name, sizeof(name), "port_event_%d_code", (int)port_events[i]);
		CHECK_EQ(name, code, port_events[i]);
	}
	for (size_t i = 0; i < sizeof(qp_events) / sizeof(qp_events[0]); i++) {
		ev = event_of(qp_events[i]);
		rw_verbs_event_input(&ev, &code, &element);
		snprintf(name, sizeof(name), "qp_event_%d_gives_the_qp", (int)qp_events[i]);
		CHECK_EQ(name, element, 0x7f00deadbe00ull);
	}
	ev = event_of(IBV_EVENT_CQ_ERR);
	ev.element.cq = (struct ibv_cq *)(uintptr_t)0x1000;
	rw_verbs_event_input(&ev, &code, &element);
	CHECK_EQ("cq_err_gives_the_cq", element, 0x1000);
	ev = event_of(IBV_EVENT_SRQ_LIMIT_REACHED);
	ev.element.srq = (struct ibv_srq *)(uintptr_t)0x2000;
	rw_verbs_event_input(&ev, &code, &element);
	CHECK_EQ("srq_limit_gives_the_srq", element, 0x2000);
	ev = event_of(IBV_EVENT_WQ_FATAL);
	ev.element.wq = (struct ibv_wq *)(uintptr_t)0x3000;
	rw_verbs_event_input(&ev, &code, &element);
	CHECK_EQ("wq_fatal_gives_the_wq", element, 0x3000);
	ev = event_of(IBV_EVENT_DEVICE_FATAL);
	rw_verbs_event_input(&ev, &code, &element);
	CHECK_EQ("device_fatal_gives_0", element, 0);
	ev = event_of((enum ibv_event_type)99);
	rw_verbs_event_input(&ev, &code, &element);
	CHECK_EQ("unknown_code_gives_0", element, 0);
	CHECK_EQ("unknown_code_kept", code, 99);
}

/* A machine with mlx5_0 attached (ports 1 and 2 ACTIVE, addresses not
 * read). */
static rw_machine *attached(void)
{
	rw_machine *m = NULL;
	rw_action a;
	uint32_t dev;
	const uint8_t ports[] = { 1, 2 };

	if (rw_machine_new(NULL, &m) != RW_OK || rw_machine_add_device(m, "mlx5_0", ports, 2, 0, &dev) != RW_OK)
		return m;
	while (rw_machine_poll_action(m, &a) == RW_OK && a.kind != RW_ACTION_NONE) {
		if (a.kind == RW_ACTION_QUERY_PORT)
			rw_machine_handle_port_state(m, a.device, a.port, 0, IBV_PORT_ACTIVE, 0);
		else if (a.kind == RW_ACTION_READ_LINK)
			rw_machine_handle_link(m, a.device, a.port, 0, 128, 2, 0, 0);
		else if (a.kind == RW_ACTION_READ_ADDRESS)
			rw_machine_handle_address(m, a.device, a.port, EOPNOTSUPP, NULL, 0);
	}
	return m;
}

static uint64_t generation(rw_machine *m, uint32_t port)
{
	rw_gate *g = NULL;
	rw_ticket t;

	memset(&t, 0, sizeof(t));
	if (rw_machine_gate(m, 0, port, &g) == RW_OK)
		rw_gate_check(g, &t);
	rw_gate_free(&g);
	return t.generation;
}

/* The README's sketch once passed ev.element.qp for a LID_CHANGE: the
 * generation never moved. Converted, it does (this engine reads no
 * addresses, so a LID_CHANGE always bumps). */
static void lid_change_moves_the_generation(void)
{
	rw_machine *m = attached();
	struct ibv_async_event ev = event_of(IBV_EVENT_LID_CHANGE);
	uint32_t code;
	uint64_t element, before;

	if (!m)
		return;
	ev.element.port_num = 2;
	before = generation(m, 2);
	CHECK_STATUS("lid_change_through_the_wrong_member_refused",
		     rw_machine_handle_event(m, 0, IBV_EVENT_LID_CHANGE, (uint64_t)(uintptr_t)ev.element.qp, 1),
		     RW_ERR_RANGE);
	CHECK_EQ("refused_lid_change_moves_nothing", generation(m, 2), before);
	rw_verbs_event_input(&ev, &code, &element);
	CHECK_OK("lid_change_converted", rw_machine_handle_event(m, 0, code, element, 1));
	CHECK_EQ("lid_change_moves_the_generation_of_port_2", generation(m, 2), before + 1);
	CHECK_EQ("lid_change_leaves_port_1", generation(m, 1), before);
	rw_machine_free(&m);
}

/* The machine's actions carried out over the fake context: every port
 * query through rw_verbs_answer; how many it answered. */
static unsigned pump(rw_machine *m, struct ibv_context *ctx, uint64_t now)
{
	rw_action a;
	unsigned answered = 0;

	while (rw_machine_poll_action(m, &a) == RW_OK && a.kind != RW_ACTION_NONE) {
		switch (a.kind) {
		case RW_ACTION_QUERY_PORT:
		case RW_ACTION_READ_LINK:
		case RW_ACTION_READ_ADDRESS:
		case RW_ACTION_READ_COUNTERS:
			if (rw_verbs_answer(m, ctx, &a, now) == RW_OK)
				answered++;
			else
				check(false, "every_query_answered", "kind %u: %s", a.kind, rw_last_error());
			break;
		default:
			break;
		}
	}
	return answered;
}

/* A hook that must run before each ack: it counts the fake's acks. */
struct hooked {
	unsigned calls, acked_first;
	uint32_t last_code;
};

static void before_ack(void *user, const struct ibv_async_event *ev)
{
	struct hooked *h = user;
	long long acks = fake_counter("acks");

	h->calls++;
	h->last_code = (uint32_t)ev->event_type;
	if (acks > h->acked_first + h->calls - 1)
		h->acked_first = 1000; /* acknowledged before the hook ran */
}

static uint64_t word_of(rw_machine *m, uint32_t port)
{
	rw_gate *g = NULL;
	uint64_t w = 0;

	if (rw_machine_gate(m, 0, port, &g) == RW_OK)
		w = rw_gate_load(rw_gate_word(g));
	rw_gate_free(&g);
	return w;
}

/* rw_verbs_* over a context of the fake libibverbs: non-blocking, a
 * drain of what was pushed, the recovery poll answered with
 * ibv_query_port. */
static void over_the_fake(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx;
	rw_machine *m = attached();
	rw_drain_report r;
	rw_action a;
	int n = 0;

	if (!m)
		return;
	if (!check(find_fake(), "fake_libibverbs_loaded", "the fake's control functions are missing")) {
		rw_machine_free(&m);
		return;
	}
	fake_set_devices(1);
	list = ibv_get_device_list(&n);
	ctx = list && n > 0 ? ibv_open_device(list[0]) : NULL;
	check(ctx != NULL, "fake_device_opens", "ibv_open_device failed (%d devices)", n);
	if (!ctx)
		goto out;
	CHECK_EQ("make_nonblocking", rw_verbs_make_nonblocking(ctx), 0);
	check((fcntl(ctx->async_fd, F_GETFL) & O_NONBLOCK) != 0, "async_fd_is_nonblocking", "flags %#x",
	      fcntl(ctx->async_fd, F_GETFL));

	/* The port drops: a COMM_EST and the PORT_ERR, drained to EAGAIN. */
	fake_set_port_state(0, 1, IBV_PORT_DOWN);
	fake_push_event(0, IBV_EVENT_COMM_EST, 0x1000);
	fake_push_event(0, IBV_EVENT_PORT_ERR, 1);
	memset(&r, 0, sizeof(r));
	CHECK_OK("drain_over_the_fake", rw_machine_drain(m, 0, rw_verbs_get_event, ctx, 0, 10, &r));
	CHECK_EQ("drain_read_both", r.events, 2);
	CHECK_EQ("drain_ended_empty", r.end, 0);
	pump(m, ctx, 10);
	CHECK_EQ("port_err_pauses_port_1", rw_word_reason(word_of(m, 1)), RW_REASON_PORT_ERR);

	/* The tick asks for the port, which still reads DOWN. */
	CHECK_OK("first_tick", rw_machine_handle_timeout(m, 2000));
	check(pump(m, ctx, 2000) > 0, "the_tick_asks_for_port_1", "no query");
	CHECK_EQ("port_1_read_down", rw_word_port_state(word_of(m, 1)), IBV_PORT_DOWN);
	check(!rw_word_admits(word_of(m, 1)), "port_1_still_refused", "admits");

	/* It comes back with no event: the next tick reads it ACTIVE. */
	fake_set_port_state(0, 1, IBV_PORT_ACTIVE);
	CHECK_OK("second_tick", rw_machine_handle_timeout(m, 4000));
	check(pump(m, ctx, 4000) >= 2, "the_tick_queries_then_reads_the_link", "fewer than 2 answers");
	check(rw_word_admits(word_of(m, 1)), "port_1_admitted_again", "word %#llx",
	      (unsigned long long)word_of(m, 1));

	/* Every kind of query, answered from the fake: the link's rate and
	 * the flap counters (none on this host: the machine stops asking). */
	{
		uint32_t kinds[] = { RW_ACTION_QUERY_PORT, RW_ACTION_READ_LINK, RW_ACTION_READ_ADDRESS,
				     RW_ACTION_READ_COUNTERS };
		for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
			memset(&a, 0, sizeof(a));
			a.kind = kinds[i];
			a.port = 1;
			CHECK_OK("answer_each_query_kind", rw_verbs_answer(m, ctx, &a, 4100));
			pump(m, ctx, 4100);
		}
		check(rw_word_admits(word_of(m, 1)), "answers_keep_port_1_active", "word %#llx",
		      (unsigned long long)word_of(m, 1));
	}

	/* The hook runs on each event before its ack; the machine sees it. */
	{
		struct hooked h;
		rw_verbs_reader reader = { ctx, before_ack, &h };

		memset(&h, 0, sizeof(h));
		h.acked_first = (unsigned)fake_counter("acks");
		fake_push_event(0, IBV_EVENT_COMM_EST, 0x2000);
		fake_push_event(0, IBV_EVENT_QP_FATAL, 0x3000);
		CHECK_OK("drain_with_a_hook", rw_machine_drain(m, 0, rw_verbs_read_event, &reader, 0, 4200, &r));
		CHECK_EQ("hook_saw_both", h.calls, 2);
		CHECK_EQ("hook_saw_qp_fatal_last", h.last_code, IBV_EVENT_QP_FATAL);
		check(h.acked_first != 1000, "hook_ran_before_each_ack", "an event was acknowledged first");
		CHECK_EQ("machine_saw_both", r.events, 2);
		pump(m, ctx, 4200);
	}

	memset(&a, 0, sizeof(a));
	a.kind = RW_ACTION_CLOSE;
	CHECK_STATUS("answer_refuses_other_actions", rw_verbs_answer(m, ctx, &a, 4300), RW_ERR_INVALID);
	a.kind = RW_ACTION_QUERY_PORT;
	a.port = 300;
	CHECK_STATUS("answer_refuses_port_300", rw_verbs_answer(m, ctx, &a, 4300), RW_ERR_RANGE);
	a.port = 1;
	CHECK_STATUS("answer_refuses_a_null_context", rw_machine_answer_verbs(m, &a, NULL, 4300), RW_ERR_NULL);
	/* REVALIDATE: the device's first port queried, as the check. */
	memset(&a, 0, sizeof(a));
	a.kind = RW_ACTION_REVALIDATE;
	CHECK_OK("answer_revalidate_by_a_port_query", rw_verbs_answer(m, ctx, &a, 4400));
	a.device = 9;
	CHECK_STATUS("answer_revalidate_device_9", rw_verbs_answer(m, ctx, &a, 4400), RW_ERR_RANGE);
	ibv_close_device(ctx);
out:
	if (list)
		ibv_free_device_list(list);
	rw_machine_free(&m);
}

int main(void)
{
	conversion();
	lid_change_moves_the_generation();
	over_the_fake();
	return check_done();
}
