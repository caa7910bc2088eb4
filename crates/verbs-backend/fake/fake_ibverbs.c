/*
 * fake_ibverbs.c: a stand-in libibverbs.so.1 for railwatch's tests.
 *
 * Built by build.rs, loaded by re-executing a test binary with
 * LD_LIBRARY_PATH pointing at its directory. It exports the ibv_* entry
 * points railwatch-verbs-backend calls, with the same prototypes and symbol
 * versions (IBVERBS_1.1) as rdma-core, and behaves like rdma-core where it
 * matters for the monitor:
 *
 * - ibv_open_device() returns the ibv_context embedded at the end of a
 *   struct verbs_context marked extended exactly as libibverbs marks it
 *   (abi_compat = UINTPTR_MAX, sz = sizeof(struct verbs_context), query_port
 *   set), so the verbs.h inline ibv_query_port takes the branch it takes on
 *   hardware.
 * - the async fd is the read end of a pipe, blocking until the caller sets
 *   O_NONBLOCK; an event is one 16-byte record (element, event_type,
 *   reserved) as struct ib_uverbs_async_event_desc, read with one read().
 *   Reading an empty queue on a blocking fd aborts the process instead of
 *   hanging the test.
 * - ibv_get_async_event() fills the element as rdma-core does (cq/qp/srq/wq
 *   pointer for object events, port_num for everything else).
 * - the exported ibv_query_port() is the old compatibility entry: it only
 *   fills the fields of struct _compat_ibv_port_attr (up to `flags`), as
 *   rdma-core's does.
 *
 * Tests drive it through the fake_* control functions (looked up with
 * dlsym, so the test binary never links them) or, for a process a test
 * cannot call into, through environment variables read when the library
 * loads:
 *
 *   FAKE_IBVERBS_DEVICES  "mlx5_0:4/128/2,1/64/16;mlx5_1:4/32/2" : devices
 *                         and their ports as state/active_speed/active_width
 *                         codes (an optional 4th field is active_speed_ex)
 *   FAKE_IBVERBS_EVENTS   "mlx5_0:10@1,9@1" : events (code@element) queued
 *                         on the device's async fd each time it is opened
 *   FAKE_IBVERBS_LIST_ERRNO  ibv_get_device_list() returns NULL with this
 *                         errno (38 = ENOSYS: no kernel RDMA support)
 *   FAKE_IBVERBS_OPEN_ERRNO  "mlx5_1:13" : ibv_open_device() of that device
 *                         fails with this errno (13 = EACCES)
 *   FAKE_IBVERBS_SYSFS    a directory standing in for /sys/class/infiniband:
 *                         each device's ibdev_path is DIR/NAME (a test puts
 *                         the `device` link of a PCI function there)
 *   FAKE_IBVERBS_CONTROL  a FIFO's path: a thread reads commands from it,
 *                         one per line, so a test can drive a process it
 *                         cannot call into while it runs (the events of
 *                         one write are queued together):
 *                           port DEV PORT STATE     (fake_set_port_state)
 *                           event DEV CODE ELEMENT  (fake_push_event)
 *                           link DEV PORT SPEED WIDTH (fake_set_port, state kept)
 *                           gid DEV PORT INDEX LAST (fake_set_gid: fe80::LAST)
 *
 * Every entry point and control function holds one recursive lock, so a
 * test thread may push events while a monitor thread reads them.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

/* verbs.h turns these into inline wrappers; the library exports the real
 * entry points. */
#undef ibv_get_device_list
#undef ibv_query_port

#define FAKE_MAX_DEVICES 8
#define FAKE_MAX_PORTS 4
#define FAKE_LOG_LEN 1024

/* sizeof(struct _compat_ibv_port_attr): struct ibv_port_attr up to and
 * including `flags`, which is where port_cap_flags2 starts. */
#define FAKE_COMPAT_PORT_ATTR_SIZE offsetof(struct ibv_port_attr, port_cap_flags2)

/* struct ib_uverbs_async_event_desc, what the kernel writes to the fd. */
struct fake_wire_event {
	uint64_t element;
	uint32_t event_type;
	uint32_t reserved;
};

#define FAKE_GIDS 4

struct fake_port {
	uint8_t gids[FAKE_GIDS][16];	/* all zero: an empty slot */
	uint32_t state;
	uint8_t speed;
	uint8_t width;
	uint32_t speed_ex;
	uint64_t effective;	/* ibv_query_port_speed(), 100 Mb/s units */
	int effective_errno;
};

