#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: format v2, issue 13: changed map leaves kept compact
# (lib/extcompact.c, -o compact_dirty) lose nothing.  With -o cache=32M (an 8 MiB leaf
# budget, ~1,000 full leaves), a 48 GiB fallocate (24,576 leaves) and
# NWRITES random 4 KiB O_DIRECT overwrites (fio, two jobs, crc32c verify
# headers): the writes' leaves past the budget are made compact
# (extent_cache.compactions), and reading them back expands them
# (expansions).  The data reads back right while mounted, after kill -9
# (the log replayed into compact leaves) and after a clean unmount, and
# fsck finds nothing.
source "$(dirname "$0")/harness.sh"

: "${CTL:?CTL must name twinfs-ctl}"
command -v fio >/dev/null || { echo "SKIP: fio is not installed"; exit 77; }
BIG=$((48 << 30))
NWRITES=${NWRITES:-20000}

# fio_pass OUT [fio options]: the overwrites (or, with --verify_only, their check).
fio_pass() {
	local out=$1
	shift
	fio --name=cw --filename="$MNT/big" --rw=randwrite --bs=4k --direct=1 --ioengine=psync \
		--numjobs=2 --number_ios=$((NWRITES / 2)) --size=$BIG --randrepeat=1 --randseed=31 \
		--norandommap --group_reporting --verify=crc32c --verify_state_save=0 "$@" \
		>"$out" 2>&1 || { cat "$out"; h_fail "fio $*"; }
}

# xc FIELD: extent_cache.FIELD of the stats.
xc() {
	"$CTL" raw "$MNT" stats | python3 -c "import json, sys; print(json.load(sys.stdin)['extent_cache']['$1'])"
}

h_setup 2 64G -O v2
h_need_fsck
h_mount "" cache=32M,compact_dirty
h_log "fallocate $((BIG >> 30)) GiB"
fallocate -l $BIG "$MNT/big" || h_fail "fallocate"
"$CTL" sync "$MNT" >/dev/null || h_fail "twinfs-ctl sync"
h_log "$NWRITES random 4 KiB O_DIRECT overwrites"
fio_pass "$T/fio.w" --do_verify=0
made=$(xc compactions)
h_log "compact leaves: $(xc compact) ($(xc compact_bytes) bytes), $made made, full leaves $(xc leaves)"
((made > 1000)) || h_fail "only $made leaves made compact"
fio_pass "$T/fio.v1" --verify_only
exp=$(xc expansions)
h_log "read back while mounted: $exp expansions"
((exp > 0)) || h_fail "reading compact leaves expanded none"
# O_DIRECT writes are durable at the next commit (commit=, 5 s) or
# fsync: made so now, and the kill comes before any checkpoint of them.
"$CTL" sync "$MNT" >/dev/null || h_fail "twinfs-ctl sync"
h_log "kill -9 with $(xc compact) compact leaves, remount (replay), verify"
h_crash
h_mount "" cache=32M,compact_dirty
fio_pass "$T/fio.v2" --verify_only
h_umount
h_fsck 0 -n "${IMGS[@]}"
h_mount "" cache=32M,compact_dirty
fio_pass "$T/fio.v3" --verify_only
h_umount
echo "v2compact: all checks passed"
