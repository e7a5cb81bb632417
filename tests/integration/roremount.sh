#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: mount -o remount,ro and back.  mount(8) runs the FUSE
# helper for a remount too, so the daemon binary is called as
# `twinfs DEV MNT -o remount,ro`: it must change the flags of the mount
# that is there (reads go on, writes get EROFS, the same daemon serves
# it), not start a second daemon or fail on an unknown option; keep the
# flags it does not name (noexec stays); and refuse, with one line, a user
# without CAP_SYS_ADMIN.  xfstests generic/294 and 306 remount this way.
source "$(dirname "$0")/harness.sh"

command -v setpriv >/dev/null || h_skip "setpriv missing"
h_setup 2 128M
h_mount "" noexec
echo before >"$MNT/a"
flags() { awk -v m="$MNT" '$2 == m {print $4}' /proc/mounts; }

h_log "remount ro"
"$TWINFS" "$DEVSPEC" "$MNT" -o remount,ro || h_fail "remount,ro exited with $?"
[[ $(flags) == ro,* ]] || h_fail "after remount,ro the mount has $(flags)"
[[ $(flags) == *noexec* ]] || h_fail "remount,ro dropped noexec: $(flags)"
[[ $(cat "$MNT/a") == before ]] || h_fail "read after remount,ro failed"
if err=$(echo x 2>&1 >"$MNT/b"); then h_fail "write on a read-only remount succeeded"; fi
[[ $err == *"Read-only file system"* ]] || h_fail "write on ro remount: '$err', not EROFS"
n=$(h_daemon_pids "$MNT" | wc -w)
[[ $n == 1 ]] || h_fail "$n daemons for one mount after remount"
kill -0 "$DAEMON_PID" || h_fail "the daemon exited on remount"

h_log "unprivileged remount is refused with one line"
out=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$TWINFS" "$DEVSPEC" "$MNT" -o remount,rw 2>&1) &&
	h_fail "remount by uid 65534 succeeded"
h_expect_one_line "$out" "needs root"
[[ $(flags) == ro,* ]] || h_fail "refused remount changed the flags: $(flags)"

h_log "remount rw"
"$TWINFS" "$DEVSPEC" "$MNT" -o remount,rw || h_fail "remount,rw exited with $?"
[[ $(flags) == rw,* ]] || h_fail "after remount,rw the mount has $(flags)"
echo after >"$MNT/b" || h_fail "write after remount,rw failed"
h_umount
h_mount
[[ $(cat "$MNT/a")$(cat "$MNT/b") == beforeafter ]] || h_fail "files lost over the remounts"
h_umount
echo "remount: ro and back on one daemon, flags kept, unprivileged refused"
