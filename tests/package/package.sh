#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: dpkg-buildpackage builds a .deb from this tree; installed, it
# puts the binaries, man pages, bash completion and systemd example in their
# places, and `mount -t fuse.twinfs` and an fstab line mount a mirror with
# them.  The package is purged again at the end.
set -euo pipefail
SRC=${SRC:?SRC must name the source tree}

if ((EUID != 0)); then
	echo "SKIP: installing a package needs root"
	exit 77
fi
if [[ ! -c /dev/fuse ]]; then
	echo "SKIP: /dev/fuse is absent"
	exit 77
fi
for t in dpkg-buildpackage dh; do
	if ! command -v $t >/dev/null; then
		echo "SKIP: $t is missing (scripts/deps.sh installs dpkg-dev and debhelper)"
		exit 77
	fi
done
if dpkg-query -W -f='${Status}' twinfs 2>/dev/null | grep -q "install ok installed"; then
	echo "SKIP: a twinfs package is already installed on this machine; not replacing it"
	exit 77
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/twinfs-pkg.XXXXXX")
installed=0
daemon_pid=""
cleanup() {
	set +e
	if mountpoint -q "$T/mnt"; then umount "$T/mnt"; fi
	if [[ -n $daemon_pid ]]; then
		for ((i = 0; i < 100; i++)); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$daemon_pid" 2>/dev/null
	fi
	((installed)) && dpkg --purge twinfs >/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# A copy of the tree without build directories or git metadata, so the
# package is built from exactly what is checked out here.
mkdir "$T/src"
tar -C "$SRC" --exclude=./.git --exclude='./build*' --exclude=./obj-* --exclude=./debian/twinfs \
	-cf - . | tar -C "$T/src" -xf -
echo "building the package (log: $T/build.log)"
if ! (cd "$T/src" && DEB_BUILD_OPTIONS=nocheck dpkg-buildpackage -us -uc -b) >"$T/build.log" 2>&1; then
	tail -n 30 "$T/build.log"
	fail "dpkg-buildpackage failed"
fi
deb=$(ls "$T"/twinfs_*.deb)
[[ -f $deb ]] || fail "no .deb was built"

# What the package holds, before installing it.
contents=$(dpkg-deb -c "$deb" | awk '{print $6}')
for f in ./usr/bin/twinfs ./usr/bin/twinfs-ctl ./usr/sbin/mkfs.twinfs ./usr/sbin/fsck.twinfs \
	./usr/share/man/man8/twinfs.8.gz ./usr/share/man/man8/mkfs.twinfs.8.gz \
	./usr/share/man/man8/fsck.twinfs.8.gz ./usr/share/man/man8/twinfs-ctl.8.gz \
	./usr/share/bash-completion/completions/twinfs-ctl \
	./usr/share/doc/twinfs/examples/srv-data.mount; do
	grep -qx -- "$f" <<<"$contents" || fail "the package lacks $f"
done

dpkg -i "$deb" >"$T/install.log" 2>&1 || { cat "$T/install.log"; fail "dpkg -i failed"; }
installed=1
[[ $(command -v twinfs) == /usr/bin/twinfs ]] || fail "twinfs is not /usr/bin/twinfs after install"

# mount -t fuse.twinfs (mount.fuse3 runs /usr/bin/twinfs), then an fstab
# line (from a private fstab, not /etc/fstab).
truncate -s 256M "$T/a.img" "$T/b.img"
mkfs.twinfs -L pkgtest "$T/a.img" "$T/b.img" >/dev/null
mkdir "$T/mnt"
mount_and_check() {
	local what=$1
	mountpoint -q "$T/mnt" || fail "$what: nothing mounted on $T/mnt"
	grep -q " $T/mnt fuse.twinfs " /proc/mounts || fail "$what: $T/mnt is not fuse.twinfs"
	echo "hello from $what" >"$T/mnt/$what"
	twinfs-ctl status "$T/mnt" >/dev/null || fail "$what: twinfs-ctl status failed"
	twinfs-ctl sync "$T/mnt" || fail "$what: twinfs-ctl sync failed"
	daemon_pid=$(pgrep -f -n "^twinfs $T/a.img:$T/b.img" || true)
	umount "$T/mnt"
	# The daemon writes its final checkpoint after the unmount; wait for it.
	for ((i = 0; i < 100; i++)); do
		flock -n "$T/a.img" true 2>/dev/null && break
		sleep 0.1
	done
	daemon_pid=""
}
mount -t fuse.twinfs "$T/a.img:$T/b.img" "$T/mnt" || fail "mount -t fuse.twinfs failed"
mount_and_check mount-t
echo "$T/a.img:$T/b.img $T/mnt fuse.twinfs defaults,allow_other,nofail 0 0" >"$T/fstab"
mount --fstab "$T/fstab" "$T/mnt" || fail "mount from an fstab line failed"
mount_and_check fstab

fsck.twinfs -n "$T/a.img" "$T/b.img" >"$T/fsck.log" || { cat "$T/fsck.log"; fail "fsck.twinfs -n found errors"; }
mount -t fuse.twinfs "$T/a.img:$T/b.img" "$T/mnt"
for f in mount-t fstab; do
	[[ $(cat "$T/mnt/$f") == "hello from $f" ]] || fail "$f does not read back after remount"
done
# mount -o remount,ro runs the helper again (twinfs changes the flags of
# the mount there and exits), and back to rw.
mount -o remount,ro "$T/mnt" || fail "mount -o remount,ro failed"
grep -q " $T/mnt fuse.twinfs ro," /proc/mounts || fail "remount,ro left $T/mnt writable"
if touch "$T/mnt/ro" 2>/dev/null; then fail "a write succeeded on the read-only remount"; fi
mount -o remount,rw "$T/mnt" || fail "mount -o remount,rw failed"
touch "$T/mnt/rw" || fail "no write after remount,rw"
umount "$T/mnt"
for ((i = 0; i < 100; i++)); do
	flock -n "$T/a.img" true 2>/dev/null && break
	sleep 0.1
done
man -w twinfs >/dev/null 2>&1 || [[ -f /usr/share/man/man8/twinfs.8.gz ]] || fail "man page not installed"
echo "package: built, installed, mounted by mount -t and by fstab, remounted ro and rw, purged"
