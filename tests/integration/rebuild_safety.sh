#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: rebuild and replace check what they write to.  A device path
# that now holds something else (a foreign file, a symlink to another file
# or to a member) is refused by rebuild, named by slot number or by path,
# with one line, and the device stays out of sync; a returning member whose
# content was damaged outside what it missed is verified block by block and
# comes back clean (fsck, and alone); replace refuses ext4, twinfs, current
# members and small devices without --force; a daemon mounted in the
# background from relative paths still finds them (rebuild and status);
# a slot that does not exist is named as such.
source "$(dirname "$0")/harness.sh"

: "${CTL:?CTL must name twinfs-ctl}"
: "${FSCK:?FSCK must name fsck.twinfs}"
# The missing device at mount, and the rebuild/replace results.
LOG_ALLOW='is missing|mounted degraded'

# ctl_fails WHAT ARGS...: twinfs-ctl must exit 1 with one line naming WHAT.
ctl_fails() {
	local what=$1 out rc=0
	shift
	out=$("$CTL" "$@" 2>&1 >/dev/null) || rc=$?
	((rc == 1)) || h_fail "twinfs-ctl $*: exit $rc, want 1 ($out)"
	h_expect_one_line "$out" "$what" "twinfs-ctl $*"
	h_log "ok: refused: $out"
}

# dev_state SLOT: the STATE column of that device in twinfs-ctl status.
dev_state() {
	"$CTL" status "$MNT" --json | tr '{' '\n' | grep "\"index\": *$1," |
		sed 's/.*"state": *"\([A-Z]*\)".*/\1/'
}

# wait_unlocked IMG: a background daemon has exited when it no longer holds
# its exclusive lock on the image.
wait_unlocked() {
	local i
	for ((i = 0; i < 300; i++)); do
		flock -n "$1" true && return 0
		sleep 0.1
	done
	h_fail "the daemon still holds $1 30 s after the unmount"
}

h_setup 2 256M
a=${IMGS[0]}
b=${IMGS[1]}
h_mount
head -c 24M /dev/urandom >"$MNT/f1"
head -c 12M /dev/urandom >"$MNT/f2"
(cd "$MNT" && sha256sum f1 f2) >"$T/sums"
h_umount
cp "$b" "$T/b.saved"

# ---- relative paths, background daemon (its cwd is /) -----------------------
h_log "background mount from relative paths, ${b##*/} missing"
mv "$b" "$T/b.away"
(cd "$T" && "$TWINFS" -o "$(h_v1opt degraded)" "${a##*/}:${b##*/}" mnt 2>/dev/null) ||
	h_fail "background degraded mount failed"
h_is_mounted "$MNT" || h_fail "background mount returned 0 but $MNT is not mounted"
echo during >"$MNT/during"
rc=0
"$CTL" status "$MNT" >"$T/st" || rc=$?
((rc == 1)) || { cat "$T/st"; h_fail "status exits $rc with a device missing, want 1 (degraded)"; }
grep -qF "$b" "$T/st" || { cat "$T/st"; h_fail "status does not name the missing $b by its full path"; }
[[ $(dev_state 1) == MISSING ]] || h_fail "device 1 is $(dev_state 1), not MISSING"
mv "$T/b.away" "$b"
out=$(cd "$T" && "$CTL" rebuild mnt "${b##*/}" --wait 2>&1) ||
	h_fail "rebuild from relative paths failed: $out"
[[ $(dev_state 1) == ONLINE ]] || h_fail "device 1 is $(dev_state 1) after the rebuild"
fusermount3 -u "$MNT"
wait_unlocked "$a"
"$FSCK" "${FSCK_FMT[@]}" -n "$a" "$b" >"$T/fsck" 2>&1 || { cat "$T/fsck"; h_fail "fsck after the relative rebuild"; }

# ---- rebuild onto something that is not the member ------------------------
h_log "degraded mount, something else at ${b}"
mv "$b" "$T/b.away"
h_mount "$a:$b" degraded
head -c 2M /dev/urandom >"$MNT/f3"	# some dirty regions
(cd "$MNT" && sha256sum f3) >>"$T/sums"
other=$(h_mkimg other.img 256M)
"$MKFS" -O "$(h_format)" "$other" >/dev/null		# another twinfs, same size
e=$(h_mkimg ext4.img 256M)
mkfs.ext4 -F -q "$e" 2>/dev/null || h_fail "mkfs.ext4 failed"
for kind in random twinfs ext4 link-other link-member; do
	rm -f "$b"
	case $kind in
	random) truncate -s 256M "$b"; head -c 64M /dev/urandom | dd of="$b" conv=notrunc status=none ;;
	twinfs) cp "$other" "$b" ;;
	ext4) cp "$e" "$b" ;;
	link-other) ln -s "$other" "$b" ;;
	link-member) ln -s "$a" "$b" ;;
	esac
	real=$(readlink -f "$b")
	sum=$(h_sums "$real")
	ctl_fails "$b" rebuild "$MNT" 1 --wait
	ctl_fails "$b" rebuild "$MNT" "$b" --wait
	# The live member itself changes under the daemon's own background
	# commits and discards: only a foreign target must be left bit-exact.
	[[ $kind == link-member || $(h_sums "$real") == "$sum" ]] ||
		h_fail "refused rebuild ($kind) modified $real"
	[[ $(dev_state 1) == MISSING ]] || h_fail "device 1 is $(dev_state 1) after a refused rebuild ($kind)"
