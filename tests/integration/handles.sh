#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: file handles (name_to_handle_at / open_by_handle_at, what NFS
# re-export, fanotify and backup tools use).  A handle of a live file or
# directory opens after the kernel dropped its caches and after a remount;
# a deleted file's handle gives ESTALE, also when a crash gave its inode
# number to a new file.
source "$(dirname "$0")/harness.sh"
: "${POSIXCHECK:?}"

hopen() {
	"$POSIXCHECK" handle-open "$MNT" "$1"
}

h_setup 2 512M
h_mount
echo "first file" >"$MNT/f"
mkdir "$MNT/dir"
echo "in a dir" >"$MNT/dir/g"
"$POSIXCHECK" handle-save "$MNT/f" "$T/h.f" >/dev/null || h_fail "name_to_handle_at f"
"$POSIXCHECK" handle-save "$MNT/dir" "$T/h.dir" >/dev/null || h_fail "name_to_handle_at dir"
"$POSIXCHECK" handle-save "$MNT/dir/g" "$T/h.g" >/dev/null || h_fail "name_to_handle_at dir/g"

h_log "handles after the kernel dropped its caches"
out=$(hopen "$T/h.f") || h_fail "live file's handle after drop_caches: $out"
[[ $out == "first file" ]] || h_fail "handle opened the wrong data: '$out'"
out=$(hopen "$T/h.dir") || h_fail "live directory's handle after drop_caches: $out"
out=$(hopen "$T/h.g") || h_fail "handle of a file in a subdirectory: $out"
[[ $out == "in a dir" ]] || h_fail "handle opened the wrong data: '$out'"

h_log "handles after a remount"
h_remount
out=$(hopen "$T/h.f") || h_fail "live file's handle after a remount: $out"
[[ $out == "first file" ]] || h_fail "handle opened the wrong data after a remount: '$out'"
out=$(hopen "$T/h.g") || h_fail "handle of dir/g after a remount: $out"

h_log "a deleted file's handle is stale"
rm "$MNT/f"
rc=0
out=$(hopen "$T/h.f") || rc=$?
((rc == 3)) || h_fail "deleted file's handle: expected ESTALE, got rc $rc: $out"
rm -r "$MNT/dir"
rc=0
out=$(hopen "$T/h.dir") || rc=$?
((rc == 3)) || h_fail "deleted directory's handle: expected ESTALE, got rc $rc: $out"
h_umount

# A file whose creation never reached the log (kill -9 before the commit)
# leaves its inode number to the next file: its handle must not open that.
h_log "an inode number reused after a crash"
h_mount "" "commit=600000"
echo "lost in the crash" >"$MNT/old"
ino_old=$("$POSIXCHECK" handle-save "$MNT/old" "$T/h.old") || h_fail "name_to_handle_at old"
kill -9 "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null || true
DAEMON_PID=""
rm -f "$T/daemon.pid"
fusermount3 -u -z "$MNT" 2>/dev/null || umount -l "$MNT"
h_mount
[[ ! -e $MNT/old ]] || h_fail "the uncommitted file survived kill -9: cannot test reuse"
echo "new file" >"$MNT/new"
ino_new=$(stat -c %i "$MNT/new")
((ino_new == ino_old)) || h_fail "inode $ino_old not reused (new file got $ino_new): the test needs reuse"
rc=0
out=$(hopen "$T/h.old") || rc=$?
((rc == 3)) || h_fail "handle of a file lost in a crash opened inode $ino_new's new file (rc $rc): $out"
h_umount
echo "handles: all checks passed"
