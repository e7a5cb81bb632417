#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: format v2 with leaf pieces (mkfs -O pieces, experimental:
# every tree pointer carries nblocks; this version reads chains and writes
# bases only) through the real tools: mkfs says so and the inode tree's
# root names its node's blocks (a superblock slot's byte 1017, 1..4), a plain v2
# image leaves that byte zero; -O pieces,^short_nodes is refused.  A mount
# writes 3000 files in 30 directories and a file of 8 MiB (the inode tree
# gets internal nodes, so child pointers carry nblocks too), the remount
# reads them back unchanged, a kill -9 and the mount after it too; fsck
# -n is clean after each.  The leaf chains with pieces are
# tests/unit/test_v2pieces.c's.
source "$(dirname "$0")/harness.sh"

h_need_fsck
: "${CTL:?CTL must name twinfs-ctl}"

# The inode tree root's byte 25 in the superblock slots (blocks 0 and 1):
# the larger (mkfs writes slot 1 only; a slot without the bit says 0).
root_nblocks() {
	local a b
	a=$(od -An -tu1 -j $((992 + 25)) -N1 "${IMGS[0]}" | tr -d ' ')
	b=$(od -An -tu1 -j $((4096 + 992 + 25)) -N1 "${IMGS[0]}" | tr -d ' ')
	echo $((a > b ? a : b))
}

h_setup 2 256M -O v2
[[ $(root_nblocks) == 0 ]] || h_fail "plain v2: root byte 25 is $(root_nblocks), not 0"
if out=$("$MKFS" -f -O v2,pieces,^short_nodes "${IMGS[@]}" 2>&1); then
	h_fail "mkfs -O pieces,^short_nodes accepted: $out"
fi
grep -q "pieces need short nodes" <<<"$out" || h_fail "mkfs -O pieces,^short_nodes: $out"
out=$("$MKFS" -f -O v2,pieces -L pieces "${IMGS[@]}" 2>&1) || h_fail "mkfs -O pieces: $out"
grep -q "^  nodes:   short.*leaf pieces (experimental)" <<<"$out" || h_fail "mkfs -O pieces: $out"
nb=$(root_nblocks)
((nb >= 1 && nb <= 4)) || h_fail "-O pieces: the inode root's nblocks is $nb"
h_fsck 0 -n "${IMGS[@]}"

h_mount
for d in $(seq 0 29); do
	mkdir "$MNT/d$d"
	for f in $(seq 0 99); do echo "$d.$f" >"$MNT/d$d/f$f"; done
done
head -c 8M /dev/urandom >"$MNT/big"
sums=$(cd "$MNT" && h_sums big d7/f42 d29/f99)
h_umount
h_fsck 0 -n -v "${IMGS[@]}"
n=$(sed -n 's/^tree inodes: [0-9]* items in \([0-9]*\) nodes.*/\1/p' <<<"$FOUT")
((n > 1)) || h_fail "the inode tree has ${n:-?} nodes: no child pointer to check"
h_log "inode tree: $n nodes"
nb=$(root_nblocks)
((nb >= 1 && nb <= 4)) || h_fail "after the mount: the inode root's nblocks is $nb"

h_mount
[[ $(cd "$MNT" && h_sums big d7/f42 d29/f99) == "$sums" ]] || h_fail "files differ, remounted"
[[ $(ls "$MNT/d13" | wc -l) == 100 ]] || h_fail "d13 has $(ls "$MNT/d13" | wc -l) entries"
echo more >"$MNT/d3/new"
"$CTL" sync "$MNT" >/dev/null || h_fail "twinfs-ctl sync"
h_crash
h_mount
[[ $(cat "$MNT/d3/new") == more ]] || h_fail "d3/new after kill -9: $(cat "$MNT/d3/new")"
[[ $(cd "$MNT" && h_sums big d7/f42 d29/f99) == "$sums" ]] || h_fail "files differ after kill -9"
h_umount
h_fsck 0 -n "${IMGS[@]}"
h_log "ok"
