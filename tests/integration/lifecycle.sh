#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: The daemon's lifecycle: SIGTERM and SIGINT unmount with a final checkpoint
# (superblocks clean, data there at remount) while SIGKILL leaves them dirty
# (the check can fail); fusermount3 -u and umount -l (also with a file still
# open) end the daemon with status 0 and no stale mount; a missing, non
# directory or already-twinfs mount point and devices a running daemon holds
# are refused with one clear line; a non-empty directory is accepted (libfuse
# 3 behaviour, documented in the README); mount -t fuse.twinfs and an fstab
# line work through mount.fuse3.
source "$(dirname "$0")/harness.sh"

h_setup 2 256M
SPEC=$(h_devspec "${IMGS[@]}")

# sb_state IMG: "clean" or "dirty" from the newest superblock slot
# (docs/FORMAT.md: generation at 296, state at 260).
sb_state() {
	local g0 g1 slot st
	g0=$(od -An -t u8 -j 296 -N 8 "$1" | tr -d ' ')
	g1=$(od -An -t u8 -j $((4096 + 296)) -N 8 "$1" | tr -d ' ')
	slot=0
	((g1 > g0)) && slot=1
	st=$(od -An -t u4 -j $((slot * 4096 + 260)) -N 4 "$1" | tr -d ' ')
	case $st in 1) echo clean ;; 0) echo dirty ;; *) echo "bad($st)" ;; esac
}
expect_state() {
	local img
	for img in "${IMGS[@]}"; do
		[[ $(sb_state "$img") == "$1" ]] || h_fail "$2: $img is $(sb_state "$img"), expected $1"
	done
}

# stop_with SIG: signal the daemon, expect exit 0, no mount, a clean log.
stop_with() {
	local rc=0
	h_log "kill -$1"
	kill "-$1" "$DAEMON_PID"
	for ((i = 0; i < 300; i++)); do
		kill -0 "$DAEMON_PID" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$DAEMON_PID" 2>/dev/null && h_fail "daemon still running 30 s after SIG$1"
	wait "$DAEMON_PID" || rc=$?
	DAEMON_PID=""
	rm -f "$T/daemon.pid"
	((rc == 0)) || { h_dump_log; h_fail "daemon exited $rc after SIG$1"; }
	h_is_mounted "$MNT" && h_fail "still mounted after SIG$1"
	h_check_log "$DAEMON_LOG" || exit 1
	grep -q "unmounted" "$DAEMON_LOG" || h_fail "no 'unmounted' line after SIG$1"
}

# ---- signals ------------------------------------------------------------------
h_mount
expect_state dirty "while mounted"
head -c 1000000 /dev/urandom >"$MNT/sig1"
sum1=$(h_sums "$MNT/sig1")
stop_with TERM
expect_state clean "after SIGTERM"
h_mount
[[ $(h_sums "$MNT/sig1") == "$sum1" ]] || h_fail "data written before SIGTERM differs"
head -c 1000000 /dev/urandom >"$MNT/sig2"
sum2=$(h_sums "$MNT/sig2")
stop_with INT
expect_state clean "after SIGINT"

# A SIGKILL leaves no checkpoint: the state check can tell.
h_mount
sync "$MNT/sig2"
kill -9 "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null || true
DAEMON_PID=""
rm -f "$T/daemon.pid"
umount -l "$MNT" 2>/dev/null || fusermount3 -u "$MNT" 2>/dev/null || true
expect_state dirty "after SIGKILL"
h_mount
[[ $(h_sums "$MNT/sig1") == "$sum1" && $(h_sums "$MNT/sig2") == "$sum2" ]] ||
	h_fail "data lost over SIGTERM/SIGINT/SIGKILL"

