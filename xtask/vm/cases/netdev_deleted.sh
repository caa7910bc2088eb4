# Case 3: veth0 deleted while railwatch watches. The kernel sends only
# GID_CHANGE (its PORT_ERR is lost: the port query fails with ENODEV) and
# unregisters rxe0, which waits until every handle on it is closed:
# railwatch must learn of it from the uverbs remove uevent and close its
# handle, or the delete hangs until railwatch exits (5 s bound here).
watch_start
step watch "$W" netdev_del
timed_bg ip_link_del "$IP" link del veth0
if bg_wait ip_link_del 5; then
    expect_line "rxe0/1 going inert" 5 "$W" "$AT" '"kind":"transition"' '"rail":"rxe0/1"' '"to":"inert"'
    watch_stop
else
    fail "ip link del veth0 blocked 5 s: railwatch still holds rxe0 open"
    watch_stop
    if bg_wait ip_link_del $WAIT; then
        say "TIME ip_link_del_after_sigterm $(secs $((DEND - WSTOP)))"
    else
        fail "ip link del veth0 blocked even after railwatch exited"
    fi
fi
