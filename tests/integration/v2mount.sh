#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: format v2, step 3: mount a v2 image (mkfs -O v2 on two
# images) and keep its metadata in the trees.  A mix of operations (files,
# directories, rename, hard links, symlinks, xattrs inline and chunked,
# truncate, fallocate, sparse writes, copy_file_range, a directory with
# entries removed), a manifest of everything (v2manifest.py: inode numbers,
# modes, sizes, mtimes, targets, xattrs, sha256 of every file, readdir
# cookies), unmount, fsck.twinfs clean, remount: the same manifest.  kill -9
# after fsync: the fsynced file is there after the remount (log replay on
# the loaded trees; the default mount serves before its checkpoint, the log
# continued: lazyreplay), fsck clean after; a fallocate logged in the short form
# (no checksums for unwritten blocks) is there after it too.  Scrub runs (data and tree nodes);
# replace copies the trees onto a new image (the rest of the test runs on
# it; v2scrub.sh tests node repair and rebuild).  A checkpoint after changing one
# file among 5,000 writes far less than the INODES tree holds.
source "$(dirname "$0")/harness.sh"

h_need_fsck
: "${CTL:?CTL must name twinfs-ctl}"
MANIFEST="$(dirname "$0")/v2manifest.py"

manifest() { python3 "$MANIFEST" "$MNT" >"$1" || h_fail "manifest of $MNT"; }
same() {
	diff -u "$1" "$2" >&2 || h_fail "$3: the tree differs (diff above)"
}
# The checkpoint.written_bytes of the mounted file system after forcing
# one checkpoint.
ckpt_bytes() {
	"$CTL" raw "$MNT" checkpoint >"$T/ckpt.json" || h_fail "twinfs-ctl raw checkpoint: $(cat "$T/ckpt.json")"
	python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["written_bytes"])' "$T/ckpt.json"
}
fsck_clean() {
	h_fsck 0 -n -v "${IMGS[@]}"
	grep -q "^0 errors found" <<<"$FOUT" || h_fail "fsck after $1: $FOUT"
}

h_setup 2 512M -O v2
h_mount

h_log "a mix of operations"
(
	cd "$MNT"
	mkdir -p d1/sub d2 many
	echo hello >d1/f
	dd if=/dev/urandom of=d1/big bs=1M count=6 status=none
	ln d1/f d2/hardlink
	ln -s ../d1/f d2/symlink
	ln -s "$(printf 'x%.0s' {1..3000})" d2/longlink
	mv d1/big d1/moved
	truncate -s 100M d1/sparse
	dd if=/dev/urandom of=d1/sparse bs=4k seek=7000 count=5 conv=notrunc status=none
	dd if=/dev/urandom of=d1/sparse bs=4k seek=20000 count=1 conv=notrunc status=none
	fallocate -l 3M d1/falloc
	dd if=/dev/urandom of=d1/falloc bs=4k seek=10 count=2 conv=notrunc status=none
	dd if=/dev/urandom of=d1/trunc bs=1M count=3 status=none
	truncate -s 1234567 d1/trunc
	for i in $(seq 1 300); do echo "$i" >"many/f$i"; done
	for i in $(seq 1 3 300); do rm "many/f$i"; done
	for i in $(seq 3 6 300); do mv "many/f$i" "many/r$i"; done
	mkfifo d2/fifo
	python3 - <<'PY'
import os
os.setxattr("d1/f", "user.small", b"v" * 10)
os.setxattr("d1/f", "user.big", bytes(range(256)) * 40)	# 10240 bytes: XCHUNK items
os.setxattr("d2", "user.dir", b"on a directory")
os.setxattr("d1/moved", "user.gone", b"x")
os.removexattr("d1/moved", "user.gone")
src = os.open("d1/moved", os.O_RDONLY)
dst = os.open("d2/copy", os.O_WRONLY | os.O_CREAT, 0o640)
left = 4 << 20
while left:
    n = os.copy_file_range(src, dst, left, 1 << 20, 1 << 20)
    if n <= 0:
        raise SystemExit("copy_file_range returned %d" % n)
    left -= n
os.close(src)
os.close(dst)
PY
) || h_fail "operations"
manifest "$T/m1"
grep -q 'xattr user.big=' "$T/m1" || h_fail "manifest has no xattr: $(head -5 "$T/m1")"
grep -q 'entries=.*f5@.*r9@' "$T/m1" || h_fail "manifest has no cookies"

h_umount
fsck_clean "the first unmount"
grep -q "^tree inodes: [0-9]* items" <<<"$FOUT" || h_fail "fsck did not walk the tree: $FOUT"
h_mount
manifest "$T/m2"
same "$T/m1" "$T/m2" "remount"

h_log "scrub runs on the data and the tree nodes; replace copies the trees"
"$CTL" scrub start "$MNT" --wait >"$T/scrub" 2>&1 || h_fail "scrub on v2: $(cat "$T/scrub")"
truncate -s 512M "$T/new.img"
"$CTL" replace "$MNT" "${IMGS[1]}" "$T/new.img" --wait >"$T/replace" 2>&1 ||
	h_fail "replace on v2: $(cat "$T/replace")"
