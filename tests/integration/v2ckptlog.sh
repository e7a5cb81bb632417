#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: a format v2 checkpoint never publishes a change whose log
# record is not durable.  It writes its inodes from memory after its log
# barrier, so an operation between the two is in the trees it writes; if
# the superblock naming them lands and the daemon dies before the next
# group commit, replay has no record to finish that operation with.  Found
# by fsstress with kill -9 (-o cache=4M): a directory with link count 4
# and one subdirectory.  Here a checkpoint is held 500 ms after it took its
# set of changes
# (TWINFS_V2_CKPT_PAUSE_MS), a mkdir lands in between, the daemon is
# killed as soon as the checkpoint returns (-o commit=3600000: no group
# commit would have made the mkdir durable).  The mount's replay must
# finish the operation: the new directory is there and fsck -n is clean
# after the unmount (before the fix the mkdir's record was lost: no p/new,
# "directory inode 2: link count 5, should be 4").  fsck -n is not run
# before the replay: it checks the trees, which may hold such a change
# whose record only the log has.  Then a rename across parents and a
# rmdir in the window.
source "$(dirname "$0")/harness.sh"

h_need_fsck
: "${CTL:?CTL must name twinfs-ctl}"
export TWINFS_V2_CKPT_PAUSE_MS=500

# window CMD...: a checkpoint, CMD while it is held after its barrier,
# then kill -9 once the checkpoint is durable.
window() {
	"$CTL" raw "$MNT" checkpoint >"$T/ckpt.json" &
	local cp=$!
	sleep 0.2
	"$@"
	wait "$cp" || h_fail "checkpoint: $(cat "$T/ckpt.json")"
	h_crash
}

h_setup 2 256M -O v2
h_mount "" commit=3600000
mkdir -p "$MNT/p/keep" "$MNT/q"
: >"$MNT/p/f"
"$CTL" raw "$MNT" checkpoint >/dev/null || h_fail "checkpoint"
mkdir "$MNT/p/old"	# p is in the next checkpoint's set of changes
window mkdir "$MNT/p/new"
h_mount "" commit=3600000
[[ -d $MNT/p/new ]] || h_fail "p/new is gone after the replay"
[[ $(stat -c %h "$MNT/p") == 5 ]] || h_fail "p has link count $(stat -c %h "$MNT/p"), expected 5"
h_umount
h_fsck 0 -n "${IMGS[@]}"
h_mount "" commit=3600000

# A rename of a directory across parents and a rmdir in the window.
mkdir "$MNT/q/x"
window mv "$MNT/p/new" "$MNT/q/new"
h_mount "" commit=3600000
[[ -d $MNT/q/new && ! -e $MNT/p/new ]] || h_fail "the rename is not there after the replay"
h_umount
h_fsck 0 -n "${IMGS[@]}"
h_mount "" commit=3600000
mkdir "$MNT/q/y"
window rmdir "$MNT/q/x"
h_mount "" commit=3600000
[[ ! -e $MNT/q/x ]] || h_fail "q/x is back after the replay"
h_umount
h_fsck 0 -n "${IMGS[@]}"
h_log "PASS"
