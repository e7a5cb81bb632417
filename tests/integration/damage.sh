#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: metadata damaged on every image is never silent, and
# open-but-deleted files are orphans only after a crash.  With fsynced
# writes in the log (daemon killed with kill -9), one bit flipped at the same
# offset of a log chunk on both images; superblock slot 0 damaged on both
# images of a cleanly unmounted fs; the same two metadata blocks (newest
# superblock and first log chunk, or the checkpoint's two blocks) randomized
# on both images: mount refuses with one line, fsck -n exits 4, and
# -o rescue mounts read-only what is left without writing a byte.  Hundreds
# of files deleted while open: after a crash fsck -n notes them (exit 0) and
# the next mount reclaims them and says so; a clean unmount (their holder
# closing them just before, or killed right before) leaves none.
# Format 1 pinned (TWINFS_FORMAT=v1): the offsets poked (log chunk after
# the checkpoint, checkpoint blocks) and fsck's answers are v1's; format
# 2's damaged log, -y included, is v2logdamage.sh's.
TWINFS_FORMAT=v1
source "$(dirname "$0")/harness.sh"

h_need_fsck

# sb_u64 IMG SLOT OFFSET: a superblock field (docs/FORMAT.md).
sb_u64() {
	od -An -t u8 -j $(($2 * 4096 + $3)) -N 8 "$1" | tr -d ' '
}
# The slot holding the newest generation.
newest_slot() {
	if (($(sb_u64 "$1" 0 296) > $(sb_u64 "$1" 1 296))); then echo 0; else echo 1; fi
}
flip_bit() {	# IMG BYTE_OFFSET
	local b
	b=$(od -An -t u1 -j "$2" -N 1 "$1" | tr -d ' ')
	printf "$(printf '\\%03o' $((b ^ 0x10)))" |
		dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}
garble() {	# IMG BLOCK [COUNT]
	dd if=/dev/urandom of="$1" bs=4096 seek="$2" count="${3:-1}" conv=notrunc status=none
}
# Mount must refuse with one line naming WHAT and the way out.
expect_refused() {
	h_mount_fails "$(h_devspec "${IMGS[@]}")"
	h_expect_one_line "$FAIL_OUT" "$1" "$2"
	grep -qF "rescue" <<<"$FAIL_OUT" || h_fail "$2: the error does not name -o rescue"
	grep -qF "fsck.twinfs" <<<"$FAIL_OUT" || h_fail "$2: the error does not name fsck"
}
# -o rescue: read-only, loud, and not one byte written to the images.
rescue_mount() {
	local before
	before=$(h_sums "${IMGS[@]}")
	h_mount "" rescue
	grep -q "RESCUE MOUNT, READ-ONLY" "$DAEMON_LOG" || h_fail "$1: rescue mount is not loud"
	if touch "$MNT/new" 2>/dev/null; then h_fail "$1: rescue mount is writable"; fi
}
rescue_umount() {
	local before=$1
	h_umount
	[[ $(h_sums "${IMGS[@]}") == "$before" ]] || h_fail "$2: the rescue mount wrote to the images"
	MOUNT_OPTS=""
}

# ---- 2a: a log chunk damaged on both images, fsynced transactions after it --
h_setup 2 128M
h_mount
head -c 200000 /dev/urandom >"$MNT/base"
for i in $(seq 1 16); do
	head -c $((i * 3000)) /dev/urandom | dd of="$MNT/f$i" bs=64k conv=fsync status=none
done
printf 'pwrite' | dd of="$MNT/base" bs=1 seek=4096 conv=notrunc,fsync status=none
h_crash
slot=$(newest_slot "${IMGS[0]}")
head_pos=$(sb_u64 "${IMGS[0]}" "$slot" 344)
# The first chunk after the mount's checkpoint (log region from block 16),
# a payload byte: many chunks follow it.
off=$(((16 + head_pos) * 4096 + 64 + 40))
for img in "${IMGS[@]}"; do flip_bit "$img" "$off"; done
expect_refused "log chunk" "log damaged on both images"
h_fsck 4 -n "${IMGS[@]}"
grep -q "metadata damaged on every device: metadata log chunk" <<<"$FOUT" ||
	h_fail "fsck -n does not report the damaged log chunk: $FOUT"
