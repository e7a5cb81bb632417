#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: The degraded/replace acceptance run through the real daemon: delete one
# image while a copy runs into the file system, see the copy finish
# correctly and the file system report DEGRADED, replace the deleted image
# with a new one (twinfs-ctl replace --wait) while still writing, then both
# mirrors verified: twinfs-ctl status healthy, fsck.twinfs clean on the two
# images, and each image alone (-o degraded) holds every file.
source "$(dirname "$0")/harness.sh"

: "${CTL:?CTL must name twinfs-ctl}"
src=${DEGRADED_SRC:-/usr/include}
[[ -d $src ]] || h_fail "$src is missing"
# The deleted image fails its device: those lines are expected.
LOG_ALLOW='image file was deleted|device failed'

h_setup 2 1G
# commit=500: the background thread (which notices a deleted image) runs
# every half second.
h_mount "" commit=500
(cd "$src" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$T/sums"

h_log "copy $src in, deleting ${IMGS[1]} during the copy"
cp -a "$src" "$MNT/tree" &
cp_pid=$!
sleep 0.5
rm -f "${IMGS[1]}"
wait "$cp_pid" || h_fail "cp -a failed after the image was deleted"
sleep 1.5	# the health check runs every commit interval
rc=0
"$CTL" status "$MNT" >"$T/status1" || rc=$?
cat "$T/status1"
((rc == 1)) || h_fail "status exits $rc with a device failed, want 1 (degraded)"
grep -q DEGRADED "$T/status1" || h_fail "status does not say DEGRADED after the image was deleted"
grep -q "image file was deleted" "$DAEMON_LOG" || h_fail "the deletion was not logged"
[[ $(grep -c "device failed" "$DAEMON_LOG") -eq 1 ]] || h_fail "device failure not logged exactly once"
(cd "$MNT/tree" && sha256sum --quiet -c "$T/sums") || h_fail "copy differs with one image deleted"

new=$(h_mkimg disk2.img 1G)
h_log "replace ${IMGS[1]} by $new while writing"
cp -a "$src" "$MNT/tree2" &
cp_pid=$!
"$CTL" replace "$MNT" "${IMGS[1]}" "$new" --wait | tee "$T/replace"
wait "$cp_pid" || h_fail "cp -a during the replace failed"
"$CTL" rebuild status "$MNT" --json >"$T/rstatus"
grep -q '"state": *"done"' "$T/rstatus" || { cat "$T/rstatus"; h_fail "replace did not finish"; }
"$CTL" status "$MNT" | tee "$T/status2"
grep -q DEGRADED "$T/status2" && h_fail "still DEGRADED after the replace"
(cd "$MNT/tree" && sha256sum --quiet -c "$T/sums") || h_fail "tree differs after the replace"
(cd "$MNT/tree2" && sha256sum --quiet -c "$T/sums") || h_fail "tree2 differs after the replace"
h_umount

IMGS=("${IMGS[0]}" "$new")
if [[ -n ${FSCK:-} && -x ${FSCK:-} ]]; then
	h_log "fsck.twinfs -n ${IMGS[*]}"
	"$FSCK" "${FSCK_FMT[@]}" -n "${IMGS[@]}" || h_fail "fsck.twinfs reports errors after the replace"
fi
# Both mirrors hold everything: each one alone, every block read verified.
for img in "${IMGS[@]}"; do
	h_mount "$img" degraded
	for t in tree tree2; do
		(cd "$MNT/$t" && sha256sum --quiet -c "$T/sums") || h_fail "$t differs with only $img"
	done
	h_umount
done
echo "degraded: $(wc -l <"$T/sums") files x2 copied with an image deleted and replaced; both mirrors verified"
