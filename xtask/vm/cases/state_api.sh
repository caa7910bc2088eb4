# Case 16: the state API on the real kernel. `railwatch watch
# --state-socket` through a cable pull of rxe0 (veth1 down: veth0 loses its
# carrier, stays admin up): `railwatch rails --nccl` drops rxe0:1 and brings
# it back (exit 0, 1, 0), `check --npd` goes 0 -> 1 -> 0, and a stream
# reader (`stamp --unix`: each line stamped on arrival) hears both changes;
# ibv_asyncwatch's lines, stamped on the same clock, are the reference
# for how long after the kernel's event the reader heard it.
STAMP=/usr/local/bin/stamp
S=/run/railwatch/state.sock
mkdir -p /run/railwatch
watch_start --state-socket $S
# ask LABEL: rails --nccl and check --npd into LABEL.rails and
# LABEL.check, each ending with its exit status ("rc=N").
ask() {
    $RW rails --nccl --socket $S >"$1.rails" 2>&1
    echo "rc=$?" >>"$1.rails"
    $RW check --npd --socket $S >"$1.check" 2>&1
    echo "rc=$?" >>"$1.check"
}
# answers LABEL RAILS_RC CHECK_RC: asked, they exit so.
answers() { ask "$1" && grep -qx "rc=$2" "$1.rails" && grep -qx "rc=$3" "$1.check"; }
rm -f aw.fifo
mkfifo aw.fifo
$STAMP <aw.fifo >aw.out &
SPID=$!
stdbuf -oL ibv_asyncwatch -d rxe0 >aw.fifo &
APID=$!
renice -n -10 -p "$SPID" "$APID" >/dev/null
expect_line "ibv_asyncwatch's first line" $WAIT aw.out 0 "async event FD"
$STAMP --unix $S '/v1/state?watch=1' >stream.out 2>stream.err &
RPID=$!
expect_line "the state stream's first line" $WAIT stream.out 0 '"kind":"state"'
until_ok $WAIT answers before 0 0 || fail "rails/check never said rxe0:1 usable (exit 0, 0)"
step stream stream.out down
$IP link set veth1 down
expect_line "a stream line of rxe0/1 unusable" $WAIT stream.out $AT '"kind":"rail"' '"usable":false'
until_ok $WAIT answers down 1 1 || fail "rails/check never said none usable (exit 1, 1) after the pull"
step stream stream.out up
$IP link set veth1 up
expect_line "a stream line of rxe0/1 usable" $WAIT stream.out $AT '"kind":"rail"' '"usable":true'
until_ok $WAIT answers after 0 0 || fail "rails/check never said rxe0:1 usable again (exit 0, 0)"
kill -TERM "$RPID" "$APID" 2>/dev/null
wait "$RPID" "$APID" 2>/dev/null
kill -TERM "$SPID" 2>/dev/null
wait "$SPID" 2>/dev/null
APID=
watch_stop
for _l in before down after; do
    emit "rails.$_l" "$_l.rails"
    emit "check.$_l" "$_l.check"
done
emit stream stream.out
emit stream.err stream.err
emit asyncwatch aw.out
