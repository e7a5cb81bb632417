#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: twinfs as a container volume, with bubblewrap standing in for the
# container runtime: processes in new user, mount and pid namespaces get
# the host's twinfs mount point bind-mounted at /vol, as root and as an
# ordinary user (as themselves and as the container's root), write and
# read there and see ownership through their uid map (unmapped ids show as
# the overflow id 65534).  Without allow_other a container whose root is
# another host uid cannot enter.  The daemon also runs inside such a
# container (/dev/fuse passed in, mounting from within the user
# namespace), and under a seccomp filter that refuses io_uring like
# Docker's default profile, where it must fall back to libaio by itself.
source "$(dirname "$0")/harness.sh"
source "$(dirname "$0")/userlib.sh"

command -v bwrap >/dev/null || { echo "SKIP: bwrap (bubblewrap) is missing"; exit 77; }
A=twinfs-it-ca
B=twinfs-it-cb
u_adduser "$A"
u_adduser "$B"
u_need_fusermount
UA=$(id -u "$A")
UB=$(id -u "$B")
OVERFLOW=$(cat /proc/sys/kernel/overflowuid)

# The binaries, where every user can run them (the build dir may not be).
mkdir -m 0755 "$T/bin"
cp "$TWINFS_BIN" "$MKFS" "$T/bin/"
chmod 0755 "$T/bin"/*
# box USER [BWRAP ARGS...] -- CMD...: a minimal container around CMD.
box() {
	local u=$1
	shift
	u_run "$u" bwrap --unshare-user --unshare-pid --unshare-ipc --unshare-uts \
		--die-with-parent --ro-bind /usr /usr --symlink usr/bin /bin \
		--symlink usr/sbin /sbin --symlink usr/lib /lib \
		$([[ -e /usr/lib64 ]] && echo --symlink usr/lib64 /lib64) \
		--ro-bind /etc/passwd /etc/passwd --ro-bind /etc/group /etc/group \
		--proc /proc --dev /dev --tmpfs /tmp --ro-bind "$T/bin" /opt/twinfs "$@"
}
# vol USER [BWRAP ARGS...] -- CMD...: box with the mount as /vol.
vol() {
	local u=$1
	shift
	box "$u" --bind "$MNT" /vol "$@"
}

h_setup 2 256M
h_mount "" allow_other
chmod 0777 "$MNT"
echo host >"$MNT/rootfile"
u_ok "$A" "host file of A" sh -c 'echo a >"$1/afile"' sh "$MNT"

# ---- root's container ------------------------------------------------------------------
h_log "container of root (uid map 0 -> 0)"
out=$(vol root -- sh -c '
	set -e
	id -u
	echo from-root-box >/vol/c-root
	cat /vol/c-root
	stat -c "%u:%g" /vol/c-root /vol/rootfile /vol/afile
' 2>&1) || h_fail "root's container: $out"
[[ $out == $'0\nfrom-root-box\n0:0\n0:0\n'"$OVERFLOW:$OVERFLOW" ]] ||
	h_fail "root's container sees: $out"
[[ $(stat -c %u:%g "$MNT/c-root") == 0:0 ]] || h_fail "root's container wrote as $(stat -c %u:%g "$MNT/c-root")"

# ---- an ordinary user's container, as the container's root ------------------------
h_log "container of $A as its root (uid map 0 -> $UA)"
out=$(vol "$A" --uid 0 --gid 0 -- sh -c '
	set -e
	id -u
	echo from-a-box >/vol/c-a
	cat /vol/c-a /vol/rootfile
	stat -c "%u:%g" /vol/c-a /vol/afile /vol/rootfile
	if echo x >>/vol/rootfile; then echo wrote-root-file; fi
	if chown 0:0 /vol/c-root; then echo chowned; fi
' 2>&1) || h_fail "$A's container: $out"
grep -q "wrote-root-file\|chowned" <<<"$out" && h_fail "$A's container root acted as host root: $out"
exp=$'0\nfrom-a-box\nhost\n0:0\n0:0\n'"$OVERFLOW:$OVERFLOW"
[[ $(grep -v "Permission denied\|Operation not permitted\|Invalid argument" <<<"$out") == "$exp" ]] ||
	h_fail "$A's container (as its root) sees: $out"
[[ $(stat -c %u:%g "$MNT/c-a") == "$UA:$UA" ]] ||
	h_fail "$A's container root wrote as $(stat -c %u:%g "$MNT/c-a"), not $UA:$UA"
[[ $(cat "$MNT/rootfile") == host ]] || h_fail "$A's container changed root's file"

h_log "container of $A as itself"
out=$(vol "$A" -- sh -c 'id -u; echo me >/vol/c-a2; stat -c "%u:%g" /vol/c-a2 /vol/rootfile' 2>&1) ||
	h_fail "$A's container as itself: $out"
[[ $out == "$UA"$'\n'"$UA:$UA"$'\n'"$OVERFLOW:$OVERFLOW" ]] || h_fail "$A's container as itself sees: $out"

# Another user's container root cannot write A's files either.
u_ok "$A" "chmod" chmod 0644 "$MNT/afile"
out=$(vol "$B" --uid 0 --gid 0 -- sh -c 'stat -c "%u" /vol/afile; echo b >>/vol/afile' 2>&1) &&
	h_fail "$B's container root wrote $A's 0644 file: $out"
grep -q "Permission denied" <<<"$out" || h_fail "$B's container root: $out"
h_umount

# ---- without allow_other ------------------------------------------------------------------
h_log "root's mount without allow_other: other containers stay out"
h_mount "" ""
out=$(vol "$A" --uid 0 --gid 0 -- ls /vol 2>&1) && h_fail "$A's container entered without allow_other: $out"
grep -q "Permission denied" <<<"$out" || h_fail "$A's container without allow_other: $out"
out=$(vol root -- ls /vol 2>&1) || h_fail "root's own container (same uid) kept out: $out"
h_umount

h_log "$A's mount without allow_other: $A's container root enters, root's does not"
u_fuse_mode 0666
mkdir -m 0755 "$T/ua"
chown "$A:$A" "$T/ua" "$MNT"
u_ok "$A" "images" sh -c 'truncate -s 256M "$1/a.img" "$1/b.img" && "$2" "$1/a.img" "$1/b.img" >/dev/null' sh "$T/ua" "$MKFS"
USPEC=$T/ua/a.img:$T/ua/b.img
TWINFS=$(u_wrapper "$A") h_mount "$USPEC" ""
out=$(vol "$A" --uid 0 --gid 0 -- sh -c 'echo in >/vol/x && stat -c %u /vol/x' 2>&1) ||
	h_fail "$A's container root kept out of $A's own mount: $out"
[[ $out == 0 ]] || h_fail "$A's container root sees its file as uid $out"
out=$(vol root -- ls /vol 2>&1) && h_fail "root's container entered $A's mount without allow_other"
grep -q "Permission denied" <<<"$out" || h_fail "root's container on $A's mount: $out"
u_ok "$A" "fusermount3 -u" fusermount3 -u "$MNT"
h_umount
u_user_allow_other on
TWINFS=$(u_wrapper "$A") h_mount "$USPEC" allow_other
out=$(vol root -- cat /vol/x 2>&1) || h_fail "root's container kept out despite allow_other: $out"
u_ok "$A" "fusermount3 -u" fusermount3 -u "$MNT"
h_umount

# ---- the daemon inside a container -------------------------------------------------------------
# Like docker run --device /dev/fuse --cap-add SYS_ADMIN: the container's
# root mounts from inside its own user namespace.  Ids on disk are the
# container's (root of the container = 0).
h_log "daemon inside $A's container"
out=$(box "$A" --uid 0 --gid 0 --cap-add CAP_SYS_ADMIN --dev-bind /dev/fuse /dev/fuse \
	--bind "$T/ua" /data -- sh -c '
	set -e
	truncate -s 256M /data/c.img /data/d.img
	/opt/twinfs/mkfs.twinfs /data/c.img /data/d.img >/dev/null
	mkdir /tmp/m
	/opt/twinfs/twinfs /data/c.img:/data/d.img /tmp/m
	grep -q " /tmp/m .* fuse.twinfs " /proc/self/mountinfo
	echo inside >/tmp/m/inside
	mkdir /tmp/m/dir
	stat -c "%u:%g" /tmp/m/inside /tmp/m/dir
	# The daemon by its argv (the mount point), never by name.
	left() {
		for p in /proc/[0-9]*; do
			{ tr "\0" "\n" <$p/cmdline; } 2>/dev/null | grep -qxF /tmp/m && echo ${p#/proc/}
		done
	}
	[ -n "$(left)" ] || echo no-daemon
	umount /tmp/m
	for i in $(seq 300); do [ -n "$(left)" ] || break; sleep 0.1; done
	[ -z "$(left)" ] || echo daemon-left
	echo done
' 2>&1) || h_fail "daemon inside a container: $out"
[[ $out == $'0:0\n0:0\ndone' ]] || h_fail "daemon inside a container: $out"
[[ $(stat -c %U "$T/ua/c.img") == "$A" ]] || h_fail "the container's images are not $A's on the host"
# On disk the ids are the container's: its root is uid 0, which is what
# the host's root sees when mounting the images itself.
h_mount "$T/ua/c.img:$T/ua/d.img" ""
[[ $(cat "$MNT/inside") == inside ]] || h_fail "file written inside the container lost"
[[ $(stat -c %u:%g "$MNT/inside") == 0:0 ]] ||
	h_fail "file written by the container's root is $(stat -c %u:%g "$MNT/inside") on disk"
h_umount

# ---- io_uring refused by seccomp -------------------------------------------------------------
if [[ -n ${NOURING:-} && -x $NOURING ]]; then
	h_log "io_uring refused by seccomp: automatic libaio fallback"
	# The filter must work: io_uring really is refused under it.
	TWINFS_SAVED=$TWINFS_BIN
	printf '#!/bin/sh\nexec 9>&-\nexec "%s" "%s" "$@"\n' "$NOURING" "$TWINFS_SAVED" >"$T/twinfs-nouring"
	chmod 0755 "$T/twinfs-nouring"
	TWINFS=$T/twinfs-nouring h_mount_fails "$(h_devspec "${IMGS[@]}")" backend=uring
	grep -qi "operation not permitted\|io_uring" <<<"$FAIL_OUT" ||
		h_fail "backend=uring under the filter failed unclearly: $FAIL_OUT"
	TWINFS=$T/twinfs-nouring h_mount "" ""
	grep -q "backend libaio" "$DAEMON_LOG" || h_fail "not on libaio under the filter: $(cat "$DAEMON_LOG")"
	head -c 2000000 /dev/urandom >"$T/r"
	cp "$T/r" "$MNT/aio-file"
	dd if="$T/r" of="$MNT/aio-direct" bs=64k oflag=direct status=none
	if [[ -x ${CTL:-} ]] && "$CTL" -h >/dev/null 2>&1; then
		"$CTL" status "$MNT" | grep -q "backend libaio" ||
			h_fail "twinfs-ctl status does not say libaio: $("$CTL" status "$MNT" 2>&1)"
	fi
	h_remount
	cmp "$T/r" "$MNT/aio-file" || h_fail "libaio: data differs after remount"
	cmp "$T/r" "$MNT/aio-direct" || h_fail "libaio: O_DIRECT data differs after remount"
	h_umount
else
	h_log "NOURING not built: seccomp fallback skipped"
fi
echo "container: bubblewrap volumes as root and as a user, uid maps, allow_other, daemon inside a container, io_uring seccomp fallback"