struct fake_ctx;

struct fake_dev {
	struct ibv_device dev;
	int nports;
	struct fake_port ports[FAKE_MAX_PORTS + 1];	/* 1-based */
	int open_errno;
	int query_errno;
	int get_errno;		/* injected ibv_get_async_event failure */
	long get_after;		/* calls that pass before it fires */
	long get_count;		/* calls that fail; -1 = every one from then on */
	char events[256];	/* FAKE_IBVERBS_EVENTS for this device */
	int unlisted;		/* left the device list (hot-unplug) */
	uint64_t node_guid;	/* ibv_query_device()'s, host order */
	struct fake_ctx *ctx;
};

struct fake_ctx {
	struct verbs_context vctx;	/* ends with the struct ibv_context */
	struct fake_dev *dev;
	int wfd;			/* write end of the async pipe */
};

struct fake_logged {
	uint32_t code;
	uint64_t element;
};

static struct fake_dev devs[FAKE_MAX_DEVICES];
static int ndevs;
static int list_errno;

static struct {
	long lists, lists_freed, opens, closes;
	long gets, gets_ok, acks;
	long ext_queries, compat_queries, speed_queries, device_queries;
} counters;

static struct fake_logged got_log[FAKE_LOG_LEN], ack_log[FAKE_LOG_LEN];

static pthread_mutex_t fake_mutex = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

static void fake_unlock(int *guard)
{
	(void)guard;
	pthread_mutex_unlock(&fake_mutex);
}

/* Holds the lock until the enclosing function returns (errno is kept:
 * pthread_mutex_unlock does not set it). */
#define FAKE_LOCKED \
	int fake_guard __attribute__((cleanup(fake_unlock), unused)) = pthread_mutex_lock(&fake_mutex)

static void fake_default_port(struct fake_port *p)
{
	memset(p, 0, sizeof(*p));
	p->state = IBV_PORT_ACTIVE;
	p->speed = 128;	/* NDR */
	p->width = 2;	/* 4x */
	p->speed_ex = 128;
}

static struct fake_dev *fake_dev_at(int i)
{
	return (i >= 0 && i < ndevs) ? &devs[i] : NULL;
}

static struct fake_port *fake_port_at(int dev, int port)
{
	struct fake_dev *d = fake_dev_at(dev);

	if (!d || port < 1 || port > d->nports)
		return NULL;
	return &d->ports[port];
}

/* ibdev_path as rdma-core sets it: the device's sysfs entry (under
 * FAKE_IBVERBS_SYSFS when set). */
static void fake_default_ibdev_path(struct fake_dev *d)
{
	const char *root = getenv("FAKE_IBVERBS_SYSFS");

	snprintf(d->dev.ibdev_path, sizeof(d->dev.ibdev_path), "%s/%s",
		 root && *root ? root : "/sys/class/infiniband", d->dev.name);
}

static void fake_init_dev(int i, const char *name)
{
	struct fake_dev *d = &devs[i];
	int p;

	memset(d, 0, sizeof(*d));
	d->dev.node_type = IBV_NODE_CA;
	d->dev.transport_type = IBV_TRANSPORT_IB;
	snprintf(d->dev.name, sizeof(d->dev.name), "%s", name);
	snprintf(d->dev.dev_name, sizeof(d->dev.dev_name), "uverbs%d", i);
	fake_default_ibdev_path(d);
	/* Mellanox's OUI, then the device's index. */
	d->node_guid = 0x0002c90300f10000ULL | (uint64_t)i;
	d->nports = 1;
	for (p = 1; p <= FAKE_MAX_PORTS; p++) {
		fake_default_port(&d->ports[p]);
		/* GID 0: a link-local address, fe80::<device>:<port> */
		d->ports[p].gids[0][0] = 0xfe;
		d->ports[p].gids[0][1] = 0x80;
		d->ports[p].gids[0][13] = (uint8_t)i;
		d->ports[p].gids[0][15] = (uint8_t)p;
	}
}

static int fake_is_object_event(uint32_t code)
{
	switch (code) {
	case IBV_EVENT_CQ_ERR:
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
	case IBV_EVENT_WQ_FATAL:
		return 1;
	default:
		return 0;
	}
}

