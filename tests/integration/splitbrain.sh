#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: split brain.  Image 1 away, image 0 mounted -o degraded and
# written; then image 0 away, image 1 mounted -o degraded (several times,
# so its generation passes image 0's) and written: each superblock records
# the other device stale.  Mounting both is refused, with -o degraded too,
# in one line naming both images (before, the newer generation won and the
# other half's fsynced files were rebuilt away without a word).  fsck -n
# and -y say "split brain" (exit 4) and change nothing (before, -y brought
# the older half "up to date" from the newer one).  Each image alone still
# mounts with its own files.
source "$(dirname "$0")/harness.sh"

LOG_ALLOW='is missing|mounted degraded|stale'

h_setup 2 128M -O v2
a=${IMGS[0]}
b=${IMGS[1]}
h_mount
echo both >"$MNT/f"
h_umount

h_log "image 0 alone, then image 1 alone, each written"
mv "$b" "$T/b.away"
h_mount "$a" degraded
echo a >"$MNT/only_a"
h_umount
mv "$T/b.away" "$b"
mv "$a" "$T/a.away"
for i in 1 2 3; do
	h_mount "$b" degraded
	echo "b $i" >>"$MNT/only_b"
	h_umount
done
mv "$T/a.away" "$a"

for opts in "" degraded; do
	h_mount_fails "$a:$b" "$opts"
	h_expect_one_line "$FAIL_OUT" "split brain" "mount -o '$opts' of two diverged halves"
	grep -q "$(basename "$a")" <<<"$FAIL_OUT" && grep -q "$(basename "$b")" <<<"$FAIL_OUT" ||
		h_fail "the refusal does not name both images: $FAIL_OUT"
done

h_need_fsck
sums=$(h_sums "$a" "$b")
for mode in -n -y; do
	h_fsck 4 "$mode" "$a" "$b"
	grep -q "split brain" <<<"$FOUT" || h_fail "fsck $mode does not say split brain: $FOUT"
done
[[ $(h_sums "$a" "$b") == "$sums" ]] || h_fail "fsck -y changed the diverged halves"

h_log "each half alone keeps its own files"
cp --sparse=always "$a" "$T/alone.img"
h_mount "$T/alone.img" degraded
[[ -f $MNT/only_a && ! -e $MNT/only_b ]] || h_fail "image 0 alone: $(ls "$MNT")"
h_umount
cp --sparse=always "$b" "$T/alone.img"
h_mount "$T/alone.img" degraded
[[ -f $MNT/only_b && ! -e $MNT/only_a ]] || h_fail "image 1 alone: $(ls "$MNT")"
h_umount
echo "splitbrain: two halves changed apart are refused together, each mounts alone"
