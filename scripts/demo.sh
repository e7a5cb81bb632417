#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The main job: build twinfs, make two sparse 2 GiB image files, format them
# as one mirrored twinfs, and mount it in the background.  Run it from a
# clone on Debian 12, as root or as an ordinary user (the mount then goes
# through fusermount3, and the build needs its Debian packages already
# installed: scripts/deps.sh as root installs them).  Each run starts from
# fresh images (a previous demo mount is unmounted first).  TWINFS_DEMO_DIR
# overrides /var/tmp/twinfs-demo (root) or /var/tmp/twinfs-demo-USER.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD

if ((EUID != 0)) && ! command -v fusermount3 >/dev/null; then
	echo "demo.sh: fusermount3 is missing; as root run scripts/deps.sh (or: apt-get install fuse3)" >&2
	exit 1
fi

scripts/build.sh
build=$src/${BUILD_DIR:-build}
if ((EUID == 0)); then
	dir=${TWINFS_DEMO_DIR:-/var/tmp/twinfs-demo}
else
	dir=${TWINFS_DEMO_DIR:-/var/tmp/twinfs-demo-$(id -un)}
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
mnt=$dir/mnt
a=$dir/disk0.img
b=$dir/disk1.img

is_mounted() {
	# mountinfo field 5 is the mount point (spaces escaped as \040).
	awk -v m="$1" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo
}

# The daemon holds an exclusive flock on its devices until it has written
# its clean checkpoint and exited; wait for that before reformatting.
wait_unlocked() {
	local img=$1 i
	for ((i = 0; i < 100; i++)); do
		[[ -e $img ]] || return 0
		flock -n "$img" true 2>/dev/null && return 0
		sleep 0.1
	done
	echo "demo.sh: $img is still in use by another process" >&2
	exit 1
}

if is_mounted "$mnt"; then
	echo "demo.sh: unmounting the previous demo at $mnt"
	fusermount3 -u "$mnt" || umount "$mnt"
fi
wait_unlocked "$a"
wait_unlocked "$b"

rm -f "$a" "$b"
truncate -s 2G "$a" "$b"
"$build/mkfs.twinfs" -L twinfs-demo "$a" "$b"

mkdir -p "$mnt"
"$build/twinfs" "$a:$b" "$mnt"
for ((i = 0; i < 100; i++)); do
	is_mounted "$mnt" && break
	sleep 0.1
done
if ! is_mounted "$mnt"; then
	echo "demo.sh: twinfs did not appear at $mnt" >&2
	exit 1
fi

cat <<INFO

twinfs is mounted at $mnt
  devices:   $a
             $b
             (every block is stored on both; either image alone holds the data)
  space:     $(df -h --output=size,avail "$mnt" | tail -n 1 | awk '{print $1 " total, " $2 " free"}')

Unmount:     fusermount3 -u $mnt
Remount:     $build/twinfs $a:$b $mnt
INFO