/* ---- control API (looked up with dlsym by the tests) ---------------- */

/* n devices named mlx5_0.., each with one ACTIVE NDR 4x port. Any open
 * context is forgotten: configure before opening. */
int fake_set_devices(int n)
{
	FAKE_LOCKED;
	char name[IBV_SYSFS_NAME_MAX];
	int i;

	if (n < 0 || n > FAKE_MAX_DEVICES)
		return -1;
	ndevs = n;
	for (i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "mlx5_%d", i);
		fake_init_dev(i, name);
	}
	return 0;
}

int fake_set_device_name(int dev, const char *name)
{
	FAKE_LOCKED;
	struct fake_dev *d = fake_dev_at(dev);

	if (!d)
		return -1;
	snprintf(d->dev.name, sizeof(d->dev.name), "%s", name);
	fake_default_ibdev_path(d);
	return 0;
}

/* Device dev's ibdev_path (its sysfs entry) from now on. */
int fake_set_ibdev_path(int dev, const char *path)
{
	FAKE_LOCKED;
	struct fake_dev *d = fake_dev_at(dev);

	if (!d)
		return -1;
	snprintf(d->dev.ibdev_path, sizeof(d->dev.ibdev_path), "%s", path);
	return 0;
}

/* The node GUID ibv_query_device() reports from the next open on (host
 * order; 0: none). */
int fake_set_node_guid(int dev, uint64_t guid)
{
	FAKE_LOCKED;
	struct fake_dev *d = fake_dev_at(dev);

	if (!d)
		return -1;
	d->node_guid = guid;
	return 0;
}

/* ibv_get_device_list() returns NULL with this errno (0: normal). */
int fake_set_list_errno(int err)
{
	FAKE_LOCKED;
	list_errno = err;
	return 0;
}

int fake_set_ports(int dev, int nports)
{
	FAKE_LOCKED;
	struct fake_dev *d = fake_dev_at(dev);

	if (!d || nports < 0 || nports > FAKE_MAX_PORTS)
		return -1;
	d->nports = nports;
	return 0;
}

/* What a port query returns from now on. */
int fake_set_port(int dev, int port, uint32_t state, uint32_t speed, uint32_t width, uint32_t speed_ex)
{
	FAKE_LOCKED;
	struct fake_port *p = fake_port_at(dev, port);

	if (!p || speed > 255 || width > 255)
		return -1;
	p->state = state;
	p->speed = (uint8_t)speed;
	p->width = (uint8_t)width;
	p->speed_ex = speed_ex;
	return 0;
}

int fake_set_port_state(int dev, int port, uint32_t state)
{
	FAKE_LOCKED;
	struct fake_port *p = fake_port_at(dev, port);

	if (!p)
		return -1;
	p->state = state;
	return 0;
}

/* What ibv_query_port_speed() returns (only in the port-speed build). */
int fake_set_effective_speed(int dev, int port, uint64_t speed, int err)
{
	FAKE_LOCKED;
	struct fake_port *p = fake_port_at(dev, port);

	if (!p)
		return -1;
	p->effective = speed;
	p->effective_errno = err;
	return 0;
}

/* Port queries (both entries and ibv_query_device) return this errno. */
int fake_set_query_errno(int dev, int err)
{
	FAKE_LOCKED;
	struct fake_dev *d = fake_dev_at(dev);

	if (!d)
		return -1;
	d->query_errno = err;
	return 0;
}

/* Takes device `dev` out of ibv_get_device_list() (listed = 0), as a
 * removal the driver cannot announce on the async fd does, or puts it back.
 * Its open contexts keep working. */
int fake_set_listed(int dev, int listed)
{
	FAKE_LOCKED;
	if (dev < 0 || dev >= ndevs)
		return -1;
	devs[dev].unlisted = !listed;
	return 0;
}

/* Sets GID table entry `index` of a port (16 bytes; all zero empties it). */
int fake_set_gid(int dev, int port, int index, const uint8_t *raw)
{
	FAKE_LOCKED;
	if (dev < 0 || dev >= FAKE_MAX_DEVICES || port < 1 || port > FAKE_MAX_PORTS || index < 0 || index >= FAKE_GIDS)
		return -1;
	memcpy(devs[dev].ports[port].gids[index], raw, 16);
	return 0;
}

