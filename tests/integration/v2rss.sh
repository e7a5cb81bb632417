#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: format v2, issue 13: the daemon's RSS stays within -o cache=
# plus 64 MiB.  With -o cache=32M on two 128 GiB sparse images: 30,000
# creates, a 96 GiB fallocate, 20,000 random 4 KiB writes into it (each
# one a request: the file is a direct open), then a clean unmount and a
# cold walk (stat of every file, SEEK_DATA over the big one) on a new
# mount.  A sampler reads VmRSS every 0.1 s; the peak sampled and VmHWM of
# both daemons must stay under 32 + 64 MiB (RSS_MIB to measure another
# bound).  RSS_MEASURE_ONLY=1 only prints the peaks (to measure main).
source "$(dirname "$0")/harness.sh"

: "${CTL:?CTL must name twinfs-ctl}"
source "$(dirname "$0")/rsslib.sh"
NFILES=30000
BIG=$((96 << 30))
NWRITES=20000

# check WHAT: the peaks of the daemon mounted now against the bound.
PEAKS=()
check() {
	local hwm samp
	hwm=$(status_kib VmHWM)
	samp=$(cat "$T/rss.max" 2>/dev/null || echo 0)
	h_log "$1: VmRSS $(($(status_kib VmRSS) >> 10)) MiB, sampled peak $((samp >> 10)) MiB," \
		"VmHWM $((hwm >> 10)) MiB (bound $BOUND_MIB MiB)"
	"$CTL" raw "$MNT" stats >"$T/stats.json" || h_fail "twinfs-ctl raw stats"
	python3 - "$T/stats.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
nc, xc, ic, dy = d["node_cache"], d["extent_cache"], d["icache"], d["dirty"]
print("  node cache %d/%d KiB, leaves %d/%d KiB, inodes %d/%d, dirty max %d KiB (hard %d KiB)" %
      (nc["bytes"] >> 10, nc["budget_bytes"] >> 10, xc["bytes"] >> 10, xc["budget_bytes"] >> 10,
       ic["resident"], ic["max"], dy["max_bytes"] >> 10, dy["hard_bytes"] >> 10))
PY
	PEAKS+=("$1: sampled $((samp >> 10)) MiB, VmHWM $((hwm >> 10)) MiB")
	[[ -n ${RSS_MEASURE_ONLY:-} ]] && return 0
	((hwm >> 10 <= BOUND_MIB)) || h_fail "$1: peak RSS (VmHWM) $((hwm >> 10)) MiB, bound $BOUND_MIB MiB"
	((samp >> 10 <= BOUND_MIB)) || h_fail "$1: sampled RSS $((samp >> 10)) MiB, bound $BOUND_MIB MiB"
}

h_setup 2 128G -O v2
h_mount "" cache=${CACHE_MIB}M
sampler_start "$DAEMON_PID" "$T/rss.max"

h_log "$NFILES files"
python3 - "$MNT" $NFILES <<'PY' || h_fail "creating the files"
import os, sys
m, n = sys.argv[1], int(sys.argv[2])
for d in range(3):
    os.mkdir(os.path.join(m, "d%d" % d))
for i in range(n):
    open(os.path.join(m, "d%d" % (i % 3), "f%d" % i), "w").close()
PY
h_log "fallocate $((BIG >> 30)) GiB"
fallocate -l $BIG "$MNT/big" || h_fail "fallocate"
h_log "$NWRITES random 4 KiB writes"
python3 - "$MNT/big" $BIG $NWRITES <<'PY' || h_fail "random writes"
import os, random, sys
path, size, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rnd = random.Random(13)
fd = os.open(path, os.O_WRONLY)
blk = bytes(range(256)) * 16
for i in range(n):
    os.pwrite(fd, blk, rnd.randrange(size >> 12) << 12)
os.fsync(fd)
os.close(fd)
PY
"$CTL" sync "$MNT" >/dev/null || h_fail "twinfs-ctl sync"
check "creates, fallocate, writes"
sampler_stop
h_umount

h_mount "" cache=${CACHE_MIB}M
rm -f "$T/rss.max"
sampler_start "$DAEMON_PID" "$T/rss.max"
h_log "cold walk"
python3 - "$MNT" $NFILES $NWRITES <<'PY' || h_fail "cold walk"
import os, sys
m, nfiles, nwrites = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
n = 0
for root, dirs, files in os.walk(m):
    for f in files:
        os.stat(os.path.join(root, f))
        n += 1
if n != nfiles + 1:
    sys.exit("walk found %d files, expected %d" % (n, nfiles + 1))
fd = os.open(os.path.join(m, "big"), os.O_RDONLY)
off, runs = 0, 0
try:
    while True:
        off = os.lseek(fd, off, os.SEEK_DATA)
        runs += 1
        off = os.lseek(fd, off, os.SEEK_HOLE)
except OSError:
    pass
os.close(fd)
# A fallocated range reads as data (unwritten extents count as data here
# or not, depending on SEEK_DATA's rules): only that the walk ends.
print("walked %d files, %d data runs" % (n, runs))
PY
check "cold walk after remount"
sampler_stop
h_umount
printf '  %s\n' "${PEAKS[@]}"
echo "v2rss: all checks passed"
