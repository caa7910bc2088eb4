/*
 * monitor_sim.c: embedding 2 over the simulator. A monitor on its own
 * thread over rw_sim devices, with a C selector and subscribers: the five
 * drain cases and the three transport cases seen from outside (the sim's
 * counters, the gates, the snapshot), and what callbacks may do.
 *
 * Every wait is bounded: it polls with a deadline (WAIT_MS) and fails the
 * check when the deadline passes.
 */
#include "check.h" /* first: it sets the feature macros */

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "railwatch.h"

#define WAIT_MS 5000
#define CODE_QP_REQ_ERR 2 /* notified (an object error): a callback per event */
#define CODE_COMM_EST 4   /* only counted: no notification */
#define PORT_ACTIVE 4
#define QP_HANDLE 0x7f00deadbe00ull
#define NDEV 4

/* ---- what the callbacks saw --------------------------------------------- */

struct rec {
	pthread_mutex_t mu;
	const rw_sim *sim;
	rw_monitor *mon;
	/* the selector */
	unsigned seq;
	unsigned reseed_seq[NDEV];    /* sequence number of the first reseed */
	unsigned avail_seq[NDEV];     /* ... of the first set_available(true) */
	uint64_t rate[NDEV];
	bool available[NDEV];
	unsigned unavailable_calls[NDEV];
	/* notifications */
	unsigned events[NDEV];
	unsigned drains[NDEV];
	unsigned drain_failures[NDEV];
	int32_t last_drain_error[NDEV];
	unsigned transitions[NDEV];
	rw_notification last_transition[NDEV];
	unsigned ack_checked, ack_violations;
	/* calls into the API from inside a callback */
	bool inside_armed, inside_done;
	int inside_snapshot, inside_snapshot_small, inside_json, inside_gate, inside_gate_check;
	size_t inside_count, inside_needed;
	bool inside_json_has_rail;
};

static void rec_init(struct rec *r, const rw_sim *sim)
{
	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->mu, NULL);
	r->sim = sim;
	r->inside_snapshot = r->inside_snapshot_small = r->inside_json = r->inside_gate = -1;
}

static void sel_set_available(void *user, uint32_t device, uint32_t port, bool available)
{
	struct rec *r = user;

	(void)port;
	if (device >= NDEV)
		return;
	pthread_mutex_lock(&r->mu);
	r->seq++;
	if (available && r->avail_seq[device] == 0)
		r->avail_seq[device] = r->seq;
	if (!available)
		r->unavailable_calls[device]++;
	r->available[device] = available;
	pthread_mutex_unlock(&r->mu);
}

static void sel_reseed(void *user, uint32_t device, uint32_t port, uint64_t rate_mbps)
{
	struct rec *r = user;

	(void)port;
	if (device >= NDEV)
		return;
	pthread_mutex_lock(&r->mu);
	r->seq++;
	if (r->reseed_seq[device] == 0)
		r->reseed_seq[device] = r->seq;
	r->rate[device] = rate_mbps;
	pthread_mutex_unlock(&r->mu);
}

/* From inside a callback: snapshot, JSON, gate, and an attempt to free
 * the monitor. */
static void call_inside(struct rec *r)
{
	rw_rail_info rails[8];
	size_t count = 0, needed = 0;
	char *json = NULL;
	rw_gate *g = NULL;
	rw_ticket t;
	int snap, small, js, gate, gate_check = -1;
	bool has_rail;

	snap = rw_monitor_snapshot(r->mon, rails, 8, &count);
	small = rw_monitor_snapshot(r->mon, rails, 0, &needed);
	js = rw_monitor_snapshot_json(r->mon, &json);
	has_rail = json != NULL && strstr(json, "\"mlx5_0/1\"") != NULL;
	rw_string_free(&json);
	gate = rw_monitor_gate(r->mon, "mlx5_0/1", &g);
	if (g)
		gate_check = rw_gate_check(g, &t);
	rw_gate_free(&g);
	pthread_mutex_lock(&r->mu);
	r->inside_snapshot = snap;
	r->inside_snapshot_small = small;
	r->inside_count = count;
	r->inside_needed = needed;
	r->inside_json = js;
	r->inside_json_has_rail = has_rail;
	r->inside_gate = gate;
	r->inside_gate_check = gate_check;
	r->inside_done = true;
	pthread_mutex_unlock(&r->mu);
}

static void main_cb(void *user, const rw_notification *n)
{
	struct rec *r = user;
	rw_sim_counters c;
	bool inside = false;
	int got = -1;

	if (n->device >= NDEV)
		return;
	if (n->kind == RW_HAPPENING_EVENT)
		got = rw_sim_get_counters(r->sim, n->device, &c);
	pthread_mutex_lock(&r->mu);
	switch (n->kind) {
	case RW_HAPPENING_EVENT:
		r->events[n->device]++;
		r->ack_checked++;
		if (got != RW_OK || c.acked != c.read)
			r->ack_violations++;
		break;
	case RW_HAPPENING_DRAIN:
		r->drains[n->device]++;
		r->last_drain_error[n->device] = n->error;
		if (n->error != 0)
			r->drain_failures[n->device]++;
		break;
	case RW_HAPPENING_TRANSITION:
		r->transitions[n->device]++;
		r->last_transition[n->device] = *n;
		if (r->inside_armed && !r->inside_done) {
			inside = true;
			r->inside_armed = false;
		}
		break;
	default:
		break;
	}
	pthread_mutex_unlock(&r->mu);
	if (inside)
		call_inside(r);
}

/* A subscriber that ends its own subscription on its first call. */
struct self_unsub {
	pthread_mutex_t mu;
	const rw_monitor *mon;
	uint64_t id;
	bool id_set;
	unsigned calls;
	int status;
};

static void self_unsub_cb(void *user, const rw_notification *n)
{
	struct self_unsub *s = user;

	(void)n;
	pthread_mutex_lock(&s->mu);
	s->calls++;
	if (s->id_set && s->status == -1)
		s->status = rw_monitor_unsubscribe(s->mon, s->id);
	pthread_mutex_unlock(&s->mu);
}

/* A slow subscriber ended from the main thread. */
static atomic_uint counting_calls;
static atomic_bool counting_over;	/* set once rw_monitor_unsubscribe returned */
static atomic_uint counting_late;	/* calls that started after that */

static void counting_cb(void *user, const rw_notification *n)
{
	unsigned *mine = user;

	(void)n;
	if (atomic_load(&counting_over))
		atomic_fetch_add(&counting_late, 1);
	(*mine)++;	/* freed right after unsubscribing: valgrind sees a late call */
	atomic_fetch_add(&counting_calls, 1);
	check_sleep_ms(1);
}

/* ---- helpers ------------------------------------------------------------- */

static unsigned rec_get(struct rec *r, const unsigned *field)
{
	unsigned v;

	pthread_mutex_lock(&r->mu);
	v = *field;
	pthread_mutex_unlock(&r->mu);
	return v;
}

static bool rec_inside_done(struct rec *r)
{
	bool v;

	pthread_mutex_lock(&r->mu);
	v = r->inside_done;
	pthread_mutex_unlock(&r->mu);
	return v;
}

/* Rail (dev, 1) has become active again after `n` transitions. */
static bool rec_reactivated(struct rec *r, uint32_t dev, unsigned n)
{
	bool v;

	pthread_mutex_lock(&r->mu);
	v = r->transitions[dev] >= n && r->last_transition[dev].to_state == RW_RAIL_ACTIVE;
	pthread_mutex_unlock(&r->mu);
	return v;
}

static rw_sim_counters counters(const rw_sim *sim, uint32_t dev)
{
	rw_sim_counters c;

	memset(&c, 0, sizeof(c));
	rw_sim_get_counters(sim, dev, &c);
	return c;
}

/* The monitor's gate of `rail`, waiting for the rail to exist. */
static rw_gate *gate_of(const rw_monitor *mon, const char *rail)
{
	rw_gate *g = NULL;
	bool ok;

	WAIT_UNTIL(ok, rw_monitor_gate(mon, rail, &g) == RW_OK, WAIT_MS);
	(void)ok;
	return g;
}

