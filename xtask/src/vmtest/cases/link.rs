//! A live rail's link and address events: the flap (case 2), the same
//! through `/metrics` (case 9), a GID change (case 6), the address a rail
//! requires (case 15).

use super::super::json;
use super::status::check_address;
use super::watch::{check_watch, count, find, generation, generation_before};
use super::{RAIL, Verdict};
use crate::vmtest::progress::CaseRun;

/// Case 2: down -> PORT_ERR -> paused; up -> PORT_ACTIVE (x2) -> active,
/// generation bumped, available; the second PORT_ACTIVE changes nothing.
pub fn check_flap(run: &CaseRun, v: &mut Verdict) {
    let w = check_watch(run, v, RAIL, "active", true);
    let (Some(down), Some(up)) = (run.step("watch", "down"), run.step("watch", "up")) else {
        v.fail("the guest recorded no down/up steps");
        return;
    };
    let rail = ("rail", RAIL);
    match find(&w, down, &[("kind", "event"), ("event", "port_err"), ("code", "10"), rail]) {
        Some(i) => {
            v.require(i < up, "the PORT_ERR came after the link was brought up");
        }
        None => v.fail("no port_err event after veth0 went down"),
    }
    let Some(paused) = find(&w, down, &[("kind", "transition"), rail, ("to", "paused")]) else {
        v.fail("no transition to paused after veth0 went down");
        return;
    };
    v.require(
        json::is(w[paused], &[("from", "active"), ("reason", "port_err")]),
        format!("the pause is not active -> paused because port_err: {}", w[paused]),
    );
    v.require(
        find(&w, paused, &[("kind", "available"), rail, ("available", "false")]).is_some(),
        "no available:false after the pause",
    );
    let port_active = count(&w, up, &[("kind", "event"), ("event", "port_active"), ("code", "9"), rail]);
    v.require(port_active >= 1, "no port_active event after veth0 came up");
    v.note(format!("railwatch read PORT_ACTIVE {port_active} time(s) after the link came up (KERNEL.md: 2)"));
    let Some(active) = find(&w, up, &[("kind", "transition"), rail, ("from", "paused"), ("to", "active")]) else {
        v.fail("no transition paused -> active after veth0 came up");
        return;
    };
    v.require(json::raw(w[active], "by") == Some("event"), format!("reactivated not by event: {}", w[active]));
    let before = generation_before(&w, RAIL, active);
    v.require(
        generation(w[active]).zip(before).is_some_and(|(now, was)| now > was),
        format!("no generation bump on reactivation ({before:?} -> {:?})", generation(w[active])),
    );
    v.require(
        find(&w, active, &[("kind", "available"), rail, ("available", "true")]).is_some(),
        "no available:true after the reactivation",
    );
    // The second PORT_ACTIVE (and any GID_CHANGE) must not pause the rail.
    for l in &w[active + 1..] {
        if json::is(l, &[("kind", "transition"), rail]) {
            if json::raw(l, "to") == Some("active") {
                v.note(format!("after the reactivation: {l}"));
            } else {
                v.fail(format!("the rail left active after the reactivation: {l}"));
            }
        }
    }
    // ibv_asyncwatch saw the same kernel events on its own context.
    let aw = run.out("asyncwatch");
    let seen = |name: &str| aw.iter().filter(|l| l.contains(name)).count();
    if aw.iter().any(|l| l.contains("event")) {
        let ours = |name: &str| count(&w, 0, &[("kind", "event"), ("event", name), rail]);
        v.note(format!(
            "ibv_asyncwatch: PORT_ERR x{}, PORT_ACTIVE x{}, GID_CHANGE x{}; railwatch: x{}, x{}, x{}",
            seen("PORT_ERR"),
            seen("PORT_ACTIVE"),
            seen("GID_CHANGE"),
            ours("port_err"),
            ours("port_active"),
            ours("gid_change"),
        ));
        v.require(
            seen("PORT_ERR") == ours("port_err") && seen("PORT_ACTIVE") == ours("port_active"),
            "railwatch and ibv_asyncwatch read different PORT_ERR/PORT_ACTIVE counts",
        );
    } else {
        v.note("ibv_asyncwatch printed no events (nothing to compare)");
    }
}

