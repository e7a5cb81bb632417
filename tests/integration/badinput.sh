#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: Bad input gets a one-line error naming the device and loses nothing:
# mkfs refuses small devices, a device given twice and existing file systems
# (without -f); mount refuses missing devices (unless -o degraded), foreign
# images, truncated images, corrupt superblocks, the same device twice and
# out-of-range numbers in -o commit/threads/bufs, and writes nothing when it
# refuses; wrong usage prints usage.
source "$(dirname "$0")/harness.sh"

# mkfs_fails WHAT ARGS...: mkfs must exit 1 with one line naming WHAT.
mkfs_fails() {
	local what=$1 out rc=0
	shift
	out=$("$MKFS" "$@" 2>&1 >/dev/null) || rc=$?
	((rc == 1)) || h_fail "mkfs.twinfs $*: exit $rc, want 1 ($out)"
	h_expect_one_line "$out" "$what" "mkfs.twinfs $*"
	[[ $out == "mkfs.twinfs: "* ]] || h_fail "mkfs error lacks the program prefix: $out"
	h_log "ok: mkfs refused: $out"
}

h_log "mkfs cases"
# ---- mkfs -------------------------------------------------------------------
small=$(h_mkimg small.img 32M)
a=$(h_mkimg a.img 80M)
b=$(h_mkimg b.img 80M)
sum_ab=$(h_sums "$a" "$b")

mkfs_fails "$small" "$small"
mkfs_fails "$small" "$a" "$small"
mkfs_fails "$a" "$a" "$a"
ln -s "$a" "$T/a-again.img"
mkfs_fails "$T/a" "$a" "$T/a-again.img"		# same file under another name
mkfs_fails "$T/missing.img" "$a" "$T/missing.img"
[[ $(h_sums "$a" "$b") == "$sum_ab" ]] || h_fail "refused mkfs modified an image"

# Usage errors: exit 2 with a usage line.
for args in "" "-x $a" "-L" "$a $a $a $a $a $a $a $a $a"; do
	rc=0
	# shellcheck disable=SC2086
	out=$("$MKFS" $args 2>&1) || rc=$?
	((rc == 2)) || h_fail "mkfs.twinfs $args: exit $rc, want 2"
	grep -qi usage <<<"$out" || h_fail "mkfs.twinfs $args: no usage line: $out"
done

h_log "ext4 cases"
if command -v mkfs.ext4 >/dev/null; then
	e=$(h_mkimg ext4.img 80M)
	mkfs.ext4 -F -q "$e"
	sum_e=$(h_sums "$e" "$b")
	mkfs_fails "$e" "$e" "$b"
	mkfs_fails "$e" "$b" "$e"
	[[ $(h_sums "$e" "$b") == "$sum_e" ]] || h_fail "refused mkfs modified an image"
	"$MKFS" -f "$e" "$b" >/dev/null || h_fail "mkfs -f over ext4 failed"
	# Mounting a real ext4 image as twinfs is refused.
	mkfs.ext4 -F -q "$e"
	sum_e=$(h_sums "$e")
	h_mount_fails "$e" degraded
	grep -qF "$e" <<<"$FAIL_OUT" || h_fail "ext4 image not named: $FAIL_OUT"
	[[ $(h_sums "$e") == "$sum_e" ]] || h_fail "refused mount modified the ext4 image"
else
	h_log "skip: mkfs.ext4 is absent, no ext4 cases"
fi

h_log "existing twinfs"
# An existing twinfs is refused without -f, overwritten with it.
"$MKFS" -f "$a" "$b" >/dev/null || h_fail "mkfs of a and b failed"
sum_ab=$(h_sums "$a" "$b")
mkfs_fails "$a" "$a" "$b"
[[ $(h_sums "$a" "$b") == "$sum_ab" ]] || h_fail "refused mkfs modified an image"
"$MKFS" -f -L again "$a" "$b" | grep -q again || h_fail "mkfs -f: summary lacks the label"
sum_ab=$(h_sums "$a" "$b")

h_log "mount: missing device"
# ---- mount ------------------------------------------------------------------
# A missing device: refused, naming it; accepted with -o degraded.
h_mount_fails "$a:$T/missing.img"
grep -qF "$T/missing.img" <<<"$FAIL_OUT" || h_fail "missing device not named: $FAIL_OUT"
[[ $(h_sums "$a" "$b") == "$sum_ab" ]] || h_fail "refused mount modified an image"
# One device of two given alone, without degraded: refused.
h_mount_fails "$a"
[[ $(h_sums "$a" "$b") == "$sum_ab" ]] || h_fail "refused mount modified an image"
LOG_ALLOW='missing|degraded|No such file'
h_mount "$a:$T/missing.img" degraded
echo hello >"$MNT/f"
h_umount
LOG_ALLOW=''

