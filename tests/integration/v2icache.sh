#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: format v2, step 4a: inodes fault in from the INODES tree
# under a bounded cache (-o cache=).  3,000 files in 10 directories (with
# hard links and an xattr), checksums and link counts noted, unmount, fsck
# clean.  Remount with -o cache=4M (1,024 resident inodes): twinfs-ctl
# stats shows only a few inodes resident after the mount, a find + stat of
# everything faults them all in (its node reads mostly read ahead, several
# at once: icache prefetch_reads against node_cache misses), and, with the kernel made to forget its
# lookups between chunks (drop_caches; v2ievict tests the lookups the
# kernel keeps), the resident count stays within the budget while every file
# is stat'ed and read; checksums, link counts and readdir are right, and
# a file changed, an inode deleted and one created survive a kill -9 and
# a remount, and the replay of 300 creates reads none of them from the
# tree (icache absent).  fsck clean at the end.  A bad cache= value: one line.
source "$(dirname "$0")/harness.sh"

h_need_fsck
: "${CTL:?CTL must name twinfs-ctl}"
N_DIRS=10
PER_DIR=300

# icache FIELD [SECTION]: the field of the mounted file system's inode
# cache (or of another section of its stats).
icache() {
	"$CTL" raw "$MNT" stats >"$T/stats.json" || h_fail "twinfs-ctl raw stats: $(cat "$T/stats.json")"
	python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[3]][sys.argv[2]])' \
		"$T/stats.json" "$1" "${2:-icache}"
}
forget() {
	sync
	echo 2 >/proc/sys/vm/drop_caches	# the kernel forgets its dentries and inodes
}
checkpoint() {
	"$CTL" raw "$MNT" checkpoint >"$T/ckpt.json" || h_fail "checkpoint: $(cat "$T/ckpt.json")"
}
# Checksums and link counts of every file, and the names of every directory.
manifest() {
	(cd "$MNT" && find . -type f -print0 | sort -z | xargs -0 stat -c '%n %h %s' &&
		find . -type f -print0 | sort -z | xargs -0 cksum &&
		find . -mindepth 1 | sort) >"$1" || h_fail "manifest"
}

h_setup 2 512M -O v2
SPEC=$(h_devspec "${IMGS[@]}")

out=$("$TWINFS" -f "$SPEC" "$MNT" -o cache=12Q 2>&1) && h_fail "cache=12Q accepted"
h_expect_one_line "$out" "cache=12Q" "a bad cache= value"
out=$("$TWINFS" -f "$SPEC" "$MNT" -o cache=1M 2>&1) && h_fail "cache=1M accepted"
h_expect_one_line "$out" "cache=1M" "a cache= below 4M"

h_mount
h_log "$((N_DIRS * PER_DIR)) files"
for d in $(seq 1 $N_DIRS); do
	mkdir "$MNT/d$d"
	(cd "$MNT/d$d" && for i in $(seq 1 $PER_DIR); do echo "file $d/$i" >"f$i"; done)
done
for i in $(seq 1 20); do ln "$MNT/d1/f$i" "$MNT/d2/link$i"; done
dd if=/dev/urandom of="$MNT/d3/big" bs=1M count=3 status=none
setfattr -n user.x -v hello "$MNT/d4/f7" 2>/dev/null ||
	python3 -c 'import os,sys; os.setxattr(sys.argv[1], "user.x", b"hello")' "$MNT/d4/f7"
manifest "$T/m1"
(cd "$MNT" && find . -type f | sort) >"$T/files"
h_umount
h_fsck 0 -n "${IMGS[@]}"

h_mount "$SPEC" cache=4M
[[ $(icache lazy) == True ]] || h_fail "the mount is not lazy: $(cat "$T/stats.json")"
max=$(icache max)
res=$(icache resident)
h_log "after mount: $res inodes resident (budget $max)"
((max == 1024)) || h_fail "cache=4M gives a budget of $max inodes, expected 1024"
((res <= 20)) || h_fail "$res inodes resident right after the mount"

