#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: -o ckpt_log=SIZE bounds the log the mount after kill -9
# replays.  A 256 MiB image has a 16 MiB log; by default a checkpoint is
# asked for only past half of it, so the records of 60,000 chmods (about
# 6 MiB) are all replayed (mount.replay_log_blocks in the status).  With
# ckpt_log=1M the daemon checkpoints as the log grows (checkpoint.writes)
# and the replay is under 3 MiB.  The last modes are there after both
# replays, fsck clean.
source "$(dirname "$0")/harness.sh"

h_need_fsck
: "${CTL:?CTL must name twinfs-ctl}"

stat_of() { "$CTL" stats "$MNT" | awk -v k="$1" '$1 == k ":" { print $2 }'; }
replayed() { "$CTL" raw "$MNT" status | grep -o '"replay_log_blocks": *[0-9]*' | grep -o '[0-9]*$'; }

# run NAME OPTS: 100 files, 600 chmods of each, kill -9, the mount
# after it; sets CK (checkpoints written meanwhile) and BLOCKS (log
# blocks replayed).
run() {
	local i ck0
	h_mount "" "$2"
	mkdir "$MNT/$1"
	ck0=$(stat_of checkpoint.writes)
	python3 -c 'import os, sys
d = sys.argv[1]
for i in range(100):
	open("%s/%d" % (d, i), "w").close()
for k in range(600):
	for i in range(100):
		os.chmod("%s/%d" % (d, i), 0o600 + (k + i) % 64)' "$MNT/$1"
	"$CTL" sync "$MNT" >/dev/null || h_fail "twinfs-ctl sync"
	sleep 1		# a checkpoint asked for finishes
	CK=$(($(stat_of checkpoint.writes) - ck0))
	h_crash
	h_mount "" "$2"
	[[ $(stat -c %a "$MNT/$1/7") == 636 && $(stat -c %a "$MNT/$1/99") == 672 ]] ||
		h_fail "$1: modes $(stat -c %a "$MNT/$1/7") $(stat -c %a "$MNT/$1/99") after the replay, not 636 672"
	BLOCKS=$(replayed)
	h_umount
}

h_setup 2 256M -O v2
run plain ""
h_log "default: $CK checkpoints, $BLOCKS log blocks replayed"
((BLOCKS >= 1100)) || h_fail "default: only $BLOCKS log blocks replayed, the workload is too small"
run capped ckpt_log=1M
h_log "ckpt_log=1M: $CK checkpoints, $BLOCKS log blocks replayed"
((CK >= 2)) || h_fail "ckpt_log=1M: $CK checkpoints during 4.7 MiB of log"
((BLOCKS < 768)) || h_fail "ckpt_log=1M: $BLOCKS log blocks replayed (3 MiB or more)"
h_fsck 0 -n "${IMGS[@]}"
