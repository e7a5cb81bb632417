#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: No root needed: an ordinary user makes image files, runs mkfs, mounts
# through fusermount3 (in the background and in the foreground), writes,
# unmounts with fusermount3 -u, remounts and finds everything, asks the
# daemon for its status and a scrub (twinfs-ctl) and checks the images
# (fsck.twinfs), when those tools are built.  The errors a user meets first
# are one clear line: /dev/fuse they may not open, an image they may not
# open (another user's), a mount point they may not write.
source "$(dirname "$0")/harness.sh"
source "$(dirname "$0")/userlib.sh"

A=twinfs-it-ua
B=twinfs-it-ub
u_adduser "$A"
u_adduser "$B"
u_need_fusermount
AT=$T/$A
mkdir "$AT"
chown "$A:$A" "$AT" "$MNT"
# A real tool answers --help; a placeholder does not.
tool_ready() { [[ -n ${1:-} && -x $1 ]] && "$1" -h >/dev/null 2>&1; }

u_ok "$A" "truncate" truncate -s 256M "$AT/a.img" "$AT/b.img"
u_ok "$A" "chmod" chmod 0600 "$AT/a.img" "$AT/b.img"
IMGS=("$AT/a.img" "$AT/b.img")
SPEC=$(h_devspec "${IMGS[@]}")
u_ok "$A" "mkfs.twinfs" "$MKFS" -L mine "${IMGS[@]}"
[[ $(stat -c %U "$AT/a.img") == "$A" ]] || h_fail "mkfs changed the owner of a.img"

# ---- /dev/fuse the user may not open -----------------------------------------
h_log "/dev/fuse mode 0600: one line naming /dev/fuse"
u_fuse_mode 0600
TWINFS=$(u_wrapper "$A") h_mount_fails "$SPEC"
h_expect_one_line "$FAIL_OUT" "cannot open /dev/fuse: Permission denied" "mode 0600 /dev/fuse"
# The background form reports the same line and exits 1.
rc=0
out=$(u_run "$A" "$TWINFS_BIN" "$SPEC" "$MNT" 2>&1) || rc=$?
((rc == 1)) || h_fail "background mount with /dev/fuse 0600 exited $rc, not 1: $out"
h_expect_one_line "$out" "cannot open /dev/fuse: Permission denied" "background, /dev/fuse 0600"
h_is_mounted "$MNT" && h_fail "mounted although /dev/fuse is 0600"
u_fuse_mode 0666

# ---- devices the user may not open -------------------------------------------
h_log "another user's images: one line naming the image"
TWINFS=$(u_wrapper "$B") h_mount_fails "$SPEC"
h_expect_one_line "$FAIL_OUT" "$AT/a.img: Permission denied" "$B mounting $A's images"
u_denied "$B" "mkfs.twinfs -f on $A's images" "Permission denied" "$MKFS" -f "${IMGS[@]}"
root_img=$(h_mkimg root.img 256M)
chmod 0600 "$root_img"
TWINFS=$(u_wrapper "$A") h_mount_fails "$root_img:$AT/b.img"
h_expect_one_line "$FAIL_OUT" "$root_img: Permission denied" "$A mounting a root-only image"

# ---- a mount point the user may not write ------------------------------------
h_log "mount point owned by root: fusermount3 refuses"
mkdir "$T/rootmnt"
rc=0
out=$(u_run "$A" "$TWINFS_BIN" "$SPEC" "$T/rootmnt" 2>&1) || rc=$?
((rc == 1)) || h_fail "mount on a root-owned mount point exited $rc: $out"
grep -q "Permission denied\|no write access" <<<"$out" ||
	h_fail "mount on a root-owned mount point: unclear error: $out"
h_is_mounted "$T/rootmnt" && h_fail "mounted on a root-owned mount point"

