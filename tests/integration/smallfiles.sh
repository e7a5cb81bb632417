#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: tar -x of small files costs at most 10.5 FUSE requests per
# file (counted in libfuse's debug output: LOOKUP, CREATE, WRITE, three
# SETATTRs, two GETXATTRs, the parent's GETATTR, RELEASE), and no FLUSH
# after the first (the daemon has no flush op, so the kernel stops asking);
# every file reads back the same before and after a remount, sizes from
# 1 byte to 300 KiB (files past 128 KiB also map blocks past the extent
# map's small leaf), and fsck finds nothing wrong.
source "$(dirname "$0")/harness.sh"

command -v tar >/dev/null || h_fail "tar is needed"
h_need_fsck
N=300

mkdir "$T/src"
for ((i = 0; i < N; i++)); do
	d=$T/src/d$((i % 5))
	mkdir -p "$d"
	# Mostly below 64 KiB, like a source tree; every 25th up to 300 KiB.
	if ((i % 25 == 0)); then size=$(((i * 7919) % 307200 + 131072)); else
		size=$(((i * 7919) % 65536 + 1)); fi
	head -c "$size" /dev/urandom >"$d/f$i"
done
tar -cf "$T/files.tar" -C "$T/src" .
(cd "$T/src" && find . -type f -exec cksum {} + | sort -k3) >"$T/sums"

h_setup 2 512M
# -o debug: libfuse logs one "opcode:" line per request.  Its replies
# say "error: -61" for every GETXATTR of an absent attribute.
LOG_ALLOW='unique: [0-9]+, error: -'
h_mount "" debug
mkdir "$MNT/x"
sleep 0.5
before=$(grep -ac "opcode:" "$DAEMON_LOG")
tar -xf "$T/files.tar" -C "$MNT/x" || h_fail "tar -x failed"
after=$(grep -ac "opcode:" "$DAEMON_LOG")
counts=$(tail -n +1 "$DAEMON_LOG" | grep -a "opcode:" | tail -n $((after - before)) |
	sed -E 's/.*opcode: ([A-Z_]+).*/\1/' | sort | uniq -c | sort -rn)
h_log "requests during tar -x of $N files: $((after - before))"
echo "$counts"
flushes=$(awk '$2 == "FLUSH" { print $1 }' <<<"$counts")
((${flushes:-0} <= 1)) || h_fail "$flushes FLUSH requests: the kernel should stop after the first"
# 10 a file; 0.5 a file of slack for attribute and entry timeouts that
# run out on a loaded machine, and the kernel's own mtime SETATTRs.
((after - before <= N * 105 / 10)) ||
	h_fail "$((after - before)) requests for $N files: more than 10.5 a file"

(cd "$MNT/x" && find . -type f -exec cksum {} + | sort -k3) >"$T/got"
diff -q "$T/sums" "$T/got" >/dev/null || h_fail "extracted files differ from the source"
h_remount
(cd "$MNT/x" && find . -type f -exec cksum {} + | sort -k3) >"$T/got"
diff -q "$T/sums" "$T/got" >/dev/null || h_fail "files differ after a remount"
h_umount
h_fsck 0 -n "${IMGS[@]}"
h_log "ok"
