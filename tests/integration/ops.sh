#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: Every file system operation through the kernel (opcheck), then a remount
# and a check that inode numbers, data and metadata survived.  Runs over a
# matrix of mount modes: page cache, write-through (direct-I/O opens), and
# the kernel's writeback cache, across the three I/O backends.
source "$(dirname "$0")/harness.sh"
: "${OPCHECK:?}"

matrix=(
	"backend=uring"
	"writethrough,backend=aio"
	"writeback_cache,backend=file"
)
if [[ -n ${OPS_MATRIX:-} ]]; then
	read -ra matrix <<<"$OPS_MATRIX"
fi

for opts in "${matrix[@]}"; do
	h_log "==== ops with -o $opts"
	h_setup 2 1G
	h_mount "" "$opts"
	(cd / && "$OPCHECK" "$MNT" all "$T/state") || h_fail "opcheck failed with -o $opts"
	h_remount
	"$OPCHECK" "$MNT" post "$T/state" || h_fail "state lost across remount with -o $opts"
	h_umount
	# Either image alone holds the same tree.
	for img in "${IMGS[@]}"; do
		h_mount "$img" "degraded,$opts"
		"$OPCHECK" "$MNT" post "$T/state" || h_fail "$img alone lacks the tree (-o $opts)"
		h_umount
	done
done
echo "ops: all checks passed"