/// Case 9: `watch --metrics-listen` in the guest; a veth0 flap reads 1, 0,
/// 1 in `railwatch_rail_available`, and the counters follow.
pub fn check_metrics(run: &CaseRun, v: &mut Verdict) {
    check_watch(run, v, RAIL, "active", true);
    let series = |scrape: &[&str], name: &str| -> Option<f64> {
        scrape.iter().find_map(|l| l.strip_prefix(name).and_then(|rest| rest.trim().parse().ok()))
    };
    let available = r#"railwatch_rail_available{device="rxe0",port="1"}"#;
    let (before, down, after) = (run.out("metrics.before"), run.out("metrics.down"), run.out("metrics.after"));
    for (what, scrape, want) in [("before", &before, 1.0), ("while down", &down, 0.0), ("after", &after, 1.0)] {
        v.require(
            series(scrape, available) == Some(want),
            format!("rail_available {what}: {:?}, want {want}", series(scrape, available)),
        );
    }
    let errs = r#"railwatch_async_events_total{device="rxe0",event="port_err"}"#;
    let actives = r#"railwatch_async_events_total{device="rxe0",event="port_active"}"#;
    v.require(
        series(&down, errs).is_some_and(|n| n >= 1.0),
        format!("no port_err counted while down: {:?}", series(&down, errs)),
    );
    v.require(
        series(&after, actives).is_some_and(|n| n >= 1.0),
        format!("no port_active counted after: {:?}", series(&after, actives)),
    );
    let by_event = r#"railwatch_transitions_total{device="rxe0",port="1",to="active",cause="event"}"#;
    v.require(
        series(&after, by_event) == Some(1.0),
        format!("reactivations by event after: {:?}", series(&after, by_event)),
    );
    let generation = r#"railwatch_rail_generation{device="rxe0",port="1"}"#;
    match (series(&before, generation), series(&after, generation)) {
        (Some(b), Some(a)) if a > b => v.note(format!("generation {b} -> {a}; {} lines per scrape", after.len())),
        other => v.fail(format!("no generation bump in /metrics: {other:?}")),
    }
}

/// Case 6: an IPv4 address -> GID_CHANGE -> a generation bump.
pub fn check_gid_change(run: &CaseRun, v: &mut Verdict) {
    let w = check_watch(run, v, RAIL, "active", true);
    let Some(added) = run.step("watch", "addr_add") else {
        v.fail("the guest recorded no addr_add step");
        return;
    };
    let rail = ("rail", RAIL);
    v.require(
        find(&w, added, &[("kind", "event"), ("event", "gid_change"), ("code", "18"), rail]).is_some(),
        "no gid_change event after the address was added",
    );
    match find(&w, added, &[("kind", "transition"), rail, ("reason", "gid_change")]) {
        Some(i) => {
            v.require(
                json::is(w[i], &[("from", "active"), ("to", "active")]),
                format!("the gid_change bump changed state: {}", w[i]),
            );
            let before = generation_before(&w, RAIL, i);
            v.require(
                generation(w[i]).zip(before).is_some_and(|(now, was)| now > was),
                format!("no generation bump ({before:?} -> {:?})", generation(w[i])),
            );
        }
        None => v.fail("no transition with reason gid_change after the address was added"),
    }
    let sysfs = run.out("sysfs");
    let sys = |key: &str| sysfs.iter().find_map(|l| l.strip_prefix(key)?.strip_prefix('='));
    v.require(
        sys("gid1").and_then(|g| g.parse::<std::net::Ipv6Addr>().ok()) == "::ffff:10.1.1.1".parse().ok(),
        format!("the kernel's GID[1] is not ::ffff:10.1.1.1: {sysfs:?}"),
    );
    // The new address, read again after the GID_CHANGE.
    match find(&w, added, &[("kind", "address"), ("rail", RAIL)]) {
        Some(i) => {
            let bumped = find(&w, added, &[("kind", "transition"), ("rail", RAIL), ("reason", "gid_change")]);
            v.require(
                bumped.is_some_and(|b| generation(w[b]) == generation(w[i])),
                format!("the address line's generation is not the bump's: {}", w[i]),
            );
            match json::raw(w[i], "address") {
                Some(address) => {
                    check_address(v, address, Some("ethernet"), sys("netdev"), &[(0, sys("gid0")), (1, sys("gid1"))])
                }
                None => v.fail(format!("the address line has no address: {}", w[i])),
            }
        }
        None => v.fail("no address line for rxe0/1 after the address was added"),
    }
    let n = count(&w, 0, &[("kind", "event"), ("event", "gid_change")]);
    v.note(format!("{n} gid_change event(s) in all (IPv6 link-local ones come and go)"));
}

