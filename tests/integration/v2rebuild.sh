#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: format v2: degraded mount, rebuild and replace copy the
# metadata trees.  Image 1 away: mount degraded, write files (new tree
# nodes reach image 0 only), image 1 back: rebuild, killed with -9 while it
# runs, then finished (resumed by the mount when a checkpoint recorded
# it, else started again); fsck clean on the pair, a scrub finds no bad
# node copy, and image 1 alone holds every file.  Then image 0 replaced by
# a new image: fsck clean, scrub clean, the new image alone holds every
# file.  Before this change rebuild and replace refused format v2.
source "$(dirname "$0")/harness.sh"

h_need_fsck
: "${CTL:?CTL must name twinfs-ctl}"
LOG_ALLOW='is missing|mounted degraded|stale'

node_num() {
	python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["nodes"][sys.argv[1]])' "$1"
}
rb_state() {
	"$CTL" rebuild status "$MNT" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])'
}
# scrub_clean: a scrub of the mounted pair finds nothing, nodes included.
scrub_clean() {
	local js
	js=$("$CTL" scrub start "$MNT" --wait --json | tail -n 1) || h_fail "scrub ($1): $js"
	[[ $(node_num bad_copies <<<"$js") == 0 && $(node_num checked <<<"$js") -gt 10 ]] ||
		h_fail "scrub after $1: $js"
	grep -q '"csum_errors":0' <<<"$js" || h_fail "scrub after $1 found bad copies: $js"
}
# alone IMG: that image by itself holds every file (a copy of it: a
# degraded mount would mark the other one stale).
alone() {
	cp --sparse=always "$1" "$T/alone.img"
	h_mount "$T/alone.img" degraded
	(cd "$MNT" && sha256sum --quiet -c "$T/sums") || h_fail "$2: $1 alone lost data"
	h_umount
	rm -f "$T/alone.img"
}

h_setup 2 1G -O v2
a=${IMGS[0]}
b=${IMGS[1]}
h_mount
for d in 0 1 2; do
	mkdir "$MNT/d$d"
	(cd "$MNT/d$d" && for i in $(seq 1 100); do echo "file $d $i" >"f$i"; done)
done
h_umount

h_log "image 1 away: degraded mount, writes"
mv "$b" "$T/b.away"
h_mount "$a:$b" degraded
for d in 3 4 5; do
	mkdir "$MNT/d$d"
	(cd "$MNT/d$d" && for i in $(seq 1 100); do echo "new $d $i" >"f$i"; done)
done
rm -r "$MNT/d1"
head -c 300M /dev/urandom >"$MNT/big"
(cd "$MNT" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$T/sums"
h_umount

h_log "image 1 back: rebuild, kill -9 while it runs"
mv "$T/b.away" "$b"
h_mount "$a:$b" degraded
"$CTL" rebuild "$MNT" 1 >"$T/rb" 2>&1 || h_fail "rebuild on v2: $(cat "$T/rb")"
sleep "${V2REBUILD_KILL_AFTER:-0.5}"
killed_log=$DAEMON_LOG
h_crash
h_mount "$a:$b" degraded
st=$(rb_state)
h_log "after the remount: $st"
# Idle after the remount: the run finished just before the kill (its
# completion checkpoint recorded the device in sync), never otherwise.
if [[ $st == idle ]]; then
	grep -q "rebuild finished" "$killed_log" ||
		h_fail "device back in sync after a kill -9 during its rebuild: $(cat "$killed_log")"
	h_log "the rebuild had finished before the kill"
elif [[ $st == running ]]; then
	"$CTL" rebuild status "$MNT" --wait >"$T/rb" 2>&1 || h_fail "resumed rebuild: $(cat "$T/rb")"
elif [[ $st != done ]]; then
	"$CTL" rebuild "$MNT" 1 --wait >"$T/rb" 2>&1 || h_fail "rebuild again: $(cat "$T/rb")"
fi
[[ $st == idle || $(rb_state) == done ]] || h_fail "rebuild not done: $("$CTL" rebuild status "$MNT")"
(cd "$MNT" && sha256sum --quiet -c "$T/sums") || h_fail "files differ after the rebuild"
h_umount
h_fsck 0 -n "$a" "$b"
h_mount "$a:$b" ""
scrub_clean "the rebuild"
h_umount
alone "$b" "rebuild"

h_log "replace image 0 by a new image"
new=$(h_mkimg new.img 1G)
h_mount "$a:$b" ""
"$CTL" replace "$MNT" "$a" "$new" --wait >"$T/rp" 2>&1 || h_fail "replace on v2: $(cat "$T/rp")"
(cd "$MNT" && sha256sum --quiet -c "$T/sums") || h_fail "files differ after the replace"
h_umount
h_fsck 0 -n "$new" "$b"
h_mount "$new:$b" ""
scrub_clean "the replace"
h_umount
alone "$new" "replace"
echo "v2rebuild: rebuild (killed once) and replace copied the trees; fsck and scrub clean"
