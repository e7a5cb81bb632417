#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# twinfs benchmark harness.  As root: builds twinfs (and libfuse's
# passthrough_ll example), creates RAM-backed "NVMe-like" devices (files on a
# tmpfs behind `losetup --direct-io=on`) and runs the same workloads on
#   twinfs (two mirrors, format v2, mkfs.twinfs's default), twinfs1 (the
#   same in the deprecated format v1: mkfs.twinfs -O v1, mounted with
#   -o format=1; twinfs2 is accepted as another name of twinfs), btrfs
#   RAID1 (-d raid1 -m raid1), XFS (one device), passthrough_ll over XFS,
#   and the raw loop device (the physical limit), each on a freshly made
#   file system.  Every workload runs --repeat times
# (default 3), the targets interleaved: for each workload, round 1 on every
# target, then round 2 on every target, ..., so a slow minute on a noisy
# machine hits all targets alike; the report gives median and min-max.
# Writes fio JSON, a markdown table and a plot under bench/results/<stamp>/.
#
#   bench/run.sh [--runtime SEC] [--quick] [--repeat N]
#                [--only W1,W3,W4,W2,V,R4k,Rseq,Rdeg,TAR,SQLITE,PG]
#                [--targets twinfs,twinfs1,btrfs,xfs,passthrough,raw]
#                [--build DIR] [--twinfs-opts OPTS] [--bigdir DIR]
#                [--rbig-size 64g]
#
# Workloads: W1 4k random O_DIRECT writes (8 jobs); W3 4k and 64k ones (1
# job); W4 4k buffered O_DSYNC overwrites (1-8 jobs); W2 a 2 GiB buffered
# sequential write + fsync; V a fio verify pass (twinfs); R4k 4k random
# O_DIRECT reads (1 job qd64, 8 jobs qd16, one file); Rseq 1 MiB sequential
# reads of a cold file, then buffered re-reads of it once cached; Rdeg the
# same reads with one mirror missing (twinfs and btrfs only, -o degraded);
# TAR tar -x of 10,000 small files + sync (files/s); SQLITE WAL with
# synchronous=FULL (transactions/s); PG pgbench, scale 20, 4 clients (TPS).
# R means all three read groups.  Rbig (only when named, twinfs and btrfs):
# a 64 GiB (--rbig-size) file on two sparse image files under --bigdir
# (/var/tmp), twinfs mounted with -o cache=64M, read at random 4k (O_DIRECT,
# 1 job qd32, 8 jobs qd4); the report gives the node reads and extent-cache
# faults per 1000 reads, rbig.txt how the file was made (README, "Rbig").  --build DIR uses (and builds) another
# meson build directory (default build/); --twinfs-opts adds -o OPTS to
# every twinfs and twinfs1 mount (e.g. writeback_cache).
#
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

ARGS="$*"
RUNTIME=15
REPEAT=3
ONLY="W1,W3,W4,W2,V,R,TAR,SQLITE,PG"
TARGETS="twinfs,btrfs,xfs,passthrough,raw"
BUILD=build
TWOPTS=
BIGDIR=/var/tmp
RBIG_SIZE=64g
while [ $# -gt 0 ]; do
	case "$1" in
	--runtime) RUNTIME=$2; shift 2 ;;
	--quick) RUNTIME=5; shift ;;
	--repeat) REPEAT=$2; shift 2 ;;
	--only) ONLY=$2; shift 2 ;;
	--targets) TARGETS=$2; shift 2 ;;
	--build) BUILD=$2; shift 2 ;;
	--twinfs-opts) TWOPTS=$2; shift 2 ;;
	--bigdir) BIGDIR=$2; shift 2 ;;
	--rbig-size) RBIG_SIZE=$2; shift 2 ;;
	-h|--help) sed -n '3,39p' "$0"; exit 0 ;;
	*) echo "bench/run.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
RBIG_SIZE=$(numfmt --from=iec "${RBIG_SIZE^^}" 2>/dev/null) && [ $((RBIG_SIZE % (64 << 20))) = 0 ] &&
	[ "$RBIG_SIZE" -gt 0 ] || { echo "bench/run.sh: --rbig-size wants a multiple of 64 MiB" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "bench/run.sh: needs root (loop devices, mounts)" >&2; exit 1; }
