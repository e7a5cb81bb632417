#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: Parallel writers through the kernel, O_DIRECT: eight writers to disjoint
# ranges of one file are inside the file system at once (the file's
# user.twinfs.max_writers statistic: most write range locks held together,
# counted, not timed); writers racing on the same blocks, 4k and 16k, with
# readers alongside, never leave or show a torn block, before and after a
# remount.  With a single FUSE worker thread, writers still overlap.
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

# One worker thread: it hands each write over to the I/O completion and goes
# back for the next request, so the writers still overlap inside the file
# system.  A worker that waited for its mirror writes would hold one write at
# a time (max 1).
h_mount "$DEVSPEC" "${MOUNT_OPTS:+$MOUNT_OPTS,}threads=1"
dd if=/dev/zero of="$MNT/one" bs=1M count=8 conv=fsync status=none
"$CONCCHECK" disjoint "$MNT/one" 8 3000 || h_fail "disjoint writers, one worker"
max1=$(python3 -c 'import os, sys; print(os.getxattr(sys.argv[1], "user.twinfs.max_writers").decode())' \
	"$MNT/one") || h_fail "no user.twinfs.max_writers statistic"
h_log "one worker thread: at most $max1 writers in the file system at once"
((max1 > 1)) || h_fail "with one worker, writes never overlapped (max $max1): replies wait for the devices"
"$CONCCHECK" verify "$MNT/one" || h_fail "wrong block, one worker"
h_umount
echo "concurrency: max $max writers at once ($max1 with one worker); no torn block"
