/*
 * lifecycle.c: the device lifecycle of embedding 1. The engine hands the
 * machine the host's device list; the machine asks it to open the new
 * devices (RW_ACTION_OPEN, by name), retries an open that fails with
 * backoff, closes the devices that left, and attaches one that comes back
 * under its old index. And the kernel's uevent socket as an fd.
 */
#include "check.h" /* first: it sets the feature macros */

#include <stdlib.h>

#include "railwatch.h"

#include "rig.h"

static void list_open_and_attach(void)
{
	struct rig r;
	rw_config *c = NULL;
	bool made;
	rw_action last;
	rw_log log;
	char name[64];
	size_t mark;
	const char *both[] = { "mlx5_0", "mlx5_1" }, *one[] = { "mlx5_1" }, *odd[] = { "mlx5_1", "a/b", "" };

	rw_config_new(&c);
	rw_config_set_u64(c, "reopen_initial_ms", 100);
	rw_config_set_u64(c, "reopen_jitter_pct", 0);
	made = rig_init(&r, c);
	rw_config_free(&c); /* the machine keeps its own copy */
	if (!check(made, "lifecycle_machine_new", "%s", rw_last_error()))
		return;
	r.nports[0] = 2;
	r.open_error[1] = EACCES;

	/* The list at start: both are asked to be opened, by index, in order.
	 * mlx5_0 opens with 2 ports (attached, read, admitted); mlx5_1 will
	 * not (EACCES): logged with the next attempt. */
	CHECK_OK("device_list_at_start", rw_machine_handle_device_list(r.m, both, 2, r.now));
	rig_run(&r);
	CHECK_EQ("open_asked_for_both", rig_count(&r, 0, RW_ACTION_OPEN, ~0u, ~0u, NULL), 2);
	check(r.actions[0].kind == RW_ACTION_OPEN && r.actions[0].device == 0, "open_asks_mlx5_0_first",
	      "kind %u device %u", r.actions[0].kind, r.actions[0].device);
	CHECK_OK("device_name_0", rw_machine_device_name(r.m, 0, name, sizeof(name), NULL));
	check(strcmp(name, "mlx5_0") == 0, "device_0_is_mlx5_0", "\"%s\"", name);
	CHECK_OK("device_name_1", rw_machine_device_name(r.m, 1, name, sizeof(name), NULL));
	check(strcmp(name, "mlx5_1") == 0, "device_1_is_mlx5_1", "\"%s\"", name);

	check(rw_word_admits(rig_word(&r, 0, 1)) && rw_word_admits(rig_word(&r, 0, 2)), "opened_device_admits",
	      "words %#llx %#llx", (unsigned long long)rig_word(&r, 0, 1), (unsigned long long)rig_word(&r, 0, 2));
	CHECK_EQ("opened_device_read", rig_count(&r, 0, RW_ACTION_START_READING, 0, ~0u, NULL), 1);
	check(rig_logged(&r, 0, RW_LOG_OPEN_FAILED, &log) == 1 && log.device == 1 && log.error == EACCES,
	      "failed_open_logged", "device %u error %d", log.device, log.error);
	CHECK_EQ("failed_open_retried_after_the_backoff", log.until_ms, 100);
	CHECK_EQ("failed_open_has_no_rail", rw_machine_gate(r.m, 1, 1, &(rw_gate *){ NULL }), RW_ERR_RANGE);

	/* The retry: it opens now. */
	r.open_error[1] = 0;
	mark = r.nactions;
	rig_advance(&r, 100);
	CHECK_EQ("open_retried", rig_count(&r, mark, RW_ACTION_OPEN, 1, ~0u, NULL), 1);
	check(rw_word_admits(rig_word(&r, 1, 1)), "retried_device_admits", "word %#llx",
	      (unsigned long long)rig_word(&r, 1, 1));

	/* mlx5_0 leaves the list: stop reading, close, rails inert. */
	mark = r.nactions;
	CHECK_OK("device_list_without_mlx5_0", rw_machine_handle_device_list(r.m, one, 1, r.now));
	rig_run(&r);
	CHECK_EQ("left_device_not_read", rig_count(&r, mark, RW_ACTION_STOP_READING, 0, ~0u, NULL), 1);
	CHECK_EQ("left_device_closed", rig_count(&r, mark, RW_ACTION_CLOSE, 0, ~0u, NULL), 1);
	CHECK_EQ("left_device_rail_inert", rw_word_state(rig_word(&r, 0, 1)), RW_RAIL_INERT);
	CHECK_EQ("left_device_reason", rw_word_reason(rig_word(&r, 0, 1)), RW_REASON_DEVICE_REMOVED);
	CHECK_EQ("left_device_removed_logged", rig_logged(&r, mark, RW_LOG_REMOVED, NULL), 1);

	/* Names that cannot be a device's are skipped, not errors. */
	mark = r.nactions;
	CHECK_OK("device_list_with_odd_names", rw_machine_handle_device_list(r.m, odd, 3, r.now));
	rig_run(&r);
	CHECK_EQ("odd_names_opened_nothing", rig_count(&r, mark, RW_ACTION_OPEN, ~0u, ~0u, NULL), 0);

	/* It comes back: opened again, under its old index. */
	mark = r.nactions;
	CHECK_OK("device_list_with_both_again", rw_machine_handle_device_list(r.m, both, 2, r.now));
	rig_run(&r);
	CHECK_EQ("back_device_open_asked", rig_count(&r, mark, RW_ACTION_OPEN, ~0u, ~0u, &last), 1);
	CHECK_EQ("back_device_keeps_index_0", last.device, 0);
	check(rw_word_admits(rig_word(&r, 0, 2)), "back_device_admits", "word %#llx",
	      (unsigned long long)rig_word(&r, 0, 2));

	/* Answers the machine did not ask for, and bad ports. */
	{
		const uint8_t zero[] = { 0 }, twice[] = { 1, 1 };

		CHECK_STATUS("opened_with_port_0", rw_machine_handle_opened(r.m, 0, zero, 1, 0, r.now), RW_ERR_INVALID);
		CHECK_STATUS("opened_with_a_port_twice", rw_machine_handle_opened(r.m, 0, twice, 2, 0, r.now),
			     RW_ERR_INVALID);
		CHECK_STATUS("opened_device_9", rw_machine_handle_opened(r.m, 9, NULL, 0, EIO, r.now), RW_ERR_RANGE);
		CHECK_STATUS("device_list_null_names", rw_machine_handle_device_list(r.m, NULL, 1, r.now), RW_ERR_NULL);
		CHECK_STATUS("device_list_null_name", rw_machine_handle_device_list(r.m, (const char *[]){ NULL }, 1, r.now),
			     RW_ERR_NULL);
		CHECK_OK("device_list_empty", rw_machine_handle_device_list(r.m, NULL, 0, r.now));
	}
	rw_machine_free(&r.m);
}