# ---- fusermount3 -u and umount -l ----------------------------------------------
h_umount	# fusermount3 -u: exit 0 and clean log checked by the harness
expect_state clean "after fusermount3 -u"
h_mount
echo lazy >"$MNT/lazy"
h_log "umount -l"
umount -l "$MNT"
h_umount	# not mounted any more: waits for exit 0
expect_state clean "after umount -l"
h_mount
exec 7<"$MNT/lazy"
h_log "umount -l with a file open"
umount -l "$MNT"
sleep 0.5
kill -0 "$DAEMON_PID" 2>/dev/null || h_fail "daemon exited while a lazily unmounted file was open"
[[ $(cat <&7) == lazy ]] || h_fail "open file unreadable after umount -l"
exec 7<&-
h_umount
expect_state clean "after umount -l and the last close"
h_is_mounted "$MNT" && h_fail "stale mount after umount -l"

# ---- bad mount points -------------------------------------------------------------
h_log "bad mount points"
# h_mount_fails uses $MNT; point it elsewhere for a moment.
REAL_MNT=$MNT
MNT=$T/missing
h_mount_fails "$SPEC"
h_expect_one_line "$FAIL_OUT" "mountpoint $T/missing: No such file or directory" "missing mount point"
touch "$T/file"
MNT=$T/file
h_mount_fails "$SPEC"
h_expect_one_line "$FAIL_OUT" "is not a directory" "mount point is a file"
MNT=$REAL_MNT
# The background form reports the same line and exits 1.
rc=0
out=$("$TWINFS" "$SPEC" "$T/missing" 2>&1) || rc=$?
((rc == 1)) || h_fail "background mount on a missing mount point exited $rc"
h_expect_one_line "$out" "No such file or directory" "background, missing mount point"

h_mount
h_log "busy mount point and devices in use"
rc=0
out=$("$TWINFS" -f "$SPEC" "$MNT" 2>&1) || rc=$?
((rc == 1)) || h_fail "second mount on the same mount point exited $rc: $out"
h_expect_one_line "$out" "is busy: twinfs is already mounted there" "second mount on the same mount point"
((rc = $(grep -c " $MNT " /proc/self/mountinfo) == 1)) || h_fail "two mounts stacked on $MNT"
mkdir "$T/mnt2"
ln -s "${IMGS[0]}" "$T/alias0.img"
for spec in "$SPEC" "$T/alias0.img:${IMGS[1]}" "${IMGS[1]}:${IMGS[0]}"; do
	rc=0
	out=$("$TWINFS" -f "$spec" "$T/mnt2" 2>&1) || rc=$?
	((rc == 1)) || h_fail "second daemon on $spec exited $rc: $out"
	h_expect_one_line "$out" "in use by another twinfs process" "second daemon on $spec"
	h_is_mounted "$T/mnt2" && h_fail "second daemon on $spec mounted"
done
# mkfs refuses them too, and the first mount is untouched.
"$MKFS" -f "${IMGS[@]}" >"$T/mkfs.out" 2>&1 && h_fail "mkfs -f on mounted devices succeeded"
[[ $(h_sums "$MNT/sig1") == "$sum1" ]] || h_fail "first mount damaged by the refused ones"
h_umount

# Non-empty directory: allowed (libfuse 3 and fusermount3 allow it); the
# files underneath are hidden while mounted and back afterwards.
echo under >"$MNT/underneath"
h_mount
[[ -e $MNT/underneath ]] && h_fail "file under the mount point visible through the mount"
[[ -e $MNT/sig1 ]] || h_fail "mount on a non-empty directory shows the wrong tree"
h_umount
[[ $(cat "$MNT/underneath") == under ]] || h_fail "file under the mount point lost"
rm "$MNT/underneath"

