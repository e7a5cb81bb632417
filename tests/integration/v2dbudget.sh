#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: format v2, issue 13: the dirty budget.  With -o cache=16M
# (a 2 MiB soft and 4 MiB hard dirty budget), fallocate 192 GiB over four
# files (98,304 changed map leaves, 800 MiB if nothing were written back)
# and create 20,000 files (changed inodes the cache cannot drop): the
# budget asks for checkpoints (stats dirty.checkpoints), the most dirty
# memory seen stays near the hard mark, and the daemon's peak RSS (VmHWM)
# grows by less than DBUDGET_HWM_MIB over what the mount took.  Then a
# clean unmount, fsck clean, and a remount shows every size and name.
source "$(dirname "$0")/harness.sh"

h_need_fsck
: "${CTL:?CTL must name twinfs-ctl}"
NFALLOC=4
PER=$((48 << 30))
NFILES=20000
HWM_MIB=${DBUDGET_HWM_MIB:-80}
# The issue's bound: cache + 64 MiB (v2rss.sh checks it on a mixed load).
PEAK_MIB=$((16 + 64))
# AddressSanitizer keeps freed memory in quarantine: RSS says nothing there
# (the stats stay the decisive checks; 439 MiB peak in an ASan build).
if h_asan; then
	HWM_MIB=$((HWM_MIB * 8))
	PEAK_MIB=$((PEAK_MIB * 8))
fi

# dirty FIELD: a field of the mounted file system's dirty budget stats.
dirty() {
	"$CTL" raw "$MNT" stats >"$T/stats.json" || h_fail "twinfs-ctl raw stats: $(cat "$T/stats.json")"
	python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("dirty", {}).get(sys.argv[2], -1))' \
		"$T/stats.json" "$1"
}
status_kib() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$DAEMON_PID/status"; }

h_setup 2 256G -O v2
h_mount "" cache=16M
soft=$(dirty soft_bytes)
hard=$(dirty hard_bytes)
((soft == 2 << 20 && hard == 4 << 20)) ||
	h_fail "cache=16M gives dirty marks $soft/$hard, expected 2 MiB/4 MiB"
r0=$(status_kib VmRSS)

h_log "fallocate $((NFALLOC * PER >> 30)) GiB over $NFALLOC files"
for ((i = 0; i < NFALLOC; i++)); do
	fallocate -l $PER "$MNT/f$i" || h_fail "fallocate f$i"
done
h_log "$NFILES files"
python3 - "$MNT" $NFILES <<'PY' || h_fail "creating the files"
import os, sys
m, n = sys.argv[1], int(sys.argv[2])
for d in range(4):
    os.mkdir(os.path.join(m, "d%d" % d))
for i in range(n):
    open(os.path.join(m, "d%d" % (i % 4), "f%d" % i), "w").close()
PY
"$CTL" sync "$MNT" >/dev/null || h_fail "twinfs-ctl sync"

hwm=$(status_kib VmHWM)
ck=$(dirty checkpoints)
mx=$(dirty max_bytes)
h_log "RSS $r0 KiB after the mount, peak $hwm KiB; budget checkpoints $ck," \
	"waits $(dirty waits) (timeouts $(dirty wait_timeouts)), most dirty $mx bytes"
((ck >= 2)) || h_fail "the dirty budget asked for $ck checkpoints"
# The dirty bytes come out of the cache: the node cache (base 8 MiB) gave
# up its budget while leaves past theirs piled up, down to at most what
# the soft mark takes, and took it back after the checkpoints.
nmin=$(dirty node_budget_min_bytes)
h_log "node cache budget at least $nmin bytes, now $(dirty node_budget_bytes)"
((nmin >= 0 && nmin <= (8 << 20) - soft)) ||
	h_fail "the node cache's budget went down to $nmin bytes only (base 8 MiB, soft mark $soft)"
((nmin >= 2 << 20)) || h_fail "the node cache's budget went below its floor (cache/8): $nmin"
# A writer passes the gate before its change: the most seen may pass the
# hard mark by what writers in flight add (a fallocate piece: 64 MiB, 32
# leaves of 8 KiB; a create: one inode).
((mx < hard + (4 << 20))) || h_fail "dirty memory reached $mx bytes (hard mark $hard)"
(((hwm - r0) >> 10 < HWM_MIB)) ||
	h_fail "peak RSS grew by $(((hwm - r0) >> 10)) MiB over the mount's (bound $HWM_MIB MiB)"
((hwm >> 10 < PEAK_MIB)) || h_fail "peak RSS $((hwm >> 10)) MiB (bound $PEAK_MIB MiB)"

h_umount
h_fsck 0 -n "${IMGS[@]}"
h_mount "" cache=16M
for ((i = 0; i < NFALLOC; i++)); do
	s=$(stat -c %s "$MNT/f$i")
	((s == PER)) || h_fail "f$i is $s bytes after the remount, expected $PER"
done
n=$(find "$MNT" -type f -name 'f*' -path '*/d*' | wc -l)
((n == NFILES)) || h_fail "$n files after the remount, expected $NFILES"
h_umount
echo "v2dbudget: all checks passed"