done
ctl_fails "no device slot 5" rebuild "$MNT" 5
ctl_fails "0 to 1" rebuild "$MNT" 5
h_umount
# Nothing marked the foreign file in sync: a's superblock still says device 1
# is stale, so the pair is refused without -o degraded.
rm -f "$b"
mv "$T/b.away" "$b"
h_mount_fails "$a:$b"
grep -q stale <<<"$FAIL_OUT" || h_fail "the returning device is not stale: $FAIL_OUT"

# ---- a member whose data area is not what it was ----------------------------
# Its superblock still names it (the member check passes), but everything
# from 17 MiB on (the data area; the log is below) is foreign.  What it
# missed is copied; the rest must be verified block by block and rewritten.
h_log "member with foreign data outside the regions it missed"
head -c 200M /dev/urandom | dd of="$b" bs=1M seek=17 conv=notrunc status=none
h_mount "$a:$b" degraded
"$CTL" rebuild "$MNT" 1 --wait >"$T/rb" 2>&1 || { cat "$T/rb"; h_fail "rebuild of the member failed"; }
"$CTL" rebuild status "$MNT" --json >"$T/rbs"
grep -q '"state": *"done"' "$T/rbs" || { cat "$T/rbs"; h_fail "rebuild not done"; }
fixed=$(sed 's/.*"fixed_blocks": *\([0-9]*\).*/\1/' "$T/rbs")
((fixed > 1000)) || { cat "$T/rbs"; h_fail "the verify pass rewrote only $fixed blocks"; }
[[ $(dev_state 1) == ONLINE ]] || h_fail "device 1 is $(dev_state 1) after the rebuild"
h_umount
"$FSCK" "${FSCK_FMT[@]}" -n "$a" "$b" >"$T/fsck" 2>&1 || { cat "$T/fsck"; h_fail "fsck finds the rebuilt pair bad"; }
cp "$b" "$T/b.alone"
h_mount "$T/b.alone" degraded
(cd "$MNT" && sha256sum --quiet -c "$T/sums") || h_fail "the rebuilt image alone lost data"
h_umount
rm -f "$T/b.alone"

# ---- replace applies mkfs's checks ---------------------------------------------
h_log "replace: refusals without --force"
h_mount "$a:$b"
small=$(h_mkimg small.img 100M)
mkfs.ext4 -F -q "$e" 2>/dev/null
sum_e=$(h_sums "$e")
ctl_fails "$e" replace "$MNT" 1 "$e"
ctl_fails "--force" replace "$MNT" 1 "$e"
[[ $(h_sums "$e") == "$sum_e" ]] || h_fail "refused replace modified the ext4 image"
ctl_fails "$other" replace "$MNT" 1 "$other"
ctl_fails "already a member" replace "$MNT" 1 "$a"
ctl_fails "already a member" replace "$MNT" 1 "$b" --force
ctl_fails "too small" replace "$MNT" 1 "$small"
ctl_fails "no device slot 7" replace "$MNT" 7 "$e"
# Relative, from the test's directory.
out=$(cd "$T" && "$CTL" replace "$MNT" 1 "${e##*/}" 2>&1 >/dev/null) && h_fail "relative ext4 replace accepted"
grep -qF "$e" <<<"$out" || h_fail "relative replace did not name $e: $out"
[[ $(dev_state 1) == ONLINE ]] || h_fail "device 1 is $(dev_state 1) after refused replaces"
h_log "replace --force onto the ext4 image"
"$CTL" replace "$MNT" 1 "$e" --force --wait >"$T/rp" 2>&1 || { cat "$T/rp"; h_fail "replace --force failed"; }
[[ $(dev_state 1) == ONLINE ]] || h_fail "device 1 is $(dev_state 1) after replace --force"
h_umount
"$FSCK" "${FSCK_FMT[@]}" -n "$a" "$e" >"$T/fsck" 2>&1 || { cat "$T/fsck"; h_fail "fsck after replace --force"; }
echo "rebuild_safety: foreign targets refused, damaged member verified, replace checks, relative paths"
