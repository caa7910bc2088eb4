/*
 * boundary.c: the C boundary itself. NULL handles and out-pointers,
 * out-of-range devices and ports, invalid settings and names are errors
 * with a message (never crashes); every destroy function takes NULL;
 * status names; the last error is per thread.
 */
#include "check.h" /* first: it sets the feature macros */

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "railwatch.h"
/* Twice: the header, its inline part included, is guarded. */
#include "railwatch.h"

static int32_t never_get(void *user, uint32_t *code, uint64_t *element)
{
	(void)user;
	(void)code;
	(void)element;
	return 11; /* EAGAIN */
}

static void notify_nothing(void *user, const rw_notification *n)
{
	(void)user;
	(void)n;
}

/* ---- NULL --------------------------------------------------------------- */

static void nulls(void)
{
	rw_machine *m = NULL;
	rw_sim *sim = NULL;
	rw_gate *g = NULL;
	rw_action a;
	rw_ticket t;
	rw_config *c = NULL;
	rw_monitor *mon = (rw_monitor *)1;
	rw_rail_info rails[8];
	uint64_t u64;
	uint32_t dev;
	size_t count;
	char *json;
	const uint8_t ports[] = { 1 };

	CHECK_FAILS("machine_new_null_out", rw_machine_new(NULL, NULL), RW_ERR_NULL, "out");
	CHECK_FAILS("config_new_null", rw_config_new(NULL), RW_ERR_NULL, "out");
	CHECK_FAILS("config_set_null_config", rw_config_set_u64(NULL, "tick_ms", 1), RW_ERR_NULL, "config");
	CHECK_FAILS("config_get_null_config", rw_config_get_u64(NULL, "tick_ms", &u64), RW_ERR_NULL, "config");
	CHECK_FAILS("config_check_null", rw_config_check(NULL), RW_ERR_NULL, "config");
	CHECK_FAILS("handle_timeout_null_machine", rw_machine_handle_timeout(NULL, 0), RW_ERR_NULL, "machine");
	CHECK_FAILS("handle_event_null_machine", rw_machine_handle_event(NULL, 0, 9, 1, 0), RW_ERR_NULL, "machine");
	CHECK_FAILS("poll_action_null_machine", rw_machine_poll_action(NULL, &a), RW_ERR_NULL, "machine");
	CHECK_FAILS("add_device_null_machine", rw_machine_add_device(NULL, "mlx5_0", ports, 1, 0, &dev), RW_ERR_NULL,
		    "machine");
	CHECK_FAILS("gate_check_null_gate", rw_gate_check(NULL, &t), RW_ERR_NULL, "gate");
	check(rw_gate_word(NULL) == NULL, "gate_word_of_null_is_null", "a non-NULL word");
	CHECK_FAILS("word_decode_null_ticket", rw_word_decode(0, NULL), RW_ERR_NULL, "ticket");

	CHECK_OK("machine_new_defaults", rw_machine_new(NULL, &m));
	if (!m)
		return;
	CHECK_FAILS("poll_action_null_out", rw_machine_poll_action(m, NULL), RW_ERR_NULL, "action");
	CHECK_FAILS("poll_timeout_null_out", rw_machine_poll_timeout(m, NULL), RW_ERR_NULL, "deadline_ms");
	CHECK_FAILS("add_device_null_name", rw_machine_add_device(m, NULL, ports, 1, 0, &dev), RW_ERR_NULL, "name");
	CHECK_FAILS("add_device_null_ports", rw_machine_add_device(m, "mlx5_0", NULL, 1, 0, &dev), RW_ERR_NULL, "ports");
	CHECK_FAILS("add_device_null_out", rw_machine_add_device(m, "mlx5_0", ports, 1, 0, NULL), RW_ERR_NULL,
		    "device");
	CHECK_OK("add_device_ok", rw_machine_add_device(m, "mlx5_0", ports, 1, 0, &dev));
	CHECK_FAILS("drain_null_get", rw_machine_drain(m, 0, NULL, NULL, 0, 0, NULL), RW_ERR_NULL, "get");
	CHECK_OK("drain_null_report_is_allowed", rw_machine_drain(m, 0, never_get, NULL, 0, 0, NULL));
	CHECK_FAILS("gate_null_out", rw_machine_gate(m, 0, 1, NULL), RW_ERR_NULL, "gate");
	CHECK_FAILS("handle_address_null_address", rw_machine_handle_address(m, 0, 1, 0, NULL, 0), RW_ERR_NULL,
		    "address");
	CHECK_OK("gate_ok", rw_machine_gate(m, 0, 1, &g));
	CHECK_FAILS("gate_check_null_ticket", rw_gate_check(g, NULL), RW_ERR_NULL, "ticket");
	rw_gate_free(&g);
	rw_machine_free(&m);

	CHECK_FAILS("sim_new_null_out", rw_sim_new(NULL), RW_ERR_NULL, "out");
	CHECK_FAILS("sim_add_device_null_sim", rw_sim_add_device(NULL, "mlx5_0", 1, &dev), RW_ERR_NULL, "sim");
	CHECK_FAILS("sim_push_null_sim", rw_sim_push_event(NULL, 0, 9, 1, 1), RW_ERR_NULL, "sim");
	CHECK_OK("sim_new", rw_sim_new(&sim));
	if (sim) {
		CHECK_FAILS("sim_add_device_null_out", rw_sim_add_device(sim, "mlx5_0", 1, NULL), RW_ERR_NULL, "device");
		CHECK_OK("sim_add_device", rw_sim_add_device(sim, "mlx5_0", 1, &dev));
		CHECK_FAILS("sim_counters_null_out", rw_sim_get_counters(sim, 0, NULL), RW_ERR_NULL, "counters");
		CHECK_FAILS("start_sim_null_out", rw_monitor_start_sim(NULL, NULL, sim, NULL), RW_ERR_NULL, "out");
	}
	CHECK_FAILS("start_sim_null_sim", rw_monitor_start_sim(NULL, NULL, NULL, &mon), RW_ERR_NULL, "sim");
	check(mon == (rw_monitor *)1, "failed_start_leaves_out_untouched", "out was overwritten");
	CHECK_FAILS("start_verbs_null_out", rw_monitor_start_verbs(NULL, NULL, NULL, NULL), RW_ERR_NULL, "out");
	CHECK_FAILS("subscribe_null_monitor", rw_monitor_subscribe(NULL, notify_nothing, NULL, &u64), RW_ERR_NULL,
		    "monitor");
	CHECK_FAILS("unsubscribe_null_monitor", rw_monitor_unsubscribe(NULL, 1), RW_ERR_NULL, "monitor");
	CHECK_FAILS("monitor_gate_null_monitor", rw_monitor_gate(NULL, "mlx5_0/1", &g), RW_ERR_NULL, "monitor");
	CHECK_FAILS("snapshot_null_monitor", rw_monitor_snapshot(NULL, NULL, 0, &count), RW_ERR_NULL, "monitor");
	CHECK_FAILS("snapshot_json_null_monitor", rw_monitor_snapshot_json(NULL, &json), RW_ERR_NULL, "monitor");

	/* A running monitor's NULL arguments. */
	mon = NULL;
	if (sim) {
		rw_config_new(&c);
		CHECK_OK("start_sim", rw_monitor_start_sim(c, NULL, sim, &mon));
		rw_config_free(&c);
	}
	if (mon) {
		CHECK_FAILS("subscribe_null_callback", rw_monitor_subscribe(mon, NULL, NULL, &u64), RW_ERR_NULL,
			    "callback");
		CHECK_FAILS("monitor_gate_null_rail", rw_monitor_gate(mon, NULL, &g), RW_ERR_NULL, "rail");
		CHECK_FAILS("monitor_gate_null_out", rw_monitor_gate(mon, "mlx5_0/1", NULL), RW_ERR_NULL, "gate");
		CHECK_FAILS("snapshot_json_null_out", rw_monitor_snapshot_json(mon, NULL), RW_ERR_NULL, "json");
		CHECK_FAILS("snapshot_null_rails_with_room", rw_monitor_snapshot(mon, NULL, 8, &count), RW_ERR_NULL,
			    "rails");
		CHECK_FAILS("snapshot_null_count", rw_monitor_snapshot(mon, rails, 8, NULL), RW_ERR_NULL, "count");
		CHECK_FAILS("unsubscribe_unknown_id", rw_monitor_unsubscribe(mon, 424242), RW_ERR_NOT_FOUND, "424242");
		CHECK_FAILS("monitor_gate_unknown_rail", rw_monitor_gate(mon, "nope/1", &g), RW_ERR_NOT_FOUND, "nope/1");
		CHECK_OK("monitor_free", rw_monitor_free(&mon));
	}
	rw_sim_free(&sim);

	/* A host without devices: the snapshot has no rail, and a NULL array
	 * with room is still refused (only capacity 0 allows NULL). */
	CHECK_OK("empty_sim_new", rw_sim_new(&sim));
	CHECK_OK("empty_start_sim", rw_monitor_start_sim(NULL, NULL, sim, &mon));
	if (mon) {
		count = 99;
		CHECK_FAILS("empty_snapshot_null_rails_with_room", rw_monitor_snapshot(mon, NULL, 8, &count),
			    RW_ERR_NULL, "rails");
		CHECK_EQ("empty_snapshot_refused_leaves_count_alone", count, 99);
		CHECK_STATUS("empty_snapshot_size_query", rw_monitor_snapshot(mon, NULL, 0, &count), RW_OK);
		CHECK_EQ("empty_snapshot_size_query_says_0", count, 0);
		CHECK_OK("empty_monitor_free", rw_monitor_free(&mon));
	}
	rw_sim_free(&sim);
}

