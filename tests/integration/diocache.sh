#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: asynchronous O_DIRECT writes beside buffered readers of one
# file (xfstests generic/451): after each write, a buffered read returns
# what it wrote.  The kernel drops the range from the page cache when it
# sends such a write, not after it, and a READ served meanwhile put the old
# data back (kept by keep_cache): the daemon marks the file for the next
# cached open and drops the range itself before the reply when a cached
# open is there (ops.c struct direct_write).  Without that the first stale
# read came within seconds here.
source "$(dirname "$0")/harness.sh"

h_setup 2 256M
h_mount
out=$("$DIOCACHE" "$MNT/f" 20) || h_fail "$out"
h_log "$out"
h_umount
h_fsck 0 -n "${IMGS[@]}"
echo "diocache: $out"