/* A device that leaves while its open is pending: the late answer is met
 * with a close. */
static void late_open_answer(void)
{
	struct rig r;
	const char *mine[] = { "mlx5_0" };
	const uint8_t ports[] = { 1 };
	size_t mark;

	if (!rig_init(&r, NULL))
		return;
	CHECK_OK("late_list", rw_machine_handle_device_list(r.m, mine, 1, 0));
	rw_machine_handle_device_list(r.m, NULL, 0, 0); /* it left before the open was answered */
	mark = 0;
	for (rw_action a; rw_machine_poll_action(r.m, &a) == RW_OK && a.kind != RW_ACTION_NONE;)
		if (r.nactions < RIG_RECORD)
			r.actions[r.nactions++] = a;
	mark = r.nactions;
	CHECK_OK("late_open_answered", rw_machine_handle_opened(r.m, 0, ports, 1, 0, 0));
	rig_run(&r);
	CHECK_EQ("late_open_closed_again", rig_count(&r, mark, RW_ACTION_CLOSE, 0, ~0u, NULL), 1);
	CHECK_STATUS("late_open_attached_no_rail", rw_machine_gate(r.m, 0, 1, &(rw_gate *){ NULL }), RW_ERR_RANGE);
	rw_machine_free(&r.m);
}

/* The kernel's uevent socket: opens where the kernel allows netlink (a
 * container may refuse it: RW_ERR_IO, saying so). */
static void kernel_uevents(void)
{
	rw_uevents *u = NULL;
	bool changed = true;
	int st = rw_uevents_open(&u);

	check(st == RW_OK || (st == RW_ERR_IO && strstr(rw_last_error(), "uevent") != NULL), "uevents_open",
	      "%s: %s", rw_status_name(st), rw_last_error());
	if (st == RW_OK) {
		check(rw_uevents_fd(u) >= 0, "uevents_fd", "%d", rw_uevents_fd(u));
		CHECK_OK("uevents_drain_when_quiet", rw_uevents_drain(u, &changed));
		CHECK_STATUS("uevents_drain_null_out", rw_uevents_drain(u, NULL), RW_ERR_NULL);
	}
	rw_uevents_free(&u);
	check(u == NULL, "uevents_free_clears", "%p", (void *)u);
	CHECK_STATUS("uevents_open_null_out", rw_uevents_open(NULL), RW_ERR_NULL);
	CHECK_STATUS("uevents_drain_null", rw_uevents_drain(NULL, &changed), RW_ERR_NULL);
	CHECK_EQ_I("uevents_fd_null", rw_uevents_fd(NULL), -1);
}