# ---- background mount, write, fusermount3 -u -----------------------------------
h_log "background mount as $A"
u_ok "$A" "twinfs (background)" "$TWINFS_BIN" "$SPEC" "$MNT"
h_is_mounted "$MNT" || h_fail "background mount returned 0 but $MNT is not mounted"
mapfile -t pids < <(h_wait_daemon_pids "$MNT")
((${#pids[@]} == 1)) || h_fail "expected one daemon for $MNT, found ${pids[*]:-none}"
UL_PIDS+=("${pids[0]}")
[[ $(stat -c %U "/proc/${pids[0]}") == "$A" ]] || h_fail "the daemon does not run as $A"
grep -q "user_id=$(id -u "$A")," /proc/self/mountinfo || h_fail "mount is not $A's (user_id)"
grep " $MNT " /proc/self/mountinfo | grep -q default_permissions ||
	h_fail "mount lacks default_permissions"
# Without allow_other nobody else may enter, root included.
ls "$MNT" >/dev/null 2>&1 && h_fail "root entered $A's mount without allow_other"
u_denied "$B" "ls of $A's mount" "Permission denied" ls "$MNT"

h_log "write files as $A"
u_ok "$A" "write files" sh -c '
	set -e
	cd "$1"
	mkdir -p d/e
	head -c 3000000 /dev/urandom >d/big
	head -c 5000 /dev/urandom >d/e/small
	echo hello >hello
	ln -s hello link
	ln hello hardlink
	chmod 0640 d/e/small
	dd if=/dev/urandom of=direct bs=64k count=16 oflag=direct status=none
	sha256sum d/big d/e/small hello direct >"$2"
' sh "$MNT" "$AT/sums"
h_log "fusermount3 -u as $A"
u_ok "$A" "fusermount3 -u" fusermount3 -u "$MNT"
u_wait_gone "${pids[0]}" 30 || h_fail "daemon did not exit after fusermount3 -u"
h_is_mounted "$MNT" && h_fail "still mounted after fusermount3 -u"
for img in "${IMGS[@]}"; do
	[[ $(u_sb_state "$img") == clean ]] || h_fail "$img not clean after fusermount3 -u"
done

# ---- fsck as the user ----------------------------------------------------------
if tool_ready "${FSCK:-}"; then
	h_log "fsck.twinfs as $A"
	u_ok "$A" "fsck.twinfs -n" "$FSCK" -n "${IMGS[@]}"
	u_denied "$B" "fsck.twinfs on $A's images" "Permission denied" "$FSCK" -n "${IMGS[@]}"
else
	h_log "fsck.twinfs not built yet: skipped"
fi

# ---- foreground remount, verify, status and scrub --------------------------------
TWINFS=$(u_wrapper "$A") h_mount "$SPEC"
u_ok "$A" "verify after remount" sh -c 'cd "$1" && sha256sum --quiet -c "$2"' sh "$MNT" "$AT/sums"
[[ $(u_run "$A" stat -c '%U %G %a' "$MNT/d/e/small") == "$A $A 640" ]] ||
	h_fail "owner or mode of d/e/small changed: $(u_run "$A" stat -c '%U %G %a' "$MNT/d/e/small")"
[[ $(u_run "$A" readlink "$MNT/link") == hello ]] || h_fail "symlink lost"
[[ $(u_run "$A" stat -c %h "$MNT/hello") == 2 ]] || h_fail "hard link count lost"
grep -q "backend " "$DAEMON_LOG" || h_fail "the daemon did not log its backend"

if tool_ready "${CTL:-}"; then
	h_log "twinfs-ctl as $A"
	out=$(u_run "$A" "$CTL" status "$MNT" 2>&1) || h_fail "twinfs-ctl status as $A: $out"
	be=$(sed -n 's/.*mounted .*backend \([a-z_]*\).*/\1/p' "$DAEMON_LOG" | head -n 1)
	grep -q "backend $be" <<<"$out" ||
		h_fail "twinfs-ctl status and the daemon's log name different backends: $out"
	# --wait: exit 0 only when the scrub ended with nothing unrecoverable.
	out=$(u_run "$A" "$CTL" scrub start "$MNT" --wait 2>&1) || h_fail "twinfs-ctl scrub start --wait as $A: $out"
	out=$(u_run "$A" "$CTL" status "$MNT" 2>&1) || h_fail "twinfs-ctl status after scrub: $out"
	grep -q "scrub: never run" <<<"$out" && h_fail "status shows no scrub after one ran: $out"
	# B cannot even enter the mount, so cannot talk to the daemon.
	u_denied "$B" "twinfs-ctl status on $A's mount" "ermission denied" "$CTL" status "$MNT"
	# Root is kept out by the kernel (no allow_other), not by the daemon:
	# the message must say what is missing.
	rc=0
	out=$("$CTL" status "$MNT" 2>&1) || rc=$?
	# status exits 2 when it cannot reach the daemon (as when unusable).
	((rc == 2)) || h_fail "root's twinfs-ctl status on $A's mount: exit $rc: $out"
	h_expect_one_line "$out" "lacks allow_other" "root's twinfs-ctl on $A's mount"
else
	h_log "twinfs-ctl not built yet: skipped"
fi

u_ok "$A" "fusermount3 -u" fusermount3 -u "$MNT"
h_umount
echo "user: mkfs, mount, write, fusermount3 -u, remount, verify as $A; clear errors for /dev/fuse and devices"
