/*
 * evidence.c: evidence beyond the port state, through the C API. The
 * engine's transfer outcomes (one peer failing, the data-path breaker
 * through two, half-open and its probes), the flap counters (a silent
 * flap, counters a driver lacks), require_address (a rail held for want
 * of an address, the GID index chosen), and the settings behind them, set
 * and read by key.
 */
#include "check.h" /* first: it sets the feature macros */

#include <stdlib.h>

#include "railwatch.h"

#include "rig.h"

#define WC_SUCCESS 0
#define WC_WR_FLUSH_ERR 5
#define WC_RETRY_EXC_ERR 12

/* An attached rig: mlx5_0, port 1. Takes (and frees) the config `c`. */
static bool attached(struct rig *r, rw_config *c)
{
	const uint8_t one[] = { 1 };
	uint32_t dev;
	bool made = rig_init(r, c);

	rw_config_free(&c);
	if (!made || rw_machine_add_device(r->m, "mlx5_0", one, 1, 0, &dev) != RW_OK)
		return false;
	rig_run(r);
	return rw_word_admits(rig_word(r, 0, 1));
}

static void transfers(void)
{
	struct rig r;
	rw_transfer_report lines[8];
	rw_notification n;
	rw_log log;
	size_t mark;

	if (!check(attached(&r, NULL), "transfers_attached", "%s", rw_last_error()))
		return;
	CHECK_OK("report_nothing", rw_machine_report_transfers(r.m, 0, 1, NULL, 0, 0));
	CHECK_STATUS("report_null_lines", rw_machine_report_transfers(r.m, 0, 1, NULL, 1, 0), RW_ERR_NULL);
	CHECK_STATUS("report_port_2", rw_machine_report_transfers(r.m, 0, 2, lines, 0, 0), RW_ERR_RANGE);

	/* Failures through one peer only: the peer is suspect, not the rail. */
	lines[0] = (rw_transfer_report){ .peer = 7, .wc_status = WC_RETRY_EXC_ERR, .count = 20 };
	mark = r.nactions;
	CHECK_OK("report_one_peer_failing", rw_machine_report_transfers(r.m, 0, 1, lines, 1, 10));
	rig_run(&r);
	check(rig_notified(&r, mark, RW_HAPPENING_PEER_FAILING, &n) >= 1 && n.peer == 7 && n.port == 1,
	      "one_peer_failing_notified", "peer %llu port %u", (unsigned long long)n.peer, n.port);
	check(rw_word_admits(rig_word(&r, 0, 1)), "one_peer_failing_keeps_the_rail", "refuses");

	/* Flush errors are never counted, whatever their number. */
	lines[0] = (rw_transfer_report){ .peer = 8, .wc_status = WC_WR_FLUSH_ERR, .count = 1000 };
	lines[1] = (rw_transfer_report){ .peer = 9, .wc_status = WC_WR_FLUSH_ERR, .count = 1000 };
	CHECK_OK("report_flushes", rw_machine_report_transfers(r.m, 0, 1, lines, 2, 20));
	rig_run(&r);
	check(rw_word_admits(rig_word(&r, 0, 1)), "flushes_keep_the_rail", "refuses");

	/* Through a second peer: the breaker opens, the rail pauses. */
	lines[0] = (rw_transfer_report){ .peer = 8, .wc_status = WC_RETRY_EXC_ERR, .count = 20 };
	mark = r.nactions;
	CHECK_OK("report_second_peer_failing", rw_machine_report_transfers(r.m, 0, 1, lines, 1, 30));
	rig_run(&r);
	check(!rw_word_admits(rig_word(&r, 0, 1)), "breaker_pauses_the_rail", "admits");
	CHECK_EQ("breaker_reason_data_path", rw_word_reason(rig_word(&r, 0, 1)), RW_REASON_DATA_PATH);
	check(rig_logged(&r, mark, RW_LOG_BREAKER_OPEN, &log) == 1 && log.until_ms > 30, "breaker_open_logged",
	      "until %llu", (unsigned long long)log.until_ms);
	CHECK_EQ("breaker_selector_told", rig_count(&r, mark, RW_ACTION_SET_AVAILABLE, 0, 1, NULL), 1);

	/* After the backoff the port reads ACTIVE: half-open. Ordinary work is
	 * still refused; one probe is granted, a second is not. */
	mark = r.nactions;
	rig_advance(&r, log.until_ms + 5);
	check(!rw_word_admits(rig_word(&r, 0, 1)), "half_open_refuses", "word %#llx",
	      (unsigned long long)rig_word(&r, 0, 1));
	CHECK_EQ("half_open_reason", rw_word_reason(rig_word(&r, 0, 1)), RW_REASON_HALF_OPEN);
	check(rig_notified(&r, mark, RW_HAPPENING_HALF_OPEN, &n) >= 1 && n.port == 1, "half_open_notified", "no");
	{
		rw_gate *g = NULL;
		rw_ticket t;
		bool granted = false;
		unsigned k = 0;

		CHECK_OK("probe_gate", rw_machine_gate(r.m, 0, 1, &g));
		CHECK_STATUS("probe_null_granted", rw_gate_probe(g, NULL, &t), RW_ERR_NULL);
		CHECK_OK("probe_first", rw_gate_probe(g, &granted, &t));
		check(granted && t.reason == RW_REASON_PROBING && !t.admitted, "probe_granted_once", "granted %d reason %u",
		      granted, t.reason);
		CHECK_OK("probe_second", rw_gate_probe(g, &granted, &t));
		check(!granted, "probe_second_refused", "granted twice");
		/* Its transfer fails: open again, the next backoff. */
		mark = r.nactions;
		CHECK_OK("report_probe_failed", rw_machine_report_probe(r.m, 0, 1, false, r.now));
		rig_run(&r);
		check(rig_notified(&r, mark, RW_HAPPENING_PROBE_FAILED, &n) == 1 && !n.timed_out, "probe_failed_notified",
		      "no");
		CHECK_EQ("probe_failed_reason", rw_word_reason(rig_word(&r, 0, 1)), RW_REASON_DATA_PATH);
		check(rig_logged(&r, mark, RW_LOG_BREAKER_OPEN, &log) == 1 && log.until_ms > r.now, "reopen_logged", "no");
		/* Half-open again; this probe succeeds: closed, the rail back. */
		rig_advance(&r, log.until_ms + 5);
		CHECK_OK("probe_again", rw_gate_probe(g, &granted, &t));
		check(granted, "probe_again_granted", "refused, reason %u", t.reason);
		mark = r.nactions;
		CHECK_OK("report_probe_ok", rw_machine_report_probe(r.m, 0, 1, true, r.now));
		rig_run(&r);
		check(rw_word_admits(rig_word(&r, 0, 1)), "probe_success_admits", "refuses");
		CHECK_EQ("probe_success_reason_none", rw_word_reason(rig_word(&r, 0, 1)), RW_REASON_NONE);
		for (size_t i = mark; i < r.nactions; i++)
			if (r.actions[i].kind == RW_ACTION_NOTIFY &&
			    r.actions[i].notification.kind == RW_HAPPENING_TRANSITION &&
			    r.actions[i].notification.cause == RW_CAUSE_BY && r.actions[i].notification.cause_code == RW_BY_PROBE)
				k++;
		CHECK_EQ("probe_recovered_by_probe", k, 1u);
		/* A report with no probe out changes nothing. */
		CHECK_OK("report_stray_probe", rw_machine_report_probe(r.m, 0, 1, false, r.now));
		rig_run(&r);
		check(rw_word_admits(rig_word(&r, 0, 1)), "stray_probe_ignored", "refuses");
		rw_gate_free(&g);
	}
	rw_machine_free(&r.m);
}