/* ---- range -------------------------------------------------------------- */

static void ranges(void)
{
	rw_machine *m = NULL;
	rw_sim *sim = NULL;
	rw_gate *g = NULL;
	uint32_t dev;
	const uint8_t ports[] = { 1, 2 };

	CHECK_OK("range_machine_new", rw_machine_new(NULL, &m));
	if (!m)
		return;
	CHECK_OK("range_add_device", rw_machine_add_device(m, "mlx5_0", ports, 2, 0, &dev));
	CHECK_FAILS("event_device_1_of_1", rw_machine_handle_event(m, 1, 9, 1, 0), RW_ERR_RANGE, "device 1");
	CHECK_FAILS("read_error_device_huge", rw_machine_handle_read_error(m, 4000000000u, 5, 0), RW_ERR_RANGE,
		    "4000000000");
	CHECK_FAILS("hangup_device_7", rw_machine_handle_hangup(m, 7, 0), RW_ERR_RANGE, "7");
	CHECK_FAILS("port_state_port_3", rw_machine_handle_port_state(m, 0, 3, 0, 4, 0), RW_ERR_RANGE, "port 3");
	CHECK_FAILS("port_state_port_0", rw_machine_handle_port_state(m, 0, 0, 0, 4, 0), RW_ERR_RANGE, "port 0");
	CHECK_FAILS("link_port_257", rw_machine_handle_link(m, 0, 257, 0, 128, 2, 0, 0), RW_ERR_RANGE, "257");
	CHECK_FAILS("address_port_9", rw_machine_handle_address(m, 0, 9, 95, NULL, 0), RW_ERR_RANGE, "9");
	CHECK_FAILS("reopen_device_2", rw_machine_handle_reopen(m, 2, 0, 0), RW_ERR_RANGE, "2");
	CHECK_FAILS("removed_device_3", rw_machine_handle_removed(m, 3, 0), RW_ERR_RANGE, "3");
	CHECK_FAILS("gate_port_5", rw_machine_gate(m, 0, 5, &g), RW_ERR_RANGE, "5");
	check(g == NULL, "failed_gate_leaves_out_null", "gate written");
	CHECK_FAILS("drain_device_9", rw_machine_drain(m, 9, never_get, NULL, 0, 0, NULL), RW_ERR_RANGE, "9");
	/* Counts no array can have: refused, never made into a slice. */
	CHECK_FAILS("add_device_size_max_ports", rw_machine_add_device(m, "mlx5_1", ports, SIZE_MAX, 0, &dev),
		    RW_ERR_RANGE, "ports");
	{
		rw_gid gid;
		rw_port_address a;
		memset(&gid, 0, sizeof(gid));
		memset(&a, 0, sizeof(a));
		a.gids = &gid;
		a.ngids = SIZE_MAX / 2;
		CHECK_FAILS("address_with_size_max_gids", rw_machine_handle_address(m, 0, 1, 0, &a, 0), RW_ERR_RANGE,
			    "gids");
	}
	rw_machine_free(&m);

	CHECK_OK("range_sim_new", rw_sim_new(&sim));
	if (!sim)
		return;
	CHECK_OK("range_sim_add", rw_sim_add_device(sim, "mlx5_0", 2, &dev));
	CHECK_FAILS("sim_push_device_1", rw_sim_push_event(sim, 1, 9, 1, 1), RW_ERR_RANGE, "1");
	CHECK_FAILS("sim_port_down_port_3", rw_sim_port_down(sim, 0, 3), RW_ERR_RANGE, "3");
	CHECK_FAILS("sim_port_up_port_0", rw_sim_port_up(sim, 0, 0), RW_ERR_RANGE, "port 0");
	CHECK_FAILS("sim_set_state_port_300", rw_sim_set_port_state(sim, 0, 300, 4), RW_ERR_RANGE, "300");
	CHECK_FAILS("sim_eintr_device_5", rw_sim_eintr(sim, 5, 1), RW_ERR_RANGE, "5");
	CHECK_FAILS("sim_eio_device_5", rw_sim_eio(sim, 5), RW_ERR_RANGE, "5");
	CHECK_FAILS("sim_unplug_device_5", rw_sim_unplug(sim, 5), RW_ERR_RANGE, "5");
	CHECK_FAILS("sim_plug_device_5", rw_sim_plug(sim, 5), RW_ERR_RANGE, "5");
	rw_sim_free(&sim);
}

