#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: 4 KiB O_DIRECT reads (the path that keeps small reads on one
# completion thread, dev_batch.pack) still verify and repair.  Every block
# of a 256-block file garbled on one image or the other (even blocks on
# image 0, odd on image 1), so each block has one good copy and reads
# alternate between the mirrors: 8 concurrent readers of 4 KiB at a time
# get the written bytes, every bad copy a read met is counted and
# rewritten (repaired == csum_errors), a scrub then repairs the rest (none
# unrecoverable), and each image alone (-o degraded) serves the whole file
# right with no checksum error: every bad copy was rewritten.
source "$(dirname "$0")/harness.sh"
: "${CTL:?CTL must name twinfs-ctl}"
BLK_TAG=RDREPAIR
source "$(dirname "$0")/blocklib.sh"
LOG_ALLOW='checksum mismatch|repaired from another mirror|scrub|control request|missing'
NB=256

# Sum of a device counter over the devices (device0.NAME, device1.NAME in
# twinfs-ctl stats; a missing device counts 0).
dev_sum() {
	"$CTL" stats "$MNT" | awk -v k="$1" 'index($1, ".") && substr($1, index($1, ".") + 1) == k ":" &&
		$1 ~ /^device/ { s += $2 } END { print s + 0 }'
}
# readall: 8 readers of the whole file, 4 KiB O_DIRECT reads, each
# compared with what was written.
readall() {
	local pids=() j
	for j in $(seq 0 7); do
		dd if="$MNT/f" of="$T/out.$j" bs=4096 iflag=direct status=none &
		pids+=($!)
	done
	for j in "${!pids[@]}"; do
		wait "${pids[$j]}" || h_fail "reader $j failed"
		cmp -s "$T/f" "$T/out.$j" || h_fail "reader $j read wrong bytes ($1)"
	done
}

h_setup 2 128M
h_mount
mkfile "$T/f" F "$NB"
cp "$T/f" "$MNT/f"
h_umount
# One 1 MiB write: the file's blocks follow its first on each image
# (blk_of for any that does not, a scan of the image).
for i in 0 1; do base[i]=$(blk_of "${IMGS[$i]}" F 0); done
for ((i = 0; i < NB; i++)); do
	img=${IMGS[$((i % 2))]} at=$((base[i % 2] + i))
	tag=$(dd if="$img" bs=4096 skip="$at" count=1 status=none | head -c 16 | tr -d '\0')
	[[ $tag == "$BLK_TAG:F:$(printf %04d "$i"):" ]] || at=$(blk_of "$img" F "$i")
	dd if=/dev/urandom of="$img" bs=4096 seek="$at" count=1 conv=notrunc status=none
done

h_log "==== 8 readers, 4 KiB O_DIRECT, every block bad on one mirror"
h_mount
readall "both mirrors"
csum=$(dev_sum csum_errors) rep=$(dev_sum repaired)
h_log "bad copies met by reads: $csum, repaired: $rep"
((csum > 0)) || h_fail "no read met a bad copy"
((rep == csum)) || h_fail "reads repaired $rep of the $csum bad copies they met"
# Readers that meet one bad copy at once each count it: more than NB.
out=$("$CTL" scrub start "$MNT" --wait) || h_fail "scrub failed: $out"
grep -q "unrecoverable: 0" <<<"$out" || h_fail "unrecoverable blocks: $out"
csum=$(dev_sum csum_errors) rep=$(dev_sum repaired)
((rep == csum)) || h_fail "reads and scrub found $csum bad copies and repaired $rep"
h_umount

# A degraded mount marks the other device stale on its own image: each
# image alone from a copy of the pair as the scrub left it.
for i in 0 1; do cp --sparse=always "${IMGS[$i]}" "$T/alone$i.img"; done
for i in 0 1; do
	h_log "==== image $i alone"
	h_mount "$T/alone$i.img" degraded
	c0=$(dev_sum csum_errors)	# the counters survive remounts
	readall "image $i alone"
	[[ $(dev_sum csum_errors) == "$c0" ]] || h_fail "image $i still has bad copies"
	h_umount
done
echo "rdrepair: all checks passed"