int fake_set_open_errno(int dev, int err)
{
	FAKE_LOCKED;
	struct fake_dev *d = fake_dev_at(dev);

	if (!d)
		return -1;
	d->open_errno = err;
	return 0;
}

/* After `after` more calls, the next `count` calls of ibv_get_async_event
 * (-1: all of them) fail with `err` without reading anything. */
int fake_set_get_fault(int dev, int err, long after, long count)
{
	FAKE_LOCKED;
	struct fake_dev *d = fake_dev_at(dev);

	if (!d)
		return -1;
	d->get_errno = err;
	d->get_after = after;
	d->get_count = count;
	return 0;
}

/* Queues one event on the open device's async fd. */
int fake_push_event(int dev, uint32_t code, uint64_t element)
{
	FAKE_LOCKED;
	struct fake_dev *d = fake_dev_at(dev);
	struct fake_wire_event ev = { .element = element, .event_type = code };

	if (!d || !d->ctx)
		return -1;
	return write(d->ctx->wfd, &ev, sizeof(ev)) == (ssize_t)sizeof(ev) ? 0 : -1;
}

/* Closes the write end: reads then see end-of-file, as a dead queue. */
int fake_close_event_queue(int dev)
{
	FAKE_LOCKED;
	struct fake_dev *d = fake_dev_at(dev);

	if (!d || !d->ctx || d->ctx->wfd < 0)
		return -1;
	close(d->ctx->wfd);
	d->ctx->wfd = -1;
	return 0;
}

