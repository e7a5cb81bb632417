#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: fsck.twinfs through the real tools: a populated file system is clean; with
# one image's data area garbled, -n names the damaged files (exit 4), -y
# repairs them from the other image (exit 1) and a second -n is clean (0)
# with every file intact; a device that is not twinfs and a mounted one are
# refused with one clear line (exit 8).
# Format 1 pinned (TWINFS_FORMAT=v1): this tests v1 fsck's data pass (the
# damaged files named) and its output; format 2's data pass is
# v2fsckdata.sh's (files named by inode), its tree nodes v2fmt.sh's.
TWINFS_FORMAT=v1
source "$(dirname "$0")/harness.sh"

h_need_fsck

h_setup 2 256M
h_mount
mkdir -p "$MNT/a/b" "$MNT/c"
for i in 1 2 3 4; do
	head -c $((i * 1024 * 1024 + 1234)) /dev/urandom >"$MNT/a/file$i"
done
head -c 3000000 /dev/urandom >"$MNT/a/b/deep"
cp "$MNT/a/file2" "$MNT/c/copy"
ln "$MNT/a/file1" "$MNT/c/hard"
ln -s ../a/file3 "$MNT/c/sym"
(cd "$MNT" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$T/sums"

# Mounted: refused, nothing touched.
h_fsck 8 -n "${IMGS[@]}"
h_expect_one_line "$FOUT" "in use (mounted?)" "fsck while mounted"
h_umount

h_fsck 0 -n "${IMGS[@]}"
grep -q "0 errors found" <<<"$FOUT" || h_fail "clean fsck: $FOUT"

# Garble the first 24 MiB of the data area of the first image (checkpoint
# and file blocks).  Layout (docs/FORMAT.md): 256 MiB = 65536 blocks, log
# 4096 blocks from block 16, data from block 4112.
dd if=/dev/urandom of="${IMGS[0]}" bs=4096 seek=4112 count=6144 conv=notrunc status=none
h_fsck 4 -n "${IMGS[@]}"
grep -qE '^/a/file[0-9]: offset [0-9]+ \(block [0-9]+\): bad copy on .*disk0' <<<"$FOUT" ||
	{ echo "$FOUT" | head -n 20 >&2; h_fail "fsck -n does not name the damaged files"; }
grep -q "^/a/b/deep: offset" <<<"$FOUT" || h_fail "fsck -n does not name /a/b/deep"
nbad=$(grep -c "bad copy on" <<<"$FOUT" || true)
h_log "fsck -n reported $nbad bad copies"
h_fsck 1 -y "${IMGS[@]}"
grep -v "bad copy on" <<<"$FOUT"
grep -q "rewritten from a good copy" <<<"$FOUT" || h_fail "fsck -y: $FOUT"
grep -q " 0 left" <<<"$FOUT" || h_fail "fsck -y left errors: $(tail -n 3 <<<"$FOUT")"
h_fsck 0 -n "${IMGS[@]}"

# The repaired image alone holds every file.
h_mount "${IMGS[0]}" degraded
(cd "$MNT" && sha256sum --quiet -c "$T/sums") || h_fail "files differ on the repaired image"
h_umount
# (that degraded mount marked the other image stale: -p brings it up to date)
h_fsck 1 -p "${IMGS[@]}"
echo "$FOUT"
h_fsck 0 -n "${IMGS[@]}"
h_mount "" ""	# not degraded: both images in sync again
(cd "$MNT" && sha256sum --quiet -c "$T/sums") || h_fail "files differ after fsck"
h_umount

# Not twinfs: one clear line, exit 8.
junk=$(h_mkimg junk.img 80M)
h_fsck 8 -n "$junk"
h_expect_one_line "$FOUT" "$junk: not a twinfs device" "fsck of a blank image"
mkfs.ext4 -q -F "$junk" >/dev/null 2>&1 && {
	h_fsck 8 -n "$junk"
	h_expect_one_line "$FOUT" "not a twinfs device" "fsck of an ext4 image"
}
h_fsck 8 -n
echo "fsck: clean, $nbad bad copies found and repaired, refusals ok"
