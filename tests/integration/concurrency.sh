#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Parallel writers through the kernel, O_DIRECT: eight writers to disjoint
# ranges of one file are inside the file system at once (the file's
# user.twinfs.max_writers statistic: most write range locks held together,
# counted, not timed); writers racing on the same blocks, 4k and 16k, with
# readers alongside, never leave or show a torn block, before and after a
# remount.
source "$(dirname "$0")/harness.sh"
: "${CONCCHECK:?CONCCHECK must name the conccheck binary}"

h_setup 2 512M
h_mount

dd if=/dev/zero of="$MNT/disjoint" bs=1M count=8 conv=fsync status=none
"$CONCCHECK" disjoint "$MNT/disjoint" 8 3000 || h_fail "disjoint writers"
max=$(python3 -c 'import os, sys; print(os.getxattr(sys.argv[1], "user.twinfs.max_writers").decode())' \
	"$MNT/disjoint") ||
	h_fail "no user.twinfs.max_writers statistic"
h_log "disjoint O_DIRECT writers: at most $max in the file system at once"
((max > 1)) || h_fail "disjoint O_DIRECT writers never overlapped (max $max)"

dd if=/dev/zero of="$MNT/torn" bs=1M count=1 conv=fsync status=none
"$CONCCHECK" torn "$MNT/torn" 8 3000 || h_fail "torn block under overlapping writers"
h_remount
"$CONCCHECK" verify "$MNT/torn" || h_fail "torn block after remount"
"$CONCCHECK" verify "$MNT/disjoint" || h_fail "wrong block after remount"
h_umount
echo "concurrency: max $max writers at once; no torn block"
