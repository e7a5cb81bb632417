#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: what discard costs.  Two loop devices (--direct-io=on) on
# tmpfs files, a 2 GiB twinfs mirror on them; fio 4k random overwrites of
# a 256 MiB file with O_DIRECT (io_uring, iodepth 16) and with O_DSYNC
# (psync, 4 jobs), 8 s each, -o discard and -o nodiscard interleaved, 3
# rounds (report the median); then how long `twinfs-ctl trim` takes after
# 1.5 GiB was deleted on a nodiscard mount, and with nothing to free.
# Needs root (losetup), fio.  Usage: bench/discard.sh [BUILD_DIR]
set -euo pipefail
B=$(realpath "${1:-build}")
W=$(mktemp -d /dev/shm/twinfs-discard.XXXXXX)
MNT=$W/mnt
mkdir -p "$MNT"
truncate -s 2G "$W/a" "$W/b"
L0=$(losetup --direct-io=on -f --show "$W/a")
L1=$(losetup --direct-io=on -f --show "$W/b")
PID=
cleanup() {
	fusermount3 -u "$MNT" 2>/dev/null || true
	[[ -n $PID ]] && wait "$PID" 2>/dev/null
	losetup -d "$L0" "$L1"
	rm -rf "$W"
}
trap cleanup EXIT
"$B/mkfs.twinfs" -f "$L0" "$L1" >/dev/null
mountit() {
	"$B/twinfs" -f "$L0:$L1" "$MNT" -o "$1" 2>"$W/log.$1" &
	PID=$!
	for _ in $(seq 100); do mountpoint -q "$MNT" && return; sleep 0.1; done
	echo "mount failed" >&2
	exit 1
}
umountit() { fusermount3 -u "$MNT"; wait "$PID"; PID=; }
discarded() {
	"$B/twinfs-ctl" stats "$MNT" --json | python3 -c 'import json,sys
d = json.load(sys.stdin)["discard"]
print("%d MiB discarded in %d runs" % (d["discarded_bytes"] >> 20, d["runs_issued"]))'
}
declare -A FIO=(
	[odirect]="--ioengine=io_uring --iodepth=16 --numjobs=1"
	[odsync]="--ioengine=psync --sync=dsync --numjobs=4 --group_reporting"
)
for r in 1 2 3; do
	for kind in odirect odsync; do
		for m in discard nodiscard; do
			mountit "$m"
			# shellcheck disable=SC2086
			iops=$(fio --name=w --filename="$MNT/f" --size=256M --rw=randwrite --bs=4k \
				--direct=1 ${FIO[$kind]} --runtime=8 --time_based --randrepeat=0 \
				--output-format=terse --terse-version=3 | awk -F';' '{ print $49 }')
			echo "round $r $kind $m: $iops write IOPS; $(discarded)"
			rm "$MNT/f"
			umountit
		done
	done
done
mountit nodiscard
dd if=/dev/urandom of="$MNT/big" bs=1M count=1500 status=none
"$B/twinfs-ctl" sync "$MNT"
rm "$MNT/big"
"$B/twinfs-ctl" sync "$MNT"
for what in "1.5 GiB freed" "nothing new"; do
	t0=$(date +%s.%N)
	"$B/twinfs-ctl" trim "$MNT" --wait >/dev/null
	t1=$(date +%s.%N)
	echo "trim of a 2 GiB file system ($what): $(echo "$t1 - $t0" | bc) s;" \
		"tmpfs holds $(du -sm "$W/a" | cut -f1) + $(du -sm "$W/b" | cut -f1) MiB"
done
umountit
