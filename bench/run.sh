#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# twinfs benchmark harness.  As root: builds twinfs (and libfuse's
# passthrough_ll example), creates RAM-backed "NVMe-like" devices (files on a
# tmpfs behind `losetup --direct-io=on`) and runs the same fio workloads on
#   twinfs (two mirrors), btrfs RAID1 (-d raid1 -m raid1), XFS (one device),
#   passthrough_ll over XFS, and the raw loop device (the physical limit),
# each on a freshly made file system, all in one run so the ratios compare
# like with like on a noisy machine.  Writes fio JSON, a markdown table and a
# plot under bench/results/<stamp>/.
#
#   bench/run.sh [--runtime SEC] [--quick] [--only W1,W3,W4,W2,V] [--targets raw,twinfs,btrfs,xfs,passthrough]
#                [--build DIR] [--twinfs-opts OPTS]
#
# --build DIR uses (and builds) another meson build directory (default build/);
# --twinfs-opts adds -o OPTS to every twinfs mount (e.g. writeback_cache).
#
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

RUNTIME=15
QUICK=0
ONLY="W1,W3,W4,W2,V"
TARGETS="raw,twinfs,btrfs,xfs,passthrough"
BUILD=build
TWOPTS=
while [ $# -gt 0 ]; do
	case "$1" in
	--runtime) RUNTIME=$2; shift 2 ;;
	--quick) QUICK=1; RUNTIME=5; shift ;;
	--only) ONLY=$2; shift 2 ;;
	--targets) TARGETS=$2; shift 2 ;;
	--build) BUILD=$2; shift 2 ;;
	--twinfs-opts) TWOPTS=$2; shift 2 ;;
	-h|--help) sed -n '3,19p' "$0"; exit 0 ;;
	*) echo "bench/run.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" = 0 ] || { echo "bench/run.sh: needs root (loop devices, mounts)" >&2; exit 1; }

scripts/deps.sh
[ -d "$BUILD" ] || meson setup "$BUILD" >/dev/null
if ! out=$(ninja -C "$BUILD" twinfs mkfs.twinfs 2>&1); then echo "$out" >&2; exit 1; fi
BUILD=$(cd "$BUILD" && pwd)

STAMP=$(date -u +%Y%m%d-%H%M%S)
OUT=$ROOT/bench/results/$STAMP
mkdir -p "$OUT/json"
TWINFS=$BUILD/twinfs
MKFS=$BUILD/mkfs.twinfs

# passthrough_ll from the libfuse examples: the "FUSE with no work" anchor.
# Two changes so O_DIRECT works at all (as shipped with libfuse 3.14 every
# O_DIRECT write fails with EINVAL): an O_DIRECT open replies direct_io (what
# libfuse >= 3.15's passthrough_ll does), and the backing file is opened
# without O_DIRECT, since the payload in libfuse's buffer is not aligned.
# The backing writes then go to XFS's page cache: if anything, that flatters
# the anchor.  The kernel still serializes its direct writes per inode (3.14
# has no parallel_direct_writes field), as a stock libfuse 3.14 user gets.
PT=$BUILD/bench-passthrough_ll
if [ ! -x "$PT" ] || [ "$0" -nt "$PT" ]; then
	src=/usr/share/doc/libfuse3-dev/examples/passthrough_ll.c
	[ -f "$src" ] || src=$src.gz
	{ if [ "${src%.gz}" != "$src" ]; then gzip -dc "$src"; else cat "$src"; fi; } |
		sed -e 's/fi->flags & ~O_NOFOLLOW/fi->flags \& ~(O_NOFOLLOW | O_DIRECT)/' \
		    -e 's/(fi->flags | O_CREAT) & ~O_NOFOLLOW/(fi->flags | O_CREAT) \& ~(O_NOFOLLOW | O_DIRECT)/' \
		    -e 's/^\(\s*\)fi->fh = fd;/\1fi->fh = fd; if (fi->flags \& O_DIRECT) fi->direct_io = 1;/' \
		> "$BUILD/passthrough_ll.c"
	[ "$(grep -c 'O_NOFOLLOW | O_DIRECT' "$BUILD/passthrough_ll.c")" = 2 ] &&
	[ "$(grep -c 'fi->direct_io = 1;' "$BUILD/passthrough_ll.c")" -ge 4 ] ||
		{ echo "bench: cannot patch passthrough_ll.c for O_DIRECT" >&2; exit 1; }
	cc -O2 -I/usr/share/doc/libfuse3-dev/examples -o "$PT" "$BUILD/passthrough_ll.c" \
		$(pkg-config --cflags --libs fuse3) -lpthread
fi