static uint64_t load(const rw_gate *g)
{
	return g ? rw_gate_load(rw_gate_word(g)) : UINT64_MAX;
}

static bool admits(const rw_gate *g)
{
	return g && rw_gate_check_inline(rw_gate_word(g), NULL);
}

/* The snapshot's entry for `rail`; false when absent. The snapshot is
 * published after the wake-up that changed the gate's word: wait for it. */
static bool rail_info(const rw_monitor *mon, const char *rail, rw_rail_info *out)
{
	rw_rail_info rails[8];
	size_t n = 0;

	if (rw_monitor_snapshot(mon, rails, 8, &n) != RW_OK)
		return false;
	for (size_t i = 0; i < n; i++)
		if (strcmp(rails[i].name, rail) == 0) {
			*out = rails[i];
			return true;
		}
	return false;
}

static rw_monitor *start(const rw_sim *sim, uint64_t tick_ms, struct rec *r)
{
	rw_config *c = NULL;
	rw_selector sel = { .user = r, .set_available = sel_set_available, .reseed = sel_reseed };
	rw_monitor *mon = NULL;

	rw_config_new(&c);
	rw_config_set_u64(c, "tick_ms", tick_ms);
	CHECK_OK("monitor_start_sim", rw_monitor_start_sim(c, &sel, sim, &mon));
	rw_config_free(&c); /* the monitor keeps its own copy */
	return mon;
}

/* ---- monitor A: the drain cases, the callbacks ------------------------------ */

