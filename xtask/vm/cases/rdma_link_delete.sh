# Case 4: `rdma link delete rxe0` while railwatch watches. The async fd says
# nothing; the delete waits until every handle on rxe0 is closed: railwatch
# must close its handle on the uverbs remove uevent. Measures the delete
# with nobody holding rxe0, then with railwatch watching (5 s bound, then
# railwatch is stopped and the rest is measured). The watch is recorded,
# and the recording replayed in the guest.
timed_bg rdma_link_delete_unwatched rdma link delete rxe0
bg_wait rdma_link_delete_unwatched $WAIT || fail "rdma link delete rxe0 blocked with nobody holding it"
baseline || fail "rxe0 could not be added again"

watch_start --record "$PWD/rec.toml"
step watch "$W" rdma_delete
timed_bg rdma_link_delete rdma link delete rxe0
if bg_wait rdma_link_delete 5; then
    expect_line "rxe0/1 going inert" 5 "$W" "$AT" '"kind":"transition"' '"rail":"rxe0/1"' '"to":"inert"'
    # More than a flush period, so the removal is on disk before the stop.
    sleep 1
    watch_stop
    emit recording rec.toml
    $RW simulate rec.toml --json >replay.out 2>replay.err
    say "RC replay $?"
    emit replay replay.out
    emit replay.err replay.err
else
    fail "rdma link delete rxe0 blocked 5 s: railwatch still holds rxe0 open"
    if [ -e /dev/infiniband/uverbs0 ]; then
        note "while blocked: /dev/infiniband/uverbs0 still there"
    else
        note "while blocked: /dev/infiniband/uverbs0 gone, $(rdma link show 2>&1 | wc -l) line(s) in rdma link show"
    fi
    watch_stop
    if bg_wait rdma_link_delete $WAIT; then
        say "TIME rdma_link_delete_after_sigterm $(secs $((DEND - WSTOP)))"
    else
        fail "rdma link delete rxe0 blocked even after railwatch exited"
    fi
fi
