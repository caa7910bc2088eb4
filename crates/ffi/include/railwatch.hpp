/*
 * railwatch.hpp: a header-only C++ wrapper over railwatch.h, for C++20 and
 * C++17 (there std::span is railwatch::span's own, and the gate's load the
 * GCC/Clang __atomic builtin), clean under -Wall -Wextra -Wpedantic
 * -Wold-style-cast -Wconversion.
 *
 * Everything is in namespace `railwatch`. A map for a newcomer:
 *
 *   error            what every failing call throws: the rw_status and the
 *                    library's rw_last_error() text.
 *   config           an RAII rw_config: every setting at its default, set and
 *                    read by key (set("tick_ms", 100), get_u64("tick_ms")).
 *   word, gate       a rail's 64-bit state word, decoded; a gate keeps one
 *                    word alive and checks it inline (one acquire load,
 *                    no call into the library).
 *   machine          embedding 1, the engine keeps its loop: feed events,
 *                    answers and time in; poll actions out; drain() is the
 *                    edge-triggered drain done right; the device list and
 *                    opens (handle_device_list, handle_opened); evidence
 *                    (report_transfers, handle_counters, gid_index).
 *   uevents          the kernel's device uevents as an fd for the engine's
 *                    epoll set (RAII over rw_uevents).
 *   sim, sim_context a simulated host for tests of both embeddings: a
 *                    monitor over it, or an engine's own loop opening its
 *                    devices (sim::open) as it would libibverbs ones.
 *   selector         the engine's rail selector, called on the monitor
 *                    thread (subclass it, or use function_selector).
 *   monitor          embedding 2, railwatch owns a thread: start over the
 *                    simulator or libibverbs, subscribe, snapshot, gates.
 *   subscription     an RAII subscription holding a std::function.
 *   owned_string     an RAII string returned by the library.
 *   uevents          the kernel's device uevents as an fd, for embedding 1.
 *   log_to()         railwatch's own log lines and panic messages.
 *
 * Conventions:
 *
 *   - Errors: every wrapper call that can fail throws railwatch::error
 *     (status() is the rw_status, what() names the call and carries the
 *     library's message). The few expected "not there (yet)" answers have
 *     non-throwing variants returning std::optional (monitor::try_gate,
 *     machine::poll_action, machine::poll_timeout, machine::device_name,
 *     machine::gid_index). Destructors, moves,
 *     gate::check() and word decoding never throw.
 *   - No exception ever crosses into C. Callbacks the library calls (the
 *     selector, subscriptions, machine::drain's reader) go through
 *     noexcept trampolines that catch everything. An exception from a
 *     selector or a subscription is swallowed and counted
 *     (railwatch::callback_exceptions()); one from drain()'s reader stops
 *     the drain (fed to the machine as a read error, ECANCELED, so the
 *     device falls back to polling and no event is stranded) and is
 *     rethrown from drain() once the library has returned.
 *   - Handles are move-only and their destructor calls the one destroy
 *     function. A moved-from handle is empty (operator bool is false).
 *   - Threads: a machine is used by one thread at a time; gates, sims and
 *     monitors by any thread. Selector and subscription callbacks run on
 *     the monitor thread; they may call any monitor method, destroy any
 *     subscription (their own included), and stop or destroy the monitor
 *     (then nothing is called after it but the rest of the calling
 *     callback; see monitor::stop). How teardown avoids races and
 *     deadlocks: "Teardown" in namespace detail.
 *   - Names are std::string_view (copied to add the NUL the C API needs;
 *     one with a NUL inside throws error RW_ERR_INVALID, never reaches
 *     the library cut short),
 *     port lists and snapshot buffers railwatch::span (std::span in C++20).
 *   - The word layout (RW_WORD_LAYOUT_VERSION) is checked against the
 *     library once, when the first machine, monitor or gate is made; a
 *     mismatch throws error with RW_ERR_UNSUPPORTED.
 */
#ifndef RAILWATCH_HPP
#define RAILWATCH_HPP

#include "railwatch.h"
#include "railwatch_sim.h"

#include <array>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#if __cplusplus >= 202002L && __has_include(<span>)
#include <span>
#define RAILWATCH_STD_SPAN 1
#endif

