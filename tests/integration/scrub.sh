#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Description: Self-healing through the real mount and twinfs-ctl: destroy about a tenth
# of the used data area of one image with random garbage while unmounted,
# mount, read every file back correctly, watch a scrub repair the rest,
# see the counts in `twinfs-ctl status`, a second scrub finds nothing, and
# the damaged image alone then serves every file.  Then: the control
# channel refuses other users (EPERM) and non-twinfs directories (ENOTTY),
# and the fault backend's corrupted reads are repaired online.
set -euo pipefail
# Lines this test provokes on purpose.
LOG_ALLOW='checksum mismatch|repaired from another mirror|scrub|control request|missing'
source "$(dirname "$0")/harness.sh"
: "${CTL:?CTL must name twinfs-ctl}"


ctl() { "$CTL" "$@"; }
json_num() {	# json_num KEY < json: first numeric value of "KEY"
	grep -o "\"$1\":[0-9.e+-]*" | head -n 1 | cut -d: -f2
}
# Sum of a device counter over the devices, from status --json.
dev_sum() {
	ctl status "$MNT" --json | sed 's/.*"devices":\[\([^]]*\)\].*/\1/' |
		grep -o "\"$1\":[0-9]*" | cut -d: -f2 | paste -sd+ | bc
}

h_setup 2 256M

# ---- files ---------------------------------------------------------------
h_mount
mkdir -p "$MNT/dir/sub"
RANDOM=4242
for i in $(seq 1 24); do
	kb=$((RANDOM % 3000 + 1))
	case $((i % 3)) in
	0) f=$MNT/f$i ;;
	1) f=$MNT/dir/f$i ;;
	2) f=$MNT/dir/sub/f$i ;;
	esac
	head -c $((kb * 1024 + RANDOM % 4096)) /dev/urandom >"$f"