f0=$(icache faults)
m0=$(icache misses node_cache)
find "$MNT" -exec stat -c '%i %h' {} + >/dev/null
faults=$(($(icache faults) - f0))
h_log "find + stat of everything: $faults faults, $(icache resident) resident"
((faults >= N_DIRS * PER_DIR)) || h_fail "find faulted only $faults inodes in"
# Its node reads were read ahead, several at once, not by each fault-in.
misses=$(($(icache misses node_cache) - m0))
pre=$(icache prefetch_reads)
h_log "node cache misses $misses, read ahead $pre"
((pre * 4 >= misses * 3)) || h_fail "only $pre of $misses node reads of a cold find were read ahead"
forget
checkpoint
res=$(icache resident)
((res <= max)) || h_fail "$res inodes resident after the kernel forgot them (budget $max)"

h_log "stat and read everything, 500 files at a time"
peak=0
split -l 500 "$T/files" "$T/chunk."
for c in "$T"/chunk.*; do
	(cd "$MNT" && xargs -d '\n' cat <"$c" >/dev/null) || h_fail "reading $c"
	(cd "$MNT" && xargs -d '\n' stat -c '%h' <"$c" >/dev/null) || h_fail "stat of $c"
	# Every fault-in dropped others.
	res=$(icache resident)
	((res > peak)) && peak=$res
	((res <= max + 64)) || h_fail "$res inodes resident while reading (budget $max)"
	forget
done
ev=$(icache evictions)
h_log "peak $peak resident, $ev evictions"
((ev > 0)) || h_fail "nothing was ever dropped"

manifest "$T/m2"
diff -u "$T/m1" "$T/m2" >&2 || h_fail "files, link counts or names differ after the lazy remount"

h_log "changes on inodes read back in, then kill -9"
forget
checkpoint
echo more >>"$MNT/d5/f5"
rm "$MNT/d6/f6"
echo new >"$MNT/d7/new"
ln "$MNT/d8/f8" "$MNT/d9/link8"
# Creates the replay makes again: numbers above every one in the trees,
# so none is looked for in the trees (icache absent: each create read
# the INODES tree once before, 300 + a few).
mkdir "$MNT/created"
python3 - "$MNT" <<'PY' || h_fail "creating created/c*"
import os, stat, sys
for i in range(300):
    os.mknod(os.path.join(sys.argv[1], "created", "c%d" % i), 0o644 | stat.S_IFREG)
PY
python3 - "$MNT" <<'PY' || h_fail "fsync"
import os, sys
for p in ("d5/f5", "d7/new", "d9", "d6", "created"):
    fd = os.open(os.path.join(sys.argv[1], p), os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
PY
h_crash
h_mount "$SPEC" cache=4M
absent=$(icache absent)
((absent < 30)) || h_fail "the replay of 300 creates looked for $absent inodes in the trees"
[[ $(ls "$MNT/created" | wc -l) == 300 ]] || h_fail "created/ after kill -9: $(ls "$MNT/created" | wc -l) files"
[[ $(cat "$MNT/d5/f5") == $'file 5/5\nmore' ]] || h_fail "d5/f5 after kill -9"
[[ ! -e $MNT/d6/f6 ]] || h_fail "d6/f6 came back after kill -9"
[[ $(cat "$MNT/d7/new") == new ]] || h_fail "d7/new after kill -9"
[[ $(stat -c %h "$MNT/d8/f8") == 2 ]] || h_fail "link count of d8/f8 after kill -9"
[[ $(stat -c %h "$MNT/d1/f3") == 2 ]] || h_fail "link count of d1/f3 after kill -9"
h_umount
h_fsck 0 -n -v "${IMGS[@]}"
grep -q "^0 errors found" <<<"$FOUT" || h_fail "fsck at the end: $FOUT"
echo "v2icache: all checks passed"
