/*
 * v0_1.c: an engine written against 0.1.0's railwatch.h, unchanged. It
 * must still build (each name and form 0.1.0 had, that the header now
 * keeps deprecated, warns: cargo xtask ffi checks that each warning
 * fires) and work: RW_HAPPENING_OBJECT_ERROR, and the destroys given the
 * handle itself rather than its address. It takes the default settings
 * (a NULL config, as 0.1.0 allowed): 0.2.0 made the config opaque, and an
 * engine that set one moves as CHANGELOG.md says.
 */
#include "../c/check.h"

#include "railwatch.h"

#define CODE_QP_FATAL 1 /* IBV_EVENT_QP_FATAL */
#define QP_HANDLE 0x5150u

/* The machine: a QP's fatal error is told as 0.1.0 named it. */
static void object_error(void)
{
	rw_machine *m = NULL;
	rw_gate *g = NULL;
	rw_action a;
	uint32_t dev = 0;
	const uint8_t ports[] = { 1 };
	bool told = false;
	CHECK_OK("machine_new", rw_machine_new(NULL, &m));
	CHECK_OK("add_device", rw_machine_add_device(m, "mlx5_0", ports, 1, 0, &dev));
	CHECK_OK("qp_fatal", rw_machine_handle_event(m, dev, CODE_QP_FATAL, QP_HANDLE, 1));
	while (rw_machine_poll_action(m, &a) == RW_OK && a.kind != RW_ACTION_NONE) {
		if (a.kind == RW_ACTION_NOTIFY && a.notification.kind == RW_HAPPENING_OBJECT_ERROR)
			told = a.notification.object_handle == QP_HANDLE;
	}
	check(told, "object_error_told", "no RW_HAPPENING_OBJECT_ERROR for the QP");
	CHECK_OK("machine_gate", rw_machine_gate(m, dev, 1, &g));
	rw_gate_free(g);
	rw_machine_free(m);
}

static void set_available(void *user, uint32_t device, uint32_t port, bool available)
{
	(void)user, (void)device, (void)port, (void)available;
}

static void reseed(void *user, uint32_t device, uint32_t port, uint64_t rate_mbps)
{
	(void)user, (void)device, (void)port, (void)rate_mbps;
}

/* The monitor over the simulator, each handle destroyed as in 0.1.0. */
static void destroys(void)
{
	rw_sim *sim = NULL;
	rw_monitor *mon = NULL;
	rw_selector sel = { NULL, set_available, reseed };
	char *json = NULL;
	uint32_t dev = 0;
	CHECK_OK("sim_new", rw_sim_new(&sim));
	CHECK_OK("sim_add_device", rw_sim_add_device(sim, "mlx5_0", 1, &dev));
	CHECK_OK("monitor_start_sim", rw_monitor_start_sim(NULL, &sel, sim, &mon));
	CHECK_OK("snapshot_json", rw_monitor_snapshot_json(mon, &json));
	check(json != NULL && strstr(json, "mlx5_0") != NULL, "snapshot_names_the_device", "%s",
	      json ? json : "(null)");
	rw_string_free(json);
	CHECK_OK("monitor_free", rw_monitor_free(mon));
	rw_sim_free(sim);
}

int main(void)
{
	object_error();
	destroys();
	return check_done();
}