namespace railwatch {

// ---- C++17 and C++20 ---------------------------------------------------------

#ifdef RAILWATCH_STD_SPAN
/** A view of contiguous elements: std::span in C++20. */
template <class T>
using span = std::span<T>;
#else
/** A view of contiguous elements: in C++17, the part of std::span this
 *  header uses (from a pointer and a size, a C array, or a container with
 *  data() and size(), such as std::vector and std::array). */
template <class T>
class span {
public:
    constexpr span() noexcept = default;
    constexpr span(T *data, std::size_t size) noexcept : data_(data), size_(size) {}
    template <std::size_t N>
    constexpr span(T (&array)[N]) noexcept : data_(array), size_(N) {}
    template <class C, class = std::enable_if_t<std::is_convertible_v<decltype(std::declval<C &>().data()), T *>>>
    constexpr span(C &c) noexcept : data_(c.data()), size_(c.size()) {}
    template <class C, class = std::enable_if_t<std::is_convertible_v<decltype(std::declval<const C &>().data()), T *>>>
    constexpr span(const C &c) noexcept : data_(c.data()), size_(c.size()) {}
    constexpr T *data() const noexcept { return data_; }
    constexpr std::size_t size() const noexcept { return size_; }
    constexpr bool empty() const noexcept { return size_ == 0; }
    constexpr T *begin() const noexcept { return data_; }
    constexpr T *end() const noexcept { return data_ + size_; }
    constexpr T &operator[](std::size_t i) const noexcept { return data_[i]; }

private:
    T *data_ = nullptr;
    std::size_t size_ = 0;
};
#endif

namespace detail {
/** One acquire load of a word only railwatch writes: std::atomic_ref in
 *  C++20, the GCC/Clang __atomic builtin (the same instruction) in C++17. */
inline uint64_t load_acquire(uint64_t *word) noexcept {
#if defined(__cpp_lib_atomic_ref)
    return std::atomic_ref<uint64_t>(*word).load(std::memory_order_acquire);
#else
    return __atomic_load_n(word, __ATOMIC_ACQUIRE);
#endif
}
/** Whether `word` is aligned as that load needs. */
inline bool load_aligned(const uint64_t *word) noexcept {
#if defined(__cpp_lib_atomic_ref)
    return reinterpret_cast<std::uintptr_t>(word) % std::atomic_ref<uint64_t>::required_alignment == 0;
#else
    return reinterpret_cast<std::uintptr_t>(word) % alignof(uint64_t) == 0;
#endif
}
}  // namespace detail

// ---- errors ---------------------------------------------------------------

/** What a failing wrapper call throws. */
class error : public std::runtime_error {
public:
    error(rw_status status, const std::string &message) : std::runtime_error(message), status_(status) {}
    /** The library's status (RW_ERR_*). */
    rw_status status() const noexcept { return status_; }

private:
    rw_status status_;
};

/** A short name for a status ("RW_ERR_NULL"). */
inline const char *status_name(rw_status s) noexcept { return rw_status_name(static_cast<int32_t>(s)); }

namespace detail {

/** Throws error for a failed status: "<call>: RW_ERR_X: <rw_last_error>". */
inline void check(rw_status s, const char *call) {
    if (s == RW_OK) return;
    throw error(s, std::string(call) + ": " + status_name(s) + ": " + rw_last_error());
}

/** `name` with the NUL the C API needs. One with a NUL inside would reach
 *  it cut there, another name: throws error RW_ERR_INVALID instead. */
inline std::string c_name(std::string_view name, const char *call) {
    if (name.find('\0') != std::string_view::npos)
        throw error(RW_ERR_INVALID, std::string(call) + ": " + status_name(RW_ERR_INVALID) +
                                        ": the name has a NUL byte inside (at " +
                                        std::to_string(name.find('\0')) + ")");
    return std::string(name);
}

/** The word layout of this header must be the library's; checked once. */
inline void check_layout() {
    static const bool same = rw_word_layout_version() == RW_WORD_LAYOUT_VERSION;
    if (!same)
        throw error(RW_ERR_UNSUPPORTED, "railwatch: the library's word layout version " +
                                            std::to_string(rw_word_layout_version()) + " is not this header's " +
                                            std::to_string(RW_WORD_LAYOUT_VERSION));
}

inline std::atomic<uint64_t> &swallowed() noexcept {
    static std::atomic<uint64_t> n{0};
    return n;
}

}  // namespace detail

/** Exceptions thrown by selector and subscription callbacks, caught and
 *  dropped at the C boundary, so far in this process. */
inline uint64_t callback_exceptions() noexcept { return detail::swallowed().load(std::memory_order_relaxed); }

// ---- libibverbs codes, for engines and tests without <infiniband/verbs.h> --

/** ibv_event_type values (the same numbers as verbs.h). */
namespace event_code {
inline constexpr uint32_t cq_err = 0, qp_fatal = 1, qp_req_err = 2, qp_access_err = 3, comm_est = 4,
                          sq_drained = 5, path_mig = 6, path_mig_err = 7, device_fatal = 8, port_active = 9,
                          port_err = 10, lid_change = 11, pkey_change = 12, sm_change = 13, srq_err = 14,
                          srq_limit_reached = 15, qp_last_wqe_reached = 16, client_reregister = 17,
                          gid_change = 18, wq_fatal = 19;
}
/** ibv_port_state values. */
namespace port_state {
inline constexpr uint32_t nop = 0, down = 1, init = 2, armed = 3, active = 4, active_defer = 5;
}

/** Names for printing. */
inline const char *state_name(uint32_t state) noexcept {
    switch (state) {
    case RW_RAIL_ACTIVE: return "active";
    case RW_RAIL_PAUSED: return "paused";
    case RW_RAIL_INERT: return "inert";
    default: return "?";
    }
}
inline const char *reason_name(uint32_t reason) noexcept {
    static const char *const names[] = {"none",       "port_err",  "port_not_active", "device_fatal",
                                        "device_removed", "not_opened", "damped",        "settling",
                                        "data_path",  "no_address", "half_open",     "probing",
                                        "no_carrier"};
    return reason < sizeof(names) / sizeof(names[0]) ? names[reason] : "?";
}
inline const char *recovered_by_name(int32_t by) noexcept {
    switch (by) {
    case RW_BY_EVENT: return "event";
    case RW_BY_POLL: return "poll";
    case RW_BY_ATTACH: return "attach";
    case RW_BY_PROBE: return "probe";
    default: return "-";
    }
}

// ---- settings -------------------------------------------------------------

/**
 * Every setting, at its default until set by key (docs/CONFIG.md's keys:
 * "tick_ms", "damping.half_life_ms", "port_witness"). Each set() checks the
 * key and its range at once and throws railwatch::error naming both; the
 * rules between keys are checked by check() and by the machine or monitor
 * made from it, which keep their own copy.
 */
class config {
public:
    config() { detail::check(rw_config_new(&c_), "rw_config_new"); }
    config(config &&o) noexcept : c_(std::exchange(o.c_, nullptr)) {}
    config &operator=(config &&o) noexcept {
        if (this != &o) {
            rw_config_free(&c_);
            c_ = std::exchange(o.c_, nullptr);
        }
        return *this;
    }
    config(const config &) = delete;
    config &operator=(const config &) = delete;
    ~config() { rw_config_free(&c_); }

    /** A whole number or milliseconds (0 turns an optional period off). */
    template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
    config &set(std::string_view key, T value) {
        if (value < 0) throw error(RW_ERR_RANGE, "rw_config_set_u64: " + std::string(key) + " is negative");
        detail::check(rw_config_set_u64(c_, detail::c_name(key, "rw_config_set_u64").c_str(), static_cast<uint64_t>(value)),
                      "rw_config_set_u64");
        return *this;
    }
    /** A number (the damping penalties). */
    config &set(std::string_view key, double value) {
        detail::check(rw_config_set_f64(c_, detail::c_name(key, "rw_config_set_f64").c_str(), value), "rw_config_set_f64");
        return *this;
    }
    /** A flag or a section (true turns it on with its defaults). */
    config &set(std::string_view key, bool value) {
        detail::check(rw_config_set_bool(c_, detail::c_name(key, "rw_config_set_bool").c_str(), value), "rw_config_set_bool");
        return *this;
    }
    /** One of a named setting's names ("carrier"). */
    config &set(std::string_view key, const char *value) {
        detail::check(rw_config_set_str(c_, detail::c_name(key, "rw_config_set_str").c_str(), value), "rw_config_set_str");
        return *this;
    }
    config &set(std::string_view key, const std::string &value) { return set(key, value.c_str()); }

    uint64_t get_u64(std::string_view key) const {
        uint64_t v = 0;
        detail::check(rw_config_get_u64(c_, detail::c_name(key, "rw_config_get_u64").c_str(), &v), "rw_config_get_u64");
        return v;
    }
    double get_f64(std::string_view key) const {
        double v = 0;
        detail::check(rw_config_get_f64(c_, detail::c_name(key, "rw_config_get_f64").c_str(), &v), "rw_config_get_f64");
        return v;
    }
    bool get_bool(std::string_view key) const {
        bool v = false;
        detail::check(rw_config_get_bool(c_, detail::c_name(key, "rw_config_get_bool").c_str(), &v), "rw_config_get_bool");
        return v;
    }
    std::string_view get_str(std::string_view key) const {
        const char *v = nullptr;
        detail::check(rw_config_get_str(c_, detail::c_name(key, "rw_config_get_str").c_str(), &v), "rw_config_get_str");
        return v;
    }
    /** The whole config as a machine or monitor would check it. */
    void check() const { detail::check(rw_config_check(c_), "rw_config_check"); }

    const rw_config *get() const noexcept { return c_; }

private:
    rw_config *c_ = nullptr;
};

/** The library's default settings; change what you need with set(). */
inline config default_config() { return config{}; }

// ---- the state word and the gate ------------------------------------------

/** A state word, decoded with the header's rw_word_* functions. */
struct word {
    uint64_t raw = 0;
    uint32_t state() const noexcept { return rw_word_state(raw); }
    uint32_t reason() const noexcept { return rw_word_reason(raw); }
    uint32_t port_state() const noexcept { return rw_word_port_state(raw); }
    uint64_t generation() const noexcept { return rw_word_generation(raw); }
    bool admits() const noexcept { return rw_word_admits(raw); }
    /** As an engine's four-value status (rw_engine_status). */
    rw_engine_status engine_status() const noexcept {
        return static_cast<rw_engine_status>(rw_word_engine_status(raw));
    }
};

/**
 * One rail's gate, for worker threads. check() is the hot path: one
 * acquire load of the rail's word, no call into the library, no lock.
 * It may outlive the machine or monitor it came from (the word then no
 * longer changes). Any thread may use it; copy it by asking for another.
 */
class gate {
public:
    gate() noexcept = default;
    /** Takes ownership of a gate from rw_machine_gate / rw_monitor_gate. */
    explicit gate(rw_gate *g) : g_(g) {
        try {
            detail::check_layout();
            if (g_) {
                word_ = const_cast<uint64_t *>(rw_gate_word(g_));
                if (!word_ || !detail::load_aligned(word_)) throw error(RW_ERR_STATE, "rw_gate_word: no usable word");
            }
        } catch (...) {
            rw_gate_free(&g_);  // no destructor runs for a throwing constructor
            throw;
        }
    }
    gate(gate &&o) noexcept : g_(std::exchange(o.g_, nullptr)), word_(std::exchange(o.word_, nullptr)) {}
    gate &operator=(gate &&o) noexcept {
        if (this != &o) {
            reset();
            g_ = std::exchange(o.g_, nullptr);
            word_ = std::exchange(o.word_, nullptr);
        }
        return *this;
    }
    gate(const gate &) = delete;
    gate &operator=(const gate &) = delete;
    ~gate() { reset(); }

