// check.hpp: the TAP-style check of railwatch's C++ tests (check.h's, for
// C++). Each check prints one line, `ok - NAME` or `not ok - NAME: why`;
// a program prints `# N passed, M failed` from the counts at its end and
// exits 0 iff every check passed. Header-only: included once, by the only
// translation unit of a test program.
#ifndef RAILWATCH_CHECK_HPP
#define RAILWATCH_CHECK_HPP

#include <cstdio>
#include <string>

static int passed = 0, failed = 0;

// Records one check: `ok` true passes; otherwise `why` says what was seen.
static void check(bool ok, const std::string &name, const std::string &why = "") {
    if (ok) {
        ++passed;
        std::printf("ok - %s\n", name.c_str());
    } else {
        ++failed;
        std::printf("not ok - %s: %s\n", name.c_str(), why.empty() ? "check failed" : why.c_str());
    }
    std::fflush(stdout);
}

#endif  // RAILWATCH_CHECK_HPP
