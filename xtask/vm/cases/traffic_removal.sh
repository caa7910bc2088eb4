# Traffic case 13: `rdma link delete` of rail A's devices (rxe0, then rxe1)
# while the engine writes on both rails. rxe says nothing on the async fd
# and the delete waits until every handle is closed: the engine learns of
# it from the uverbs remove uevent, closes its QPs and contexts, the delete
# returns, and traffic stays on B. `rdma link add` brings A back.
. /vm/traffic.sh
rails_up || fail "the bridged rails could not be set up"
if engine_start railwatch; then
    sleep 1
    if timed_delete rxe0 && timed_delete rxe1; then
        sleep 1
        _at=$(lines "$E")
        mark add_start
        rdma link add rxe0 type rxe netdev veth0 && rdma link add rxe1 type rxe netdev veth1 ||
            fail "rdma link add of rxe0/rxe1 failed"
        mark add_done
        new_set railwatch "$_at" A && sleep 1
    fi
fi
engine_stop railwatch
traffic_cleanup
