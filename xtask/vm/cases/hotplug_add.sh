# Case 5: devices that appear while railwatch watches: a new rxe1 on
# veth1, then rxe0 deleted and added again (a new device with the old
# name, which railwatch attaches as new). Recorded, and the recording is
# replayed in the guest: the host compares the transitions.
watch_start --record "$PWD/rec.toml"
step watch "$W" add_rxe1
rdma link add rxe1 type rxe netdev veth1 || fail "rdma link add rxe1 failed"
expect_line "attach of rxe1/1" $WAIT "$W" "$AT" '"kind":"transition"' '"rail":"rxe1/1"'
timed_bg rdma_link_delete rdma link delete rxe0
if bg_wait rdma_link_delete 5; then
    expect_line "rxe0/1 going inert" 5 "$W" "$AT" '"kind":"transition"' '"rail":"rxe0/1"' '"to":"inert"'
    step watch "$W" readd_rxe0
    rdma link add rxe0 type rxe netdev veth0 || fail "rdma link add rxe0 failed"
    expect_line "re-attach of rxe0/1" $WAIT "$W" "$AT" '"kind":"transition"' '"rail":"rxe0/1"' '"by":"attach"'
else
    fail "rdma link delete rxe0 blocked 5 s (railwatch holds it): not added again"
fi
watch_stop
emit recording rec.toml
$RW simulate rec.toml --json >replay.out 2>replay.err
say "RC replay $?"
emit replay replay.out
emit replay.err replay.err