static void drains_and_callbacks(void)
{
	rw_sim *sim = NULL;
	rw_monitor *mon = NULL;
	rw_gate *g0 = NULL, *g1 = NULL;
	struct rec r;
	struct self_unsub su;
	unsigned *counting_user;
	uint64_t main_id = 0, counting_id = 0, gen_paused;
	uint32_t d0 = 9, d1 = 9;
	rw_sim_counters before, after, c1;
	unsigned drains_before, events_before, n;
	bool ok;
	rw_rail_info info;

	if (rw_sim_new(&sim) != RW_OK) {
		check(false, "sim_new", "%s", rw_last_error());
		return;
	}
	CHECK_OK("sim_add_mlx5_0", rw_sim_add_device(sim, "mlx5_0", 1, &d0));
	CHECK_OK("sim_add_mlx5_1", rw_sim_add_device(sim, "mlx5_1", 1, &d1));
	CHECK_EQ("sim_devices_numbered_in_order", d0 * 10 + d1, 1);
	rec_init(&r, sim);
	/* The default tick (1 s): the event-driven cases finish long before it. */
	mon = start(sim, 1000, &r);
	if (!mon)
		goto out;
	r.mon = mon;
	g0 = gate_of(mon, "mlx5_0/1");
	g1 = gate_of(mon, "mlx5_1/1");
	check(g0 && g1, "monitor_publishes_both_rails_gates", "mlx5_0/1 %p mlx5_1/1 %p", (void *)g0, (void *)g1);
	if (!g0 || !g1)
		goto out;
	WAIT_UNTIL(ok, admits(g0) && admits(g1), WAIT_MS);
	check(ok, "attached_rails_admitted", "words %#llx %#llx", (unsigned long long)load(g0),
	      (unsigned long long)load(g1));
	WAIT_UNTIL(ok, rec_get(&r, &r.avail_seq[0]) != 0 && rec_get(&r, &r.avail_seq[1]) != 0, WAIT_MS);
	check(ok, "selector_told_both_rails_available", "not told");
	pthread_mutex_lock(&r.mu);
	check(r.reseed_seq[0] != 0 && r.reseed_seq[0] < r.avail_seq[0], "selector_reseeded_before_available",
	      "reseed #%u, available #%u", r.reseed_seq[0], r.avail_seq[0]);
	CHECK_EQ("selector_rate_is_ndr_4x_400000_mbps", r.rate[0], 400000);
	pthread_mutex_unlock(&r.mu);

	/* Subscribers, on a quiet host. */
	CHECK_OK("subscribe_main", rw_monitor_subscribe(mon, main_cb, &r, &main_id));
	memset(&su, 0, sizeof(su));
	pthread_mutex_init(&su.mu, NULL);
	su.mon = mon;
	su.status = -1;
	pthread_mutex_lock(&su.mu);
	CHECK_OK("subscribe_self_unsubscriber", rw_monitor_subscribe(mon, self_unsub_cb, &su, &su.id));
	su.id_set = true;
	pthread_mutex_unlock(&su.mu);
	counting_user = calloc(1, sizeof(*counting_user));
	CHECK_OK("subscribe_counting", rw_monitor_subscribe(mon, counting_cb, counting_user, &counting_id));
	check(main_id != su.id && su.id != counting_id && main_id != counting_id, "subscription_ids_differ",
	      "%llu %llu %llu", (unsigned long long)main_id, (unsigned long long)su.id,
	      (unsigned long long)counting_id);

	/* (a) A burst of 5: read 5, acked 5, and the drain ends in one EAGAIN. */
	before = counters(sim, 0);
	drains_before = rec_get(&r, &r.drains[0]);
	events_before = rec_get(&r, &r.events[0]);
	CHECK_OK("push_5_qp_req_err", rw_sim_push_event(sim, 0, CODE_QP_REQ_ERR, QP_HANDLE, 5));
	WAIT_UNTIL(ok, counters(sim, 0).read >= before.read + 5 && rec_get(&r, &r.drains[0]) > drains_before, WAIT_MS);
	after = counters(sim, 0);
	check(ok, "burst_drained", "read %llu -> %llu", (unsigned long long)before.read,
	      (unsigned long long)after.read);
	CHECK_EQ("burst_read_5", after.read - before.read, 5);
	CHECK_EQ("burst_acked_5", after.acked - before.acked, 5);
	n = rec_get(&r, &r.drains[0]) - drains_before;
	/* (c) Every drain ends with one get that found the queue empty. */
	CHECK_EQ("burst_gets_are_events_plus_one_eagain_per_drain", after.gets - before.gets, 5 + n);
	CHECK_EQ("burst_5_event_notifications", rec_get(&r, &r.events[0]) - events_before, 5);

	/* The self-unsubscriber was called once, ended itself, and is not
	 * called again. */
	pthread_mutex_lock(&su.mu);
	CHECK_EQ("self_unsubscribe_from_callback_called_once", su.calls, 1);
	CHECK_STATUS("self_unsubscribe_from_callback_ok", su.status, RW_OK);
	pthread_mutex_unlock(&su.mu);

	/* (d) EINTR is retried; the events behind it are read. */
	before = counters(sim, 0);
	drains_before = rec_get(&r, &r.drains[0]);
	CHECK_OK("sim_eintr_3", rw_sim_eintr(sim, 0, 3));
	CHECK_OK("push_2_after_eintr", rw_sim_push_event(sim, 0, CODE_QP_REQ_ERR, QP_HANDLE, 2));
	WAIT_UNTIL(ok, counters(sim, 0).read >= before.read + 2 && rec_get(&r, &r.drains[0]) > drains_before, WAIT_MS);
	after = counters(sim, 0);
	check(ok, "eintr_events_still_read", "read %llu -> %llu", (unsigned long long)before.read,
	      (unsigned long long)after.read);
	n = rec_get(&r, &r.drains[0]) - drains_before;
	CHECK_EQ("eintr_gets_are_events_eintrs_and_eagains", after.gets - before.gets, 2 + 3 + n);
	CHECK_EQ("eintr_acked_2", after.acked - before.acked, 2);
	CHECK_EQ("eintr_no_drain_failed", rec_get(&r, &r.drain_failures[0]), 0);

	/* (b) PORT_ERR pauses; PORT_ACTIVE behind 100 COMM_EST re-admits, by
	 * the event. The first transition also runs the in-callback calls. */
	pthread_mutex_lock(&r.mu);
	r.inside_armed = true;
	pthread_mutex_unlock(&r.mu);
	CHECK_OK("sim_port_down", rw_sim_port_down(sim, 0, 1));
	WAIT_UNTIL(ok, !admits(g0), WAIT_MS);
	check(ok, "port_err_gate_refuses", "word %#llx", (unsigned long long)load(g0));
	CHECK_EQ("port_err_reason_in_word", rw_word_reason(load(g0)), RW_REASON_PORT_ERR);
	WAIT_UNTIL(ok, rec_get(&r, &r.unavailable_calls[0]) > 0, WAIT_MS);
	check(ok, "port_err_selector_told_unavailable", "never told");
	gen_paused = rw_word_generation(load(g0));
	before = counters(sim, 0);
	CHECK_OK("push_100_comm_est", rw_sim_push_event(sim, 0, CODE_COMM_EST, QP_HANDLE, 100));
	CHECK_OK("sim_port_up", rw_sim_port_up(sim, 0, 1));
	WAIT_UNTIL(ok, admits(g0), WAIT_MS);
	check(ok, "port_active_behind_100_comm_est_admits", "word %#llx", (unsigned long long)load(g0));
	after = counters(sim, 0);
	CHECK_EQ("behind_burst_all_101_read", after.read - before.read, 101);
	CHECK_EQ("behind_burst_all_101_acked", after.acked - before.acked, 101);
	check(rw_word_generation(load(g0)) > gen_paused, "behind_burst_generation_bumped", "generation %llu, was %llu",
	      (unsigned long long)rw_word_generation(load(g0)), (unsigned long long)gen_paused);
	info.recovered_by = -9;
	WAIT_UNTIL(ok, rail_info(mon, "mlx5_0/1", &info) && info.generation == rw_word_generation(load(g0)), WAIT_MS);
	check(ok && info.recovered_by == RW_BY_EVENT, "behind_burst_recovered_by_event", "recovered_by %d",
	      info.recovered_by);
	WAIT_UNTIL(ok, rec_reactivated(&r, 0, 2), WAIT_MS);
	check(ok, "behind_burst_activation_notified", "no transition to active");
	pthread_mutex_lock(&r.mu);
	CHECK_EQ("behind_burst_transition_to_active", r.last_transition[0].to_state, RW_RAIL_ACTIVE);
	CHECK_EQ("behind_burst_transition_cause_by_event", r.last_transition[0].cause * 10 + r.last_transition[0].cause_code,
		 RW_CAUSE_BY * 10 + RW_BY_EVENT);
	CHECK_EQ("behind_burst_transition_port_1", r.last_transition[0].port, 1);
	pthread_mutex_unlock(&r.mu);

	/* What the callback did from inside. */
	WAIT_UNTIL(ok, rec_inside_done(&r), WAIT_MS);
	check(ok, "callback_ran_the_inside_calls", "never");
	pthread_mutex_lock(&r.mu);
	CHECK_STATUS("snapshot_from_callback_ok", r.inside_snapshot, RW_OK);
	CHECK_EQ("snapshot_from_callback_has_2_rails", r.inside_count, 2);
	CHECK_STATUS("snapshot_from_callback_small_buffer", r.inside_snapshot_small, RW_ERR_BUFFER);
	CHECK_EQ("snapshot_small_buffer_says_2_needed", r.inside_needed, 2);
	CHECK_STATUS("json_from_callback_ok", r.inside_json, RW_OK);
	check(r.inside_json_has_rail, "json_from_callback_names_rail", "no \"mlx5_0/1\"");
	CHECK_STATUS("gate_from_callback_ok", r.inside_gate, RW_OK);
	CHECK_STATUS("gate_check_from_callback_ok", r.inside_gate_check, RW_OK);
	pthread_mutex_unlock(&r.mu);

	/* Ending a busy subscription from the main thread: no call after it
	 * returns. */
	n = atomic_load(&counting_calls);
	CHECK_OK("push_40_for_counting", rw_sim_push_event(sim, 0, CODE_QP_REQ_ERR, QP_HANDLE, 40));
	WAIT_UNTIL(ok, atomic_load(&counting_calls) >= n + 3, WAIT_MS);
	check(ok, "counting_subscriber_called", "%u calls", atomic_load(&counting_calls) - n);
	CHECK_OK("unsubscribe_from_main_thread", rw_monitor_unsubscribe(mon, counting_id));
	atomic_store(&counting_over, true);
	n = atomic_load(&counting_calls);
	free(counting_user);
	events_before = rec_get(&r, &r.events[0]);
	CHECK_OK("push_5_after_unsubscribe", rw_sim_push_event(sim, 0, CODE_QP_REQ_ERR, QP_HANDLE, 5));
	WAIT_UNTIL(ok, rec_get(&r, &r.events[0]) >= events_before + 5, WAIT_MS);
	check(ok, "events_after_unsubscribe_dispatched", "main subscriber saw %u",
	      rec_get(&r, &r.events[0]) - events_before);
	CHECK_EQ("no_call_after_unsubscribe_returned", atomic_load(&counting_late), 0);
	CHECK_EQ("call_count_frozen_after_unsubscribe", atomic_load(&counting_calls), n);
	CHECK_STATUS("unsubscribe_twice_not_found", rw_monitor_unsubscribe(mon, counting_id), RW_ERR_NOT_FOUND);
	pthread_mutex_lock(&su.mu);
	CHECK_EQ("self_unsubscribed_never_called_again", su.calls, 1);
	pthread_mutex_unlock(&su.mu);

	/* (e) EIO on mlx5_1: the drain stops, the device is no longer read,
	 * its port is polled. */
	c1 = counters(sim, 1);
	CHECK_OK("sim_eio", rw_sim_eio(sim, 1));
	CHECK_OK("push_after_eio", rw_sim_push_event(sim, 1, CODE_COMM_EST, QP_HANDLE, 1));
	WAIT_UNTIL(ok, rec_get(&r, &r.drain_failures[1]) > 0, WAIT_MS);
	check(ok, "eio_drain_reported_failed", "no failed drain");
	pthread_mutex_lock(&r.mu);
	CHECK_EQ_I("eio_drain_error_is_eio", r.last_drain_error[1], EIO);
	pthread_mutex_unlock(&r.mu);
	after = counters(sim, 1);
	CHECK_EQ("eio_one_get_then_stop", after.gets - c1.gets, 1);
	CHECK_EQ("eio_nothing_read", after.read - c1.read, 0);
	CHECK_OK("push_3_more_after_eio", rw_sim_push_event(sim, 1, CODE_COMM_EST, QP_HANDLE, 3));
	/* Let the monitor prove it is awake: an event on mlx5_0 is read. */
	before = counters(sim, 0);
	CHECK_OK("push_probe_on_mlx5_0", rw_sim_push_event(sim, 0, CODE_COMM_EST, QP_HANDLE, 1));
	WAIT_UNTIL(ok, counters(sim, 0).read > before.read, WAIT_MS);
	check(ok, "monitor_still_reads_other_device", "probe not read");
	CHECK_EQ("eio_device_not_read_again", counters(sim, 1).gets, after.gets);
	CHECK_EQ("eio_later_events_not_read", counters(sim, 1).read, c1.read);
	WAIT_UNTIL(ok, counters(sim, 1).port_queries >= c1.port_queries + 2, WAIT_MS);
	check(ok, "eio_device_ports_polled", "port queries %llu -> %llu", (unsigned long long)c1.port_queries,
	      (unsigned long long)counters(sim, 1).port_queries);
	check(admits(g1), "eio_device_rail_stays_admitted", "word %#llx", (unsigned long long)load(g1));

	/* The snapshot and JSON from the main thread. */
	{
		rw_rail_info rails[4];
		size_t count = 0;
		char *json = NULL;

		CHECK_STATUS("snapshot_room_for_1_of_2", rw_monitor_snapshot(mon, rails, 1, &count), RW_ERR_BUFFER);
		CHECK_EQ("snapshot_buffer_error_says_2", count, 2);
		CHECK_OK("snapshot_room_for_4", rw_monitor_snapshot(mon, rails, 4, &count));
		CHECK_EQ("snapshot_has_2_rails", count, 2);
		check(count == 2 && strcmp(rails[0].name, "mlx5_0/1") == 0 && strcmp(rails[1].name, "mlx5_1/1") == 0,
		      "snapshot_names_rails", "\"%s\" \"%s\"", rails[0].name, rails[1].name);
		check(count == 2 && rails[0].state == RW_RAIL_ACTIVE && rails[0].available && rails[0].rate_mbps == 400000,
		      "snapshot_rail_active_available_400g", "state %u available %d rate %llu", rails[0].state,
		      rails[0].available, (unsigned long long)rails[0].rate_mbps);
		CHECK_OK("snapshot_json", rw_monitor_snapshot_json(mon, &json));
		check(json && json[0] == '{' && json[strlen(json) - 1] == '}' && strstr(json, "\"rails\":[") &&
			      strstr(json, "\"rail\":\"mlx5_0/1\"") && strstr(json, "\"rail\":\"mlx5_1/1\""),
		      "snapshot_json_has_rails", "%s", json ? json : "(null)");
		rw_string_free(&json);
	}

	pthread_mutex_lock(&r.mu);
	check(r.ack_checked >= 50, "ack_checked_at_50_or_more_event_callbacks", "%u", r.ack_checked);
	CHECK_EQ("events_acked_before_any_callback", r.ack_violations, 0);
	pthread_mutex_unlock(&r.mu);
out:
	rw_gate_free(&g0);
	rw_gate_free(&g1);
	CHECK_OK("monitor_free", rw_monitor_free(&mon));
	rw_sim_free(&sim);
	pthread_mutex_destroy(&r.mu);
	pthread_mutex_destroy(&su.mu);
}

