# Traffic case 12: the seed's defect, live. During a pull of rail A the
# engine moves 1000 idle QPs on rxe0 from RTS to SQD: 1000 SQ_DRAINED queue
# on rxe0's async fd, then the cable goes back and the PORT_ACTIVE queues
# behind them. The railwatch engine readmits A on the wake-up that brings
# it; the one-event-per-wake-up engine, run the same way, leaves A out for
# the rest of the case while its port reads ACTIVE.
. /vm/traffic.sh
rails_up || fail "the bridged rails could not be set up"
ktrace_start
asyncwatch_start rxe0
if engine_start railwatch --idle-qps 1000 && burst_pull railwatch; then
    new_set railwatch "$AT" A && sleep 1.5
fi
engine_stop railwatch
if engine_start old --one-event-per-wakeup --idle-qps 1000 && burst_pull old; then
    until_ok $WAIT port_active rxe0 || fail "rxe0's port did not come back ACTIVE"
    sleep 3 # the case goes on, the port ACTIVE: is A left out?
    mark port_state rxe0 "$(port_state rxe0)"
fi
engine_stop old
if engine_start seed --seed-fix --idle-qps 1000 && burst_pull seed; then
    new_set seed "$AT" A && sleep 1.5
fi
engine_stop seed
asyncwatch_stop rxe0
ktrace_stop
traffic_cleanup