    explicit operator bool() const noexcept { return g_ != nullptr; }
    rw_gate *get() const noexcept { return g_; }

    /** The word, loaded once with acquire ordering (the whole check). An
     *  empty gate reads as inert. */
    word load() const noexcept {
        if (!word_) return word{uint64_t{RW_RAIL_INERT} | (uint64_t{RW_WORD_PORT_NONE} << RW_WORD_PORT_SHIFT)};
        // The library only ever writes this word atomically; C++20's
        // atomic_ref needs a non-const object even for a load.
        return word{detail::load_acquire(word_)};
    }
    /** The inline check: the generation when the rail admits, else
     *  nullopt. Endpoints built under an older generation are stale. */
    std::optional<uint64_t> check() const noexcept {
        word w = load();
        if (!w.admits()) return std::nullopt;
        return w.generation();
    }
    /** The half-open breaker's one probe: the generation the probe's
     *  endpoint must have when this call took it, else nullopt (the rail
     *  is not half-open, or another probe is out). Report the outcome with
     *  machine::report_probe; an unreported one times out. */
    std::optional<uint64_t> probe() const {
        bool granted = false;
        rw_ticket t{};
        detail::check(rw_gate_probe(g_, &granted, &t), "rw_gate_probe");
        if (!granted) return std::nullopt;
        return t.generation;
    }
    /** The same check as a library call (rw_gate_check), for comparison. */
    rw_ticket check_call() const {
        rw_ticket t{};
        detail::check(rw_gate_check(g_, &t), "rw_gate_check");
        return t;
    }

private:
    void reset() noexcept {
        rw_gate_free(&g_);
        g_ = nullptr;
        word_ = nullptr;
    }
    rw_gate *g_ = nullptr;
    uint64_t *word_ = nullptr;
};

// ---- strings ----------------------------------------------------------------

/** A string the library returned (rw_monitor_snapshot_json); freed with
 *  rw_string_free. */
class owned_string {
public:
    owned_string() noexcept = default;
    explicit owned_string(char *s) noexcept : s_(s) {}
    owned_string(owned_string &&o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
    owned_string &operator=(owned_string &&o) noexcept {
        if (this != &o) {
            rw_string_free(&s_);
            s_ = std::exchange(o.s_, nullptr);
        }
        return *this;
    }
    owned_string(const owned_string &) = delete;
    owned_string &operator=(const owned_string &) = delete;
    ~owned_string() { rw_string_free(&s_); }

    std::string_view view() const noexcept { return s_ ? std::string_view(s_) : std::string_view(); }
    std::string str() const { return std::string(view()); }
    const char *c_str() const noexcept { return s_ ? s_ : ""; }

private:
    char *s_ = nullptr;
};

// ---- embedding 1: the engine keeps its loop ---------------------------------

/**
 * The rail machine: all policy, no I/O. Feed it events (or drain()), the
 * answers to its QUERY_PORT / READ_LINK / READ_ADDRESS / REOPEN actions
 * and the time (handle_timeout at poll_timeout()); after every input,
 * carry out poll_action() until it returns nullopt. One thread at a time.
 */
class machine {
public:
    /** A machine with `cfg` (nullptr: the defaults). */
    explicit machine(const config *cfg = nullptr) {
        detail::check_layout();
        detail::check(rw_machine_new(cfg ? cfg->get() : nullptr, &m_), "rw_machine_new");
    }
    explicit machine(const config &cfg) : machine(&cfg) {}
    machine(machine &&o) noexcept : m_(std::exchange(o.m_, nullptr)) {}
    machine &operator=(machine &&o) noexcept {
        if (this != &o) {
            rw_machine_free(&m_);
            m_ = std::exchange(o.m_, nullptr);
        }
        return *this;
    }
    machine(const machine &) = delete;
    machine &operator=(const machine &) = delete;
    ~machine() { rw_machine_free(&m_); }

    explicit operator bool() const noexcept { return m_ != nullptr; }
    rw_machine *get() const noexcept { return m_; }

    /** Adds a device; its index. The machine then asks to start reading it
     *  and to query each port (the attach). */
    uint32_t add_device(std::string_view name, railwatch::span<const uint8_t> ports, uint64_t now_ms) {
        uint32_t device = 0;
        const std::string n = detail::c_name(name, "rw_machine_add_device");
        detail::check(rw_machine_add_device(m_, n.c_str(), ports.data(), ports.size(), now_ms, &device),
                      "rw_machine_add_device");
        return device;
    }
    /** Adds a device at the engine's own slot (rw_machine_add_device_at):
     *  the slots below that no device took stay empty. */
    void add_device_at(uint32_t slot, std::string_view name, railwatch::span<const uint8_t> ports,
                       uint64_t now_ms) {
        const std::string n = detail::c_name(name, "rw_machine_add_device_at");
        detail::check(rw_machine_add_device_at(m_, slot, n.c_str(), ports.data(), ports.size(), now_ms),
                      "rw_machine_add_device_at");
    }
    /** This machine's log requests to `callback` instead of LOG actions
     *  (rw_machine_set_log_callback); nullptr goes back to actions. */
    void set_log_callback(rw_log_callback_fn callback, void *user, uint32_t max_level) {
        detail::check(rw_machine_set_log_callback(m_, callback, user, max_level), "rw_machine_set_log_callback");
    }
    /** One event read and already acknowledged. */
    void handle_event(uint32_t device, uint32_t code, uint64_t element, uint64_t now_ms) {
        detail::check(rw_machine_handle_event(m_, device, code, element, now_ms), "rw_machine_handle_event");
    }
    void handle_read_error(uint32_t device, int32_t error, uint64_t now_ms) {
        detail::check(rw_machine_handle_read_error(m_, device, error, now_ms), "rw_machine_handle_read_error");
    }
    void handle_hangup(uint32_t device, uint64_t now_ms) {
        detail::check(rw_machine_handle_hangup(m_, device, now_ms), "rw_machine_handle_hangup");
    }
    /** Answer to QUERY_PORT: `error` 0 and the ibv_port_state, or an errno. */
    void handle_port_state(uint32_t device, uint32_t port, int32_t error, uint32_t state, uint64_t now_ms) {
        detail::check(rw_machine_handle_port_state(m_, device, port, error, state, now_ms),
                      "rw_machine_handle_port_state");
    }
    /** Answer to READ_LINK. */
    void handle_link(uint32_t device, uint32_t port, int32_t error, uint32_t speed, uint8_t width,
                     uint64_t effective_100mbps, uint64_t now_ms) {
        detail::check(rw_machine_handle_link(m_, device, port, error, speed, width, effective_100mbps, now_ms),
                      "rw_machine_handle_link");
    }
    /** Answer to READ_ADDRESS with an address. */
    void handle_address(uint32_t device, uint32_t port, const rw_port_address &address, uint64_t now_ms) {
        detail::check(rw_machine_handle_address(m_, device, port, 0, &address, now_ms), "rw_machine_handle_address");
    }
    /** Answer to READ_ADDRESS with an errno (EOPNOTSUPP: never ask again). */
    void handle_address_error(uint32_t device, uint32_t port, int32_t error, uint64_t now_ms) {
        detail::check(rw_machine_handle_address(m_, device, port, error, nullptr, now_ms),
                      "rw_machine_handle_address");
    }
    /** Answer to REOPEN: 0, or the errno of the failed open. */
    void handle_reopen(uint32_t device, int32_t error, uint64_t now_ms) {
        detail::check(rw_machine_handle_reopen(m_, device, error, now_ms), "rw_machine_handle_reopen");
    }
    void handle_removed(uint32_t device, uint64_t now_ms) {
        detail::check(rw_machine_handle_removed(m_, device, now_ms), "rw_machine_handle_removed");
    }
    void handle_timeout(uint64_t now_ms) {
        detail::check(rw_machine_handle_timeout(m_, now_ms), "rw_machine_handle_timeout");
    }

