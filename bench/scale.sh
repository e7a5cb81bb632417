#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# twinfs metadata scale benchmark (issue 13).  As root: for growing sizes,
# what the daemon's memory, checkpoints, unmount and mount cost.  Two
# scenarios, each on two mirrored sparse image files under --dir:
#   sparse  per size S: a fresh S-byte file system, 7/8 of its data area
#           fallocated over 4 files, then --overwrite bytes of random 4k
#           O_DIRECT overwrites (fio) spread over them;
#   files   one file system (--files-image bytes) that grows to each count
#           in --files, --per-dir empty files per directory (10,000; the
#           issue's 10M files in 10,000 directories is --per-dir 1000); the
#           create rate is also given per --chunk files.
# After each step's workload (committed with twinfs-ctl sync): the daemon's
# peak and current RSS (VmHWM/VmRSS of its pid), the checkpoints written
# during the workload (twinfs-ctl stats: checkpoint.writes,
# checkpoint.written_bytes) and the size of the last, and the metadata log
# the workload wrote (log.chunk_blocks: what changed); then kill -9 of the
# daemon, the mount after it (replays the log; with -o lazyreplay it serves
# first and the checkpoint it owes is asked for and timed right after it),
# a clean unmount (its final checkpoint), the mount after that, its RSS,
# and a cold find of the tree.
# Writes <out>.md (tables), <out>.png (RSS against size) and <out>.tsv.
# SCALE_CRASH_STATUS=PREFIX in the environment keeps what the mount after
# kill -9 spent (status: mount.replay_ns, ckpt_write_ns; stats: node and
# map caches) in PREFIX.STEP.status and PREFIX.STEP.stats, and after the
# checkpoint such a mount owes (lazyreplay) its status and raw stats in
# PREFIX.STEP.owed.status and PREFIX.STEP.owed.json.
# SCALE_STATS=PREFIX keeps the daemon's stats (twinfs-ctl raw MNT stats:
# the checkpoints' bytes, the btree's splits and nodes written by level)
# after each step's workload, before the kill -9, in PREFIX.STEP.json.
#
#   bench/scale.sh [--sizes 64G,256G,1T,4T] [--files 100k,1M,10M]
#                  [--only sparse,files] [--dir /var/tmp] [--overwrite 16G]
#                  [--max-rss SIZE] [--format 'MKFS OPTIONS'] [--label v2]
#                  [--twinfs-opts OPTS] [--chunk 100k] [--files-image 1T]
#                  [--per-dir 10000] [--out PREFIX] [--build DIR] [--quick]
#
# --max-rss (default 80% of MemAvailable): a step whose peak RSS,
# extrapolated from the steps before it, would pass it is not run, and a
# daemon that passes it anyway is killed; either prints "stopped: ..." and
# the scenario ends there.  A step also stops when --dir would have less
# than 2 GiB free.  --format passes options to mkfs.twinfs (e.g. '-O v1' with
# --twinfs-opts format=1 for the deprecated format 1; the default makes v2).
# --quick: tiny sizes (1G,2G; 2k,5k files), for a smoke run in seconds.
# A daemon that fails a device (a host disk out of space under the sparse
# images gives ENOSPC) stops the run where it happened, with its log lines;
# after any failure the daemons' logs are kept in <out>.logs/.
#
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