IMGS=("${IMGS[0]}" "$T/new.img")

h_log "kill -9 after fsync"
python3 - "$MNT" <<'PY' || h_fail "fsync writer"
import os, sys
m = sys.argv[1]
fd = os.open(m + "/d2/fsynced", os.O_WRONLY | os.O_CREAT, 0o600)
os.write(fd, b"durable " * 100000)
os.fsync(fd)
os.close(fd)
os.mkdir(m + "/newdir")
os.rename(m + "/d1/f", m + "/newdir/f")
fd = os.open(m + "/newdir", os.O_RDONLY)
os.fsync(fd)
os.close(fd)
PY
sum_fsynced=$(h_sums "$MNT/d2/fsynced")
# fallocate logs unwritten runs in the short form: a few blocks of log for
# 200 MiB (the long form carried 8 bytes per block: 100 blocks of zeros).
logb() { "$CTL" stats "$MNT" | awk -F': ' '$1 == "log.chunk_blocks" { print $2 }'; }
lb0=$(logb)
fallocate -l 200M "$MNT/d2/prealloc" || h_fail "fallocate 200M"
python3 -c 'import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)' "$MNT/d2/prealloc" ||
	h_fail "fsync of the fallocated file"
lb1=$(logb)
[[ -n $lb0 && -n $lb1 ]] || h_fail "no log.chunk_blocks in twinfs-ctl stats"
h_log "fallocate 200M wrote $((lb1 - lb0)) log blocks"
((lb1 - lb0 < 40)) || h_fail "fallocate of 200M wrote $((lb1 - lb0)) log blocks (short form: under 40)"
h_crash
h_mount
# The default mount after a crash serves at once, its checkpoint owed
# (lazyreplay, the default since session 39; docs/FORMAT.md "Log continuation").
cont=$("$CTL" raw "$MNT" status | python3 -c 'import json, sys
m = json.load(sys.stdin)["mount"]
print(m["log_continued"], m["ckpt_write_ns"])')
[[ $cont == "1 0" ]] || h_fail "the default mount after kill -9 wrote its checkpoint before serving" \
	"(log_continued, ckpt_write_ns: $cont): lazyreplay is the default"
[[ $(stat -c %s "$MNT/d2/prealloc") == $((200 << 20)) ]] || h_fail "fallocated file's size after kill -9"
cmp -n $((200 << 20)) "$MNT/d2/prealloc" /dev/zero || h_fail "fallocated file does not read as zeros after kill -9"
[[ $(stat -c %b "$MNT/d2/prealloc") -ge $((200 << 11)) ]] || h_fail "fallocated blocks lost after kill -9: $(stat -c %b "$MNT/d2/prealloc")"
rm "$MNT/d2/prealloc"
[[ $(h_sums "$MNT/d2/fsynced") == "$sum_fsynced" ]] || h_fail "fsynced file lost or changed after kill -9"
[[ -f $MNT/newdir/f && ! -e $MNT/d1/f ]] || h_fail "fsynced rename lost after kill -9"
mv "$MNT/newdir/f" "$MNT/d1/f"
rm "$MNT/d2/fsynced"
rmdir "$MNT/newdir"
manifest "$T/m3"
# Moved back, d1/f has a new cookie in d1, and the three directories new
# mtimes: everything else is as before.
grep -Ev '^(\.|d1|d2) ' "$T/m1" >"$T/m1.rest"
grep -Ev '^(\.|d1|d2) ' "$T/m3" >"$T/m3.rest"
same "$T/m1.rest" "$T/m3.rest" "kill -9 and remount"
h_umount
fsck_clean "kill -9 and remount"

h_log "checkpoint cost: one file changed among 5,000"
h_mount
mkdir "$MNT/k"
for d in 0 1 2 3 4; do
	mkdir "$MNT/k/$d"
	(cd "$MNT/k/$d" && for i in $(seq 1 1000); do echo "$d $i" >"f$i"; done)
done
b0=$(ckpt_bytes)
b1=$(ckpt_bytes)
echo changed >>"$MNT/k/3/f500"
b2=$(ckpt_bytes)
h_umount
fsck_clean "5,000 files"
nodes=$(sed -n 's/^tree inodes: [0-9]* items in \([0-9]*\) nodes$/\1/p' <<<"$FOUT")
[[ -n $nodes ]] || h_fail "no node count from fsck: $FOUT"
tree=$((nodes * 16384))
one=$((b2 - b1))
h_log "INODES tree: $nodes nodes ($tree bytes); checkpoint of nothing: $((b1 - b0)) bytes; of one file: $one bytes"
((nodes >= 40)) || h_fail "5,000 files in only $nodes nodes"
((one > 0)) || h_fail "the checkpoint after a change wrote nothing"
((one * 10 < tree)) || h_fail "a checkpoint of one changed file wrote $one bytes, the tree is $tree"
h_mount
[[ $(cat "$MNT/k/3/f500") == $'3 500\nchanged' ]] || h_fail "the changed file after remount"
[[ $(find "$MNT/k" -type f | wc -l) == 5000 ]] || h_fail "5,000 files after remount"
h_umount

echo "v2mount: all checks passed"
