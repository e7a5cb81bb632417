# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck shell=bash
#
# Description: Mount harness sourced by every integration test.  It owns the test's
# private temp dir, the image files, the daemon (always run in the
# foreground so we keep its pid and its stderr), the per-test timeout and the
# cleanup trap, and runs the test in a mount namespace of its own (below).
# A test fails if a daemon exits nonzero or logs an error line
# the test did not declare with LOG_ALLOW (an extended regex).
#
# Environment (set by tests/integration/meson.build):
#   TWINFS MKFS       the daemon and mkfs binaries
#   OPCHECK MODEL     helper binaries
#   TEST_TIMEOUT      seconds before the watchdog kills the test (default 280)
#   HARNESS_OPTS      extra -o options for every mount (e.g. backend=aio)
#   TWINFS_FORMAT     v2 (the default): h_setup makes format v2 file systems.
#                     v1 (deprecated, for the v1 code while it exists):
#                     h_setup runs mkfs -O v1 unless the test asks for a
#                     format itself, and h_mount, h_mount_fails and h_fsck
#                     add the opt-in (-o format=1, --format=1) a format 1
#                     file system needs
#
# Exit 77 (skip) only when /dev/fuse is absent, or when not root.

set -euo pipefail

: "${TWINFS:?TWINFS must name the daemon binary}"
: "${MKFS:?MKFS must name the mkfs binary}"

if [[ ! -c /dev/fuse ]]; then
	echo "SKIP: /dev/fuse is absent"
	exit 77
fi
if ((EUID != 0)); then
	echo "SKIP: integration tests mount file systems and need root"
	exit 77
fi

# Each test runs in a mount namespace of its own, private.  A namespace
# that another process creates (bwrap in a test beside this one, the
# xfstests run of scripts/extsuite.sh, any job on the machine) copies every
# mount it can see, and a copy of this test's mount keeps the superblock,
# so the FUSE connection, alive after the unmount here: the daemon goes on
# serving and exits only when that namespace ends (each of v2inflight,
# v2nodelow, degraded and scrub_v1 once failed "daemon did not exit within
# 30 s of unmount" so).  From here on, no other namespace sees our mounts.
# H_OWN_NS: the namespace is made (or cannot be: then as before).
if [[ -z ${H_OWN_NS:-} ]]; then
	export H_OWN_NS=1
	if unshare -m --propagation private true 2>/dev/null; then
		exec unshare -m --propagation private "$BASH" "$0" "$@"
	fi
	echo "note: unshare -m failed: the test's mounts are visible to other mount namespaces"
fi

