#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: format v2: fsck.twinfs brings a stale device up to date, as
# version 1's fsck does.  Image 1 is missing while image 0 is mounted
# -o degraded and files are overwritten, deleted and created (a few hundred
# small ones: new tree nodes), then once more until kill -9 after an fsync
# (records in the log after the checkpoint).  fsck -n says image 1 is stale
# (exit 4); -y brings every node, data block and the log onto it (exit 1),
# and -n is then clean on both.  Then image 0 is left out: image 1 alone
# mounts and every file reads back with its checksum.  -p does the same
# (exit 1).  A block image 1 did not miss, garbled on image 0, is taken
# from image 1's copy, which verifies (exit 1).  A block written while
# image 1 was away and then garbled on
# image 0 has no good copy: -y names it by inode and offset as
# unrecoverable and image 1 stays stale (exit 4).  Before this, v2 fsck
# left a stale device out: -n exited 0, -y left it stale.
source "$(dirname "$0")/harness.sh"

h_need_fsck

BLK_TAG=STALE
source "$(dirname "$0")/blocklib.sh"
sums() {
	(cd "$MNT" && find . -type f -print0 | sort -z | xargs -0 sha256sum)
}
# degraded_round: image 0 alone, some changes, a clean unmount: image 1 stale.
degraded_round() {
	h_mount "${IMGS[0]}" degraded
	mkfile "$MNT/$1" "$1" 40
	rm -f "$MNT/s/$1"*
	ROUND_INO=$(stat -c %i "$MNT/$1")
	h_umount
}

h_setup 2 128M -O v2
h_mount
mkfile "$MNT/a" a 300
mkfile "$MNT/b" b 20
mkdir "$MNT/s"
for i in $(seq 1 50); do echo "old $i" >"$MNT/s/old$i"; done
h_umount

h_log "image 0 alone (-o degraded): overwrites, deletes, new files"
h_mount "${IMGS[0]}" degraded
mkfile "$T/a2" A 100
dd if="$T/a2" of="$MNT/a" bs=4096 seek=50 conv=notrunc status=none
rm "$MNT/b" "$MNT/s/old"{1..20}
mkfile "$MNT/c" c 200
for i in $(seq 1 400); do echo "new $i" >"$MNT/s/new-file-with-a-longer-name-$i"; done
ln -s a "$MNT/s/link"
h_umount
h_log "and again, until kill -9 after an fsync: the log after the checkpoint holds it"
h_mount "${IMGS[0]}" degraded
mkfile "$MNT/d" d 60
dd if="$T/a2" of="$MNT/a" bs=4096 seek=200 count=10 conv=notrunc status=none
for i in $(seq 1 30); do echo "late $i" >"$MNT/s/late$i"; done
rm "$MNT/s/old2"{1..9}
sync "$MNT/d" "$MNT/a" "$MNT"/s/late* "$MNT/s"	# fsync each: in the log, no checkpoint
sums >"$T/sums"
nfiles=$(wc -l <"$T/sums")
h_crash

h_fsck 4 -n -v "${IMGS[@]}"
grep -qF "${IMGS[1]}: stale (it missed writes while failed or missing): not fixed (-n)" \
	<<<"$FOUT" || h_fail "fsck -n does not say image 1 is stale: $FOUT"
nrec=$(sed -n 's/^log: \([0-9]*\) records after the checkpoint$/\1/p' <<<"$FOUT")
((${nrec:-0} > 0)) || h_fail "the log after the checkpoint is empty: kill -9 came too late: $FOUT"
bad=$(sed -n "s|^${IMGS[1]}: [0-9]* blocks checked, \([0-9]*\) bad, 0 repaired$|\1|p" <<<"$FOUT")
((${bad:-0} > 0)) || h_fail "fsck -n found no out-of-date copy on image 1: $FOUT"
h_fsck 1 -y "${IMGS[@]}"
grep -qF "${IMGS[1]}: stale (it missed writes while failed or missing): bringing every block up to date" \
	<<<"$FOUT" || h_fail "fsck -y does not say it brings image 1 up to date: $FOUT"
grep -q "^1 errors found, 1 fixed, 0 left$" <<<"$FOUT" || h_fail "fsck -y: $FOUT"
h_fsck 0 -n "${IMGS[@]}"
for img in "${IMGS[@]}"; do
	grep -qE "^$img: [0-9]+ blocks checked, 0 bad, 0 repaired$" <<<"$FOUT" ||
		h_fail "fsck -n after -y: copies on $img still bad: $FOUT"
done

h_log "image 0 left out: image 1 alone must hold everything"
mv "${IMGS[0]}" "$T/img0.away"
h_mount "${IMGS[1]}" degraded
sums >"$T/sums1"
diff "$T/sums" "$T/sums1" >&2 || h_fail "image 1 alone does not hold what was written ($nfiles files)"
[[ $(readlink "$MNT/s/link") == a ]] || h_fail "the symlink made while image 1 was away is lost"
h_umount
mv "$T/img0.away" "${IMGS[0]}"
# Image 0 is stale now (missing while image 1 mounted): fsck -y, both in sync.
h_fsck 1 -y "${IMGS[@]}"
h_fsck 0 -n "${IMGS[@]}"

h_log "-p brings a stale device up to date too"
degraded_round p
h_fsck 4 -n "${IMGS[@]}"
h_fsck 1 -p "${IMGS[@]}"
h_fsck 0 -n "${IMGS[@]}"

h_log "a block unchanged since image 1 went away, garbled on image 0: image 1's copy verifies"
degraded_round q
a10=$(blk_of "${IMGS[0]}" a 10)
dd if=/dev/urandom of="${IMGS[0]}" bs=4096 seek="$a10" count=1 conv=notrunc status=none
h_fsck 1 -y "${IMGS[@]}"
grep -qF "offset 40960 (block $a10): only the stale device ${IMGS[1]}'s copy verifies" \
	<<<"$FOUT" || h_fail "fsck -y does not take a's block from image 1's verifying copy: $FOUT"
grep -qF "no copy verifies" <<<"$FOUT" && h_fail "fsck -y calls a's block lost: $FOUT"
h_fsck 0 -n "${IMGS[@]}"
h_mount
[[ $(sha256sum <"$MNT/a" | cut -d' ' -f1) == $(sed -n 's|^\([0-9a-f]*\)  ./a$|\1|p' "$T/sums") ]] ||
	h_fail "a does not read back after its block was taken from the stale copy"
h_umount

h_log "a block written while image 1 was away, garbled on image 0: unrecoverable"
degraded_round g
ino_g=$ROUND_INO
g3=$(blk_of "${IMGS[0]}" g 3)
dd if=/dev/urandom of="${IMGS[0]}" bs=4096 seek="$g3" count=1 conv=notrunc status=none
h_fsck 4 -y "${IMGS[@]}"
grep -qF "<inode $ino_g>: offset 12288 (block $g3): no copy verifies: unrecoverable" <<<"$FOUT" ||
	h_fail "fsck -y does not name g's lost block: $FOUT"
grep -qE "^${IMGS[1]}: [0-9]+ blocks could not be brought up to date; it stays stale$" \
	<<<"$FOUT" || h_fail "fsck -y does not keep image 1 stale: $FOUT"
h_fsck 4 -n "${IMGS[@]}"
grep -qF "${IMGS[1]}: stale" <<<"$FOUT" || h_fail "image 1 no longer stale after a failed -y: $FOUT"
h_log "v2 fsck: a stale device reported, brought up to date, and then holds every file alone"
