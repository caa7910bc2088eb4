# Helpers of the traffic cases (busybox sh), sourced after lib.sh: the
# traffic engine (crates/ffi/examples/traffic) in the background, the
# timing reference (rdma-core's ibv_asyncwatch, each line stamped as it
# arrives) and the case's own actions, all on one clock (CLOCK_MONOTONIC
# in ns: `stamp`). The host computes the figures from these outputs
# (xtask/src/vmtest/cases/traffic.rs). Every wait here is bounded; the
# cases' sleeps are the scenario's own durations (a cable out for 2 s,
# traffic between two pulls), never a wait for something to happen.

TE=/usr/local/bin/traffic_engine
STAMP=/usr/local/bin/stamp
# The traffic every case runs: paced, so that the emulated kernel's own
# Soft-RoCE and network work keeps the CPU it needs, and from one worker
# thread: two threads posting at once on rxe (6.1, emulated) livelocked its
# requester for ~30 s in about one pull in ten (soft lockups, both vCPUs).
TE_ARGS="--rate 500 --depth 4 --workers 1 --pairs 4"

# mark WHAT...: "NS WHAT..." into ./marks: what the case did, and when.
mark() { $STAMP "$@" >>marks; }

# out LABEL FILE: FILE as "OUT LABEL line" lines, in one go (a shell loop
# per line is slow under emulation).
out() {
    [ -f "$2" ] || return 0
    sed "s/^/OUT $1 /" "$2" >&3
}

# engine_start LABEL ARGS...: the engine in the background (./LABEL.out,
# ./LABEL.err, pid in $EPID, output in $E), waiting until both rails have
# their first set of QPs; 1 (and a FAIL) if they do not within 20 s.
engine_start() {
    _label=$1
    shift
    E=$PWD/$_label.out
    mark engine_start "$_label"
    # shellcheck disable=SC2086 # TE_ARGS are separate words
    $TE $TE_ARGS "$@" >"$E" 2>"$PWD/$_label.err" &
    EPID=$!
    # Its event loop (the main thread: renice moves that thread only) at
    # the reference's priority, ahead of its own workers, as an engine
    # would run its monitor thread.
    renice -n -10 -p "$EPID" >/dev/null
    expect_line "rail A's first QP set ($_label)" 20 "$E" 0 '"kind":"set"' '"rail":"A"' &&
        expect_line "rail B's first QP set ($_label)" 20 "$E" 0 '"kind":"set"' '"rail":"B"'
}

# engine_stop LABEL: SIGTERM, a bounded wait (then SIGKILL), its exit
# status and output.
engine_stop() {
    mark engine_stop "$1"
    kill -TERM "$EPID" 2>/dev/null
    if ! until_ok 20 gone "$EPID"; then
        fail "the traffic engine ($1) still running 20 s after SIGTERM: killed"
        kill -KILL "$EPID" 2>/dev/null
    fi
    wait "$EPID"
    say "RC $1 $?"
    out "$1" "$PWD/$1.out"
    out "$1.err" "$PWD/$1.err"
    EPID=
}

# responder_start: the far ends of both rails (rxe1, rxe3) served by a
# process of their own (`traffic_engine --serve-peers`, ./responder.out,
# pid in $RPID; its socket in $PEERS), so that an engine started with
# `--peers-at "$PEERS"` never opens them: it sees none of their events, as
# with NICs on another host. Waits for its first line.
PEERS=/tmp/peers.sock
responder_start() {
    mark responder_start
    $TE --serve-peers "$PEERS" >responder.out 2>responder.err &
    RPID=$!
    expect_line "the responder's first line" $WAIT responder.out 0 '"kind":"serving"'
}

# responder_stop: SIGTERM, a bounded wait, its exit status and output.
responder_stop() {
    kill -TERM "$RPID" 2>/dev/null
    until_ok $WAIT gone "$RPID" || kill -KILL "$RPID" 2>/dev/null
    wait "$RPID"
    say "RC responder $?"
    out responder responder.out
    out responder.err responder.err
    RPID=
}