case "$REPEAT" in ''|*[!0-9]*|0) echo "bench/run.sh: --repeat wants a count >= 1" >&2; exit 2 ;; esac

# has W: workload W was asked for (R stands for all three read groups).
has() {
	case ",$ONLY," in *",$1,"*) return 0 ;; esac
	case "$1" in R4k|Rseq|Rdeg) case ",$ONLY," in *",R,"*) return 0 ;; esac ;; esac
	return 1
}

for w in ${ONLY//,/ }; do
	case "$w" in W1|W3|W4|W2|V|R|R4k|Rseq|Rdeg|TAR|SQLITE|PG|Rbig) ;;
	*) echo "bench/run.sh: unknown workload $w (--help lists them)" >&2; exit 2 ;; esac
done
# twinfs2: format v2 had its own target while v1 was the default.
TARGETS=$(sed 's/\(^\|,\)twinfs2\(,\|$\)/\1twinfs\2/g' <<<"$TARGETS")
for t in ${TARGETS//,/ }; do
	case "$t" in twinfs|twinfs1|btrfs|xfs|passthrough|raw) ;;
	*) echo "bench/run.sh: unknown target $t" >&2; exit 2 ;; esac
done

# scripts/deps.sh has fio, gnuplot, btrfs-progs, xfsprogs and sqlite3; the
# harness itself needs python3, and PG Debian's postgresql (pgbench).
scripts/deps.sh
extra=(python3)
has PG && extra+=(postgresql)
missing=()
for p in "${extra[@]}"; do
	[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "bench: installing ${missing[*]}" >&2
	DEBIAN_FRONTEND=noninteractive apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
[ -d "$BUILD" ] || meson setup "$BUILD" >/dev/null
if ! out=$(ninja -C "$BUILD" twinfs mkfs.twinfs twinfs-ctl fsck.twinfs 2>&1); then echo "$out" >&2; exit 1; fi
BUILD=$(cd "$BUILD" && pwd)

STAMP=$(date -u +%Y%m%d-%H%M%S)
OUT=$ROOT/bench/results/$STAMP
mkdir -p "$OUT/json"
TWINFS=$BUILD/twinfs
MKFS=$BUILD/mkfs.twinfs
CTL=$BUILD/twinfs-ctl
FSCK=$BUILD/fsck.twinfs
{
	echo "command: bench/run.sh $ARGS"
	echo "runtime=$RUNTIME repeat=$REPEAT only=$ONLY targets=$TARGETS twinfs-opts=$TWOPTS"
	echo "kernel: $(uname -r); cpus: $(nproc); commit: $(git rev-parse --short HEAD 2>/dev/null)"
} > "$OUT/params.txt"

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
chmod 755 "$WORK"	# postgres (PG) must reach its mount point and socket
TMPFS=$WORK/ram
MNT=$WORK/mnt
PTMNT=$WORK/ptmnt
mkdir -p "$TMPFS" "$MNT" "$PTMNT"
LOOPS=()
DAEMON_PID=
PT_PID=
PG_PID=
BIGWORK=

# Everything this run started, stopped by pid, even after a failure.
cleanup() {
	set +e
	pg_kill
	for m in "$PTMNT" "$MNT"; do
		if mountpoint -q "$m"; then fusermount3 -u "$m" 2>/dev/null || umount "$m"; fi
	done
	[ -n "$PT_PID" ] && { timeout 30 tail --pid="$PT_PID" -f /dev/null; kill -9 "$PT_PID" 2>/dev/null; }
	[ -n "$DAEMON_PID" ] && { timeout 60 tail --pid="$DAEMON_PID" -f /dev/null; kill -9 "$DAEMON_PID" 2>/dev/null; }
	for m in "$PTMNT" "$MNT"; do mountpoint -q "$m" && umount -l "$m"; done
	for l in "${LOOPS[@]}"; do losetup -d "$l" 2>/dev/null; done
	mountpoint -q "$TMPFS" && umount "$TMPFS"
	rm -rf "$WORK"
	[ -n "$BIGWORK" ] && rm -rf "$BIGWORK"
	# Stopped early: still report what was measured.
	if [ ! -s "$OUT/results.md" ] && [ -n "$(ls "$OUT/json")" ]; then
		{ echo "**Partial run: the harness stopped before the end.**"; echo
		  python3 "$ROOT/bench/report.py" "$OUT"; } > "$OUT/results.md"
		echo "partial results: $OUT/results.md" >&2
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

DEVSIZE=$((4 * 1024))	# MiB per device: W2 writes 2 GiB
# The two devices, plus the tar workload's 300 MB tarball.
mount -t tmpfs -o size=$((2 * DEVSIZE + 768))m tmpfs "$TMPFS"

# Fresh devices for every run: zeroed tmpfs files behind direct-I/O loops.
new_devs() {
	for l in "${LOOPS[@]}"; do if [ -b "$l" ]; then losetup -d "$l"; fi; done
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

# mkfs_target TARGET: fresh devices with a fresh file system of that kind.
mkfs_target() {
	new_devs
	case "$1" in
	twinfs) "$MKFS" -f "${LOOPS[0]}" "${LOOPS[1]}" >/dev/null ;;
	twinfs1) "$MKFS" -f -O v1 "${LOOPS[0]}" "${LOOPS[1]}" >/dev/null ;;
	# mkfs.btrfs -q still prints a NOTE: to the log, unless it fails.
	btrfs) mkfs.btrfs -q -f -d raid1 -m raid1 "${LOOPS[0]}" "${LOOPS[1]}" >"$OUT/mkfs.log" 2>&1 ||
		{ cat "$OUT/mkfs.log" >&2; return 1; } ;;
	xfs|passthrough) mkfs.xfs -q -f "${LOOPS[0]}" ;;
	esac
}