static void counters(void)
{
	struct rig r;
	rw_log log;
	rw_notification n;
	uint64_t gen;
	size_t mark;
	rw_config *c = NULL;

	rw_config_new(&c);
	rw_config_set_u64(c, "audit_ms", 100);
	if (!check(attached(&r, c), "counters_attached", "%s", rw_last_error()))
		return;
	CHECK_EQ("attach_reads_the_counters", rig_count(&r, 0, RW_ACTION_READ_COUNTERS, 0, 1, NULL), 1);

	/* link_downed rises with no PORT_ERR: a silent flap once a port read
	 * 250 ms later confirms it; the generation moves, the rail stays. */
	gen = rw_word_generation(rig_word(&r, 0, 1));
	r.ports[0][1].link_downed = 1;
	mark = r.nactions;
	rig_advance(&r, 150);
	CHECK_EQ("audit_reads_port_and_counters", rig_count(&r, mark, RW_ACTION_READ_COUNTERS, 0, 1, NULL), 1);
	CHECK_EQ("silent_flap_waits_its_confirmation", rig_logged(&r, mark, RW_LOG_SILENT_FLAP, NULL), 0);
	rig_advance(&r, 400);
	CHECK_EQ("silent_flap_logged", rig_logged(&r, mark, RW_LOG_SILENT_FLAP, NULL), 1);
	check(rig_notified(&r, mark, RW_HAPPENING_TRANSITION, &n) == 1 && n.cause == RW_CAUSE_SILENT_FLAP,
	      "silent_flap_transition", "cause %u", n.cause);
	CHECK_EQ("silent_flap_moves_the_generation", rw_word_generation(rig_word(&r, 0, 1)), gen + 1);
	check(rw_word_admits(rig_word(&r, 0, 1)), "silent_flap_keeps_the_rail", "refuses");

	/* A driver without them: said once, never asked again. */
	r.ports[0][1].counters_error = ENOENT;
	mark = r.nactions;
	rig_advance(&r, 650);
	check(rig_logged(&r, mark, RW_LOG_COUNTERS_UNAVAILABLE, &log) == 1 && log.error == ENOENT,
	      "counters_unavailable_logged_once", "error %d", log.error);
	CHECK_EQ("counters_asked_once_more_then_never", rig_count(&r, mark, RW_ACTION_READ_COUNTERS, 0, 1, NULL), 1);
	CHECK_STATUS("counters_port_9", rw_machine_handle_counters(r.m, 0, 9, 0, 0, 0, 0, r.now), RW_ERR_RANGE);
	rw_machine_free(&r.m);

	/* silent_flaps off: the counters are never read. */
	rw_config_new(&c);
	rw_config_set_bool(c, "silent_flaps", false);
	attached(&r, c);
	CHECK_EQ("silent_flaps_off_reads_no_counters", rig_count(&r, 0, RW_ACTION_READ_COUNTERS, ~0u, ~0u, NULL), 0);
	rw_machine_free(&r.m);
}