/* ---- counts: bounded by what can be valid, checked before any read ------ */

static void counts(void)
{
	rw_machine *m = NULL;
	rw_sim *sim = NULL;
	uint32_t dev = 77;
	const uint8_t one[] = { 1 };
	rw_gid gid;
	rw_port_address a;
	rw_transfer_report line;
	const char *name = "mlx5_0";
	rw_sim_counters c;

	memset(&gid, 0, sizeof(gid));
	memset(&a, 0, sizeof(a));
	memset(&line, 0, sizeof(line));
	CHECK_OK("counts_machine_new", rw_machine_new(NULL, &m));
	if (!m)
		return;
	/* A one-byte array claimed to hold 2^40 ports: no device has more
	 * than 255, so the count is refused before the array is read. */
	CHECK_FAILS("add_device_2_to_40_ports", rw_machine_add_device(m, "x", one, (size_t)1 << 40, 0, &dev),
		    RW_ERR_RANGE, "nports");
	CHECK_FAILS("add_device_256_ports", rw_machine_add_device(m, "x", one, 256, 0, &dev), RW_ERR_RANGE, "255");
	CHECK_EQ("refused_count_leaves_out_alone", dev, 77);
	CHECK_OK("counts_add_device", rw_machine_add_device(m, "mlx5_0", one, 1, 0, &dev));
	a.gids = &gid;
	a.ngids = (size_t)1 << 40;
	CHECK_FAILS("address_2_to_40_gids", rw_machine_handle_address(m, 0, 1, 0, &a, 0), RW_ERR_RANGE, "ngids");
	a.ngids = RW_MAX_GIDS + 1;
	CHECK_FAILS("address_more_gids_than_a_table", rw_machine_handle_address(m, 0, 1, 0, &a, 0), RW_ERR_RANGE,
		    "RW_MAX_GIDS");
	a.ngids = 1;
	gid.index = RW_MAX_GIDS;
	CHECK_FAILS("address_gid_index_past_a_table", rw_machine_handle_address(m, 0, 1, 0, &a, 0), RW_ERR_RANGE,
		    "index");
	CHECK_FAILS("opened_2_to_40_ports", rw_machine_handle_opened(m, 0, one, (size_t)1 << 40, 0, 0), RW_ERR_RANGE,
		    "nports");
	CHECK_FAILS("transfers_2_to_40_lines", rw_machine_report_transfers(m, 0, 1, &line, (size_t)1 << 40, 0),
		    RW_ERR_RANGE, "RW_MAX_TRANSFER_REPORTS");
	CHECK_FAILS("device_list_2_to_40_names", rw_machine_handle_device_list(m, &name, (size_t)1 << 40, 0),
		    RW_ERR_RANGE, "RW_MAX_DEVICES");
	rw_machine_free(&m);

	CHECK_OK("counts_sim_new", rw_sim_new(&sim));
	if (!sim)
		return;
	CHECK_OK("counts_sim_add", rw_sim_add_device(sim, "mlx5_0", 1, &dev));
	/* Nobody opened the device yet: an event now would be lost (the
	 * kernel only queues events on an open context). Refused, and counted
	 * as dropped. */
	CHECK_FAILS("push_before_any_open_is_refused", rw_sim_push_event(sim, 0, 4, 0x1000, 3), RW_ERR_STATE,
		    "not open");
	memset(&c, 0, sizeof(c));
	CHECK_OK("counts_sim_counters", rw_sim_get_counters(sim, 0, &c));
	CHECK_EQ("refused_push_counted_dropped", c.dropped, 3);
	CHECK_EQ("refused_push_not_queued", c.queued, 0);
	/* Repeats beyond what any test needs are refused: a count that wraps
	 * the counters, or keeps a monitor reading for hours. */
	CHECK_FAILS("push_uint64_max_times", rw_sim_push_event(sim, 0, 4, 0x1000, UINT64_MAX), RW_ERR_RANGE,
		    "RW_SIM_MAX_REPEAT");
	CHECK_FAILS("push_max_repeat_plus_1", rw_sim_push_event(sim, 0, 4, 0x1000, RW_SIM_MAX_REPEAT + 1),
		    RW_ERR_RANGE, "repeat");
	CHECK_FAILS("eintr_uint64_max_times", rw_sim_eintr(sim, 0, UINT64_MAX), RW_ERR_RANGE, "RW_SIM_MAX_REPEAT");
	rw_sim_port_down(sim, 0, 1);
	memset(&c, 0, sizeof(c));
	rw_sim_get_counters(sim, 0, &c);
	CHECK_EQ("nothing_wrapped_the_queued_count", c.queued, 0);
	rw_sim_free(&sim);
}

/* ---- one buffer idiom: capacity 0 is the size query, RW_ERR_BUFFER says how many - */