# attach_target TARGET [twinfs -o options]: mount what mkfs_target made;
# sets DIR (where the workload works) or FILE (raw device).  DEGRADED=1
# mounts twinfs and btrfs with the second device missing; PT_OPTS adds
# options to passthrough_ll's mount.
attach_target() {
	local t=$1 opts=${2:-}
	opts=$opts${TWOPTS:+${opts:+,}$TWOPTS}
	DIR=$MNT
	FILE=
	case "$t" in
	raw) FILE=${LOOPS[0]}; DIR= ;;
	twinfs|twinfs1)
		local spec="${LOOPS[0]}:${LOOPS[1]}"
		[ "$t" = twinfs1 ] && opts=format=1${opts:+,$opts}
		[ "${DEGRADED:-0}" = 1 ] && { spec=${LOOPS[0]}; opts=degraded${opts:+,$opts}; }
		"$TWINFS" -f "$spec" "$MNT" ${opts:+-o $opts} 2>>"$OUT/twinfs.log" &
		DAEMON_PID=$!
		wait_mount "$MNT" ;;
	btrfs)
		if [ "${DEGRADED:-0}" = 1 ]; then
			# The second device gone: no btrfs signature left on it,
			# and the kernel forgets it had seen it.
			wipefs -a -q "${LOOPS[1]}"
			btrfs device scan --forget "${LOOPS[1]}" 2>/dev/null || true
			mount -o degraded "${LOOPS[0]}" "$MNT"
		else
			mount "${LOOPS[0]}" "$MNT"
		fi ;;
	xfs) mount "${LOOPS[0]}" "$MNT" ;;
	passthrough)
		mount "${LOOPS[0]}" "$MNT"
		"$PT" -f -o source="$MNT",clone_fd${PT_OPTS:+,$PT_OPTS} "$PTMNT" 2>>"$OUT/passthrough.log" &
		PT_PID=$!
		wait_mount "$PTMNT"
		DIR=$PTMNT ;;
	esac
}

mount_target() { mkfs_target "$1"; attach_target "$@"; }

