#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: format v2 gives freed tree nodes back to the devices.  A
# 2-mirror v2 fs on 2 GiB image files (64 MiB node area), a 48 MiB file,
# then rounds of random 4k overwrites each followed by a checkpoint: every
# checkpoint writes new copy-on-write nodes further round the node area, and
# without node discard both images grew by one round's nodes every round.
# With discard the images stay within a bound of what they held after the
# first rounds, and status counts discard.meta_bytes; with -o nodiscard
# they grow until `twinfs-ctl trim --wait` gives the node area back.  The
# fallback survives it: the newest superblock slot damaged on both images
# after a clean unmount, fsck -n finds every node of the older slot's
# trees intact (only the lost superblock reported), -o rescue reads every
# file from them, fsck -y accepts it and a normal mount reads them again.
source "$(dirname "$0")/harness.sh"
: "${CTL:?CTL must name the twinfs-ctl binary}"
h_need_fsck

ROUNDS=${ROUNDS:-30}
alloc_bytes() { stat -c '%b %B' "$1" | awk '{ print $1 * $2 }'; }
mib() { echo $(($1 >> 20)); }
sb_u64() { od -An -t u8 -j $(($2 * 4096 + $3)) -N 8 "$1" | tr -d ' '; }
newest_slot() {
	if (($(sb_u64 "$1" 0 296) > $(sb_u64 "$1" 1 296))); then echo 0; else echo 1; fi
}
stat_num() {	# KEY: a number from the discard object of status --json
	"$CTL" status "$MNT" --json | tr -d ' \n' | grep -o "\"$1\":[0-9]*" | head -n 1 | cut -d: -f2
}
# overwrite N SEED: N random 4k blocks of $MNT/d/big, then a checkpoint.
overwrite() {
	python3 - "$MNT/d/big" "$1" "$2" <<'EOF'
import os, random, sys
path, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rnd = random.Random(seed)
fd = os.open(path, os.O_RDWR)
blocks = os.fstat(fd).st_size // 4096
for _ in range(n):
    os.pwrite(fd, rnd.randbytes(4096), rnd.randrange(blocks) * 4096)
os.fsync(fd)
os.close(fd)
EOF
	[[ ${3:-} == nockpt ]] ||
		"$CTL" raw "$MNT" checkpoint >/dev/null || h_fail "twinfs-ctl checkpoint failed"
}
# Wait until no node discard is queued or held (at most 10 s).
settle() {
	local i
	for ((i = 0; i < 100; i++)); do
		# (a build without node discard has neither counter: 0)
		[[ $(stat_num meta_queued_bytes) == 0 && $(stat_num meta_held_bytes) == 0 ]] && return 0
		[[ -z $(stat_num meta_queued_bytes) ]] && return 0
		sleep 0.1
	done
	h_fail "node discards still queued after 10 s"
}
images() { echo $(($(alloc_bytes "${IMGS[0]}") + $(alloc_bytes "${IMGS[1]}"))); }

# churn MODE: mount, write the file, ROUNDS rounds; GROW: bytes both images
# gained over the last ROUNDS - 5 rounds (the first five build the trees).
churn() {
	local mode=$1 r before
	h_setup 2 2G -O v2
	h_mount "" "$mode"
	mkdir "$MNT/d"
	head -c $((48 << 20)) /dev/urandom >"$MNT/d/big"
	for i in 1 2 3 4 5; do head -c $((i * 7000)) /dev/urandom >"$MNT/d/f$i"; done
	"$CTL" raw "$MNT" checkpoint >/dev/null
	for ((r = 0; r < ROUNDS; r++)); do
		overwrite 400 "$r"
		if ((r == 4)); then
			[[ $mode == nodiscard ]] || settle
			before=$(images)
		fi
	done
	[[ $mode == nodiscard ]] || settle
	GROW=$(($(images) - before))
	h_log "$mode: both images grew by $(mib "$GROW") MiB over $((ROUNDS - 5)) rounds"
}

# ---- discard: the images stay bounded ---------------------------------------
churn discard
g_dis=$GROW
# Each round writes about 2 MiB of nodes per image: without node discard
# the images gain that every round; with it, at most a few rounds' worth.
((GROW < 12 << 20)) || h_fail "with discard the images grew by $(mib "$GROW") MiB"
meta=$(stat_num meta_bytes)
h_log "discard.meta_bytes $(mib "${meta:-0}") MiB"
((${meta:-0} > 0)) || h_fail "status shows no metadata discarded"
"$CTL" status "$MNT" | grep -q "of metadata discarded" || h_fail "status does not show meta discards"
# Changes the unmount's checkpoint writes: it frees nodes of the tree the
# last checkpoint wrote, which the older slot names after the unmount.
overwrite 400 1000 nockpt
(cd "$MNT" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$T/sums"
h_umount

# ---- the fallback: the older superblock's trees are whole ----------------
slot=$(newest_slot "${IMGS[0]}")
for img in "${IMGS[@]}"; do
	dd if=/dev/urandom of="$img" bs=4096 seek="$slot" count=1 conv=notrunc status=none
done
h_fsck 4 -n "${IMGS[@]}"
h_log "fsck -n: $(tr '\n' ' ' <<<"$FOUT")"
grep -q "superblock slot $slot" <<<"$FOUT" ||
	h_fail "fsck -n does not report the lost superblock: $FOUT"
if grep -Eq "bad node|no copy holds intact|unrecoverable" <<<"$FOUT"; then
	h_fail "fsck -n finds nodes of the fallback damaged: $FOUT"
fi
sums=$(h_sums "${IMGS[@]}")
h_mount "" rescue
(cd "$MNT" && sha256sum --quiet -c "$T/sums") || h_fail "rescue mount: files differ"
h_umount
MOUNT_OPTS=""
[[ $(h_sums "${IMGS[@]}") == "$sums" ]] || h_fail "the rescue mount wrote to the images"
h_fsck 1 -y "${IMGS[@]}"
h_fsck 0 -n "${IMGS[@]}"
h_mount
(cd "$MNT" && sha256sum --quiet -c "$T/sums") || h_fail "files differ after fsck -y"
h_umount

# ---- nodiscard: the images grow until a trim --------------------------------
churn nodiscard
g_nod=$GROW
((g_nod > 2 * (12 << 20))) ||
	h_log "note: without discard the images grew by only $(mib "$g_nod") MiB"
b=$(images)
out=$("$CTL" trim "$MNT" --wait) || h_fail "twinfs-ctl trim failed: $out"
a=$(images)
h_log "trim: images $(mib "$b") -> $(mib "$a") MiB; $(tail -n 1 <<<"$out")"
meta=$(stat_num meta_bytes)
((meta > 0)) || h_fail "trim discarded no metadata"
((b - a > g_nod / 2)) || h_fail "trim gave back only $(mib $((b - a))) of $(mib "$g_nod") MiB"
(cd "$MNT/d" && sha256sum big >"$T/bigsum")
h_remount
(cd "$MNT/d" && sha256sum --quiet -c "$T/bigsum") || h_fail "the file differs after trim + remount"
h_umount
h_fsck 0 -n "${IMGS[@]}"
echo "v2discard: over $((ROUNDS - 5)) rounds the images grew by $(mib "$g_dis") MiB with discard," \
	"$(mib "$g_nod") MiB without; the fallback's trees intact; trim gave the node area back"
