# Traffic case 13: `rdma link delete` of rail A's devices (rxe0, then rxe1)
# while the engine writes on both rails. rxe says nothing on the async fd
# and the delete waits until every handle is closed: the engine learns of
# it from the uverbs remove uevent, closes its QPs and contexts, the delete
# returns, and traffic stays on B. `rdma link add` brings A back. Just
# before the delete, rail A's far end is cut off the bridge without a
# carrier change (`nomaster`: no event, the gates stay open), so writes
# are in flight, retrying, when the devices leave: the engine's ledger
# fails them on railwatch's WORK_LOST instead of leaving them hung.
. /vm/traffic.sh
rails_up || fail "the bridged rails could not be set up"
if engine_start railwatch; then
    sleep 1
    mark cut p1
    $IP link set p1 nomaster
    sleep 0.2
    if timed_delete rxe0 && timed_delete rxe1; then
        sleep 1
        _at=$(lines "$E")
        $IP link set p1 master br0 || fail "p1 back on br0 failed"
        mark add_start
        rdma link add rxe0 type rxe netdev veth0 && rdma link add rxe1 type rxe netdev veth1 ||
            fail "rdma link add of rxe0/rxe1 failed"
        mark add_done
        new_set railwatch "$_at" A && sleep 1
    fi
fi
engine_stop railwatch
traffic_cleanup
