#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: 4 KiB O_DIRECT reads whose extent lookup must read the
# tree (it runs on the FUSE worker, before the device read is handed to
# the completion threads, which must never wait for a node): format v2
# with -o cache=4M (1 MiB for the files' map leaves, 128 leaves of 2 MiB of
# file each), a 1 GiB file with one 4 KiB block written every 1 MiB (512
# leaves, four times what fits), remounted so nothing of its map is
# resident.  Two passes of 4 KiB O_DIRECT reads of every written block, in
# file order: each pass faults every leaf in from the tree (extent_cache
# faults, the first pass reading tree nodes: node_cache misses) and evicts
# them behind it, and every block reads what was written.
source "$(dirname "$0")/harness.sh"
: "${CTL:?CTL must name twinfs-ctl}"
[[ $(h_format) == v2 ]] || { echo "SKIP: format v2 only"; exit 77; }
NB=1024		# blocks written, one per MiB

# counters: extent_cache.faults, node_cache.misses, extent_cache.evictions
# and extent_cache.leaves, one line.
counters() {
	"$CTL" raw "$MNT" stats >"$T/stats.json" || h_fail "twinfs-ctl raw stats"
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
x=d["extent_cache"]
print(x["faults"], d["node_cache"]["misses"], x["evictions"], x["leaves"])' \
		"$T/stats.json"
}

# blocks MODE: write (MODE w) or read back with O_DIRECT and check (r)
# block i of $MNT/f at i MiB, its content derived from i.
blocks() {
	python3 - "$MNT/f" "$1" "$NB" <<'PY'
import mmap, os, sys
path, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
buf = mmap.mmap(-1, 4096)		# page-aligned, as O_DIRECT wants
def pattern(i):
    return (b"RDNODE %06d " % i) * (4096 // 14) + b"\0" * (4096 % 14)
if mode == "w":
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    for i in range(n):
        os.pwrite(fd, pattern(i), i << 20)
    os.ftruncate(fd, n << 20)
    os.fsync(fd)
else:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    for i in range(n):
        if os.preadv(fd, [buf], i << 20) != 4096 or buf[:] != pattern(i):
            sys.exit("block %d at %d MiB: wrong bytes" % (i, i))
os.close(fd)
PY
}

h_setup 2 1200M
h_mount "" cache=4M
blocks w || h_fail "writing the blocks"
h_remount
read -r f0 m0 _ leaves < <(counters)
((leaves < 16)) || h_fail "$leaves map leaves resident after a remount"
blocks r || h_fail "first pass"
read -r f1 m1 _ _ < <(counters)
blocks r || h_fail "second pass"
read -r f2 _ ev _ < <(counters)
h_log "leaves faulted: $((f1 - f0)) and $((f2 - f1)); node reads in the first pass:" \
	"$((m1 - m0)); evictions: $ev"
((f1 - f0 >= NB / 2)) || h_fail "the first pass faulted $((f1 - f0)) leaves, want $((NB / 2))"
((f2 - f1 >= NB / 4)) || h_fail "the second pass faulted $((f2 - f1)) leaves: nothing evicted?"
((m1 - m0 > 0)) || h_fail "the first pass read no tree node"
h_umount
echo "rdnode: all checks passed"
