#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: concurrent O_DIRECT readers of one file (issue 15: 8 readers
# must not be slower than 1).  fio's 8 jobs of 4 KiB random reads at depth
# 16 on one file: every read returns the written data (fio verifies), the
# daemon had more than one read of the file in flight at once
# (reads.in_flight_max in twinfs-ctl stats: a lock held across the device
# read, per file or per mount, leaves it at 1), and with both mirrors
# each served at least 30% of the reads.  Then the same with one mirror
# missing (-o degraded): the readers still overlap on the one device.
source "$(dirname "$0")/harness.sh"

: "${CTL:?CTL must name twinfs-ctl}"
if ! command -v fio >/dev/null; then
	echo "SKIP: fio is missing"
	exit 77
fi

stat_of() { "$CTL" stats "$MNT" | awk -v k="$1" '$1 == k ":" { print $2 }'; }
dev_reads() { "$CTL" stats "$MNT" | awk '/^device[01]\.reads:/ { printf "%s ", $2 } END { print "" }'; }

# readers NAME: 8 jobs x 2048 random 4 KiB O_DIRECT reads of $MNT/f, each
# block checked against the pattern it was written with.
readers() {
	fio --name="$1" --filename="$MNT/f" --size=64m --rw=randread --bs=4k --direct=1 \
		--ioengine=io_uring --iodepth=16 --numjobs=8 --io_size=8m --norandommap \
		--verify=crc32c --verify_only=1 --verify_fatal=1 --verify_state_load=0 \
		--group_reporting --output="$T/fio.$1" || {
		cat "$T/fio.$1" >&2
		h_fail "fio $1: a read failed or returned wrong data"
	}
}

h_setup 2 256M
h_mount
h_log "==== 64 MiB written with a verify pattern"
# In 4 KiB blocks: fio's verify header is per block written.
fio --name=fill --filename="$MNT/f" --size=64m --rw=write --bs=4k --direct=1 \
	--ioengine=io_uring --iodepth=16 --verify=crc32c --do_verify=0 --verify_state_save=0 \
	--output="$T/fio.fill" || h_fail "fio fill failed"
h_remount	# a fresh mount: the counters start at 0

h_log "==== 8 readers of one file, both mirrors"
read -r a0 a1 < <(dev_reads)
readers both
read -r b0 b1 < <(dev_reads)
r0=$((b0 - a0)) r1=$((b1 - a1)) max=$(stat_of reads.in_flight_max)
h_log "device 0 served $r0 reads, device 1 $r1; at most $max reads in flight"
((r0 + r1 >= 16384)) || h_fail "the mirrors served $((r0 + r1)) reads, want 16384 at least"
((r0 * 10 >= (r0 + r1) * 3 && r1 * 10 >= (r0 + r1) * 3)) ||
	h_fail "reads not spread over the mirrors: $r0 and $r1"
((max > 1)) || h_fail "8 readers of one file never had 2 reads in flight (max $max)"
[[ $(stat_of reads.in_flight) == 0 ]] ||
	h_fail "reads.in_flight is $(stat_of reads.in_flight) with every read answered"
h_umount

h_log "==== the same with one mirror missing"
h_mount "${IMGS[0]}" degraded
readers degraded
max=$(stat_of reads.in_flight_max)
h_log "degraded: at most $max reads in flight"
((max > 1)) || h_fail "degraded: 8 readers of one file never had 2 reads in flight (max $max)"
h_umount
echo "readpar: all checks passed"