# asyncwatch_start DEV: ibv_asyncwatch on DEV, line-buffered, through a
# fifo into `stamp` (./aw.DEV); waits for its first line.
asyncwatch_start() {
    rm -f "aw.$1.fifo"
    mkfifo "aw.$1.fifo"
    $STAMP <"aw.$1.fifo" >"aw.$1" &
    _spid=$!
    stdbuf -oL ibv_asyncwatch -d "$1" >"aw.$1.fifo" &
    APID=$!
    # As the reference it goes ahead of the engine's threads (two processes,
    # the print then its stamp, against the engine's one wake-up); beside
    # the kernel's trace it is only a cross-check and yields to the engine,
    # which it would otherwise delay on the same event.
    if [ "$KTRACE" = 1 ]; then
        renice -n 10 -p "$_spid" "$APID" >/dev/null
    else
        renice -n -10 -p "$_spid" "$APID" >/dev/null
    fi
    expect_line "ibv_asyncwatch's first line" $WAIT "aw.$1" 0 "async event FD"
}

asyncwatch_stop() {
    kill -TERM "$APID" 2>/dev/null
    wait "$APID" 2>/dev/null
    APID=
    out "aw.$1" "aw.$1"
}

# ktrace_start: the kernel's own time of each RDMA async event, the
# figures' reference: a kprobe on ib_dispatch_event (where a driver raises
# it, before uverbs queues it to any reader) recording the event type
# (struct ib_event's `event`, at offset 16), on the tracing "mono" clock
# (CLOCK_MONOTONIC, the clock of `stamp` and the engine). A note, not a
# failure, when the kernel refuses it: the host then measures against
# ibv_asyncwatch's stamped lines and says so. KTRACE=1 while it is in
# force: start it before asyncwatch_start, which reads that.
KT=/sys/kernel/tracing
KTRACE=0
ktrace_start() {
    [ -d $KT/events ] || mount -t tracefs tracefs $KT 2>ktrace.err
    if ! [ -d $KT/events ]; then
        note "no tracefs ($(cat ktrace.err)): the reference is ibv_asyncwatch"
        return 0
    fi
    echo mono >$KT/trace_clock 2>>ktrace.err
    if echo 'p:rw/ib_event ib_dispatch_event event=+16(%di):u32' >$KT/kprobe_events 2>>ktrace.err &&
        echo 1 >$KT/events/rw/ib_event/enable 2>>ktrace.err; then
        echo 1 >$KT/tracing_on
        KTRACE=1
    else
        note "no kprobe on ib_dispatch_event ($(tr '\n' ' ' <ktrace.err); $(tail -n 3 $KT/error_log 2>/dev/null | tr '\n' ' ')): the reference is ibv_asyncwatch"
    fi
}

# ktrace_stop: the trace as "OUT ktrace" lines; the probe removed and the
# buffer emptied, so the next case starts clean (an enabled probe cannot be
# replaced: the next ktrace_start would fail).
ktrace_stop() {
    [ -f $KT/trace ] || return 0
    echo 0 >$KT/tracing_on 2>/dev/null
    grep 'ib_event:' $KT/trace >ktrace 2>/dev/null
    out ktrace ktrace
    echo 0 >$KT/events/rw/ib_event/enable 2>/dev/null
    echo >$KT/kprobe_events 2>/dev/null
    echo >$KT/trace 2>/dev/null
}

# gate_line LABEL AFTER DEV ADMITS: waits (bounded) for the engine to say
# DEV's gate admits (true) or refuses (false) after line AFTER of its
# output.
gate_line() {
    expect_line "$3's gate admits=$4 ($1)" $WAIT "$E" "$2" '"kind":"gate"' "\"device\":\"$3\"" "\"admits\":$4"
}

# new_set LABEL AFTER RAIL: waits (bounded) for a new QP set on RAIL.
new_set() {
    expect_line "a new QP set on rail $3 ($1)" $WAIT "$E" "$2" '"kind":"set"' "\"rail\":\"$3\""
}

