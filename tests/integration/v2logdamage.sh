#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: format v2: fsck.twinfs reads the metadata log after the
# checkpoint as mount replays it.  After kill -9 with fsynced writes in the
# log, fsck -n is clean and counts the log's records (-v); one bit flipped
# in the same log chunk on both images: mount refuses with one line, and
# fsck -n no longer says clean (exit 4, the damaged chunk named) -- before
# this it checked the checkpoint's trees only and exited 0.  -o rescue then
# mounts read-only without writing a byte.  fsck -y accepts the loss as on
# format 1 (it could not before: exit 4, and only -o rescue mounted): it
# says which transactions it drops, cuts the log there (exit 1), a second
# -n is clean, the file system mounts, and fsynced writes after it survive
# a kill.  The same with the damage in the middle of the log: every file
# fsynced before the damaged chunk is there after -y and a mount, none
# after it.
source "$(dirname "$0")/harness.sh"

h_need_fsck

sb_u64() {	# IMG SLOT OFFSET: a superblock field (docs/FORMAT.md)
	od -An -t u8 -j $(($2 * 4096 + $3)) -N 8 "$1" | tr -d ' '
}
newest_slot() {
	if (($(sb_u64 "$1" 0 296) > $(sb_u64 "$1" 1 296))); then echo 0; else echo 1; fi
}
u32_at() {	# IMG BYTE_OFFSET
	od -An -t u4 -j "$2" -N 4 "$1" | tr -d ' '
}
u64_at() {	# IMG BYTE_OFFSET
	od -An -t u8 -j "$2" -N 8 "$1" | tr -d ' '
}
# log_end IMG: where the next chunk after the last valid one goes (region
# block), following the chunk headers from the newest superblock's head
# (docs/FORMAT.md "Log"; checksums not checked: the log is intact here).
log_end() {
	local img=$1 slot pos seq id b nb
	slot=$(newest_slot "$img")
	pos=$(sb_u64 "$img" "$slot" 344)
	seq=$(sb_u64 "$img" "$slot" 352)
	id=$(sb_u64 "$img" "$slot" 360)
	while :; do
		b=$(((16 + pos) * 4096))
		if [[ $(head -c $((b + 8)) "$img" | tail -c 8 | tr -d '\0') != TFSLOG1 ||
			$(u64_at "$img" $((b + 8))) != "$id" || $(u64_at "$img" $((b + 24))) != "$seq" ]]; then
			break
		fi
		nb=$(u32_at "$img" $((b + 44)))
		seq=$(($(u64_at "$img" $((b + 32))) + 1))
		pos=$((pos + nb))
	done
	echo "$pos"
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
MOUNT_OPTS=""

# -y accepts the loss and says what it drops; the old log's later chunks
# must not be taken for damage again once the new log reaches them.
h_fsck 1 -y "${IMGS[@]}"
echo "$FOUT"
grep -q "metadata damaged on every device: metadata log chunk.*: fixing" <<<"$FOUT" ||
	h_fail "fsck -y does not report the damaged chunk as fixed: $FOUT"
grep -qE "^log: cutting the log there drops transactions [0-9]+ to [0-9]+ \([1-9][0-9]* acknowledged transactions lost" <<<"$FOUT" ||
	h_fail "fsck -y does not say what it drops: $FOUT"
h_fsck 0 -n "${IMGS[@]}"
h_mount
[[ -f $MNT/f16 ]] && h_fail "a file fsynced after the damaged chunk is back after fsck -y"
for i in $(seq 1 24); do
	head -c $((i * 3000)) /dev/urandom | dd of="$MNT/g$i" bs=64k conv=fsync status=none
done
h_crash
h_fsck 0 -n "${IMGS[@]}"
h_mount
[[ -f $MNT/g24 ]] || h_fail "fsynced file lost after fsck -y and a kill"
h_umount
h_fsck 0 -n "${IMGS[@]}"

# The damage in the middle of the log: what was fsynced before it stays.
h_setup 2 128M -O v2
h_mount
mkdir "$MNT/d"
for i in $(seq 1 8); do
	head -c $((i * 5000)) /dev/urandom | dd of="$MNT/d/a$i" bs=64k conv=fsync status=none
done
(cd "$MNT/d" && sha256sum a*) >"$T/sums"
slot0=$(newest_slot "${IMGS[0]}")
gen0=$(sb_u64 "${IMGS[0]}" "$slot0" 296)
mid=$(log_end "${IMGS[0]}")
for i in $(seq 1 8); do
	head -c $((i * 5000)) /dev/urandom | dd of="$MNT/d/b$i" bs=64k conv=fsync status=none
done
h_crash
[[ $(sb_u64 "${IMGS[0]}" "$(newest_slot "${IMGS[0]}")" 296) == "$gen0" ]] ||
	h_fail "a checkpoint ran during the writes: the log head moved"
(($(log_end "${IMGS[0]}") > mid)) || h_fail "no chunk after block $mid of the log"
h_log "the first chunk after the a files (log block $mid) damaged on both images"
for img in "${IMGS[@]}"; do flip_bit "$img" $(((16 + mid) * 4096 + 64 + 40)); done
h_mount_fails "$(h_devspec "${IMGS[@]}")"
h_expect_one_line "$FAIL_OUT" "log chunk" "mount with the log damaged in its middle"
h_fsck 4 -n "${IMGS[@]}"
grep -q "^log: accepting the loss (fsck.twinfs -y) drops transactions" <<<"$FOUT" ||
	h_fail "fsck -n does not say what -y would drop: $FOUT"
h_fsck 4 -p "${IMGS[@]}"
h_fsck 1 -y "${IMGS[@]}"
h_fsck 0 -n "${IMGS[@]}"
h_mount
(cd "$MNT/d" && sha256sum --quiet -c "$T/sums") || h_fail "files fsynced before the damage differ"
[[ -e $MNT/d/b8 ]] && h_fail "a file fsynced after the damaged chunk is back"
h_umount
h_fsck 0 -n "${IMGS[@]}"
h_log "v2: fsck -y cut the log at the damaged chunk; what came before it mounts"
