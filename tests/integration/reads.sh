#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: the read path's kernel settings.  A cached open keeps the
# file's pages (keep_cache: a re-read after close and open is served from
# the page cache, not from the daemon), those pages follow every change
# made through the mount (cached and O_DIRECT writes, truncate), and the
# mount's readahead is raised to 4 MiB so cold sequential reads reach the
# daemon as 1 MiB READs instead of 128 KiB ones, four of them in flight.  Reads spread over both
# mirrors (per-device read counters in twinfs-ctl stats): small reads
# alternate, and one large read is split between the two copies.
source "$(dirname "$0")/harness.sh"
if ! command -v fincore >/dev/null; then
	echo "SKIP: fincore (util-linux) is missing"
	exit 77
fi

h_setup 2 256M
h_mount

# mountinfo field 3 is the mount's st_dev, the name of its bdi in sysfs.
dev=$(awk -v m="$MNT" '$5 == m { d = $3 } END { print d }' /proc/self/mountinfo)
ra=/sys/class/bdi/$dev/read_ahead_kb
[[ -r $ra ]] || h_fail "no $ra for the mount"

h_log "==== readahead: 4 MiB from the first cached open on"
head -c 8M /dev/urandom > "$T/data"
cp "$T/data" "$MNT/f"
sync "$MNT/f"
[[ $(cat "$ra") == 4096 ]] || h_fail "read_ahead_kb is $(cat "$ra") after an open, want 4096"

h_log "==== keep_cache: pages survive close and open"
h_remount
cmp "$T/data" "$MNT/f" || h_fail "cold read differs"
# fincore opens the file itself: an open that drops the cache shows 0.
pages=$(fincore -n -b -o PAGES "$MNT/f" | tr -d ' ')
((pages >= 1024)) || h_fail "$pages pages of $MNT/f resident after a full read of 2048, want most"

h_log "==== reads spread over the mirrors"
# read_bytes of device 0 and 1.
rbytes() { "$CTL" stats "$MNT" | awk '/^device[01]\.read_bytes:/ { printf "%s ", $2 } END { print "" }'; }
read -r a0 a1 < <(rbytes)
dd if="$MNT/f" of=/dev/null bs=1M count=1 skip=2 iflag=direct status=none || h_fail "O_DIRECT read"
read -r b0 b1 < <(rbytes)
h_log "one 1 MiB read: device 0 read $((b0 - a0)) bytes, device 1 $((b1 - a1))"
((b0 - a0 >= 393216 && b1 - a1 >= 393216)) ||
	h_fail "a 1 MiB read was not split over both mirrors ($((b0 - a0)) and $((b1 - a1)) bytes)"
for i in $(seq 0 15); do
	dd if="$MNT/f" of=/dev/null bs=4096 count=1 skip=$((i * 7)) iflag=direct status=none
done
read -r c0 c1 < <(rbytes)
h_log "16 reads of 4 KiB: device 0 read $((c0 - b0)) bytes, device 1 $((c1 - b1))"
((c0 - b0 >= 4 * 4096 && c1 - b1 >= 4 * 4096)) ||
	h_fail "4 KiB reads did not alternate between the mirrors"

h_log "==== the kept pages follow writes through the mount"
# A cached write through another open.
printf 'cached-write' | dd of="$MNT/f" bs=1 seek=100 conv=notrunc status=none
printf 'cached-write' | dd of="$T/data" bs=1 seek=100 conv=notrunc status=none
cmp "$T/data" "$MNT/f" || h_fail "a cached write is not seen by a later open"
# An O_DIRECT write (a direct open: FOPEN_DIRECT_IO) over cached pages.
head -c 4096 /dev/urandom > "$T/blk"
dd if="$T/blk" of="$MNT/f" bs=4096 seek=3 oflag=direct conv=notrunc status=none ||
	h_fail "O_DIRECT write"
dd if="$T/blk" of="$T/data" bs=4096 seek=3 conv=notrunc status=none
cmp "$T/data" "$MNT/f" || h_fail "the page cache shows stale data after an O_DIRECT write"
# Truncate and extend: the dropped tail reads as zeros.
truncate -s 1M "$MNT/f"
truncate -s 8M "$MNT/f"
truncate -s 1M "$T/data"
truncate -s 8M "$T/data"
cmp "$T/data" "$MNT/f" || h_fail "stale pages after truncate"
h_remount
cmp "$T/data" "$MNT/f" || h_fail "data differs after remount"
h_umount

h_log "==== a split read still verifies every piece"
# 256 marked blocks in one cp: each block is written once, so a marker is
# found only where its block lives.
pad=$(printf '%4087s' '' | tr ' ' x)
for ((i = 0; i < 256; i++)); do
	printf 'MARK-%04d%s' "$i" "$pad"
done >"$T/marked"
h_setup 2 64M	# small images: the markers are found by grep
h_mount
cp "$T/marked" "$MNT/marked"
h_umount
# In each half of the file one block bad on device 0 and its neighbour bad
# on device 1: whichever copy serves a half meets a bad block.
bad=(0:10 1:11 0:200 1:201)
for b in "${bad[@]}"; do
	img=${IMGS[${b%%:*}]}
	at=$(grep -obUa "MARK-$(printf %04d "${b#*:}")" "$img" | cut -d: -f1)
	[[ -n $at && $at != *$'\n'* ]] || h_fail "marker ${b#*:} not found once in $img: $at"
	dd if=/dev/urandom of="$img" bs=4096 seek=$((at / 4096)) count=1 conv=notrunc status=none
done
LOG_ALLOW="${LOG_ALLOW:-}${LOG_ALLOW:+|}checksum|repaired"
h_mount
dd if="$MNT/marked" of="$T/got" bs=1M count=1 iflag=direct status=none || h_fail "split read failed"
cmp "$T/marked" "$T/got" || h_fail "a split read over bad copies returned wrong data"
sums() { "$CTL" stats "$MNT" | awk -v k="$1" '$1 ~ "^device[01]\\." k ":" { s += $2 } END { print s + 0 }'; }
csum=$(sums csum_errors)
fixed=$(sums repaired)
h_log "split read: $csum checksum errors met, $fixed blocks repaired"
((csum >= 2 && fixed >= 2)) || h_fail "the split read met $csum bad copies and repaired $fixed, want 2 each"
cmp "$T/marked" "$MNT/marked" || h_fail "buffered read after the repair differs"
h_umount
echo "reads: all checks passed"
