#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: discard gives freed blocks back to every mirror.  A 2-mirror
# fs on image files: writing a 200 MiB file grows both images, deleting it
# (then twinfs-ctl sync) shrinks both again within seconds (holes punched
# by the asynchronous discard).  With -o nodiscard they stay as large until
# `twinfs-ctl trim --wait` shrinks them (files written while it runs read
# back intact after a remount).  Status names each device's
# discard method ("unsupported", said once, where discards fail with
# EOPNOTSUPP); the other files read back intact after a remount, and fsck
# finds nothing.
source "$(dirname "$0")/harness.sh"
: "${CTL:?CTL must name the twinfs-ctl binary}"
FSCK=${FSCK:-$(dirname "$TWINFS")/fsck.twinfs}

BIG=200			# MiB
alloc_bytes() { stat -c '%b %B' "$1" | awk '{ print $1 * $2 }'; }
mib() { echo $(($1 >> 20)); }

# wait_shrunk BEFORE_0 BEFORE_1 SECS: both images lose >= 80% of BIG.
wait_shrunk() {
	local b0=$1 b1=$2 secs=$3 i a0 a1 want=$((BIG * 1048576 * 8 / 10))
	for ((i = 0; i < secs * 10; i++)); do
		a0=$(alloc_bytes "${IMGS[0]}")
		a1=$(alloc_bytes "${IMGS[1]}")
		if ((b0 - a0 >= want && b1 - a1 >= want)); then
			h_log "images shrank by $(mib $((b0 - a0))) and $(mib $((b1 - a1))) MiB"
			return 0
		fi
		sleep 0.1
	done
	h_log "images shrank by only $(mib $((b0 - a0))) and $(mib $((b1 - a1))) MiB"
	return 1
}

h_setup 2 1G
for mode in discard nodiscard; do
	h_mount "" "$mode"
	st=$("$CTL" status "$MNT")
	grep -q "discard: punch punch" <<<"$st" || h_fail "status does not say punch for both images: $st"
	"$CTL" status "$MNT" --json | grep -q '"discard": *"punch"' ||
		h_fail "status --json has no per-device discard"
	mkdir -p "$MNT/keep"
	head -c 3000000 /dev/urandom >"$MNT/keep/small.$mode"
	head -c $((BIG << 20)) /dev/urandom >"$MNT/big"
	"$CTL" sync "$MNT" || h_fail "twinfs-ctl sync failed"
	g0=$(alloc_bytes "${IMGS[0]}")
	g1=$(alloc_bytes "${IMGS[1]}")
	h_log "$mode: images hold $(mib "$g0") and $(mib "$g1") MiB with the big file"
	rm "$MNT/big"
	"$CTL" sync "$MNT" || h_fail "twinfs-ctl sync failed"
	if [[ $mode == discard ]]; then
		wait_shrunk "$g0" "$g1" 20 || h_fail "deleting $BIG MiB did not shrink both images"
		# The counter moves when the whole batch is done, after the
		# holes the images already show: give it the same time.
		for ((i = 0; i < 200; i++)); do
			"$CTL" stats "$MNT" --json | grep -q '"discarded_bytes": *[1-9]' && break
			sleep 0.1
		done
		((i < 200)) || h_fail "stats show no discarded bytes"
	else
		sleep 2
		a0=$(alloc_bytes "${IMGS[0]}")
		a1=$(alloc_bytes "${IMGS[1]}")
		((g0 - a0 < (BIG << 20) / 10 && g1 - a1 < (BIG << 20) / 10)) ||
			h_fail "with -o nodiscard the images shrank by $(mib $((g0 - a0))) / $(mib $((g1 - a1))) MiB"
		# Writers run during the trim: nothing they are given may be
		# discarded under them (each file is compared after a remount).
		head -c 1000000 /dev/urandom >"$T/src"
		(for i in $(seq 1 25); do cp "$T/src" "$MNT/keep/w$i"; done) &
		wpid=$!
		out=$("$CTL" trim "$MNT" --wait) || h_fail "twinfs-ctl trim failed: $out"
		wait "$wpid" || h_fail "writers during the trim failed"
		h_log "trim: $(tail -n 1 <<<"$out")"
		"$CTL" trim status "$MNT" --json | grep -q '"state": *"finished"' ||
			h_fail "trim status does not say finished"
		wait_shrunk "$g0" "$g1" 1 || h_fail "twinfs-ctl trim did not shrink both images"
	fi
	(cd "$MNT/keep" && sha256sum small.* >"$T/sums")
	h_remount
	(cd "$MNT/keep" && sha256sum --quiet -c "$T/sums") || h_fail "files differ after remount"
	for f in "$MNT"/keep/w*; do
		[[ -e $f ]] || continue
		cmp -s "$T/src" "$f" || h_fail "$f, written during the trim, differs after remount"
	done
	h_umount
	out=$("$FSCK" -n "${IMGS[@]}" 2>&1) || h_fail "fsck after $mode: $out"
done
# A device that refuses discards (the fault backend answers EOPNOTSUPP):
# said once in the log and in status, then never tried again.
h_mount "" "fault=op=discard\\,kind=error\\,err=95"
for i in 1 2 3; do
	head -c 2000000 /dev/urandom >"$MNT/f$i"
	"$CTL" sync "$MNT"
	rm "$MNT/f$i"
	"$CTL" sync "$MNT"
	sleep 0.3
done
st=$("$CTL" status "$MNT")
grep -q "discard: unsupported unsupported" <<<"$st" || h_fail "status does not say unsupported: $st"
n=$(grep -c "discard: unsupported after all" "$DAEMON_LOG" || true)
((n == 2)) || h_fail "expected one 'unsupported' line per device, got $n"
h_umount
echo "discard: deleting $BIG MiB shrank both images (async discard); -o nodiscard kept them until twinfs-ctl trim; fsck clean"
