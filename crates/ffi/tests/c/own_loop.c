/*
 * own_loop.c: embedding 1 tested without a NIC. An engine's own loop, as
 * an engine writes it (its own edge-triggered epoll set, the machine's
 * deadline, the drain, the actions carried out), runs over simulated
 * devices opened with rw_sim_open instead of ibv_open_device: their fds
 * are real pipes (readiness, edges and EAGAIN are the kernel's), the
 * device list comes from rw_sim_device_list and its changes from
 * rw_sim_uevents_open. Scripted from C: a flap, a burst hiding a
 * PORT_ACTIVE, a silent recovery, a silent flap seen in the counters, a
 * GID change, an unplug and a plug, a hang-up and a re-open; then the
 * simulator's own rules (a blocking fd, acknowledgements, one opener).
 *
 * The fds are real, the time is virtual (the test advances it), so every
 * wait is bounded and the run is deterministic.
 */
#include "check.h" /* first: it sets the feature macros */

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "railwatch.h"

#define MAX_DEV 4
#define UEVENTS_KEY 1000u
#define CARRIERS_KEY 1001u
#define PORT_DOWN 1
#define PORT_ACTIVE 4
#define CODE_COMM_EST 4
#define CODE_GID_CHANGE 18

/* ---- the engine: its own loop around the machine ---------------------------- */

struct engine {
	rw_machine *m;
	rw_sim *sim;
	rw_uevents *uevents;
	rw_uevents *carriers;
	int epfd;
	rw_sim_context *ctx[MAX_DEV]; /* by the machine's device index */
	bool reading[MAX_DEV];
	bool available[MAX_DEV][3];
	uint32_t pending[64]; /* devices to drain once the actions are done */
	unsigned npending;
	uint64_t now;
	/* what it saw */
	unsigned hangups, reopens_failed, silent_flaps, address_changes, opens;
	uint64_t drained;
	int last_recovered_by[MAX_DEV];
};

/* Opens the device the machine names, as ibv_open_device would; the
 * errno. The fd is made non-blocking, as a real async fd must be. */
static int32_t open_context(struct engine *e, uint32_t dev)
{
	char name[64];
	int32_t err;
	int fd, flags;

	if (dev >= MAX_DEV || rw_machine_device_name(e->m, dev, name, sizeof(name), NULL) != RW_OK)
		return EINVAL;
	err = rw_sim_open(e->sim, name, &e->ctx[dev]);
	if (err != 0)
		return err;
	fd = rw_sim_context_fd(e->ctx[dev]);
	flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
		err = errno;
		rw_sim_close(&e->ctx[dev]);
	}
	return err;
}

/* RW_ACTION_OPEN: open it and tell the machine its ports. */
static void open_device(struct engine *e, uint32_t dev)
{
	uint32_t nports = 0;
	uint8_t ports[8];
	int32_t err = open_context(e, dev);

	if (err == 0)
		err = rw_sim_query_device(e->ctx[dev], &nports);
	if (err != 0 || nports == 0 || nports > 8) {
		rw_sim_close(&e->ctx[dev]);
		rw_machine_handle_opened(e->m, dev, NULL, 0, err != 0 ? err : EINVAL, e->now);
		return;
	}
	for (uint32_t p = 0; p < nports; p++)
		ports[p] = (uint8_t)(p + 1);
	e->opens++;
	rw_machine_handle_opened(e->m, dev, ports, nports, 0, e->now);
}

static void stop_reading(struct engine *e, uint32_t dev)
{
	if (e->reading[dev] && e->ctx[dev])
		epoll_ctl(e->epfd, EPOLL_CTL_DEL, rw_sim_context_fd(e->ctx[dev]), NULL);
	e->reading[dev] = false;
}

/* RW_ACTION_START_READING: into the epoll set, edge-triggered, and one
 * drain right away (events may predate the add). */
static void start_reading(struct engine *e, uint32_t dev)
{
	struct epoll_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN | EPOLLET;
	ev.data.u32 = dev;
	if (!e->ctx[dev] || epoll_ctl(e->epfd, EPOLL_CTL_ADD, rw_sim_context_fd(e->ctx[dev]), &ev) != 0) {
		rw_machine_handle_read_error(e->m, dev, e->ctx[dev] ? errno : EBADF, e->now);
		return;
	}
	e->reading[dev] = true;
	if (e->npending < 64)
		e->pending[e->npending++] = dev;
}

