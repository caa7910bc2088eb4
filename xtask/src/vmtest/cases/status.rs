//! Case 1: what `status --json` reads of a port, against the kernel's view.

use super::super::json;
use super::{RAIL, Verdict};
use crate::vmtest::progress::CaseRun;

/// Case 1: `status --json` shows rxe0/1 as the kernel (and ibv_devinfo) does.
pub fn check_status(run: &CaseRun, v: &mut Verdict) {
    v.require(run.rc("status") == Some(0), format!("railwatch status exited {:?}", run.rc("status")));
    let out = run.out("status");
    let Some(row) = out.iter().find(|l| json::is(l, &[("kind", "rail"), ("rail", RAIL)])) else {
        v.fail("no rail line for rxe0/1");
        return;
    };
    let want = [
        ("device", "rxe0"),
        ("port", "1"),
        ("port_state", "active"),
        ("port_state_code", "4"),
        ("speed", "fdr10"),
        ("speed_code", "8"),
        ("width", "1x"),
        ("width_code", "1"),
    ];
    for (key, value) in want {
        v.require(json::raw(row, key) == Some(value), format!("rail {key} is {:?}, not {value}", json::raw(row, key)));
    }
    v.require(json::num(row, "bandwidth_gbps") == Some(10.0), format!("bandwidth_gbps not 10: {row}"));
    match out.last() {
        Some(last) if json::is(last, &[("kind", "status"), ("rails", "1"), ("errors", "0")]) => {
            v.require(json::raw(last, "devices") == Some("[\"rxe0\"]"), format!("status devices: {last}"));
        }
        other => v.fail(format!("the last line is not a status line with 1 rail, 0 errors: {other:?}")),
    }
    // The same port through ibv_devinfo (rdma-core's own tool).
    let devinfo = run.out("devinfo");
    let field =
        |name: &str| devinfo.iter().find_map(|l| l.trim().strip_prefix(name)?.trim().strip_prefix(':').map(str::trim));
    for (name, want) in [("state", "PORT_ACTIVE (4)"), ("active_width", "1X (1)"), ("active_speed", "10.0 Gbps (8)")] {
        v.require(field(name) == Some(want), format!("ibv_devinfo {name} is {:?}, not {want}", field(name)));
    }
    // The address, against the kernel's own view (sysfs).
    let sysfs = run.out("sysfs");
    let sys = |key: &str| sysfs.iter().find_map(|l| l.strip_prefix(key)?.strip_prefix('='));
    v.note(format!("kernel: rate {}, link layer {}", sys("rate").unwrap_or("?"), sys("link_layer").unwrap_or("?")));
    match json::raw(row, "address").filter(|a| *a != "null") {
        Some(address) => check_address(v, address, sys("link_layer"), sys("netdev"), &[(0, sys("gid0"))]),
        None => v.fail(format!("status --json has no address for rxe0/1: {row}")),
    }
    check_counters(run, v);
}

/// The flap counters, in this order: `link_downed`, `carrier_changes`,
/// `carrier_down`.
const COUNTERS: [&str; 3] = ["link_downed", "carrier_changes", "carrier_down"];

/// `status --json`'s flap counters of rxe0/1 before a pull of its cable,
/// while it is out and after it is back: each as sysfs read it at that
/// moment; a pull counts one link down (rxe's `link_downed` and the
/// netdev's `carrier_down_count`) and two carrier changes, down and up.
fn check_counters(run: &CaseRun, v: &mut Verdict) {
    let mut seen = Vec::new();
    for moment in ["before", "down", "up"] {
        let label = format!("status.{moment}");
        v.require(run.rc(&label) == Some(0), format!("status ({moment}) exited {:?}", run.rc(&label)));
        let ours = run.out(&label).into_iter().find(|l| json::is(l, &[("kind", "rail"), ("rail", RAIL)]));
        let sysfs = run.out(&format!("sysfs.{moment}"));
        let kernel = |key: &str| {
            sysfs.first()?.split(' ').find_map(|kv| kv.strip_prefix(key)?.strip_prefix('=')?.parse::<u64>().ok())
        };
        let mut values = [0u64; 3];
        for (i, key) in COUNTERS.iter().enumerate() {
            let got = ours.and_then(|l| json::num(l, key)).map(|n| n as u64);
            v.require(
                got.is_some() && got == kernel(key),
                format!("status ({moment}): {key} {got:?}, sysfs {:?}", kernel(key)),
            );
            values[i] = got.unwrap_or(0);
        }
        seen.push(values);
    }
    let [before, down, up] = [seen[0], seen[1], seen[2]];
    let moved = |a: [u64; 3], b: [u64; 3]| [b[0].wrapping_sub(a[0]), b[1].wrapping_sub(a[1]), b[2].wrapping_sub(a[2])];
    v.require(
        moved(before, down) == [1, 1, 1],
        format!("the pull moved the counters by {:?}, not [1, 1, 1]", moved(before, down)),
    );
    v.require(moved(down, up) == [0, 1, 0], format!("the return moved them by {:?}, not [0, 1, 0]", moved(down, up)));
    v.note(format!("flap counters (link_downed, carrier_changes, carrier_down): {before:?} -> {down:?} -> {up:?}"));
}

/// A rail's `address` object against the kernel's: link layer, LID 0,
/// netdev, and the GID entries `(index, sysfs text)` given.
pub fn check_address(
    v: &mut Verdict,
    address: &str,
    link_layer: Option<&str>,
    netdev: Option<&str>,
    gids: &[(u32, Option<&str>)],
) {
    let ll = json::raw(address, "link_layer");
    v.require(
        ll.is_some() && ll.map(str::to_lowercase) == link_layer.map(str::to_lowercase),
        format!("address link_layer {ll:?}, the kernel says {link_layer:?}"),
    );
    v.require(json::raw(address, "lid") == Some("0"), format!("address lid not 0 on RoCE: {address}"));
    v.require(json::raw(address, "netdev") == netdev, format!("address netdev, the kernel says {netdev:?}: {address}"));
    for (index, kernel) in gids {
        let entry = json::object_with(address, &format!("\"index\":{index},"));
        let parsed = |text: Option<&str>| text.and_then(|t| t.parse::<std::net::Ipv6Addr>().ok());
        let ours = parsed(entry.and_then(|e| json::raw(e, "gid")));
        v.require(
            ours.is_some() && ours == parsed(*kernel),
            format!("address GID[{index}] {:?}, the kernel says {kernel:?}: {address}", entry),
        );
        v.require(
            entry.and_then(|e| json::raw(e, "type")) == Some("roce_v2"),
            format!("address GID[{index}] is not roce_v2: {entry:?}"),
        );
    }
}
