#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: format v2, step 4c: mount loads the allocator from the
# free-space and refcount trees and the log replay keeps it in step; no
# extent is walked.  Rounds of a random workload (fsyncing writers, random
# overwrites, copy_file_range shares, punch, truncate, fallocate, deletes),
# kill -9 at a random moment, remount with TWINFS_ALLOC_CHECK=1 (the mount
# compares, block by block, the allocator it loaded and replayed with one
# built from every extent, and refuses to mount on a difference), status
# says no extent was walked, unmount, fsck -n finds no leak or anything
# else.  Every fsynced record survives.  V2ALLOC_ROUNDS (default 6) rounds.
source "$(dirname "$0")/harness.sh"
: "${KILLWRITER:?KILLWRITER must name the killwriter binary}"
: "${CTL:?CTL must name twinfs-ctl}"
h_need_fsck

rounds=${V2ALLOC_ROUNDS:-6}
export TWINFS_ALLOC_CHECK=1
h_setup 2 512M -O v2
RANDOM=${V2ALLOC_SEED:-7}

status_mount() {
	"$CTL" raw "$MNT" status >"$T/status.json" || h_fail "twinfs-ctl raw status"
	python3 -c 'import json,sys
m = json.load(open(sys.argv[1]))["mount"]
print(m["extent_runs_walked"], m["alloc_from_trees"])' "$T/status.json"
}
fsck_clean() {
	h_fsck 0 -n -v "${IMGS[@]}"
	grep -q "^0 errors found" <<<"$FOUT" || h_fail "fsck after $1: $FOUT"
}
mount_checked() {
	h_mount
	grep -q "allocator check: the trees' allocator equals the extents'" "$DAEMON_LOG" ||
		h_fail "$1: no allocator check in the daemon log: $(cat "$DAEMON_LOG")"
	read -r walked trees < <(status_mount)
	[[ $walked == 0 && $trees == 1 ]] ||
		h_fail "$1: the mount walked $walked extent runs (alloc_from_trees $trees), want 0 (1)"
}
check_all() {
	local r
	for ((r = 0; r < $1; r++)); do
		"$KILLWRITER" check "$MNT/r$r" "$T/ack.$r" "$((r + 1))" >/dev/null ||
			h_fail "round $r: acknowledged data lost"
	done
}

# Overwrites, shares, punches, truncates, deletes: every way replay drops,
# sets and shares blocks.
churn() {
	exec python3 - "$MNT" "$1" <<'PY'
import errno, os, random, sys
mnt, seed = sys.argv[1], int(sys.argv[2])
rnd = random.Random(seed)
buf = os.urandom(1 << 20)
names = [os.path.join(mnt, "c%d" % i) for i in range(8)]
while True:
    p = rnd.choice(names)
    op = rnd.randrange(7)
    try:
        if op <= 1:
            fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
            for _ in range(rnd.randrange(1, 16)):
                off = rnd.randrange(0, 2048) * 4096
                os.pwrite(fd, buf[:rnd.randrange(1, 64) * 4096], off)
            if rnd.randrange(3) == 0:
                os.fsync(fd)
            os.close(fd)
        elif op == 2:
            q = rnd.choice(names)
            if q != p and os.path.exists(p):
                s = os.open(p, os.O_RDONLY)
                d = os.open(q, os.O_RDWR | os.O_CREAT, 0o644)
                n = os.fstat(s).st_size
                if n:
                    os.copy_file_range(s, d, n, 0, rnd.randrange(0, 64) * 4096)
                os.fsync(d)
                os.close(s)
                os.close(d)
        elif op == 3 and os.path.exists(p):
            os.truncate(p, rnd.randrange(0, 4 << 20))
        elif op == 4 and os.path.exists(p):
            fd = os.open(p, os.O_RDWR)
            os.posix_fallocate(fd, rnd.randrange(0, 512) * 4096, rnd.randrange(1, 256) * 4096)
            os.close(fd)
        elif op == 5 and os.path.exists(p):
            fd = os.open(p, os.O_RDWR)
            # FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            libc.fallocate(fd, 3, ctypes.c_long(rnd.randrange(0, 512) * 4096),
                           ctypes.c_long(rnd.randrange(1, 128) * 4096))
            os.close(fd)
        elif op == 6 and rnd.randrange(4) == 0 and os.path.exists(p):
            os.unlink(p)
    except OSError as e:
        if e.errno in (errno.ENOTCONN, errno.ECONNABORTED) or not os.path.ismount(mnt):
            sys.exit(0)
PY
}

for ((round = 0; round < rounds; round++)); do
	mount_checked "round $round"
	check_all "$round"
	"$KILLWRITER" write "$MNT/r$round" "$T/ack.$round" "$((round + 1))" 2>/dev/null &
	wa=$!
	churn "$round" 2>/dev/null &
	wc=$!
	# Checkpoints while the writers run: their trees must not count the
	# blocks of writes in flight (nor frees waiting for the log).
	for ((c = 0; c < 3; c++)); do
		sleep "0.$((RANDOM % 4))$((RANDOM % 10))"
		"$CTL" raw "$MNT" checkpoint >/dev/null || h_fail "round $round: checkpoint failed"
	done
	sleep "0.0$((RANDOM % 10))"
	h_crash
	kill "$wc" 2>/dev/null || true
	wait "$wa" "$wc" 2>/dev/null || true
	h_check_log "$DAEMON_LOG" || { h_dump_log; exit 1; }
	h_is_mounted "$MNT" && h_fail "dead mount still present after round $round"
	# The trees of the last checkpoint before the kill count exactly their
	# extents: writes in flight then are not in them.
	fsck_clean "kill -9 of round $round (before any replay)"
	# A crash, the remount's replay, a clean unmount: nothing leaked.
	if ((round % 2 == 1)); then
		mount_checked "after the kill of round $round"
		h_umount
		fsck_clean "kill -9 of round $round, remount, unmount"
	fi
done
mount_checked "the last mount"
runs=$(grep -o "equals the extents' ([0-9]* runs" "$DAEMON_LOG" | grep -o "[0-9]*")
((runs > 0)) || h_fail "the allocator check compared no extent run (${runs:-none})"
check_all "$rounds"
h_umount
fsck_clean "the last round"
echo "v2alloc: $rounds kill -9 rounds, the allocator from the trees equal to the extents' every time, fsck clean"