umount_target() {
	local t=$1
	case "$t" in
	raw) ;;
	twinfs|twinfs1)
		fusermount3 -u "$MNT"
		timeout 120 tail --pid="$DAEMON_PID" -f /dev/null || kill -9 "$DAEMON_PID"
		DAEMON_PID= ;;
	passthrough)
		fusermount3 -u "$PTMNT"; wait "$PT_PID" || true; PT_PID=
		umount "$MNT" ;;
	*) umount "$MNT" ;;
	esac
}

# cold_target TARGET [opts]: the same file system, unmounted and mounted
# again, so nothing of it is left in any cache (the raw device: its
# buffer cache dropped).  The loop devices cache nothing (direct I/O).
cold_target() {
	if [ "$1" = raw ]; then
		blockdev --flushbufs "${LOOPS[0]}"
	else
		umount_target "$1"
		attach_target "$@"
	fi
}

# prewrite SIZE [raw]: a fully written file to overwrite or read (fresh
# fs, real blocks); with "raw", the raw device is written too (for reads).
prewrite() {
	local size=$1 f=
	[ -n "$DIR" ] && f=$DIR/f
	[ -z "$DIR" ] && [ "${2:-}" = raw ] && f=$FILE
	if [ -n "$f" ]; then
		fio --name=prewrite --filename="$f" --size="$size" --rw=write --bs=1m \
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

# Round R of the current workload; results are json/LABEL@TARGET.rR.*
R=1

# fio_once LABEL TARGET fio-args...: one fio run into json/LABEL@TARGET.rR.json.
# Also records how busy the machine's CPUs were over the run (.cpu: busy%
# of all cores), which says whether a workload is bound by CPU or by waiting.
fio_once() {
	local label=$1 t=$2 b0 t0; shift 2
	echo "  $label on $t (round $R)" >&2
	read -r b0 t0 < <(cpu_ticks)
	fio --output-format=json --output="$OUT/json/$label@$t.r$R.json" \
		--filename="$(target_file)" --group_reporting "$@" ||
		echo "  fio failed: $label on $t" >&2
	cpu_record "$OUT/json/$label@$t.r$R.cpu" "$b0" "$t0"
}

# run_fio LABEL TARGET fio-args...: a time-based fio run of --runtime seconds.
run_fio() {
	local label=$1 t=$2; shift 2
	fio_once "$label" "$t" --time_based --runtime="$RUNTIME" --ramp_time=1 "$@"
}

# timed LABEL TARGET UNIT COUNT cmd...: runs cmd, stores COUNT/seconds as
# json/LABEL@TARGET.rR.val in UNIT (and the CPU figure, as fio_once).
timed() {
	local label=$1 t=$2 unit=$3 count=$4 b0 t0 s0 s1; shift 4
	echo "  $label on $t (round $R)" >&2
	read -r b0 t0 < <(cpu_ticks)
	s0=$(date +%s.%N)
	if "$@"; then
		s1=$(date +%s.%N)
		python3 -c 'import json, sys; s = float(sys.argv[2]) - float(sys.argv[1])
print(json.dumps({"value": float(sys.argv[3]) / s, "unit": sys.argv[4], "seconds": s}))' \
			"$s0" "$s1" "$count" "$unit" > "$OUT/json/$label@$t.r$R.val"
	else
		echo "  failed: $label on $t" >&2
	fi
	cpu_record "$OUT/json/$label@$t.r$R.cpu" "$b0" "$t0"
}

# ---- the workloads: wl_NAME TARGET, one round on one fresh file system.

wl_W1() {
	mount_target "$1"; prewrite 1g
	run_fio W1 "$1" --name=W1 --size=1g --rw=randwrite --bs=4k --direct=1 \
		--ioengine=io_uring --iodepth=64 --numjobs=8
	umount_target "$1"
}

wl_W3() {
	local bs
	for bs in 4k 64k; do
		mount_target "$1"; prewrite 1g
		run_fio "W3-$bs" "$1" --name=W3 --size=1g --rw=randwrite --bs=$bs --direct=1 \
			--ioengine=libaio --iodepth=64 --numjobs=1
		umount_target "$1"
	done
}

wl_W4() {
	local t=$1 v j variants=("")
	# -o writethrough on the default format only: it changes how a write
	# reaches the devices, not the metadata, and would double twinfs1's W4
	# time.
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
}

wl_W2() {
	local t=$1 v variants=("")
	[ "$t" = twinfs ] && variants=("" "writethrough")
	for v in "${variants[@]}"; do
		mount_target "$t" "$v"
		# Not time based: 2 GiB sequential with the final fsync counted.
		fio_once "W2${v:+-$v}" "$t" --name=W2 --size=2g --rw=write --bs=128k --direct=0 \
			--ioengine=io_uring --iodepth=16 --end_fsync=1
		umount_target "$t"
	done
}

wl_V() {
	# W1's parallel load with verification: 8 jobs, disjoint regions of one
	# file.  Once, not every round: it checks, it does not measure.
	[ "$R" = 1 ] || return 0
	mount_target "$1"
	echo "  verify on $1" >&2
	fio --output-format=json --output="$OUT/json/V@$1.r$R.json" --name=V \
		--filename="$DIR/f" --size=128m --offset_increment=128m --numjobs=8 \
		--rw=randwrite --bs=4k --direct=1 --ioengine=io_uring --iodepth=64 \
		--verify=xxhash --do_verify=1 --verify_state_save=0 --verify_fatal=1 --group_reporting \
		|| echo "  fio verify FAILED on $1" >&2
	umount_target "$1"
}

# r4k TARGET PREFIX: 4k random O_DIRECT reads of one 1 GiB file, 1 job at
# depth 64, then 8 jobs at depth 16 each, on one mount (reads change nothing).
r4k() {
	local t=$1 pre=$2
	run_fio "${pre}4k-1j" "$t" --name=R --size=1g --rw=randread --bs=4k --direct=1 \
		--ioengine=io_uring --iodepth=64 --numjobs=1
	run_fio "${pre}4k-8j" "$t" --name=R --size=1g --rw=randread --bs=4k --direct=1 \
		--ioengine=io_uring --iodepth=16 --numjobs=8
}

# rseq TARGET PREFIX: 1 MiB sequential buffered reads of the whole 1 GiB
# file, cold (not time based: each byte read once, from the devices).
rseq() {
	fio_once "${2}seq-cold" "$1" --name=R --size=1g --rw=read --bs=1m --direct=0 \
		--ioengine=psync --numjobs=1
}

wl_R4k() {
	mount_target "$1"; prewrite 1g raw
	r4k "$1" R
	umount_target "$1"
}

wl_Rseq() {
	local t=$1
	mount_target "$t"; prewrite 1g raw
	cold_target "$t"
	rseq "$t" R
	# Now cached by the read above (and read once more to be sure):
	# buffered re-reads, 1 MiB at a time, from the page cache.  fio
	# drops the file's cache before a job unless --invalidate=0: without
	# it every target re-read from its devices (or its daemon).
	fio --name=warm --filename="$(target_file)" --size=1g --rw=read --bs=1m \
		--ioengine=psync --direct=0 --invalidate=0 --output=/dev/null
	run_fio Rcached "$t" --name=R --size=1g --rw=read --bs=1m --direct=0 \
		--ioengine=psync --numjobs=1 --invalidate=0
	umount_target "$t"
}

# One mirror missing: written with both, then mounted with only the first
# device (twinfs: -o degraded with one device named, as
# tests/integration/degraded.sh does; btrfs: -o degraded with the second
# device's signature wiped).
wl_Rdeg() {
	local t=$1
	mount_target "$t"; prewrite 1g
	umount_target "$t"
	DEGRADED=1 attach_target "$t"
	# The evidence that only one mirror is there, for the record.
	{
		echo "== $t round $R"
		if [ "$t" != btrfs ]; then "$CTL" status "$MNT"; else btrfs filesystem show "$MNT"; fi
	} >> "$OUT/degraded.txt" 2>&1 || true
	rseq "$t" Rdeg-
	r4k "$t" Rdeg-
	umount_target "$t"
}

TARBALL=$TMPFS/files.tar
TARFILES=
wl_TAR() {
	local t=$1
	if [ -z "$TARFILES" ]; then
		TARFILES=$(python3 "$ROOT/bench/workloads.py" mktar "$TARBALL" |
			python3 -c 'import json, sys; print(json.load(sys.stdin)["files"])')
	fi
	mount_target "$t"
	timed TAR "$t" files/s "$TARFILES" tar_sync "$t"
	umount_target "$t"
}

# tar -x, then the data durable: syncfs on the mount; for passthrough_ll
# (libfuse 3.14 has no syncfs) the backing XFS too; for twinfs, whose
# syncfs reaches the daemon without FUSE_SYNCFS, twinfs-ctl sync commits.
tar_sync() {
	tar -xf "$TARBALL" -C "$DIR" && sync -f "$DIR" || return 1
	case "$1" in
	passthrough) sync -f "$MNT" ;;
	twinfs|twinfs1) "$CTL" sync "$MNT" >/dev/null ;;
	esac
}

