#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: fsync after buffered writes costs no extra FUSE round trips:
# on the default mount (writeback cache) an fsync that changed a file's
# st_blocks still shows the new count at once (the daemon drops the kernel's
# cached attributes), but an fsync after overwrites in place (SQLite's WAL
# and PostgreSQL's segments once they stop growing) leaves them cached, so
# the next write(2) sends no GETATTR and no GETXATTR of security.capability
# (counted in the daemon's -o debug log).  Then kill -9 right after the last
# fsync: each mirror alone holds the last fsynced contents.
source "$(dirname "$0")/harness.sh"

N=40
# -o debug prints every reply, failed lookups included.
LOG_ALLOW='unique: [0-9]+, error: '
h_setup 2 256M
h_mount "" debug

python3 - "$MNT/f" "$N" "$T/st" <<'EOF' || h_fail "write/fsync loop failed"
import os, sys
path, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(fd, b"a" * 65536, 0)
os.fsync(fd)
blocks = os.fstat(fd).st_blocks
with open(out, "w") as f:
    f.write(f"{blocks} {os.fstat(fd).st_ino}\n")
os.write(1, b"MARK-BEGIN\n")
for i in range(n):
    os.pwrite(fd, bytes([ord("b") + i % 20]) * 4096, (i % 16) * 4096)
    os.fsync(fd)
os.close(fd)
EOF
read -r blocks ino <"$T/st"
[[ $blocks -ge 128 ]] || h_fail "st_blocks $blocks right after fsync of 64 KiB (want >= 128)"
# The requests for the file from the first overwrite on: the log of the
# loop starts after the first fsync's reply.
first=$(grep -an "opcode: FSYNC .*nodeid: $ino," "$DAEMON_LOG" | head -n 1 | cut -d: -f1)
[[ -n $first ]] || h_fail "no FSYNC for inode $ino in the debug log"
reqs=$(tail -n +"$((first + 1))" "$DAEMON_LOG" | grep -a "nodeid: $ino,")
nfsync=$(grep -c "opcode: FSYNC" <<<"$reqs" || true)
ngetattr=$(grep -c "opcode: GETATTR" <<<"$reqs" || true)
ngetxattr=$(grep -c "opcode: GETXATTR" <<<"$reqs" || true)
h_log "after the first fsync: $nfsync FSYNC, $ngetattr GETATTR, $ngetxattr GETXATTR"
[[ $nfsync -ge $N ]] || h_fail "$nfsync FSYNC requests for $N fsyncs"
# Attributes time out after 1 s: a slow machine may see a few.
((ngetattr <= N / 4)) ||
	h_fail "$ngetattr GETATTR for $N overwrite+fsync rounds: fsync dropped cached attributes that did not change"
((ngetxattr <= N / 4)) ||
	h_fail "$ngetxattr GETXATTR for $N overwrite+fsync rounds (security.capability on every write)"

# Durable: what the last fsync covered is on each mirror alone.
(cd "$MNT" && sha256sum f) >"$T/sums"
kill -9 "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null || true
DAEMON_PID=""
rm -f "$T/daemon.pid"
fusermount3 -u -z "$MNT" 2>/dev/null || umount -l "$MNT"
for img in "${IMGS[@]}"; do
	h_mount "$img" degraded
	(cd "$MNT" && sha256sum --quiet -c "$T/sums") ||
		h_fail "$(basename "$img") alone lost fsynced contents"
	h_umount
done
echo "fsyncrt: $N overwrite+fsync rounds, $ngetattr GETATTR and $ngetxattr GETXATTR; fsynced data on each mirror"
