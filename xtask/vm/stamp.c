/*
 * stamp: the traffic cases' clock in the guest (built by `cargo xtask
 * vmtest`). With arguments, prints "NS ARGS..." once; without, copies
 * stdin line by line, each prefixed with "NS ", flushing every line. NS is
 * CLOCK_MONOTONIC in nanoseconds, the traffic engine's clock, so a line
 * of ibv_asyncwatch stamped on arrival compares with the engine's records.
 * `stamp --unix PATH TARGET` is a reader of railwatch's state stream: it
 * connects to the Unix socket PATH, sends `GET TARGET HTTP/1.0` and
 * stamps each line of the answer as it arrives (busybox has no client for
 * a Unix socket).
 */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static unsigned long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

/* The answer to GET TARGET on the Unix socket PATH, to stdin's place. */
static int open_unix(const char *path, const char *target) {
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof addr.sun_path) return -1;
    strcpy(addr.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) return -1;
    char request[512];
    int n = snprintf(request, sizeof request, "GET %s HTTP/1.0\r\n\r\n", target);
    if (n <= 0 || (size_t)n >= sizeof request || write(fd, request, (size_t)n) != n) return -1;
    return dup2(fd, 0) == 0 ? 0 : -1;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "--unix") == 0) {
        if (open_unix(argv[2], argv[3]) != 0) {
            perror("stamp --unix");
            return 2;
        }
    } else if (argc > 1) {
        printf("%llu", now_ns());
        for (int i = 1; i < argc; ++i) printf(" %s", argv[i]);
        printf("\n");
        return fflush(stdout) == 0 ? 0 : 1;
    }
    char line[1 << 16];
    while (fgets(line, sizeof line, stdin)) {
        printf("%llu %s", now_ns(), line);
        if (fflush(stdout) != 0) return 1;
    }
    return 0;
}
