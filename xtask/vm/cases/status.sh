# Case 1: `railwatch status --json` on the real rxe0, next to what the
# kernel (sysfs) and rdma-core's ibv_devinfo say about the same port; then
# its flap counters over a pull.
$RW status --json >status.out 2>status.err
say "RC status $?"
emit status status.out
emit status.err status.err
ibv_devinfo -v -d rxe0 >devinfo.out 2>&1
say "RC devinfo $?"
emit devinfo devinfo.out
P=/sys/class/infiniband/rxe0/ports/1
for f in state phys_state rate link_layer; do say "OUT sysfs $f=$(cat $P/$f)"; done
say "OUT sysfs gid0=$(cat $P/gids/0)"
say "OUT sysfs netdev=$(cat $P/gid_attrs/ndevs/0 2>/dev/null)"
# The flap counters status reads, against sysfs, over a pull of rxe0's
# cable (veth1 down: veth0 loses carrier, stays up) and its return.
C=/sys/class/infiniband/rxe0/ports/1/hw_counters/link_downed
N=/sys/class/net/veth0
counters() {
    $RW status --json >"status.$1" 2>&1
    say "RC status.$1 $?"
    emit "status.$1" "status.$1"
    say "OUT sysfs.$1 link_downed=$(cat $C 2>/dev/null) carrier_changes=$(cat $N/carrier_changes) carrier_down=$(cat $N/carrier_down_count)"
}
port_down() { grep -q DOWN /sys/class/infiniband/rxe0/ports/1/state; }
counters before
$IP link set veth1 down
until_ok $WAIT port_down || fail "rxe0's port did not go DOWN with veth1 down"
counters down
$IP link set veth1 up
until_ok $WAIT port_active rxe0 || fail "rxe0's port did not come back ACTIVE"
counters up
