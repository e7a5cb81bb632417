#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: format v2, extents as runs on disk (issue 13): a checkpoint
# writes a file's contiguous runs as few EXTENT items, not one per 256
# blocks.  A 1 GiB fallocated file is at most 4 items after a checkpoint
# (one per physical run the allocator gave it, 2 here; 1,025 when the
# checkpoint cut every 256 blocks), an 8 MiB sequential write at most 8 + 4 (256 written
# blocks an item: their checksums), and 4 KiB writes into the middle of the
# long unwritten run cut it in place.  After a remount every block reads
# back, st_blocks is right and fsck -n finds nothing.  The INODE item
# counts the blocks its EXTENT items map: a stat of a file of 4,000 items
# after a remount looks up a few tree nodes, not its items.
source "$(dirname "$0")/harness.sh"
: "${CTL:?CTL must name twinfs-ctl}"
h_need_fsck

h_setup 2 6G -O v2
h_mount

# extents_after WHAT MAX: unmount, fsck -n -v: clean and at most MAX
# EXTENT items in the tree; mount again.
extents_after() {
	local n
	h_umount
	h_fsck 0 -n -v "${IMGS[@]}"
	grep -q "^0 errors found" <<<"$FOUT" || h_fail "fsck after $1: $FOUT"
	n=$(sed -n 's/^names: .*; \([0-9]*\) extents, .*/\1/p' <<<"$FOUT")
	[[ -n $n ]] || h_fail "no extent count in fsck -v: $FOUT"
	h_log "$1: $n EXTENT items (at most $2)"
	((n <= $2)) || h_fail "$1: $n EXTENT items, want at most $2"
	h_mount
}

fallocate -l 1G "$MNT/fa" || h_fail "fallocate 1G"
"$CTL" raw "$MNT" checkpoint >/dev/null || h_fail "checkpoint"
extents_after "fallocate 1 GiB" 4

head -c 8M /dev/urandom >"$T/seq"
dd if="$T/seq" of="$MNT/seq" bs=4k conv=fsync status=none || h_fail "sequential write"
extents_after "an 8 MiB sequential write" 16

# 4 KiB writes into the long unwritten run: each cuts it in three
# (written block and unwritten head and tail joined where they touch).
python3 - "$MNT/fa" "$T/fa.sums" <<'PY' || h_fail "writes into the fallocated file"
import hashlib, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
with open(sys.argv[2], "w") as out:
    for b in (1, 1000, 70000, 131071, 200000, 262143):
        data = os.urandom(4096)
        os.pwrite(fd, data, b * 4096)
        out.write("%d %s\n" % (b, hashlib.sha256(data).hexdigest()))
os.fsync(fd)
os.close(fd)
PY
extents_after "6 writes into the fallocated file" 24

check() {
	cmp "$T/seq" "$MNT/seq" || h_fail "$1: the sequential file differs"
	python3 - "$MNT/fa" "$T/fa.sums" <<'PY' || h_fail "$1: the fallocated file differs"
import hashlib, os, sys
want = dict((int(b), h) for b, h in (l.split() for l in open(sys.argv[2])))
fd = os.open(sys.argv[1], os.O_RDONLY)
st = os.fstat(fd)
assert st.st_blocks == (1 << 30) // 512, ("st_blocks", st.st_blocks)
for b in range(0, 262144, 997):
    got = os.pread(fd, 4096, b * 4096)
    if b not in want and got != bytes(4096):
        sys.exit("unwritten block %d is not zeros" % b)
for b, h in want.items():
    if hashlib.sha256(os.pread(fd, 4096, b * 4096)).hexdigest() != h:
        sys.exit("block %d differs" % b)
PY
	[[ $(stat -c %b "$MNT/seq") == 16384 ]] || h_fail "$1: st_blocks of seq $(stat -c %b "$MNT/seq")"
}
check "after remount"

# st_blocks after a remount comes from the INODE item's mapped count: a
# file of 4,000 items (4 KiB writes to every other block, each its own
# item, a dozen leaves) is read in by a stat that looks up a few nodes,
# not every leaf of its items.
python3 - "$MNT/many" <<'PY' || h_fail "writes of many"
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
for i in range(4000):
    os.pwrite(fd, os.urandom(4096), 2 * i * 4096)
os.fsync(fd)
os.close(fd)
PY
extents_after "4,000 scattered blocks" 4100
node_lookups() {
	"$CTL" raw "$MNT" stats >"$T/st.json" || h_fail "twinfs-ctl raw stats"
	python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["node_cache"]; print(c["hits"] + c["misses"])' \
		"$T/st.json"
}
before=$(node_lookups)
blocks=$(stat -c %b "$MNT/many")
after=$(node_lookups)
h_log "stat after remount: st_blocks $blocks, $((after - before)) node lookups"
((blocks == 32000)) || h_fail "st_blocks of many after remount: $blocks, want 32000"
((after - before <= 16)) || h_fail "a stat after remount looked up $((after - before)) nodes, want at most 16 (132 when it reads every EXTENT item)"
h_umount
h_log "ok"