static void buffers(void)
{
	rw_machine *m = NULL;
	rw_action actions[8];
	char name[16];
	size_t n = 99, k = 99, len = 99;
	uint32_t dev;
	const uint8_t one[] = { 1 };

	CHECK_OK("buffers_machine_new", rw_machine_new(NULL, &m));
	if (!m)
		return;
	CHECK_STATUS("poll_actions_size_query_when_empty", rw_machine_poll_actions(m, NULL, 0, &n), RW_OK);
	CHECK_EQ("poll_actions_size_query_says_0", n, 0);
	CHECK_OK("buffers_add_device", rw_machine_add_device(m, "mlx5_0", one, 1, 0, &dev));
	/* The attach is pending: start reading, query port 1. */
	CHECK_STATUS("poll_actions_size_query_with_actions", rw_machine_poll_actions(m, NULL, 0, &n), RW_ERR_BUFFER);
	CHECK_EQ("poll_actions_size_query_counts_them", n, 2);
	CHECK_STATUS("poll_actions_capacity_0_with_a_buffer", rw_machine_poll_actions(m, actions, 0, &k),
		     RW_ERR_BUFFER);
	CHECK_EQ("poll_actions_capacity_0_takes_none", k, 2);
	CHECK_FAILS("poll_actions_null_buffer_with_room", rw_machine_poll_actions(m, NULL, 1, &k), RW_ERR_NULL,
		    "actions");
	CHECK_OK("poll_actions_room_for_all", rw_machine_poll_actions(m, actions, 8, &k));
	CHECK_EQ("poll_actions_took_both", k, 2);
	CHECK_EQ("poll_actions_first_is_start_reading", actions[0].kind, RW_ACTION_START_READING);
	CHECK_STATUS("poll_actions_then_empty", rw_machine_poll_actions(m, NULL, 0, &n), RW_OK);
	CHECK_EQ("poll_actions_then_0", n, 0);

	CHECK_STATUS("device_name_size_query", rw_machine_device_name(m, 0, NULL, 0, &len), RW_ERR_BUFFER);
	CHECK_EQ("device_name_size_query_says_6", len, 6);
	memset(name, 'x', sizeof(name));
	CHECK_STATUS("device_name_no_room_for_the_nul", rw_machine_device_name(m, 0, name, 6, &len), RW_ERR_BUFFER);
	check(name[0] == 'x', "device_name_too_small_writes_nothing", "wrote \"%.6s\"", name);
	CHECK_OK("device_name_fits", rw_machine_device_name(m, 0, name, 7, &len));
	check(strcmp(name, "mlx5_0") == 0, "device_name_is_the_name", "\"%s\"", name);
	CHECK_FAILS("device_name_null_buffer_with_room", rw_machine_device_name(m, 0, NULL, 7, &len), RW_ERR_NULL,
		    "buf");
	rw_machine_free(&m);
}

/* ---- a port event's element must be a port number --------------------------- */

static void port_elements(void)
{
	rw_machine *m = NULL;
	rw_sim *sim = NULL;
	uint32_t dev;
	const uint8_t one[] = { 1 };

	CHECK_OK("elements_machine_new", rw_machine_new(NULL, &m));
	if (!m)
		return;
	CHECK_OK("elements_add_device", rw_machine_add_device(m, "mlx5_0", one, 1, 0, &dev));
	/* ev.element.qp of a LID_CHANGE: the union read through the wrong
	 * member. It was accepted and did nothing. */
	CHECK_FAILS("lid_change_with_a_pointer_for_a_port", rw_machine_handle_event(m, 0, 11, 0x7f0000000001ull, 0),
		    RW_ERR_RANGE, "not a port number");
	CHECK_FAILS("port_err_for_port_0", rw_machine_handle_event(m, 0, 10, 0, 0), RW_ERR_RANGE, "port_num");
	CHECK_FAILS("gid_change_for_port_256", rw_machine_handle_event(m, 0, 18, 256, 0), RW_ERR_RANGE, "256");
	/* A port number the device lacks is a value: counted, not an error. */
	CHECK_OK("port_err_for_port_200_is_stray", rw_machine_handle_event(m, 0, 10, 200, 0));
	/* Elements of other events are not port numbers. */
	CHECK_OK("device_fatal_any_element", rw_machine_handle_event(m, 0, 8, 0x7f0000000001ull, 0));
	CHECK_OK("qp_event_a_pointer", rw_machine_handle_event(m, 0, 1, 0x7f0000000001ull, 0));
	rw_machine_free(&m);

	CHECK_OK("elements_sim_new", rw_sim_new(&sim));
	CHECK_OK("elements_sim_add", rw_sim_add_device(sim, "mlx5_0", 1, &dev));
	CHECK_FAILS("sim_push_port_active_with_a_pointer", rw_sim_push_event(sim, 0, 9, 0x7f0000000001ull, 1),
		    RW_ERR_RANGE, "not a port number");
	rw_sim_free(&sim);
}

/* ---- the newer surface: NULLs and values no call may take ----------------- */

