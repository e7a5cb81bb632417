# SPDX-License-Identifier: GPL-2.0-or-later
# Description: rsslib.sh: the memory checks the v2 RSS tests share (v2rss,
# v2rssow): the bound (cache + 64 MiB, CACHE_MIB and RSS_MIB override;
# under AddressSanitizer, whose shadow and quarantine make RSS say little,
# 8x plus the quarantine's default 256 MiB: a guard against growth without
# bound only, the bound itself is checked on the normal build), the
# daemon's /proc status fields, and a sampler of a process's peak VmRSS.
# Source after harness.sh.

CACHE_MIB=${CACHE_MIB:-32}
BOUND_MIB=${RSS_MIB:-$((CACHE_MIB + 64))}
if h_asan; then
	BOUND_MIB=$((BOUND_MIB * 8 + 256))
	h_log "AddressSanitizer build: bound $BOUND_MIB MiB"
fi

# status_kib FIELD: the daemon's /proc status field FIELD, in KiB.
status_kib() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$DAEMON_PID/status"; }

# sampler_start PID OUT: the largest VmRSS (KiB) of PID, every 0.1 s, into
# OUT, until sampler_stop or PID ends.  No trap of its own: it would
# replace the harness's cleanup; a sampler left running ends with its
# daemon (its status file goes away).
SAMPLER=
sampler_start() {
	local pid=$1 out=$2
	(
		max=0
		while r=$(awk '$1 == "VmRSS:" { print $2 }' "/proc/$pid/status" 2>/dev/null) && [[ -n $r ]]; do
			((r > max)) && { max=$r; echo "$max" >"$out"; }
			sleep 0.1
		done
	) &
	SAMPLER=$!
}
sampler_stop() {
	[[ -z $SAMPLER ]] || { kill "$SAMPLER" 2>/dev/null; wait "$SAMPLER" 2>/dev/null || true; }
	SAMPLER=
}