static void required_address(void)
{
	struct rig r;
	rw_config *c = NULL;
	rw_notification n;
	uint32_t index = 99;
	const uint8_t one[] = { 1 };
	uint32_t dev;
	size_t mark;
	bool made;

	rw_config_new(&c);
	rw_config_set_str(c, "require_address", "roce_v2");
	made = rig_init(&r, c);
	rw_config_free(&c);
	if (!made)
		return;
	/* No address yet: ACTIVE, but held. */
	r.ports[0][1].address_error = 0;
	r.ports[0][1].gid.gid_type = 0; /* RoCE v1: not what is asked for */
	CHECK_OK("address_add_device", rw_machine_add_device(r.m, "mlx5_0", one, 1, 0, &dev));
	rig_run(&r);
	check(!rw_word_admits(rig_word(&r, 0, 1)), "no_address_holds_the_rail", "admits");
	CHECK_EQ("no_address_reason", rw_word_reason(rig_word(&r, 0, 1)), RW_REASON_NO_ADDRESS);
	CHECK_EQ("no_address_logged", rig_logged(&r, 0, RW_LOG_NO_ADDRESS, NULL), 1);
	CHECK_STATUS("no_gid_index_yet", rw_machine_gid_index(r.m, 0, 1, &index), RW_ERR_NOT_FOUND);
	CHECK_EQ("no_gid_index_writes_nothing", index, 99);

	/* A RoCE v2 GID at index 3 appears: GID_CHANGE, re-read, admitted on
	 * it. */
	r.ports[0][1].gid.index = 3;
	r.ports[0][1].gid.gid_type = 1;
	r.ports[0][1].gid.raw[10] = 0xff;
	r.ports[0][1].gid.raw[11] = 0xff;
	r.ports[0][1].gid.raw[15] = 7;
	mark = r.nactions;
	CHECK_OK("gid_change", rw_machine_handle_event(r.m, 0, 18, 1, 10));
	rig_run(&r);
	rig_advance(&r, 2000);
	check(rw_word_admits(rig_word(&r, 0, 1)), "address_found_admits", "word %#llx",
	      (unsigned long long)rig_word(&r, 0, 1));
	check(rig_notified(&r, mark, RW_HAPPENING_GID_INDEX, &n) >= 1 && n.gid_index == 3, "gid_index_notified",
	      "index %u", n.gid_index);
	CHECK_OK("gid_index_read", rw_machine_gid_index(r.m, 0, 1, &index));
	CHECK_EQ("gid_index_is_3", index, 3);
	CHECK_STATUS("gid_index_null_out", rw_machine_gid_index(r.m, 0, 1, NULL), RW_ERR_NULL);
	rw_machine_free(&r.m);
}

