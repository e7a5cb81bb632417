#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: format v2: the per-device error counters count damage, not
# reads, and twinfs-ctl clear zeroes them.  (1) One copy of a tree leaf
# garbled on image 1, read and scrubbed: exactly 1 checksum error and 1
# repair on device 1 (a 16 KiB node is one object, not four 4 KiB
# blocks); clear of device 1 refused for another user (allow_other mount),
# done for the owner, and still zero after kill -9 and a remount (it was
# committed).  (2) Both copies of the leaf holding a directory's inode:
# stat it three times, still 1 unrecoverable and 1 checksum error per
# device (the same loss is not counted per retry); status DEGRADED, exit 1.
# (3) clear: prints what it cleared, status HEALTHY, exit 0; the loss met
# again is counted again, once.  (4) A chunk of the metadata log after the checkpoint
# damaged on image 0 only (kill -9 after fsyncs): the mount counts it on
# device 0 and rewrites it from image 1; a second mount counts nothing
# new, scrub is clean.
source "$(dirname "$0")/harness.sh"

: "${CTL:?CTL must name twinfs-ctl}"
NODES="$(dirname "$0")/v2nodes.py"
LOG_ALLOW='checksum mismatch|repaired|unrecoverable|no copy|tree node|damaged|refused|last chunk'

garbage() {	# garbage IMG BLOCK: overwrite one 4 KiB block
	dd if=/dev/urandom of="$1" bs=4096 seek="$2" count=1 conv=notrunc status=none ||
		h_fail "dd into $1"
}
counts() {	# counts: "csum0 csum1 rep0 rep1 unrec0+unrec1", one status call
	# (status exits 1 while DEGRADED: its JSON is what is wanted here)
	{ "$CTL" status "$MNT" --json || true; } | python3 -c 'import json, sys
d = json.load(sys.stdin)["devices"]
print(d[0]["csum_errors"], d[1]["csum_errors"], d[0]["repaired"], d[1]["repaired"],
      d[0]["unrecoverable"] + d[1]["unrecoverable"])'
}
save() { cp --sparse=always "${IMGS[0]}" "$T/save0" && cp --sparse=always "${IMGS[1]}" "$T/save1"; }
restore() { cp --sparse=always "$T/save0" "${IMGS[0]}" && cp --sparse=always "$T/save1" "${IMGS[1]}"; }

h_setup 2 128M -O v2
h_mount
for d in 0 1 2; do
	mkdir "$MNT/d$d"
	(cd "$MNT/d$d" && for i in $(seq 1 60); do echo "file $d $i" >"f$i"; done)
done
ino1=$(stat -c %i "$MNT/d1")
h_umount
save
read -r _ leaf < <(python3 "$NODES" "${IMGS[0]}" 1 "$ino1" 1)
[[ -n $leaf ]] || h_fail "no leaf for inode $ino1"
h_log "d1 (inode $ino1) in leaf $leaf"

h_log "(1) one copy of leaf $leaf garbled on image 1"
# block 0: short nodes (mkfs default) ignore the blocks past their nb
garbage "${IMGS[1]}" "$leaf"
h_mount "" allow_other
stat "$MNT/d1" >/dev/null || h_fail "stat d1 with one good copy"
# A read may take either copy: scrub reads both (the bad one is counted by
# whichever meets it first, then repaired).
out=$("$CTL" scrub start "$MNT" --wait) || h_fail "scrub with one bad node copy: $out"
c=$(counts)
[[ $c == "0 1 0 1 0" ]] || h_fail "one bad node copy: counters (csum0 csum1 rep0 rep1 unrec) $c, want 0 1 0 1 0"
# clear: the owner only; committed before it answers (kill -9, remount).
chmod 755 "$T"
if out=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$CTL" clear "$MNT" 2>&1); then
	h_fail "uid 65534 may clear the counters: $out"
