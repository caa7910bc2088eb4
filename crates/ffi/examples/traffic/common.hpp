// common.hpp: the clock, the output and the gate view every part of the
// traffic engine shares.
#pragma once

#include "railwatch.hpp"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace traffic {

// ---- the clock ------------------------------------------------------------

// CLOCK_MONOTONIC, in nanoseconds: the records' clock. The machine takes
// the same clock in milliseconds, and the guest scripts of railwatch's VM
// test read it too (/proc/timer_list), so every line lines up.
inline uint64_t now_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}

inline uint64_t now_ms() { return now_ns() / 1'000'000u; }

// ---- output: one JSON object per line on stdout -----------------------------

// A JSON line being built: `line("gate").num("t_ns", t).str("rail", "A").emit()`.
// Strings are names the engine chose or the kernel's device names: only
// quotes and backslashes are escaped.
class line {
public:
    explicit line(std::string_view kind) { text_ = "{\"kind\":\""; text_ += kind; text_ += '"'; }
    line &num(std::string_view key, uint64_t v) { return raw(key, std::to_string(v)); }
    line &signed_num(std::string_view key, int64_t v) { return raw(key, std::to_string(v)); }
    line &fixed(std::string_view key, double v) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.3f", v);
        return raw(key, buf);
    }
    line &boolean(std::string_view key, bool v) { return raw(key, v ? "true" : "false"); }
    line &str(std::string_view key, std::string_view v) {
        std::string q = "\"";
        for (char c : v) {
            if (c == '"' || c == '\\') q += '\\';
            q += c;
        }
        return raw(key, q + '"');
    }
    // `v` is already JSON (an object or array).
    line &raw(std::string_view key, std::string_view v) {
        text_ += ",\"";
        text_ += key;
        text_ += "\":";
        text_ += v;
        return *this;
    }
    // Writes the line and flushes it: the VM test reads stdout as it goes.
    void emit() {
        static std::mutex mu;
        std::lock_guard<std::mutex> l(mu);
        std::fputs(text_.c_str(), stdout);
        std::fputs("}\n", stdout);
        std::fflush(stdout);
    }

private:
    std::string text_;
};

// A note on stderr, for people.
void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// ---- the gate the workers check -----------------------------------------------

// One end of a rail as the workers see it: a 64-bit state word in
// railwatch's layout, read with one acquire load (what the header's
// rw_gate_check_inline does in C). railwatch writes the word of a rail it
// watches; the one-event-per-wake-up loop writes its own word, in the same
// layout, so both engines' workers run the same code.
class rail_gate {
public:
    rail_gate() = default;
    // railwatch's gate: kept alive with its word.
    explicit rail_gate(railwatch::gate g) : owned_(std::move(g)) {
        word_ = const_cast<uint64_t *>(rw_gate_word(owned_.get()));
    }
    // A word someone else keeps (the old loop's).
    explicit rail_gate(uint64_t *word) : word_(word) {}

    // Whether it reads a word (set once, before the workers start).
    bool bound() const noexcept { return word_ != nullptr; }

    // The generation when the rail admits, else nullopt.
    std::optional<uint64_t> check() const noexcept {
        railwatch::word w = load();
        if (!w.admits()) return std::nullopt;
        return w.generation();
    }
    // The half-open breaker's one probe (railwatch's gate only): the
    // generation the probe's QPs are built under, else nullopt.
    std::optional<uint64_t> probe() const { return owned_ ? owned_.probe() : std::nullopt; }
    railwatch::word load() const noexcept {
        if (!word_) return railwatch::word{RW_RAIL_INERT};
        return railwatch::word{std::atomic_ref<uint64_t>(*word_).load(std::memory_order_acquire)};
    }

private:
    railwatch::gate owned_;
    uint64_t *word_ = nullptr;
};

// A verbs call failed: the message names the call, the device and errno.
class verbs_error : public std::runtime_error {
public:
    verbs_error(const std::string &what, int err);
    int err() const noexcept { return err_; }

private:
    int err_;
};

}  // namespace traffic
