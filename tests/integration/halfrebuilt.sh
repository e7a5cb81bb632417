#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: a device whose rebuild was interrupted knows it is stale.
# Image 1 away, files written degraded; image 1 back, its rebuild paced
# (TWINFS_REBUILD_RATE) and the daemon killed with -9 once some regions
# were copied.  Then: image 1 alone is refused by mount (plain, -o
# degraded, -o rescue) and by fsck (-n and -y, which changes nothing), each
# with one line saying its rebuild did not finish (before, -o degraded
# mounted its mix of old and copied blocks without a word and recorded
# image 0 stale, so the pair was then refused as split brain); image 0
# alone mounts with every file, and the half-rebuilt image brought back to
# it is rebuilt again; the pair mounted as it was left resumes the rebuild
# (no -o degraded needed).  Each ends with every file's checksum as
# written, fsck clean on the pair, and the rebuilt image alone holding
# every file.
source "$(dirname "$0")/harness.sh"

h_need_fsck
: "${CTL:?CTL must name twinfs-ctl}"
LOG_ALLOW='is missing|mounted degraded|stale'

# rb_num FIELD: that field of twinfs-ctl rebuild status --json.
rb_num() {
	"$CTL" rebuild status "$MNT" --json | tr ',{}' '\n\n\n' |
		sed -n "s/^ *\"$1\": *\"\{0,1\}\([^\"]*\)\"\{0,1\} *$/\1/p"
}
# check_sums WHAT: every file reads back as written.
check_sums() {
	(cd "$MNT" && sha256sum --quiet -c "$T/sums") || h_fail "$1: files differ"
}
# alone IMG WHAT: a copy of that image by itself holds every file.
alone() {
	cp --sparse=always "$1" "$T/alone.img"
	h_mount "$T/alone.img" degraded
	check_sums "$2: $1 alone"
	h_umount
	rm -f "$T/alone.img"
}
# finish A B WHAT: the pair mounted, the rebuild of image B done; files,
# fsck and B alone checked.
finish() {
	local st
	st=$(rb_num state)
	if [[ $st == running ]]; then
		"$CTL" rebuild status "$MNT" --wait >"$T/rb" 2>&1 || h_fail "$3: $(cat "$T/rb")"
	elif [[ $st != done ]]; then	# done: a resumed run already finished
		"$CTL" rebuild "$MNT" 1 --wait >"$T/rb" 2>&1 || h_fail "$3: $(cat "$T/rb")"
	fi
	[[ $(rb_num state) == done ]] || h_fail "$3: rebuild $(rb_num state)"
	check_sums "$3"
	h_umount
	h_fsck 0 -n "$1" "$2"
	alone "$2" "$3"
}

h_setup 2 128M
a=${IMGS[0]}
b=${IMGS[1]}
h_mount
for i in 1 2 3; do head -c 1M /dev/urandom >"$MNT/old$i"; done
h_umount

h_log "image 1 away: files written degraded"
mv "$b" "$T/b.away"
h_mount "$a:$b" degraded
for i in $(seq 1 12); do head -c 1M /dev/urandom >"$MNT/new$i"; done
rm "$MNT/old2"
(cd "$MNT" && sha256sum ./*) >"$T/sums"
h_umount
mv "$T/b.away" "$b"

h_log "image 1 back: paced rebuild, kill -9 in the middle"
TWINFS_REBUILD_RATE=$((2 << 20)) h_mount "$a:$b" degraded
"$CTL" rebuild "$MNT" 1 >"$T/rb" 2>&1 || h_fail "rebuild: $(cat "$T/rb")"
for ((i = 0; i < 100; i++)); do
	(($(rb_num regions_done) >= 2)) && break
	sleep 0.05
done
done_regions=$(rb_num regions_done)
total=$(rb_num regions_total)
((done_regions >= 2 && done_regions < total)) ||
	h_fail "rebuild not in the middle: $done_regions of $total regions"
h_log "killed at $done_regions of $total regions"
h_crash
cp --sparse=always "$a" "$T/a.killed"
cp --sparse=always "$b" "$T/b.killed"

h_log "the half-rebuilt image alone is refused"
for opts in degraded "" rescue; do
	h_mount_fails "$b" "$opts"
	h_expect_one_line "$FAIL_OUT" "did not finish" "mount -o '$opts' of the half-rebuilt image"
	h_log "ok: -o '$opts' refused: $FAIL_OUT"
done
sums=$(h_sums "$b")
for mode in -n -y; do
	h_fsck 4 "$mode" "$b"
	h_expect_one_line "$FOUT" "did not finish" "fsck $mode of the half-rebuilt image"
	h_log "ok: $FOUT"
done
[[ $(h_sums "$b") == "$sums" ]] || h_fail "fsck -y changed the half-rebuilt image"

h_log "image 0 alone mounts; the half-rebuilt image brought back is rebuilt again"
h_mount "$a" degraded
check_sums "image 0 alone"
head -c 1M /dev/urandom >"$MNT/later"
(cd "$MNT" && sha256sum ./*) >"$T/sums"
h_umount
h_mount "$a:$b" degraded
finish "$a" "$b" "rebuilt again after image 0 alone"

h_log "the pair as the kill left it resumes the rebuild"
cp --sparse=always "$T/a.killed" "$a"
cp --sparse=always "$T/b.killed" "$b"
(cd "$T" && grep -v later sums >sums.k && mv sums.k sums)
h_mount "$a:$b" ""
finish "$a" "$b" "resumed"
echo "halfrebuilt: an interrupted rebuild's target is refused alone, finished with its mirror"