/* ---- monitor B: the transport cases, with a 20 ms tick --------------------- */

static void transport(void)
{
	rw_sim *sim = NULL;
	rw_monitor *mon = NULL;
	rw_gate *g0 = NULL, *g1 = NULL;
	struct rec r;
	rw_sim_counters c0, c1;
	rw_ticket t;
	rw_rail_info info;
	uint32_t dev;
	uint64_t gen_paused;
	bool ok;

	if (rw_sim_new(&sim) != RW_OK)
		return;
	rw_sim_add_device(sim, "mlx5_0", 1, &dev);
	rw_sim_add_device(sim, "mlx5_1", 1, &dev);
	rec_init(&r, sim);
	mon = start(sim, 20, &r);
	if (!mon)
		goto out;
	r.mon = mon;
	CHECK_OK("transport_subscribe", rw_monitor_subscribe(mon, main_cb, &r, NULL));
	g0 = gate_of(mon, "mlx5_0/1");
	g1 = gate_of(mon, "mlx5_1/1");
	WAIT_UNTIL(ok, admits(g0) && admits(g1), WAIT_MS);
	check(ok, "transport_rails_admitted", "words %#llx %#llx", (unsigned long long)load(g0),
	      (unsigned long long)load(g1));

	/* An unplugged device's rail goes inert: the gate refuses. */
	CHECK_OK("sim_unplug", rw_sim_unplug(sim, 1));
	WAIT_UNTIL(ok, rw_word_state(load(g1)) == RW_RAIL_INERT, WAIT_MS);
	check(ok, "unplugged_rail_inert", "word %#llx", (unsigned long long)load(g1));
	check(!rw_gate_check_inline(rw_gate_word(g1), NULL), "inert_rail_inline_gate_refuses", "admitted");
	memset(&t, 0, sizeof(t));
	CHECK_OK("inert_rail_gate_check", rw_gate_check(g1, &t));
	check(!t.admitted && t.state == RW_RAIL_INERT, "inert_rail_gate_check_refuses", "admitted %d state %u",
	      t.admitted, t.state);
	WAIT_UNTIL(ok, rec_get(&r, &r.unavailable_calls[1]) > 0, WAIT_MS);
	check(ok, "unplugged_rail_selector_told_unavailable", "never told");

	/* mlx5_0/1 paused keeps the tick running: its port is queried every
	 * tick, the unplugged one's never. */
	c1 = counters(sim, 1);
	CHECK_OK("transport_port_down", rw_sim_port_down(sim, 0, 1));
	WAIT_UNTIL(ok, !admits(g0), WAIT_MS);
	check(ok, "transport_port_err_pauses", "word %#llx", (unsigned long long)load(g0));
	gen_paused = rw_word_generation(load(g0));
	c0 = counters(sim, 0);
	WAIT_UNTIL(ok, counters(sim, 0).port_queries >= c0.port_queries + 3, WAIT_MS);
	check(ok, "tick_polls_paused_rail", "port queries %llu -> %llu", (unsigned long long)c0.port_queries,
	      (unsigned long long)counters(sim, 0).port_queries);
	CHECK_EQ("tick_never_queries_unplugged_device", counters(sim, 1).port_queries, c1.port_queries);
	check(!admits(g1), "unplugged_rail_still_refused", "word %#llx", (unsigned long long)load(g1));

	/* The port comes back with no event: the poll finds it. */
	CHECK_OK("silent_port_active", rw_sim_set_port_state(sim, 0, 1, PORT_ACTIVE));
	WAIT_UNTIL(ok, admits(g0), WAIT_MS);
	check(ok, "poll_recovers_silent_port", "word %#llx", (unsigned long long)load(g0));
	check(rw_word_generation(load(g0)) > gen_paused, "poll_recovery_bumps_generation", "generation %llu, was %llu",
	      (unsigned long long)rw_word_generation(load(g0)), (unsigned long long)gen_paused);
	info.recovered_by = -9;
	WAIT_UNTIL(ok, rail_info(mon, "mlx5_0/1", &info) && info.generation == rw_word_generation(load(g0)), WAIT_MS);
	check(ok && info.recovered_by == RW_BY_POLL, "poll_recovery_recovered_by_poll", "recovered_by %d",
	      info.recovered_by);
	WAIT_UNTIL(ok, rec_reactivated(&r, 0, 2), WAIT_MS);
	pthread_mutex_lock(&r.mu);
	check(ok && r.last_transition[0].cause == RW_CAUSE_BY && r.last_transition[0].cause_code == RW_BY_POLL,
	      "poll_transition_cause_by_poll", "cause %u code %u", r.last_transition[0].cause,
	      r.last_transition[0].cause_code);
	pthread_mutex_unlock(&r.mu);
	CHECK_EQ("unplugged_device_still_never_queried", counters(sim, 1).port_queries, c1.port_queries);
out:
	rw_gate_free(&g0);
	rw_gate_free(&g1);
	CHECK_OK("transport_monitor_free", rw_monitor_free(&mon));
	rw_sim_free(&sim);
	pthread_mutex_destroy(&r.mu);
}

/* A callback that unsubscribes itself while another thread frees the
 * monitor: neither may wait for the other. */
struct slow_unsub {
	rw_monitor *mon;          /* the main thread's, freed (and cleared) there */
	const rw_monitor *handle; /* the callback's copy, live until that free returns */
	uint64_t id;
	atomic_bool in_call;
	atomic_int status; /* -1 until the unsubscribe returned */
};

static void slow_unsub_cb(void *user, const rw_notification *n)
{
	struct slow_unsub *su = user;
	struct timespec nap = { 0, 200 * 1000 * 1000 };
	(void)n;
	if (atomic_exchange(&su->in_call, true))
		return;
	nanosleep(&nap, NULL); /* the main thread is in rw_monitor_free by now */
	atomic_store(&su->status, rw_monitor_unsubscribe(su->handle, su->id));
}

