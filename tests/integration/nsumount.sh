#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: a mount namespace that another process creates while a test's
# file system is mounted must not keep that mount (and so its daemon)
# alive after the test unmounts it.  From the namespace the test was
# started in, a process makes a new private mount namespace (as bwrap in a
# test beside this one, or scripts/extsuite.sh's xfstests run, does) and
# sleeps there; the test then unmounts, and its daemon must have written
# its clean state and exited within 10 s.  Without the harness's own
# namespace per test, the new namespace held a copy of the mount, the
# kernel kept the FUSE connection open and the daemon served on until the
# sleep ended (every thread idle, main in fuse_session_loop_mt): the
# "daemon did not exit within 30 s of unmount" failures of v2inflight,
# v2nodelow, degraded and scrub_v1 under load.
source "$(dirname "$0")/harness.sh"
command -v nsenter >/dev/null || { echo "SKIP: nsenter is missing"; exit 77; }

h_setup 2 64M
h_mount
echo data >"$MNT/f"
outer=/proc/$PPID/ns/mnt
[[ $(readlink "$outer") != "$(readlink /proc/self/ns/mnt)" ]] ||
	h_log "note: running in the namespace it was started in (no unshare?)"
# In the starting namespace, beside this test: a new namespace copies
# every mount that one shows.
nsenter --mount="$outer" unshare -m --propagation private sleep 60 &
spid=$!
# Until the sleep runs in a namespace of its own: neither the outer one
# (nsenter done, unshare not yet) nor this test's (not even nsenter yet: a
# loaded machine's CI once read this test's own mounts there).
for ((i = 0; i < 100; i++)); do
	ns=$(readlink "/proc/$spid/ns/mnt" 2>/dev/null || true)
	[[ -n $ns && $ns != "$(readlink "$outer")" && $ns != "$(readlink /proc/self/ns/mnt)" ]] &&
		break
	sleep 0.1
done
((i < 100)) || h_fail "the other namespace was not made"
in_other=no
grep -qF " $MNT " "/proc/$spid/mountinfo" && in_other=yes
t0=$SECONDS
h_umount
took=$((SECONDS - t0))
kill "$spid" 2>/dev/null || true
wait "$spid" 2>/dev/null || true
h_log "mount seen in the other namespace: $in_other; unmount took ${took} s"
[[ $in_other == no ]] || h_fail "a namespace made outside the test holds a copy of its mount"
((took <= 10)) || h_fail "the daemon exited ${took} s after the unmount, want at most 10"

h_mount
[[ $(cat "$MNT/f") == data ]] || h_fail "file written before the unmount is gone"
h_umount
h_log "ok"