WORK=$(mktemp -d /tmp/twinfs-bench.XXXXXX)
TMPFS=$WORK/ram
MNT=$WORK/mnt
PTMNT=$WORK/ptmnt
mkdir -p "$TMPFS" "$MNT" "$PTMNT"
LOOPS=()
DAEMON_PID=
PT_PID=

cleanup() {
	set +e
	for m in "$PTMNT" "$MNT"; do
		if mountpoint -q "$m"; then fusermount3 -u "$m" 2>/dev/null || umount "$m"; fi
	done
	[ -n "$PT_PID" ] && wait "$PT_PID" 2>/dev/null
	[ -n "$DAEMON_PID" ] && { timeout 60 tail --pid="$DAEMON_PID" -f /dev/null; kill -9 "$DAEMON_PID" 2>/dev/null; }
	mountpoint -q "$MNT" && umount -l "$MNT"
	for l in "${LOOPS[@]}"; do losetup -d "$l" 2>/dev/null; done
	mountpoint -q "$TMPFS" && umount "$TMPFS"
	rm -rf "$WORK"
}
trap cleanup EXIT

DEVSIZE=$((4 * 1024))	# MiB per device: W2 writes 2 GiB
mount -t tmpfs -o size=$((2 * DEVSIZE + 256))m tmpfs "$TMPFS"