done
(cd "$MNT" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$T/sums"
used=$(ctl status "$MNT" --json | json_num used_bytes)
h_umount

# ---- destroy ~10% of the used data area of image 1 -----------------------
# Layout (docs/FORMAT.md): data_start = 16 + clamp(blocks / 32, 4096, 65536).
blocks=$(($(stat -c %s "${IMGS[1]}") / 4096))
logb=$((blocks / 32))
((logb < 4096)) && logb=4096
((logb > 65536)) && logb=65536
data_start=$((16 + logb))
span=$((used / 4096 + 64))
target=$((span / 10))
done_blocks=0
while ((done_blocks < target)); do
	n=$((RANDOM % 16 + 1))
	at=$((data_start + (RANDOM * 32768 + RANDOM) % span))
	dd if=/dev/urandom of="${IMGS[1]}" bs=4096 seek="$at" count="$n" conv=notrunc \
		status=none
	done_blocks=$((done_blocks + n))
done
h_log "overwrote $done_blocks blocks of ${IMGS[1]} (span $span blocks from $data_start)"

# ---- every file reads back right -------------------------------------------
h_mount
(cd "$MNT" && sha256sum --quiet -c "$T/sums") || h_fail "files differ after corruption"
before=$(dev_sum csum_errors)
h_log "checksum mismatches met by reads: $before"

# ---- scrub -----------------------------------------------------------------
out=$(ctl scrub start "$MNT" --wait) || h_fail "scrub failed: $out"
echo "$out"
grep -q "scrub finished" <<<"$out" || h_fail "no summary: $out"
grep -q "unrecoverable: 0" <<<"$out" || h_fail "unrecoverable blocks: $out"
st=$(ctl status "$MNT")
echo "$st"
grep -q "HEALTHY" <<<"$st" || h_fail "not healthy"
csum=$(dev_sum csum_errors)
rep=$(dev_sum repaired)
unrec=$(dev_sum unrecoverable)
((csum > 0)) || h_fail "no checksum errors counted"
((rep == csum)) || h_fail "repaired $rep of $csum bad copies"
((unrec == 0)) || h_fail "unrecoverable $unrec"

# The second pass finds nothing; JSON output is one document per line.
js=$(ctl scrub start "$MNT" --wait --json | tail -n 1)
[[ $(json_num csum_errors <<<"$js") == 0 ]] || h_fail "second scrub: $js"
[[ $(json_num unrecoverable <<<"$js") == 0 ]] || h_fail "second scrub: $js"
ctl scrub status "$MNT" | grep -q "scrub finished" || h_fail "scrub status"
# Counters survive a remount.
h_remount
[[ $(dev_sum csum_errors) == "$csum" ]] || h_fail "csum counters lost at remount"
(cd "$MNT" && sha256sum --quiet -c "$T/sums") || h_fail "files differ after scrub"
h_umount

# The damaged image alone now holds every file.
h_mount "${IMGS[1]}" degraded
(cd "$MNT" && sha256sum --quiet -c "$T/sums") || h_fail "image 1 was not repaired"
h_umount

# ---- both copies of one block destroyed ----------------------------------
# Blocks that start with a unique marker find themselves in the images.
h_setup 2 128M
h_mount "" ""
for i in $(seq 0 63); do
	printf 'MARK-%04d' "$i"
	head -c $((4096 - 9)) /dev/zero | tr '\0' 'x'
done >"$T/victim"
# One copy in large aligned writes: each block is written once, so the
# marker is found only where the file's block lives.
cp "$T/victim" "$MNT/victim"
head -c 100000 /dev/urandom >"$MNT/bystander"
(cd "$MNT" && sha256sum bystander) >"$T/bsum"
h_umount
for img in "${IMGS[@]}"; do
	at=$(grep -obUa "MARK-0010" "$img" | cut -d: -f1)
	[[ -n $at && $at != *$'\n'* ]] || h_fail "marker not found once in $img: $at"
	dd if=/dev/urandom of="$img" bs=4096 seek=$((at / 4096)) count=1 conv=notrunc \
		status=none
done
LOG_ALLOW="$LOG_ALLOW|unrecoverable|I/O error"
h_mount "" ""
if dd if="$MNT/victim" of=/dev/null bs=4096 skip=10 count=1 status=none 2>"$T/dderr"; then
	h_fail "reading the destroyed block succeeded"
fi
grep -q "Input/output error" "$T/dderr" || h_fail "not EIO: $(cat "$T/dderr")"
dd if="$MNT/victim" of=/dev/null bs=4096 count=10 status=none || h_fail "head of victim"
dd if="$MNT/victim" of=/dev/null bs=4096 skip=11 status=none || h_fail "tail of victim"
(cd "$MNT" && sha256sum --quiet -c "$T/bsum") || h_fail "bystander"
if out=$(ctl scrub start "$MNT" --wait); then
	h_fail "scrub with an unrecoverable block exited 0: $out"
fi
echo "$out"
grep -q "unrecoverable: 1" <<<"$out" || h_fail "not counted: $out"
grep -q "/victim  offset 40960" <<<"$out" || h_fail "not named: $out"
h_umount

# ---- who may use the control channel ------------------------------------
h_setup 2 128M
h_mount "" allow_other
ctl status "$MNT" >/dev/null || h_fail "owner refused"
# The mount point must be reachable for the kernel to pass the request on.
chmod 755 "$T"
if out=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$CTL" status "$MNT" 2>&1); then
	h_fail "uid 65534 may use the control channel: $out"
fi
grep -q "permission denied: only the user who mounted" <<<"$out" ||
	h_fail "no EPERM from the daemon: $out"
h_log "other user: $out"
chmod 700 "$T"
if out=$(ctl status "$T" 2>&1); then
	h_fail "a non-twinfs directory answered"
fi
grep -q "not a twinfs mount" <<<"$out" || h_fail "no ENOTTY message: $out"
mkdir "$MNT/d"
if out=$(ctl status "$MNT/d" 2>&1); then
	h_fail "a subdirectory answered"
fi
out=$(ctl scrub cancel "$MNT" 2>&1) && h_fail "cancel without scrub succeeded"
grep -q "no scrub is running" <<<"$out" || h_fail "cancel message: $out"
h_umount

# ---- online: the fault backend corrupts reads of device 1 ------------------
# Every read of device 1 in the first 32 MiB of the data area returns
# flipped bits: reads are right anyway, scrub counts and rewrites.
h_setup 2 128M
h_mount "" ""
for i in 1 2 3 4; do
	head -c $((3 * 1024 * 1024 + i * 777)) /dev/urandom >"$MNT/g$i"
done
(cd "$MNT" && sha256sum g*) >"$T/gsums"
h_umount
off=$(((16 + 4096) * 4096))
h_mount "" "fault=dev=1\\,op=read\\,off=$off\\,len=33554432\\,kind=corrupt\\,count=-1"
(cd "$MNT" && sha256sum --quiet -c "$T/gsums") || h_fail "fault: files differ"
js=$(ctl scrub start "$MNT" --wait --json | tail -n 1)
h_log "fault scrub: $js"
[[ $(json_num csum_errors <<<"$js") -gt 0 ]] || h_fail "fault: nothing found"
[[ $(json_num unrecoverable <<<"$js") == 0 ]] || h_fail "fault: unrecoverable"
h_umount
grep -q "control request from uid 65534 refused" "$T"/daemon.*.log ||
	h_fail "the refusal was not logged"

h_log "PASS"