wl_SQLITE() {
	local t=$1 b0 t0
	mount_target "$t"
	echo "  SQLITE on $t (round $R)" >&2
	read -r b0 t0 < <(cpu_ticks)
	python3 "$ROOT/bench/workloads.py" sqlite "$DIR/db" "$RUNTIME" \
		> "$OUT/json/SQLITE@$t.r$R.val" || echo "  failed: SQLITE on $t" >&2
	cpu_record "$OUT/json/SQLITE@$t.r$R.cpu" "$b0" "$t0"
	umount_target "$t"
}

# PostgreSQL from Debian: a cluster made with initdb on the file system
# under test, run as user postgres on a private socket (no TCP).
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
PGSOCK=$WORK/pgsock
PGPORT=$((54000 + $$ % 1000))
PGDATA=

pg() { runuser -u postgres -- "$@"; }

# pg_kill: stop the server this run started, by the pid it wrote.
pg_kill() {
	[ -n "$PG_PID" ] || return 0
	kill -INT "$PG_PID" 2>/dev/null
	timeout 60 tail --pid="$PG_PID" -f /dev/null || kill -9 "$PG_PID" 2>/dev/null
	PG_PID=
}

pg_run() {
	local t=$1 log=$PGSOCK/log
	PGDATA=$DIR/pg
	# The data directory made here and given to postgres: passthrough_ll,
	# running as root, would create it as root's, and postgres refuses a
	# data directory it does not own (it checks only that one).
	mkdir -p "$PGSOCK" "$PGDATA" && chown postgres: "$PGSOCK" "$PGDATA" || return 1
	pg "$PGBIN/initdb" -N -A trust -U postgres -D "$PGDATA" >/dev/null || return 1
	pg "$PGBIN/pg_ctl" -D "$PGDATA" -l "$log" -w -o "-k $PGSOCK -p $PGPORT -c listen_addresses=''" \
		start >/dev/null || { cat "$log" >&2; return 1; }
	PG_PID=$(head -1 "$PGDATA/postmaster.pid")
	echo "  PG on $t (round $R): pgbench -i -s 20" >&2
	pg "$PGBIN/pgbench" -h "$PGSOCK" -p "$PGPORT" -i -s 20 -q postgres >"$PGSOCK/init.log" 2>&1 ||
		{ cat "$PGSOCK/init.log" >&2; return 1; }
	fio_cpu_pgbench "$t"
	pg "$PGBIN/pg_ctl" -D "$PGDATA" -w -m fast stop >/dev/null && PG_PID=
}

