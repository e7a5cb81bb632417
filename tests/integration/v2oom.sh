#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: format v2, the change set out of memory (issue 13): with
# v2dirty's allocations failing (TWINFS_V2DIRTY_FAIL, the test hook),
# 200 files are deleted (more deaths than v2dirty keeps aside), 50 made,
# one renamed, a directory made and a file's first MiB overwritten.  The
# notes are lost (stats dirty.lost_notes), a checkpoint is asked for at
# once (dirty.lost_checkpoints); once memory is back a
# checkpoint must succeed by rebuilding its set from the log
# (dirty.rebuilds), not fail for ever.  Then kill -9 right after it, so
# the trees must hold everything: fsck -n clean, remount, every file as
# written, no deleted one back, a scrub, unmount, fsck clean.  Then a
# short window: 300 deaths lost and memory back at once; a scrub started
# then completes (it waits for the checkpoint that rebuilds).
source "$(dirname "$0")/harness.sh"
# The injected allocation failures may fail a background checkpoint: the
# daemon says so (an error line and the event), which is expected here.
LOG_ALLOW='background checkpoint failed: Cannot allocate memory|event checkpoint_failed: Cannot allocate memory'

h_need_fsck
: "${CTL:?CTL must name twinfs-ctl}"

# dirty FIELD: a field of the dirty budget's stats.
dirty() {
	"$CTL" raw "$MNT" stats >"$T/stats.json" || h_fail "twinfs-ctl raw stats: $(cat "$T/stats.json")"
	python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("dirty", {}).get(sys.argv[2], -1))' \
		"$T/stats.json" "$1"
}
# check: the files as the workload left them.
check() {
	local n i
	for i in $(seq 1 200); do
		[[ ! -e $MNT/d/f$i ]] || h_fail "d/f$i was deleted and is back ($1)"
	done
	for i in $(seq 201 300); do
		[[ $i == 250 ]] && continue
		[[ $(cat "$MNT/d/f$i") == "file $i" ]] || h_fail "d/f$i: wrong contents ($1)"
	done
	[[ ! -e $MNT/d/f250 && $(cat "$MNT/d/r250") == "file 250" ]] ||
		h_fail "the rename of d/f250 is lost ($1)"
	for i in $(seq 1 50); do
		[[ $(cat "$MNT/n/g$i") == "new $i" ]] || h_fail "n/g$i: wrong contents ($1)"
	done
	[[ -d $MNT/x ]] || h_fail "directory x is lost ($1)"
	[[ $(h_sums "$MNT/big") == "$BIGSUM" ]] || h_fail "big: wrong contents ($1)"
	n=$(find "$MNT" | wc -l)
	((n == 1 + 1 + 100 + 1 + 50 + 1 + 1)) || h_fail "$n names in the file system ($1)"
}

h_setup 2 512M -O v2
h_mount
mkdir "$MNT/d" "$MNT/n"
for i in $(seq 1 300); do echo "file $i" >"$MNT/d/f$i"; done
dd if=/dev/urandom of="$MNT/big" bs=1M count=4 status=none
h_umount
h_fsck 0 -n "${IMGS[@]}"

# v2dirty's allocations fail after the mount's first few (its checkpoint),
# until 1,500 have failed.
export TWINFS_V2DIRTY_FAIL=20,1500
h_mount
unset TWINFS_V2DIRTY_FAIL
rm "$MNT"/d/f{1..200}
for i in $(seq 1 50); do echo "new $i" >"$MNT/n/g$i"; done
mv "$MNT/d/f250" "$MNT/d/r250"
mkdir "$MNT/x"
dd if=/dev/urandom of="$MNT/big" bs=1M count=1 conv=notrunc,fsync status=none
BIGSUM=$(h_sums "$MNT/big")
lost=$(dirty lost_notes)
kept=$(dirty deaths_kept)
over=$(dirty deaths_lost)
h_log "notes lost: $lost, deaths kept aside $kept, more lost: $over"
((lost > 0)) || h_fail "no note was lost: the hook did not fail v2dirty's allocations"
# The next change after a lost note asks for the checkpoint that rebuilds.
asked=$(dirty lost_checkpoints)
((asked >= 1)) || h_fail "no checkpoint was asked for when notes were lost"
((kept == 128 && over == 1)) || h_fail "expected 200 lost deaths, 128 of them kept aside"
# A scrub walks every inode number the tree has, deleted ones included:
# while deaths are lost it must not read them back in.  It waits for the
# checkpoint that rebuilds (fs_ckpt_wait), but those fail while memory
# does: after a few it refuses to start.
"$CTL" scrub start "$MNT" --wait --json >"$T/scrub1.json" 2>&1 || true
grep -q "scrub: cannot start: Cannot allocate memory" "$DAEMON_LOG" ||
	{ h_dump_log; h_fail "the scrub walked the tree while deaths were lost"; }
check "while the notes were lost"

# Each failing checkpoint uses allocations up: memory comes back.
ok=0
for ((i = 0; i < 2000; i++)); do
	if "$CTL" raw "$MNT" checkpoint >"$T/ckpt.json" 2>&1; then
		ok=1
		break
	fi
done
((ok)) || h_fail "no checkpoint succeeded after memory came back: $(cat "$T/ckpt.json")"
h_log "a checkpoint succeeded after $i failed"
rb=$(dirty rebuilds)
((rb >= 1)) || h_fail "the checkpoint did not rebuild its set from the log (rebuilds $rb)"
((i > 0)) || h_fail "the first checkpoint succeeded: the hook's window was over too early"
# Everything must be in the trees now: crash, no log to speak of.
h_crash
h_fsck 0 -n "${IMGS[@]}"
h_mount
check "after the crash"
js=$("$CTL" scrub start "$MNT" --wait --json | tail -n 1) || h_fail "scrub failed: $js"
check "after the scrub"
h_umount
h_fsck 0 -n "${IMGS[@]}"
h_mount
check "after a clean unmount"
mkdir "$MNT/e"
for i in $(seq 1 300); do echo "e $i" >"$MNT/e/f$i"; done
h_umount

# A short window: 300 deletions lose their deaths (more than v2dirty keeps
# aside), then memory is back.  A scrub started now must not fail: it
# waits for the checkpoint that rebuilds from the log (asked for at once).
export TWINFS_V2DIRTY_FAIL=20,${V2OOM_WINDOW:-700}
h_mount
unset TWINFS_V2DIRTY_FAIL
rm "$MNT"/e/f{1..300}
h_log "short window: lost notes $(dirty lost_notes), deaths lost $(dirty deaths_lost)," \
	"rebuilds $(dirty rebuilds), asked $(dirty lost_checkpoints)"
js=$("$CTL" scrub start "$MNT" --wait --json | tail -n 1) ||
	{ h_dump_log; h_fail "scrub failed after deaths were lost: $js"; }
! grep -q "scrub: cannot start" "$DAEMON_LOG" || h_fail "the scrub gave up on lost deaths"
h_log "after the scrub: rebuilds $(dirty rebuilds), asked $(dirty lost_checkpoints)"
[[ -z $(ls "$MNT/e") ]] || h_fail "a deleted file of e/ is back"
rmdir "$MNT/e"
check "after the short window"
h_umount
h_fsck 0 -n "${IMGS[@]}"
h_log "PASS"
