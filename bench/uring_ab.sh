#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: -o uring (FUSE over io_uring) against the default /dev/fuse
# transport, same build, side by side: each round mounts twinfs both ways in
# turn (the order alternating per round) on fresh RAM-backed loop devices and
# runs bench/run.sh's R4k (4k random O_DIRECT reads, 1 job qd64 and 8 jobs
# qd16), W1 (4k random O_DIRECT writes, 8 jobs qd64) and TAR (tar -x of
# 10,000 small files + sync), with `perf stat -e context-switches` on the
# daemon.  Prints per workload both medians (min-max), the uring/default
# ratio of every round and its median, and the daemon's context switches
# per request (per fio I/O; per file for TAR).  Sets enable_uring to 1 for
# the run and restores it.
#
# Usage: sudo bench/uring_ab.sh [--rounds N] [--runtime SEC] [--build DIR]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build
ROUNDS=3
RT=4
while [ $# -gt 0 ]; do
	case "$1" in
	--rounds) ROUNDS=$2; shift 2 ;;
	--runtime) RT=$2; shift 2 ;;
	--build) BUILD=$2; shift 2 ;;
	*) echo "usage: $0 [--rounds N] [--runtime SEC] [--build DIR]" >&2; exit 2 ;;
	esac
done
PARAM=/sys/module/fuse/parameters/enable_uring
[ -e $PARAM ] || { echo "uring_ab: this kernel has no FUSE over io_uring" >&2; exit 1; }
WORK=$(mktemp -d /tmp/twinfs-uring-ab.XXXXXX)
RAM=$WORK/ram MNT=$WORK/mnt OUT=$WORK/out
mkdir -p "$RAM" "$MNT" "$OUT"
PREV=$(cat $PARAM)
LOOPS=()
PID=
cleanup() {
	set +e
	mountpoint -q "$MNT" && fusermount3 -u "$MNT"
	[ -n "$PID" ] && { timeout 60 tail --pid="$PID" -f /dev/null; kill -9 "$PID" 2>/dev/null; }
	for l in "${LOOPS[@]}"; do losetup -d "$l"; done
	mountpoint -q "$RAM" && umount "$RAM"
	echo "$PREV" > $PARAM
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
echo 1 > $PARAM
mount -t tmpfs -o size=7g tmpfs "$RAM"
python3 "$ROOT/bench/workloads.py" mktar "$RAM/files.tar" > "$OUT/tar.json"
TARFILES=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["files"])' "$OUT/tar.json")

new_fs() {
	for l in "${LOOPS[@]}"; do losetup -d "$l"; done
	LOOPS=()
	rm -f "$RAM/a.img" "$RAM/b.img"
	for n in a b; do
		truncate -s 3072M "$RAM/$n.img"
		LOOPS+=("$(losetup --direct-io=on -f --show "$RAM/$n.img")")
	done
	"$BUILD/mkfs.twinfs" -f "${LOOPS[0]}" "${LOOPS[1]}" >/dev/null
}
# mnt MODE: default or uring.
mnt() {
	local o=()
	[ "$1" = uring ] && o=(-o uring)
	"$BUILD/twinfs" -f "${LOOPS[0]}:${LOOPS[1]}" "$MNT" "${o[@]}" 2>>"$OUT/twinfs-$1.log" &
	PID=$!
	for _ in $(seq 200); do mountpoint -q "$MNT" && return 0; sleep 0.05; done
	echo "uring_ab: no mount" >&2
	exit 1
}
umnt() {
	fusermount3 -u "$MNT"
	timeout 60 tail --pid="$PID" -f /dev/null || kill -9 "$PID"
	PID=
}
# measure LABEL.MODE.rN CMD...: CMD with perf counting the daemon's switches.
measure() {
	local tag=$1 pp; shift
	perf stat -x, -e context-switches -p "$PID" -o "$OUT/$tag.perf" &
	pp=$!
	"$@"
	kill -INT "$pp"
	wait "$pp" || true
}
fio_run() {
	local tag=$1; shift
	measure "$tag" fio --output-format=json --output="$OUT/$tag.json" --filename="$MNT/f" \
		--group_reporting --time_based --runtime="$RT" --ramp_time=1 "$@" >/dev/null
}
tar_run() {
	local s0 s1
	s0=$(date +%s.%N)
	tar -xf "$RAM/files.tar" -C "$MNT" && sync -f "$MNT" && "$BUILD/twinfs-ctl" sync "$MNT" >/dev/null
	s1=$(date +%s.%N)
	python3 -c 'import sys; print(float(sys.argv[3]) / (float(sys.argv[2]) - float(sys.argv[1])))' \
		"$s0" "$s1" "$TARFILES" > "$OUT/$1.val"
}