# ---- mount(8) and fstab -----------------------------------------------------------------
# daemon_pid: the daemon mount.fuse3 started in the background for $MNT.
daemon_pid() {
	local pids
	mapfile -t pids < <(h_wait_daemon_pids "$MNT")
	((${#pids[@]} <= 1)) || h_fail "more than one daemon serves $MNT: ${pids[*]}"
	echo "${pids[0]:-}"
}
# umount_and_wait WHAT: umount(8) $MNT, wait for the daemon, check clean.
umount_and_wait() {
	local pid i
	pid=$(daemon_pid)
	[[ -n $pid ]] || h_fail "$1: no daemon found for $MNT"
	umount "$MNT" || h_fail "$1: umount failed"
	for ((i = 0; i < 300; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$pid" 2>/dev/null && h_fail "$1: daemon $pid still running 30 s after umount"
	h_is_mounted "$MNT" && h_fail "$1: still mounted after umount"
	expect_state clean "$1: after umount"
}
MOUNT_FUSE=$(command -v mount.fuse3 || true)
[[ -n $MOUNT_FUSE ]] || for MOUNT_FUSE in /sbin/mount.fuse3 /usr/sbin/mount.fuse3 ""; do
	[[ -x $MOUNT_FUSE ]] && break
done
if [[ -n $MOUNT_FUSE ]]; then
	# What mount(8) runs for -t fuse.twinfs: mount.fuse3 then runs
	# "twinfs SPEC MNT -o OPTS" (generic options added) found in PATH.
	h_log "mount.fuse3 $SPEC $MNT -t fuse.twinfs"
	mkdir "$T/bin"
	ln -s "$TWINFS" "$T/bin/twinfs"
	PATH=$T/bin:$PATH "$MOUNT_FUSE" "$SPEC" "$MNT" -t fuse.twinfs \
		-o rw,noatime,nodev,nosuid,allow_other,x-systemd.automount,comment=x ||
		h_fail "mount.fuse3 -t fuse.twinfs failed"
	h_is_mounted "$MNT" || h_fail "mount.fuse3 returned 0 but nothing is mounted"
	grep " $MNT " /proc/self/mountinfo | grep -q " fuse.twinfs $SPEC " ||
		h_fail "mountinfo does not show fuse.twinfs $SPEC: $(grep " $MNT " /proc/self/mountinfo)"
	grep " $MNT " /proc/self/mountinfo | grep -q "allow_other" || h_fail "allow_other lost"
	[[ $(h_sums "$MNT/sig1") == "$sum1" ]] || h_fail "data differs through mount.fuse3"
	echo fstab >"$MNT/via-mount"
	umount_and_wait "mount.fuse3"

	# mount(8) runs helpers with a fixed PATH, which has /usr/local/bin
	# (where meson install puts twinfs): link ours there for the test
	# unless a twinfs is installed, which we must not shadow.
	LINKED=""
	if [[ ! -e /usr/local/bin/twinfs && -d /usr/local/bin ]] &&
		ln -s "$TWINFS" /usr/local/bin/twinfs 2>/dev/null; then
		LINKED=/usr/local/bin/twinfs
		l_cleanup() {
			local rc=$?
			rm -f "$LINKED"
			(exit "$rc")
			h_cleanup
		}
		trap l_cleanup EXIT
	fi
	if [[ -n $LINKED ]]; then
		h_log "mount -t fuse.twinfs"
		mount -t fuse.twinfs "$SPEC" "$MNT" -o allow_other,noatime ||
			h_fail "mount -t fuse.twinfs failed"
		h_is_mounted "$MNT" || h_fail "mount -t fuse.twinfs returned 0 but nothing is mounted"
		[[ $(cat "$MNT/via-mount") == fstab ]] || h_fail "data differs through mount -t"
		umount_and_wait "mount -t fuse.twinfs"

		h_log "fstab line (mount -T)"
		printf '# twinfs test fstab\n%s  %s  fuse.twinfs  defaults,allow_other,nofail,x-systemd.requires=local-fs.target  0  0\n' \
			"$SPEC" "$MNT" >"$T/fstab"
		mount -T "$T/fstab" "$MNT" || h_fail "mount -T fstab $MNT failed"
		h_is_mounted "$MNT" || h_fail "fstab mount returned 0 but nothing is mounted"
		[[ $(cat "$MNT/via-mount") == fstab ]] || h_fail "data differs through the fstab mount"
		grep " $MNT " /proc/self/mountinfo | grep -q allow_other ||
			h_fail "fstab's allow_other not applied"
		umount_and_wait "fstab mount"
		rm -f "$LINKED"
	else
		h_log "/usr/local/bin/twinfs exists: mount -t and fstab through mount(8) skipped"
	fi
else
	h_log "mount.fuse3 missing: mount -t and fstab skipped"
fi
echo "lifecycle: signals, fusermount3 -u, umount -l, bad mount points, devices in use, mount -t and fstab"
