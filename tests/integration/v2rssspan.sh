#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: format v2, issue 13: the daemon's memory does not grow with
# the span of a file.  With -o cache=32M, NWRITES random 4 KiB O_DIRECT
# writes (fio, two jobs) into a 64 TiB sparse file: one every few GiB, so
# nearly every write's leaf needs an interior node of its own (4 KiB, one
# per GiB of span).  Checks:
# - the daemon's RSS (sampled every 0.1 s, and VmHWM) stays under the
#   cache plus 64 MiB (main kept every interior node until the inode left
#   memory: VmHWM 123 MiB here against 59, medians of 3; 3.5 TiB
#   fallocated held 14.5 MiB);
# - the evictor freed them with their leaves (extent_cache.inner_freed)
#   and what is left of them after a checkpoint fits the leaves' budget
#   (before it, changed leaves keep theirs: kept compact, a changed leaf
#   costs ~150 bytes and its node 4 KiB, so the dirty budget, not the
#   leaves' one, bounds them then: 11.8 MiB against 8 seen);
# - after a remount the file reads back what was written (fio verify),
#   and reading it all again keeps the same bound.
source "$(dirname "$0")/harness.sh"

: "${CTL:?CTL must name twinfs-ctl}"
command -v fio >/dev/null || { echo "SKIP: fio is not installed"; exit 77; }
source "$(dirname "$0")/rsslib.sh"
SPAN=$((64 << 40))
NWRITES=${NWRITES:-24000}

h_setup 2 2G -O v2
h_mount "" cache=${CACHE_MIB}M
truncate -s $SPAN "$MNT/sparse" || h_fail "truncate"

# fio_pass OUT [fio options]: the writes (or, with --verify_only, their check).
fio_pass() {
	local out=$1
	shift
	fio --name=span --filename="$MNT/sparse" --rw=randwrite --bs=4k --direct=1 \
		--ioengine=psync --numjobs=2 --number_ios=$((NWRITES / 2)) --size=$SPAN \
		--randrepeat=1 --randseed=21 --norandommap --group_reporting --verify=crc32c \
		--verify_state_save=0 "$@" >"$out" 2>&1 || { cat "$out"; h_fail "fio $*"; }
}

# check WHAT: the sampled peak and VmHWM under the bound, the interior
# nodes freed and within the leaves' budget.
check() {
	local hwm samp
	"$CTL" sync "$MNT" >/dev/null || h_fail "twinfs-ctl sync"
	"$CTL" raw "$MNT" checkpoint >/dev/null || h_fail "twinfs-ctl raw checkpoint"
	sampler_stop
	hwm=$(status_kib VmHWM)
	samp=$(cat "$T/rss.max" 2>/dev/null || echo 0)
	"$CTL" raw "$MNT" stats >"$T/stats.json" || h_fail "twinfs-ctl raw stats"
	h_log "$1: VmRSS $(($(status_kib VmRSS) >> 10)) MiB, sampled peak $((samp >> 10)) MiB, VmHWM $((hwm >> 10)) MiB (bound $BOUND_MIB MiB)"
	((hwm >> 10 <= BOUND_MIB)) || h_fail "$1: peak RSS (VmHWM) $((hwm >> 10)) MiB, bound $BOUND_MIB MiB"
	((samp >> 10 <= BOUND_MIB)) || h_fail "$1: sampled RSS $((samp >> 10)) MiB, bound $BOUND_MIB MiB"
	python3 - "$T/stats.json" "$1" <<'PY' || h_fail "$1: interior nodes"
import json, sys
x = json.load(open(sys.argv[1]))["extent_cache"]
print("  leaves %d KiB, interior nodes %d KiB, budget %d KiB, interior nodes freed %d" %
      (x["bytes"] >> 10, x.get("inner_bytes", -1024) >> 10, x["budget_bytes"] >> 10,
       x.get("inner_freed", -1)))
if "inner_freed" not in x:
    sys.exit("no extent_cache.inner_freed in the stats")
if x["inner_freed"] < 1000:
    sys.exit("%s: only %d interior nodes freed" % (sys.argv[2], x["inner_freed"]))
if x["inner_bytes"] > x["budget_bytes"]:
    sys.exit("interior nodes hold %d KiB, past the leaves' budget" % (x["inner_bytes"] >> 10))
PY
}

sampler_start "$DAEMON_PID" "$T/rss.max"
h_log "$NWRITES random 4 KiB O_DIRECT writes over $((SPAN >> 40)) TiB"
fio_pass "$T/fio.out" --do_verify=0
check writes
h_umount
h_mount "" cache=${CACHE_MIB}M
sampler_start "$DAEMON_PID" "$T/rss.max"
h_log "verify the writes after a remount"
fio_pass "$T/fio.verify" --verify_only
check "reads after a remount"
h_umount
echo "v2rssspan: all checks passed"