/// Case 15: with `require_address = "roce_v2_ipv4"`, the rail names its
/// IPv4 GID's index; a second address and the first deleted move the
/// index without a pause; losing the last address pauses the rail
/// (`no_address`, out of the selector), another address brings it back
/// with that GID's index. Each index is the one the kernel's table shows.
pub fn check_require_address(run: &CaseRun, v: &mut Verdict) {
    let w = check_watch(run, v, RAIL, "active", true);
    let steps = ["move", "del", "add"].map(|s| run.step("watch", s));
    let [Some(moved), Some(del), Some(add)] = steps else {
        v.fail(format!("the guest recorded no move/del/add steps: {steps:?}"));
        return;
    };
    let sysfs = run.out("sysfs");
    let kernel = |moment: &str| sysfs.iter().find_map(|l| l.strip_prefix(moment)?.trim().parse::<u32>().ok());
    let rail = ("rail", RAIL);
    let index = |from: usize, to: usize| {
        w[from.min(w.len())..to.min(w.len())]
            .iter()
            .find(|l| json::is(l, &[("kind", "gid_index"), rail]))
            .and_then(|l| json::raw(l, "index")?.parse::<u32>().ok())
    };
    // Attached waiting for its address (never available without it).
    let attached = find(&w, 0, &[("kind", "transition"), rail]);
    v.require(
        attached.is_some_and(|i| json::is(w[i], &[("from", "inert"), ("to", "paused"), ("reason", "no_address")])),
        format!("the attach did not wait for the address: {:?}", attached.map(|i| w[i])),
    );
    let mut indices = Vec::new();
    for (what, from, to, moment) in [("at attach", 0, moved, "start"), ("moved", moved, del, "moved")] {
        let ours = index(from, to);
        v.require(
            ours.is_some() && ours == kernel(moment),
            format!("{what}: gid_index {ours:?}, the kernel's IPv4 GID is at {:?}", kernel(moment)),
        );
        indices.push(ours);
    }
    v.require(
        find(&w, moved, &[("kind", "transition"), rail, ("to", "paused")]).is_none_or(|i| i >= del),
        "the rail paused while it still had an IPv4 address",
    );
    match find(&w, del, &[("kind", "transition"), rail, ("reason", "no_address")]) {
        Some(i) => {
            v.require(
                json::is(w[i], &[("from", "active"), ("to", "paused")]) && i < add,
                format!("the address's loss is not active -> paused before the add: {}", w[i]),
            );
            v.require(
                find(&w, i, &[("kind", "available"), rail, ("available", "false")]).is_some_and(|a| a < add),
                "no available:false after the no_address pause",
            );
        }
        None => v.fail("no transition with reason no_address after the last address was deleted"),
    }
    match find(&w, add, &[("kind", "transition"), rail, ("from", "paused"), ("to", "active")]) {
        Some(i) => {
            let back = index(i, w.len());
            v.require(
                back.is_some() && back == kernel("back"),
                format!("back: gid_index {back:?}, the kernel's new IPv4 GID is at {:?}", kernel("back")),
            );
            indices.push(back);
            v.note(format!("gid_index at attach, moved, back: {indices:?}; back {}", w[i]));
        }
        None => v.fail("no transition paused -> active after the new address was added"),
    }
}
