#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: buffered write(2) on a full file system, default
# (writeback_cache) mount: the writer of issue 16 item 4 puts 401 MiB in
# 1 MiB write(2) calls into a ~104 MiB file system.  write(2) itself must
# fail with ENOSPC, fsync must succeed, and every byte write(2) acknowledged
# must read back, also after a remount; then two such writers at once, and
# fio --verify on a nearly full file system.  Before low-space mode every
# write(2) returned success and fsync gave ENOSPC with 298 MiB lost.
source "$(dirname "$0")/harness.sh"
: "${FILLCHECK:?FILLCHECK must name the fillcheck binary}"

h_setup 2 128M
# Allocated images: the page-by-page write-back of low-space mode is slow
# on holes of the host file system, and that is not what is tested.
for i in "${IMGS[@]}"; do fallocate -l 128M "$i"; done

h_mount_fails "$(h_devspec "${IMGS[@]}")" "space_reserve=lots"
grep -q "space_reserve=lots: expected a size" <<<"$FAIL_OUT" ||
	h_fail "bad space_reserve not named: $FAIL_OUT"

h_mount
avail0=$(($(stat -f -c '%a' "$MNT") * 4096 / 1048576))	# MiB
h_log "available: $avail0 MiB"

# fill FILE...: one writer per file at once; each must pass fillcheck.
fill() {
	local pids=() f rc=0
	for f in "$@"; do
		"$FILLCHECK" write "$MNT/$f" 401 >"$T/$f.out" 2>"$T/$f.err" &
		pids+=($!)
	done
	for i in "${!pids[@]}"; do
		f=${*:i+1:1}
		if ! wait "${pids[$i]}"; then
			cat "$T/$f.out" "$T/$f.err" >&2
			rc=1
		fi
		h_log "$f: $(tr '\n' ' ' <"$T/$f.out")"
	done
	((rc == 0)) || h_fail "a writer lost acknowledged data or never saw ENOSPC from write(2)"
}
acked() { awk '$1 == "acked" { print $2 }' "$T/$1.out"; }
avail_mib() { echo $(($(stat -f -c '%a' "$MNT") * 4096 / 1048576)); }
# Deleted blocks come back once the delete is durable and the kernel has
# forgotten the inode (the background commit, 5 s).
wait_space() {
	local i
	sync -f "$MNT"
	for ((i = 0; i < 100; i++)); do
		(($(avail_mib) + 4 >= avail0)) && return 0
		sleep 0.2
	done
	h_fail "space did not come back: $(avail_mib) MiB available, was $avail0"
}

h_log "one writer, 401 MiB in 1 MiB write(2) calls"
fill f1
a1=$(acked f1)
# It must also fill the file system, not stop early: within the write(2)
# grant (4 MiB) and a little.
((a1 / 1048576 + 12 >= avail0)) || h_fail "writer stopped at $((a1 / 1048576)) MiB of $avail0"
grep -q "free space low" "$DAEMON_LOG" || h_fail "daemon did not log low-space mode"

h_remount
"$FILLCHECK" check "$MNT/f1" "$a1" || h_fail "acknowledged data of f1 lost across remount"
rm "$MNT/f1"
wait_space

h_log "two writers at once"
fill f2 f3
a2=$(acked f2) a3=$(acked f3)
h_remount
"$FILLCHECK" check "$MNT/f2" "$a2" || h_fail "f2 lost data across remount"
"$FILLCHECK" check "$MNT/f3" "$a3" || h_fail "f3 lost data across remount"
rm "$MNT/f2" "$MNT/f3"
wait_space

# fio --verify with buffered I/O on a nearly full file system: a job that
# fits must verify; one that does not must stop on ENOSPC from a write,
# never on a verify error.
if command -v fio >/dev/null; then
	# leave ~40 MiB: direct writes fill exactly
	fill_mib=$(($(stat -f -c '%a' "$MNT") * 4096 / 1048576 - 40))
	dd if=/dev/zero of="$MNT/filler" bs=1M count="$fill_mib" oflag=direct status=none
	fio_run() {
		fio --name=v --filename="$MNT/fio.$1" --rw="$2" --bs="$3" --size="$4" \
			--verify=crc32c --do_verify=1 --verify_fatal=1 --fsync_on_close=1 \
			--ioengine=psync --output="$T/fio.$1" >/dev/null 2>&1
	}
	h_log "fio: 24 MiB randwrite with verify, ~40 MiB free"
	fio_run fit randwrite 4k 24M || { cat "$T/fio.fit" >&2; h_fail "fio verify failed"; }
	rm -f "$MNT/fio.fit"
	sync -f "$MNT"
	sleep 6		# the deleted blocks come back with the background commit
	h_log "fio: 64 MiB write with verify, ~40 MiB free"
	if fio_run over write 64k 64M; then
		h_fail "fio wrote 64 MiB into ~40 MiB free"
	fi
	grep -qi "verify" "$T/fio.over" && grep -qiE "bad|mismatch" "$T/fio.over" &&
		{ cat "$T/fio.over" >&2; h_fail "fio found wrong data"; }
	grep -q "No space left on device" "$T/fio.over" ||
		{ cat "$T/fio.over" >&2; h_fail "fio did not stop on ENOSPC"; }
	rm -f "$MNT/fio.over" "$MNT/filler"
else
	h_log "fio not installed: fio part skipped"
fi
h_umount
echo "fullwrite: write(2) got ENOSPC, acknowledged data intact after fsync and remount"