/* A counter by name; -1 for an unknown name. */
long long fake_counter(const char *name)
{
	FAKE_LOCKED;
	static const struct {
		const char *name;
		long *value;
	} table[] = {
		{ "lists", &counters.lists },
		{ "lists_freed", &counters.lists_freed },
		{ "opens", &counters.opens },
		{ "closes", &counters.closes },
		{ "gets", &counters.gets },
		{ "gets_ok", &counters.gets_ok },
		{ "acks", &counters.acks },
		{ "ext_queries", &counters.ext_queries },
		{ "compat_queries", &counters.compat_queries },
		{ "speed_queries", &counters.speed_queries },
		{ "device_queries", &counters.device_queries },
	};
	size_t i;

	for (i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (strcmp(table[i].name, name) == 0)
			return *table[i].value;
	return -1;
}

/* The i-th event handed out (which = 0) or acknowledged (which = 1). */
int fake_logged_event(int which, long i, uint32_t *code, uint64_t *element)
{
	FAKE_LOCKED;
	long n = which ? counters.acks : counters.gets_ok;
	struct fake_logged *log = which ? ack_log : got_log;

	if (i < 0 || i >= n || i >= FAKE_LOG_LEN)
		return -1;
	*code = log[i].code;
	*element = log[i].element;
	return 0;
}

/* ---- environment configuration --------------------------------------- */

static int fake_find_dev(const char *name)
{
	int i;

	for (i = 0; i < ndevs; i++)
		if (strcmp(devs[i].dev.name, name) == 0)
			return i;
	return -1;
}

/* "name:state/speed/width[/speed_ex],...;name:..." */
static void fake_parse_devices(const char *spec)
{
	char *copy = strdup(spec), *save_dev = NULL, *dev_spec;

	if (!copy)
		return;
	for (dev_spec = strtok_r(copy, ";", &save_dev); dev_spec && ndevs < FAKE_MAX_DEVICES;
	     dev_spec = strtok_r(NULL, ";", &save_dev)) {
		char *colon = strchr(dev_spec, ':'), *save_port = NULL, *port_spec;
		struct fake_dev *d;

		if (colon)
			*colon = '\0';
		fake_init_dev(ndevs, dev_spec);
		d = &devs[ndevs++];
		if (!colon)
			continue;
		d->nports = 0;
		for (port_spec = strtok_r(colon + 1, ",", &save_port); port_spec && d->nports < FAKE_MAX_PORTS;
		     port_spec = strtok_r(NULL, ",", &save_port)) {
			unsigned long v[4] = { IBV_PORT_ACTIVE, 128, 2, 0 };
			int nv = 0;
			char *end = port_spec;

			while (nv < 4 && *end) {
				v[nv++] = strtoul(end, &end, 0);
				if (*end == '/')
					end++;
			}
			d->nports++;
			d->ports[d->nports].state = (uint32_t)v[0];
			d->ports[d->nports].speed = (uint8_t)v[1];
			d->ports[d->nports].width = (uint8_t)v[2];
			d->ports[d->nports].speed_ex = nv >= 4 ? (uint32_t)v[3] : (uint32_t)v[1];
		}
	}
	free(copy);
}

/* "name:code@element,...;name:..." kept per device, queued at open. */
static void fake_parse_events(const char *spec)
{
	char *copy = strdup(spec), *save = NULL, *dev_spec;

	if (!copy)
		return;
	for (dev_spec = strtok_r(copy, ";", &save); dev_spec; dev_spec = strtok_r(NULL, ";", &save)) {
		char *colon = strchr(dev_spec, ':');
		int i;

		if (!colon)
			continue;
		*colon = '\0';
		i = fake_find_dev(dev_spec);
		if (i >= 0)
			snprintf(devs[i].events, sizeof(devs[i].events), "%s", colon + 1);
	}
	free(copy);
}

/* "name:errno;name:errno" */
static void fake_parse_open_errnos(const char *spec)
{
	char *copy = strdup(spec), *save = NULL, *dev_spec;

	if (!copy)
		return;
	for (dev_spec = strtok_r(copy, ";", &save); dev_spec; dev_spec = strtok_r(NULL, ";", &save)) {
		char *colon = strchr(dev_spec, ':');
		int i;

		if (!colon)
			continue;
		*colon = '\0';
		i = fake_find_dev(dev_spec);
		if (i >= 0)
			devs[i].open_errno = atoi(colon + 1);
	}
	free(copy);
}

static void fake_queue_env_events(struct fake_dev *d, int index)
{
	char copy[sizeof(d->events)], *save = NULL, *ev;

	memcpy(copy, d->events, sizeof(copy));
	for (ev = strtok_r(copy, ",", &save); ev; ev = strtok_r(NULL, ",", &save)) {
		char *end;
		unsigned long code = strtoul(ev, &end, 0);
		unsigned long long element = *end == '@' ? strtoull(end + 1, NULL, 0) : 0;

		fake_push_event(index, (uint32_t)code, (uint64_t)element);
	}
}

/* A port's speed and width, its state kept (the control FIFO's `link`). */
static void fake_set_link(int dev, int port, unsigned speed, unsigned width)
{
	if (dev < 0 || dev >= FAKE_MAX_DEVICES || port < 1 || port > FAKE_MAX_PORTS)
		return;
	fake_set_port(dev, port, devs[dev].ports[port].state, speed, width, speed);
}

/* GID `index` of a port set to fe80::LAST (the control FIFO's `gid`). */
static void fake_set_gid_last(int dev, int port, int index, unsigned last)
{
	uint8_t raw[16] = { 0xfe, 0x80 };

	raw[12] = (uint8_t)(last >> 24);
	raw[13] = (uint8_t)(last >> 16);
	raw[14] = (uint8_t)(last >> 8);
	raw[15] = (uint8_t)last;
	fake_set_gid(dev, port, index, raw);
}

/* Events of one control write waiting to reach a device's async fd. A run
 * of `event` lines for one device goes out in one write(2) (at most
 * PIPE_BUF bytes, so atomic): a monitor that wakes on the first event of a
 * burst finds the whole burst queued, as a kernel's queue would have it. */
struct fake_pending {
	int dev;
	int count;
	struct fake_wire_event events[64];
};

static void fake_flush_events(struct fake_pending *pending)
{
	FAKE_LOCKED;
	struct fake_dev *d = fake_dev_at(pending->dev);
	size_t len = (size_t)pending->count * sizeof(pending->events[0]);

	if (pending->count && d && d->ctx && write(d->ctx->wfd, pending->events, len) != (ssize_t)len)
		fprintf(stderr, "fake libibverbs: control: %d events of device %d lost\n", pending->count, pending->dev);
	pending->count = 0;
}

static void fake_queue_event(struct fake_pending *pending, int dev, unsigned code, unsigned long long element)
{
	if (pending->count && (pending->dev != dev || pending->count == 64))
		fake_flush_events(pending);
	pending->dev = dev;
	pending->events[pending->count++] = (struct fake_wire_event){ .element = element, .event_type = code };
}

/* One command line; anything but an event first sends the events before
 * it, so the order of the lines is the order a monitor sees. */
static void fake_apply_line(const char *line, struct fake_pending *pending)
{
	int dev = 0, port = 0, index = 0;
	unsigned code = 0, speed = 0, width = 0;
	unsigned long long element = 0;

	if (sscanf(line, "event %d %u %llu", &dev, &code, &element) == 3) {
		fake_queue_event(pending, dev, code, element);
		return;
	}
	fake_flush_events(pending);
	if (sscanf(line, "port %d %d %u", &dev, &port, &code) == 3)
		fake_set_port_state(dev, port, code);
	else if (sscanf(line, "link %d %d %u %u", &dev, &port, &speed, &width) == 4)
		fake_set_link(dev, port, speed, width);
	else if (sscanf(line, "gid %d %d %d %u", &dev, &port, &index, &code) == 4)
		fake_set_gid_last(dev, port, index, code);
	else
		fprintf(stderr, "fake libibverbs: control: cannot read %s\n", line);
}

/* The FAKE_IBVERBS_CONTROL thread: applies the command lines of each read
 * together (a test's one write is one read: at most PIPE_BUF bytes); at
 * end-of-file (the writer closed) it opens the FIFO again. */
static void *fake_control(void *arg)
{
	const char *path = arg;
	char buf[4096 + 1];
	size_t kept = 0;

	for (;;) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t n;

		if (fd < 0)
			return NULL;
		while ((n = read(fd, buf + kept, sizeof(buf) - 1 - kept)) > 0 || (n < 0 && errno == EINTR)) {
			struct fake_pending pending = { .count = 0 };
			char *line = buf, *nl;

			kept += n > 0 ? (size_t)n : 0;
			buf[kept] = '\0';
			while ((nl = strchr(line, '\n'))) {
				*nl = '\0';
				fake_apply_line(line, &pending);
				line = nl + 1;
			}
			fake_flush_events(&pending);
			kept = strlen(line);
			if (kept == sizeof(buf) - 1)
				kept = 0; /* a line longer than the buffer: dropped */
			memmove(buf, line, kept);
		}
		close(fd);
	}
}