for r in $(seq "$ROUNDS"); do
	modes="default uring"
	((r % 2)) || modes="uring default"
	for m in $modes; do
		echo "round $r: fio, $m" >&2
		new_fs; mnt "$m"
		fio --name=prewrite --filename="$MNT/f" --size=1g --rw=write --bs=1m \
			--ioengine=psync --end_fsync=1 --output=/dev/null
		fio_run "R4k-1j.$m.r$r" --name=R --size=1g --rw=randread --bs=4k --direct=1 \
			--ioengine=io_uring --iodepth=64 --numjobs=1
		fio_run "R4k-8j.$m.r$r" --name=R --size=1g --rw=randread --bs=4k --direct=1 \
			--ioengine=io_uring --iodepth=16 --numjobs=8
		fio_run "W1.$m.r$r" --name=W1 --size=1g --rw=randwrite --bs=4k --direct=1 \
			--ioengine=io_uring --iodepth=64 --numjobs=8
		umnt
	done
	for m in $modes; do
		echo "round $r: tar, $m" >&2
		new_fs; mnt "$m"
		measure "TAR.$m.r$r" tar_run "TAR.$m.r$r"
		umnt
	done
done
grep -h "requests came over io_uring" "$OUT/twinfs-uring.log" | sed 's/^/uring mounts: /' | head -n 3
python3 - "$OUT" "$TARFILES" <<'PY'
import collections, glob, json, os, re, statistics as st, sys
out, files = sys.argv[1], int(sys.argv[2])
val = collections.defaultdict(dict)	# label -> mode -> {round: value}
cs = collections.defaultdict(lambda: collections.defaultdict(list))
for f in glob.glob(out + "/*.perf"):
    label, mode, r = re.match(r"(.+)\.(default|uring)\.r(\d+)\.perf", os.path.basename(f)).groups()
    n = [float(x.split(",")[0]) for x in open(f) if "context-switches" in x]
    if label == "TAR":
        v, reqs = float(open(f[:-5] + ".val").read()), files
    else:
        j = json.load(open(f[:-5] + ".json"))["jobs"][0]
        rw = "read" if label.startswith("R") else "write"
        v, reqs = j[rw]["bw_bytes"] / 2**20, j[rw]["total_ios"]
    val[label].setdefault(mode, {})[int(r)] = v
    if n and reqs:
        cs[label][mode].append(n[0] / reqs)
print("| workload | default | -o uring | uring/default per round | median ratio | cs/request default, uring |")
print("|---|---|---|---|---|---|")
for label in sorted(val):
    a, b = val[label].get("default", {}), val[label].get("uring", {})
    both = sorted(set(a) & set(b))
    if not both:
        continue
    unit = "files/s" if label == "TAR" else "MiB/s"
    fmt = lambda d: "%.0f (%.0f-%.0f) %s" % (st.median(d.values()), min(d.values()), max(d.values()), unit)
    ratios = [b[r] / a[r] for r in both]
    print("| %s | %s | %s | %s | %.2f | %.2f, %.2f |" % (
        label, fmt(a), fmt(b), " ".join("%.2f" % x for x in ratios), st.median(ratios),
        st.median(cs[label]["default"]), st.median(cs[label]["uring"])))
PY