static void free_while_a_callback_unsubscribes(void)
{
	rw_sim *sim = NULL;
	uint32_t dev = 0;
	struct slow_unsub su;
	bool ok;

	atomic_init(&su.in_call, false);
	atomic_init(&su.status, -1);
	CHECK_OK("slow_unsub_sim_new", rw_sim_new(&sim));
	CHECK_OK("slow_unsub_add_device", rw_sim_add_device(sim, "mlx5_6", 1, &dev));
	CHECK_OK("slow_unsub_start", rw_monitor_start_sim(NULL, NULL, sim, &su.mon));
	su.handle = su.mon;
	CHECK_OK("slow_unsub_subscribe", rw_monitor_subscribe(su.mon, slow_unsub_cb, &su, &su.id));
	CHECK_OK("slow_unsub_push", rw_sim_push_event(sim, dev, CODE_QP_REQ_ERR, QP_HANDLE, 1));
	WAIT_UNTIL(ok, atomic_load(&su.in_call), WAIT_MS);
	check(ok, "slow_unsub_callback_started", "never called");
	CHECK_OK("slow_unsub_free_returns", rw_monitor_free(&su.mon));
	CHECK_STATUS("slow_unsub_callback_finished_first", atomic_load(&su.status), RW_ERR_NOT_FOUND);
	rw_sim_free(&sim);
}

/* A subscriber that frees its own monitor from inside its first call. */
struct self_free {
	rw_monitor *mon;
	rw_sim *sim;
	atomic_uint calls;
	atomic_int status; /* -1 until the free returned */
	atomic_uint selector_calls_late; /* selector calls after the free returned */
};

static void self_free_cb(void *user, const rw_notification *n)
{
	struct self_free *sf = user;
	(void)n;
	if (atomic_fetch_add(&sf->calls, 1) == 0) {
		/* Work the monitor would do next, were it not stopped. */
		rw_sim_port_down(sf->sim, 0, 1);
		atomic_store(&sf->status, rw_monitor_free(&sf->mon));
	}
}

static void self_free_set_available(void *user, uint32_t device, uint32_t port, bool available)
{
	struct self_free *sf = user;
	(void)device;
	(void)port;
	(void)available;
	if (atomic_load(&sf->status) != -1)
		atomic_fetch_add(&sf->selector_calls_late, 1);
}

/* rw_monitor_free from the monitor thread (inside a callback): it
 * succeeds, no callback runs after it, and the monitor stops (its device
 * is closed) without anybody else freeing it. */
static void free_from_callback(void)
{
	rw_sim *sim = NULL;
	uint32_t dev = 0;
	struct self_free sf;
	bool ok;

	atomic_init(&sf.calls, 0);
	atomic_init(&sf.status, -1);
	atomic_init(&sf.selector_calls_late, 0);
	CHECK_OK("self_free_sim_new", rw_sim_new(&sim));
	sf.sim = sim;
	CHECK_OK("self_free_add_device", rw_sim_add_device(sim, "mlx5_7", 1, &dev));
	rw_selector sel = { .user = &sf, .set_available = self_free_set_available, .reseed = NULL };
	CHECK_OK("self_free_start", rw_monitor_start_sim(NULL, &sel, sim, &sf.mon));
	CHECK_OK("self_free_subscribe", rw_monitor_subscribe(sf.mon, self_free_cb, &sf, NULL));
	WAIT_UNTIL(ok, counters(sim, dev).open, WAIT_MS);
	check(ok, "self_free_device_opened", "never opened");
	CHECK_OK("self_free_push_3", rw_sim_push_event(sim, dev, CODE_QP_REQ_ERR, QP_HANDLE, 3));
	WAIT_UNTIL(ok, atomic_load(&sf.status) != -1, WAIT_MS);
	check(ok, "self_free_returned", "rw_monitor_free never returned inside the callback");
	CHECK_STATUS("self_free_from_callback_ok", atomic_load(&sf.status), RW_OK);
	WAIT_UNTIL(ok, !counters(sim, dev).open, WAIT_MS);
	check(ok, "self_free_monitor_stopped_and_closed_the_device", "the device is still open");
	CHECK_EQ("self_free_no_call_after_the_free", atomic_load(&sf.calls), 1);
	CHECK_EQ("self_free_no_selector_call_after_the_free", atomic_load(&sf.selector_calls_late), 0);
	rw_sim_free(&sim);
}

/* A selector that frees its monitor from inside one of its calls: the
 * first one (`on_call` 1, in the attach the monitor thread replays after
 * start), or the first "unavailable" (`on_call` 0, in a DEVICE_FATAL that
 * takes every rail of the device out). */
struct selector_free {
	rw_monitor *mon;
	unsigned on_call;
	atomic_uint calls;
	atomic_int status;     /* -1 until the free returned */
	atomic_uint late;      /* selector calls after the free returned */
	atomic_uint late_subs; /* subscriber calls after it */
};

static void selector_free_call(struct selector_free *f, bool take_out)
{
	unsigned n = atomic_fetch_add(&f->calls, 1) + 1;

	if (atomic_load(&f->status) != -1) {
		atomic_fetch_add(&f->late, 1);
		return;
	}
	if ((f->on_call != 0 && n == f->on_call) || (f->on_call == 0 && take_out))
		atomic_store(&f->status, rw_monitor_free(&f->mon));
}

static void selector_free_available(void *user, uint32_t device, uint32_t port, bool available)
{
	(void)device;
	(void)port;
	selector_free_call(user, !available);
}

static void selector_free_reseed(void *user, uint32_t device, uint32_t port, uint64_t rate_mbps)
{
	(void)device;
	(void)port;
	(void)rate_mbps;
	selector_free_call(user, false);
}

static void selector_free_cb(void *user, const rw_notification *n)
{
	struct selector_free *f = user;
	(void)n;
	if (atomic_load(&f->status) != -1)
		atomic_fetch_add(&f->late_subs, 1);
}

static void selector_free_run(const char *name, unsigned on_call)
{
	rw_sim *sim = NULL;
	uint32_t dev = 0;
	struct selector_free f;
	char label[96];
	bool ok;

	f.mon = NULL;
	f.on_call = on_call;
	atomic_init(&f.calls, 0);
	atomic_init(&f.status, -1);
	atomic_init(&f.late, 0);
	atomic_init(&f.late_subs, 0);
	snprintf(label, sizeof(label), "%s_sim", name);
	CHECK_OK(label, rw_sim_new(&sim));
	if (!sim)
		return;
	rw_sim_add_device(sim, "mlx5_4", 4, &dev);
	rw_selector sel = { .user = &f, .set_available = selector_free_available, .reseed = selector_free_reseed };
	snprintf(label, sizeof(label), "%s_start", name);
	CHECK_OK(label, rw_monitor_start_sim(NULL, &sel, sim, &f.mon));
	rw_monitor_subscribe(f.mon, selector_free_cb, &f, NULL);
	if (on_call == 0) {
		/* The attach's 8 calls (a reseed and an "available" per rail),
		 * then every rail of the device out at once. */
		WAIT_UNTIL(ok, atomic_load(&f.calls) == 8, WAIT_MS);
		snprintf(label, sizeof(label), "%s_attach_told", name);
		check(ok, label, "%u selector calls", atomic_load(&f.calls));
		rw_sim_push_event(sim, dev, 8 /* DEVICE_FATAL */, 0, 1);
	}
	WAIT_UNTIL(ok, atomic_load(&f.status) != -1, WAIT_MS);
	snprintf(label, sizeof(label), "%s_free_returned", name);
	check(ok, label, "the selector never freed the monitor");
	snprintf(label, sizeof(label), "%s_free_ok", name);
	CHECK_STATUS(label, atomic_load(&f.status), RW_OK);
	WAIT_UNTIL(ok, !counters(sim, dev).open, WAIT_MS);
	snprintf(label, sizeof(label), "%s_monitor_stopped", name);
	check(ok, label, "the device is still open");
	snprintf(label, sizeof(label), "%s_no_selector_call_after_the_free", name);
	CHECK_EQ(label, atomic_load(&f.late), 0);
	snprintf(label, sizeof(label), "%s_no_subscriber_call_after_the_free", name);
	CHECK_EQ(label, atomic_load(&f.late_subs), 0);
	rw_sim_free(&sim);
}

/* rw_monitor_free from inside a selector call: the monitor stops there,
 * and the calls for the other rails of the same wake-up (the attach's,
 * or a device's rails taken out together) are not made. */
