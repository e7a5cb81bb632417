#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: `twinfs-ctl sync MNT` makes everything written so far durable, although
# sync(1)/syncfs(2) never reach a FUSE daemon: buffered files written with
# no fsync, the background commit pushed out of reach (commit=10 min), the
# sync, then kill -9 of the daemon at once; after a remount every file is
# there with its contents.
source "$(dirname "$0")/harness.sh"
: "${CTL:?CTL must name the twinfs-ctl binary}"

h_setup 2 512M
h_mount "" commit=600000
mkdir "$MNT/d"
for i in $(seq 1 40); do
	head -c $(((i * 7919) % 300000 + 1)) /dev/urandom >"$MNT/d/f$i"
done
ln -s f1 "$MNT/d/link"
(cd "$MNT/d" && sha256sum f* >"$T/sums")
"$CTL" sync "$MNT" || h_fail "twinfs-ctl sync failed"
kill -9 "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null || true
DAEMON_PID=""
rm -f "$T/daemon.pid"
fusermount3 -u -z "$MNT" 2>/dev/null || umount -l "$MNT"

h_mount
[[ -d $MNT/d ]] || h_fail "directory made before the sync is gone after kill -9"
[[ $(readlink "$MNT/d/link") == f1 ]] || h_fail "symlink made before the sync is gone"
(cd "$MNT/d" && sha256sum --quiet -c "$T/sums") || h_fail "files synced before kill -9 differ"
h_umount
echo "sync: 40 buffered files and a symlink survived kill -9 right after twinfs-ctl sync"
