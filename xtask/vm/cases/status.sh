# Case 1: `railwatch status --json` on the real rxe0, next to what the
# kernel (sysfs) and rdma-core's ibv_devinfo say about the same port.
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