static void answer_port(struct engine *e, const rw_action *a)
{
	rw_sim_port_attr attr;
	int32_t err;

	memset(&attr, 0, sizeof(attr));
	err = e->ctx[a->device] ? rw_sim_query_port(e->ctx[a->device], a->port, &attr) : ENODEV;
	if (a->kind == RW_ACTION_QUERY_PORT) {
		rw_carrier carrier = RW_CARRIER_UNKNOWN;

		/* The netdev's carrier with every port read (none: ENOENT). */
		if (err == 0)
			rw_sim_query_carrier(e->ctx[a->device], a->port, &carrier);
		rw_machine_handle_port_reading(e->m, a->device, a->port, err, attr.state, carrier, e->now);
	} else
		rw_machine_handle_link(e->m, a->device, a->port, err, attr.active_speed, attr.active_width, 0, e->now);
}

static void answer_address(struct engine *e, const rw_action *a)
{
	rw_port_address addr;
	int32_t err;

	memset(&addr, 0, sizeof(addr));
	err = e->ctx[a->device] ? rw_sim_query_address(e->ctx[a->device], a->port, &addr) : ENODEV;
	rw_machine_handle_address(e->m, a->device, a->port, err, err == 0 ? &addr : NULL, e->now);
}

static void answer_counters(struct engine *e, const rw_action *a)
{
	rw_sim_port_counters c;
	int32_t err;

	memset(&c, 0, sizeof(c));
	err = e->ctx[a->device] ? rw_sim_query_counters(e->ctx[a->device], a->port, &c) : ENODEV;
	rw_machine_handle_counters(e->m, a->device, a->port, err, c.link_downed, c.carrier_changes, c.carrier_down,
				   e->now);
}

static void notified(struct engine *e, const rw_notification *n)
{
	if (n->kind != RW_HAPPENING_TRANSITION && n->kind != RW_HAPPENING_ADDRESS_CHANGED)
		return;
	if (n->kind == RW_HAPPENING_ADDRESS_CHANGED)
		e->address_changes++;
	else if (n->cause == RW_CAUSE_SILENT_FLAP)
		e->silent_flaps++;
	else if (n->cause == RW_CAUSE_BY && n->device < MAX_DEV)
		e->last_recovered_by[n->device] = (int)n->cause_code;
}

static void act(struct engine *e, const rw_action *a)
{
	uint32_t d = a->device;

	if (d >= MAX_DEV)
		return;
	switch (a->kind) {
	case RW_ACTION_OPEN: open_device(e, d); break;
	case RW_ACTION_START_READING: start_reading(e, d); break;
	case RW_ACTION_STOP_READING: stop_reading(e, d); break;
	case RW_ACTION_CLOSE:
		stop_reading(e, d);
		rw_sim_close(&e->ctx[d]);
		break;
	case RW_ACTION_REOPEN: {
		int32_t err = open_context(e, d);

		if (err != 0)
			e->reopens_failed++;
		rw_machine_handle_reopen(e->m, d, err, e->now);
		break;
	}
	case RW_ACTION_QUERY_PORT:
	case RW_ACTION_READ_LINK: answer_port(e, a); break;
	case RW_ACTION_READ_ADDRESS: answer_address(e, a); break;
	case RW_ACTION_READ_COUNTERS: answer_counters(e, a); break;
	case RW_ACTION_SET_AVAILABLE:
		if (a->port < 3)
			e->available[d][a->port] = a->available;
		break;
	case RW_ACTION_NOTIFY: notified(e, &a->notification); break;
	default: break; /* RESEED, LOG */
	}
}

static void drain(struct engine *e, uint32_t dev);

/* Carries out the machine's actions in batches until there are none,
 * then the drains they asked for. */
static void carry_out(struct engine *e)
{
	rw_action batch[16];
	size_t n = 0;

	for (unsigned round = 0; round < 100000; round++) {
		if (rw_machine_poll_actions(e->m, batch, 16, &n) != RW_OK)
			return;
		for (size_t i = 0; i < n; i++)
			act(e, &batch[i]);
		if (n > 0)
			continue;
		if (e->npending == 0)
			return;
		drain(e, e->pending[--e->npending]);
	}
	check(false, "carry_out_ends", "the machine never ran out of actions");
}

/* Drains one device's fd to EAGAIN: edge-triggered, all of it, now. */
static void drain(struct engine *e, uint32_t dev)
{
	rw_drain_report r;

	for (int round = 0; round < 64 && e->reading[dev] && e->ctx[dev]; round++) {
		memset(&r, 0, sizeof(r));
		if (rw_machine_drain(e->m, dev, rw_sim_next_event, e->ctx[dev], 0, e->now, &r) != RW_OK)
			return;
		e->drained += r.events;
		carry_out(e);
		if (r.end != -1)
			return;
	}
}