    /** How long epoll_wait may sleep at `now_ms`, as its int timeout, at
     *  most `cap_ms` (rw_machine_poll_wait). */
    int32_t poll_wait(uint64_t now_ms, int32_t cap_ms) {
        int32_t wait = 0;
        detail::check(rw_machine_poll_wait(m_, now_ms, cap_ms, &wait), "rw_machine_poll_wait");
        return wait;
    }
    /** The next action, or nullopt when the queue is empty. */
    std::optional<rw_action> poll_action() {
        rw_action a{};
        detail::check(rw_machine_poll_action(m_, &a), "rw_machine_poll_action");
        if (a.kind == RW_ACTION_NONE) return std::nullopt;
        return a;
    }
    /** Up to out.size() actions at once, in order; how many (0: none).
     *  Answer them all before the next input, then poll again. */
    size_t poll_actions(railwatch::span<rw_action> out) {
        size_t n = 0;
        detail::check(rw_machine_poll_actions(m_, out.data(), out.size(), &n), "rw_machine_poll_actions");
        return n;
    }
    /** When to call handle_timeout (ms, the caller's clock); nullopt when
     *  nothing is pending. */
    std::optional<uint64_t> poll_timeout() {
        uint64_t d = 0;
        detail::check(rw_machine_poll_timeout(m_, &d), "rw_machine_poll_timeout");
        if (d == RW_NO_DEADLINE) return std::nullopt;
        return d;
    }
    /** How many actions are waiting (the size query of poll_actions). */
    size_t pending_actions() {
        size_t n = 0;
        const rw_status st = rw_machine_poll_actions(m_, nullptr, 0, &n);
        if (st != RW_ERR_BUFFER) detail::check(st, "rw_machine_poll_actions");
        return n;
    }

    // -- the device lifecycle (devices appear and leave) --

    /** The host's device list now (after a uevent, or on a rescan): who
     *  left is closed, who appeared is asked for (RW_ACTION_OPEN). */
    void handle_device_list(const std::vector<std::string> &names, uint64_t now_ms) {
        std::vector<const char *> ptrs;
        ptrs.reserve(names.size());
        for (const std::string &n : names)
            if (n.find('\0') == std::string::npos) ptrs.push_back(n.c_str());  // else no device's name: left out
        detail::check(rw_machine_handle_device_list(m_, ptrs.data(), ptrs.size(), now_ms),
                      "rw_machine_handle_device_list");
    }
    /** Answer to RW_ACTION_OPEN: the device opened with these ports. */
    void handle_opened(uint32_t device, railwatch::span<const uint8_t> ports, uint64_t now_ms) {
        detail::check(rw_machine_handle_opened(m_, device, ports.data(), ports.size(), 0, now_ms),
                      "rw_machine_handle_opened");
    }
    /** Answer to RW_ACTION_OPEN: it would not open (errno); asked again
     *  after a backoff. */
    void handle_open_failed(uint32_t device, int32_t error, uint64_t now_ms) {
        detail::check(rw_machine_handle_opened(m_, device, nullptr, 0, error, now_ms), "rw_machine_handle_opened");
    }
    /** The name of device `device` (what RW_ACTION_OPEN opens), or nullopt
     *  for an index the machine does not have. */
    std::optional<std::string> device_name(uint32_t device) {
        char buf[64] = {};  // device names are at most 63 bytes
        size_t len = 0;
        const rw_status s = rw_machine_device_name(m_, device, buf, sizeof buf, &len);
        if (s == RW_ERR_RANGE) return std::nullopt;
        detail::check(s, "rw_machine_device_name");
        return std::string(buf, len);
    }

    // -- evidence beyond the port state --

    /** The transfer outcomes on rail (device, port) since the last report. */
    void report_transfers(uint32_t device, uint32_t port, railwatch::span<const rw_transfer_report> lines,
                          uint64_t now_ms) {
        detail::check(rw_machine_report_transfers(m_, device, port, lines.data(), lines.size(), now_ms),
                      "rw_machine_report_transfers");
    }
    /** The outcome of the probe gate::probe() granted on the rail. */
    void report_probe(uint32_t device, uint32_t port, bool succeeded, uint64_t now_ms) {
        detail::check(rw_machine_report_probe(m_, device, port, succeeded, now_ms), "rw_machine_report_probe");
    }
    /** Answer to RW_ACTION_READ_COUNTERS (RW_COUNTER_NONE for a counter
     *  the driver lacks; `error` ENOENT where it has none). */
    void handle_counters(uint32_t device, uint32_t port, int32_t error, uint64_t link_downed,
                         uint64_t carrier_changes, uint64_t carrier_down, uint64_t now_ms) {
        detail::check(rw_machine_handle_counters(m_, device, port, error, link_downed, carrier_changes, carrier_down,
                                                 now_ms),
                      "rw_machine_handle_counters");
    }
    /** The GID index require_address chose for the rail, or nullopt. */
    std::optional<uint32_t> gid_index(uint32_t device, uint32_t port) {
        uint32_t index = 0;
        const rw_status st = rw_machine_gid_index(m_, device, port, &index);
        if (st == RW_ERR_NOT_FOUND) return std::nullopt;
        detail::check(st, "rw_machine_gid_index");
        return index;
    }

    /** A gate for rail (device, port), for worker threads. */
    railwatch::gate gate(uint32_t device, uint32_t port) {
        rw_gate *g = nullptr;
        detail::check(rw_machine_gate(m_, device, port, &g), "rw_machine_gate");
        return railwatch::gate(g);
    }

    /**
     * The edge-triggered drain: calls `get(code, element)` until it returns
     * EAGAIN, retrying EINTR; any other errno stops the drain and becomes
     * a read error. `get` reads one event, acknowledges it
     * (ibv_ack_async_event) and returns 0, or returns the errno.
     * `budget` 0 means 256 calls. If `get` throws, the drain stops (as a
     * read error, ECANCELED) and the exception is rethrown here.
     */
    template <class Get>
    rw_drain_report drain(uint32_t device, Get &&get, uint64_t now_ms, uint32_t budget = 0) {
        struct context {
            std::remove_reference_t<Get> *get;
            std::exception_ptr thrown;
        } ctx{&get, nullptr};
        auto trampoline = [](void *user, uint32_t *code, uint64_t *element) noexcept -> int32_t {
            auto *c = static_cast<context *>(user);
            if (c->thrown) return ECANCELED;
            try {
                return static_cast<int32_t>((*c->get)(*code, *element));
            } catch (...) {
                c->thrown = std::current_exception();
                return ECANCELED;
            }
        };
        rw_drain_report r{};
        const rw_status s = rw_machine_drain(m_, device, trampoline, &ctx, budget, now_ms, &r);
        if (ctx.thrown) std::rethrow_exception(ctx.thrown);
        detail::check(s, "rw_machine_drain");
        return r;
    }

private:
    rw_machine *m_ = nullptr;
};

/**
 * The kernel's RDMA device uevents (a netlink socket; no privilege
 * needed), for the engine's own epoll set: add fd() edge-triggered, call
 * drain() after every wake-up, and when it returns true list the devices
 * and hand the list to machine::handle_device_list. uevents::open() throws
 * error: RW_ERR_IO where the kernel refuses the socket (a container may),
 * RW_ERR_UNSUPPORTED without the library's `verbs` feature; an engine then
 * rescans the device list on a timer instead. One thread at a time.
 */
class uevents {
public:
    uevents() noexcept = default;
    /** Opens the uevent socket (throws RW_ERR_IO where the kernel refuses
     *  it, RW_ERR_UNSUPPORTED without the `verbs` feature). */
    static uevents open() {
        uevents u;
        detail::check(rw_uevents_open(&u.u_), "rw_uevents_open");
        return u;
    }
    /** Takes ownership of an rw_uevents (rw_sim_uevents_open's, say). */
    explicit uevents(rw_uevents *u) noexcept : u_(u) {}
    uevents(uevents &&o) noexcept : u_(std::exchange(o.u_, nullptr)) {}
    uevents &operator=(uevents &&o) noexcept {
        if (this != &o) {
            rw_uevents_free(&u_);
            u_ = std::exchange(o.u_, nullptr);
        }
        return *this;
    }
    uevents(const uevents &) = delete;
    uevents &operator=(const uevents &) = delete;
    ~uevents() { rw_uevents_free(&u_); }