static void free_from_the_selector(void)
{
	selector_free_run("selector_free_in_the_attach", 1);
	selector_free_run("selector_free_in_the_attach_second_call", 2);
	selector_free_run("selector_free_in_a_fatal", 0);
}

/* ---- callbacks run on the monitor thread, from the first one on -------- */

/* An engine that holds its own lock around rw_monitor_start_sim and takes
 * it in its selector: the selector must run on the monitor thread, once
 * the handle exists, or the engine deadlocks on itself (the lock is an
 * error-checking one: relocking it on the same thread says EDEADLK
 * instead of hanging). */
struct on_thread {
	pthread_mutex_t engine_lock;
	pthread_t main;
	rw_monitor *mon;
	atomic_uint calls, on_main, deadlocks, saw_handle, gate_ok;
};

static void on_thread_call(struct on_thread *t)
{
	int e;

	atomic_fetch_add(&t->calls, 1);
	if (pthread_equal(pthread_self(), t->main))
		atomic_fetch_add(&t->on_main, 1);
	e = pthread_mutex_lock(&t->engine_lock);
	if (e == EDEADLK) {
		atomic_fetch_add(&t->deadlocks, 1);
		return;
	}
	if (e != 0)
		return;
	if (t->mon) {
		rw_gate *g = NULL;

		atomic_fetch_add(&t->saw_handle, 1);
		if (rw_monitor_gate(t->mon, "mlx5_0/1", &g) == RW_OK)
			atomic_fetch_add(&t->gate_ok, 1);
		rw_gate_free(&g);
	}
	pthread_mutex_unlock(&t->engine_lock);
}

static void on_thread_available(void *user, uint32_t device, uint32_t port, bool available)
{
	(void)device;
	(void)port;
	(void)available;
	on_thread_call(user);
}

static void on_thread_reseed(void *user, uint32_t device, uint32_t port, uint64_t rate_mbps)
{
	(void)device;
	(void)port;
	(void)rate_mbps;
	on_thread_call(user);
}

/* The first notification a subscriber made right after start sees. */
struct first_seen {
	pthread_mutex_t mu;
	bool seen;
	rw_notification first;
};

static void first_seen_cb(void *user, const rw_notification *n)
{
	struct first_seen *f = user;

	pthread_mutex_lock(&f->mu);
	if (!f->seen) {
		f->first = *n;
		f->seen = true;
	}
	pthread_mutex_unlock(&f->mu);
}

static bool first_seen_done(struct first_seen *f)
{
	bool v;

	pthread_mutex_lock(&f->mu);
	v = f->seen;
	pthread_mutex_unlock(&f->mu);
	return v;
}

struct unsub_job {
	const rw_monitor *mon;
	uint64_t id;
	int status;
};

static void *unsubscribe_on_a_c_thread(void *arg)
{
	struct unsub_job *j = arg;

	j->status = rw_monitor_unsubscribe(j->mon, j->id);
	return NULL;
}

static void callbacks_on_the_monitor_thread(void)
{
	rw_sim *sim = NULL;
	struct on_thread t;
	struct first_seen f;
	pthread_mutexattr_t attr;
	rw_selector sel = { .user = &t, .set_available = on_thread_available, .reseed = on_thread_reseed };
	rw_rail_info rails[4];
	rw_gate *g = NULL;
	size_t count = 0;
	uint32_t dev = 0;
	uint64_t id = 0;
	bool ok;
	int st;

	memset(&t, 0, sizeof(t));
	memset(&f, 0, sizeof(f));
	pthread_mutex_init(&f.mu, NULL);
	pthread_mutexattr_init(&attr);
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ERRORCHECK);
	pthread_mutex_init(&t.engine_lock, &attr);
	pthread_mutexattr_destroy(&attr);
	t.main = pthread_self();
	CHECK_OK("thread_sim_new", rw_sim_new(&sim));
	CHECK_OK("thread_sim_add", rw_sim_add_device(sim, "mlx5_0", 2, &dev));

	pthread_mutex_lock(&t.engine_lock);
	st = rw_monitor_start_sim(NULL, &sel, sim, &t.mon);
	CHECK_STATUS("start_under_the_engines_lock", st, RW_OK);
	/* What start attached is published when it returns. */
	CHECK_STATUS("gate_right_after_start", rw_monitor_gate(t.mon, "mlx5_0/2", &g), RW_OK);
	CHECK_STATUS("snapshot_right_after_start", rw_monitor_snapshot(t.mon, rails, 4, &count), RW_OK);
	CHECK_EQ("snapshot_right_after_start_has_2_rails", count, 2);
	CHECK_EQ("no_selector_call_on_the_starting_thread", atomic_load(&t.on_main), 0);
	CHECK_OK("subscribe_right_after_start", rw_monitor_subscribe(t.mon, first_seen_cb, &f, &id));
	pthread_mutex_unlock(&t.engine_lock);

	/* Two rails: each reseeded, then made available. */
	WAIT_UNTIL(ok, atomic_load(&t.calls) >= 4, WAIT_MS);
	check(ok, "selector_told_of_both_rails", "%u calls", atomic_load(&t.calls));
	CHECK_EQ("selector_never_on_the_starting_thread", atomic_load(&t.on_main), 0);
	CHECK_EQ("selector_never_deadlocks_the_engine", atomic_load(&t.deadlocks), 0);
	CHECK_EQ("selector_always_has_the_handle", atomic_load(&t.saw_handle), atomic_load(&t.calls));
	CHECK_EQ("selector_calls_back_in", atomic_load(&t.gate_ok), atomic_load(&t.calls));

	/* The subscription is "from now on": the attach before it is not
	 * delivered, the first thing it hears is this event. */
	CHECK_OK("thread_probe_event", rw_sim_push_event(sim, 0, CODE_QP_REQ_ERR, QP_HANDLE, 1));
	WAIT_UNTIL(ok, first_seen_done(&f), WAIT_MS);
	check(ok, "subscriber_hears_the_probe", "nothing");
	check(f.first.event_code == CODE_QP_REQ_ERR &&
		      (f.first.kind == RW_HAPPENING_EVENT || f.first.kind == RW_HAPPENING_WORK_LOST),
	      "subscriber_first_hears_the_probe_not_the_attach", "kind %u event %u", f.first.kind, f.first.event_code);

	/* Unsubscribing from a thread the host made. */
	{
		pthread_t other;
		struct unsub_job j = { t.mon, id, -1 };

		if (pthread_create(&other, NULL, unsubscribe_on_a_c_thread, &j) == 0) {
			pthread_join(other, NULL);
			CHECK_STATUS("unsubscribe_on_a_c_thread", j.status, RW_OK);
		}
	}
	rw_gate_free(&g);
	{
		/* A copy: the callbacks read t.mon until the free returns. */
		rw_monitor *mon = t.mon;

		CHECK_OK("thread_monitor_free", rw_monitor_free(&mon));
	}
	rw_sim_free(&sim);
	pthread_mutex_destroy(&t.engine_lock);
	pthread_mutex_destroy(&f.mu);
}

/* ---- railwatch's own log lines go to the log callback, never to stderr -- */

struct heard {
	pthread_mutex_t mu;
	unsigned down_lines;
	uint32_t level;
	char target[128];
	int set_inside; /* rw_set_log_callback from inside the callback */
	bool on_main;
	pthread_t main;
};

static void hear(void *user, uint32_t level, const char *target, const char *message)
{
	struct heard *h = user;
	int inside = rw_set_log_callback(NULL, NULL, RW_LOG_LEVEL_OFF);

	pthread_mutex_lock(&h->mu);
	h->set_inside = inside;
	if (strstr(message, "mlx5_0/1 down") != NULL) {
		h->down_lines++;
		h->level = level;
		snprintf(h->target, sizeof(h->target), "%s", target);
		h->on_main = pthread_equal(pthread_self(), h->main);
	}
	pthread_mutex_unlock(&h->mu);
}

static unsigned heard_down(struct heard *h)
{
	unsigned v;

	pthread_mutex_lock(&h->mu);
	v = h->down_lines;
	pthread_mutex_unlock(&h->mu);
	return v;
}

