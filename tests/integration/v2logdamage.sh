#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: format v2: fsck.twinfs reads the metadata log after the
# checkpoint as mount replays it.  After kill -9 with fsynced writes in the
# log, fsck -n is clean and counts the log's records (-v); one bit flipped
# in the same log chunk on both images: mount refuses with one line, and
# fsck -n no longer says clean (exit 4, the damaged chunk named) -- before
# this it checked the checkpoint's trees only and exited 0.  -o rescue then
# mounts read-only without writing a byte.
source "$(dirname "$0")/harness.sh"

h_need_fsck

sb_u64() {	# IMG SLOT OFFSET: a superblock field (docs/FORMAT.md)
	od -An -t u8 -j $(($2 * 4096 + $3)) -N 8 "$1" | tr -d ' '
}
newest_slot() {
	if (($(sb_u64 "$1" 0 296) > $(sb_u64 "$1" 1 296))); then echo 0; else echo 1; fi
}
flip_bit() {	# IMG BYTE_OFFSET
	local b
	b=$(od -An -t u1 -j "$2" -N 1 "$1" | tr -d ' ')
	printf "$(printf '\\%03o' $((b ^ 0x10)))" |
		dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

h_setup 2 128M -O v2
h_mount
head -c 200000 /dev/urandom >"$MNT/base"
for i in $(seq 1 16); do
	head -c $((i * 3000)) /dev/urandom | dd of="$MNT/f$i" bs=64k conv=fsync status=none
done
h_crash

h_fsck 0 -n -v "${IMGS[@]}"
n=$(sed -n 's/^log: \([0-9]*\) records after the checkpoint$/\1/p' <<<"$FOUT")
((${n:-0} > 0)) || h_fail "fsck -v counts no log records after a crash: $FOUT"

slot=$(newest_slot "${IMGS[0]}")
head_pos=$(sb_u64 "${IMGS[0]}" "$slot" 344)
# The first chunk after the checkpoint (log region from block 16), a
# payload byte: many chunks follow it.
off=$(((16 + head_pos) * 4096 + 64 + 40))
for img in "${IMGS[@]}"; do flip_bit "$img" "$off"; done

h_mount_fails "$(h_devspec "${IMGS[@]}")"
h_expect_one_line "$FAIL_OUT" "log chunk" "mount with the log damaged on both images"
h_fsck 4 -n "${IMGS[@]}"
grep -q "metadata damaged on every device: metadata log chunk" <<<"$FOUT" ||
	h_fail "fsck -n does not report the damaged log chunk: $FOUT"

sums=$(h_sums "${IMGS[@]}")
h_mount "" rescue
grep -q "RESCUE MOUNT, READ-ONLY" "$DAEMON_LOG" || h_fail "rescue mount is not loud"
[[ -f $MNT/f16 ]] && h_fail "rescue mount shows a file fsynced after the damaged chunk"
h_umount
[[ $(h_sums "${IMGS[@]}") == "$sums" ]] || h_fail "the rescue mount wrote to the images"
h_log "v2: a log chunk damaged on both images is refused by mount and reported by fsck"
