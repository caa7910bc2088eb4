# Case 2: veth0 down then up while railwatch watches. The kernel sends
# PORT_ERR, then PORT_ACTIVE twice (interface up and carrier up): the rail
# pauses, then comes back with a new generation; the second PORT_ACTIVE
# must change nothing. ibv_asyncwatch reads the same events for comparison.
ibv_asyncwatch -d rxe0 >asyncwatch.out 2>&1 &
APID=$!
watch_start
step watch "$W" down
$IP link set veth0 down
expect_line "pause of rxe0/1 after veth0 down" $WAIT "$W" "$AT" '"kind":"transition"' '"rail":"rxe0/1"' '"to":"paused"'
port_down() { ! port_active rxe0; }
until_ok $WAIT port_down || fail "rxe0/1 still ACTIVE in sysfs after veth0 down"
step watch "$W" up
UP=$AT
$IP link set veth0 up
expect_line "reactivation of rxe0/1 after veth0 up" $WAIT "$W" "$UP" '"kind":"transition"' '"rail":"rxe0/1"' '"from":"paused"' '"to":"active"'
# Both PORT_ACTIVE read (bounded): then the host can see the second did no harm.
two_active() { [ "$(count "$W" "$UP" '"event":"port_active"')" -ge 2 ]; }
until_ok 3 two_active || note "railwatch read fewer than 2 PORT_ACTIVE within 3 s of veth0 up"
# ibv_asyncwatch read them too (bounded), before it is stopped.
aw_caught_up() { [ "$(grep -c PORT_ACTIVE asyncwatch.out)" -ge "$(count "$W" "$UP" '"event":"port_active"')" ]; }
until_ok 3 aw_caught_up || note "ibv_asyncwatch read fewer PORT_ACTIVE than railwatch within 3 s"
watch_stop
kill -TERM "$APID" 2>/dev/null
until_ok $WAIT gone "$APID" || kill -KILL "$APID"
wait "$APID"
emit asyncwatch asyncwatch.out
