#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: fstrim(8) on a mounted twinfs.  The kernel forwards FITRIM
# to the daemon (ctl.c), which runs its trim and waits for it: on a
# nodiscard mount, right after rm of a 64 MiB file, `fstrim -v` must say
# it trimmed at least that much and both images must shrink by it (punched
# holes), but no more than the file system's size; another file must read
# back intact, and fsck must be clean.  A range shorter than a block,
# past the end or with minlen past it is EINVAL.  A user other than the
# mounter or root gets EPERM.
source "$(dirname "$0")/harness.sh"

command -v fstrim >/dev/null || h_skip "fstrim missing"
command -v setpriv >/dev/null || h_skip "setpriv missing"
h_setup 2 512M
chmod 0755 "$T"
h_mount "" nodiscard,allow_other
chmod 0777 "$MNT"
alloc_kib() { du -k "$1" | cut -f1; }
head -c 8M /dev/urandom >"$MNT/keep"
sum=$(sha256sum <"$MNT/keep")
head -c 64M /dev/urandom >"$MNT/big"
sync -f "$MNT"
before=($(alloc_kib "${IMGS[0]}") $(alloc_kib "${IMGS[1]}"))
rm "$MNT/big"

if out=$(setpriv --reuid=65534 --regid=65534 --clear-groups fstrim "$MNT" 2>&1); then
	h_fail "fstrim by uid 65534 succeeded: $out"
fi
[[ $out == *"not permitted"* ]] || h_fail "fstrim by uid 65534: '$out', expected EPERM"

out=$(fstrim -v "$MNT") || h_fail "fstrim failed: $out"
h_log "$out"
bytes=$(sed -n 's/.*(\([0-9]*\) bytes) trimmed.*/\1/p' <<<"$out")
[[ -n $bytes ]] || h_fail "fstrim -v printed no byte count: $out"
((bytes >= 64 << 20)) || h_fail "fstrim trimmed $bytes bytes, less than the 64 MiB just deleted"
size=$(($(stat -f -c '%b * %S' "$MNT")))
((bytes <= size)) || h_fail "fstrim said $bytes bytes trimmed, more than the file system's $size"
# Ranges ext4 and XFS refuse (xfstests generic/260, 288).
for a in "-l 0" "-l 2048" "-o $size" "-m $((size + 4096))"; do
	# shellcheck disable=SC2086  # $a is two words
	if out=$(fstrim $a "$MNT" 2>&1); then
		h_fail "fstrim $a succeeded: $out"
	fi
	[[ $out == *"Invalid argument"* ]] || h_fail "fstrim $a: '$out', expected EINVAL"
done
for i in 0 1; do
	after=$(alloc_kib "${IMGS[$i]}")
	h_log "${IMGS[$i]}: ${before[$i]} KiB allocated before, $after after"
	((before[i] - after >= 60 << 10)) ||
		h_fail "${IMGS[$i]} shrank by $((before[i] - after)) KiB, not the 64 MiB deleted"
done
[[ $(sha256sum <"$MNT/keep") == "$sum" ]] || h_fail "keep changed after fstrim"
h_umount
h_fsck 0 -n "${IMGS[@]}"
h_mount
[[ $(sha256sum <"$MNT/keep") == "$sum" ]] || h_fail "keep changed after remount"
h_umount
echo "fstrim: $bytes bytes trimmed through FITRIM, both images shrank, data intact"