fio_cpu_pgbench() {
	local t=$1 b0 t0 out
	echo "  PG on $t (round $R): pgbench -c 4 -T $RUNTIME" >&2
	read -r b0 t0 < <(cpu_ticks)
	if out=$(pg "$PGBIN/pgbench" -h "$PGSOCK" -p "$PGPORT" -c 4 -j 4 -T "$RUNTIME" postgres 2>&1); then
		echo "$out" > "$OUT/json/PG@$t.r$R.log"
		echo "$out" | awk '/^tps = /{ printf "{\"value\": %s, \"unit\": \"TPS\"}\n", $3; exit }' \
			> "$OUT/json/PG@$t.r$R.val"
	else
		echo "$out" >&2; echo "  failed: PG on $t" >&2
	fi
	cpu_record "$OUT/json/PG@$t.r$R.cpu" "$b0" "$t0"
}

wl_PG() {
	local t=$1
	[ -n "$PGBIN" ] || { echo "  PG: no postgresql installed" >&2; return 0; }
	case "$t" in
	twinfs|twinfs1) mount_target "$t" allow_other ;;
	passthrough) PT_OPTS=allow_other mount_target "$t" ;;
	*) mount_target "$t" ;;
	esac
	pg_run "$t" || { echo "  failed: PG on $t" >&2; pg_kill; }
	umount_target "$t"
}

