/*
 * railwatch_verbs.h: libibverbs glue for an engine that keeps its own loop
 * (embedding 1), all inline: the library itself needs no libibverbs for
 * it, and railwatch.h needs no <infiniband/verbs.h>. Include this instead
 * of railwatch.h where the engine calls libibverbs (it includes both), and
 * link -libverbs.
 *
 *   rw_verbs_event_input      a struct ibv_async_event as the machine's
 *                             input: no engine decodes the union by hand.
 *   rw_verbs_get_event        rw_machine_drain's reader over a context:
 *                             get, convert, acknowledge.
 *   rw_verbs_reader,          the same, with the engine's hook run on each
 *   rw_verbs_read_event       event before it is acknowledged.
 *   rw_verbs_make_nonblocking the async fd must be O_NONBLOCK before any
 *                             drain, or its last read (the one that finds
 *                             the queue empty) blocks for ever.
 *   rw_verbs_answer           every port query (QUERY_PORT, READ_LINK,
 *                             READ_ADDRESS, READ_COUNTERS) and REVALIDATE
 *                             (a query of the first port, answered as
 *                             rw_machine_handle_reopen) answered over the
 *                             engine's context, by the library
 *                             (rw_machine_answer_verbs).
 *
 * Clean under -std=c11 -Wpedantic, and in C++ under -Wold-style-cast
 * -Wconversion. Hand-written (cbindgen makes railwatch.h).
 */
#ifndef RAILWATCH_VERBS_H
#define RAILWATCH_VERBS_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "railwatch.h"

/* A pointer's bits as the machine's element (an opaque key). */
#ifdef __cplusplus
#define RW_PTR_BITS_(p) RW_CAST_(uint64_t, reinterpret_cast<uintptr_t>(p))
#else
#define RW_PTR_BITS_(p) ((uint64_t)(uintptr_t)(p))
#endif

/**
 * The machine's input for one event read with ibv_get_async_event, for
 * rw_machine_handle_event or a rw_machine_drain reader: `*code` is its
 * event_type, `*element` the member of the union the event fills: the
 * port number for port events (PORT_ACTIVE, PORT_ERR, LID_CHANGE,
 * PKEY_CHANGE, SM_CHANGE, CLIENT_REREGISTER, GID_CHANGE), the object's
 * address for CQ, QP, SRQ and WQ events, and 0 for the rest
 * (DEVICE_FATAL, and codes newer than the verbs.h this was built with,
 * whose union means nothing here). Read it before ibv_ack_async_event.
 */
static inline void rw_verbs_event_input(const struct ibv_async_event *ev, uint32_t *code, uint64_t *element)
{
	switch (ev->event_type) {
	case IBV_EVENT_CQ_ERR:
		*element = RW_PTR_BITS_(ev->element.cq);
		break;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		*element = RW_PTR_BITS_(ev->element.qp);
		break;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		*element = RW_PTR_BITS_(ev->element.srq);
		break;
	case IBV_EVENT_WQ_FATAL:
		*element = RW_PTR_BITS_(ev->element.wq);
		break;
	case IBV_EVENT_PORT_ACTIVE:
	case IBV_EVENT_PORT_ERR:
	case IBV_EVENT_LID_CHANGE:
	case IBV_EVENT_PKEY_CHANGE:
	case IBV_EVENT_SM_CHANGE:
	case IBV_EVENT_CLIENT_REREGISTER:
	case IBV_EVENT_GID_CHANGE:
		*element = ev->element.port_num > 0 ? RW_CAST_(uint64_t, ev->element.port_num) : 0;
		break;
	case IBV_EVENT_DEVICE_FATAL:
	default:
		*element = 0;
		break;
	}
	*code = RW_CAST_(uint32_t, ev->event_type);
}

/**
 * A reader for rw_machine_drain over the libibverbs context `context`
 * (a struct ibv_context *): reads one event, converts it with
 * rw_verbs_event_input and acknowledges it before returning, so the
 * machine never sees an unacknowledged event. Returns 0, or the errno of
 * ibv_get_async_event: EAGAIN when the queue is empty (the fd must be
 * O_NONBLOCK: rw_verbs_make_nonblocking).
 */
static inline int32_t rw_verbs_get_event(void *context, uint32_t *code, uint64_t *element)
{
	struct ibv_async_event ev;

	if (ibv_get_async_event(RW_CAST_(struct ibv_context *, context), &ev) != 0)
		return errno != 0 ? errno : EIO;
	rw_verbs_event_input(&ev, code, element);
	ibv_ack_async_event(&ev);
	return 0;
}

/**
 * rw_verbs_read_event's state: the context, and a hook the engine runs on
 * each event between reading and acknowledging it (NULL: none), for work
 * that must happen before the ack (removing a failed QP's endpoint before
 * the QP may be destroyed). The hook runs inside rw_machine_drain: it must
 * not call the machine (refused with RW_ERR_STATE); the machine sees the
 * event after the ack.
 */
typedef struct rw_verbs_reader {
	struct ibv_context *context;
	void (*before_ack)(void *user, const struct ibv_async_event *event);
	void *user;
} rw_verbs_reader;

/** rw_verbs_get_event with a hook: `reader` is a rw_verbs_reader *. */
static inline int32_t rw_verbs_read_event(void *reader, uint32_t *code, uint64_t *element)
{
	const rw_verbs_reader *r = RW_CAST_(const rw_verbs_reader *, reader);
	struct ibv_async_event ev;

	if (ibv_get_async_event(r->context, &ev) != 0)
		return errno != 0 ? errno : EIO;
	rw_verbs_event_input(&ev, code, element);
	if (r->before_ack)
		r->before_ack(r->user, &ev);
	ibv_ack_async_event(&ev);
	return 0;
}

/** Makes the context's async fd non-blocking (do it right after
 *  ibv_open_device, before the fd goes into epoll): 0, or the errno. */
static inline int32_t rw_verbs_make_nonblocking(struct ibv_context *context)
{
	int flags = fcntl(context->async_fd, F_GETFL);

	if (flags < 0 || fcntl(context->async_fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return errno;
	return 0;
}

/**
 * Answers a port query of the machine's (RW_ACTION_QUERY_PORT,
 * RW_ACTION_READ_LINK, RW_ACTION_READ_ADDRESS, RW_ACTION_READ_COUNTERS)
 * or an RW_ACTION_REVALIDATE (a query of the device's first port, handed
 * to the machine as rw_machine_handle_reopen would be) over `context`, the
 * action's device: rw_machine_answer_verbs, typed.
 */
static inline rw_status rw_verbs_answer(rw_machine *machine, struct ibv_context *context, const rw_action *action,
					uint64_t now_ms)
{
	return rw_machine_answer_verbs(machine, action, context, now_ms);
}

#endif /* RAILWATCH_VERBS_H */
