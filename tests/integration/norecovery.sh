#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: -o norecovery (xfstests generic/537 mounts -o ro,norecovery):
# after kill -9, a mount that does not replay the metadata log shows the
# file system as its last checkpoint left it (a file made and fsynced after
# it absent, one deleted after it still there with its data), read-only:
# a create and fstrim fail, and not one byte of either image changes.  The
# next mount without it replays the log: the fsynced file is there.
source "$(dirname "$0")/harness.sh"

h_setup 2 256M
h_mount
head -c 1M /dev/urandom >"$T/pa"
head -c 1M /dev/urandom >"$T/pb"
mkdir "$MNT/d"
cp "$T/pa" "$MNT/d/pa"
echo kept >"$MNT/a"
h_umount		# a clean unmount ends with a checkpoint

# nodiscard: blocks a delete freed are discarded once its record is
# durable, not once a checkpoint no longer names them, so with discard a
# norecovery mount may find them punched (the CI's ASan build did: EIO);
# nothing is written after the delete, so without it they keep their data.
h_mount "" nodiscard
dd if="$T/pb" of="$MNT/b" bs=1M conv=fsync status=none || h_fail "writing b failed"
rm "$MNT/d/pa"
"$CTL" sync "$MNT" >/dev/null || h_fail "twinfs-ctl sync failed"
h_crash
before=$(h_sums "${IMGS[@]}")

for opts in ro,norecovery norecovery; do
	h_mount "" "$opts"
	grep -q "norecovery: .* mounted read-only as its last checkpoint left it" "$DAEMON_LOG" ||
		{ h_dump_log; h_fail "-o $opts: no line saying the log is not replayed"; }
	findmnt -n -o OPTIONS "$MNT" | grep -qE '(^|,)ro(,|$)' ||
		h_fail "-o $opts: not mounted read-only: $(findmnt -n -o OPTIONS "$MNT")"
	[[ $(cat "$MNT/a") == kept ]] || h_fail "-o $opts: a file of the checkpoint is missing"
	cmp -s "$T/pa" "$MNT/d/pa" || h_fail "-o $opts: a file deleted after the checkpoint does not read as it was"
	[[ ! -e $MNT/b ]] || h_fail "-o $opts: a file made after the checkpoint is shown: the log was replayed"
	if touch "$MNT/x" 2>/dev/null; then
		h_fail "-o $opts: a create succeeded"
	fi
	if command -v fstrim >/dev/null && fstrim "$MNT" 2>/dev/null; then
		h_fail "-o $opts: fstrim succeeded on a mount that must write nothing"
	fi
	h_umount
	[[ $(h_sums "${IMGS[@]}") == "$before" ]] || h_fail "-o $opts wrote to the devices"
done

h_mount "" ""
cmp -s "$T/pb" "$MNT/b" || h_fail "the fsynced file is not there after the replay"
[[ ! -e $MNT/d/pa ]] || h_fail "the delete was not replayed"
h_umount
h_need_fsck
h_fsck 0 -n "${IMGS[@]}"
echo "norecovery: read-only as of the last checkpoint, nothing written; the next mount replayed the log"
