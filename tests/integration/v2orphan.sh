#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: format v2 mount time bounded by the log (issue 13): the
# mount never walks every inode.  2,000 files: after a clean unmount and
# after a kill -9 (creates and deletes in the log only) twinfs-ctl status
# shows "mount" "inodes_walked" 0 and the right inode count (the
# superblock's, kept by the replay).  Orphans, a file unlinked while open
# and the daemon killed -9: reclaimed by the next mount with the orphan
# only in the log, and after a checkpoint wrote its ORPHAN item (fsck -n
# before that mount: a note, no error); fsck clean after each.  The same
# for a directory removed while it is a process's working directory: its
# link count 0 is no error either (fsck -n said "should be 2", found by
# fsstress with kill -9).
source "$(dirname "$0")/harness.sh"

h_need_fsck
: "${CTL:?CTL must name twinfs-ctl}"
HOLDER=

# mstat KEY...: a value of twinfs-ctl raw status ("mount.inodes_walked").
mstat() {
	"$CTL" raw "$MNT" status >"$T/status.json" || h_fail "twinfs-ctl status: $(cat "$T/status.json")"
	python3 -c 'import json,sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."):
    v = v[k]
print(int(v))' "$T/status.json" "$1"
}
checkpoint() {
	"$CTL" raw "$MNT" checkpoint >"$T/ckpt.json" || h_fail "checkpoint: $(cat "$T/ckpt.json")"
}
# expect_mount INODES: no walk, and the inode count the files give.
expect_mount() {
	local w n
	w=$(mstat mount.inodes_walked)
	n=$(mstat inodes)
	h_log "mount: inodes_walked $w, inodes $n (expected $1)"
	((w == 0)) || h_fail "the mount walked $w inodes"
	((n == $1)) || h_fail "the mount counts $n inodes, there are $1"
	n=$(find "$MNT" | wc -l)
	((n == $1)) || h_fail "the file system has $n inodes, expected $1"
}
# orphan NAME [dir]: NAME is written (a directory: made), then removed
# while a holder keeps it open (a directory: as its working directory).
orphan() {
	if [[ ${2:-} == dir ]]; then
		mkdir "$MNT/$1"
		(cd "$MNT/$1" && exec sleep 600) &
		HOLDER=$!
		sleep 0.2
		rmdir "$MNT/$1"
		[[ -e /proc/$HOLDER/cwd ]] || h_fail "the holder has no working directory"
		return
	fi
	dd if=/dev/urandom of="$MNT/$1" bs=64k count=4 status=none
	sleep 600 <"$MNT/$1" &
	HOLDER=$!
	sleep 0.2
	rm "$MNT/$1"
	[[ -e /proc/$HOLDER/fd/0 ]] || h_fail "the holder has no open file"
}
crash() {
	h_crash
	if [[ -n $HOLDER ]]; then
		kill "$HOLDER" 2>/dev/null || true
		wait "$HOLDER" 2>/dev/null || true
		HOLDER=
	fi
}
reclaimed() {
	grep -q "reclaimed 1 orphan inode" "$DAEMON_LOG" ||
		{ h_dump_log; h_fail "the mount did not reclaim the orphan ($1)"; }
}

h_setup 2 512M -O v2
h_mount
for d in 1 2 3 4; do
	mkdir "$MNT/d$d"
	(cd "$MNT/d$d" && for i in $(seq 1 500); do : >"f$i"; done)
done
N=$((1 + 4 + 2000))
h_umount
h_fsck 0 -n "${IMGS[@]}"

h_mount
expect_mount $N
# Creates and deletes in the log only: the replay keeps the count.
mkdir "$MNT/new"
(cd "$MNT/new" && for i in $(seq 1 100); do : >"g$i"; done)
rm "$MNT"/d1/f{1..50}
N=$((N + 1 + 100 - 50))
"$CTL" sync "$MNT" >/dev/null || h_fail "twinfs-ctl sync"
crash
h_mount
expect_mount $N

# An orphan only in the log: its file was checkpointed with a name.
dd if=/dev/urandom of="$MNT/o1" bs=64k count=4 status=none
checkpoint
sleep 600 <"$MNT/o1" &
HOLDER=$!
sleep 0.2
rm "$MNT/o1"
"$CTL" sync "$MNT" >/dev/null || h_fail "twinfs-ctl sync"
crash
h_mount
reclaimed "only in the log"
expect_mount $N
h_umount
h_fsck 0 -n "${IMGS[@]}"

# An orphan a checkpoint wrote (its ORPHAN item), then kill -9: a file,
# then a directory.
for kind in file directory; do
	h_mount
	orphan "o2$kind" "${kind/directory/dir}"
	checkpoint
	crash
	h_fsck 0 -n "${IMGS[@]}"
	grep -q "note: orphan $kind inode" <<<"$FOUT" ||
		{ echo "$FOUT" >&2; h_fail "fsck -n saw no orphan $kind"; }
	h_mount
	reclaimed "ORPHAN item, $kind"
	expect_mount $N
	h_umount
	h_fsck 0 -n "${IMGS[@]}"
done
h_log "PASS"
