# Traffic case 14: an IPv4 address added to rail A's netdev (veth0), then
# removed, while the engine writes: each GID_CHANGE changes rxe0's GID
# table, railwatch bumps the generation, the engine re-reads its GID index
# and rebuilds A's QPs, and traffic resumes on them.
. /vm/traffic.sh
rails_up || fail "the bridged rails could not be set up"
if engine_start railwatch; then
    sleep 1
    for what in add del; do
        _at=$(lines "$E")
        mark addr_$what veth0
        $IP addr $what 10.1.1.1/24 dev veth0 || fail "ip addr $what on veth0 failed"
        new_set railwatch "$_at" A || break
        sleep 1
    done
fi
engine_stop railwatch
traffic_cleanup
