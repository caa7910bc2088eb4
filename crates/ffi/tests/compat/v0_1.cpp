// v0_1.cpp: a C++ engine written against 0.1.0's railwatch.h and
// railwatch.hpp, unchanged (the C API called directly, as 0.1.0's
// examples/engine.cpp did beside the wrapper). It must still build, each
// deprecated name and form warning (cargo xtask ffi checks that each
// fires), and work. It takes the default settings (a null config, as
// 0.1.0 allowed): 0.2.0 made the config opaque, and an engine that set
// one moves as CHANGELOG.md says.
//
// Prints `ok - NAME` / `not ok - NAME: why` per check, then a summary;
// exits 0 iff every check passed.

#include "railwatch.hpp"

#include "../cpp/check.hpp"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

static void check_ok(rw_status s, const std::string &name) {
    check(s == RW_OK, name, std::string(rw_status_name(s)) + ": " + rw_last_error());
}

static constexpr uint32_t CODE_QP_FATAL = 1;  // IBV_EVENT_QP_FATAL
static constexpr uint64_t QP_HANDLE = 0x5150;

// What an engine of 0.1.0 did with a notification: 0.1.0's names in a
// switch, and in a variable of the enum's type.
static bool is_object_error(const rw_notification &n) {
    const rw_happening object_error = RW_HAPPENING_OBJECT_ERROR;
    switch (n.kind) {
    case RW_HAPPENING_OBJECT_ERROR: return n.kind == static_cast<uint32_t>(object_error);
    default: return false;
    }
}

// The machine: a QP's fatal error is told as 0.1.0 named it.
static void object_error() {
    rw_machine *m = nullptr;
    rw_gate *g = nullptr;
    rw_action a;
    uint32_t dev = 0;
    const uint8_t ports[] = {1};
    bool told = false;
    check_ok(rw_machine_new(nullptr, &m), "machine_new");
    check_ok(rw_machine_add_device(m, "mlx5_0", ports, 1, 0, &dev), "add_device");
    check_ok(rw_machine_handle_event(m, dev, CODE_QP_FATAL, QP_HANDLE, 1), "qp_fatal");
    while (rw_machine_poll_action(m, &a) == RW_OK && a.kind != RW_ACTION_NONE) {
        if (a.kind == RW_ACTION_NOTIFY && is_object_error(a.notification)) {
            told = a.notification.object_handle == QP_HANDLE;
        }
    }
    check(told, "object_error_told", "no RW_HAPPENING_OBJECT_ERROR for the QP");
    check_ok(rw_machine_gate(m, dev, 1, &g), "machine_gate");
    rw_gate_free(g);
    rw_machine_free(m);
}

// The monitor over the simulator, each handle destroyed as in 0.1.0.
static void destroys() {
    rw_sim *sim = nullptr;
    rw_monitor *mon = nullptr;
    rw_selector sel{nullptr, [](void *, uint32_t, uint32_t, bool) {}, [](void *, uint32_t, uint32_t, uint64_t) {}};
    char *json = nullptr;
    uint32_t dev = 0;
    check_ok(rw_sim_new(&sim), "sim_new");
    check_ok(rw_sim_add_device(sim, "mlx5_0", 1, &dev), "sim_add_device");
    check_ok(rw_monitor_start_sim(nullptr, &sel, sim, &mon), "monitor_start_sim");
    check_ok(rw_monitor_snapshot_json(mon, &json), "snapshot_json");
    check(json != nullptr && std::strstr(json, "mlx5_0") != nullptr, "snapshot_names_the_device",
          json ? json : "(null)");
    rw_string_free(json);
    check_ok(rw_monitor_free(mon), "monitor_free");
    rw_sim_free(sim);
}

int main() {
    object_error();
    destroys();
    std::printf("# %d passed, %d failed\n", passed, failed);
    return failed == 0 && passed > 0 ? 0 : 1;
}
