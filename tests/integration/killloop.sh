#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: kill -9 loop: mount, run fsyncing writers (killwriter), kill -9 the daemon
# at a random moment, drop the dead mount, remount and check that every
# record acknowledged after an fsync -- in this round and every earlier one --
# reads back intact.  KILL_ROUNDS (default 20) rounds.  On format v2
# (TWINFS_FORMAT=v2, the default) or with KILL_CKPT=1, twinfs-ctl checkpoint runs in a
# loop meanwhile, so kills land inside checkpoints (node writes, free-space
# commits, superblocks) too.  KILL_DSYNC=1: writer b opens O_DSYNC and takes every
# write that returned as acknowledged (no fsync), the group-commit path.  KILL_SEED
# seeds the kill moments; HARNESS_OPTS (cache=4M, threads=16...) reaches every mount.
# The mounts alternate the default (lazyreplay, compact_dirty) and
# nolazyreplay,nocompact_dirty, so both replays follow kills.
source "$(dirname "$0")/harness.sh"
: "${KILLWRITER:?KILLWRITER must name the killwriter binary}"

rounds=${KILL_ROUNDS:-20}
ckpt_loop=${KILL_CKPT:-0}
mode_b=write
[[ ${KILL_DSYNC:-0} == 1 ]] && mode_b=write-dsync
[[ ${TWINFS_FORMAT:-v2} == v2 ]] && ckpt_loop=1
ckpts=0
# Room for every round's records: this test is about fsync durability under kill -9,
# not a full file system (enospc.sh is).
h_setup 2 768M
RANDOM=${KILL_SEED:-42}

check_all() {
	local r
	for ((r = 0; r < $1; r++)); do
		"$KILLWRITER" check "$MNT/r$r.a" "$T/ack.$r.a" "$((r * 2 + 1))" >/dev/null ||
			h_fail "round $r (writer a): acknowledged data lost after the kill of round $(($1 - 1))"
		"$KILLWRITER" check "$MNT/r$r.b" "$T/ack.$r.b" "$((r * 2 + 2))" >/dev/null ||
			h_fail "round $r (writer b): acknowledged data lost after the kill of round $(($1 - 1))"
	done
}

total_acked=0
for ((round = 0; round < rounds; round++)); do
	# Every other mount after a kill replays eagerly (its checkpoint
	# before it serves), the others as by default (lazyreplay).
	if ((round % 2)); then
		h_mount "" nolazyreplay,nocompact_dirty
	else
		h_mount "" ""
	fi
	check_all "$round"
	"$KILLWRITER" write "$MNT/r$round.a" "$T/ack.$round.a" "$((round * 2 + 1))" 2>/dev/null &
	wa=$!
	"$KILLWRITER" "$mode_b" "$MNT/r$round.b" "$T/ack.$round.b" "$((round * 2 + 2))" 2>/dev/null &
	wb=$!
	wc=""
	if ((ckpt_loop)); then
		h_ckpt_loop "$T/ckpts.$round"
		wc=$CKPT_LOOP_PID
	fi
	sleep "0.$((RANDOM % 9 + 1))$((RANDOM % 10))"
	kill -9 "$DAEMON_PID"
	wait "$DAEMON_PID" 2>/dev/null || true
	wait "$wa" "$wb" $wc || true
	ckpts=$((ckpts + $(cat "$T/ckpts.$round" 2>/dev/null || echo 0)))
	h_check_log "$DAEMON_LOG" || { h_dump_log; exit 1; }
	DAEMON_PID=""
	rm -f "$T/daemon.pid"
	# The connection is gone; detach the dead mount point.
	fusermount3 -u -z "$MNT" 2>/dev/null || umount -l "$MNT"
	h_is_mounted "$MNT" && h_fail "dead mount still present after round $round"
	n=$(tail -n 1 "$T/ack.$round.a" 2>/dev/null | awk '{print $2}')
	total_acked=$((total_acked + ${n:-0}))
done
h_mount
check_all "$rounds"
h_umount
((ckpt_loop == 0 || ckpts > 0)) || h_fail "no checkpoint completed while the writers ran"
echo "killloop: $rounds kill -9 rounds, $total_acked+ fsynced records (writer a) all intact" \
	"(${ckpts} checkpoints completed during the rounds)"