static void newer_surface(void)
{
	rw_machine *m = NULL;
	rw_sim *sim = NULL;
	rw_sim_context *ctx = NULL;
	rw_uevents *u = NULL;
	uint32_t dev, u32 = 0, code = 0;
	uint64_t u64 = 0;
	size_t count = 0;
	rw_sim_port_attr attr;
	rw_port_address addr;
	rw_sim_port_counters pc;
	rw_carrier carrier = RW_CARRIER_UNKNOWN;
	const uint8_t one[] = { 1 };
	rw_transfer_report line = { 1, 12, 1 };

	/* Without a machine. */
	CHECK_FAILS("device_list_null_machine", rw_machine_handle_device_list(NULL, NULL, 0, 0), RW_ERR_NULL, "machine");
	CHECK_FAILS("opened_null_machine", rw_machine_handle_opened(NULL, 0, one, 1, 0, 0), RW_ERR_NULL, "machine");
	CHECK_FAILS("device_name_null_machine", rw_machine_device_name(NULL, 0, NULL, 0, &count), RW_ERR_NULL,
		    "machine");
	CHECK_FAILS("transfers_null_machine", rw_machine_report_transfers(NULL, 0, 1, &line, 1, 0), RW_ERR_NULL,
		    "machine");
	CHECK_FAILS("counters_null_machine", rw_machine_handle_counters(NULL, 0, 1, 0, 0, 0, 0, 0), RW_ERR_NULL,
		    "machine");
	CHECK_FAILS("gid_index_null_machine", rw_machine_gid_index(NULL, 0, 1, &u32), RW_ERR_NULL, "machine");
	CHECK_OK("newer_machine", rw_machine_new(NULL, &m));
	CHECK_FAILS("device_name_of_no_device", rw_machine_device_name(m, 0, NULL, 0, &count), RW_ERR_RANGE, "device 0");
	CHECK_FAILS("opened_of_no_device", rw_machine_handle_opened(m, 0, one, 1, 0, 0), RW_ERR_RANGE, "device 0");
	CHECK_OK("newer_add", rw_machine_add_device(m, "mlx5_0", one, 1, 0, &dev));
	CHECK_FAILS("transfers_port_0", rw_machine_report_transfers(m, 0, 0, &line, 1, 0), RW_ERR_RANGE, "port 0");
	CHECK_FAILS("counters_port_256", rw_machine_handle_counters(m, 0, 256, 0, 0, 0, 0, 0), RW_ERR_RANGE, "256");
	CHECK_FAILS("gid_index_device_3", rw_machine_gid_index(m, 3, 1, &u32), RW_ERR_RANGE, "device 3");
	/* A NULL out-pointer is RW_ERR_NULL whatever the answer would be. */
	CHECK_FAILS("gid_index_null_out", rw_machine_gid_index(m, 0, 1, NULL), RW_ERR_NULL, "index");
	rw_machine_free(&m);

	/* The sim's newer calls. */
	CHECK_FAILS("device_list_null_sim", rw_sim_device_list(NULL, NULL, 0, &count), RW_ERR_NULL, "sim");
	CHECK_FAILS("sim_uevents_null_sim", rw_sim_uevents_open(NULL, &u), RW_ERR_NULL, "sim");
	CHECK_EQ_I("sim_open_null_sim", rw_sim_open(NULL, "mlx5_0", &ctx), EINVAL);
	CHECK_OK("newer_sim", rw_sim_new(&sim));
	CHECK_OK("newer_sim_add", rw_sim_add_device(sim, "mlx5_0", 1, &dev));
	CHECK_FAILS("device_list_null_count", rw_sim_device_list(sim, NULL, 0, NULL), RW_ERR_NULL, "count");
	CHECK_FAILS("device_list_null_names", rw_sim_device_list(sim, NULL, 4, &count), RW_ERR_NULL, "names");
	CHECK_FAILS("sim_uevents_null_out", rw_sim_uevents_open(sim, NULL), RW_ERR_NULL, "out");
	CHECK_FAILS("sim_carrier_events_null_sim", rw_sim_carrier_events_open(NULL, &u), RW_ERR_NULL, "sim");
	CHECK_FAILS("sim_carrier_events_null_out", rw_sim_carrier_events_open(sim, NULL), RW_ERR_NULL, "out");
	CHECK_FAILS("carrier_events_null_out", rw_carrier_events_open(NULL), RW_ERR_NULL, "out");
	CHECK_FAILS("set_carrier_unknown", rw_sim_set_carrier(sim, 0, 1, RW_CARRIER_UNKNOWN, true), RW_ERR_RANGE,
		    "UNKNOWN");
	CHECK_FAILS("set_carrier_code_7", rw_sim_set_carrier(sim, 0, 1, 7, false), RW_ERR_RANGE, "7");
	CHECK_FAILS("set_carrier_port_2", rw_sim_set_carrier(sim, 0, 2, RW_CARRIER_UP, false), RW_ERR_RANGE, "port 2");
	CHECK_EQ_I("carrier_read_null_name", rw_carrier_read(NULL, 1, &carrier), EINVAL);
	CHECK_EQ_I("carrier_read_null_out", rw_carrier_read("mlx5_0", 1, NULL), EINVAL);
	/* A name that is not a device's (".." would climb out of sysfs' class
	 * directory) or a port outside 1..=255: EINVAL, named, *out untouched. */
	carrier = RW_CARRIER_UP;
	CHECK_EQ_I("carrier_read_dotdot", rw_carrier_read("..", 1, &carrier), EINVAL);
	check(strstr(rw_last_error(), "..") != NULL, "carrier_read_dotdot_named", "\"%s\"", rw_last_error());
	CHECK_EQ_I("carrier_read_dotdot_out_untouched", carrier, RW_CARRIER_UP);
	CHECK_EQ_I("carrier_read_port_0", rw_carrier_read("mlx5_0", 0, &carrier), EINVAL);
	check(strstr(rw_last_error(), "port 0") != NULL, "carrier_read_port_0_named", "\"%s\"", rw_last_error());
	CHECK_EQ_I("carrier_read_port_0_out_untouched", carrier, RW_CARRIER_UP);
	CHECK_EQ_I("sim_open_null_name", rw_sim_open(sim, NULL, &ctx), EINVAL);
	CHECK_FAILS("set_link_port_2", rw_sim_set_link(sim, 0, 2, 128, 2), RW_ERR_RANGE, "port 2");
	CHECK_OK("set_gid_null_empties", rw_sim_set_gid(sim, 0, 1, 0, NULL));
	CHECK_FAILS("set_flap_counters_device_4", rw_sim_set_flap_counters(sim, 4, 1, 0, 0, 0), RW_ERR_RANGE, "4");
	CHECK_FAILS("hang_up_device_4", rw_sim_hang_up(sim, 4), RW_ERR_RANGE, "4");
	CHECK_FAILS("restore_null_sim", rw_sim_restore(NULL, 0), RW_ERR_NULL, "sim");
	/* A NULL context answers EINVAL everywhere, never crashes. */
	CHECK_EQ_I("query_device_null", rw_sim_query_device(NULL, &u32), EINVAL);
	CHECK_EQ_I("get_event_null", rw_sim_get_event(NULL, &code, &u64), EINVAL);
	CHECK_EQ_I("ack_event_null", rw_sim_ack_event(NULL), EINVAL);
	CHECK_EQ_I("next_event_null", rw_sim_next_event(NULL, &code, &u64), EINVAL);
	CHECK_EQ_I("query_port_null", rw_sim_query_port(NULL, 1, &attr), EINVAL);
	CHECK_EQ_I("query_address_null", rw_sim_query_address(NULL, 1, &addr), EINVAL);
	CHECK_EQ_I("query_counters_null", rw_sim_query_counters(NULL, 1, &pc), EINVAL);
	CHECK_EQ_I("query_carrier_null", rw_sim_query_carrier(NULL, 1, &carrier), EINVAL);
	rw_sim_close(NULL);
	rw_sim_close(&ctx);
	CHECK_EQ_I("newer_open", rw_sim_open(sim, "mlx5_0", &ctx), 0);
	CHECK_EQ_I("query_device_null_out", rw_sim_query_device(ctx, NULL), EINVAL);
	CHECK_EQ_I("query_address_null_out", rw_sim_query_address(ctx, 1, NULL), EINVAL);
	CHECK_EQ_I("query_counters_null_out", rw_sim_query_counters(ctx, 1, NULL), EINVAL);
	CHECK_EQ_I("query_carrier_null_out", rw_sim_query_carrier(ctx, 1, NULL), EINVAL);
	carrier = RW_CARRIER_UP;
	CHECK_EQ_I("query_carrier_no_netdev", rw_sim_query_carrier(ctx, 1, &carrier), ENOENT);
	CHECK_EQ_I("query_carrier_no_netdev_unknown", carrier, RW_CARRIER_UNKNOWN);
	CHECK_OK("set_carrier_silent", rw_sim_set_carrier(sim, 0, 1, RW_CARRIER_DOWN, false));
	CHECK_EQ_I("query_carrier_set", rw_sim_query_carrier(ctx, 1, &carrier), 0);
	CHECK_EQ_I("query_carrier_set_down", carrier, RW_CARRIER_DOWN);
	CHECK_EQ_I("query_carrier_port_2", rw_sim_query_carrier(ctx, 2, &carrier), EINVAL);
	CHECK_EQ_I("query_carrier_port_2_out_untouched", carrier, RW_CARRIER_DOWN);
	CHECK_EQ_I("query_address_port_300", rw_sim_query_address(ctx, 300, &addr), EINVAL);
	check(strstr(rw_last_error(), "300") != NULL, "query_address_port_300_says_so", "\"%s\"", rw_last_error());
	rw_sim_close(&ctx);
	rw_sim_free(&sim);

	/* The log callback. */
	CHECK_OK("log_off_with_null", rw_set_log_callback(NULL, NULL, RW_LOG_LEVEL_TRACE));
	CHECK_FAILS("log_level_99", rw_set_log_callback(NULL, NULL, 99), RW_ERR_INVALID, "max_level");
}