static void log_callback(void)
{
	rw_sim *sim = NULL;
	rw_monitor *mon = NULL;
	struct heard *h = calloc(1, sizeof(*h));
	uint32_t dev;
	bool ok;

	if (!h)
		return;
	pthread_mutex_init(&h->mu, NULL);
	h->main = pthread_self();
	h->set_inside = -1;
	CHECK_STATUS("log_level_6_refused", rw_set_log_callback(hear, h, 6), RW_ERR_INVALID);
	CHECK_OK("log_callback_set", rw_set_log_callback(hear, h, RW_LOG_LEVEL_WARN));
	CHECK_OK("log_sim_new", rw_sim_new(&sim));
	CHECK_OK("log_sim_add", rw_sim_add_device(sim, "mlx5_0", 1, &dev));
	CHECK_OK("log_start", rw_monitor_start_sim(NULL, NULL, sim, &mon));
	CHECK_OK("log_port_down", rw_sim_port_down(sim, 0, 1));
	WAIT_UNTIL(ok, heard_down(h) > 0, WAIT_MS);
	check(ok, "log_callback_hears_the_monitor_line", "nothing heard");
	pthread_mutex_lock(&h->mu);
	CHECK_EQ("log_line_is_a_warning", h->level, RW_LOG_LEVEL_WARN);
	check(strncmp(h->target, "railwatch_runtime", 17) == 0, "log_line_names_its_module", "\"%s\"", h->target);
	check(!h->on_main, "log_line_on_the_monitor_thread", "on the main thread");
	CHECK_STATUS("log_callback_set_from_inside_refused", h->set_inside, RW_ERR_STATE);
	pthread_mutex_unlock(&h->mu);
	CHECK_OK("log_monitor_free", rw_monitor_free(&mon));
	/* Unset: when it returns the callback is not running and is never
	 * called again, so its user may go (valgrind sees a late call). */
	CHECK_OK("log_callback_unset", rw_set_log_callback(NULL, NULL, RW_LOG_LEVEL_OFF));
	pthread_mutex_destroy(&h->mu);
	free(h);
	CHECK_OK("log_after_unset_start", rw_monitor_start_sim(NULL, NULL, sim, &mon));
	CHECK_OK("log_after_unset_port_up", rw_sim_port_up(sim, 0, 1));
	CHECK_OK("log_after_unset_port_down", rw_sim_port_down(sim, 0, 1));
	CHECK_OK("log_after_unset_free", rw_monitor_free(&mon));
	rw_sim_free(&sim);
}

/* The log callback frees a monitor (from another monitor's thread) while
 * a third thread replaces the callback: rw_monitor_free waits for the
 * freed monitor's thread, which logs meanwhile. The replacement must wait
 * only for the call in flight, and the freed monitor's log line must not
 * wait for the replacement: they deadlocked (the callback ran under a
 * lock the replacement queued for, and that queued writer held back the
 * other thread's log line). */
struct free_in_log {
	rw_sim *victim_sim;
	rw_monitor *victim;
	pthread_t victim_thread;
	atomic_bool victim_known;
	atomic_bool armed;
	atomic_bool freed;
	atomic_int replace_status; /* -1 until the replacement returned */
	pthread_t replacer;
	bool replacer_started;
};

static struct free_in_log fil;

static void *replace_log_callback(void *arg)
{
	(void)arg;
	atomic_store(&fil.replace_status, rw_set_log_callback(NULL, NULL, RW_LOG_LEVEL_OFF));
	return NULL;
}

static void free_in_log_hear(void *user, uint32_t level, const char *target, const char *message)
{
	(void)user;
	(void)level;
	(void)target;
	(void)message;
	if (!atomic_load(&fil.victim_known) || pthread_equal(pthread_self(), fil.victim_thread) ||
	    !atomic_exchange(&fil.armed, false))
		return;
	/* Another thread replaces this callback now: it waits for this call. */
	fil.replacer_started = pthread_create(&fil.replacer, NULL, replace_log_callback, NULL) == 0;
	check_sleep_ms(100);
	/* The victim's thread logs a line meanwhile ("mlx5_1/1 down")... */
	rw_sim_port_down(fil.victim_sim, 0, 1);
	check_sleep_ms(100);
	/* ...and its free waits for that thread. */
	rw_monitor_free(&fil.victim);
	atomic_store(&fil.freed, true);
}

static void note_victim_thread(void *user, const rw_notification *n)
{
	(void)user;
	(void)n;
	if (!atomic_load(&fil.victim_known)) {
		fil.victim_thread = pthread_self();
		atomic_store(&fil.victim_known, true);
	}
}

static void free_a_monitor_in_the_log_callback(void)
{
	rw_sim *sim = NULL;
	rw_monitor *mon = NULL;
	uint32_t dev;
	bool ok;

	memset(&fil, 0, sizeof(fil));
	atomic_init(&fil.victim_known, false);
	atomic_init(&fil.armed, false);
	atomic_init(&fil.freed, false);
	atomic_init(&fil.replace_status, -1);
	CHECK_OK("free_in_log_sims", rw_sim_new(&sim) | rw_sim_new(&fil.victim_sim));
	rw_sim_add_device(sim, "mlx5_0", 1, &dev);
	rw_sim_add_device(fil.victim_sim, "mlx5_1", 1, &dev);
	CHECK_OK("free_in_log_start", rw_monitor_start_sim(NULL, NULL, sim, &mon));
	CHECK_OK("free_in_log_start_victim", rw_monitor_start_sim(NULL, NULL, fil.victim_sim, &fil.victim));
	rw_monitor_subscribe(fil.victim, note_victim_thread, NULL, NULL);
	rw_sim_port_down(fil.victim_sim, 0, 1);
	WAIT_UNTIL(ok, atomic_load(&fil.victim_known), WAIT_MS);
	check(ok, "free_in_log_victim_thread_known", "no notification from the victim");
	rw_sim_port_up(fil.victim_sim, 0, 1);
	CHECK_OK("free_in_log_callback_set", rw_set_log_callback(free_in_log_hear, NULL, RW_LOG_LEVEL_WARN));
	atomic_store(&fil.armed, true);
	/* The other monitor's thread logs: the callback runs there. */
	rw_sim_port_down(sim, 0, 1);
	WAIT_UNTIL(ok, atomic_load(&fil.freed) && atomic_load(&fil.replace_status) != -1, WAIT_MS);
	if (!check(ok, "free_in_log_no_deadlock", "freed %d, replacement %d: stuck", atomic_load(&fil.freed),
		   atomic_load(&fil.replace_status))) {
		/* Threads are stuck for good, holding what every later test
		 * logs through: end here. */
		_Exit(check_done());
	}
	CHECK_STATUS("free_in_log_replacement_ok", atomic_load(&fil.replace_status), RW_OK);
	check(fil.victim == NULL, "free_in_log_victim_freed", "still there");
	if (fil.replacer_started)
		pthread_join(fil.replacer, NULL);
	CHECK_OK("free_in_log_monitor_free", rw_monitor_free(&mon));
	rw_sim_free(&sim);
	rw_sim_free(&fil.victim_sim);
}

/* ---- unplugging after the monitor is gone, and two monitors over one sim -- */

/* The sim's uevent twin was a pipe whose reader went with the monitor:
 * the next unplug raised SIGPIPE and killed the host. And a second
 * monitor over the same sim took the first one's notifications. */