# ---- Rbig: 4k random reads of a file whose block map does not fit
# twinfs's -o cache=64M (16 MiB of map leaves, 32 MiB of nodes: a 64 GiB
# file's map is several times that, if only for its 8-byte checksum per
# 4 KiB block).  Too big for the RAM devices: two sparse image files under
# --bigdir, twinfs on them directly (it opens them O_DIRECT), btrfs RAID1
# behind direct-I/O loop devices.  The file is made once per target and
# read in every round on a fresh (cold) mount.
RBIG_CACHE=64M

# rbig_devs TARGET: two fresh sparse images with a fresh file system of
# that kind; LOOPS names what attach_target mounts.
rbig_devs() {
	local n
	for n in "${LOOPS[@]}"; do if [ -b "$n" ]; then losetup -d "$n"; fi; done
	LOOPS=()
	rm -f "$BIGWORK"/*.img
	# As big as the file: the blocks are shared, the images stay sparse.
	truncate -s "$RBIG_SIZE" "$BIGWORK/a.img" "$BIGWORK/b.img"
	case "$1" in
	twinfs)
		LOOPS=("$BIGWORK/a.img" "$BIGWORK/b.img")
		"$MKFS" -f "${LOOPS[@]}" >/dev/null ;;
	btrfs)
		for n in a b; do LOOPS+=("$(losetup --direct-io=on -f --show "$BIGWORK/$n.img")"); done
		mkfs.btrfs -q -f -d raid1 -m raid1 "${LOOPS[@]}" >"$OUT/mkfs.log" 2>&1 ||
			{ cat "$OUT/mkfs.log" >&2; return 1; } ;;
	esac
}

# rbig_build TARGET: the big file, $DIR/f.  A piece of 1/16 of it is
# written sequentially in 1 MiB writes, then 1/16 of the piece is
# overwritten at random 4 KiB places (copy-on-write: the piece's map is
# cut into many runs, as a database or VM image's is), then the file is
# 16 copies of the piece by copy_file_range: shared blocks, so the disk
# holds the piece once per mirror, and the file's map is the piece's 16
# times over, as big as if every byte had been written.
rbig_build() {
	local t=$1 piece=$((RBIG_SIZE / 16)) s0
	s0=$(date +%s)
	fio --name=piece --filename="$DIR/piece" --size=$piece --rw=write --bs=1m --direct=1 \
		--ioengine=io_uring --iodepth=4 --output=/dev/null
	echo "$t: piece of $((piece >> 20)) MiB written sequentially: $(($(date +%s) - s0)) s"
	s0=$(date +%s)
	fio --name=ow --filename="$DIR/piece" --size=$piece --io_size=$((piece / 16)) --rw=randwrite \
		--bs=4k --direct=1 --ioengine=io_uring --iodepth=32 --norandommap --randrepeat=0 \
		--allow_file_create=0 --output=/dev/null
	echo "$t: $((piece / 16 >> 20)) MiB of it overwritten at random 4k: $(($(date +%s) - s0)) s"
	echo "$t: copies: $(python3 "$ROOT/bench/workloads.py" clone "$DIR/piece" "$DIR/f" "$RBIG_SIZE")"
	rm "$DIR/piece"
	sync -f "$DIR"
	if [ "$t" = twinfs ]; then "$CTL" raw "$MNT" checkpoint >/dev/null; fi
	echo "$t: the file: $(stat -c '%s bytes, %b blocks of %B' "$DIR/f"); disk used by the images:" \
		"$(du -sh --apparent-size "$BIGWORK" | cut -f1) apparent, $(du -sh "$BIGWORK" | cut -f1) real"
}

# rbig_fio LABEL TARGET JOBS DEPTH: 4k random O_DIRECT reads anywhere in
# the big file for --runtime seconds; on twinfs the daemon's stats before
# and after go to json/LABEL@TARGET.rR.ctl (report.py: node reads).
rbig_fio() {
	local label=$1 t=$2 j=$3 qd=$4 before=
	[ "$t" = twinfs ] && before=$("$CTL" raw "$MNT" stats)
	fio_once "$label" "$t" --name=Rbig --size="$RBIG_SIZE" --rw=randread --bs=4k --direct=1 \
		--ioengine=io_uring --iodepth="$qd" --numjobs="$j" --norandommap --randrepeat=0 \
		--allow_file_create=0 --time_based --runtime="$RUNTIME"
	if [ -n "$before" ]; then
		echo "{\"before\": $before, \"after\": $("$CTL" raw "$MNT" stats)}" \
			> "$OUT/json/$label@$t.r$R.ctl"
	fi
}

wl_Rbig() {
	local t=$1 opts='' need avail r
	[ "$R" = 1 ] || return 0	# the file made once, every round below
	[ -n "$BIGWORK" ] || BIGWORK=$(mktemp -d "$BIGDIR/twinfs-bench-rbig.XXXXXX")
	# The piece and its overwrites on each mirror, the map twice over
	# (copy-on-write) and the log: well under a quarter of the file.
	need=$((RBIG_SIZE / 4 + (4 << 30)))
	avail=$(($(df -k --output=avail "$BIGDIR" | tail -1) << 10))
	if ((avail < need)); then
		echo "  Rbig: needs about $((need >> 30)) GiB free in $BIGDIR, $((avail >> 30)) GiB there" >&2
		return 0
	fi
	echo "  Rbig on $t: making the $((RBIG_SIZE >> 30)) GiB file in $BIGWORK" >&2
	rbig_devs "$t"
	attach_target "$t"
	rbig_build "$t" >> "$OUT/rbig.txt"
	umount_target "$t"
	if [ "$t" = twinfs ]; then
		# The map's real size: fsck counts the items and nodes.
		echo "$t: fsck.twinfs -n -v:"
		"$FSCK" -n -v "${LOOPS[@]}" 2>&1 | grep -E '^tree|extents|errors found' | sed 's/^/  /'
		opts=cache=$RBIG_CACHE
	fi >> "$OUT/rbig.txt"
	for r in $(seq 1 "$REPEAT"); do
		R=$r
		attach_target "$t" "$opts"	# cold: nothing of the map cached
		rbig_fio Rbig-cold-1j "$t" 1 32
		rbig_fio Rbig-1j "$t" 1 32
		rbig_fio Rbig-8j "$t" 8 4
		umount_target "$t"
	done
	R=1
	for r in "${LOOPS[@]}"; do if [ -b "$r" ]; then losetup -d "$r"; fi; done
	LOOPS=()
	rm -f "$BIGWORK"/*.img
}

# Which workloads make sense on which target.
applies() {
	case "$1:$2" in
	W4:raw|W2:raw|TAR:raw|SQLITE:raw|PG:raw) return 1 ;;
	V:*) [ "$2" = twinfs ] || [ "$2" = twinfs1 ] ;;
	Rdeg:*) [ "$2" = twinfs ] || [ "$2" = twinfs1 ] || [ "$2" = btrfs ] ;;
	Rbig:*) [ "$2" = twinfs ] || [ "$2" = btrfs ] ;;
	esac
}

IFS=, read -r -a TLIST <<< "$TARGETS"
for w in W1 W3 W4 W2 V R4k Rseq Rdeg TAR SQLITE PG Rbig; do
	has "$w" || continue
	for R in $(seq 1 "$REPEAT"); do
		for t in "${TLIST[@]}"; do
			applies "$w" "$t" || continue
			echo "== $w round $R/$REPEAT on $t" >&2
			"wl_$w" "$t"
		done
	done
done

python3 "$ROOT/bench/report.py" "$OUT" | tee "$OUT/results.md"
echo "results: $OUT/results.md" >&2
