# Case 10: `watch --record` during a flap of veth0 and an IPv4 address
# added to it (a GID change); the recording is replayed in the guest with
# `simulate`, and the host compares the replay's transitions with the live
# ones. A second agent beside it logs the machine's inputs (rec.rwlog):
# `railwatch replay` replays them in the guest (no divergence, its
# transitions the second agent's), and `railwatch lift` makes a scenario
# of them that replays them.
P=/sys/class/infiniband/rxe0/ports/1
ll_gid() { grep -q '^fe80:' $P/gids/0; }
until_ok $WAIT ll_gid || note "no fe80:: GID[0] after $WAIT s"
W=$PWD/watch.out
$RW watch --json --tick-ms 200 --record "$PWD/rec.toml" >"$W" 2>"$PWD/watch.err" &
WPID=$!
W2=$PWD/watch2.out
$RW watch --json --tick-ms 200 --record "$PWD/rec.rwlog" >"$W2" 2>"$PWD/watch2.err" &
W2PID=$!
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
kill -TERM "$W2PID" 2>/dev/null
until_ok $WAIT gone "$W2PID" || { fail "the logging agent still runs after SIGTERM"; kill -KILL "$W2PID"; }
emit watch2 watch2.out
$RW replay rec.rwlog --json >relog.out 2>relog.err
say "RC relog $?"
emit relog relog.out
emit relog.err relog.err
$RW lift rec.rwlog -o lifted.toml >/dev/null 2>lift.err
say "RC lift $?"
emit lift.err lift.err
$IP addr del 10.9.9.1/24 dev veth0
emit recording rec.toml
$RW simulate rec.toml --json >replay.out 2>replay.err
say "RC replay $?"
emit replay replay.out
emit replay.err replay.err
