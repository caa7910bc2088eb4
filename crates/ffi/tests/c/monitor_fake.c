/*
 * monitor_fake.c: embedding 2 over libibverbs, run against the fake
 * libibverbs.so.1 that railwatch-verbs-backend's build script makes (the
 * runner puts its directory first in LD_LIBRARY_PATH). The fake's control
 * functions (fake_*) are looked up with dlsym: this program never links
 * them, and fails its checks when the libibverbs it got is not the fake.
 */
#define _GNU_SOURCE
#include "check.h" /* first: it sets the feature macros */

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>

#include "railwatch.h"

#define WAIT_MS 5000
#define CODE_QP_REQ_ERR 2
#define CODE_COMM_EST 4
#define CODE_PORT_ACTIVE 9
#define CODE_PORT_ERR 10
#define PORT_DOWN 1
#define PORT_ACTIVE 4
#define QP_HANDLE 0x7f00deadbe00ull

static int (*fake_set_devices)(int n);
static int (*fake_set_port_state)(int dev, int port, uint32_t state);
static int (*fake_push_event)(int dev, uint32_t code, uint64_t element);
static long long (*fake_counter)(const char *name);

/* Looks the fake's control functions up; false when one is missing. */
static bool find_fake(void)
{
	*(void **)&fake_set_devices = dlsym(RTLD_DEFAULT, "fake_set_devices");
	*(void **)&fake_set_port_state = dlsym(RTLD_DEFAULT, "fake_set_port_state");
	*(void **)&fake_push_event = dlsym(RTLD_DEFAULT, "fake_push_event");
	*(void **)&fake_counter = dlsym(RTLD_DEFAULT, "fake_counter");
	return fake_set_devices && fake_set_port_state && fake_push_event && fake_counter;
}

/* ---- what the callbacks saw --------------------------------------------- */

struct rec {
	pthread_mutex_t mu;
	unsigned events;
	unsigned ack_violations;
	long long last_gets_ok, last_acks;
	unsigned transitions;
	rw_notification last_transition;
	bool available;
	unsigned available_calls;
	uint64_t rate;
};

static struct rec rec = { .mu = PTHREAD_MUTEX_INITIALIZER };

static void on_note(void *user, const rw_notification *n)
{
	long long gets_ok = -1, acks = -2;

	(void)user;
	if (n->kind == RW_HAPPENING_EVENT) {
		gets_ok = fake_counter("gets_ok");
		acks = fake_counter("acks");
	}
	pthread_mutex_lock(&rec.mu);
	if (n->kind == RW_HAPPENING_EVENT) {
		rec.events++;
		rec.last_gets_ok = gets_ok;
		rec.last_acks = acks;
		if (gets_ok != acks)
			rec.ack_violations++;
	}
	if (n->kind == RW_HAPPENING_TRANSITION) {
		rec.transitions++;
		rec.last_transition = *n;
	}
	pthread_mutex_unlock(&rec.mu);
}

static void sel_set_available(void *user, uint32_t device, uint32_t port, bool available)
{
	(void)user;
	(void)device;
	(void)port;
	pthread_mutex_lock(&rec.mu);
	rec.available = available;
	rec.available_calls++;
	pthread_mutex_unlock(&rec.mu);
}

static void sel_reseed(void *user, uint32_t device, uint32_t port, uint64_t rate_mbps)
{
	(void)user;
	(void)device;
	(void)port;
	pthread_mutex_lock(&rec.mu);
	rec.rate = rate_mbps;
	pthread_mutex_unlock(&rec.mu);
}

static unsigned rec_events(void)
{
	unsigned v;

	pthread_mutex_lock(&rec.mu);
	v = rec.events;
	pthread_mutex_unlock(&rec.mu);
	return v;
}

static bool reactivated_after(unsigned transitions)
{
	bool v;

	pthread_mutex_lock(&rec.mu);
	v = rec.transitions > transitions && rec.last_transition.to_state == RW_RAIL_ACTIVE;
	pthread_mutex_unlock(&rec.mu);
	return v;
}

static unsigned rec_transitions(void)
{
	unsigned v;

	pthread_mutex_lock(&rec.mu);
	v = rec.transitions;
	pthread_mutex_unlock(&rec.mu);
	return v;
}

