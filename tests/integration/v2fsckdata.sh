#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: format v2: fsck.twinfs checks every data block's copies
# against the EXTENT items' checksums, as version 1's fsck does.  One
# block of a file garbled on image 0, one of another file on image 1: -n
# names both by inode and offset (exit 4), -y rewrites them from the good
# copy (exit 1), a second -n is clean and the images agree again; blocks
# a copy_file_range copy shares are read once.  A block
# garbled on both images: "no copy verifies: unrecoverable", naming the
# inode and offset, exit 4 with -n and -y.  After kill -9 with an overwrite,
# a delete and a new file in the log (the checkpoint's blocks freed,
# discarded or reused): -n is clean, because the checkpoint's blocks the log
# changes are not checked, but the blocks the log maps (each file block's
# newest record) are: one garbled on image 1 is found and repaired.
# Before this, v2 fsck read no data block and exited 0 on all of it.
source "$(dirname "$0")/harness.sh"

h_need_fsck

BLK_TAG=FSCKV2
source "$(dirname "$0")/blocklib.sh"
garble() {	# IMG BLOCK
	dd if=/dev/urandom of="$1" bs=4096 seek="$2" count=1 conv=notrunc status=none
}
blk_sum() {	# IMG BLOCK
	dd if="$1" bs=4096 skip="$2" count=1 status=none | cksum
}

h_setup 2 128M -O v2
h_mount
mkfile "$MNT/a" a 300
mkfile "$MNT/b" b 3
ino_a=$(stat -c %i "$MNT/a")
ino_b=$(stat -c %i "$MNT/b")
cp "$MNT/b" "$MNT/c"	# copy_file_range: c shares b's blocks
(cd "$MNT" && sha256sum a b c) >"$T/sums"
h_umount

h_fsck 0 -n -v "${IMGS[@]}"
n=$(sed -n 's/^data: \([0-9]*\) blocks checked on every copy.*/\1/p' <<<"$FOUT")
shared=$(sed -n 's/.* data blocks (\([0-9]*\) shared)$/\1/p' <<<"$FOUT")
if ((${shared:-0} > 0)); then
	# a shared block is read once
	((${n:-0} == 303)) || h_fail "fsck -v checked ${n:-no} data blocks, the files have 303: $FOUT"
else
	h_log "note: cp made no shared blocks"
	((${n:-0} == 306)) || h_fail "fsck -v checked ${n:-no} data blocks, the files have 306: $FOUT"
fi

a100=$(blk_of "${IMGS[0]}" a 100)
b1=$(blk_of "${IMGS[1]}" b 1)
h_log "block 100 of a ($ino_a) at $a100 garbled on image 0, block 1 of b ($ino_b) at $b1 on image 1"
garble "${IMGS[0]}" "$a100"
garble "${IMGS[1]}" "$b1"
h_fsck 4 -n "${IMGS[@]}"
grep -qF "<inode $ino_a>: offset 409600 (block $a100): bad copy on ${IMGS[0]}: not fixed (-n)" \
	<<<"$FOUT" || h_fail "fsck -n does not name the bad copy of a: $FOUT"
grep -qF "<inode $ino_b>: offset 4096 (block $b1): bad copy on ${IMGS[1]}: not fixed (-n)" \
	<<<"$FOUT" || h_fail "fsck -n does not name the bad copy of b: $FOUT"
h_fsck 1 -y "${IMGS[@]}"
[[ $(grep -c "rewritten from a good copy" <<<"$FOUT") == 2 ]] ||
	h_fail "fsck -y did not rewrite both copies: $FOUT"
grep -q "2 errors found, 2 fixed, 0 left" <<<"$FOUT" || h_fail "fsck -y: $FOUT"
h_fsck 0 -n "${IMGS[@]}"
[[ $(blk_sum "${IMGS[0]}" "$a100") == $(blk_sum "${IMGS[1]}" "$a100") ]] ||
	h_fail "block $a100 differs between the images after fsck -y"
[[ $(blk_sum "${IMGS[0]}" "$b1") == $(blk_sum "${IMGS[1]}" "$b1") ]] ||
	h_fail "block $b1 differs between the images after fsck -y"
h_mount
(cd "$MNT" && sha256sum --quiet -c "$T/sums") || h_fail "files differ after fsck -y"
h_umount

b2=$(blk_of "${IMGS[0]}" b 2)
h_log "block 2 of b at $b2 garbled on both images"
garble "${IMGS[0]}" "$b2"
garble "${IMGS[1]}" "$b2"
for mode in -n -y; do
	h_fsck 4 "$mode" "${IMGS[@]}"
	grep -qF "<inode $ino_b>: offset 8192 (block $b2): no copy verifies: unrecoverable" \
		<<<"$FOUT" || h_fail "fsck $mode does not name the unrecoverable block: $FOUT"
done

h_log "kill -9 after an overwrite, a delete and a new file: the log frees checkpoint blocks"
h_mount
rm "$MNT/b" "$MNT/c"
mkfile "$T/a2" A 300
dd if="$T/a2" of="$MNT/a" bs=1M conv=notrunc,fsync status=none
mkfile "$MNT/e" e 200
sync "$MNT/e"
# newer records over the log's own: e's blocks 10-19 again, a cut to 250
mkfile "$T/e2" E 10
dd if="$T/e2" of="$MNT/e" bs=4096 seek=10 conv=notrunc,fsync status=none
truncate -s $((250 * 4096)) "$MNT/a"
sync "$MNT/a"
sleep 1		# discard of the freed blocks (background, once durable)
(cd "$MNT" && sha256sum a e) >"$T/sums"
ino_e=$(stat -c %i "$MNT/e")
h_crash
# The checkpoint still maps a's old blocks: now discarded or reused.
old=$(dd if="${IMGS[0]}" bs=4096 skip="$a100" count=1 status=none | head -c 14 | tr -d '\0')
[[ $old == "FSCKV2:a:0100:" ]] &&
	h_log "note: a's old block 100 still holds its old data (not discarded or reused yet)"
h_fsck 0 -n -v "${IMGS[@]}"
n=$(sed -n 's/^data: .*(\([0-9]*\) the log after the checkpoint maps).*/\1/p' <<<"$FOUT")
((${n:-0} == 450)) || h_fail "fsck -v checked ${n:-no} blocks the log maps, a and e have 450: $FOUT"
# Blocks only the log maps are checked as the replay will map them.
e5=$(blk_of "${IMGS[1]}" e 5)
garble "${IMGS[1]}" "$e5"
h_fsck 4 -n "${IMGS[@]}"
grep -qF "<inode $ino_e>: offset 20480 (block $e5): bad copy on ${IMGS[1]}: not fixed (-n)" \
	<<<"$FOUT" || h_fail "fsck -n does not name the bad copy of e (in the log only): $FOUT"
h_fsck 1 -y "${IMGS[@]}"
h_fsck 0 -n "${IMGS[@]}"
h_mount
(cd "$MNT" && sha256sum --quiet -c "$T/sums") || h_fail "files differ after the crash"
h_umount
h_fsck 0 -n "${IMGS[@]}"
h_log "v2 fsck: data copies checked, repaired from a good copy, unrecoverable ones named"
