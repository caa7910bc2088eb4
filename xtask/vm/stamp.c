/*
 * stamp: the traffic cases' clock in the guest (built by `cargo xtask
 * vmtest`). With arguments, prints "NS ARGS..." once; without, copies
 * stdin line by line, each prefixed with "NS ", flushing every line. NS is
 * CLOCK_MONOTONIC in nanoseconds, the traffic engine's clock, so a line
 * of ibv_asyncwatch stamped on arrival compares with the engine's records.
 */
#include <stdio.h>
#include <time.h>

static unsigned long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc > 1) {
        printf("%llu", now_ns());
        for (int i = 1; i < argc; ++i) printf(" %s", argv[i]);
        printf("\n");
        return fflush(stdout) == 0 ? 0 : 1;
    }
    char line[4096];
    while (fgets(line, sizeof line, stdin)) {
        printf("%llu %s", now_ns(), line);
        if (fflush(stdout) != 0) return 1;
    }
    return 0;
}