__attribute__((constructor)) static void fake_init(void)
{
	const char *v;

	v = getenv("FAKE_IBVERBS_DEVICES");
	if (v)
		fake_parse_devices(v);
	v = getenv("FAKE_IBVERBS_EVENTS");
	if (v)
		fake_parse_events(v);
	v = getenv("FAKE_IBVERBS_LIST_ERRNO");
	if (v)
		list_errno = atoi(v);
	v = getenv("FAKE_IBVERBS_OPEN_ERRNO");
	if (v)
		fake_parse_open_errnos(v);
	v = getenv("FAKE_IBVERBS_CONTROL");
	if (v && *v) {
		pthread_t t;
		static char path[4096];
		snprintf(path, sizeof(path), "%s", v);
		if (pthread_create(&t, NULL, fake_control, path) == 0)
			pthread_detach(t);
	}
}

/* ---- libibverbs entry points ---------------------------------------- */

static struct fake_ctx *fake_ctx_of(struct ibv_context *context)
{
	return (struct fake_ctx *)((char *)context - offsetof(struct fake_ctx, vctx.context));
}

/* What libibverbs installs as verbs_context.query_port: a caller passing a
 * short (old) struct gets only its prefix filled. */
static int fake_lib_query_port(struct ibv_context *context, uint8_t port_num, struct ibv_port_attr *port_attr,
			       size_t port_attr_len)
{
	struct fake_dev *d = fake_ctx_of(context)->dev;
	struct ibv_port_attr attr;
	struct fake_port *p;

	if (d->query_errno)
		return d->query_errno;
	if (port_num < 1 || port_num > d->nports)
		return EINVAL;
	p = &d->ports[port_num];
	memset(&attr, 0, sizeof(attr));
	attr.state = (enum ibv_port_state)p->state;
	attr.max_mtu = IBV_MTU_4096;
	attr.active_mtu = IBV_MTU_4096;
	attr.active_speed = p->speed;
	attr.active_width = p->width;
	attr.phys_state = p->state == IBV_PORT_DOWN ? 3 : 5;	/* disabled / link up */
	attr.link_layer = IBV_LINK_LAYER_INFINIBAND;
	attr.gid_tbl_len = FAKE_GIDS;
	attr.lid = (uint16_t)(port_num + 16 * (d - devs));
#ifdef FAKE_HAVE_ACTIVE_SPEED_EX
	attr.active_speed_ex = p->speed_ex;
#endif
	memset(port_attr, 0, port_attr_len);
	memcpy(port_attr, &attr, port_attr_len < sizeof(attr) ? port_attr_len : sizeof(attr));
	return 0;
}

