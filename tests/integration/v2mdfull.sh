#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: format v2, metadata full: on a small v2 file system (two 128M
# images, 256 node slots) create empty files until a create fails.  It must
# fail with a clean ENOSPC while a checkpoint still has room, so that sync,
# unmount and mount work; every file whose create succeeded exists after the
# remount; mkdir and setxattr fail with ENOSPC too; statfs shows no free
# inodes then (f_ffree 0, as ext4 on inode exhaustion); fsck finds nothing;
# deleting files gives the room back and creates work again.  On the code
# before the node gate the creates hang once the log is full (the checkpoint
# fails with ENOSPC) until the watchdog kills the daemon.
source "$(dirname "$0")/harness.sh"
h_need_fsck

h_setup 2 128M -O v2
h_mount
mkdir "$MNT/d"

# Create d/f0, d/f1, ... until the first failure; print the count acked
# and the errno name of the failure.
fill() {
	python3 - "$MNT/d" "$1" "$2" <<'PY'
import errno, os, sys
d, first, cap = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
i = first
err = "none"
while i < cap:
    try:
        os.close(os.open(os.path.join(d, "f%d" % i), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except OSError as e:
        err = errno.errorcode.get(e.errno, str(e.errno))
        break
    i += 1
print(i, err)
PY
}

read -r n err < <(fill 0 400000)
h_log "created $n files, then $err"
[[ $err == ENOSPC ]] || h_fail "creating files stopped on $err after $n files, want ENOSPC"
((n > 1000)) || h_fail "only $n files fit"
# Room for the checkpoint: sync, the unmount's checkpoint and the mount work.
sync -f "$MNT" || h_fail "sync after ENOSPC failed"
read -r files ffree < <(stat -f -c '%c %d' "$MNT")
h_log "statfs: files $files ffree $ffree"
((ffree < 64)) || h_fail "creates fail with ENOSPC but statfs shows $ffree free inodes"
mkdir "$MNT/more" 2>/dev/null && h_fail "mkdir succeeded on a full node area"
python3 -c 'import errno, os, sys
try:
    os.setxattr(sys.argv[1], "user.x", b"y" * 4096)
except OSError as e:
    sys.exit(0 if e.errno == errno.ENOSPC else 1)
sys.exit(1)' "$MNT/d/f0" || h_fail "setxattr on a full node area did not fail with ENOSPC"
h_umount
h_fsck 0 -n "${IMGS[@]}"
h_mount
got=$(find "$MNT/d" -type f | wc -l)
((got == n)) || h_fail "$n creates succeeded, $got files after the remount"
for i in 0 $((n / 2)) $((n - 1)); do
	[[ -f $MNT/d/f$i ]] || h_fail "acknowledged file f$i lost"
done

# Deleting gives the room back.
h_log "deleting the first half"
python3 -c 'import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(0, (n + 1) // 2):
    os.unlink(os.path.join(d, "f%d" % i))' "$MNT/d" "$n"
h_log "deleted"
sync -f "$MNT"
read -r m err < <(fill "$n" $((n + 2000)))
((m == n + 2000)) || h_fail "after deleting half, creates stopped on $err after $((m - n))"
echo data >"$MNT/d/w" && sync -f "$MNT" || h_fail "a write after the delete failed"
h_umount
h_fsck 0 -n "${IMGS[@]}"
h_mount
got=$(find "$MNT/d" -type f | wc -l)
((got == n - (n + 1) / 2 + 2000 + 1)) || h_fail "after remount $got files, want $((n - (n + 1) / 2 + 2001))"
h_umount
h_log "ok"