/* ---- invalid settings --------------------------------------------------- */

/* rw_machine_new, rw_monitor_start_sim and rw_monitor_start_verbs all
 * refuse `c`, naming `key`. */
static void refuses(const char *name, const rw_config *c, const char *key, rw_sim *sim)
{
	char full[128];
	rw_machine *m = NULL;
	rw_monitor *mon = NULL;

	snprintf(full, sizeof(full), "machine_new_refuses_%s", name);
	CHECK_FAILS(full, rw_machine_new(c, &m), RW_ERR_INVALID, key);
	snprintf(full, sizeof(full), "machine_new_refusing_%s_writes_no_machine", name);
	check(m == NULL, full, "a machine was made");
	rw_machine_free(&m);
	if (sim) {
		snprintf(full, sizeof(full), "start_sim_refuses_%s", name);
		CHECK_FAILS(full, rw_monitor_start_sim(c, NULL, sim, &mon), RW_ERR_INVALID, key);
		rw_monitor_free(&mon);
		mon = NULL;
	}
	snprintf(full, sizeof(full), "start_verbs_refuses_%s", name);
	CHECK_FAILS(full, rw_monitor_start_verbs(c, NULL, NULL, &mon), RW_ERR_INVALID, key);
	rw_monitor_free(&mon);
}

static void settings(void)
{
	rw_config *c = NULL;
	rw_sim *sim = NULL;
	rw_machine *m = NULL;
	uint32_t dev;

	CHECK_OK("defaults_are_accepted", rw_machine_new(NULL, &m));
	rw_machine_free(&m);
	if (rw_sim_new(&sim) == RW_OK)
		rw_sim_add_device(sim, "mlx5_0", 1, &dev);
	CHECK_OK("config_new", rw_config_new(&c));
	CHECK_FAILS("config_set_str_null_value", rw_config_set_str(c, "port_witness", NULL), RW_ERR_NULL, "value");
	/* Each key's own range is refused when set; the rules between keys
	 * when a machine or monitor is made. */
	CHECK_FAILS("drain_budget_0", rw_config_set_u64(c, "drain_budget", 0), RW_ERR_RANGE, "drain_budget");
	CHECK_FAILS("jitter_101", rw_config_set_u64(c, "reopen_jitter_pct", 101), RW_ERR_RANGE, "reopen_jitter_pct");
	CHECK_FAILS("half_life_0", rw_config_set_u64(c, "damping.half_life_ms", 0), RW_ERR_RANGE,
		    "damping.half_life_ms");
	CHECK_OK("reopen_initial_5000", rw_config_set_u64(c, "reopen_initial_ms", 5000));
	CHECK_OK("reopen_max_1000", rw_config_set_u64(c, "reopen_max_ms", 1000));
	refuses("reopen_max_below_initial", c, "reopen_max_ms", sim);
	rw_config_free(&c);
	rw_config_new(&c);
	CHECK_OK("damping_on", rw_config_set_bool(c, "damping", true));
	CHECK_OK("damping_reuse_3000", rw_config_set_f64(c, "damping.reuse", 3000));
	refuses("damping_reuse_above_suppress", c, "damping.reuse", sim);
	rw_config_free(&c);
	/* The monitor owns the devices it opens. */
	rw_config_new(&c);
	CHECK_OK("device_owner_engine", rw_config_set_str(c, "device_owner", "engine"));
	if (sim) {
		rw_monitor *mon = NULL;

		CHECK_FAILS("start_sim_refuses_an_engine_owner", rw_monitor_start_sim(c, NULL, sim, &mon),
			    RW_ERR_INVALID, "device_owner");
		rw_monitor_free(&mon);
	}
	rw_config_free(&c);
	rw_sim_free(&sim);
}

/* ---- names -------------------------------------------------------------- */