    explicit operator bool() const noexcept { return u_ != nullptr; }
    rw_uevents *get() const noexcept { return u_; }
    /** The fd for epoll (edge-triggered; drain() after every wake-up). */
    int fd() const noexcept { return rw_uevents_fd(u_); }
    /** Reads every pending uevent; whether the device list may have
     *  changed (then hand the list to machine::handle_device_list). */
    bool drain() {
        bool changed = false;
        detail::check(rw_uevents_drain(u_, &changed), "rw_uevents_drain");
        return changed;
    }

private:
    rw_uevents *u_ = nullptr;
};

// ---- railwatch's own log lines ------------------------------------------------

namespace detail {
/** The function log_to() installed, owned here until it is replaced. */
struct log_sink {
    std::function<void(uint32_t, std::string_view, std::string_view)> fn;
    static void call(void *user, uint32_t level, const char *target, const char *message) noexcept {
        inside() = true;
        try {
            static_cast<log_sink *>(user)->fn(level, target, message);
        } catch (...) {
            swallowed().fetch_add(1, std::memory_order_relaxed);
        }
        inside() = false;
    }
    /** This thread runs the function now. */
    static bool &inside() noexcept {
        thread_local bool in = false;
        return in;
    }
};
inline std::mutex &log_sink_mutex() noexcept {
    static std::mutex mu;
    return mu;
}
inline std::unique_ptr<log_sink> &log_sink_slot() noexcept {
    static std::unique_ptr<log_sink> slot;
    return slot;
}
}  // namespace detail

/**
 * Sends railwatch's log lines up to `max_level` (RW_LOG_LEVEL_*) and its
 * panic messages to `fn(level, target, message)`, on whichever thread logs
 * (it must be thread-safe); an empty `fn` turns it off. railwatch never
 * writes to stderr. When it returns, the previous function is not running
 * and is never called again. Not from inside `fn` itself (throws
 * RW_ERR_STATE). Exceptions from `fn` are counted (callback_exceptions()).
 */
inline void log_to(std::function<void(uint32_t, std::string_view, std::string_view)> fn,
                   uint32_t max_level = RW_LOG_LEVEL_WARN) {
    if (detail::log_sink::inside())
        throw error(RW_ERR_STATE, "railwatch::log_to from inside the log function (it would wait for itself)");
    std::lock_guard<std::mutex> l(detail::log_sink_mutex());
    std::unique_ptr<detail::log_sink> next;
    if (fn) next.reset(new detail::log_sink{std::move(fn)});
    const rw_status st =
        next ? rw_set_log_callback(&detail::log_sink::call, next.get(), max_level) : rw_set_log_callback(nullptr, nullptr, 0);
    detail::check(st, "rw_set_log_callback");
    detail::log_sink_slot() = std::move(next);  // the old one is no longer called
}

// ---- the simulated host -----------------------------------------------------

/**
 * A simulated device an engine's own loop opened (sim::open), the twin of
 * an ibv_context: its fd is the device's real pipe (edge-triggered,
 * EAGAIN when empty, blocking until made O_NONBLOCK), and its calls answer
 * as libibverbs does, with an errno (0: done), never throwing. One thread
 * at a time.
 */
class sim_context {
public:
    sim_context() noexcept = default;
    explicit sim_context(rw_sim_context *c) noexcept : c_(c) {}
    sim_context(sim_context &&o) noexcept : c_(std::exchange(o.c_, nullptr)) {}
    sim_context &operator=(sim_context &&o) noexcept {
        if (this != &o) {
            rw_sim_close(&c_);
            c_ = std::exchange(o.c_, nullptr);
        }
        return *this;
    }
    sim_context(const sim_context &) = delete;
    sim_context &operator=(const sim_context &) = delete;
    ~sim_context() { rw_sim_close(&c_); }

    explicit operator bool() const noexcept { return c_ != nullptr; }
    rw_sim_context *get() const noexcept { return c_; }

