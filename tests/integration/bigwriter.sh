#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: a big file's writer (a writable open, without O_TRUNC or
# O_APPEND, of a file at least -o direct_writers long) is a direct open on
# the default mount: its writes go around the page cache and are answered
# once copied (write-behind).  It stays coherent with a buffered open and a
# shared map of the same file (the fsx-like run of mixcheck checks every
# byte through every view, then reads back with O_DIRECT), small unaligned
# writes past EOF through it read back at once, and what fsync acknowledged
# survives kill -9 of the daemon on each mirror alone.  With
# direct_writers=0 the same open is cached.
source "$(dirname "$0")/harness.sh"
: "${MIXCHECK:?}" "${KILLWRITER:?}"
command -v python3 >/dev/null || h_fail "python3 is needed"

h_setup 2 512M

h_log "==== direct_writers=0: the old policy, the writer stays on the page cache"
h_mount "" direct_writers=0
rc=0
"$MIXCHECK" big "$MNT/d" || rc=$?
[[ $rc == 3 ]] || h_fail "with direct_writers=0 a big file's writer did not use the page cache ($rc)"
h_umount

h_log "==== direct_writers=1M"
h_mount "" direct_writers=1M
"$MIXCHECK" big "$MNT/d" || h_fail "a big file's O_WRONLY open wrote into the page cache"
for seed in 1 2 3; do
	"$MIXCHECK" fsxbig "$MNT/x$seed" "$seed" 2000 ||
		h_fail "big writer, buffered and mmap views disagree (seed $seed)"
done
# Small unaligned writes past EOF through the direct open (each one WRITE
# of exactly its bytes, i_size moved by the kernel), interleaved with an
# O_APPEND open (which stays cached: big_writer): a buffered reader and a
# map see every byte after each.
python3 - "$MNT/a" <<'PY' || h_fail "extending writes on a big file's writer"
import mmap, os, sys
p = sys.argv[1]
base = bytes(range(256)) * 4096                 # 1 MiB
with open(p, "wb") as f:
    f.write(base)
want = bytearray(base)
w = os.open(p, os.O_WRONLY)
a = os.open(p, os.O_WRONLY | os.O_APPEND)
r = os.open(p, os.O_RDONLY)
for i, n in enumerate((1, 4095, 4097, 131072, 333, 7, 65536)):
    chunk = bytes([(i * 31 + 7) & 255]) * n
    if i % 2:
        assert os.write(a, chunk) == n
    else:
        assert os.pwrite(w, chunk, len(want)) == n
    want += chunk
    got = os.pread(r, len(want) + 10, 0)
    assert got == bytes(want), f"buffered read after write {i}"
    m = mmap.mmap(r, len(want), prot=mmap.PROT_READ)
    assert m[:] == bytes(want), f"map after write {i}"
    m.close()
os.fsync(w)
for fd in (w, a, r):
    os.close(fd)
print("extend: 7 unaligned writes past EOF seen by a buffered reader and a map")
PY
rm -f "$MNT"/x* "$MNT/d" "$MNT/a"
h_umount

h_log "==== kill -9 after fsync through a big file's writer"
h_mount "" direct_writers=1M
truncate -s 4M "$MNT/k"
"$KILLWRITER" write "$MNT/k" "$T/ack.k" 11 2>/dev/null &
w=$!
sleep 2
kill -9 "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null || true
wait "$w" || true
DAEMON_PID=""
rm -f "$T/daemon.pid"
fusermount3 -u -z "$MNT" 2>/dev/null || umount -l "$MNT"
acked=$(tail -n 1 "$T/ack.k" 2>/dev/null | awk '{print $2}')
[[ ${acked:-0} -gt 0 ]] || h_fail "the writer acknowledged nothing in 2 s"
for img in "${IMGS[@]}"; do
	h_mount "$img" degraded
	"$KILLWRITER" check "$MNT/k" "$T/ack.k" 11 ||
		h_fail "$(basename "$img") alone lost writes acknowledged by fsync"
	h_umount
done
echo "bigwriter: big files' writers direct, coherent with buffered opens and mmap, $acked records durable on each mirror"