# The other way round: this namespace began as a copy of every mount there
# was, and each copy keeps its file system alive while the test runs: a
# twinfs mounted outside (a user's, a benchmark's) would go on being served
# by its daemon after its own unmount there, and a loop device under a
# btrfs or XFS mount (bench/run.sh) would stay busy.  Drop our copies of
# those: umount -l here changes this namespace only.  Never the one that
# holds the binaries under test.
h_drop_foreign_mounts() {
	local src mnt fstype rest
	while read -r src mnt fstype rest; do
		[[ $fstype == fuse.twinfs || $src == /dev/loop* ]] || continue
		mnt=$(printf '%b' "$mnt")
		[[ $mnt != / && ${TWINFS:-/} != "$mnt"/* ]] || continue
		umount -l "$mnt" 2>/dev/null || true
	done < <(tac /proc/self/mounts)
}
[[ ${H_OWN_NS:-} != 1 ]] || h_drop_foreign_mounts

case ${TWINFS_FORMAT:-v2} in
v1 | v2) ;;
*)
	echo "FAIL: TWINFS_FORMAT=$TWINFS_FORMAT: expected v1 or v2" >&2
	exit 1
	;;
esac

T=$(mktemp -d "${TMPDIR:-/tmp}/twinfs-it.XXXXXX")
MNT=$T/mnt
mkdir -p "$MNT"
IMGS=()			# images of the current file system, in mkfs order
DAEMON_PID=""		# daemon of the current mount
DAEMON_LOG=""		# its stderr
DEVSPEC=""		# what the current mount was given
MOUNT_OPTS=""		# its -o options
NLOG=0
LOG_ALLOW=${LOG_ALLOW:-}
# Lines in the daemon's stderr that mean a bug unless the test allows them.
LOG_BAD='(\b(error|assert|assertion|panic|abort|aborted|fatal|BUG)\b|Sanitizer|runtime error:|leaked|double free|corrupted|Segmentation)'

h_log() { echo "[$(date +%T)] $*"; }
# Whether the daemon is an AddressSanitizer build (RSS bounds loosen).
# grep reads all of ldd's output: with -q it can stop early, ldd's own
# pipe dies of SIGPIPE and, under pipefail, the answer is a wrong "no".
h_asan() { ldd "$TWINFS" 2>/dev/null | grep libasan >/dev/null; }
h_fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# ---- timeout ----------------------------------------------------------------
# A hung FUSE request would block the test (and its trap) forever: the
# watchdog kills the daemon first, which aborts the connection and unblocks
# every caller with ENOTCONN, then terminates the test.
h_watchdog() {
	local secs=$1 parent=$$
	(
		trap - EXIT
		sleep "$secs" &
		sp=$!
		# Cancelled by h_cleanup: take the sleep along.
		trap 'kill $sp 2>/dev/null; exit 0' TERM
		wait "$sp" || exit 0
		echo "test timed out after ${secs}s" >"$T/timeout"
		if [[ -f $T/daemon.pid ]]; then
			kill -9 "$(cat "$T/daemon.pid")" 2>/dev/null || true
		fi
		umount -l "$MNT" 2>/dev/null || true
		# The test's running command (bash runs the TERM trap only once
		# its foreground command has finished), then the test.
		for c in $(pgrep -P "$parent"); do
			[[ $c == "$BASHPID" ]] || kill -TERM "$c" 2>/dev/null || true
		done
		kill -TERM "$parent" 2>/dev/null || true
	) </dev/null >/dev/null 2>&1 &
	WATCHDOG_PID=$!
}

# ---- daemon log -------------------------------------------------------------
# Prints the offending lines and returns 1 when the log has lines matching
# LOG_BAD that do not match LOG_ALLOW.
h_check_log() {
	local log=$1 bad
	[[ -s $log ]] || return 0
	bad=$(grep -aiE "$LOG_BAD" "$log" || true)
	if [[ -n $LOG_ALLOW && -n $bad ]]; then
		bad=$(grep -aivE "$LOG_ALLOW" <<<"$bad" || true)
	fi
	if [[ -n $bad ]]; then
		echo "FAIL: daemon logged (see $log):" >&2
		echo "$bad" | head -n 20 >&2
		return 1
	fi
	return 0
}

h_dump_log() {
	local log=${1:-$DAEMON_LOG}
	[[ -n $log && -s $log ]] || return 0
	echo "---- daemon stderr ($log), last 40 lines ----" >&2
	tail -n 40 "$log" >&2
	echo "----" >&2
}

# ---- images -----------------------------------------------------------------
# h_mkimg NAME SIZE: a sparse image file in the temp dir; prints its path.
h_mkimg() {
	local p=$T/$1
	rm -f "$p"
	truncate -s "$2" "$p"
	echo "$p"
}

# h_setup [NDEVS [SIZE [MKFS_ARGS...]]]: fresh images IMGS[0..n-1] and mkfs.
h_setup() {
	local n=${1:-2} size=${2:-512M} i out
	shift 2 || shift $#
	IMGS=()
	for ((i = 0; i < n; i++)); do
		IMGS+=("$(h_mkimg "disk$i.img" "$size")")
	done
	if [[ " $* " != *" -O "* ]]; then
		set -- -O "$(h_format)" "$@"
		h_log "TWINFS_FORMAT=$(h_format): mkfs -O $(h_format)"
	fi
	if ! out=$("$MKFS" "$@" "${IMGS[@]}" 2>&1); then
		echo "$out" >&2
		h_fail "mkfs.twinfs ${IMGS[*]} failed"
	fi
}

# h_format: the format h_setup makes, v2 or v1 (TWINFS_FORMAT).
h_format() {
	echo "${TWINFS_FORMAT:-v2}"
}

# h_v1opt OPTS: OPTS, with format=1 added under TWINFS_FORMAT=v1 (a format
# 1 file system mounts only with it; format 2 ones do not mind it).
h_v1opt() {
	if [[ $(h_format) == v1 && ,$1, != *,format=*,* ]]; then
		echo "${1:+$1,}format=1"
	else
		echo "$1"
	fi
}

# FSCK_FMT: fsck.twinfs's opt-in for tests running it directly
# ("$FSCK" "${FSCK_FMT[@]}" -n ...): --format=1 under TWINFS_FORMAT=v1.
FSCK_FMT=()
[[ $(h_format) == v2 ]] || FSCK_FMT=(--format=1)

h_devspec() {
	local IFS=:
	echo "$*"
}

# h_daemon_pids MNT: pids of the daemons serving MNT, found by pid and
# argv, never by name (other twinfs daemons run on the same machine): the
# processes holding /dev/fuse open whose argument list has MNT as one
# whole argument.  For daemons the test did not start itself (background
# mounts, mount.fuse3); MNT must be the test's own unique mount point.
h_daemon_pids() {
	local d p a fd
	for d in /proc/[0-9]*; do
		p=${d#/proc/}
		[[ $p != "$BASHPID" ]] || continue
		while IFS= read -r -d '' a; do
			[[ $a == "$1" ]] || continue
			for fd in "$d"/fd/*; do
				if [[ $(readlink "$fd" 2>/dev/null) == /dev/fuse ]]; then
					echo "$p"
					break
				fi
			done
			break
		done 2>/dev/null <"$d/cmdline"
	done
}

# h_wait_daemon_pids MNT: h_daemon_pids, asked again for up to 10 s while
# it finds none.  Right after a background mount returned, the daemon was
# missed now and then on a loaded machine (user.sh failed 2 of 4 runs
# beside a CI run; the same scan 0.1 s later found it, holding /dev/fuse).
h_wait_daemon_pids() {
	local i out
	for ((i = 0; i < 100; i++)); do
		out=$(h_daemon_pids "$1")
		[[ -n $out ]] && break
		sleep 0.1
	done
	[[ -z $out ]] || echo "$out"
}

h_is_mounted() {
	# mountinfo field 5 is the mount point.
	awk -v m="$1" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo
}

# ---- mount / unmount --------------------------------------------------------
# h_mount [DEVSPEC [OPTS]]: start the daemon in the foreground (in the
# background of this shell) and wait until the kernel shows the mount.
h_mount() {
	local spec=${1:-$(h_devspec "${IMGS[@]}")} opts=${2-$MOUNT_OPTS} all i
	[[ -z $DAEMON_PID ]] || h_fail "h_mount: already mounted"
	all=$(h_v1opt "$opts")
	if [[ -n ${HARNESS_OPTS:-} ]]; then
		all=${all:+$all,}$HARNESS_OPTS
	fi
	NLOG=$((NLOG + 1))
	DAEMON_LOG=$T/daemon.$NLOG.log
	DEVSPEC=$spec
	MOUNT_OPTS=$opts
	h_log "mount $spec${all:+ -o $all}"
	if [[ -n $all ]]; then
		"$TWINFS" -f "$spec" "$MNT" -o "$all" >"$DAEMON_LOG" 2>&1 &
	else
		"$TWINFS" -f "$spec" "$MNT" >"$DAEMON_LOG" 2>&1 &
	fi
	DAEMON_PID=$!
	echo "$DAEMON_PID" >"$T/daemon.pid"
	for ((i = 0; i < 200; i++)); do
		h_is_mounted "$MNT" && return 0
		if ! kill -0 "$DAEMON_PID" 2>/dev/null; then
			local rc=0
			wait "$DAEMON_PID" || rc=$?
			DAEMON_PID=""
			rm -f "$T/daemon.pid"
			h_dump_log
			h_fail "daemon exited with status $rc before mounting $spec"
		fi
		sleep 0.05
	done
	h_dump_log
	h_fail "mount of $spec did not appear within 10 s"
}

# h_since T0: seconds (one decimal) since $EPOCHREALTIME was T0.
h_since() {
	local us=$((${EPOCHREALTIME//[.,]/} - ${1//[.,]/}))
	printf '%d.%d' $((us / 1000000)) $((us / 100000 % 10))
}

# h_umount: fusermount3 -u, then wait for the daemon to write its clean
# state and exit.  The daemon must exit 0 and its log must be clean.
h_umount() {
	local i rc=0
	[[ -n $DAEMON_PID ]] || return 0
	h_log "unmount"
	if h_is_mounted "$MNT"; then
		for ((i = 0; i < 50; i++)); do
			fusermount3 -u "$MNT" 2>/dev/null && break
			sleep 0.1	# EBUSY: a helper may still be closing files
		done
		h_is_mounted "$MNT" && h_fail "fusermount3 -u $MNT keeps failing"
	fi
	# 30 s is ample on a quiet machine; on a loaded one (CI beside other
	# work) a few unmounts have taken longer.  So: the daemon's threads
	# to the log at 30 s, to see what it waits for, and a hang is what
	# is still there at 120 s.
	local t0=$EPOCHREALTIME
	for ((i = 0; i < 1200; i++)); do
		kill -0 "$DAEMON_PID" 2>/dev/null || break
		((i == 300)) && h_stacks "still running 30 s after unmount"
		sleep 0.1
	done
	h_log "daemon gone $(h_since "$t0") s after the unmount"
	if kill -0 "$DAEMON_PID" 2>/dev/null; then
		h_stacks "still running 120 s after unmount"
		kill -9 "$DAEMON_PID" 2>/dev/null || true
		wait "$DAEMON_PID" 2>/dev/null || true
		DAEMON_PID=""
		rm -f "$T/daemon.pid"
		h_dump_log
		h_fail "daemon did not exit within 120 s of unmount (killed)"
	fi
	wait "$DAEMON_PID" || rc=$?
	DAEMON_PID=""
	rm -f "$T/daemon.pid"
	if ((rc != 0)); then
		h_dump_log
		h_fail "daemon exited with status $rc after unmount"
	fi
	h_check_log "$DAEMON_LOG" || { h_dump_log; exit 1; }
}

# h_stacks WHY: every thread's stack of the daemon to stderr (gdb, if
# installed), with the load, for a daemon slower than expected.
h_stacks() {
	local p
	echo "---- daemon $DAEMON_PID $1 (load: $(cut -d' ' -f1-3 /proc/loadavg)) ----" >&2
	# A mount of ours still in another namespace keeps the connection
	# open: the daemon then waits for requests, not in its teardown.
	for p in /proc/[0-9]*; do
		grep -qF " $T/" "$p/mountinfo" 2>/dev/null || continue
		[[ $(readlink "$p/ns/mnt") != "$(readlink /proc/self/ns/mnt)" ]] || continue
		echo "still mounted in the mount namespace of pid ${p#/proc/}:" \
			"$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null | cut -c1-200)" >&2
	done
	if command -v gdb >/dev/null; then
		timeout 60 gdb -p "$DAEMON_PID" -batch -ex "thread apply all bt" 2>&1 |
			grep -E '^(Thread|#)' >&2 || true
	else
		echo "(gdb not installed: no stacks)" >&2
	fi
	echo "----" >&2
}

# h_crash: kill -9 the daemon and drop its mount, as a crash would leave it.
h_crash() {
	kill -9 "$DAEMON_PID"
	wait "$DAEMON_PID" 2>/dev/null || true
	DAEMON_PID=""
	rm -f "$T/daemon.pid"
	fusermount3 -u -z "$MNT" 2>/dev/null || umount -l "$MNT"
}

# h_ckpt_loop OUT: in the background until the daemon dies (kill -9
# tests), twinfs-ctl checkpoint, a short random pause, again; the count
# done goes to OUT.  Sets CKPT_LOOP_PID.
h_ckpt_loop() {
	(n=0; while "$CTL" raw "$MNT" checkpoint >/dev/null 2>&1; do
		n=$((n + 1)); echo "$n" >"$1"; sleep 0.0$((RANDOM % 5))
	done) &
	CKPT_LOOP_PID=$!
}

h_remount() {
	local spec=$DEVSPEC opts=$MOUNT_OPTS
	h_umount
	h_mount "$spec" "$opts"
}

# h_mount_fails DEVSPEC [OPTS]: the daemon must refuse to mount.  Sets
# FAIL_OUT to its output and FAIL_RC to its exit status.
h_mount_fails() {
	local spec=$1 opts i
	local out=$T/fail.$((NLOG + 1)).log
	opts=$(h_v1opt "${2:-}")
	NLOG=$((NLOG + 1))
	if [[ -n $opts ]]; then
		"$TWINFS" -f "$spec" "$MNT" -o "$opts" >"$out" 2>&1 &
	else
		"$TWINFS" -f "$spec" "$MNT" >"$out" 2>&1 &
	fi
	local pid=$!
	echo "$pid" >"$T/daemon.pid"
	for ((i = 0; i < 200; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		if h_is_mounted "$MNT"; then
			fusermount3 -u "$MNT" || true
			wait "$pid" || true
			rm -f "$T/daemon.pid"
			h_fail "mount of $spec${opts:+ -o $opts} succeeded; it must be refused"
		fi
		sleep 0.05
	done
	if kill -0 "$pid" 2>/dev/null; then
		kill -9 "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		rm -f "$T/daemon.pid"
		h_fail "daemon given $spec neither mounted nor exited within 10 s"
	fi
	FAIL_RC=0
	wait "$pid" || FAIL_RC=$?
	rm -f "$T/daemon.pid"
	FAIL_OUT=$(cat "$out")
	if ((FAIL_RC == 0)); then
		h_fail "daemon refused $spec but exited 0"
	fi
}

# ---- cleanup ----------------------------------------------------------------
h_cleanup() {
	local rc=$?
	set +e
	trap - EXIT TERM INT
	cd /
	if [[ -n ${WATCHDOG_PID:-} ]]; then
		kill "$WATCHDOG_PID" 2>/dev/null
		wait "$WATCHDOG_PID" 2>/dev/null
	fi
	if [[ -f $T/timeout ]]; then
		echo "FAIL: $(cat "$T/timeout")" >&2
		rc=1
	fi
	if [[ -n $DAEMON_PID ]] || h_is_mounted "$MNT"; then
		fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null
		if [[ -n $DAEMON_PID ]]; then
			local i
			for ((i = 0; i < 100; i++)); do
				kill -0 "$DAEMON_PID" 2>/dev/null || break
				sleep 0.1
			done
			kill -9 "$DAEMON_PID" 2>/dev/null
			wait "$DAEMON_PID" 2>/dev/null
			if ((rc != 0)); then
				h_dump_log
			fi
		fi
	fi
	if ((rc != 0)) && [[ -n ${KEEP_TMP:-} ]]; then
		echo "keeping $T" >&2
	else
		# In the background, in its own session: on a file system
		# mounted with discard (this machine's ext4 /tmp) freeing an image's
		# scattered extents takes about 5 s per 20,000 (v2rssow's two
		# images: over 40 s), and the test's slot would wait for it.
		setsid rm -rf "$T" </dev/null >/dev/null 2>&1 &
	fi
	exit "$rc"
}
trap h_cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
h_watchdog "${TEST_TIMEOUT:-280}"

# ---- assertions -------------------------------------------------------------
# h_expect_one_line TEXT WHAT: TEXT is exactly one non-empty line mentioning WHAT.
h_expect_one_line() {
	local text=$1 what=$2 ctx=${3:-}
	local n
	n=$(grep -c . <<<"$text" || true)
	[[ $n == 1 ]] || h_fail "$ctx: expected one line of error, got $n: $text"
	grep -qF -- "$what" <<<"$text" || h_fail "$ctx: error does not name $what: $text"
}

# h_need_fsck: FSCK names fsck.twinfs (meson sets it; else the one built
# next to the daemon), or the test fails.
# h_node_gate_idle: with nothing in flight on the v2 mount, the node
# gate's reservations are all back (dirty.node_gate_reserved 0), no
# background checkpoint failed and none wrote more node slots than the
# gate counted (dirty.checkpoint_slots_over).
h_node_gate_idle() {
	local resv fails over
	"$CTL" raw "$MNT" stats >"$T/gate.json" || h_fail "twinfs-ctl raw stats"
	read -r resv fails over < <(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))["dirty"]
print(d["node_gate_reserved"], d["checkpoint_failures"], d["checkpoint_slots_over"])' "$T/gate.json")
	h_log "idle: node_gate_reserved $resv, checkpoint_failures $fails, checkpoint_slots_over $over"
	((resv == 0)) || h_fail "node gate reservations leaked: $resv slots held with nothing in flight"
	((fails == 0)) || h_fail "$fails background checkpoints failed"
	((over == 0)) || h_fail "$over checkpoints wrote more node slots than the gate counted"
}

h_need_fsck() {
	FSCK=${FSCK:-$(dirname "$TWINFS")/fsck.twinfs}
	[[ -x $FSCK ]] || h_fail "fsck.twinfs not found at $FSCK"
}

# h_fsck WANT_RC ARGS...: runs fsck.twinfs, keeps its output in FOUT; the
# test fails unless it exits WANT_RC.
h_fsck() {
	local want=$1 rc=0
	shift
	if [[ $(h_format) == v1 && " $* " != *" --format="* ]]; then
		set -- --format=1 "$@"
	fi
	FOUT=$("$FSCK" "$@" 2>&1) || rc=$?
	h_log "fsck.twinfs $* -> $rc"
	if ((rc != want)); then
		echo "$FOUT" | tail -n 30 >&2
		h_fail "fsck.twinfs $* exited $rc, expected $want"
	fi
}

# h_sums FILE...: one fingerprint per file, to prove files were not modified
# (CRC32 + size: accidental changes are what we look for, and it is fast).
h_sums() {
	cksum "$@" | awk '{print $1, $2}'
}
