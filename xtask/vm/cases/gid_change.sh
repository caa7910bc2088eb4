# Case 6: an IPv4 address on veth0 while railwatch watches: the kernel adds
# GID ::ffff:10.1.1.1 and sends GID_CHANGE: a generation bump. (IPv6
# link-local addresses also make GID_CHANGE, at varying times: first wait
# for the fe80:: GID so that one is not mistaken for ours.)
P=/sys/class/infiniband/rxe0/ports/1
ll_gid() { grep -q '^fe80:' $P/gids/0; }
until_ok $WAIT ll_gid || note "no fe80:: GID[0] after $WAIT s"
watch_start
step watch "$W" addr_add
$IP addr add 10.1.1.1/24 dev veth0 || fail "ip addr add failed"
expect_line "gid_change bump of rxe0/1" $WAIT "$W" "$AT" '"kind":"transition"' '"rail":"rxe0/1"' '"reason":"gid_change"'
v4_gid() { grep -q 'ffff:0a01:0101' $P/gids/1; }
until_ok $WAIT v4_gid || fail "GID[1] is not ::ffff:10.1.1.1"
for i in 0 1 2; do say "OUT sysfs gid$i=$(cat $P/gids/$i)"; done
say "OUT sysfs netdev=$(cat $P/gid_attrs/ndevs/0 2>/dev/null)"
watch_stop
$IP addr del 10.1.1.1/24 dev veth0
