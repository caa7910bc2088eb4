# Case 8: the figure for docs/PERFORMANCE.md. The gate_latency probe
# (crates/verbs-backend/examples/gate_latency.rs) watches rxe0 with the
# monitor and runs ibv_asyncwatch beside it, then flaps the carrier from
# the peer (veth1: one PORT_ACTIVE per up) and times, from each
# `ip link set veth1 up`, the gate admitting and asyncwatch printing the
# event. Each of its waits is bounded (10 s); timeout bounds the whole.
IP=$IP timeout 90 /usr/local/bin/gate_latency rxe0 veth1 7 >probe.out 2>probe.err
say "RC probe $?"
emit probe probe.out
emit probe.err probe.err
