/* A consumer of the installed railwatch (CMakeLists.txt here, and
 * pkg-config): the library it runs with is the version it was built
 * against, which is the package's (RAILWATCH_EXPECT, from
 * find_package's railwatch_VERSION or pkg-config --modversion). Prints
 * `ok - ...` / `not ok - ...` per check and exits 0 iff all passed. */
#include <railwatch.h>

#include <stdio.h>
#include <string.h>

#ifndef RAILWATCH_EXPECT
#error "build with -DRAILWATCH_EXPECT='\"MAJOR.MINOR.PATCH\"' (the package's version)"
#endif

static int failures;

static void check(int ok, const char *what) {
    printf("%s - %s\n", ok ? "ok" : "not ok", what);
    failures += !ok;
}

int main(void) {
    uint32_t major = 0, minor = 0, patch = 0;
    char numbers[48];
    check(rw_version_numbers(&major, &minor, &patch) == RW_OK, "rw_version_numbers returns RW_OK");
    check(major == RW_VERSION_MAJOR && minor == RW_VERSION_MINOR && patch == RW_VERSION_PATCH,
          "the library's version numbers are the header's");
    snprintf(numbers, sizeof numbers, "%u.%u.%u", (unsigned)major, (unsigned)minor, (unsigned)patch);
    check(strcmp(numbers, RAILWATCH_EXPECT) == 0, "the version numbers are the package's version");
    check(strcmp(rw_version(), RAILWATCH_EXPECT) == 0, "rw_version() is the package's version");
    check(strcmp(RW_VERSION, RAILWATCH_EXPECT) == 0, "the installed header is the package's version");
    return failures == 0 ? 0 : 1;
}