static int fake_ext_query_port(struct ibv_context *context, uint8_t port_num, struct ibv_port_attr *port_attr,
			       size_t port_attr_len)
{
	FAKE_LOCKED;
	counters.ext_queries++;
	return fake_lib_query_port(context, port_num, port_attr, port_attr_len);
}

struct ibv_device **ibv_get_device_list(int *num_devices)
{
	FAKE_LOCKED;
	struct ibv_device **list;
	int i;

	if (list_errno) {
		errno = list_errno;
		return NULL;
	}
	list = calloc((size_t)ndevs + 1, sizeof(*list));
	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	int n = 0;
	for (i = 0; i < ndevs; i++)
		if (!devs[i].unlisted)
			list[n++] = &devs[i].dev;
	if (num_devices)
		*num_devices = n;
	counters.lists++;
	return list;
}

void ibv_free_device_list(struct ibv_device **list)
{
	FAKE_LOCKED;
	counters.lists_freed++;
	free(list);
}

const char *ibv_get_device_name(struct ibv_device *device)
{
	FAKE_LOCKED;
	return device->name;
}

struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	FAKE_LOCKED;
	struct fake_dev *d = (struct fake_dev *)((char *)device - offsetof(struct fake_dev, dev));
	struct fake_ctx *c;
	int fds[2];

	if (d->open_errno) {
		errno = d->open_errno;
		return NULL;
	}
	if (d->ctx) {
		/* One context per device is all railwatch needs. */
		errno = EBUSY;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	if (pipe2(fds, O_CLOEXEC)) {
		free(c);
		return NULL;
	}
	c->dev = d;
	c->wfd = fds[1];
	c->vctx.sz = sizeof(struct verbs_context);
	c->vctx.query_port = fake_ext_query_port;
	c->vctx.context.device = device;
	c->vctx.context.cmd_fd = -1;
	c->vctx.context.async_fd = fds[0];
	c->vctx.context.num_comp_vectors = 1;
	c->vctx.context.abi_compat = __VERBS_ABI_IS_EXTENDED;
	pthread_mutex_init(&c->vctx.context.mutex, NULL);
	d->ctx = c;
	counters.opens++;
	fake_queue_env_events(d, (int)(d - devs));
	return &c->vctx.context;
}

int ibv_close_device(struct ibv_context *context)
{
	FAKE_LOCKED;
	struct fake_ctx *c = fake_ctx_of(context);

	close(context->async_fd);
	if (c->wfd >= 0)
		close(c->wfd);
	pthread_mutex_destroy(&context->mutex);
	c->dev->ctx = NULL;
	free(c);
	counters.closes++;
	return 0;
}

int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *device_attr)
{
	FAKE_LOCKED;
	struct fake_dev *d = fake_ctx_of(context)->dev;

	counters.device_queries++;
	if (d->query_errno)
		return d->query_errno;
	memset(device_attr, 0, sizeof(*device_attr));
	snprintf(device_attr->fw_ver, sizeof(device_attr->fw_ver), "fake");
	device_attr->phys_port_cnt = (uint8_t)d->nports;
	device_attr->node_guid = htobe64(d->node_guid);
	return 0;
}

/* The compatibility entry: fills struct _compat_ibv_port_attr only. */
int ibv_query_port(struct ibv_context *context, uint8_t port_num, struct _compat_ibv_port_attr *port_attr)
{
	FAKE_LOCKED;
	counters.compat_queries++;
	return fake_lib_query_port(context, port_num, (struct ibv_port_attr *)port_attr,
				   FAKE_COMPAT_PORT_ATTR_SIZE);
}

#ifdef FAKE_WITH_QUERY_PORT_SPEED
int ibv_query_port_speed(struct ibv_context *context, uint32_t port_num, uint64_t *port_speed);

