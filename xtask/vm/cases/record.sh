# Case 10: `watch --record` during a flap of veth0 and an IPv4 address
# added to it (a GID change); the recording is replayed in the guest with
# `simulate`, and the host compares the replay's transitions with the live
# ones.
P=/sys/class/infiniband/rxe0/ports/1
ll_gid() { grep -q '^fe80:' $P/gids/0; }
until_ok $WAIT ll_gid || note "no fe80:: GID[0] after $WAIT s"
W=$PWD/watch.out
$RW watch --json --tick-ms 200 --record "$PWD/rec.toml" >"$W" 2>"$PWD/watch.err" &
WPID=$!
expect_line "attach of rxe0/1 by railwatch watch" $WAIT "$W" 0 '"kind":"transition"' '"rail":"rxe0/1"' '"by":"attach"'
step watch "$W" down
$IP link set veth0 down
expect_line "pause of rxe0/1 after veth0 down" $WAIT "$W" "$AT" '"kind":"transition"' '"rail":"rxe0/1"' '"to":"paused"'
step watch "$W" up
$IP link set veth0 up
expect_line "reactivation of rxe0/1 after veth0 up" $WAIT "$W" "$AT" '"kind":"transition"' '"rail":"rxe0/1"' '"to":"active"'
sleep 1
step watch "$W" addr_add
$IP addr add 10.9.9.1/24 dev veth0 || fail "ip addr add failed"
expect_line "gid_change bump of rxe0/1" $WAIT "$W" "$AT" '"kind":"transition"' '"rail":"rxe0/1"' '"reason":"gid_change"'
# More than a flush period, so the last steps are on disk before the stop.
sleep 1
watch_stop
$IP addr del 10.9.9.1/24 dev veth0
emit recording rec.toml
$RW simulate rec.toml --json >replay.out 2>replay.err
say "RC replay $?"
emit replay replay.out
emit replay.err replay.err