/* A device that left and comes back with other ports: a port it had is the
 * same rail with a new generation (its gates follow it); a port it no
 * longer has stays inert, and calls naming it are refused as for a port it
 * never had, while an event naming it is only notified. And a device that
 * opens with no port is refused. */
static void back_with_other_ports(void)
{
	struct rig r;
	const uint8_t both[] = { 1, 2 }, one[] = { 1 }, other[] = { 1, 3 };
	rw_gate *before2 = NULL;
	uint64_t w;
	size_t mark;

	if (!rig_init(&r, NULL))
		return;
	CHECK_OK("readd_first", rw_machine_add_device_at(r.m, 1, "mlx5_1", both, 2, r.now));
	rig_run(&r);
	CHECK_EQ("readd_first_generation", rw_word_generation(rig_word(&r, 1, 1)), 1);
	CHECK_OK("readd_gate_of_port_2", rw_machine_gate(r.m, 1, 2, &before2));
	CHECK_OK("readd_removed", rw_machine_handle_removed(r.m, 1, r.now));
	rig_run(&r);

	/* Back with port 1 only. */
	CHECK_OK("readd_with_port_1", rw_machine_add_device_at(r.m, 1, "mlx5_1", one, 1, r.now));
	rig_run(&r);
	w = rig_word(&r, 1, 1);
	check(rw_word_admits(w) && rw_word_generation(w) == 2, "readd_port_1_new_generation", "word %#llx",
	      (unsigned long long)w);
	w = before2 ? *rw_gate_word(before2) : 0;
	check(rw_word_state(w) == RW_RAIL_INERT && rw_word_reason(w) == RW_REASON_DEVICE_REMOVED, "readd_port_2_gate_inert",
	      "word %#llx", (unsigned long long)w);
	CHECK_STATUS("readd_port_2_no_gate", rw_machine_gate(r.m, 1, 2, &(rw_gate *){ NULL }), RW_ERR_RANGE);
	CHECK_STATUS("readd_port_2_no_query_answer", rw_machine_handle_port_state(r.m, 1, 2, 0, 4, r.now), RW_ERR_RANGE);
	mark = r.nactions;
	CHECK_OK("readd_port_2_event_taken", rw_machine_handle_event(r.m, 1, 10 /* PORT_ERR */, 2, r.now));
	rig_run(&r);
	CHECK_EQ("readd_port_2_event_notified", rig_notified(&r, mark, RW_HAPPENING_EVENT, NULL), 1);
	CHECK_EQ("readd_port_2_event_nothing_else", r.nactions - mark, 1);
	check(rw_word_admits(rig_word(&r, 1, 1)), "readd_port_1_untouched", "word %#llx",
	      (unsigned long long)rig_word(&r, 1, 1));

	/* Back with ports 1 and 3. */
	CHECK_OK("readd_removed_again", rw_machine_handle_removed(r.m, 1, r.now));
	rig_run(&r);
	CHECK_OK("readd_with_ports_1_3", rw_machine_add_device_at(r.m, 1, "mlx5_1", other, 2, r.now));
	rig_run(&r);
	CHECK_EQ("readd_port_1_third_generation", rw_word_generation(rig_word(&r, 1, 1)), 3);
	CHECK_EQ("readd_port_3_first_generation", rw_word_generation(rig_word(&r, 1, 3)), 1);
	rw_gate_free(&before2);

	/* A device that opens with no port. */
	{
		const char *mine[] = { "mlx5_0" };

		CHECK_OK("no_port_list", rw_machine_handle_device_list(r.m, mine, 1, r.now));
		CHECK_STATUS("opened_with_no_port", rw_machine_handle_opened(r.m, 2, NULL, 0, 0, r.now), RW_ERR_INVALID);
		check(strstr(rw_last_error(), "at least one") != NULL, "opened_with_no_port_says_so", "%s",
		      rw_last_error());
	}
	rw_machine_free(&r.m);
}

int main(void)
{
	list_open_and_attach();
	late_open_answer();
	back_with_other_ports();
	kernel_uevents();
	return check_done();
}