static void device_list(struct engine *e)
{
	const char *names[MAX_DEV];
	size_t n = 0;

	if (rw_sim_device_list(e->sim, names, MAX_DEV, &n) == RW_OK)
		rw_machine_handle_device_list(e->m, names, n, e->now);
	carry_out(e);
}

/* Services whatever the epoll set says is ready, without waiting. */
/* A carrier may have changed: read every open port's, hand the machine
 * each (it ignores those it knew). */
static void read_carriers(struct engine *e)
{
	for (uint32_t d = 0; d < MAX_DEV; d++) {
		for (uint32_t p = 1; e->ctx[d] && p <= 2; p++) {
			rw_carrier carrier = RW_CARRIER_UNKNOWN;

			if (rw_sim_query_carrier(e->ctx[d], p, &carrier) == 0)
				rw_machine_handle_carrier(e->m, d, p, carrier, e->now);
		}
	}
	carry_out(e);
}

static void service(struct engine *e)
{
	struct epoll_event evs[8];
	int n;

	while ((n = epoll_wait(e->epfd, evs, 8, 0)) > 0) {
		for (int i = 0; i < n; i++) {
			uint32_t dev = evs[i].data.u32;
			bool changed = false;

			if (dev == UEVENTS_KEY) {
				if (rw_uevents_drain(e->uevents, &changed) == RW_OK && changed)
					device_list(e);
				continue;
			}
			if (dev == CARRIERS_KEY) {
				if (rw_uevents_drain(e->carriers, &changed) == RW_OK && changed)
					read_carriers(e);
				continue;
			}
			if (dev >= MAX_DEV || !e->reading[dev])
				continue;
			if (evs[i].events & EPOLLIN)
				drain(e, dev);
			if (e->reading[dev] && (evs[i].events & (EPOLLHUP | EPOLLERR))) {
				e->hangups++;
				rw_machine_handle_hangup(e->m, dev, e->now);
				carry_out(e);
			}
		}
	}
}

/* The loop up to virtual time `t`: the fds that are ready, then every
 * deadline the machine has before `t`. */
static void run_until(struct engine *e, uint64_t t)
{
	uint64_t deadline = RW_NO_DEADLINE;

	for (unsigned i = 0; i < 100000; i++) {
		service(e);
		if (rw_machine_poll_timeout(e->m, &deadline) != RW_OK || deadline > t)
			break;
		if (deadline > e->now)
			e->now = deadline;
		rw_machine_handle_timeout(e->m, e->now);
		carry_out(e);
	}
	if (e->now < t)
		e->now = t;
	service(e);
}

static bool engine_start(struct engine *e, rw_sim *sim)
{
	rw_config *c = NULL;
	bool made;
	struct epoll_event ev;

	memset(e, 0, sizeof(*e));
	for (int d = 0; d < MAX_DEV; d++)
		e->last_recovered_by[d] = -1;
	e->sim = sim;
	e->epfd = epoll_create1(EPOLL_CLOEXEC);
	rw_config_new(&c);
	rw_config_set_u64(c, "tick_ms", 100);
	rw_config_set_u64(c, "audit_ms", 100);
	rw_config_set_u64(c, "reopen_initial_ms", 100);
	rw_config_set_u64(c, "reopen_max_ms", 400);
	rw_config_set_u64(c, "reopen_jitter_pct", 0);
	rw_config_set_u64(c, "seed", 1);
	made = rw_machine_new(c, &e->m) == RW_OK;
	rw_config_free(&c); /* the machine keeps its own copy */
	if (e->epfd < 0 || !made || rw_sim_uevents_open(sim, &e->uevents) != RW_OK)
		return false;
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN | EPOLLET;
	ev.data.u32 = UEVENTS_KEY;
	if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, rw_uevents_fd(e->uevents), &ev) != 0)
		return false;
	ev.data.u32 = CARRIERS_KEY;
	if (rw_sim_carrier_events_open(sim, &e->carriers) != RW_OK ||
	    epoll_ctl(e->epfd, EPOLL_CTL_ADD, rw_uevents_fd(e->carriers), &ev) != 0)
		return false;
	device_list(e); /* the devices the host has at start */
	return true;
}

static void engine_stop(struct engine *e)
{
	for (int d = 0; d < MAX_DEV; d++)
		rw_sim_close(&e->ctx[d]);
	rw_uevents_free(&e->uevents);
	rw_uevents_free(&e->carriers);
	rw_machine_free(&e->m);
	if (e->epfd >= 0)
		close(e->epfd);
}

/* ---- what the test reads --------------------------------------------------- */