sums=$(h_sums "${IMGS[@]}")
rescue_mount "log damage"
[[ -f $MNT/base ]] && h_fail "rescue mount shows a file created after the damaged chunk"
rescue_umount "$sums" "log damage"
# -y accepts the loss; the old log's later chunks must not be taken for
# damage again once the new log reaches them (fsynced writes, then a kill).
h_fsck 1 -y "${IMGS[@]}"
h_fsck 0 -n "${IMGS[@]}"
h_mount
for i in $(seq 1 24); do
	head -c $((i * 3000)) /dev/urandom | dd of="$MNT/g$i" bs=64k conv=fsync status=none
done
h_crash
h_fsck 0 -n "${IMGS[@]}"
h_mount
[[ -f $MNT/g24 ]] || h_fail "fsynced file lost after fsck -y and a kill"
h_umount

# ---- 2b: superblock slot 0 damaged on both images of a clean fs ------------
h_setup 2 128M
h_mount
mkdir "$MNT/d"
for i in $(seq 1 20); do head -c $((i * 5000)) /dev/urandom >"$MNT/d/f$i"; done
(cd "$MNT" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$T/sums"
h_umount
cp "${IMGS[0]}" "$T/clean0.img"
cp "${IMGS[1]}" "$T/clean1.img"
for img in "${IMGS[@]}"; do garble "$img" 0; done
expect_refused "superblock slot 0 is damaged on every device" "superblock slot 0"
h_fsck 4 -n "${IMGS[@]}"
grep -q "newest superblock generation may be lost" <<<"$FOUT" ||
	h_fail "fsck -n does not report the lost superblock: $FOUT"
sums=$(h_sums "${IMGS[@]}")
rescue_mount "superblock damage"
(cd "$MNT" && sha256sum --quiet -c "$T/sums") || h_fail "rescue mount: files differ"
rescue_umount "$sums" "superblock damage"
# -y accepts what is left and writes it as the new state.
h_fsck 1 -y "${IMGS[@]}"
h_fsck 0 -n "${IMGS[@]}"
h_mount
(cd "$MNT" && sha256sum --quiet -c "$T/sums") || h_fail "files differ after fsck -y"
h_umount

# ---- 2b': the newest superblock of a later mount, whose log went on --------
h_mount
for i in $(seq 1 8); do
	head -c $((i * 3000)) /dev/urandom | dd of="$MNT/d/late$i" bs=64k conv=fsync status=none
done
h_crash
slot=$(newest_slot "${IMGS[0]}")
for img in "${IMGS[@]}"; do garble "$img" "$slot"; done
expect_refused "superblock slot $slot is damaged on every device" "later mount's superblock"
h_fsck 4 -n "${IMGS[@]}"
h_fsck 1 -y "${IMGS[@]}"
h_fsck 0 -n "${IMGS[@]}"
h_mount
(cd "$MNT" && sha256sum --quiet -c "$T/sums") || h_fail "files differ after fsck -y"
h_umount

# ---- 2c: the same two metadata blocks randomized on both images ------------
# The newest superblock and the log chunk the older one starts from: mount
# used to fall back to the first checkpoint (root only) without a word.
cp "$T/clean0.img" "${IMGS[0]}"
cp "$T/clean1.img" "${IMGS[1]}"
slot=$(newest_slot "${IMGS[0]}")
old_head=$(sb_u64 "${IMGS[0]}" $((1 - slot)) 344)
for img in "${IMGS[@]}"; do
	garble "$img" "$slot"
	garble "$img" $((16 + old_head))
done
expect_refused "superblock slot $slot is damaged on every device" "two metadata blocks"
h_fsck 4 -n "${IMGS[@]}"
# The checkpoint's two blocks (table and payload).
cp "$T/clean0.img" "${IMGS[0]}"
cp "$T/clean1.img" "${IMGS[1]}"
slot=$(newest_slot "${IMGS[0]}")
ck=$(sb_u64 "${IMGS[0]}" "$slot" 304)
for img in "${IMGS[@]}"; do garble "$img" "$ck" 2; done
expect_refused "checkpoint is damaged on every device" "checkpoint blocks"
h_fsck 4 -n "${IMGS[@]}"
# The previous checkpoint and the log after it still hold every file.
sums=$(h_sums "${IMGS[@]}")
rescue_mount "checkpoint damage"
(cd "$MNT" && sha256sum --quiet -c "$T/sums") || h_fail "rescue from the previous checkpoint: files differ"
rescue_umount "$sums" "checkpoint damage"

# ---- 8 and 17: files deleted while open ------------------------------------
# holder DIR N: opens N files, deletes them, keeps them open until TERM
# (closes them, then exits) or KILL.  One rm for all of them: a fork per
# file is what makes it slow on a loaded machine.
holder() {
	local dir=$1 n=$2 i fd
	local -a fds=() names=()
	trap 'for fd in "${fds[@]}"; do exec {fd}>&-; done; exit 0' TERM
	for ((i = 0; i < n; i++)); do
		exec {fd}<>"$dir/open$i"
		fds+=("$fd")
		names+=("$dir/open$i")
		printf '%s' "some bytes to give it a block" >&"$fd"
	done
	rm "${names[@]}"
	touch "$T/held"
	while :; do sleep 0.1; done
}
# start_holder N: wait until the holder has done so, as long as it runs
# (the bound only catches a hang: 400 opens take seconds at load 20).
start_holder() {
	rm -f "$T/held"
	holder "$MNT" "$1" &
	HOLDER=$!
	for ((i = 0; i < 1200; i++)); do
		[[ -f $T/held ]] && return 0
		kill -0 "$HOLDER" 2>/dev/null || h_fail "the holder exited before opening its files"
		sleep 0.1
	done
	h_fail "the holder did not open its $1 files within 120 s"
}
expect_no_orphans() {
	h_fsck 0 -n "${IMGS[@]}"
	if grep -q "orphan" <<<"$FOUT"; then
		h_fail "$1: $(grep -c orphan <<<"$FOUT") orphans on a cleanly unmounted fs"
	fi
}

h_setup 2 128M
ulimit -n 4096
# closed just before the unmount
h_mount
start_holder 400
kill -TERM "$HOLDER"
wait "$HOLDER" || true
h_umount
expect_no_orphans "closed before unmount"
# still open: the holder killed right before the unmount
h_mount
start_holder 400
kill -9 "$HOLDER"
wait "$HOLDER" 2>/dev/null || true
h_umount
expect_no_orphans "holder killed before unmount"
# a crash while they are open: orphans are crash state, not errors
h_mount
start_holder 300
echo anchor >"$MNT/anchor"
sync "$MNT/anchor"	# fsync commits the whole log (syncfs may not reach FUSE)
h_crash
kill -9 "$HOLDER"
wait "$HOLDER" 2>/dev/null || true
h_fsck 0 -n "${IMGS[@]}"
n=$(grep -c "note: orphan file inode" <<<"$FOUT" || true)
((n == 300)) || h_fail "fsck -n noted $n orphans, expected 300: $(tail -n 3 <<<"$FOUT")"
grep -q "^0 errors found" <<<"$FOUT" || h_fail "fsck -n calls orphans errors: $(tail -n 1 <<<"$FOUT")"
h_mount
n=$(grep -c "reclaimed 300 orphan inodes" "$DAEMON_LOG" || true)
((n == 1)) || { h_dump_log; h_fail "mount did not say once what it reclaimed"; }
h_umount
expect_no_orphans "after the reclaiming mount"
echo "damage: refused, reported and rescued in every case; orphans only after a crash"