fi
grep -q "permission denied" <<<"$out" || h_fail "no EPERM for another user: $out"
chmod 700 "$T"
[[ $(counts) == "0 1 0 1 0" ]] || h_fail "a refused clear cleared: $(counts)"
out=$("$CTL" clear "$MNT" 1 --json) || h_fail "clear 1 failed: $out"
python3 -c 'import json, sys
c = json.loads(sys.argv[1])["cleared"]
assert [(d["index"], d["csum_errors"], d["repaired"]) for d in c] == [(1, 1, 1)], c' "$out" ||
	h_fail "clear --json does not say what it cleared: $out"
c=$(counts)
[[ $c == "0 0 0 0 0" ]] || h_fail "counters after clear: $c"
h_crash
h_mount
c=$(counts)
[[ $c == "0 0 0 0 0" ]] || h_fail "counters after clear, kill -9 and remount: $c"
h_umount

h_log "(2) both copies of leaf $leaf garbled, read three times"
restore
garbage "${IMGS[0]}" "$leaf"
garbage "${IMGS[1]}" "$leaf"
h_mount
for i in 1 2 3; do
	stat "$MNT/d1" >/dev/null 2>&1 && h_fail "stat of d1 with its inode lost succeeds"
done
c=$(counts)
[[ $c == "1 1 0 0 1" ]] || h_fail "a lost node read 3 times: counters $c, want 1 1 0 0 1"
rc=0
"$CTL" status "$MNT" >/dev/null || rc=$?
((rc == 1)) || h_fail "status exits $rc after a lost node, want 1"

h_log "(3) clear: HEALTHY again"
out=$("$CTL" clear "$MNT") || h_fail "clear failed: $out"
echo "$out"
grep -q "cleared device 0 .*: 1 checksum errors" <<<"$out" || h_fail "clear does not say what it cleared: $out"
grep -q "state: HEALTHY" <<<"$out" || h_fail "clear does not say HEALTHY: $out"
st=$("$CTL" status "$MNT") || h_fail "status exits nonzero after clear: $st"
grep -q "state: HEALTHY" <<<"$st" || h_fail "status not HEALTHY after clear: $st"
"$CTL" status "$MNT" -x || h_fail "status -x not healthy after clear"
c=$(counts)
[[ $c == "0 0 0 0 0" ]] || h_fail "counters after clear: $c"
# Still lost: met again, counted again (once).
stat "$MNT/d1" >/dev/null 2>&1 && h_fail "d1 came back"
stat "$MNT/d1" >/dev/null 2>&1 || true
c=$(counts)
[[ $c == "1 1 0 0 1" ]] || h_fail "the loss met after a clear: counters $c, want 1 1 0 0 1"
h_umount

h_log "(4) a log chunk after the checkpoint damaged on image 0"
restore
h_mount
for i in 1 2 3 4 5 6; do
	head -c $((i * 5000)) /dev/urandom >"$T/l$i"
	dd if="$T/l$i" of="$MNT/l$i" bs=64k conv=fsync status=none
done
h_crash
# A payload byte of the first chunk after the checkpoint (logflip.py).
python3 "$(dirname "$0")/logflip.py" "${IMGS[0]}" || h_fail "logflip"
h_mount
for i in 1 2 3 4 5 6; do
	cmp -s "$MNT/l$i" "$T/l$i" || h_fail "fsynced l$i lost"
done
c=$(counts)
[[ $c == "1 0 1 0 0" ]] || h_fail "a bad log chunk copy on device 0: counters $c, want 1 0 1 0 0"
h_umount
h_mount
c=$(counts)
[[ $c == "1 0 1 0 0" ]] || h_fail "the second mount counted again: $c"
out=$("$CTL" scrub start "$MNT" --wait) || h_fail "scrub after the log repair: $out"
c=$(counts)
[[ $c == "1 0 1 0 0" ]] || h_fail "scrub counted more: $c"
h_umount

echo "counters: a node counts once, a loss once, a log chunk copy counted and repaired, clear zeroes (durably, owner only)"
