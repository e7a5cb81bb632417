#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: a device marked stale says why, long after the daemon that
# marked it is gone.  A host file system that runs out of space under a
# sparse image fails that device's write with ENOSPC (seen as "a.img: stale"
# refusing a bench/scale.sh mount, issue 13): here the fault injector gives
# device 0 one ENOSPC data write, then the daemon is killed -9, so only the
# emergency superblock (sbc_persist_stale) records it.  The daemon must log
# the record with the device's path, its own pid and the failures it
# counted; the refused mount must name the superblock that recorded it and
# those counts (before: the emergency superblock kept the last checkpoint's
# counters, all 0, and the refusal said only "stale").  -o degraded mounts
# with the data.  Then what bench/scale.sh's next step would do if a
# daemon were still mounted: its images deleted and new ones made at the
# same paths; it fails the old ones only, the new ones mount in sync.
source "$(dirname "$0")/harness.sh"

LOG_ALLOW='device failed|write error'

# 128 MiB images: the data area starts at block 16 + 4096 (FORMAT.md).
h_setup 2 128M
data_off=$(((16 + 4096) * 4096))
h_mount "" "fault=dev=0\\,op=write\\,off=$data_off\\,len=67108864\\,kind=error\\,err=28\\,count=1"
pid=$DAEMON_PID
head -c 1M /dev/urandom >"$T/data"
dd if="$T/data" of="$MNT/f" bs=1M oflag=direct conv=fsync status=none ||
	h_fail "the write failed although device 1 took it"
grep -q "disk0.img: device failed (No space left on device)" "$DAEMON_LOG" ||
	{ h_dump_log; h_fail "device 0 did not fail on ENOSPC"; }
line=$(grep "disk0.img: recorded stale in superblock generation" "$DAEMON_LOG") ||
	{ h_dump_log; h_fail "no log line records device 0 stale"; }
h_log "$line"
[[ $line == *" by pid $pid (failed; 1 write, 0 flush, 0 read failures counted)" ]] ||
	h_fail "the stale record does not name pid $pid and the one write failure: $line"
h_crash

h_mount_fails "$(h_devspec "${IMGS[@]}")"
h_log "$FAIL_OUT"
grep -qE "disk0.img: stale \(it missed writes while failed or missing; superblock generation [0-9]+ on [^ ]*disk1.img records it, with 1 write, 0 flush and 0 read failures counted\)" <<<"$FAIL_OUT" ||
	h_fail "the refusal does not say which superblock recorded device 0 stale and why: $FAIL_OUT"

h_mount "" "degraded"
cmp "$T/data" "$MNT/f" || h_fail "the data written while device 0 failed differs"
h_umount

# ---- a daemon still mounted while its image paths are reused -------------
# bench/scale.sh deletes a step's images and makes the next step's at the
# same paths.  A daemon still running on the old ones must fail only them
# (through its descriptors), never record anything in the new file system.
h_log "a daemon on deleted images, new ones at the same paths"
old_pid=
trap 'rc=$?; [[ -z $old_pid ]] || { kill -9 "$old_pid"; umount -l "$T/old"; } 2>/dev/null; (exit $rc); h_cleanup' EXIT
h_setup 2 128M
mkdir -p "$T/old"
"$TWINFS" -f "$(h_devspec "${IMGS[@]}")" "$T/old" -o commit=200 >"$T/old.log" 2>&1 &
old_pid=$!
for ((i = 0; i < 200; i++)); do
	h_is_mounted "$T/old" && break
	sleep 0.05
done
h_is_mounted "$T/old" || { cat "$T/old.log" >&2; h_fail "the first daemon did not mount"; }
head -c 1M /dev/urandom >"$T/old/f"
sync -f "$T/old/f"
rm -f "${IMGS[@]}"
h_setup 2 128M
for ((i = 0; i < 200; i++)); do
	[[ $(grep -c "image file was deleted" "$T/old.log") == 2 ]] && break
	sleep 0.05
done
[[ $(grep -c "image file was deleted" "$T/old.log") == 2 ]] ||
	{ cat "$T/old.log" >&2; h_fail "the first daemon did not fail both deleted images"; }
h_mount "" ""	# not -o degraded: both new images must be in sync
cp "$T/data" "$MNT/g"
h_umount
fusermount3 -u "$T/old"
wait "$old_pid" || true	# its final checkpoint has no device left
old_pid=
h_mount "" ""
cmp "$T/data" "$MNT/g" || h_fail "the new file system lost g"
h_umount
echo "stalewhy: the stale record names pid, path and failures; the refusal quotes them;" \
	"a daemon on deleted images leaves the new ones at the same paths alone"