static uint64_t word(struct engine *e, uint32_t dev, uint32_t port)
{
	rw_gate *g = NULL;
	uint64_t w = UINT64_MAX;

	if (rw_machine_gate(e->m, dev, port, &g) == RW_OK)
		w = rw_gate_load(rw_gate_word(g));
	rw_gate_free(&g);
	return w;
}

static bool admits(struct engine *e, uint32_t dev, uint32_t port)
{
	return rw_word_admits(word(e, dev, port));
}

static rw_sim_counters counters(const rw_sim *sim, uint32_t dev)
{
	rw_sim_counters c;

	memset(&c, 0, sizeof(c));
	rw_sim_get_counters(sim, dev, &c);
	return c;
}

/* ---- the engine's loop over the simulator ------------------------------------- */

static void the_loop(void)
{
	struct engine e;
	rw_sim *sim = NULL;
	uint32_t d0, d1;
	uint8_t gid[16] = { 0xfe, 0x80 }, gid2[16] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2 };
	uint64_t gen;
	struct epoll_event evs[4];
	rw_sim_counters c;

	CHECK_OK("loop_sim_new", rw_sim_new(&sim));
	CHECK_OK("loop_add_mlx5_0", rw_sim_add_device(sim, "mlx5_0", 2, &d0));
	CHECK_OK("loop_add_mlx5_1", rw_sim_add_device(sim, "mlx5_1", 1, &d1));
	/* Before any open: port 2's counters' baseline, port 1's address. */
	CHECK_OK("loop_counters_baseline", rw_sim_set_flap_counters(sim, 0, 2, 0, RW_COUNTER_NONE, RW_COUNTER_NONE));
	CHECK_OK("loop_gid", rw_sim_set_gid(sim, 0, 1, 0, gid));
	if (!check(engine_start(&e, sim), "engine_starts", "%s", rw_last_error()))
		goto out;

	/* The attach: every rail admitted, the selector told. */
	run_until(&e, 10);
	check(admits(&e, 0, 1) && admits(&e, 0, 2) && admits(&e, 1, 1), "loop_attach_admits_every_rail",
	      "words %#llx %#llx %#llx", (unsigned long long)word(&e, 0, 1), (unsigned long long)word(&e, 0, 2),
	      (unsigned long long)word(&e, 1, 1));
	check(e.available[0][1] && e.available[0][2] && e.available[1][1], "loop_selector_told_available", "no");
	CHECK_EQ("loop_opened_both", e.opens, 2);
	check(counters(sim, 0).open && counters(sim, 1).open, "loop_devices_open", "closed");

	/* The fd behaves as the async fd: an edge per write, none while
	 * nothing new arrives, EAGAIN when empty. */
	CHECK_EQ_I("loop_nothing_ready_when_drained", epoll_wait(e.epfd, evs, 4, 0), 0);
	CHECK_OK("loop_push_1", rw_sim_push_event(sim, 0, CODE_COMM_EST, 0x1000, 1));
	CHECK_EQ_I("loop_an_event_makes_an_edge", epoll_wait(e.epfd, evs, 4, 0), 1);
	CHECK_EQ("loop_the_edge_is_mlx5_0s", evs[0].data.u32, 0);
	CHECK_EQ_I("loop_no_second_report_without_a_new_event", epoll_wait(e.epfd, evs, 4, 0), 0);
	CHECK_OK("loop_push_2", rw_sim_push_event(sim, 0, CODE_COMM_EST, 0x1000, 1));
	CHECK_EQ_I("loop_a_new_event_a_new_edge", epoll_wait(e.epfd, evs, 4, 0), 1);
	e.drained = 0;
	drain(&e, 0);
	CHECK_EQ("loop_drain_reads_both", e.drained, 2);

	/* A flap whose PORT_ACTIVE hides behind 64 COMM_EST. */
	CHECK_OK("loop_port_down", rw_sim_port_down(sim, 0, 1));
	run_until(&e, e.now + 10);
	check(!admits(&e, 0, 1), "loop_port_err_refuses", "admits");
	CHECK_EQ("loop_port_err_reason", rw_word_reason(word(&e, 0, 1)), RW_REASON_PORT_ERR);
	check(!e.available[0][1], "loop_port_err_selector_told", "still available");
	e.drained = 0;
	CHECK_OK("loop_burst", rw_sim_push_event(sim, 0, CODE_COMM_EST, 0x1000, 64));
	CHECK_OK("loop_port_up", rw_sim_port_up(sim, 0, 1));
	run_until(&e, e.now + 10);
	check(admits(&e, 0, 1), "loop_port_active_behind_the_burst_admits", "refuses");
	CHECK_EQ("loop_burst_drained_in_full", e.drained, 65);
	CHECK_EQ_I("loop_recovered_by_the_event", e.last_recovered_by[0], RW_BY_EVENT);

	/* A port that comes back silently: the recovery poll finds it. */
	CHECK_OK("loop_mlx5_1_down", rw_sim_port_down(sim, 1, 1));
	run_until(&e, e.now + 10);
	check(!admits(&e, 1, 1), "loop_mlx5_1_refused", "admits");
	CHECK_OK("loop_silent_active", rw_sim_set_port_state(sim, 1, 1, PORT_ACTIVE));
	run_until(&e, e.now + 250);
	check(admits(&e, 1, 1), "loop_poll_recovers", "refuses");
	CHECK_EQ_I("loop_recovered_by_poll", e.last_recovered_by[1], RW_BY_POLL);

	/* A silent flap: port 2's link_downed rises with no PORT_ERR; the
	 * audit's read of the port brings the counters with it, and a port
	 * read 250 ms later confirms it. */
	gen = rw_word_generation(word(&e, 0, 2));
	CHECK_OK("loop_link_downed_rises", rw_sim_set_flap_counters(sim, 0, 2, 1, RW_COUNTER_NONE, RW_COUNTER_NONE));
	run_until(&e, e.now + 500);
	CHECK_EQ("loop_silent_flap_notified", e.silent_flaps, 1);
	CHECK_EQ("loop_silent_flap_moves_the_generation", rw_word_generation(word(&e, 0, 2)), gen + 1);
	check(admits(&e, 0, 2), "loop_silent_flap_keeps_the_rail", "refuses");

	/* A GID change: the address is read again, it changed. */
	gen = rw_word_generation(word(&e, 0, 1));
	CHECK_OK("loop_gid_changes", rw_sim_set_gid(sim, 0, 1, 0, gid2));
	CHECK_OK("loop_gid_change_event", rw_sim_push_event(sim, 0, CODE_GID_CHANGE, 1, 1));
	run_until(&e, e.now + 10);
	check(e.address_changes >= 1, "loop_address_change_notified", "none");
	CHECK_EQ("loop_gid_change_moves_the_generation", rw_word_generation(word(&e, 0, 1)), gen + 1);

	/* The netdev's carrier goes with the port still ACTIVE: the link
	 * message's twin wakes the loop, the carrier read says down, the rail
	 * pauses (no_carrier, the default witness); back, it is re-admitted.
	 * A silent loss is found by the audit's next port read. */
	CHECK_OK("loop_carrier_down", rw_sim_set_carrier(sim, 1, 1, RW_CARRIER_DOWN, true));
	run_until(&e, e.now + 1);
	CHECK_EQ("loop_carrier_loss_pauses", rw_word_state(word(&e, 1, 1)), RW_RAIL_PAUSED);
	CHECK_EQ("loop_carrier_loss_reason", rw_word_reason(word(&e, 1, 1)), RW_REASON_NO_CARRIER);
	CHECK_OK("loop_carrier_up", rw_sim_set_carrier(sim, 1, 1, RW_CARRIER_UP, true));
	run_until(&e, e.now + 1);
	check(admits(&e, 1, 1), "loop_carrier_back_admits", "word %#llx", (unsigned long long)word(&e, 1, 1));
	CHECK_OK("loop_carrier_down_silently", rw_sim_set_carrier(sim, 1, 1, RW_CARRIER_DOWN, false));
	run_until(&e, e.now + 1);
	check(admits(&e, 1, 1), "loop_silent_carrier_loss_unseen_at_once", "word %#llx",
	      (unsigned long long)word(&e, 1, 1));
	run_until(&e, e.now + 150);
	CHECK_EQ("loop_silent_carrier_loss_audited", rw_word_reason(word(&e, 1, 1)), RW_REASON_NO_CARRIER);
	CHECK_OK("loop_carrier_up_silently", rw_sim_set_carrier(sim, 1, 1, RW_CARRIER_UP, false));
	run_until(&e, e.now + 150);
	check(admits(&e, 1, 1), "loop_silent_carrier_return_ticked", "word %#llx", (unsigned long long)word(&e, 1, 1));

	/* Unplugged: the uevent twin wakes the loop, the list no longer has
	 * it, the machine closes it; plugged back, it is opened and attached
	 * anew. */
	CHECK_OK("loop_unplug", rw_sim_unplug(sim, 1));
	run_until(&e, e.now + 10);
	CHECK_EQ("loop_unplugged_rail_inert", rw_word_state(word(&e, 1, 1)), RW_RAIL_INERT);
	check(!counters(sim, 1).open, "loop_unplugged_device_closed", "still open");
	CHECK_OK("loop_plug", rw_sim_plug(sim, 1));
	run_until(&e, e.now + 10);
	check(admits(&e, 1, 1), "loop_plugged_back_admits", "word %#llx", (unsigned long long)word(&e, 1, 1));
	CHECK_EQ_I("loop_plugged_back_by_attach", e.last_recovered_by[1], RW_BY_ATTACH);
	CHECK_EQ("loop_opened_three_times", e.opens, 3);

	/* A hang-up: EPOLLHUP on its fd, the device closed, re-opened with
	 * backoff (ENODEV until it is restored). */
	CHECK_OK("loop_hang_up", rw_sim_hang_up(sim, 0));
	run_until(&e, e.now + 10);
	/* (EPOLLIN and EPOLLHUP come together: the drain's EIO may close it
	 * before the hang-up is looked at.) */
	check(!counters(sim, 0).open, "loop_hung_up_device_closed", "hangups %u, still open", e.hangups);
	CHECK_EQ("loop_hung_up_rail_inert", rw_word_state(word(&e, 0, 1)) * 10 + rw_word_state(word(&e, 0, 2)),
		 RW_RAIL_INERT * 11);
	run_until(&e, e.now + 350);
	check(e.reopens_failed >= 1, "loop_reopen_fails_while_gone", "reopens failed %u", e.reopens_failed);
	CHECK_OK("loop_restore", rw_sim_restore(sim, 0));
	run_until(&e, e.now + 1000);
	check(admits(&e, 0, 1) && admits(&e, 0, 2), "loop_reopened_admits", "words %#llx %#llx",
	      (unsigned long long)word(&e, 0, 1), (unsigned long long)word(&e, 0, 2));

	/* Every event read was acknowledged once, none blocked. */
	for (uint32_t d = 0; d < 2; d++) {
		char name[64];

		c = counters(sim, d);
		snprintf(name, sizeof(name), "loop_mlx5_%u_every_read_acked", d);
		check(c.read == c.acked && c.unacked == 0, name, "read %llu acked %llu unacked %llu",
		      (unsigned long long)c.read, (unsigned long long)c.acked, (unsigned long long)c.unacked);
		snprintf(name, sizeof(name), "loop_mlx5_%u_no_bad_ack_no_blocking_get", d);
		check(c.bad_acks == 0 && c.blocking_gets == 0, name, "bad acks %llu blocking gets %llu",
		      (unsigned long long)c.bad_acks, (unsigned long long)c.blocking_gets);
	}