static bool rec_available(void)
{
	bool v;

	pthread_mutex_lock(&rec.mu);
	v = rec.available;
	pthread_mutex_unlock(&rec.mu);
	return v;
}

static bool admits(const rw_gate *g)
{
	return g && rw_gate_check_inline(rw_gate_word(g), NULL);
}

static uint64_t load(const rw_gate *g)
{
	return g ? rw_gate_load(rw_gate_word(g)) : UINT64_MAX;
}

static int recovered_by(const rw_monitor *mon)
{
	rw_rail_info rails[4];
	size_t n = 0;

	if (rw_monitor_snapshot(mon, rails, 4, &n) != RW_OK || n < 1)
		return -2;
	return rails[0].recovered_by;
}

int main(void)
{
	rw_config *c = NULL;
	rw_selector sel = { .user = NULL, .set_available = sel_set_available, .reseed = sel_reseed };
	rw_monitor *mon = NULL;
	rw_gate *g = NULL;
	uint64_t gen;
	unsigned events_before, transitions_before;
	long long got_before;
	bool ok;

	if (!check(find_fake(), "libibverbs_is_the_fake",
		   "fake_* control functions not found: is the fake libibverbs.so.1 first in LD_LIBRARY_PATH?"))
		return check_done();
	CHECK_EQ_I("fake_one_device", fake_set_devices(1), 0);

	rw_config_new(&c);
	/* A tick long enough that an event, not the poll, re-admits after a
	 * PORT_ACTIVE; short enough for the silent recovery to be quick. */
	rw_config_set_u64(c, "tick_ms", 200);
	CHECK_OK("start_verbs", rw_monitor_start_verbs(c, &sel, NULL, &mon));
	rw_config_free(&c); /* the monitor keeps its own copy */
	if (!mon)
		return check_done();
	CHECK_OK("subscribe", rw_monitor_subscribe(mon, on_note, NULL, NULL));

	/* The device attaches. */
	WAIT_UNTIL(ok, rw_monitor_gate(mon, "mlx5_0/1", &g) == RW_OK, WAIT_MS);
	check(ok, "fake_device_rail_appears", "no rail mlx5_0/1: %s", rw_last_error());
	if (!g)
		goto out;
	WAIT_UNTIL(ok, admits(g), WAIT_MS);
	check(ok, "fake_device_rail_admitted", "word %#llx", (unsigned long long)load(g));
	WAIT_UNTIL(ok, recovered_by(mon) == RW_BY_ATTACH, WAIT_MS);
	check(ok, "attached_rail_recovered_by_attach", "recovered_by %d", recovered_by(mon));
	/* The selector hears of the attach on the monitor thread, after start
	 * returned. */
	WAIT_UNTIL(ok, rec_available(), WAIT_MS);
	pthread_mutex_lock(&rec.mu);
	check(ok && rec.rate == 400000, "selector_told_available_at_400g", "available %d rate %llu", rec.available,
	      (unsigned long long)rec.rate);
	pthread_mutex_unlock(&rec.mu);
	check(fake_counter("opens") >= 1, "fake_device_opened", "opens %lld", fake_counter("opens"));

	/* PORT_ERR: refused. */
	gen = rw_word_generation(load(g));
	fake_set_port_state(0, 1, PORT_DOWN);
	CHECK_EQ_I("push_port_err", fake_push_event(0, CODE_PORT_ERR, 1), 0);
	WAIT_UNTIL(ok, !admits(g), WAIT_MS);
	check(ok, "port_err_refused", "word %#llx", (unsigned long long)load(g));
	CHECK_EQ("port_err_reason", rw_word_reason(load(g)), RW_REASON_PORT_ERR);
	pthread_mutex_lock(&rec.mu);
	check(!rec.available, "port_err_selector_told_unavailable", "still available");
	pthread_mutex_unlock(&rec.mu);

	/* PORT_ACTIVE behind COMM_ESTs (and object errors, which are
	 * notified): admitted again, by the event. */
	got_before = fake_counter("gets_ok");
	events_before = rec_events();
	transitions_before = rec_transitions();
	for (int i = 0; i < 50; i++)
		fake_push_event(0, CODE_COMM_EST, QP_HANDLE + (uint64_t)i);
	for (int i = 0; i < 10; i++)
		fake_push_event(0, CODE_QP_REQ_ERR, QP_HANDLE + (uint64_t)i);
	fake_set_port_state(0, 1, PORT_ACTIVE);
	CHECK_EQ_I("push_port_active", fake_push_event(0, CODE_PORT_ACTIVE, 1), 0);
	WAIT_UNTIL(ok, admits(g), WAIT_MS);
	check(ok, "port_active_behind_comm_est_admitted", "word %#llx", (unsigned long long)load(g));
	check(rw_word_generation(load(g)) > gen, "readmission_bumps_generation", "generation %llu, was %llu",
	      (unsigned long long)rw_word_generation(load(g)), (unsigned long long)gen);
	WAIT_UNTIL(ok, reactivated_after(transitions_before), WAIT_MS);
	pthread_mutex_lock(&rec.mu);
	check(ok && rec.last_transition.cause == RW_CAUSE_BY && rec.last_transition.cause_code == RW_BY_EVENT,
	      "readmitted_by_the_event", "cause %u code %u", rec.last_transition.cause, rec.last_transition.cause_code);
	pthread_mutex_unlock(&rec.mu);
	CHECK_EQ("all_61_events_read", fake_counter("gets_ok") - got_before, 61);
	WAIT_UNTIL(ok, rec_events() >= events_before + 11, WAIT_MS);
	check(ok, "object_errors_and_port_active_notified", "%u event notifications", rec_events() - events_before);
	CHECK_EQ("acks_equal_gets_that_returned_events", fake_counter("acks"), fake_counter("gets_ok"));
	pthread_mutex_lock(&rec.mu);
	check(rec.events > 10, "callbacks_checked_acks", "%u", rec.events);
	check(rec.ack_violations == 0, "every_event_acked_before_any_callback_saw_it",
	      "%u callbacks saw an unacknowledged event (last: gets_ok %lld, acks %lld)", rec.ack_violations,
	      rec.last_gets_ok, rec.last_acks);
	pthread_mutex_unlock(&rec.mu);

	/* A silent recovery: PORT_ERR, then the port comes back with no
	 * event; the poll finds it. */
	gen = rw_word_generation(load(g));
	fake_set_port_state(0, 1, PORT_DOWN);
	fake_push_event(0, CODE_PORT_ERR, 1);
	WAIT_UNTIL(ok, !admits(g), WAIT_MS);
	check(ok, "second_port_err_refused", "word %#llx", (unsigned long long)load(g));
	transitions_before = rec_transitions();
	got_before = fake_counter("gets_ok");
	fake_set_port_state(0, 1, PORT_ACTIVE);
	WAIT_UNTIL(ok, admits(g), WAIT_MS);
	check(ok, "silent_recovery_admitted_by_poll", "word %#llx", (unsigned long long)load(g));
	check(rw_word_generation(load(g)) > gen, "silent_recovery_bumps_generation", "generation %llu, was %llu",
	      (unsigned long long)rw_word_generation(load(g)), (unsigned long long)gen);
	/* The snapshot is published after the wake-up that changed the word. */
	WAIT_UNTIL(ok, recovered_by(mon) == RW_BY_POLL, WAIT_MS);
	check(ok, "silent_recovery_recovered_by_poll", "recovered_by %d", recovered_by(mon));
	CHECK_EQ("silent_recovery_read_no_event", fake_counter("gets_ok") - got_before, 0);
	WAIT_UNTIL(ok, reactivated_after(transitions_before), WAIT_MS);
	pthread_mutex_lock(&rec.mu);
	check(ok && rec.last_transition.cause == RW_CAUSE_BY && rec.last_transition.cause_code == RW_BY_POLL,
	      "silent_recovery_transition_by_poll", "cause %u code %u", rec.last_transition.cause,
	      rec.last_transition.cause_code);
	pthread_mutex_unlock(&rec.mu);
out:
	rw_gate_free(&g);
	CHECK_OK("monitor_free", rw_monitor_free(&mon));
	CHECK_EQ("device_closed_when_monitor_freed", fake_counter("closes"), fake_counter("opens"));
	check(fake_counter("lists_freed") == fake_counter("lists"), "device_lists_freed", "lists %lld, freed %lld",
	      fake_counter("lists"), fake_counter("lists_freed"));
	return check_done();
}
