#!/bin/bash
# Boots one sandbox host: joins its cgroups, mounts its overlay in a private mount namespace, and
# runs systemd-nspawn, booting again when the container reboots (exit 133) until told to stop.
# usage: boot-host.sh NAME ROOTFS HOSTDIR NETNS CGROUP...
set -u
name=$1 rootfs=$2 dir=$3 netns=$4; shift 4
for cg in "$@"; do mkdir -p "$cg" && echo $$ > "$cg/cgroup.procs"; done
exec unshare --mount --propagation private /bin/bash -c '
    set -u
    name=$1 rootfs=$2 dir=$3 netns=$4
    mkdir -p "$dir/upper" "$dir/work" "$dir/merged"
    mount -t overlay overlay -o "lowerdir=$rootfs,upperdir=$dir/upper,workdir=$dir/work" "$dir/merged" || exit 90
    while :; do
        systemd-nspawn --quiet --boot --register=no --keep-unit -M "$name" -D "$dir/merged" \
            --network-namespace-path="/run/netns/$netns" --console=read-only \
            --resolv-conf=off --timezone=off --link-journal=no &
        echo $! > "$dir/nspawn.pid"
        wait $!
        rc=$?
        [ -e "$dir/stopping" ] && break
        [ "$rc" -eq 133 ] || break
    done
    rm -f "$dir/nspawn.pid"
    exit "$rc"
' boot "$name" "$rootfs" "$dir" "$netns"
