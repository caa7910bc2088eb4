# Case 15: `railwatch watch` with require_address = "roce_v2_ipv4" (a
# config file): rxe0/1 is used only while veth0 has an IPv4 address, and
# names the index of its RoCE v2 GID. A second address (another subnet: a
# secondary address of the same one would go with the primary), then the
# first deleted: the index moves, the rail stays. The last deleted: the
# rail pauses (no_address). Another added: it comes back, with that GID's
# index. The kernel's GID table (sysfs) is read at each step.
P=/sys/class/infiniband/rxe0/ports/1
printf 'require_address = "roce_v2_ipv4"\n' >ra.toml
# v4_index A.B.C.D: the index of the GID ::ffff:A.B.C.D (sysfs), among the
# first 16 (the kernel fills the lowest free; the table has hundreds, too
# many to read one by one under emulation).
v4_index() {
    # shellcheck disable=SC2046 # the four numbers are separate words
    _hex=$(printf '%02x%02x:%02x%02x' $(echo "$1" | tr . ' '))
    _g=$(grep -l "ffff:$_hex\$" $P/gids/[0-9] $P/gids/1[0-5] 2>/dev/null | head -n 1)
    [ -n "$_g" ] && basename "$_g"
}
# addr add|del A.B.C.D: on veth0, waiting (bounded) for its GID to come or go.
addr() {
    $IP addr "$1" "$2/24" dev veth0 || fail "ip addr $1 $2 failed"
    if [ "$1" = add ]; then
        until_ok $WAIT v4_index "$2" >/dev/null || fail "no GID for $2"
    else
        until_ok $WAIT no_gid "$2" || fail "the GID of $2 is still there"
    fi
}
no_gid() { ! v4_index "$1" >/dev/null; }
sys_index() { say "OUT sysfs $1 $(v4_index "$2" || echo none)"; }
addr add 10.1.1.1
sys_index start 10.1.1.1
watch_start --config ra.toml
expect_line "gid_index of rxe0/1" $WAIT "$W" 0 '"kind":"gid_index"' '"rail":"rxe0/1"'
addr add 10.1.2.2
step watch "$W" move
addr del 10.1.1.1
sys_index moved 10.1.2.2
expect_line "gid_index moved" $WAIT "$W" "$AT" '"kind":"gid_index"' '"rail":"rxe0/1"'
step watch "$W" del
addr del 10.1.2.2
expect_line "no_address pause" $WAIT "$W" "$AT" '"kind":"transition"' '"rail":"rxe0/1"' '"reason":"no_address"'
step watch "$W" add
addr add 10.1.3.3
sys_index back 10.1.3.3
expect_line "rxe0/1 back" $WAIT "$W" "$AT" '"kind":"transition"' '"rail":"rxe0/1"' '"to":"active"'
expect_line "gid_index after the add" $WAIT "$W" "$AT" '"kind":"gid_index"' '"rail":"rxe0/1"'
watch_stop
$IP addr del 10.1.3.3/24 dev veth0
