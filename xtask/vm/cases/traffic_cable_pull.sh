# Traffic case 11: rail A's cable (p0, the bridge port of veth0) pulled for
# 2 s, 10 times, while the traffic engine writes over both rails; then 3
# times with the one-event-per-wake-up engine and 3 with the seed's fixed
# loop. Last, twice each with railwatch and the seed's loop, the cable of
# A's far end (p1, rxe1's), the far ends served by a responder process the
# engine does not open (as NICs on another host): rxe0's port stays ACTIVE
# while its QPs fail, the data-path breaker's case (each pull must open it
# and a probe close it). `railwatch watch --metrics-listen` runs beside
# every engine (its /metrics checked over railwatch's pulls). The kernel's
# trace of each event is the timing reference (else ibv_asyncwatch on
# rxe0).
. /vm/traffic.sh
rails_up || fail "the bridged rails could not be set up"
ktrace_start
asyncwatch_start rxe0
watch_start --metrics-listen 127.0.0.1:9465
# The agent yields the CPU to the engine it watches, as a node agent
# should: under emulation both share two vCPUs, and the agent's own wake-up
# on the same PORT_ACTIVE (its port, carrier, link, address and counter
# reads) delayed the engine's admit by ~1.3 ms at the median.
renice -n 10 -p "$WPID" >/dev/null
scrape() { wget -q -O "$1" http://127.0.0.1:9465/metrics 2>/dev/null; }
# The last scrape once the agent has rxe0/1 back too (it may read the last
# PORT_ACTIVE after the engine: it runs at nice 10).
agent_back() { scrape "$1" && grep -q '^railwatch_rail_state{device="rxe0",port="1"} 0' "$1"; }
if engine_start railwatch; then
    until_ok $WAIT scrape before.prom || fail "the agent's /metrics did not answer"
    pulls railwatch 10
    until_ok $WAIT agent_back after.prom || fail "the agent's /metrics did not read rxe0/1 active after the pulls"
fi
engine_stop railwatch
out metrics.before before.prom
out metrics.after after.prom
# The other engines run with the agent beside them too: the same
# conditions, so that the comparison measures the engines.
engine_start old --one-event-per-wakeup && pulls old 3
engine_stop old
engine_start seed --seed-fix && pulls seed 3
engine_stop seed
if responder_start; then
    engine_start peer --peers-at "$PEERS" && peer_pulls peer 2 breaker
    engine_stop peer
    engine_start seed_peer --seed-fix --peers-at "$PEERS" && peer_pulls seed_peer 2 none
    engine_stop seed_peer
fi
responder_stop
watch_stop
asyncwatch_stop rxe0
ktrace_stop
traffic_cleanup