# Fresh devices for every run: zeroed tmpfs files behind direct-I/O loops.
new_devs() {
	for l in "${LOOPS[@]}"; do losetup -d "$l"; done
	LOOPS=()
	rm -f "$TMPFS"/*.img
	for n in a b; do
		truncate -s ${DEVSIZE}M "$TMPFS/$n.img"
		LOOPS+=("$(losetup --direct-io=on -f --show "$TMPFS/$n.img")")
	done
}

wait_mount() {
	for _ in $(seq 1 200); do mountpoint -q "$1" && return 0; sleep 0.05; done
	echo "bench: $1 did not mount" >&2
	return 1
}

# mount_target TARGET [twinfs -o options]: fresh devices, fresh file system;
# sets DIR (where fio works) or FILE (raw device).
mount_target() {
	local t=$1 opts=${2:-}
	opts=$opts${TWOPTS:+${opts:+,}$TWOPTS}
	new_devs
	DIR=$MNT
	FILE=
	case "$t" in
	raw) FILE=${LOOPS[0]}; DIR= ;;
	twinfs)
		"$MKFS" -f "${LOOPS[0]}" "${LOOPS[1]}" >/dev/null
		"$TWINFS" -f "${LOOPS[0]}:${LOOPS[1]}" "$MNT" ${opts:+-o $opts} 2>>"$OUT/twinfs.log" &
		DAEMON_PID=$!
		wait_mount "$MNT" ;;
	btrfs)
		mkfs.btrfs -q -f -d raid1 -m raid1 "${LOOPS[0]}" "${LOOPS[1]}"
		mount "${LOOPS[0]}" "$MNT" ;;
	xfs)
		mkfs.xfs -q -f "${LOOPS[0]}"
		mount "${LOOPS[0]}" "$MNT" ;;
	passthrough)
		mkfs.xfs -q -f "${LOOPS[0]}"
		mount "${LOOPS[0]}" "$MNT"
		"$PT" -f -o source="$MNT",clone_fd "$PTMNT" 2>>"$OUT/passthrough.log" &
		PT_PID=$!
		wait_mount "$PTMNT"
		DIR=$PTMNT ;;
	esac
}

umount_target() {
	local t=$1
	case "$t" in
	raw) ;;
	twinfs)
		fusermount3 -u "$MNT"
		timeout 120 tail --pid="$DAEMON_PID" -f /dev/null || kill -9 "$DAEMON_PID"
		DAEMON_PID= ;;
	passthrough)
		fusermount3 -u "$PTMNT"; wait "$PT_PID" || true; PT_PID=
		umount "$MNT" ;;
	*) umount "$MNT" ;;
	esac
}

# prewrite SIZE: a fully written file to overwrite (fresh fs, real blocks).
prewrite() {
	local size=$1
	if [ -n "$DIR" ]; then
		fio --name=prewrite --filename="$DIR/f" --size="$size" --rw=write --bs=1m \
			--ioengine=psync --direct=0 --end_fsync=1 --output=/dev/null
	fi
}

target_file() { if [ -n "$FILE" ]; then echo "$FILE"; else echo "$DIR/f"; fi; }

# cpu_ticks: busy and total jiffies of the whole machine, from /proc/stat.
cpu_ticks() { awk '/^cpu /{t=0; for (i=2;i<=NF;i++) t+=$i; print t-$5-$6, t}' /proc/stat; }
# cpu_record FILE B0 T0: the busy % of both cores since cpu_ticks gave B0 T0.
cpu_record() {
	local b1 t1
	read -r b1 t1 < <(cpu_ticks)
	echo $(( ($b1 - $2) * 100 / (t1 - $3 > 0 ? t1 - $3 : 1) )) > "$1"
}

# run_fio LABEL TARGET fio-args...  Also records how busy the machine's CPUs
# were over the run (json/LABEL@TARGET.cpu: busy% of all cores), which says
# whether a workload is bound by CPU or by waiting.
run_fio() {
	local label=$1 t=$2 b0 t0; shift 2
	echo "  $label on $t" >&2
	read -r b0 t0 < <(cpu_ticks)
	fio --output-format=json --output="$OUT/json/$label@$t.json" \
		--filename="$(target_file)" --time_based --runtime="$RUNTIME" --ramp_time=1 \
		--group_reporting "$@" || echo "  fio failed: $label on $t" >&2
	cpu_record "$OUT/json/$label@$t.cpu" "$b0" "$t0"
}

has() { case ",$ONLY," in *",$1,"*) return 0 ;; esac; return 1; }

IFS=, read -r -a TLIST <<< "$TARGETS"
for t in "${TLIST[@]}"; do
	echo "== $t" >&2
	if has W1; then
		mount_target "$t"; prewrite 1g
		run_fio W1 "$t" --name=W1 --size=1g --rw=randwrite --bs=4k --direct=1 \
			--ioengine=io_uring --iodepth=64 --numjobs=8
		umount_target "$t"
	fi
	if has W3; then
		for bs in 4k 64k; do
			mount_target "$t"; prewrite 1g
			run_fio "W3-$bs" "$t" --name=W3 --size=1g --rw=randwrite --bs=$bs --direct=1 \
				--ioengine=libaio --iodepth=64 --numjobs=1
			umount_target "$t"
		done
	fi
	if has W4 && [ "$t" != raw ]; then
		variants=("")
		[ "$t" = twinfs ] && variants=("" "writethrough")
		for v in "${variants[@]}"; do
			for j in 1 2 4 8; do
				mount_target "$t" "$v"; prewrite 512m
				run_fio "W4-${j}j${v:+-$v}" "$t" --name=W4 --size=512m --rw=randwrite --bs=4k \
					--direct=0 --sync=dsync --ioengine=libaio --iodepth=32 --numjobs=$j
				umount_target "$t"
			done
			# The same writers one write at a time (iodepth 1): where
			# one job cannot fill the machine, do 8 run side by side?
			for j in 1 8; do
				mount_target "$t" "$v"; prewrite 512m
				run_fio "W4qd1-${j}j${v:+-$v}" "$t" --name=W4 --size=512m --rw=randwrite --bs=4k \
					--direct=0 --sync=dsync --ioengine=psync --numjobs=$j
				umount_target "$t"
			done
		done
	fi
	if has W2 && [ "$t" != raw ]; then
		variants=("")
		[ "$t" = twinfs ] && variants=("" "writethrough")
		for v in "${variants[@]}"; do
			label=W2${v:+-$v}
			mount_target "$t" "$v"
			echo "  $label on $t" >&2
			# Not time based: 2 GiB sequential with the final fsync counted.
			read -r b0 t0 < <(cpu_ticks)
			fio --output-format=json --output="$OUT/json/$label@$t.json" --name=W2 \
				--filename="$DIR/f" --size=2g --rw=write --bs=128k --direct=0 \
				--ioengine=io_uring --iodepth=16 --end_fsync=1 || echo "  fio failed: $label on $t" >&2
			cpu_record "$OUT/json/$label@$t.cpu" "$b0" "$t0"
			umount_target "$t"
		done
	fi
	if has V && [ "$t" = twinfs ]; then
		# W1's parallel load with verification: 8 jobs, disjoint regions of one file.
		mount_target "$t"
		echo "  verify on $t" >&2
		fio --output-format=json --output="$OUT/json/V@$t.json" --name=V \
			--filename="$DIR/f" --size=128m --offset_increment=128m --numjobs=8 \
			--rw=randwrite --bs=4k --direct=1 --ioengine=io_uring --iodepth=64 \
			--verify=xxhash --do_verify=1 --verify_state_save=0 --verify_fatal=1 --group_reporting \
			|| echo "  fio verify FAILED on $t" >&2
		umount_target "$t"
	fi
done

python3 "$ROOT/bench/report.py" "$OUT" | tee "$OUT/results.md"
echo "results: $OUT/results.md" >&2
