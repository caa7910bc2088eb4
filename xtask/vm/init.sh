#!/bin/sh
# The guest's /init (busybox sh, PID 1), put into the initramfs by
# `cargo xtask vmtest` (xtask/src/vmtest/). It brings up Soft-RoCE on a
# veth pair, runs the cases listed in /vm/cases.list (each
# /vm/cases/NAME.sh, in a child shell; the traffic cases on the two bridged
# rails of lib.sh, kept up from one traffic case to the next) and powers
# off. Everything the host checks goes to /dev/ttyS1 (a file on the host),
# one marker per line:
#   BOOT t=S | READY t=S | SETUP FAIL msg | DONE t=S
#   CASE name BEGIN t=S ... CASE name END rc=N t=S, and in between the
#   case's OUT/STEP/RC/TIME/NOTE/FAIL lines (see lib.sh).
# The console (ttyS0) carries stray stderr and, at the end, the kernel's log.
export PATH=/bin:/usr/bin:/usr/sbin:/usr/local/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /tmp /run
exec 3>/dev/ttyS1
. /vm/lib.sh
say "BOOT t=$(now)"

# Modules, dependencies first (the host resolved them from .modinfo).
while read -r mod params; do
    # shellcheck disable=SC2086 # params are separate words
    insmod "/modules/$mod.ko" $params || { say "SETUP FAIL insmod $mod"; poweroff -f; }
done < /modules/order

if baseline; then
    say "READY t=$(now)"
    # shellcheck disable=SC2046 # one case name per word
    set -- $(cat /vm/cases.list)
    while [ $# -gt 0 ]; do
        name=$1
        shift
        say "CASE $name BEGIN t=$(now)"
        mkdir -p "/tmp/$name"
        (
            cd "/tmp/$name" && . /vm/lib.sh && . "/vm/cases/$name.sh"
            cleanup
            # The next case's name: traffic cases keep the rails up between them.
            baseline "${1:-}" || fail "could not restore the baseline (veth0/veth1 up, rxe0 ACTIVE)"
            exit "$RC"
        )
        rc=$?
        say "CASE $name END rc=$rc t=$(now)"
    done
else
    say "SETUP FAIL no ACTIVE rxe0 on veth0 (see the console log)"
fi
say "DONE t=$(now)"
# The kernel's log for the console file (the boot is quiet: no slow serial
# console while booting).
dmesg >/dev/ttyS0 2>&1
poweroff -f
