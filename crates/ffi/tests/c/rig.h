/*
 * rig.h: a host the test controls around one rw_machine, for the C tests
 * of embedding 1: it answers the machine's questions from a table (port
 * states, links, addresses, flap counters, opens) and records every action
 * and notification it carried out, so a test asserts on what the machine
 * asked for. Header-only, after check.h and railwatch.h.
 */
#ifndef RAILWATCH_RIG_H
#define RAILWATCH_RIG_H

#include <errno.h>

#define RIG_DEVICES 4
#define RIG_PORTS 4
#define RIG_RECORD 1024

struct rig_port {
	uint32_t state;         /* what a port query reads (ibv_port_state) */
	int32_t address_error;  /* READ_ADDRESS: this errno, or 0 with `gid` */
	rw_gid gid;             /* the one GID entry when address_error is 0 */
	int32_t counters_error; /* READ_COUNTERS: this errno, or 0 with link_downed */
	uint64_t link_downed;
};

struct rig {
	rw_machine *m;
	uint64_t now;
	struct rig_port ports[RIG_DEVICES][RIG_PORTS];
	int32_t open_error[RIG_DEVICES]; /* OPEN: this errno, or 0 and ports 1..nports */
	uint32_t nports[RIG_DEVICES];
	rw_action actions[RIG_RECORD]; /* everything carried out, in order */
	size_t nactions;
};

/* A rig over a new machine with config `c` (NULL: the defaults): every
 * port ACTIVE, addresses unsupported, counters at 0, opens answered. */
static inline bool rig_init(struct rig *r, const rw_config *c)
{
	memset(r, 0, sizeof(*r));
	for (int d = 0; d < RIG_DEVICES; d++) {
		r->nports[d] = 1;
		for (int p = 0; p < RIG_PORTS; p++) {
			r->ports[d][p].state = 4;
			r->ports[d][p].address_error = 95; /* EOPNOTSUPP */
		}
	}
	return rw_machine_new(c, &r->m) == RW_OK;
}

static inline void rig_answer(struct rig *r, const rw_action *a)
{
	struct rig_port *p = a->device < RIG_DEVICES && a->port < RIG_PORTS ? &r->ports[a->device][a->port] : NULL;

	switch (a->kind) {
	case RW_ACTION_OPEN:
		if (a->device >= RIG_DEVICES || r->open_error[a->device] != 0) {
			rw_machine_handle_opened(r->m, a->device, NULL, 0,
						 a->device < RIG_DEVICES ? r->open_error[a->device] : ENODEV, r->now);
		} else {
			uint8_t ports[RIG_PORTS];

			for (uint32_t i = 0; i < r->nports[a->device]; i++)
				ports[i] = (uint8_t)(i + 1);
			rw_machine_handle_opened(r->m, a->device, ports, r->nports[a->device], 0, r->now);
		}
		break;
	case RW_ACTION_REOPEN:
	case RW_ACTION_REVALIDATE: /* an engine's own device: it answers */
		rw_machine_handle_reopen(r->m, a->device, 0, r->now);
		break;
	case RW_ACTION_QUERY_PORT:
		if (p)
			rw_machine_handle_port_state(r->m, a->device, a->port, 0, p->state, r->now);
		break;
	case RW_ACTION_READ_LINK:
		rw_machine_handle_link(r->m, a->device, a->port, 0, 128, 2, 0, r->now); /* NDR 4x */
		break;
	case RW_ACTION_READ_ADDRESS:
		if (p && p->address_error == 0) {
			rw_port_address addr;

			memset(&addr, 0, sizeof(addr));
			addr.link_layer = 2;
			addr.gids = &p->gid;
			addr.ngids = 1;
			rw_machine_handle_address(r->m, a->device, a->port, 0, &addr, r->now);
		} else if (p) {
			rw_machine_handle_address(r->m, a->device, a->port, p->address_error, NULL, r->now);
		}
		break;
	case RW_ACTION_READ_COUNTERS:
		if (p)
			rw_machine_handle_counters(r->m, a->device, a->port, p->counters_error, p->link_downed,
						   RW_COUNTER_NONE, RW_COUNTER_NONE, r->now);
		break;
	default:
		break;
	}
}

/* Carries out every action, answering each at once. */
static inline void rig_run(struct rig *r)
{
	rw_action a;

	for (int guard = 0; guard < 100000; guard++) {
		if (rw_machine_poll_action(r->m, &a) != RW_OK || a.kind == RW_ACTION_NONE)
			return;
		if (r->nactions < RIG_RECORD)
			r->actions[r->nactions++] = a;
		rig_answer(r, &a);
	}
	check(false, "rig_run_ends", "the machine never ran out of actions");
}

/* Lets virtual time pass up to `t`, with every deadline before it. */
static inline void rig_advance(struct rig *r, uint64_t t)
{
	uint64_t d = RW_NO_DEADLINE;

	for (int guard = 0; guard < 100000; guard++) {
		if (rw_machine_poll_timeout(r->m, &d) != RW_OK || d > t)
			break;
		if (d > r->now)
			r->now = d;
		rw_machine_handle_timeout(r->m, r->now);
		rig_run(r);
	}
	if (r->now < t)
		r->now = t;
}

/* How many actions of `kind` (and, unless ~0u, device and port) were
 * carried out since `from`; the last one into *last (may be NULL). */
static inline unsigned rig_count(const struct rig *r, size_t from, uint32_t kind, uint32_t device, uint32_t port,
				 rw_action *last)
{
	unsigned n = 0;

	for (size_t i = from; i < r->nactions; i++) {
		const rw_action *a = &r->actions[i];
		uint32_t d = a->kind == RW_ACTION_NOTIFY ? a->notification.device
			   : a->kind == RW_ACTION_LOG	 ? a->log.device
							 : a->device;
		uint32_t p = a->kind == RW_ACTION_NOTIFY ? a->notification.port : a->kind == RW_ACTION_LOG ? a->log.port : a->port;

		if (a->kind != kind || (device != ~0u && d != device) || (port != ~0u && p != port))
			continue;
		n++;
		if (last)
			*last = *a;
	}
	return n;
}

/* The same for notifications of one kind (rw_happening). */
static inline unsigned rig_notified(const struct rig *r, size_t from, uint32_t happening, rw_notification *last)
{
	unsigned n = 0;

	for (size_t i = from; i < r->nactions; i++)
		if (r->actions[i].kind == RW_ACTION_NOTIFY && r->actions[i].notification.kind == happening) {
			n++;
			if (last)
				*last = r->actions[i].notification;
		}
	return n;
}

/* The same for log requests of one kind (rw_log_kind). */
static inline unsigned rig_logged(const struct rig *r, size_t from, uint32_t log_kind, rw_log *last)
{
	unsigned n = 0;

	for (size_t i = from; i < r->nactions; i++)
		if (r->actions[i].kind == RW_ACTION_LOG && r->actions[i].log.kind == log_kind) {
			n++;
			if (last)
				*last = r->actions[i].log;
		}
	return n;
}

/* Rail (device, port)'s word through a gate. */
static inline uint64_t rig_word(const struct rig *r, uint32_t device, uint32_t port)
{
	rw_gate *g = NULL;
	uint64_t w = UINT64_MAX;

	if (rw_machine_gate(r->m, device, port, &g) == RW_OK)
		w = rw_gate_load(rw_gate_word(g));
	rw_gate_free(&g);
	return w;
}

#endif /* RAILWATCH_RIG_H */