/* The settings by key: defaults read back, each setter refusing a key it
 * does not take, a value of the wrong type or out of range (naming key and
 * value, changing nothing), the rules between keys checked when used, and
 * a setting C had no field for (device_owner) taking effect. */
static void settings(void)
{
	rw_config *c = NULL;
	rw_machine *m = NULL;
	struct rig r;
	rw_action a;
	uint64_t u64 = 0;
	double f64 = 0;
	bool on = true;
	const char *name = NULL;

	CHECK_OK("config_new", rw_config_new(&c));
	if (!c)
		return;
	CHECK_OK("get_failures", rw_config_get_u64(c, "data_path.failures", &u64));
	CHECK_EQ("default_failures_8", u64, 8);
	CHECK_OK("get_tick_ms", rw_config_get_u64(c, "tick_ms", &u64));
	CHECK_EQ("default_tick_ms_1000", u64, 1000);
	CHECK_OK("get_damping", rw_config_get_bool(c, "damping", &on));
	check(!on, "default_damping_off", "on");
	CHECK_STATUS("damping_key_while_off", rw_config_get_f64(c, "damping.reuse", &f64), RW_ERR_STATE);
	CHECK_OK("get_witness", rw_config_get_str(c, "port_witness", &name));
	check(name && strcmp(name, "both") == 0, "default_witness_both", "%s", name ? name : "NULL");

	CHECK_FAILS("unknown_key", rw_config_set_u64(c, "ticks_ms", 5), RW_ERR_NOT_FOUND, "ticks_ms");
	CHECK_FAILS("tick_ms_0", rw_config_set_u64(c, "tick_ms", 0), RW_ERR_RANGE, "tick_ms = 0");
	CHECK_FAILS("tick_ms_8_days", rw_config_set_u64(c, "tick_ms", 8ull * 24 * 3600 * 1000), RW_ERR_RANGE,
		    "tick_ms");
	CHECK_FAILS("min_peers_17", rw_config_set_u64(c, "data_path.min_peers", 17), RW_ERR_RANGE, "min_peers = 17");
	CHECK_FAILS("tick_ms_as_f64", rw_config_set_f64(c, "tick_ms", 2.5), RW_ERR_INVALID, "tick_ms");
	CHECK_FAILS("witness_nic", rw_config_set_str(c, "port_witness", "nic"), RW_ERR_INVALID, "nic");
	CHECK_FAILS("reuse_negative", rw_config_set_f64(c, "damping.reuse", -1), RW_ERR_RANGE, "damping.reuse");
	CHECK_FAILS("set_null_key", rw_config_set_u64(c, NULL, 1), RW_ERR_NULL, "key");
	CHECK_FAILS("get_null_out", rw_config_get_u64(c, "tick_ms", NULL), RW_ERR_NULL, "out");
	rw_config_get_u64(c, "tick_ms", &u64);
	CHECK_EQ("refused_values_change_nothing", u64, 1000);
	rw_config_get_bool(c, "damping", &on);
	check(!on, "a_refused_damping_key_leaves_damping_off", "on");

	/* Between keys: checked by rw_config_check and by the machine. */
	CHECK_OK("reopen_initial_5000", rw_config_set_u64(c, "reopen_initial_ms", 5000));
	CHECK_OK("reopen_max_1000", rw_config_set_u64(c, "reopen_max_ms", 1000));
	CHECK_FAILS("check_reopen_max_below_initial", rw_config_check(c), RW_ERR_INVALID, "reopen_max_ms");
	CHECK_FAILS("machine_refuses_reopen_max", rw_machine_new(c, &m), RW_ERR_INVALID, "reopen_max_ms");
	check(m == NULL, "refused_settings_make_no_machine", "%p", (void *)m);
	rw_config_free(&c);
	check(c == NULL, "config_free_clears_the_handle", "%p", (void *)c);
	rw_config_free(&c); /* twice is harmless */

	/* A setting the 0.1 struct had no field for: device_owner = engine.
	 * A DEVICE_FATAL asks to re-validate, never to close. */
	rw_config_new(&c);
	CHECK_OK("device_owner_engine", rw_config_set_str(c, "device_owner", "engine"));
	CHECK_OK("seed_1", rw_config_set_u64(c, "seed", 1));
	if (!check(attached(&r, c), "engine_owned_attached", "%s", rw_last_error()))
		return;
	CHECK_OK("device_fatal", rw_machine_handle_event(r.m, 0, 8, 0, r.now));
	rig_run(&r);
	check(!rw_word_admits(rig_word(&r, 0, 1)), "device_fatal_takes_the_rail_out", "admits");
	rig_advance(&r, r.now + 2000);
	CHECK_EQ("no_close_of_an_engines_device", rig_count(&r, 0, RW_ACTION_CLOSE, 0, ~0u, NULL), 0);
	CHECK_EQ("revalidate_asked_once", rig_count(&r, 0, RW_ACTION_REVALIDATE, 0, ~0u, &a), 1);
	check(rw_word_admits(rig_word(&r, 0, 1)), "revalidated_rail_back", "word %#llx",
	      (unsigned long long)rig_word(&r, 0, 1));
	rw_machine_free(&r.m);
}