    /** The async fd, for the engine's epoll set. */
    int fd() const noexcept { return rw_sim_context_fd(c_); }
    /** ibv_query_device's phys_port_cnt: ports are 1..=n. */
    int32_t query_device(uint32_t &phys_port_cnt) noexcept { return rw_sim_query_device(c_, &phys_port_cnt); }
    /** ibv_get_async_event: the event stays unacknowledged. */
    int32_t get_event(uint32_t &code, uint64_t &element) noexcept { return rw_sim_get_event(c_, &code, &element); }
    /** ibv_ack_async_event of the oldest unacknowledged event. */
    int32_t ack_event() noexcept { return rw_sim_ack_event(c_); }
    /** get_event then ack_event: a reader for machine::drain. */
    int32_t next_event(uint32_t &code, uint64_t &element) noexcept {
        return rw_sim_next_event(c_, &code, &element);
    }
    /** ibv_query_port's state and link. */
    int32_t query_port(uint32_t port, rw_sim_port_attr &attr) noexcept { return rw_sim_query_port(c_, port, &attr); }
    /** The port's address (its gids valid until the next call). */
    int32_t query_address(uint32_t port, rw_port_address &address) noexcept {
        return rw_sim_query_address(c_, port, &address);
    }
    /** The port's flap counters. */
    int32_t query_counters(uint32_t port, rw_sim_port_counters &counters) noexcept {
        return rw_sim_query_counters(c_, port, &counters);
    }

private:
    rw_sim_context *c_ = nullptr;
};

/** A simulated host (real pipes as async fds), for tests and demos of
 *  both embeddings: a monitor over it, or an engine's own loop opening its
 *  devices (open, device_list, uevents). Any thread may script it. */
class sim {
public:
    sim() { detail::check(rw_sim_new(&s_), "rw_sim_new"); }
    sim(sim &&o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
    sim &operator=(sim &&o) noexcept {
        if (this != &o) {
            rw_sim_free(&s_);
            s_ = std::exchange(o.s_, nullptr);
        }
        return *this;
    }
    sim(const sim &) = delete;
    sim &operator=(const sim &) = delete;
    ~sim() { rw_sim_free(&s_); }

    explicit operator bool() const noexcept { return s_ != nullptr; }
    rw_sim *get() const noexcept { return s_; }

    /** A device with ports 1..=nports, ACTIVE at 400 Gb/s; its index. */
    uint32_t add_device(std::string_view name, uint32_t nports) {
        uint32_t d = 0;
        const std::string n = detail::c_name(name, "rw_sim_add_device");
        detail::check(rw_sim_add_device(s_, n.c_str(), nports, &d), "rw_sim_add_device");
        return d;
    }
    void push_event(uint32_t device, uint32_t code, uint64_t element, uint64_t repeat = 1) const {
        detail::check(rw_sim_push_event(s_, device, code, element, repeat), "rw_sim_push_event");
    }
    /** What a port query returns from now on, without an event. */
    void set_port_state(uint32_t device, uint32_t port, uint32_t state) const {
        detail::check(rw_sim_set_port_state(s_, device, port, state), "rw_sim_set_port_state");
    }
    void port_down(uint32_t device, uint32_t port) const {
        detail::check(rw_sim_port_down(s_, device, port), "rw_sim_port_down");
    }
    void port_up(uint32_t device, uint32_t port) const {
        detail::check(rw_sim_port_up(s_, device, port), "rw_sim_port_up");
    }
    void eintr(uint32_t device, uint64_t n) const { detail::check(rw_sim_eintr(s_, device, n), "rw_sim_eintr"); }
    void eio(uint32_t device) const { detail::check(rw_sim_eio(s_, device), "rw_sim_eio"); }
    void unplug(uint32_t device) const { detail::check(rw_sim_unplug(s_, device), "rw_sim_unplug"); }
    void plug(uint32_t device) const { detail::check(rw_sim_plug(s_, device), "rw_sim_plug"); }
    rw_sim_counters counters(uint32_t device) const {
        rw_sim_counters c{};
        detail::check(rw_sim_get_counters(s_, device, &c), "rw_sim_get_counters");
        return c;
    }
    /** The port's link from now on, silently. */
    void set_link(uint32_t device, uint32_t port, uint32_t speed, uint8_t width) const {
        detail::check(rw_sim_set_link(s_, device, port, speed, width), "rw_sim_set_link");
    }
    /** GID table entry `index` of the port (nullopt empties it), silently. */
    void set_gid(uint32_t device, uint32_t port, uint32_t index, std::optional<std::array<uint8_t, 16>> gid) const {
        detail::check(rw_sim_set_gid(s_, device, port, index, gid ? gid->data() : nullptr), "rw_sim_set_gid");
    }
    /** The port's flap counters from now on (RW_COUNTER_NONE: absent). */
    void set_flap_counters(uint32_t device, uint32_t port, uint64_t link_downed,
                           uint64_t carrier_changes = RW_COUNTER_NONE, uint64_t carrier_down = RW_COUNTER_NONE) const {
        detail::check(rw_sim_set_flap_counters(s_, device, port, link_downed, carrier_changes, carrier_down),
                      "rw_sim_set_flap_counters");
    }
    /** The device goes away under its opener (EPOLLHUP) until restore(). */
    void hang_up(uint32_t device) const { detail::check(rw_sim_hang_up(s_, device), "rw_sim_hang_up"); }
    void restore(uint32_t device) const { detail::check(rw_sim_restore(s_, device), "rw_sim_restore"); }

    /** The names the host lists now (ibv_get_device_list's). */
    std::vector<std::string> device_list() const {
        std::vector<const char *> names(8);
        for (;;) {
            size_t n = 0;
            const rw_status st = rw_sim_device_list(s_, names.data(), names.size(), &n);
            if (st == RW_ERR_BUFFER && n > names.size()) {
                names.resize(n);
                continue;
            }
            detail::check(st, "rw_sim_device_list");
            return std::vector<std::string>(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(n));
        }
    }
    /** Opens the device called `name` as ibv_open_device would, into
     *  `out`: 0, or the errno (ENODEV not listed or hung up, EBUSY open;
     *  EINVAL for a name with a NUL inside). */
    int32_t open(std::string_view name, sim_context &out) const noexcept {
        if (name.find('\0') != std::string_view::npos) return EINVAL;
        const std::string n(name);
        rw_sim_context *c = nullptr;
        const int32_t err = rw_sim_open(s_, n.c_str(), &c);
        if (err == 0) out = sim_context(c);
        return err;
    }
    /** The host's uevent twin: readable after every plug and unplug. */
    railwatch::uevents uevents() const {
        rw_uevents *u = nullptr;
        detail::check(rw_sim_uevents_open(s_, &u), "rw_sim_uevents_open");
        return railwatch::uevents(u);
    }

private:
    rw_sim *s_ = nullptr;
};

// ---- embedding 2: railwatch owns a thread -------------------------------------

/** The engine's rail selector, called on the monitor thread. Exceptions
 *  are caught at the boundary (and counted, see callback_exceptions()). */
class selector {
public:
    virtual ~selector() = default;
    /** Rail (device, port) may (or may no longer) be picked. */
    virtual void set_available(uint32_t device, uint32_t port, bool available) = 0;
    /** The rail's rate, Mb/s (0: unknown): before the rail is made
     *  available when its rate was never told since its device attached,
     *  or changed (not again when it comes back at the rate it had). */
    virtual void reseed(uint32_t device, uint32_t port, uint64_t rate_mbps) = 0;
};

/** A selector made of two std::functions (either may be empty). */
class function_selector : public selector {
public:
    std::function<void(uint32_t, uint32_t, bool)> on_available;
    std::function<void(uint32_t, uint32_t, uint64_t)> on_reseed;

    function_selector() = default;
    function_selector(std::function<void(uint32_t, uint32_t, bool)> a,
                      std::function<void(uint32_t, uint32_t, uint64_t)> r)
        : on_available(std::move(a)), on_reseed(std::move(r)) {}
    void set_available(uint32_t d, uint32_t p, bool available) override {
        if (on_available) on_available(d, p, available);
    }
    void reseed(uint32_t d, uint32_t p, uint64_t rate) override {
        if (on_reseed) on_reseed(d, p, rate);
    }
};

namespace detail {

/*
 * Teardown: how stopping the monitor, resetting a subscription and the
 * library's calls into the wrapper stay out of each other's way.
 *
 * The locks, in the order a thread may hold them (it only ever waits for
 * a later one while holding an earlier one):
 *
 *   1. subscriber::in_call: held by subscriber::call() on the monitor
 *      thread while the subscription's function runs; the function may
 *      take lock 2 (stop the monitor, reset a subscription).
 *   2. monitor_core::mu: held only for short sections that wait for no
 *      callback: the bookkeeping around a free, and a reset()'s
 *      rw_monitor_unsubscribe.
 *   3. the library's own locks, inside rw_monitor_* calls.
 *
 * Why nothing can deadlock:
 *   - rw_monitor_free waits (from another thread) for the callbacks in
 *     flight, which may take lock 2; so it runs with no lock held, under
 *     the flag `freeing` instead, and the handle is taken out of the core
 *     (null) before it starts.
 *   - A callback never waits for a free in progress: that free may be
 *     waiting for it. Its stop() returns at once (the monitor is being
 *     stopped), its reset() leaves the subscriber to that free to delete
 *     (`orphans`).
 *   - reset() from another thread waits for lock 1 with nothing held,
 *     and sets `dead` under it; only then does it take lock 2. Its
 *     rw_monitor_unsubscribe waits for the library's in-call lock of the
 *     same subscriber, whose holder (the monitor thread in call()) now
 *     only takes that subscriber's lock 1, held by nobody, and skips the
 *     function: it never needs lock 2.
 *   - reset() inside its own callback does not take lock 1 (its thread
 *     holds it): it hands the delete to call(), which runs it once the
 *     function has returned.
 * (A callback that resets a subscription of another monitor waits for
 * that subscription's call in flight, as rw_monitor_unsubscribe does: two
 * such callbacks must not wait for each other.)
 */

/** How many selector or subscription calls this thread is inside. */
inline int &callback_depth() noexcept {
    thread_local int depth = 0;
    return depth;
}

/** Marks a callback on this thread for its scope. */
struct in_callback {
    in_callback() noexcept { ++callback_depth(); }
    ~in_callback() { --callback_depth(); }
    in_callback(const in_callback &) = delete;
    in_callback &operator=(const in_callback &) = delete;
};

struct subscriber;

/**
 * What a monitor object shares with its subscriptions and outlives its
 * moves: the C handle, the selector (the C selector's `user`) and the
 * teardown's bookkeeping. The monitor object keeps it until
 * rw_monitor_free has returned; after that the library calls neither the
 * selector nor any subscriber (also when freed from inside a callback).
 */
struct monitor_core {
    /** The C handle; null from the moment a free starts. */
    std::atomic<rw_monitor *> handle{nullptr};
    std::shared_ptr<railwatch::selector> sel;

