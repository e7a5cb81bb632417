#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: format v2 (the default) through the real tools: mkfs.twinfs
# -O v2 on two images writes superblocks and trees on both, with short
# nodes (the default) and with whole ones (-O v2,^short_nodes); fsck.twinfs
# checks it clean, free space included (fspace_verify, the node map marks
# exactly the two nodes mkfs wrote, the free count is the superblock's);
# a node garbled on one image is reported by -n (exit 4),
# rewritten from the other image by -y (exit 1), then clean (0); a damaged
# superblock slot is rewritten by -y; a node garbled on both images is
# unrecoverable (exit 4).  mkfs -O refuses v2's node features with v1 and
# reads a long list whole.  Mounting v2 is tests/integration/v2mount.sh.
source "$(dirname "$0")/harness.sh"

h_need_fsck

h_setup 2 256M -O v2
out=$("$MKFS" -f -O v2,^short_nodes -L v2 "${IMGS[@]}" 2>&1) || h_fail "mkfs whole nodes: $out"
grep -q "^  nodes:   whole" <<<"$out" || h_fail "mkfs -O ^short_nodes: $out"
# -O's list: v1 has no node features (refused, exit 2, before any
# device is touched); a list past 255 characters is read whole (its last
# word counts).
if out=$("$MKFS" -f -O v1,^short_nodes "${IMGS[@]}" 2>&1); then h_fail "mkfs -O v1,^short_nodes accepted: $out"; fi
grep -q "features of format v2, not v1" <<<"$out" || h_fail "mkfs -O v1,^short_nodes: $out"
long=v2$(printf ',short_nodes%.0s' {1..30}),^short_nodes
out=$("$MKFS" -f -O "$long" -L v2 "${IMGS[@]}" 2>&1) || h_fail "mkfs long -O: $out"
grep -q "^  nodes:   whole" <<<"$out" || h_fail "mkfs long -O list cut short: $out"
# Whole nodes: the node map's 2048-byte value ends at the node's end.
map_at=$(((4116 * 4096 + 16384 - 2048) / 2048))
node_blocks=4	# the inode tree's root: what a repair writes
fmt_checks() {
h_fsck 0 -n -v "${IMGS[@]}"
grep -q "^format v2: checking" <<<"$FOUT" || h_fail "fsck did not check v2: $FOUT"
grep -q "^tree inodes: 1 items in 1 nodes" <<<"$FOUT" || h_fail "fsck inode tree: $FOUT"
grep -q "^tree free space: 1 items in 1 nodes" <<<"$FOUT" || h_fail "fsck free tree: $FOUT"
grep -q "^1 inodes (1 directories" <<<"$FOUT" || h_fail "fsck root inode: $FOUT"
# 256 MiB: 65536 blocks, node area 4112 + 2048 blocks (512 slots), the rest free
grep -q "^free space: 59376 free blocks, 2 of 512 node slots used" <<<"$FOUT" ||
	h_fail "fsck free space: $FOUT"
grep -q "^0 errors found" <<<"$FOUT" || h_fail "fsck: $FOUT"

# Layout (docs/FORMAT.md): 256 MiB = 65536 blocks, log 4096 blocks from
# block 16, data and the node area from block 4112; mkfs writes the inode
# tree's root node first (4112..4115), then the free-space tree's (4116..).
# The free-space tree's one item is NODEMAP chunk 0, its 2048-byte value at
# the end of the node: slots 0 and 1 (those two nodes) used, nothing else.
map=$(dd if="${IMGS[0]}" bs=2048 skip=$map_at count=1 \
	status=none | od -An -tx1 -v | tr -d ' \n')
[[ $map == 03$(printf '0%.0s' {1..4094}) ]] || h_fail "node map of mkfs: ${map:0:32}..."
dd if=/dev/urandom of="${IMGS[1]}" bs=4096 seek=4112 count=4 conv=notrunc status=none
h_fsck 4 -n "${IMGS[@]}"
grep -q "disk1.img: 1 bad node copies: not fixed (-n)" <<<"$FOUT" || h_fail "fsck -n: $FOUT"
h_fsck 1 -y "${IMGS[@]}"
grep -q "disk1.img: 1 bad node copies: rewritten from a good copy" <<<"$FOUT" ||
	h_fail "fsck -y: $FOUT"
h_fsck 0 -n "${IMGS[@]}"
cmp <(dd if="${IMGS[0]}" bs=4096 skip=4112 count=$node_blocks status=none) \
	<(dd if="${IMGS[1]}" bs=4096 skip=4112 count=$node_blocks status=none) ||
	h_fail "the repaired node differs from the good copy"

# A damaged superblock slot: -n reports it, -y rewrites both slots of every
# image (generation + 2), then clean.
printf '\x01' | dd of="${IMGS[0]}" bs=1 seek=$((4096 + 300)) conv=notrunc status=none
h_fsck 4 -n "${IMGS[@]}"
grep -q "superblock slot 1 damaged" <<<"$FOUT" || h_fail "fsck -n slot: $FOUT"
h_fsck 1 -y "${IMGS[@]}"
h_fsck 0 -n -v "${IMGS[@]}"
grep -q "disk0.img: superblock slot 0: generation" <<<"$FOUT" || h_fail "slot 0 not rewritten: $FOUT"
grep -q "disk0.img: superblock slot 1: generation" <<<"$FOUT" || h_fail "slot 1 not rewritten: $FOUT"

# The free-space tree's node on both images: nothing can repair it.
for img in "${IMGS[@]}"; do
	printf '\xff\xfe\xfd' | dd of="$img" bs=1 seek=$((4116 * 4096 + 200)) conv=notrunc status=none
done
h_fsck 4 -y "${IMGS[@]}"
grep -q "tree free space: a node no copy holds intact: unrecoverable" <<<"$FOUT" ||
	h_fail "fsck with a node bad on both images: $FOUT"
h_fsck 4 -n "${IMGS[@]}"
}
fmt_checks
out=$("$MKFS" -f -O v2 -L v2 "${IMGS[@]}" 2>&1) || h_fail "mkfs -O v2: $out"
grep -qx "  format:  v2" <<<"$out" || h_fail "mkfs does not say v2: $out"
grep -q "^  nodes:   short" <<<"$out" || h_fail "mkfs -O v2 without short nodes: $out"
out=$("$MKFS" -O v3 "${IMGS[@]}" 2>&1) && h_fail "mkfs -O v3 accepted"
grep -q "unknown format or feature 'v3'" <<<"$out" || h_fail "mkfs -O v3: $out"
# Short nodes: the free-space tree's node is one block (96 + 20 + 2048
# bytes), its value ending at 4096; the rest of the slot is not written.
map_at=$(((4116 * 4096 + 4096 - 2048) / 2048))
node_blocks=1
fmt_checks
h_log "ok"
