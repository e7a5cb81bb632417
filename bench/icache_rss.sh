#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Daemon RSS of a format v2 mount with N files (default 200,000 empty files
# in 200 directories): after the mount, after a stat of every file, and
# after the kernel forgot them (drop_caches) and a checkpoint ran, for
# each daemon given (twinfs binaries; a binary of main loads every inode
# at mount).  Each daemon mounts the same images in turn with its options.
#
# Usage: bench/icache_rss.sh [-n N] BUILD_DIR "LABEL:BINARY:OPTS" ...
#   e.g. bench/icache_rss.sh build "lazy-32M:build/twinfs:cache=32M" \
#        "main:/tmp/main-twinfs:"
set -euo pipefail
N=200000
if [[ ${1:-} == -n ]]; then
	N=$2
	shift 2
fi
B=$1
shift
W=$(mktemp -d /tmp/icache-rss.XXXXXX)
trap 'fusermount3 -u "$W/mnt" 2>/dev/null || true; rm -rf "$W"' EXIT
mkdir "$W/mnt"
truncate -s 4G "$W/a.img" "$W/b.img"
"$B/mkfs.twinfs" -O v2 "$W/a.img" "$W/b.img" >/dev/null

rss() { awk '/VmRSS/ { print $2 }' "/proc/$1/status"; }
daemon_pid() {	# the daemon serving $W/mnt (whatever its binary is called)
	pgrep -f -- "$W/a.img:$W/b.img $W/mnt" | head -1
}
wait_exit() { while kill -0 "$1" 2>/dev/null; do sleep 0.2; done; }

"$B/twinfs" "$W/a.img:$W/b.img" "$W/mnt"
python3 - "$W/mnt" "$N" <<'PY'
import os, sys
m, n = sys.argv[1], int(sys.argv[2])
per = 1000
for d in range((n + per - 1) // per):
    dp = os.path.join(m, "d%d" % d)
    os.mkdir(dp)
    for i in range(min(per, n - d * per)):
        os.close(os.open(os.path.join(dp, "f%d" % i), os.O_CREAT | os.O_WRONLY, 0o644))
PY
pid=$(daemon_pid)
fusermount3 -u "$W/mnt"
wait_exit "$pid"

printf '%-14s %12s %12s %12s %10s\n' daemon mount_KiB stat_KiB forgot_KiB stat_s
for spec in "$@"; do
	IFS=: read -r label bin opts <<<"$spec"
	if [[ -n $opts ]]; then
		"$bin" "$W/a.img:$W/b.img" "$W/mnt" -o "$opts"
	else
		"$bin" "$W/a.img:$W/b.img" "$W/mnt"
	fi
	pid=$(daemon_pid)
	r0=$(rss "$pid")
	t0=$(date +%s.%N)
	python3 - "$W/mnt" <<'PY'
import os, sys
for root, dirs, files in os.walk(sys.argv[1]):
    for f in files:
        os.stat(os.path.join(root, f))
PY
	t1=$(date +%s.%N)
	r1=$(rss "$pid")
	sync
	echo 2 >/proc/sys/vm/drop_caches
	sleep 1
	"$B/twinfs-ctl" raw "$W/mnt" checkpoint >/dev/null
	r2=$(rss "$pid")
	printf '%-14s %12s %12s %12s %10.1f\n' "$label" "$r0" "$r1" "$r2" "$(echo "$t1 - $t0" | bc)"
	fusermount3 -u "$W/mnt"
	wait_exit "$pid"
done