/* A reader whose queue is always empty. */
static int32_t empty_queue(void *user, uint32_t *code, uint64_t *element)
{
	(void)user;
	(void)code;
	(void)element;
	return EAGAIN;
}

/* A now_ms earlier than one already given counts as that one, also when
 * the input that gave it fed the machine nothing: a report of no line, a
 * drain that read no event. An engine passing a stale clock to
 * handle_timeout then still runs what is due, instead of seeing
 * poll_timeout return the same past deadline again. */
static void time_never_goes_back(void)
{
	for (int via_drain = 0; via_drain < 2; via_drain++) {
		const char *how = via_drain ? "empty_drain" : "empty_report";
		char name[96];
		struct rig r;
		uint64_t due = RW_NO_DEADLINE, next = RW_NO_DEADLINE;
		size_t mark;

		snprintf(name, sizeof(name), "%s_attached", how);
		if (!check(attached(&r, NULL), name, "%s", rw_last_error()))
			return;
		/* PORT_ERR at 10: paused, the recovery tick is due later. */
		r.ports[0][1].state = 1; /* DOWN */
		r.now = 10;
		rw_machine_handle_event(r.m, 0, 10 /* PORT_ERR */, 1, r.now);
		rig_run(&r);
		rw_machine_poll_timeout(r.m, &due);
		snprintf(name, sizeof(name), "%s_tick_due", how);
		check(due != RW_NO_DEADLINE && due > r.now, name, "deadline %llu", (unsigned long long)due);
		/* The input at due + 5 that feeds the machine nothing. */
		snprintf(name, sizeof(name), "%s_at_a_later_time", how);
		if (via_drain)
			CHECK_OK(name, rw_machine_drain(r.m, 0, empty_queue, NULL, 0, due + 5, NULL));
		else
			CHECK_OK(name, rw_machine_report_transfers(r.m, 0, 1, NULL, 0, due + 5));
		/* The timeout with a stale clock counts as due + 5: the tick runs. */
		mark = r.nactions;
		snprintf(name, sizeof(name), "%s_then_a_stale_timeout", how);
		CHECK_OK(name, rw_machine_handle_timeout(r.m, r.now));
		rig_run(&r);
		snprintf(name, sizeof(name), "%s_stale_timeout_runs_the_tick", how);
		CHECK_EQ(name, rig_count(&r, mark, RW_ACTION_QUERY_PORT, 0, 1, NULL), 1);
		rw_machine_poll_timeout(r.m, &next);
		snprintf(name, sizeof(name), "%s_deadline_moves_on", how);
		check(next > due, name, "deadline %llu, was %llu", (unsigned long long)next, (unsigned long long)due);
		rw_machine_free(&r.m);
	}
}

int main(void)
{
	transfers();
	counters();
	required_address();
	settings();
	time_never_goes_back();
	return check_done();
}
