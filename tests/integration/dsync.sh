#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: O_DSYNC/O_SYNC opens on the default mount are direct opens (their
# writes go around the page cache, as under -o writethrough), stay coherent
# with buffered opens and shared maps of the same file (an fsx-like random
# run checks every byte through every view, then reads back with O_DIRECT),
# and stay durable: a writer acknowledging every O_DSYNC write, with no
# fsync, is killed with the daemon (kill -9) and each mirror alone must hold
# every acknowledged record.
source "$(dirname "$0")/harness.sh"
: "${MIXCHECK:?}" "${KILLWRITER:?}"

h_setup 2 512M
for opts in "" "writethrough" "no_writeback_cache"; do
	h_log "==== O_DSYNC opens${opts:+ with -o $opts}"
	h_mount "" "$opts"
	if ! grep -q "DIRECT_IO_ALLOW_MMAP" "$DAEMON_LOG"; then
		"$MIXCHECK" direct "$MNT/d" || h_fail "an O_DSYNC open's writes went to the page cache${opts:+ (-o $opts)}"
	fi
	for seed in 1 2; do
		"$MIXCHECK" fsx "$MNT/x$seed" "$seed" 2000 ||
			h_fail "O_DSYNC, buffered and mmap views disagree (seed $seed${opts:+, -o $opts})"
	done
	rm -f "$MNT"/x* "$MNT/d"
	h_umount
done

h_log "==== kill -9 after O_DSYNC writes"
h_mount "" ""
"$KILLWRITER" write-dsync "$MNT/k" "$T/ack.k" 7 2>/dev/null &
w=$!
sleep 1.5
kill -9 "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null || true
wait "$w" || true
DAEMON_PID=""
rm -f "$T/daemon.pid"
fusermount3 -u -z "$MNT" 2>/dev/null || umount -l "$MNT"
acked=$(tail -n 1 "$T/ack.k" 2>/dev/null | awk '{print $2}')
[[ ${acked:-0} -gt 0 ]] || h_fail "the O_DSYNC writer acknowledged nothing in 1.5 s"
for img in "${IMGS[@]}"; do
	h_mount "$img" degraded
	"$KILLWRITER" check "$MNT/k" "$T/ack.k" 7 ||
		h_fail "$(basename "$img") alone lost acknowledged O_DSYNC writes"
	h_umount
done
echo "dsync: O_DSYNC opens direct, coherent with buffered opens and mmap, $acked records durable on each mirror"
