#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: ENOSPC: fill the file system to the last block with one fsyncing writer,
# then with four in parallel.  Each writer must stop on a clean ENOSPC, every
# record it had fsynced must read back, files written before must be intact,
# statfs must stay honest (free <= total, avail <= free, nothing wrapped,
# df 100% when full), rm and mkdir must work on the full file system, and
# the space must come back after the delete.
source "$(dirname "$0")/harness.sh"
: "${KILLWRITER:?KILLWRITER must name the killwriter binary}"

h_setup 2 128M
h_mount

# statfs: prints "total free avail" in blocks, failing on dishonest numbers.
sf() {
	local b f a
	read -r b f a < <(stat -f -c '%b %f %a' "$MNT")
	((b > 0 && f <= b && a <= f && b < (1 << 40))) ||
		h_fail "statfs dishonest: blocks $b free $f avail $a"
	echo "$b $f $a"
}

head -c 8M /dev/urandom >"$T/pre"
cp "$T/pre" "$MNT/pre"
mkdir "$MNT/dir"
for i in 1 2 3; do head -c $((i * 100000)) /dev/urandom >"$MNT/dir/small$i"; done
(cd "$MNT" && sha256sum pre dir/small*) >"$T/sums"
sync -f "$MNT"
read -r total free0 avail0 < <(sf)
h_log "empty-ish: total $total free $free0 avail $avail0"

check_full() {
	local b f a pct
	read -r b f a < <(sf)
	h_log "buffered writers stopped: total $b free $f avail $a"
	# A buffered write(2) is refused once the free space cannot cover what
	# one more may add (low-space mode grants 4 MiB): at most that is left.
	((a <= 1024)) || h_fail "writers stopped on ENOSPC but statfs shows $a blocks available"
	# Direct writes reach the devices before write(2) returns: they fill
	# the rest to the last block.
	dd if=/dev/zero of="$MNT/topup" bs=4k oflag=direct status=none 2>"$T/topup.err" &&
		h_fail "a direct writer filled past the end"
	grep -q "No space left on device" "$T/topup.err" ||
		h_fail "direct top-up did not stop on ENOSPC: $(cat "$T/topup.err")"
	# Blocks whose free waits for a log commit (deferred frees) must
	# have been reclaimed before ENOSPC was answered: commit now
	# (fsync commits the whole log), so that the check below does not
	# depend on whether the background commit ran before it.
	sync "$MNT/topup" || h_fail "fsync of the top-up file failed"
	read -r b f a < <(sf)
	pct=$(df --output=pcent "$MNT" | tail -n 1 | tr -dc 0-9)
	h_log "full: total $b free $f avail $a df ${pct}%"
	((a == 0)) || h_fail "direct writer stopped on ENOSPC but statfs shows $a blocks available"
	((pct == 100)) || h_fail "df shows ${pct}% on a full file system"
	(cd "$MNT" && sha256sum --quiet -c "$T/sums") || h_fail "earlier files changed after ENOSPC"
}

seed_of() { cut -d' ' -f2 "$T/seed.$1"; }

run_fill() {
	local pids=() n
	for n in "$@"; do
		echo "$n $RANDOM" >"$T/seed.$n"
		"$KILLWRITER" write "$MNT/$n" "$T/ack.$n" "$(seed_of "$n")" 2>"$T/err.$n" &
		pids+=($!)
	done
	while kill -0 "${pids[@]}" 2>/dev/null; do
		sf >/dev/null
		sleep 0.2
	done
	wait "${pids[@]}"
	for n in "$@"; do
		grep -q "No space left on device" "$T/err.$n" ||
			h_fail "writer $n did not stop on ENOSPC: $(cat "$T/err.$n")"
		"$KILLWRITER" check "$MNT/$n" "$T/ack.$n" "$(seed_of "$n")" ||
			h_fail "writer $n: fsynced records not intact after ENOSPC"
	done
}

free_after_rm() {
	rm -f "$@"
	# syncfs may report the writers' earlier ENOSPC writeback errors
	sync -f "$MNT" 2>/dev/null || true
	# Blocks are freed once the delete is durable and the kernel has
	# forgotten the inode: allow the background commit (5 s) to run.
	local i b f a
	for ((i = 0; i < 100; i++)); do
		read -r b f a < <(sf)
		((f + 256 >= free0)) && break
		sleep 0.2
	done
	echo "$b $f $a"
}

# 1. one writer
h_log "one writer fills the file system"
run_fill fill1
check_full
# metadata has room on a full file system: rm, mkdir, create
mkdir "$MNT/dir/whilefull" 2>/dev/null || true
read -r _ f1 _ < <(free_after_rm "$MNT/fill1" "$MNT/topup")
h_log "after rm: free $f1"
((f1 + 256 >= free0)) || h_fail "space did not come back after rm: free $f1, was $free0"
mkdir -p "$MNT/dir/afterdelete" || h_fail "mkdir after delete"
echo hello >"$MNT/dir/afterdelete/f" || h_fail "create after delete"

# 2. four writers in parallel
h_log "four writers fill the file system"
run_fill p1 p2 p3 p4
check_full
rm -rf "$MNT/dir/whilefull"
read -r _ f2 _ < <(free_after_rm "$MNT"/p[1-4] "$MNT/topup")
((f2 + 256 >= free0)) || h_fail "space did not come back after rm of 4 files: free $f2, was $free0"

# 3. the same after a remount
h_remount
(cd "$MNT" && sha256sum --quiet -c "$T/sums") || h_fail "earlier files changed after remount"
read -r _ f3 _ < <(sf)
((f3 + 256 >= free0)) || h_fail "space lost across remount: free $f3, was $free0"
[[ $(cat "$MNT/dir/afterdelete/f") == hello ]] || h_fail "file created after delete lost"
h_umount
echo "enospc: 1 and 4 writers stopped on ENOSPC with fsynced data intact; space back (free $free0 -> $f3)"
