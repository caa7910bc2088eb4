# Case 9: the flap of case 2 seen through railwatch's /metrics: the rail's
# availability series reads 1, then 0 while veth0 is down, then 1 again,
# and the events and transitions are counted.
$IP link set lo up
W=$PWD/watch.out
$RW watch --json --metrics-listen 127.0.0.1:9464 >"$W" 2>"$PWD/watch.err" &
WPID=$!
expect_line "attach of rxe0/1 by railwatch watch" $WAIT "$W" 0 '"kind":"transition"' '"rail":"rxe0/1"' '"by":"attach"'
scrape() { wget -q -O "$1" http://127.0.0.1:9464/metrics 2>/dev/null; }
# available FILE VALUE: a scrape into FILE shows rxe0/1's availability VALUE.
available() { scrape "$1" && grep -q "^railwatch_rail_available{device=\"rxe0\",port=\"1\"} $2\$" "$1"; }
until_ok $WAIT available before.prom 1 || fail "/metrics never showed rxe0/1 available"
$IP link set veth0 down
until_ok $WAIT available down.prom 0 || fail "/metrics never showed rxe0/1 unavailable after veth0 down"
$IP link set veth0 up
until_ok $WAIT available after.prom 1 || fail "/metrics never showed rxe0/1 available again after veth0 up"
watch_stop
emit metrics.before before.prom
emit metrics.down down.prom
emit metrics.after after.prom