int ibv_query_port_speed(struct ibv_context *context, uint32_t port_num, uint64_t *port_speed)
{
	FAKE_LOCKED;
	struct fake_dev *d = fake_ctx_of(context)->dev;
	struct fake_port *p;

	counters.speed_queries++;
	if (d->query_errno)
		return d->query_errno;
	if (port_num < 1 || port_num > (uint32_t)d->nports)
		return EINVAL;
	p = &d->ports[port_num];
	if (p->effective_errno)
		return p->effective_errno;
	*port_speed = p->effective;
	return 0;
}
#endif

int ibv_query_gid(struct ibv_context *context, uint8_t port_num, int index, union ibv_gid *gid)
{
	FAKE_LOCKED;
	struct fake_dev *d = fake_ctx_of(context)->dev;

	if (d->query_errno) {
		errno = d->query_errno;
		return -1;
	}
	if (port_num < 1 || port_num > d->nports || index < 0 || index >= FAKE_GIDS) {
		errno = EINVAL;
		return -1;
	}
	memcpy(gid->raw, d->ports[port_num].gids[index], 16);
	return 0;
}

int ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event)
{
	FAKE_LOCKED;
	struct fake_dev *d = fake_ctx_of(context)->dev;
	struct fake_wire_event ev;
	ssize_t n;

	counters.gets++;
	if (d->get_errno) {
		if (d->get_after > 0) {
			d->get_after--;
		} else if (d->get_count != 0) {
			if (d->get_count > 0)
				d->get_count--;
			errno = d->get_errno;
			return -1;
		}
	}
	if (!(fcntl(context->async_fd, F_GETFL) & O_NONBLOCK)) {
		struct pollfd pfd = { .fd = context->async_fd, .events = POLLIN };

		/* rdma-core would block forever here: fail the test instead. */
		if (poll(&pfd, 1, 0) == 0) {
			fprintf(stderr, "fake libibverbs: ibv_get_async_event on an empty, blocking async fd "
					"would block forever (O_NONBLOCK not set)\n");
			abort();
		}
	}
	n = read(context->async_fd, &ev, sizeof(ev));
	if (n != (ssize_t)sizeof(ev)) {
		if (n >= 0)
			errno = EIO;
		return -1;
	}
	/* The raw code goes into the enum field unchanged, whatever its value,
	 * exactly as rdma-core does with what the kernel wrote. */
	memcpy(&event->event_type, &ev.event_type, sizeof(ev.event_type));
	if (fake_is_object_event(ev.event_type))
		event->element.qp = (struct ibv_qp *)(uintptr_t)ev.element;
	else
		event->element.port_num = (int)ev.element;
	if (counters.gets_ok < FAKE_LOG_LEN) {
		got_log[counters.gets_ok].code = ev.event_type;
		got_log[counters.gets_ok].element = ev.element;
	}
	counters.gets_ok++;
	return 0;
}

void ibv_ack_async_event(struct ibv_async_event *event)
{
	FAKE_LOCKED;
	uint32_t code;
	uint64_t element;

	memcpy(&code, &event->event_type, sizeof(code));
	if (fake_is_object_event(code))
		element = (uint64_t)(uintptr_t)event->element.qp;
	else
		element = (uint64_t)(uint32_t)event->element.port_num;
	if (counters.acks < FAKE_LOG_LEN) {
		ack_log[counters.acks].code = code;
		ack_log[counters.acks].element = element;
	}
	counters.acks++;
}

const char *ibv_event_type_str(enum ibv_event_type event)
{
	FAKE_LOCKED;
	static const char *const names[] = {
		"CQ error",
		"local work queue catastrophic error",
		"invalid request local work queue error",
		"local access violation work queue error",
		"communication established",
		"send queue drained",
		"path migrated",
		"path migration request error",
		"local catastrophic error",
		"port active",
		"port error",
		"LID change",
		"P_Key change",
		"SM change",
		"SRQ catastrophic error",
		"SRQ limit reached",
		"last WQE reached",
		"client reregistration",
		"GID table change",
		"WQ fatal",
		"Device link speed change",
	};
	unsigned int code = (unsigned int)event;

	return code < sizeof(names) / sizeof(names[0]) ? names[code] : "unknown";
}

const char *ibv_port_state_str(enum ibv_port_state port_state)
{
	FAKE_LOCKED;
	static const char *const names[] = {
		"no state change (NOP)", "down", "init", "armed", "active", "active defer",
	};
	unsigned int code = (unsigned int)port_state;

	return code < sizeof(names) / sizeof(names[0]) ? names[code] : "unknown";
}