    std::mutex mu;                    // lock 2: guards the fields below
    std::condition_variable freed;    // notified when `freeing` clears
    bool freeing = false;             // rw_monitor_free is running (outside mu)
    bool failed = false;              // it failed: the library may still call back
    subscriber *orphans = nullptr;    // reset meanwhile: deleted after the free

    /** Frees the handle (once; a no-op when already freed). Waits for a
     *  free in progress on another thread, except inside a callback. */
    rw_status free() noexcept;

    // The C selector's functions.
    static void set_available(void *user, uint32_t d, uint32_t p, bool available) noexcept {
        with_selector(user, [&](railwatch::selector &s) { s.set_available(d, p, available); });
    }
    static void reseed(void *user, uint32_t d, uint32_t p, uint64_t rate) noexcept {
        with_selector(user, [&](railwatch::selector &s) { s.reseed(d, p, rate); });
    }

private:
    template <class F>
    static void with_selector(void *user, F &&f) noexcept {
        // A reference of our own: if the selector destroys the monitor
        // (and with it the core), it still lives until it returns.
        const std::shared_ptr<railwatch::selector> sel = static_cast<monitor_core *>(user)->sel;
        in_callback mark;
        try {
            f(*sel);
        } catch (...) {
            swallowed().fetch_add(1, std::memory_order_relaxed);
        }
    }
};

/** One subscription's callback, owned by its subscription object (or,
 *  once that is reset, by whoever reset() hands it to). */
struct subscriber {
    std::function<void(const rw_notification &)> fn;
    std::mutex in_call;              // lock 1: held by call() around fn
    bool dead = false;               // under in_call: fn is not called again
    bool delete_after_call = false;  // under in_call: reset() inside fn, call() deletes it
    subscriber *next_orphan = nullptr;  // in monitor_core::orphans

    explicit subscriber(std::function<void(const rw_notification &)> f) : fn(std::move(f)) {}

    /** The subscriber whose function this thread is running, if any. */
    static subscriber *&running() noexcept {
        thread_local subscriber *current = nullptr;
        return current;
    }
    static void call(void *user, const rw_notification *n) noexcept {
        auto *s = static_cast<subscriber *>(user);
        bool delete_now = false;
        {
            std::lock_guard<std::mutex> l(s->in_call);
            if (!s->dead) {
                subscriber *outer = std::exchange(running(), s);
                in_callback mark;
                try {
                    s->fn(*n);
                } catch (...) {
                    swallowed().fetch_add(1, std::memory_order_relaxed);
                }
                running() = outer;
            }
            delete_now = s->delete_after_call;
        }
        // Not touched after the unlock (a reset() on another thread may
        // delete it from then on), unless reset() handed it to us.
        if (delete_now) delete s;
    }
};

inline rw_status monitor_core::free() noexcept {
    std::unique_lock<std::mutex> l(mu);
    while (freeing) {
        // Another thread is freeing it. A callback must not wait: that
        // free may be waiting for it, and the monitor is stopping anyway.
        if (callback_depth() > 0) return RW_OK;
        freed.wait(l);
    }
    rw_monitor *h = handle.exchange(nullptr, std::memory_order_acq_rel);
    if (!h) return RW_OK;
    freeing = true;
    l.unlock();
    // No lock held: from another thread this waits for the callbacks in
    // flight, and they may take mu.
    const rw_status st = rw_monitor_free(&h);
    l.lock();
    freeing = false;
    subscriber *gone = nullptr;
    if (st == RW_OK)
        gone = std::exchange(orphans, nullptr);  // nothing calls them any more
    else
        failed = true;  // the handle is gone, but the library may still call back: keep them
    l.unlock();
    freed.notify_all();
    while (gone) delete std::exchange(gone, gone->next_orphan);
    return st;
}

}  // namespace detail

class monitor;

/**
 * A subscription: while it lives, its function is called on the monitor
 * thread for every notification. Its destructor unsubscribes; from
 * another thread it waits for a call in flight, so that when it returns
 * the function has finished and is never called again. Destroying it from
 * inside its own callback is allowed (it is freed when the call returns).
 * It may outlive its monitor, and be destroyed while the monitor stops.
 */
class [[nodiscard]] subscription {
public:
    subscription() noexcept = default;
    subscription(subscription &&o) noexcept
        : core_(std::move(o.core_)), id_(std::exchange(o.id_, 0)), sub_(std::exchange(o.sub_, nullptr)) {}
    subscription &operator=(subscription &&o) noexcept {
        if (this != &o) {
            reset();
            core_ = std::move(o.core_);
            id_ = std::exchange(o.id_, 0);
            sub_ = std::exchange(o.sub_, nullptr);
        }
        return *this;
    }
    subscription(const subscription &) = delete;
    subscription &operator=(const subscription &) = delete;
    ~subscription() { reset(); }

    explicit operator bool() const noexcept { return sub_ != nullptr; }
    uint64_t id() const noexcept { return id_; }

    /** Unsubscribes now (as the destructor does). See "Teardown" in
     *  namespace detail for the locks. */
    void reset() noexcept {
        detail::subscriber *s = std::exchange(sub_, nullptr);
        if (!s) return;
        const std::shared_ptr<detail::monitor_core> core = std::move(core_);
        const uint64_t id = std::exchange(id_, 0);
        // Inside its own call (on the monitor thread, in_call held here)?
        const bool inside = detail::subscriber::running() == s;
        if (inside) {
            s->dead = true;
        } else {
            std::lock_guard<std::mutex> l(s->in_call);  // a call in flight finishes first
            s->dead = true;
        }
        // The function never runs again. Unsubscribe, under mu so that the
        // handle is not freed meanwhile; when the monitor is gone there is
        // nothing to unsubscribe from.
        if (core) {
            std::lock_guard<std::mutex> l(core->mu);
            if (rw_monitor *m = core->handle.load(std::memory_order_acquire)) {
                // No call after it; from another thread it waits for a
                // call() in flight, which skips the function.
                (void)rw_monitor_unsubscribe(m, id);
            } else if (core->freeing || core->failed) {
                // Being freed (or failed to be): the library may still
                // call it (skipping the function) until that free
                // returns, and the free deletes it then.
                s->next_orphan = std::exchange(core->orphans, s);
                return;
            }
        }
        if (inside)
            s->delete_after_call = true;  // freed when its call returns
        else
            delete s;
    }

private:
    friend class monitor;
    subscription(std::shared_ptr<detail::monitor_core> core, uint64_t id, detail::subscriber *sub) noexcept
        : core_(std::move(core)), id_(id), sub_(sub) {}

    std::shared_ptr<detail::monitor_core> core_;
    uint64_t id_ = 0;
    detail::subscriber *sub_ = nullptr;
};

/**
 * A monitor on its own thread. Start it over the simulator (start_sim) or
 * the host's libibverbs devices (start_verbs); its destructor stops it and
 * joins the thread (callbacks in flight finish first). Any thread may use
 * it, its own callbacks included: a callback may also stop or destroy it
 * (see stop()).
 */
class monitor {
public:
    monitor() noexcept = default;