static void names(void)
{
	rw_machine *m = NULL;
	rw_sim *sim = NULL;
	uint32_t dev = 77;
	const uint8_t one[] = { 1 }, zero[] = { 0 }, twice[] = { 1, 1 };
	char long_name[4097], name_63[64], got[64];
	size_t len = 0;

	memset(long_name, 'x', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	memset(name_63, 'y', sizeof(name_63) - 1);
	name_63[sizeof(name_63) - 1] = '\0';

	CHECK_OK("names_machine_new", rw_machine_new(NULL, &m));
	if (m) {
		CHECK_FAILS("machine_name_empty", rw_machine_add_device(m, "", one, 1, 0, &dev), RW_ERR_INVALID, "name");
		CHECK_FAILS("machine_name_with_slash", rw_machine_add_device(m, "mlx5/0", one, 1, 0, &dev),
			    RW_ERR_INVALID, "mlx5/0");
		CHECK_FAILS("machine_name_not_utf8", rw_machine_add_device(m, "mlx\xff", one, 1, 0, &dev),
			    RW_ERR_INVALID, "UTF-8");
		CHECK_FAILS("machine_no_ports", rw_machine_add_device(m, "mlx5_0", one, 0, 0, &dev), RW_ERR_INVALID,
			    "ports");
		CHECK_FAILS("machine_port_0", rw_machine_add_device(m, "mlx5_0", zero, 1, 0, &dev), RW_ERR_INVALID,
			    "ports");
		CHECK_FAILS("machine_port_twice", rw_machine_add_device(m, "mlx5_0", twice, 2, 0, &dev),
			    RW_ERR_INVALID, "duplicate");
		/* The device list's rule (no device is called that), so that
		 * every name rw_machine_device_name gives fits its 64 bytes. */
		CHECK_FAILS("machine_name_over_63_bytes", rw_machine_add_device(m, long_name, one, 1, 0, &dev),
			    RW_ERR_INVALID, "at most 63");
		check(strlen(rw_last_error()) < 200, "machine_name_over_63_bytes_is_shown_cut", "%zu bytes: \"%.80s...\"",
		      strlen(rw_last_error()), rw_last_error());
		CHECK_FAILS("machine_name_with_a_space", rw_machine_add_device(m, "mlx5 0", one, 1, 0, &dev),
			    RW_ERR_INVALID, "whitespace");
		CHECK_FAILS("machine_name_with_a_newline", rw_machine_add_device(m, "mlx5\n0", one, 1, 0, &dev),
			    RW_ERR_INVALID, "whitespace");
		CHECK_FAILS("machine_name_with_an_escape", rw_machine_add_device(m, "mlx5\x1b[31m", one, 1, 0, &dev),
			    RW_ERR_INVALID, "control character");
		CHECK_EQ("refused_device_leaves_out_alone", dev, 77);
		CHECK_EQ("refused_names_add_no_device", rw_machine_device_name(m, 0, NULL, 0, NULL), RW_ERR_RANGE);
		CHECK_OK("machine_name_of_63_bytes_ok", rw_machine_add_device(m, name_63, one, 1, 0, &dev));
		CHECK_OK("machine_name_of_63_bytes_fits_64", rw_machine_device_name(m, dev, got, sizeof(got), &len));
		check(strcmp(got, name_63) == 0 && len == 63, "machine_name_of_63_bytes_read_back", "%zu bytes", len);
		rw_machine_free(&m);
		CHECK_OK("names_machine_new_again", rw_machine_new(NULL, &m));
		if (!m)
			return;
		CHECK_OK("machine_name_ok", rw_machine_add_device(m, "mlx5_0", one, 1, 0, &dev));
		CHECK_EQ("first_device_is_0", dev, 0);
		CHECK_FAILS("machine_name_taken", rw_machine_add_device(m, "mlx5_0", one, 1, 0, &dev), RW_ERR_INVALID,
			    "mlx5_0");
		CHECK_OK("machine_second_name_ok", rw_machine_add_device(m, "mlx5_1", one, 1, 0, &dev));
		CHECK_EQ("second_device_is_1", dev, 1);
		rw_machine_free(&m);
	}
	/* Only a name a device can have is one to watch for. */
	rw_monitor *verbs = NULL;
	CHECK_FAILS("start_verbs_only_device_empty", rw_monitor_start_verbs(NULL, NULL, "", &verbs), RW_ERR_INVALID,
		    "only_device");
	CHECK_FAILS("start_verbs_only_device_with_slash", rw_monitor_start_verbs(NULL, NULL, "mlx5/0", &verbs),
		    RW_ERR_INVALID, "only_device");
	check(verbs == NULL, "start_verbs_refused_leaves_out_alone", "a monitor was made");
	rw_monitor_free(&verbs);
	CHECK_OK("names_sim_new", rw_sim_new(&sim));
	if (sim) {
		CHECK_FAILS("sim_name_null", rw_sim_add_device(sim, NULL, 1, &dev), RW_ERR_NULL, "name");
		CHECK_FAILS("sim_name_empty", rw_sim_add_device(sim, "", 1, &dev), RW_ERR_INVALID, "name");
		CHECK_FAILS("sim_name_with_slash", rw_sim_add_device(sim, "a/b", 1, &dev), RW_ERR_INVALID, "a/b");
		CHECK_FAILS("sim_name_over_63_bytes", rw_sim_add_device(sim, long_name, 1, &dev), RW_ERR_INVALID,
			    "4096 bytes");
		check(strlen(rw_last_error()) < 200, "sim_name_over_63_bytes_is_shown_cut", "%zu bytes",
		      strlen(rw_last_error()));
		CHECK_FAILS("sim_nports_0", rw_sim_add_device(sim, "mlx5_0", 0, &dev), RW_ERR_INVALID, "nports");
		CHECK_FAILS("sim_nports_256", rw_sim_add_device(sim, "mlx5_0", 256, &dev), RW_ERR_INVALID, "256");
		CHECK_OK("sim_name_ok", rw_sim_add_device(sim, "mlx5_0", 1, &dev));
		CHECK_FAILS("sim_name_taken", rw_sim_add_device(sim, "mlx5_0", 1, &dev), RW_ERR_INVALID, "mlx5_0");
		rw_monitor *mon = NULL;
		rw_gate *g = NULL;
		CHECK_OK("names_monitor_start", rw_monitor_start_sim(NULL, NULL, sim, &mon));
		CHECK_FAILS("monitor_gate_of_a_long_name", rw_monitor_gate(mon, long_name, &g), RW_ERR_NOT_FOUND,
			    "4096 bytes");
		check(strlen(rw_last_error()) < 200, "monitor_gate_of_a_long_name_is_shown_cut", "%zu bytes",
		      strlen(rw_last_error()));
		rw_monitor_free(&mon);
		rw_sim_free(&sim);
	}
}

/* ---- destroy functions and status names --------------------------------- */

static void destroys_and_names(void)
{
	static const char *const want[] = { "RW_OK",        "RW_ERR_NULL",  "RW_ERR_RANGE",       "RW_ERR_INVALID",
					    "RW_ERR_NOT_FOUND", "RW_ERR_IO", "RW_ERR_STATE", "RW_ERR_UNSUPPORTED",
					    "RW_ERR_PANIC", "RW_ERR_BUFFER" };
	const int unknown[] = { 10, -1, 1000, INT32_MIN };
	char before[256];

	rw_machine *no_machine = NULL;
	rw_gate *no_gate = NULL;
	rw_sim *no_sim = NULL;
	char *no_string = NULL;
	rw_monitor *no_monitor = NULL;
	rw_uevents *no_uevents = NULL;

	rw_machine_handle_timeout(NULL, 0);
	snprintf(before, sizeof(before), "%s", rw_last_error());
	/* A NULL address, or the address of a NULL handle: nothing to do. */
	rw_machine_free(NULL);
	rw_machine_free(&no_machine);
	rw_gate_free(NULL);
	rw_gate_free(&no_gate);
	rw_sim_free(NULL);
	rw_sim_free(&no_sim);
	rw_string_free(NULL);
	rw_string_free(&no_string);
	rw_uevents_free(NULL);
	rw_uevents_free(&no_uevents);
	CHECK_OK("monitor_free_null_is_ok", rw_monitor_free(NULL));
	CHECK_OK("monitor_free_of_a_null_handle_is_ok", rw_monitor_free(&no_monitor));
	check(strcmp(before, rw_last_error()) == 0, "destroying_null_sets_no_error", "last error became \"%s\"",
	      rw_last_error());

	for (int s = 0; s <= RW_ERR_BUFFER; s++) {
		char name[64];
		const char *got = rw_status_name(s);

		snprintf(name, sizeof(name), "status_name_%d_is_%s", s, want[s]);
		check(got != NULL && strcmp(got, want[s]) == 0, name, "got \"%s\"", got ? got : "(null)");
	}
	for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		char name[64];
		const char *got = rw_status_name(unknown[i]);

		snprintf(name, sizeof(name), "status_name_%d_is_unknown_status", unknown[i]);
		check(got != NULL && strcmp(got, "unknown status") == 0, name, "got \"%s\"", got ? got : "(null)");
	}
}