ARGS="$*"
[ -z "${SCALE_TRACE:-}" ] || { PS4='+ $EPOCHREALTIME '; set -x; }
SIZES=64G,256G,1T,4T
FILES=100k,1M,10M
ONLY=sparse,files
DIR=/var/tmp
OVERWRITE=16G
MAXRSS=
FORMAT=
LABEL=
TWOPTS=
CHUNK=100k
FILESIMG=1T
OUTP=
BUILD=build
PERDIR=10000
NFALLOC=4
while [ $# -gt 0 ]; do
	case "$1" in
	--sizes) SIZES=$2; shift 2 ;;
	--files) FILES=$2; shift 2 ;;
	--only) ONLY=$2; shift 2 ;;
	--dir) DIR=$2; shift 2 ;;
	--overwrite) OVERWRITE=$2; shift 2 ;;
	--max-rss) MAXRSS=$2; shift 2 ;;
	--format) FORMAT=$2; shift 2 ;;
	--label) LABEL=$2; shift 2 ;;
	--twinfs-opts) TWOPTS=$2; shift 2 ;;
	--chunk) CHUNK=$2; shift 2 ;;
	--per-dir) PERDIR=$2; shift 2 ;;
	--files-image) FILESIMG=$2; shift 2 ;;
	--out) OUTP=$2; shift 2 ;;
	--build) BUILD=$2; shift 2 ;;
	--quick) SIZES=1G,2G; FILES=2k,5k; OVERWRITE=16M; CHUNK=1k; FILESIMG=2G; shift ;;
	-h|--help) sed -n '3,41p' "$0"; exit 0 ;;
	*) echo "bench/scale.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
die() { echo "bench/scale.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (FUSE mounts, kill -9 of the daemon)"

# bytes N[kKmMgGtT] (sizes: powers of 1024) and count N[kM] (powers of 1000).
bytes() {
	local n=${1%[kKmMgGtT]} u=${1: -1}
	case "$n" in ''|*[!0-9]*) die "bad size '$1' (want N[KMGT])" ;; esac
	case "$u" in
	k|K) echo $((n << 10)) ;; m|M) echo $((n << 20)) ;; g|G) echo $((n << 30)) ;;
	t|T) echo $((n << 40)) ;; *) echo "$n" ;;
	esac
}
count() {
	local n=${1%[kKmM]} u=${1: -1}
	case "$n" in ''|*[!0-9]*) die "bad count '$1' (want N[kM])" ;; esac
	case "$u" in k|K) echo $((n * 1000)) ;; m|M) echo $((n * 1000000)) ;; *) echo "$n" ;; esac
}
for w in ${ONLY//,/ }; do
	case "$w" in sparse|files) ;; *) die "unknown scenario $w (sparse, files)" ;; esac
done
has() { case ",$ONLY," in *",$1,"*) return 0 ;; esac; return 1; }
OWB=$(bytes "$OVERWRITE")
CHUNKN=$(count "$CHUNK")
FILESIMGB=$(bytes "$FILESIMG")
((CHUNKN > 0)) || die "--chunk must be > 0"
if [ -n "$MAXRSS" ]; then
	MAXRSSK=$(($(bytes "$MAXRSS") >> 10))
else
	MAXRSSK=$(awk '/^MemAvailable:/{ printf "%d", $2 * 0.8 }' /proc/meminfo)
fi
[ -d "$DIR" ] || die "--dir $DIR is not a directory"
[ -n "$LABEL" ] || { [ -n "$FORMAT" ] && LABEL=custom || LABEL=v2; }

# fio and gnuplot (scripts/deps.sh, as bench/run.sh), python3 for the
# file creator and the JSON replies.
scripts/deps.sh
if [ "$(dpkg-query -W -f='${Status}' python3 2>/dev/null)" != "install ok installed" ]; then
	DEBIAN_FRONTEND=noninteractive apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 >/dev/null
fi
[ -d "$BUILD" ] || meson setup "$BUILD" >/dev/null
if ! out=$(ninja -C "$BUILD" twinfs mkfs.twinfs twinfs-ctl 2>&1); then echo "$out" >&2; exit 1; fi
BUILD=$(cd "$BUILD" && pwd)
TWINFS=$BUILD/twinfs
MKFS=$BUILD/mkfs.twinfs
CTL=$BUILD/twinfs-ctl

STAMP=$(date -u +%Y%m%d-%H%M%S)
[ -n "$OUTP" ] || OUTP=$ROOT/bench/results/scale-$LABEL-$STAMP
mkdir -p "$(dirname "$OUTP")"
TSV=$OUTP.tsv
CHUNKS=$OUTP.chunks.tsv
: > "$TSV"
: > "$CHUNKS"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/twinfs-scale.XXXXXX")
IMGDIR=$(mktemp -d "$DIR/twinfs-scale.XXXXXX")
MNT=$WORK/mnt
mkdir -p "$MNT"
DAEMON_PID=
WATCH_PID=
NLOG=0
STOPPED=()