h_log "mount: zero image"
# An all-zero image (no file system) is refused, naming it.
z=$(h_mkimg zero.img 80M)
h_mount_fails "$z" degraded
grep -qF "$z" <<<"$FAIL_OUT" || h_fail "zero image not named: $FAIL_OUT"
[[ -z $(tr -d '\0' <"$z" | head -c 1) ]] || h_fail "refused mount wrote to the zero image"

h_log "mount: corrupt superblock"
# A corrupt superblock (both slots): the device alone is refused, naming it,
# and nothing is written to either image.
"$MKFS" -f "$a" "$b" >/dev/null
dd if=/dev/urandom of="$a" bs=4096 count=2 conv=notrunc status=none
sum_ab=$(h_sums "$a" "$b")
h_mount_fails "$a" degraded
grep -qF "$a" <<<"$FAIL_OUT" || h_fail "corrupt device not named: $FAIL_OUT"
h_mount_fails "$a:$b"
[[ $(h_sums "$a" "$b") == "$sum_ab" ]] || h_fail "refused mount modified an image"

h_log "usage"
# Wrong usage: nonzero with a usage line.
for args in "" "$b" "-o" "-o bogus_option_xyz $b $MNT"; do
	rc=0
	# shellcheck disable=SC2086
	out=$(timeout 20 "$TWINFS" $args 2>&1) || rc=$?
	h_is_mounted "$MNT" && { fusermount3 -u "$MNT"; h_fail "twinfs $args mounted"; }
	((rc != 0 && rc != 124)) || h_fail "twinfs $args: exit $rc"
	if [[ $args != *bogus* ]]; then
		grep -qi usage <<<"$out" || h_fail "twinfs $args: no usage: $out"
	fi
done

h_log "mount: the same device twice"
# Said at once, under the same name and under another one: before any
# device is opened, not "in use by another twinfs process" after the 3 s
# lock wait.  That is shown by holding the image's lock meanwhile (a daemon
# that opened first would wait for it and say "in use"), not by timing a
# process start on a loaded machine; the time bound only says "no hang".
"$MKFS" -f "$a" "$b" >/dev/null
sum_ab=$(h_sums "$a" "$b")
ln -sf "$a" "$T/a-link.img"
exec {alock}<"$a"
flock -x "$alock"
for spec in "$a:$a" "$a:$T/a-link.img"; do
	start=$EPOCHREALTIME
	h_mount_fails "$spec"
	h_expect_one_line "$FAIL_OUT" "same device" "twinfs $spec"
	ms=$(((${EPOCHREALTIME//[.,]/} - ${start//[.,]/}) / 1000))
	((ms < 10000)) || h_fail "twinfs $spec took $ms ms to refuse"
	h_log "twinfs $spec refused in $ms ms"
done
(cd "$T" && "$TWINFS" -f "${a##*/}:${a##*/}" "$MNT" >"$T/dup.out" 2>&1) &&
	h_fail "relative $a twice mounted"
h_expect_one_line "$(cat "$T/dup.out")" "same device" "relative $a twice"
exec {alock}<&-
[[ $(h_sums "$a" "$b") == "$sum_ab" ]] || h_fail "refused mount modified an image"

h_log "mount: numeric options out of range"
for opt in commit=-1 commit=0 commit=abc commit=99999999999 commit= threads=0 threads=-1 \
	   threads=4x bufs=-1 bufs=0 bufs=1e3; do
	h_mount_fails "$a:$b" "$opt"
	h_expect_one_line "$FAIL_OUT" "$opt" "twinfs -o $opt"
done
[[ $(h_sums "$a" "$b") == "$sum_ab" ]] || h_fail "refused mount modified an image"

h_log "mount: truncated image"
# A truncated image: refused alone, naming it.
"$MKFS" -f "$a" "$b" >/dev/null
truncate -s 40M "$a"
sum_ab=$(h_sums "$a" "$b")
h_mount_fails "$a" degraded
grep -qF "$a" <<<"$FAIL_OUT" || h_fail "truncated device not named: $FAIL_OUT"
[[ $(h_sums "$a" "$b") == "$sum_ab" ]] || h_fail "refused mount modified an image"
echo "badinput: all refusals correct"
