/*
 * check.h: a tiny TAP-style helper for railwatch's C tests.
 *
 * Each check prints one line, `ok - NAME` or `not ok - NAME: why`;
 * check_done() prints `# N passed, M failed` and returns the exit status
 * (0 iff every check passed). Header-only: each test program includes it
 * once, in its only translation unit, before any other header.
 */
#ifndef RAILWATCH_CHECK_H
#define RAILWATCH_CHECK_H

/* clock_gettime and nanosleep under -std=c11: include this header first. */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static unsigned long check_passed;
static unsigned long check_failed;

/* Records one check: `ok` true passes; otherwise `why` (printf-style)
 * says what was seen. Returns `ok`. */
__attribute__((format(printf, 3, 4), unused)) static bool check(bool ok, const char *name, const char *why, ...)
{
	if (ok) {
		check_passed++;
		printf("ok - %s\n", name);
	} else {
		va_list ap;

		check_failed++;
		printf("not ok - %s: ", name);
		va_start(ap, why);
		vprintf(why, ap);
		va_end(ap);
		printf("\n");
	}
	fflush(stdout);
	return ok;
}

/* Checks that two unsigned integers are equal (each evaluated once). */
#define CHECK_EQ(name, got, want)                                                                 \
	do {                                                                                      \
		uint64_t check_got_ = (uint64_t)(got), check_want_ = (uint64_t)(want);          \
		check(check_got_ == check_want_, (name), "%s is %llu, want %llu", #got,         \
		      (unsigned long long)check_got_, (unsigned long long)check_want_);          \
	} while (0)

/* Checks that two signed integers are equal (each evaluated once). */
#define CHECK_EQ_I(name, got, want)                                                               \
	do {                                                                                      \
		int64_t check_got_ = (int64_t)(got), check_want_ = (int64_t)(want);             \
		check(check_got_ == check_want_, (name), "%s is %lld, want %lld", #got,         \
		      (long long)check_got_, (long long)check_want_);                            \
	} while (0)

/* Checks that a call returned RW_OK (needs railwatch.h), with the
 * library's last error on failure. */
#define CHECK_OK(name, call)                                                                      \
	do {                                                                                      \
		int check_status_ = (int)(call);                                                  \
		check(check_status_ == 0, (name), "%s returned %s (%s)", #call,                  \
		      rw_status_name(check_status_), rw_last_error());                           \
	} while (0)

/* Checks that a call returned `want` (an rw_status). */
#define CHECK_STATUS(name, call, want)                                                            \
	do {                                                                                      \
		int check_status_ = (int)(call);                                                  \
		check(check_status_ == (int)(want), (name), "%s returned %s, want %s (%s)", #call, \
		      rw_status_name(check_status_), rw_status_name((int)(want)), rw_last_error());  \
	} while (0)

/* Milliseconds on the monotonic clock. */
static inline uint64_t check_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Sleeps `ms` milliseconds (a polling interval, never synchronisation). */
static inline void check_sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0) {
	}
}

/* Polls `cond` every 2 ms until it holds or `timeout_ms` pass; `ok` (a
 * bool lvalue) is set to whether it held. */
#define WAIT_UNTIL(ok, cond, timeout_ms)                                                          \
	do {                                                                                      \
		uint64_t wait_deadline_ = check_now_ms() + (timeout_ms);                        \
		while (!((ok) = (cond)) && check_now_ms() < wait_deadline_)                      \
			check_sleep_ms(2);                                                        \
	} while (0)

/* Checks that `call` returns `want` with a last error (rw_last_error, of
 * railwatch.h) naming `what`. */
#define CHECK_FAILS(name, call, want, what)                                                       \
	do {                                                                                      \
		int st_ = (int)(call);                                                            \
		const char *e_ = rw_last_error();                                                 \
		check(st_ == (int)(want) && e_ != NULL && strstr(e_, (what)) != NULL, (name),      \
		      "%s returned %s (want %s), last error \"%s\" (want it to name \"%s\")", #call,  \
		      rw_status_name(st_), rw_status_name((int)(want)), e_ ? e_ : "", (what));     \
	} while (0)

/* Prints the summary line; the program's exit status. */
static inline int check_done(void)
{
	printf("# %lu passed, %lu failed\n", check_passed, check_failed);
	fflush(stdout);
	return check_failed == 0 && check_passed > 0 ? 0 : 1;
}

#endif /* RAILWATCH_CHECK_H */