out:
	engine_stop(&e);
	rw_sim_free(&sim);
}

/* ---- the simulator's own rules ------------------------------------------------- */

/* The last error names what an errno-answering call failed on. */
static void said(const char *name, const char *want)
{
	check(strstr(rw_last_error(), want) != NULL, name, "\"%s\" does not say \"%s\"", rw_last_error(), want);
}

static void sim_rules(void)
{
	rw_sim *sim = NULL;
	rw_sim_context *ctx = NULL, *again = NULL;
	rw_sim_port_attr attr;
	rw_port_address addr;
	rw_sim_port_counters pc;
	rw_sim_counters c;
	const char *names[4];
	size_t n = 0;
	uint32_t dev, code = 0;
	uint64_t element = 0;
	int fd;

	CHECK_OK("rules_sim_new", rw_sim_new(&sim));
	CHECK_OK("rules_add_a", rw_sim_add_device(sim, "mlx5_0", 2, &dev));
	CHECK_OK("rules_add_b", rw_sim_add_device(sim, "mlx5_1", 1, &dev));
	CHECK_OK("rules_add_c", rw_sim_add_device(sim, "mlx5_2", 1, &dev));

	/* The device list, with the buffer idiom. */
	CHECK_STATUS("device_list_size_query", rw_sim_device_list(sim, NULL, 0, &n), RW_ERR_BUFFER);
	CHECK_EQ("device_list_says_3", n, 3);
	CHECK_STATUS("device_list_room_for_2", rw_sim_device_list(sim, names, 2, &n), RW_ERR_BUFFER);
	CHECK_OK("device_list_room_for_4", rw_sim_device_list(sim, names, 4, &n));
	check(n == 3 && strcmp(names[0], "mlx5_0") == 0 && strcmp(names[2], "mlx5_2") == 0, "device_list_names",
	      "%zu", n);
	rw_sim_unplug(sim, 1);
	CHECK_OK("device_list_after_unplug", rw_sim_device_list(sim, names, 4, &n));
	check(n == 2 && strcmp(names[1], "mlx5_2") == 0, "device_list_leaves_the_unplugged_out", "%zu", n);
	CHECK_EQ_I("open_unplugged_is_enodev", rw_sim_open(sim, "mlx5_1", &ctx), ENODEV);
	said("open_unplugged_says_so", "mlx5_1 is unplugged");
	check(ctx == NULL, "failed_open_writes_no_context", "%p", (void *)ctx);
	CHECK_EQ_I("open_unknown_is_enodev", rw_sim_open(sim, "mlx5_9", &ctx), ENODEV);
	said("open_unknown_names_it", "no simulated device mlx5_9");
	CHECK_EQ_I("open_null_context_is_einval", rw_sim_open(sim, "mlx5_2", NULL), EINVAL);
	check(strstr(rw_last_error(), "context") != NULL, "open_null_context_says_so", "\"%s\"", rw_last_error());

	/* Like a real async fd, it blocks until the engine says otherwise;
	 * where the real read would block for ever, EDEADLK. */
	CHECK_EQ_I("open_mlx5_2", rw_sim_open(sim, "mlx5_2", &ctx), 0);
	CHECK_EQ_I("open_twice_is_ebusy", rw_sim_open(sim, "mlx5_2", &again), EBUSY);
	said("open_twice_says_so", "mlx5_2 is open");
	fd = rw_sim_context_fd(ctx);
	check(fd >= 0 && (fcntl(fd, F_GETFL) & O_NONBLOCK) == 0, "context_fd_starts_blocking", "flags %#x",
	      fcntl(fd, F_GETFL));
	CHECK_EQ_I("empty_blocking_get_is_edeadlk", rw_sim_get_event(ctx, &code, &element), EDEADLK);
	CHECK_EQ("blocking_get_counted", counters(sim, 2).blocking_gets, 1);
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	CHECK_EQ_I("empty_nonblocking_get_is_eagain", rw_sim_get_event(ctx, &code, &element), EAGAIN);

	/* get and ack as libibverbs has them. */
	CHECK_OK("rules_push_2", rw_sim_push_event(sim, 2, 10, 1, 2));
	CHECK_EQ_I("get_first", rw_sim_get_event(ctx, &code, &element), 0);
	check(code == 10 && element == 1, "get_gives_port_err_for_port_1", "code %u element %llu", code,
	      (unsigned long long)element);
	CHECK_EQ_I("get_second", rw_sim_get_event(ctx, &code, &element), 0);
	CHECK_EQ("two_read_none_acked", counters(sim, 2).unacked, 2);
	CHECK_EQ_I("ack_first", rw_sim_ack_event(ctx), 0);
	CHECK_EQ_I("ack_second", rw_sim_ack_event(ctx), 0);
	CHECK_EQ_I("ack_with_nothing_left_is_einval", rw_sim_ack_event(ctx), EINVAL);
	said("ack_with_nothing_left_says_so", "mlx5_2: no event read and not acknowledged");
	c = counters(sim, 2);
	check(c.unacked == 0 && c.acked == 2 && c.bad_acks == 1, "acks_counted", "unacked %llu acked %llu bad %llu",
	      (unsigned long long)c.unacked, (unsigned long long)c.acked, (unsigned long long)c.bad_acks);

	/* Queries answer as libibverbs: errnos, not statuses. */
	CHECK_EQ_I("query_port_1", rw_sim_query_port(ctx, 1, &attr), 0);
	check(attr.state == PORT_ACTIVE && attr.active_speed == 128 && attr.active_width == 2, "port_1_active_ndr_4x",
	      "state %u speed %u width %u", attr.state, attr.active_speed, attr.active_width);
	CHECK_EQ_I("query_port_2_of_a_1_port_device", rw_sim_query_port(ctx, 2, &attr), EINVAL);
	said("query_port_2_names_it", "port 2 of mlx5_2");
	CHECK_EQ_I("query_carrier_port_9", rw_sim_query_carrier(ctx, 9, &(rw_carrier){ RW_CARRIER_UNKNOWN }), EINVAL);
	said("query_carrier_port_9_names_it", "port 9 of mlx5_2");
	check(rw_sim_query_address(ctx, 9, &addr) != 0, "query_address_port_9_fails", "answered 0");
	said("query_address_port_9_names_it", "port 9 of mlx5_2");
	check(rw_sim_query_counters(ctx, 9, &pc) != 0, "query_counters_port_9_fails", "answered 0");
	said("query_counters_port_9_names_it", "port 9 of mlx5_2");
	check(rw_carrier_read("nonexistent0", 1, &(rw_carrier){ RW_CARRIER_UNKNOWN }) != 0, "carrier_read_no_device",
	      "answered 0");
	said("carrier_read_no_device_names_it", "nonexistent0/1");
	CHECK_EQ_I("query_port_0", rw_sim_query_port(ctx, 0, &attr), EINVAL);
	CHECK_EQ_I("query_port_null_attr", rw_sim_query_port(ctx, 1, NULL), EINVAL);
	CHECK_EQ_I("unscripted_address_is_eopnotsupp", rw_sim_query_address(ctx, 1, &addr), EOPNOTSUPP);
	CHECK_EQ_I("unscripted_counters_are_enoent", rw_sim_query_counters(ctx, 1, &pc), ENOENT);
	CHECK_OK("rules_set_link", rw_sim_set_link(sim, 2, 1, 64, 2));
	CHECK_EQ_I("query_port_after_set_link", rw_sim_query_port(ctx, 1, &attr), 0);
	CHECK_EQ("set_link_read_back", attr.active_speed, 64);
	CHECK_STATUS("set_gid_index_256", rw_sim_set_gid(sim, 2, 1, 256, (const uint8_t *)"0123456789abcdef"),
		     RW_ERR_RANGE);
	CHECK_EQ_I("get_null_code_is_einval", rw_sim_get_event(ctx, NULL, &element), EINVAL);
	CHECK_EQ_I("null_context_is_einval", rw_sim_get_event(NULL, &code, &element), EINVAL);
	CHECK_EQ_I("null_context_fd_is_minus_1", rw_sim_context_fd(NULL), -1);

	/* Closed (twice: the second is a no-op), it can be opened again; an
	 * event pushed meanwhile is refused, as nobody would read it. */
	rw_sim_close(&ctx);
	check(ctx == NULL, "close_clears_the_handle", "%p", (void *)ctx);
	rw_sim_close(&ctx);
	CHECK_STATUS("push_after_close_refused", rw_sim_push_event(sim, 2, 10, 1, 1), RW_ERR_STATE);
	CHECK_EQ_I("open_again_after_close", rw_sim_open(sim, "mlx5_2", &ctx), 0);

	/* One opener at a time: a monitor started over the sim opens its
	 * devices anew, and the context then reads nothing of theirs. */
	{
		rw_monitor *mon = NULL;

		CHECK_OK("rules_monitor_takes_the_devices", rw_monitor_start_sim(NULL, NULL, sim, &mon));
		CHECK_EQ_I("stale_context_get_is_ebadf", rw_sim_get_event(ctx, &code, &element), EBADF);
		CHECK_EQ_I("stale_context_has_no_fd", rw_sim_context_fd(ctx), -1);
		rw_sim_close(&ctx);
		check(counters(sim, 2).open, "closing_the_stale_context_leaves_the_monitors_device_open", "closed");
		CHECK_OK("rules_monitor_free", rw_monitor_free(&mon));
	}

	/* Gone is ENODEV, until rw_sim_restore (hung up) or rw_sim_plug
	 * (unplugged), even while the old context is still open. */
	CHECK_EQ_I("open_mlx5_0", rw_sim_open(sim, "mlx5_0", &ctx), 0);
	CHECK_OK("hang_up_mlx5_0", rw_sim_hang_up(sim, 0));
	CHECK_EQ_I("open_hung_up_held_is_enodev", rw_sim_open(sim, "mlx5_0", &again), ENODEV);
	said("open_hung_up_says_so", "mlx5_0 is hung up");
	CHECK_OK("restore_mlx5_0", rw_sim_restore(sim, 0));
	CHECK_EQ_I("open_restored_held_is_ebusy", rw_sim_open(sim, "mlx5_0", &again), EBUSY);
	rw_sim_close(&ctx);
	CHECK_EQ_I("open_restored", rw_sim_open(sim, "mlx5_0", &ctx), 0);
	CHECK_OK("unplug_mlx5_0", rw_sim_unplug(sim, 0));
	CHECK_EQ_I("open_unplugged_held_is_enodev", rw_sim_open(sim, "mlx5_0", &again), ENODEV);
	said("open_unplugged_held_says_so", "mlx5_0 is unplugged");
	rw_sim_close(&ctx);
	CHECK_EQ_I("open_unplugged_closed_is_enodev", rw_sim_open(sim, "mlx5_0", &again), ENODEV);
	check(again == NULL, "gone_opens_write_no_context", "%p", (void *)again);
	rw_sim_free(&sim);
}

int main(void)
{
	the_loop();
	sim_rules();
	return check_done();
}