    /** Over the devices of `s` (add them all first). `cfg` may be null;
     *  `sel` may be empty (no selector). */
    static monitor start_sim(const sim &s, const config *cfg = nullptr, std::shared_ptr<selector> sel = {}) {
        monitor m(std::move(sel));
        rw_monitor *h = nullptr;
        detail::check(rw_monitor_start_sim(cfg ? cfg->get() : nullptr, m.c_selector_ptr(), s.get(), &h),
                      "rw_monitor_start_sim");
        m.core_->handle.store(h, std::memory_order_release);
        return m;
    }
    /** Over the host's libibverbs devices (all, or only `only_device`). */
    static monitor start_verbs(const config *cfg = nullptr, std::shared_ptr<selector> sel = {},
                               std::optional<std::string_view> only_device = std::nullopt) {
        monitor m(std::move(sel));
        std::string only;
        if (only_device) only = detail::c_name(*only_device, "rw_monitor_start_verbs");
        rw_monitor *h = nullptr;
        detail::check(rw_monitor_start_verbs(cfg ? cfg->get() : nullptr, m.c_selector_ptr(),
                                             only_device ? only.c_str() : nullptr, &h),
                      "rw_monitor_start_verbs");
        m.core_->handle.store(h, std::memory_order_release);
        return m;
    }

    monitor(monitor &&o) noexcept : core_(std::move(o.core_)) {}
    monitor &operator=(monitor &&o) noexcept {
        if (this != &o) {
            free_quietly();
            core_ = std::move(o.core_);
        }
        return *this;
    }
    monitor(const monitor &) = delete;
    monitor &operator=(const monitor &) = delete;
    /** Stops the monitor as stop() does, then releases the selector
     *  (unless a subscription still holds it; the library no longer
     *  calls it either way). */
    ~monitor() { free_quietly(); }

    /** False once stopped (or stopping). */
    explicit operator bool() const noexcept { return handle() != nullptr; }
    rw_monitor *get() const noexcept { return handle(); }

    /**
     * Stops and joins now: callbacks in flight finish first, and none
     * runs after it returns. From one of the monitor's own callbacks
     * (selector or subscription) it stops the monitor and returns at
     * once: neither the selector nor any subscriber is called after it,
     * except that the calling callback runs to its end, and a short-lived
     * thread joins the monitor thread once it has returned. When another
     * thread is stopping the monitor at that moment, it waits for it;
     * inside a callback, which that thread may be waiting for, it
     * returns at once and leaves the stop to it.
     */
    void stop() {
        if (!core_) return;
        const rw_status st = core_->free();
        if (st != RW_OK) {
            keep_alive(core_);
            detail::check(st, "rw_monitor_free");
        }
    }

    /** Calls `fn` on the monitor thread for every notification from now
     *  on, until the returned subscription is destroyed. */
    subscription subscribe(std::function<void(const rw_notification &)> fn) const {
        auto *s = new detail::subscriber(std::move(fn));
        uint64_t id = 0;
        const rw_status st = rw_monitor_subscribe(handle(), &detail::subscriber::call, s, &id);
        if (st != RW_OK) {
            delete s;
            detail::check(st, "rw_monitor_subscribe");
        }
        return subscription(core_, id, s);
    }

    /** The gate of rail `name` ("mlx5_0/1"); throws RW_ERR_NOT_FOUND when
     *  there is no such rail (yet). */
    railwatch::gate gate(std::string_view name) const {
        rw_gate *g = nullptr;
        const std::string n = detail::c_name(name, "rw_monitor_gate");
        detail::check(rw_monitor_gate(handle(), n.c_str(), &g), "rw_monitor_gate");
        return railwatch::gate(g);
    }
    /** Transfer outcomes on rail `name` (rw_monitor_report_transfers);
     *  any thread, without waiting. */
    void report_transfers(std::string_view name, railwatch::span<const rw_transfer_report> reports) const {
        const std::string n = detail::c_name(name, "rw_monitor_report_transfers");
        detail::check(rw_monitor_report_transfers(handle(), n.c_str(), reports.data(), reports.size()),
                      "rw_monitor_report_transfers");
    }
    /** A granted probe's outcome on rail `name` (rw_monitor_report_probe). */
    void report_probe(std::string_view name, bool succeeded) const {
        const std::string n = detail::c_name(name, "rw_monitor_report_probe");
        detail::check(rw_monitor_report_probe(handle(), n.c_str(), succeeded), "rw_monitor_report_probe");
    }
    /** The same, nullopt instead of RW_ERR_NOT_FOUND. */
    std::optional<railwatch::gate> try_gate(std::string_view name) const {
        rw_gate *g = nullptr;
        const std::string n = detail::c_name(name, "rw_monitor_gate");
        const rw_status st = rw_monitor_gate(handle(), n.c_str(), &g);
        if (st == RW_ERR_NOT_FOUND) return std::nullopt;
        detail::check(st, "rw_monitor_gate");
        return railwatch::gate(g);
    }

    /** The latest snapshot's rails into `out`; their number. Throws
     *  RW_ERR_BUFFER (nothing copied) when `out` is too small, and
     *  RW_ERR_STATE before the first snapshot is published. */
    size_t snapshot(railwatch::span<rw_rail_info> out) const {
        size_t n = 0;
        detail::check(rw_monitor_snapshot(handle(), out.data(), out.size(), &n), "rw_monitor_snapshot");
        return n;
    }
    /** The latest snapshot's rails. */
    std::vector<rw_rail_info> snapshot() const {
        std::vector<rw_rail_info> rails(8);
        for (;;) {
            size_t n = 0;
            const rw_status st = rw_monitor_snapshot(handle(), rails.data(), rails.size(), &n);
            if (st == RW_ERR_BUFFER && n > rails.size()) {
                rails.resize(n);  // grew meanwhile: ask again
                continue;
            }
            detail::check(st, "rw_monitor_snapshot");
            rails.resize(n);
            return rails;
        }
    }
    /** The latest snapshot as JSON. */
    owned_string snapshot_json() const {
        char *s = nullptr;
        detail::check(rw_monitor_snapshot_json(handle(), &s), "rw_monitor_snapshot_json");
        return owned_string(s);
    }

private:
    explicit monitor(std::shared_ptr<selector> sel) : core_(std::make_shared<detail::monitor_core>()) {
        detail::check_layout();
        core_->sel = std::move(sel);
        c_sel_.user = core_.get();
        c_sel_.set_available = &detail::monitor_core::set_available;
        c_sel_.reseed = &detail::monitor_core::reseed;
    }
    /** The C selector (the library copies it at start), or null. */
    const rw_selector *c_selector_ptr() const noexcept { return core_->sel ? &c_sel_ : nullptr; }
    rw_monitor *handle() const noexcept { return core_ ? core_->handle.load(std::memory_order_acquire) : nullptr; }
    /** Stops it; only once rw_monitor_free has returned is the core (the
     *  selector's `user`) let go. */
    void free_quietly() noexcept {
        if (!core_) return;
        if (core_->free() != RW_OK) keep_alive(core_);
        core_.reset();
    }
    /** After a failed rw_monitor_free the library may still call the
     *  selector and subscribers: keep what they use alive for good rather
     *  than free it under them. */
    static void keep_alive(const std::shared_ptr<detail::monitor_core> &core) noexcept {
        new std::shared_ptr<detail::monitor_core>(core);
    }

    std::shared_ptr<detail::monitor_core> core_;
    rw_selector c_sel_{};
};

}  // namespace railwatch

#endif  // RAILWATCH_HPP