report() { python3 "$ROOT/bench/scale_report.py" "$OUTP" ${STOPPED[@]+"${STOPPED[@]}"}; }

# Everything this run started, by pid, also after a failure or Ctrl-C.
cleanup() {
	set +e
	watch_stop
	if mountpoint -q "$MNT"; then fusermount3 -u "$MNT" 2>/dev/null || umount "$MNT"; fi
	if [ -n "$DAEMON_PID" ]; then
		timeout 120 tail --pid="$DAEMON_PID" -f /dev/null || kill -9 "$DAEMON_PID" 2>/dev/null
	fi
	mountpoint -q "$MNT" && umount -l "$MNT"
	rm -rf "$IMGDIR" "$WORK"
	# Stopped early (error, Ctrl-C): still report the steps measured.
	if [ ! -s "$OUTP.md" ] && [ -s "$TSV" ]; then
		{ echo "**Partial run: bench/scale.sh stopped before the end.**"; echo; report; } > "$OUTP.md"
		echo "partial results: $OUTP.md" >&2
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
mib() { awk -v k="$1" 'BEGIN { printf "%.0f", k / 1024 }'; }	# kB -> MiB
status_kb() { awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status"; }

# The daemon's metadata log, for when something fails.
dlog() { echo "$WORK/daemon.$NLOG.log"; }
# What a daemon logs when it fails a device and records it stale: the next
# mount of the images is refused for it ("a.img: stale").
DEVFAIL='device failed|recorded stale|image file was|write error|cache flush failed'
fail() {
	local prev="$WORK/daemon.$((NLOG - 1)).log"
	echo "bench/scale.sh: $*" >&2
	# The daemon before this one too: a mount refused for what the last
	# run recorded (a device marked stale) is explained in its log.
	[ -f "$prev" ] && { echo "-- the daemon before it:" >&2; tail -20 "$prev" >&2; }
	[ -f "$(dlog)" ] && { echo "-- the daemon:" >&2; tail -20 "$(dlog)" >&2; }
	# Any device failure of the whole run, and the space left: a host
	# out of space fails the image that gets ENOSPC first.
	grep -HE "$DEVFAIL" "$WORK"/daemon.*.log >&2 2>/dev/null || true
	df -h "$DIR" >&2
	# $WORK goes at exit: keep the logs.
	mkdir -p "$OUTP.logs" && cp "$WORK"/daemon.*.log "$WORK"/mkfs.log "$OUTP.logs/" 2>/dev/null &&
		echo "daemon logs: $OUTP.logs/" >&2
	exit 1
}
# dev_check WHEN: the daemon that just exited failed no device, or the run
# stops here, where it happened, not at the next mount's refusal.
dev_check() {
	local l
	l=$(grep -m3 -E "$DEVFAIL" "$(dlog)" 2>/dev/null) || return 0
	fail "the daemon (log $NLOG) failed a device $1: $l"
}

mounted() { awk -v m="$MNT" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; }

# start_daemon IMG1 IMG2: mounts at $MNT; sets MOUNT_S (seconds until the
# mount is there: load, replay, the mount's checkpoint) and DAEMON_PID.
start_daemon() {
	local t0
	NLOG=$((NLOG + 1))
	t0=$(now)
	"$TWINFS" -f "$1:$2" "$MNT" ${TWOPTS:+-o "$TWOPTS"} >"$(dlog)" 2>&1 &
	DAEMON_PID=$!
	until mounted; do
		kill -0 "$DAEMON_PID" 2>/dev/null || { wait "$DAEMON_PID" || true; DAEMON_PID=; fail "the daemon exited before mounting"; }
		sleep 0.02
	done
	MOUNT_S=$(since "$t0")
}

# stop_daemon: clean unmount; UMOUNT_S is the time until the daemon is gone
# (it writes its final checkpoint after the kernel lets go).
stop_daemon() {
	local t0 rc=0
	t0=$(now)
	fusermount3 -u "$MNT"
	wait "$DAEMON_PID" || rc=$?
	UMOUNT_S=$(since "$t0")
	DAEMON_PID=
	((rc == 0)) || fail "the daemon exited with status $rc at unmount"
	dev_check "before its unmount"
}

# crash_daemon: kill -9 (by pid), then take the dead mount away.
crash_daemon() {
	kill -9 "$DAEMON_PID"
	wait "$DAEMON_PID" 2>/dev/null || true
	DAEMON_PID=
	umount -l "$MNT" 2>/dev/null || fusermount3 -uz "$MNT" 2>/dev/null || true
	dev_check "before kill -9"
}

# The memory and disk guard while a workload runs: a daemon over --max-rss
# or a --dir with under 2 GiB free is killed, and the reason kept.
watch_start() {
	rm -f "$WORK/stop"
	(
		while sleep 0.2; do
			rss=$(status_kb "$DAEMON_PID" VmRSS 2>/dev/null) || exit 0
			[ -n "$rss" ] || exit 0
			avail=$(df -k --output=avail "$DIR" | tail -1)
			why=
			((rss > MAXRSSK)) && why="daemon RSS $(mib "$rss") MiB passed --max-rss $(mib "$MAXRSSK") MiB"
			((avail < 2 << 20)) && why="under 2 GiB free in $DIR"
			if [ -n "$why" ]; then
				echo "$why" > "$WORK/stop"
				kill -9 "$DAEMON_PID"
				exit 0
			fi
		done
	) &
	WATCH_PID=$!
}
watch_stop() {
	[ -n "$WATCH_PID" ] || return 0
	kill "$WATCH_PID" 2>/dev/null || true
	wait "$WATCH_PID" 2>/dev/null || true
	WATCH_PID=
}
# watched_stop SCENARIO STEP: after a workload, true (and the reason in
# STOPPED) when the guard killed the daemon.
watched_stop() {
	local hwm
	watch_stop
	# over the limit between two looks of the guard
	hwm=$(status_kb "$DAEMON_PID" VmHWM 2>/dev/null) || hwm=
	if [ ! -f "$WORK/stop" ] && [ -n "$hwm" ] && ((hwm > MAXRSSK)); then
		echo "daemon RSS $(mib "$hwm") MiB passed --max-rss $(mib "$MAXRSSK") MiB" > "$WORK/stop"
		kill -9 "$DAEMON_PID"
	fi
	[ -f "$WORK/stop" ] || return 1
	STOPPED+=("$1 $2: $(cat "$WORK/stop")")
	echo "stopped: ${STOPPED[-1]}" >&2
	wait "$DAEMON_PID" 2>/dev/null || true
	DAEMON_PID=
	umount -l "$MNT" 2>/dev/null || true
	return 0
}

# stats METRIC...: values of twinfs_METRIC from twinfs-ctl stats --prometheus
# (0 when missing); awk, not python: cheap on a busy machine.
stats() {
	"$CTL" stats "$MNT" --prometheus | awk -v want="$*" '
		BEGIN { n = split(want, w, " ") }
		/^twinfs_/ { name = $1; sub(/\{.*/, "", name); v[name] = $NF }
		END { for (i = 1; i <= n; i++) printf "%s%.0f", (i > 1 ? " " : ""), v["twinfs_" w[i]]; print "" }'
}

# stat_plain KEY: one value of the plain `twinfs-ctl stats` (the log's
# counters are not in the Prometheus text), 0 when missing.
stat_plain() {
	"$CTL" stats "$MNT" | awk -F': ' -v k="$1" '$1 == k { v = $2 } END { printf "%.0f\n", v }'
}

# predict_ok SCENARIO STEP X: the peak RSS at X, extrapolated (a line
# through the last two steps of this scenario; through 0 and the last one
# when only one ran), stays under --max-rss.  Else STOPPED says why.
predict_ok() {
	local p
	p=$(awk -F'\t' -v s="$1" -v x="$3" '$1 == s { x0 = x1; y0 = y1; x1 = $3; y1 = $4; n++ }
		END { if (n == 0) { print 0; exit }
		      if (n == 1 || x1 == x0) k = y1 / x1; else k = (y1 - y0) / (x1 - x0)
		      y = y1 + k * (x - x1); printf "%d", (y > y1 ? y : y1) }' "$TSV")
	((p <= MAXRSSK)) && return 0
	STOPPED+=("$1 $2: peak RSS would be about $(mib "$p") MiB (extrapolated from the steps before), over --max-rss $(mib "$MAXRSSK") MiB")
	echo "stopped: ${STOPPED[-1]}" >&2
	return 1
}

# measure SCENARIO STEP X EXTRA...: after a workload (daemon running), the
# figures of one step into the TSV: RSS, checkpoints, then kill -9 and the
# mount after it, the clean unmount, the mount after that and a cold find.
# Leaves the file system mounted (fresh daemon).  CK0/CB0/LB0: stats
# before.  log_bytes: the metadata log the workload wrote (log.chunk_blocks,
# 4 KiB each): what changed, the yardstick of the checkpoints' bytes.
measure() {
	local sc=$1 step=$2 x=$3 hwm rss ck cb mck mcb crash clean umnt rss2 t0 find_s n lb
	shift 3
	"$CTL" sync "$MNT" >/dev/null
	hwm=$(status_kb "$DAEMON_PID" VmHWM)
	rss=$(status_kb "$DAEMON_PID" VmRSS)
	read -r ck cb < <(stats checkpoints_total checkpoint_written_bytes_total)
	lb=$(stat_plain log.chunk_blocks)
	set -- "$@" "log_bytes=$(((lb - LB0) * 4096))"
	if [ -n "${SCALE_STATS:-}" ]; then
		"$CTL" raw "$MNT" stats >"$SCALE_STATS.$step.json" || true
	fi
	crash_daemon
	start_daemon "${IMGS[@]}"
	crash=$MOUNT_S
	# What the mount after the crash checkpointed: the log's changes
	# since the last checkpoint (v1: all the metadata, every time).
	read -r mck mcb < <(stats checkpoints_total checkpoint_written_bytes_total)
	# Where that mount's time went (SCALE_CRASH_STATUS, see the top).
	if [ -n "${SCALE_CRASH_STATUS:-}" ]; then
		"$CTL" raw "$MNT" status >"$SCALE_CRASH_STATUS.$step.status" || true
		"$CTL" stats "$MNT" >"$SCALE_CRASH_STATUS.$step.stats" || true
	fi
	# With -o lazyreplay that mount served without a checkpoint (the log
	# continued): it owes one, which the next checkpoint writes.  Asked for
	# here, timed and counted with the mount's, so the ratio holds what the
	# crash cost and the unmount below is an unmount.
	if [ "${mck:-0}" = 0 ]; then
		t0=$(now)
		"$CTL" raw "$MNT" checkpoint >/dev/null || fail "the checkpoint after kill -9 failed"
		set -- "$@" "deferred_ckpt_s=$(since "$t0")"
		read -r mck mcb < <(stats checkpoints_total checkpoint_written_bytes_total)
		if [ -n "${SCALE_CRASH_STATUS:-}" ]; then
			"$CTL" raw "$MNT" status >"$SCALE_CRASH_STATUS.$step.owed.status" || true
			"$CTL" raw "$MNT" stats >"$SCALE_CRASH_STATUS.$step.owed.json" || true
		fi
	fi
	stop_daemon
	umnt=$UMOUNT_S
	start_daemon "${IMGS[@]}"
	clean=$MOUNT_S
	rss2=$(status_kb "$DAEMON_PID" VmRSS)
	t0=$(now)
	n=$(find "$MNT" | wc -l)
	find_s=$(since "$t0")
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$sc" "$step" "$x" \
		"$hwm" "$rss" "$rss2" "$((ck - CK0))" "$((cb - CB0))" "$mcb" "$umnt" "$clean" \
		"$crash" "$find_s" "$n" "$*" >> "$TSV"
	echo "  $sc $step: peak RSS $(mib "$hwm") MiB, after $(mib "$rss") MiB, remount $(mib "$rss2") MiB;" \
		"checkpoints $((ck - CK0)) wrote $((cb - CB0)) B, the mount after kill -9 $mck wrote $mcb B;" \
		"unmount ${umnt}s, mount ${clean}s, after kill -9 ${crash}s; find ${find_s}s ($n); $*" >&2
}

# ---- scenario sparse: fallocate most of a big sparse file system, then
# random 4k overwrites.

new_images() {
	IMGS=("$IMGDIR/a.img" "$IMGDIR/b.img")
	rm -f "${IMGS[@]}"
	truncate -s "$1" "${IMGS[@]}"
	# shellcheck disable=SC2086
	"$MKFS" -f $FORMAT "${IMGS[@]}" >"$WORK/mkfs.log" 2>&1 || { cat "$WORK/mkfs.log" >&2; fail "mkfs.twinfs failed"; }
}

sparse_step() {
	local s=$1 sb total per ow need avail t0 fa_s ow_mibs el done_b files=() i
	sb=$(bytes "$s")
	predict_ok sparse "$s" "$sb" || { STOP=1; return 0; }
	# What the images really hold: the overwrites, the log and (v1) up to
	# two checkpoints of 16 bytes per fallocated 4 KiB block; each mirror.
	# Version 2 maps ranges, not blocks: its trees for a fallocated file
	# are a few items per extent, so a 1/1024 share is already generous.
	ow=$((OWB < sb / 8 ? OWB : sb / 8))
	if [[ $FORMAT == *v2* ]]; then
		need=$((2 * (ow + (1 << 30) + sb / 1024)))
	else
		need=$((2 * (ow + (1 << 30) + sb / 128)))
	fi
	avail=$(($(df -k --output=avail "$DIR" | tail -1) << 10))
	if ((avail - need < 2 << 30)); then
		STOPPED+=("sparse $s: needs about $((need >> 30)) GiB of disk in $DIR, $((avail >> 30)) GiB free")
		echo "stopped: ${STOPPED[-1]}" >&2
		STOP=1
		return 0
	fi
	echo "== sparse $s: two $s images, fallocate, $((ow >> 20)) MiB of 4k overwrites" >&2
	new_images "$sb"
	start_daemon "${IMGS[@]}"
	read -r CK0 CB0 total < <(stats checkpoints_total checkpoint_written_bytes_total size_bytes)
	LB0=$(stat_plain log.chunk_blocks)
	per=$((total * 7 / 8 / NFALLOC >> 20 << 20))
	watch_start
	t0=$(now)
	for ((i = 0; i < NFALLOC; i++)); do
		files+=("$MNT/f$i")
		fallocate -l "$per" "$MNT/f$i" 2>"$WORK/err" || break
	done
	fa_s=$(since "$t0")
	watched_stop sparse "$s" && { STOP=1; return 0; }
	[ -s "$WORK/err" ] && fail "fallocate: $(cat "$WORK/err")"
	watch_start
	t0=$(now)
	# Exactly the files' sizes, so fio never lays a file out.
	fio --name=ow --filename="$(IFS=:; echo "${files[*]}")" --size=$((per * NFALLOC)) --io_size="$ow" \
		--rw=randwrite --bs=4k --direct=1 --ioengine=io_uring --iodepth=32 \
		--norandommap --randrepeat=0 --file_service_type=random \
		--allow_file_create=0 --output="$WORK/fio.out" >/dev/null 2>&1 ||
		{ watched_stop sparse "$s" && { STOP=1; return 0; }; cat "$WORK/fio.out" >&2; fail "fio failed"; }
	el=$(since "$t0")
	watched_stop sparse "$s" && { STOP=1; return 0; }
	# fio stopped early with SIGINT (host disk, time) exits 0: what it
	# really wrote, from its issued 4k writes, and say so.
	done_b=$(awk -F'[=,]' '/issued rwts:/ { print $3 * 4096; exit }' "$WORK/fio.out")
	if [ -n "$done_b" ] && ((done_b > 0 && done_b < ow)); then
		STOPPED+=("sparse $s: fio stopped early (SIGINT) after $((done_b >> 20)) MiB of the $((ow >> 20)) MiB of overwrites")
		echo "stopped: ${STOPPED[-1]}" >&2
		ow=$done_b
	fi
	ow_mibs=$(awk -v b="$ow" -v s="$el" 'BEGIN { printf "%.1f", b / 1048576 / s }')
	measure sparse "$s" "$sb" "fallocated=$((per * NFALLOC))" "falloc_s=$fa_s" \
		"overwritten=$ow" "overwrite_mibs=$ow_mibs"
	stop_daemon
	rm -f "${IMGS[@]}"
}

# ---- scenario files: one file system, grown to each count.

# create FROM TO: empty files FROM..TO-1, PERDIR a directory; the time of
# every CHUNKN files into CHUNKS; prints the rate over all of them.
create_files() {
	python3 - "$MNT" "$1" "$2" "$PERDIR" "$CHUNKN" "$CHUNKS" <<'EOF'
import os, stat, sys, time
mnt, a, b, per, chunk, out = sys.argv[1], *map(int, sys.argv[2:6]), sys.argv[6]
t0 = tc = time.monotonic()
with open(out, "a") as log:
    for i in range(a, b):
        d = "%s/d%06d" % (mnt, i // per)
        if i % per == 0 or i == a:
            os.makedirs(d, exist_ok=True)
        os.mknod("%s/f%07d" % (d, i), 0o644 | stat.S_IFREG)
        if (i + 1) % chunk == 0 or i + 1 == b:
            t = time.monotonic()
            n = (i + 1) - max(a, (i // chunk) * chunk)
            log.write("%d\t%d\t%.1f\n" % (i + 1 - n, i + 1, n / (t - tc)))
            log.flush()
            tc = t
print("%.1f" % ((b - a) / (time.monotonic() - t0)))
EOF
}

files_run() {
	local prev=0 c n avail rate
	avail=$(($(df -k --output=avail "$DIR" | tail -1) << 10))
	((avail > 4 << 30)) || { STOPPED+=("files: under 4 GiB free in $DIR"); return 0; }
	echo "== files: two $FILESIMG images, ${FILES} files, $PERDIR a directory" >&2
	new_images "$FILESIMGB"
	start_daemon "${IMGS[@]}"
	for c in ${FILES//,/ }; do
		n=$(count "$c")
		((n > prev)) || fail "--files must grow ($c after $prev)"
		predict_ok files "$c" "$n" || break
		read -r CK0 CB0 < <(stats checkpoints_total checkpoint_written_bytes_total)
		LB0=$(stat_plain log.chunk_blocks)
		echo "== files $c: creating $((n - prev))" >&2
		watch_start
		rate=$(create_files "$prev" "$n") || { watched_stop files "$c" && break; fail "creating files failed"; }
		watched_stop files "$c" && break
		measure files "$c" "$n" "dirs=$(((n + PERDIR - 1) / PERDIR))" "create_per_s=$rate"
		prev=$n
	done
	[ -z "$DAEMON_PID" ] || stop_daemon
	rm -f "${IMGS[@]}"
}

{
	echo "command: bench/scale.sh $ARGS"
	echo "label=$LABEL sizes=$SIZES files=$FILES overwrite=$OVERWRITE per-dir=$PERDIR max-rss=$(mib "$MAXRSSK")MiB format='$FORMAT' twinfs-opts='$TWOPTS' dir=$DIR"
	echo "kernel: $(uname -r); cpus: $(nproc); memory: $(awk '/^MemTotal:/{ printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo); commit: $(git rev-parse --short HEAD 2>/dev/null)"
} > "$OUTP.params"

if has sparse; then
	STOP=
	for s in ${SIZES//,/ }; do
		# not "sparse_step || break": set -e does not act inside a
		# function called as the left side of ||
		sparse_step "$s"
		[ -z "$STOP" ] || break
	done
fi
has files && files_run

report | tee "$OUTP.md.new"
mv "$OUTP.md.new" "$OUTP.md"
echo "results: $OUTP.md" >&2
