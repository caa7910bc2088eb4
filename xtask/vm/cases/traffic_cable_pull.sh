# Traffic case 11: rail A's cable (p0, the bridge port of veth0) pulled for
# 2 s, 10 times, while the traffic engine writes over both rails, with
# `railwatch watch --metrics-listen` beside it as a second process; then 3
# times with the one-event-per-wake-up engine. ibv_asyncwatch on rxe0 is
# the timing reference. Last, twice, the cable of A's far end (p1, rxe1's):
# rxe0's port stays ACTIVE while its QPs fail, the data-path breaker's case.
. /vm/traffic.sh
rails_up || fail "the bridged rails could not be set up"
asyncwatch_start rxe0
ktrace_start
watch_start --metrics-listen 127.0.0.1:9465
scrape() { wget -q -O "$1" http://127.0.0.1:9465/metrics 2>/dev/null; }
if engine_start railwatch; then
    until_ok $WAIT scrape before.prom || fail "the agent's /metrics did not answer"
    pulls railwatch 10
    until_ok $WAIT scrape after.prom || fail "the agent's /metrics did not answer after the pulls"
fi
engine_stop railwatch
watch_stop
out metrics.before before.prom
out metrics.after after.prom
engine_start old --one-event-per-wakeup && pulls old 3
engine_stop old
engine_start peer && pulls peer 2 p1 rxe1
engine_stop peer
asyncwatch_stop rxe0
ktrace_stop
traffic_cleanup