/* ---- a second destroy is safe: each takes the handle's address, clears it - */

static void destroy_twice(void)
{
	rw_machine *m = NULL;
	rw_gate *g = NULL;
	rw_sim *sim = NULL;
	rw_monitor *mon = NULL;
	char *json = NULL;
	uint32_t dev;
	const uint8_t one[] = { 1 };

	CHECK_OK("twice_machine_new", rw_machine_new(NULL, &m));
	CHECK_OK("twice_add_device", rw_machine_add_device(m, "mlx5_0", one, 1, 0, &dev));
	CHECK_OK("twice_gate", rw_machine_gate(m, 0, 1, &g));
	rw_gate_free(&g);
	check(g == NULL, "gate_free_clears_the_handle", "%p", (void *)g);
	rw_gate_free(&g);
	rw_machine_free(&m);
	check(m == NULL, "machine_free_clears_the_handle", "%p", (void *)m);
	rw_machine_free(&m);

	CHECK_OK("twice_sim_new", rw_sim_new(&sim));
	CHECK_OK("twice_sim_add", rw_sim_add_device(sim, "mlx5_0", 1, &dev));
	CHECK_OK("twice_monitor_start", rw_monitor_start_sim(NULL, NULL, sim, &mon));
	CHECK_OK("twice_json", rw_monitor_snapshot_json(mon, &json));
	rw_string_free(&json);
	check(json == NULL, "string_free_clears_the_handle", "%p", (void *)json);
	rw_string_free(&json);
	CHECK_OK("monitor_free_once", rw_monitor_free(&mon));
	check(mon == NULL, "monitor_free_clears_the_handle", "%p", (void *)mon);
	CHECK_OK("monitor_free_twice", rw_monitor_free(&mon));
	rw_sim_free(&sim);
	check(sim == NULL, "sim_free_clears_the_handle", "%p", (void *)sim);
	rw_sim_free(&sim);
}

/* ---- the last error is per thread ----------------------------------------- */

struct other {
	char initial[256];
	char after[256];
	int status;
};

static void *other_thread(void *arg)
{
	struct other *o = arg;
	rw_machine *m = NULL;
	const uint8_t one[] = { 1 };
	uint32_t dev;

	snprintf(o->initial, sizeof(o->initial), "%s", rw_last_error());
	if (rw_machine_new(NULL, &m) == RW_OK) {
		rw_machine_add_device(m, "other_0", one, 1, 0, &dev);
		o->status = rw_machine_handle_event(m, 42, 9, 1, 0);
		snprintf(o->after, sizeof(o->after), "%s", rw_last_error());
		rw_machine_free(&m);
	}
	return NULL;
}

static void per_thread(void)
{
	struct other o;
	pthread_t t;
	char mine[256];

	memset(&o, 0, sizeof(o));
	rw_gate_check(NULL, NULL);
	snprintf(mine, sizeof(mine), "%s", rw_last_error());
	check(strstr(mine, "gate") != NULL, "main_thread_error_names_gate", "\"%s\"", mine);
	if (pthread_create(&t, NULL, other_thread, &o) != 0) {
		check(false, "pthread_create", "failed");
		return;
	}
	pthread_join(t, NULL);
	check(o.initial[0] == '\0', "new_thread_starts_with_empty_error", "\"%s\"", o.initial);
	CHECK_EQ("other_thread_failure_is_range", o.status, RW_ERR_RANGE);
	check(strstr(o.after, "42") != NULL, "other_thread_sees_its_own_error", "\"%s\"", o.after);
	check(strcmp(rw_last_error(), mine) == 0, "other_thread_failure_leaves_this_threads_error",
	      "now \"%s\", was \"%s\"", rw_last_error(), mine);
}

int main(void)
{
	const char *e = rw_last_error();

	check(e != NULL && e[0] == '\0', "last_error_empty_before_any_failure", "\"%s\"", e ? e : "(null)");
	nulls();
	ranges();
	counts();
	buffers();
	port_elements();
	newer_surface();
	settings();
	names();
	destroys_and_names();
	destroy_twice();
	per_thread();
	return check_done();
}
