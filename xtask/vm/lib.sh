# Helpers for the guest's /init and case scripts (busybox sh), sourced.
# fd 3 is /dev/ttyS1, the host's results file. A case reports with:
#   OUT LABEL line      a line of a command's output (railwatch's JSON, ...)
#   STEP LABEL NAME at=N  the output LABEL had N lines when NAME was done
#   RC LABEL N          a command's exit status
#   TIME WHAT SECONDS   a measurement (milliseconds, as S.SSS)
#   NOTE text           said as is by the host
#   FAIL text           the case failed in the guest (a wait timed out, ...)
# and its exit status ($RC). Every wait is bounded; nothing sleeps to sync.

RW=/usr/local/bin/railwatch
IP=/usr/sbin/ip # by path: busybox's ip applet cannot create a veth pair
WAIT=10         # seconds: the default bound of a wait
RC=0

say() { echo "$*" >&3; }
fail() { say "FAIL $*"; RC=1; }
note() { say "NOTE $*"; }
now() { cut -d' ' -f1 /proc/uptime; }
# Monotonic milliseconds: the kernel's clock from /proc/timer_list ("now at
# N nsecs"), else /proc/uptime (10 ms steps).
ms() {
    _ns=$(sed -n '/^now at /{s/^now at \([0-9]*\) nsecs.*/\1/p;q}' /proc/timer_list 2>/dev/null)
    if [ -n "$_ns" ]; then
        echo $((_ns / 1000000))
    else
        _u=$(cut -d' ' -f1 /proc/uptime)
        echo $((${_u%.*} * 1000 + 1${_u#*.} * 10 - 1000))
    fi
}
# milliseconds -> "S.SSS" (negative as 0)
secs() {
    _m=$1
    [ "$_m" -ge 0 ] || _m=0
    printf '%d.%03d' $((_m / 1000)) $((_m % 1000))
}

# until_ok SECONDS CMD...: runs CMD every 20 ms until it succeeds (0) or
# SECONDS pass (1).
until_ok() {
    _end=$(($(ms) + $1 * 1000))
    shift
    while :; do
        "$@" && return 0
        [ "$(ms)" -ge "$_end" ] && return 1
        usleep 20000
    done
}

# gone PID: the process has exited (a zombie not yet reaped counts).
gone() {
    [ -e "/proc/$1/stat" ] || return 0
    _st=$(cut -d')' -f2 "/proc/$1/stat" 2>/dev/null | cut -d' ' -f2)
    [ -z "$_st" ] || [ "$_st" = Z ]
}

lines() { if [ -f "$1" ]; then echo $(($(wc -l <"$1"))); else echo 0; fi; }

# has FILE AFTER PAT...: a line of FILE after line AFTER contains every
# fixed string PAT.
has() {
    _f=$1 _a=$2
    shift 2
    _l=$(tail -n +$((_a + 1)) "$_f" 2>/dev/null)
    for _p in "$@"; do
        _l=$(printf '%s\n' "$_l" | grep -F -e "$_p") || return 1
    done
}

# count FILE AFTER PAT...: how many such lines.
count() {
    _f=$1 _a=$2
    shift 2
    _l=$(tail -n +$((_a + 1)) "$_f" 2>/dev/null)
    for _p in "$@"; do _l=$(printf '%s\n' "$_l" | grep -F -e "$_p"); done
    if [ -z "$_l" ]; then echo 0; else printf '%s\n' "$_l" | wc -l; fi
}

# expect_line WHAT SECONDS FILE AFTER PAT...: waits for such a line; a
# timeout is a FAIL naming WHAT.
expect_line() {
    _what=$1 _t=$2
    shift 2
    until_ok "$_t" has "$@" && return 0
    fail "no $_what within $_t s"
    return 1
}

# emit LABEL FILE: every line of FILE as "OUT LABEL line".
emit() {
    [ -f "$2" ] || return 0
    while IFS= read -r _line || [ -n "$_line" ]; do say "OUT $1 $_line"; done <"$2"
}

# step LABEL FILE NAME: FILE's line count now (also in $AT), so that the
# host (and the case) look for what NAME caused after it.
step() {
    AT=$(lines "$2")
    say "STEP $1 $3 at=$AT"
}

# ---- railwatch watch in the background ----

# watch_start: `railwatch watch --json` into ./watch.out, waiting (bounded)
# for rxe0/1's attach line.
watch_start() {
    W=$PWD/watch.out
    $RW watch --json "$@" >"$W" 2>"$PWD/watch.err" &
    WPID=$!
    expect_line "attach of rxe0/1 by railwatch watch" $WAIT "$W" 0 '"kind":"transition"' '"rail":"rxe0/1"' '"by":"attach"'
}

# watch_stop: SIGTERM (at $WSTOP), a bounded wait for the exit (then
# SIGKILL), its exit status and output.
watch_stop() {
    _t0=$(ms)
    WSTOP=$_t0
    kill -TERM "$WPID" 2>/dev/null
    if until_ok $WAIT gone "$WPID"; then
        say "TIME watch_exit_after_sigterm $(secs $(($(ms) - _t0)))"
    else
        fail "railwatch watch still running $WAIT s after SIGTERM: killed"
        kill -KILL "$WPID" 2>/dev/null
    fi
    wait "$WPID"
    say "RC watch $?"
    emit watch "$W"
    emit watch.err "$PWD/watch.err"
}

# timed_bg NAME CMD...: runs CMD in the background, timed from inside
# (start in $DSTART, pid in $DPID); bg_wait reports it.
timed_bg() {
    _n=$1
    shift
    DSTART=$(ms)
    (
        _t0=$(ms)
        "$@"
        _rc=$?
        echo "$(($(ms) - _t0)) $_rc" >"$_n.time"
    ) &
    DPID=$!
}

# bg_wait NAME SECONDS: waits (bounded) for timed_bg's command, then says
# "TIME NAME S" (how long the command took) and "RC NAME N"; 1 when it
# is still running.
bg_wait() {
    if until_ok "$2" gone "$DPID"; then
        wait "$DPID"
        read -r _ms _rc <"$1.time"
        say "TIME $1 $(secs "$_ms")"
        say "RC $1 $_rc"
        DPID=
        DEND=$((DSTART + _ms))
        return 0
    fi
    note "$1 still running after $2 s"
    return 1
}

# cleanup: ends what a case left running (railwatch, ibv_asyncwatch, the
# traffic engine) and waits (bounded) for a delete it started ($DPID).
cleanup() {
    for _p in $WPID $APID $EPID; do gone "$_p" || kill -KILL "$_p" 2>/dev/null; done
    if [ -n "$DPID" ] && ! until_ok $WAIT gone "$DPID"; then
        fail "a device removal is still blocked $WAIT s after the case"
    fi
}

# ---- the baseline every case starts from and leaves behind ----

port_active() { grep -q ACTIVE "/sys/class/infiniband/$1/ports/1/state" 2>/dev/null; }

# baseline [NEXT]: veth0/veth1 up, rxe0 on veth0 with port 1 ACTIVE, no
# rxe1, no address on veth0. The traffic cases' rails are taken down first,
# unless NEXT (the next case) is a traffic case and they are whole: it
# starts from them. Idempotent; 1 when it cannot be reached.
baseline() {
    if rails_present; then
        case "${1:-}" in traffic_*) rails_whole && return 0 ;; esac
        rails_down || return 1
    fi
    [ -e /sys/class/infiniband/rxe1 ] && rdma link delete rxe1
    if [ ! -e /sys/class/net/veth0 ]; then
        $IP link add veth0 type veth peer name veth1 || return 1
    fi
    $IP addr flush dev veth0 scope global 2>/dev/null
    $IP link set veth0 up && $IP link set veth1 up || return 1
    if [ ! -e /sys/class/infiniband/rxe0 ]; then
        rdma link add rxe0 type rxe netdev veth0 || return 1
    fi
    until_ok $WAIT port_active rxe0
}

# ---- two bridged rails, for the traffic cases ----
# Rail A: rxe0 on veth0 <-> rxe1 on veth1; rail B: rxe2 on veth2 <-> rxe3 on
# veth3. Each vethN's far end pN is a port of its rail's bridge (br0 for A,
# br1 for B), so `ip link set pN down` pulls vethN's cable: it loses
# carrier and stays admin up, as a real NIC does. Both ends of a rail are
# in this one namespace and connect with GID 0 (the fe80:: address from the
# MAC); IPv6 DAD is off while the rails exist, so that address is usable at
# once.
#
# The veths keep their IPv6 neighbour entries when the carrier goes
# (ndisc_evict_nocarrier 0; the kernel's default, 1, evicts them since
# 4.20). Why (docs/PERFORMANCE.md, "The first write after a pull"): rxe
# sends RoCE through the kernel's IP stack, so its retransmissions during a
# pull re-create the evicted entry, INCOMPLETE, and spend its solicitations
# on the dead link; nothing solicits it again once the cable is back, and
# the first connection after the pull waits up to a second for it. A NIC's
# own retransmissions never touch the table. The setting only keeps what
# was resolved (the peer is the same one behind the same cable); entries
# still age and fail as the kernel's neighbour discovery decides.

rails_present() { [ -e /sys/class/net/br0 ] || [ -e /sys/class/net/br1 ]; }

# rails_whole: all four ports ACTIVE, every cable in, no address added on
# the veths (a case may have added one).
rails_whole() {
    for _n in 0 1 2 3; do
        port_active rxe$_n || return 1
        grep -q 'up' /sys/class/net/p$_n/operstate 2>/dev/null || return 1
        $IP addr flush dev veth$_n scope global 2>/dev/null
    done
}

# rails_up: the two rails, from whatever is there (kept as they are when
# whole); 1 when they cannot be set up.
rails_up() {
    if rails_present; then
        rails_whole && return 0
        rails_down || return 1
    fi
    if [ -e /sys/class/infiniband/rxe1 ]; then rdma link delete rxe1 || return 1; fi
    if [ -e /sys/class/infiniband/rxe0 ]; then rdma link delete rxe0 || return 1; fi
    if [ -e /sys/class/net/veth0 ]; then $IP link del veth0 || return 1; fi
    for _f in default all; do echo 0 >"/proc/sys/net/ipv6/conf/$_f/accept_dad"; done
    $IP link set lo up
    for _b in br0 br1; do $IP link add $_b type bridge mcast_snooping 0 || return 1; done
    for _n in 0 1 2 3; do
        $IP link add veth$_n type veth peer name p$_n || return 1
        $IP link set p$_n master br$((_n / 2)) || return 1
        echo 0 >"/proc/sys/net/ipv6/conf/veth$_n/ndisc_evict_nocarrier" || return 1
    done
    for _d in br0 br1 p0 p1 p2 p3 veth0 veth1 veth2 veth3; do $IP link set $_d up || return 1; done
    for _n in 0 1 2 3; do rdma link add rxe$_n type rxe netdev veth$_n || return 1; done
    for _n in 0 1 2 3; do until_ok $WAIT port_active rxe$_n || return 1; done
}

# rails_down: the rails' devices, veths and bridges deleted, DAD back on.
rails_down() {
    for _n in 3 2 1 0; do
        if [ -e /sys/class/infiniband/rxe$_n ]; then rdma link delete rxe$_n || return 1; fi
    done
    for _n in 0 1 2 3; do
        if [ -e /sys/class/net/veth$_n ]; then $IP link del veth$_n || return 1; fi
    done
    for _b in br0 br1; do
        if [ -e /sys/class/net/$_b ]; then $IP link del $_b || return 1; fi
    done
    for _f in default all; do echo 1 >"/proc/sys/net/ipv6/conf/$_f/accept_dad"; done
}