static void two_monitors_and_a_late_unplug(void)
{
	rw_sim *sim = NULL;
	rw_monitor *a = NULL, *b = NULL;
	rw_gate *ga = NULL, *gb = NULL;
	uint32_t dev;
	bool ok;

	CHECK_OK("late_sim_new", rw_sim_new(&sim));
	CHECK_OK("late_add", rw_sim_add_device(sim, "mlx5_0", 1, &dev));
	CHECK_OK("late_add_2", rw_sim_add_device(sim, "mlx5_1", 1, &dev));
	CHECK_OK("late_start_a", rw_monitor_start_sim(NULL, NULL, sim, &a));
	CHECK_OK("late_free_a", rw_monitor_free(&a));
	CHECK_OK("unplug_after_the_monitor_is_gone", rw_sim_unplug(sim, 0));
	CHECK_OK("plug_after_the_monitor_is_gone", rw_sim_plug(sim, 0));
	/* Two monitors over one sim (the later one opens the devices anew):
	 * the first still hears the unplug, on its own notification fd. */
	CHECK_OK("late_start_a_again", rw_monitor_start_sim(NULL, NULL, sim, &a));
	CHECK_OK("late_start_b", rw_monitor_start_sim(NULL, NULL, sim, &b));
	CHECK_OK("late_gate_a", rw_monitor_gate(a, "mlx5_1/1", &ga));
	CHECK_OK("late_gate_b", rw_monitor_gate(b, "mlx5_1/1", &gb));
	CHECK_OK("late_unplug_with_two", rw_sim_unplug(sim, 1));
	WAIT_UNTIL(ok, rw_word_state(load(ga)) == RW_RAIL_INERT, WAIT_MS);
	check(ok, "first_monitor_hears_the_unplug", "word %#llx", (unsigned long long)load(ga));
	rw_gate_free(&ga);
	rw_gate_free(&gb);
	CHECK_OK("late_free_b", rw_monitor_free(&b));
	CHECK_OK("late_free_a_again", rw_monitor_free(&a));
	CHECK_OK("late_unplug_with_none", rw_sim_unplug(sim, 0));
	rw_sim_free(&sim);
}

/* ---- many threads at one monitor while it works ------------------------------- */

struct hammer {
	const rw_monitor *mon;
	atomic_uint *calls;
	unsigned failures;
};

static void hammer_cb(void *user, const rw_notification *n)
{
	atomic_uint *calls = user;

	(void)n;
	atomic_fetch_add(calls, 1);
}

/* Subscribes, reads the snapshot (structs and JSON) and a gate, and
 * unsubscribes, again and again, from a thread of the host's. */
static void *hammer(void *arg)
{
	struct hammer *h = arg;

	for (int i = 0; i < 200; i++) {
		rw_rail_info rails[4];
		size_t n = 0;
		uint64_t id = 0;
		char *json = NULL;
		rw_gate *g = NULL;

		if (rw_monitor_subscribe(h->mon, hammer_cb, h->calls, &id) != RW_OK)
			h->failures++;
		if (rw_monitor_snapshot(h->mon, rails, 4, &n) != RW_OK || n != 2)
			h->failures++;
		if (rw_monitor_snapshot_json(h->mon, &json) != RW_OK)
			h->failures++;
		rw_string_free(&json);
		if (rw_monitor_gate(h->mon, "mlx5_1/1", &g) != RW_OK)
			h->failures++;
		rw_gate_free(&g);
		if (rw_monitor_unsubscribe(h->mon, id) != RW_OK)
			h->failures++;
	}
	return NULL;
}

static void many_threads(void)
{
	rw_sim *sim = NULL;
	rw_monitor *mon = NULL;
	pthread_t threads[4];
	struct hammer hs[4];
	atomic_uint calls;
	uint32_t dev;
	int started = 0;

	atomic_init(&calls, 0);
	CHECK_OK("many_sim_new", rw_sim_new(&sim));
	CHECK_OK("many_add_0", rw_sim_add_device(sim, "mlx5_0", 1, &dev));
	CHECK_OK("many_add_1", rw_sim_add_device(sim, "mlx5_1", 1, &dev));
	CHECK_OK("many_start", rw_monitor_start_sim(NULL, NULL, sim, &mon));
	for (int i = 0; i < 4; i++) {
		hs[i] = (struct hammer){ mon, &calls, 0 };
		if (pthread_create(&threads[i], NULL, hammer, &hs[i]) == 0)
			started++;
	}
	/* The monitor meanwhile reads events and flaps a port. */
	for (int i = 0; i < 50; i++) {
		rw_sim_push_event(sim, 0, CODE_QP_REQ_ERR, QP_HANDLE, 2);
		if (i % 10 == 0)
			rw_sim_port_down(sim, 0, 1);
		if (i % 10 == 5)
			rw_sim_port_up(sim, 0, 1);
		check_sleep_ms(1);
	}
	for (int i = 0; i < started; i++)
		pthread_join(threads[i], NULL);
	CHECK_EQ("many_threads_started", started, 4);
	CHECK_EQ("many_threads_every_call_succeeded", hs[0].failures + hs[1].failures + hs[2].failures + hs[3].failures,
		 0);
	CHECK_OK("many_free", rw_monitor_free(&mon));
	rw_sim_free(&sim);
}

/* The engine's transfer outcomes and a probe's, told to a monitor by
 * rail name from this thread: the breaker opens, goes half-open, grants
 * one probe, and the probe's success closes it. */
static void reports_to_a_monitor(void)
{
	rw_sim *sim = NULL;
	rw_monitor *mon = NULL;
	rw_config *c = NULL;
	rw_gate *g = NULL;
	rw_ticket t;
	uint32_t dev;
	bool ok, granted = false;
	rw_transfer_report lines[2] = {
		{ .peer = 7, .wc_status = 12 /* IBV_WC_RETRY_EXC_ERR */, .count = 20 },
		{ .peer = 8, .wc_status = 12, .count = 20 },
	};

	if (rw_sim_new(&sim) != RW_OK)
		return;
	rw_sim_add_device(sim, "mlx5_0", 1, &dev);
	rw_config_new(&c);
	rw_config_set_u64(c, "tick_ms", 20);
	rw_config_set_u64(c, "data_path.backoff_initial_ms", 50);
	CHECK_OK("reports_monitor_start", rw_monitor_start_sim(c, NULL, sim, &mon));
	rw_config_free(&c);
	if (!mon)
		goto out;
	g = gate_of(mon, "mlx5_0/1");
	WAIT_UNTIL(ok, admits(g), WAIT_MS);
	check(ok, "reports_rail_admitted", "word %#llx", (unsigned long long)load(g));
	CHECK_STATUS("reports_unknown_rail", rw_monitor_report_transfers(mon, "mlx5_9/1", lines, 2), RW_ERR_NOT_FOUND);
	CHECK_STATUS("reports_null_lines", rw_monitor_report_transfers(mon, "mlx5_0/1", NULL, 2), RW_ERR_NULL);
	CHECK_STATUS("reports_too_many", rw_monitor_report_transfers(mon, "mlx5_0/1", lines, RW_MAX_TRANSFER_REPORTS + 1),
		     RW_ERR_RANGE);
	CHECK_OK("reports_two_peers_failing", rw_monitor_report_transfers(mon, "mlx5_0/1", lines, 2));
	WAIT_UNTIL(ok, rw_word_reason(load(g)) == RW_REASON_DATA_PATH || rw_word_reason(load(g)) == RW_REASON_HALF_OPEN,
		   WAIT_MS);
	check(ok, "reports_open_the_breaker", "word %#llx", (unsigned long long)load(g));
	WAIT_UNTIL(ok, rw_gate_probe(g, &granted, &t) == RW_OK && granted, WAIT_MS);
	check(ok, "reports_half_open_grants_a_probe", "reason %u", t.reason);
	CHECK_OK("reports_probe_succeeded", rw_monitor_report_probe(mon, "mlx5_0/1", true));
	WAIT_UNTIL(ok, admits(g), WAIT_MS);
	check(ok, "reports_probe_closes_the_breaker", "word %#llx", (unsigned long long)load(g));
	rw_monitor_free(&mon);
	CHECK_STATUS("reports_after_free_null", rw_monitor_report_probe(mon, "mlx5_0/1", true), RW_ERR_NULL);
out:
	rw_gate_free(&g);
	rw_sim_free(&sim);
}

int main(void)
{
	reports_to_a_monitor();
	callbacks_on_the_monitor_thread();
	log_callback();
	free_a_monitor_in_the_log_callback();
	two_monitors_and_a_late_unplug();
	many_threads();
	drains_and_callbacks();
	transport();
	free_from_callback();
	free_from_the_selector();
	free_while_a_callback_unsubscribes();
	return check_done();
}