# port_state DEV: the kernel's word for DEV's port 1 ("ACTIVE", "DOWN").
port_state() { cut -d' ' -f2 "/sys/class/infiniband/$1/ports/1/state" 2>/dev/null; }

# pull_cable PORT / plug_cable PORT: a bridge port down or up, marked.
pull_cable() {
    mark pull "$1"
    $IP link set "$1" down
}
plug_cable() {
    mark plug "$1"
    $IP link set "$1" up
}

# traffic_cleanup: the engine and the reference stopped if still running.
traffic_cleanup() {
    for _p in $EPID $APID $RPID; do gone "$_p" || kill -KILL "$_p" 2>/dev/null; done
    out marks marks
}

# repeat N CMD...: CMD N times, stopping at the first that fails (1).
repeat() {
    _n=$1 _i=0
    shift
    while [ $_i -lt "$_n" ]; do
        _i=$((_i + 1))
        "$@" || return 1
    done
}

# pulls LABEL N: N pulls of rail A's cable (p0, the cable of rxe0), each
# 2 s from the moment the engine's gate of rxe0 closed; after each plug,
# wait for the engine's new QP set on A, then 0.3 s of traffic on it. 1
# when a wait timed out.
pulls() { repeat "$2" pull_once "$1"; }
pull_once() {
    _at=$(lines "$E")
    pull_cable p0
    gate_line "$1" "$_at" rxe0 false || return 1
    sleep 2
    _at=$(lines "$E")
    plug_cable p0
    new_set "$1" "$_at" A || return 1
    sleep 0.3
}

# peer_pulls LABEL N breaker|none: N pulls of rail A's far end (p1, the
# cable of rxe1, which the responder serves): rxe0's port stays ACTIVE
# while its QPs fail. With a breaker, every pull must open it (rxe0's gate
# closes; 1 and a FAIL if not), the cable goes back 2 s after, and a probe
# must close it (a new QP set on A, bounded). Without (the seed's loop),
# the cable goes back 2.5 s after the pull and A's new set is waited for
# without a FAIL: the host judges what the loop did. 1 when a wait failed.
peer_pulls() { repeat "$2" peer_pull_once "$1" "$3"; }
peer_pull_once() {
    _at=$(lines "$E")
    pull_cable p1
    if [ "$2" = breaker ]; then
        gate_line "$1" "$_at" rxe0 false || return 1
        sleep 2
    else
        sleep 2.5
    fi
    _at=$(lines "$E")
    plug_cable p1
    if [ "$2" = breaker ]; then
        expect_line "a new QP set on rail A after a probe ($1)" 20 "$E" "$_at" '"kind":"set"' '"rail":"A"' || return 1
    else
        until_ok 5 has "$E" "$_at" '"kind":"set"' '"rail":"A"'
    fi
    sleep 0.3
}

# timed_delete DEV: `rdma link delete DEV` in the background, marked when
# it starts and returns (with its exit status); 1 (and a FAIL) when it is
# still blocked after 5 s (someone holds DEV open). $DPID: its pid, which
# lib.sh's cleanup waits for.
timed_delete() {
    (
        mark delete_start "$1"
        rdma link delete "$1"
        mark delete_done "$1" $?
    ) &
    DPID=$!
    until_ok 5 gone "$DPID" && DPID= && return 0
    fail "rdma link delete $1 still blocked after 5 s"
    return 1
}

# burst_pull LABEL: a pull of rail A during which the engine moves its idle
# QPs to SQD (SIGUSR1): their SQ_DRAINED queue on rxe0's async fd ahead of
# the PORT_ACTIVE; the cable goes back once the burst is done and 2 s have
# passed. $AT: the engine's output lines at the plug.
burst_pull() {
    _at=$(lines "$E")
    pull_cable p0
    gate_line "$1" "$_at" rxe0 false || return 1
    mark burst
    kill -USR1 "$EPID"
    expect_line "the burst ($1)" 30 "$E" "$_at" '"kind":"burst"' || return 1
    sleep 2
    AT=$(lines "$E")
    plug_cable p0
}
