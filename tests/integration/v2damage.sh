#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: format v2: damage on unmounted images, then mount, read,
# scrub and fsck: never silent.  (1) One copy of the leaf holding a
# directory's inode garbled on image 1: every file reads right, the bad
# copy is counted and rewritten, fsck -n clean.  (2) Both copies of it:
# the root's listing still names the directory (before the fix readdirplus
# skipped it without a word, and "ls" showed a directory fewer), stat and
# listing it fail (EUCLEAN/EIO, not an empty directory), the daemon logs
# "unrecoverable" and an unrecoverable event, status counts it, fsck -n
# exits 4.  (3) Both copies of
# the leaf holding another directory's entries: listing it fails, never an
# empty listing.  (4) The newest superblock slot on one image, then both
# slots of one image: the newest slot mounts from the other slot and every
# file reads right; with both slots gone the mount refuses naming the image,
# which then stays out (-o degraded) and the other serves every file; both
# slots of both images: mount refuses, naming the image it cannot read.  (5) One data block on both images: the read fails
# with EIO (an unrecoverable event names the block), the others read right,
# scrub exits 1 naming it, fsck -n exits 4.
# (6) A chunk of the log after the checkpoint (kill -9 after fsyncs) damaged
# on one image, then on the other: every fsynced file is there after the
# mount (the log is read from the copy that verifies), fsck -n clean; the
# same byte on both images: the mount is refused (the byte is live).
source "$(dirname "$0")/harness.sh"

h_need_fsck
: "${CTL:?CTL must name twinfs-ctl}"
NODES="$(dirname "$0")/v2nodes.py"
# Expected: the damage is counted and logged.
LOG_ALLOW='checksum mismatch|repaired|unrecoverable|no good copy|tree node|superblock|damaged'

garbage() {	# garbage IMG BLOCK: overwrite one 4 KiB block
	dd if=/dev/urandom of="$1" bs=4096 seek="$2" count=1 conv=notrunc status=none ||
		h_fail "dd into $1"
}
node_garbage() {	# node_garbage IMG ADDR K: garble 512 bytes of node ADDR's first block
	# (1024 + 512 K .. past the header): inside the node's image whatever
	# its nb (short nodes: the blocks past nb are not the node's).
	dd if=/dev/urandom of="$1" bs=512 seek=$(($2 * 8 + 2 + $3)) count=1 conv=notrunc \
		status=none || h_fail "dd into $1"
}
save() { cp --sparse=always "${IMGS[0]}" "$T/save0" && cp --sparse=always "${IMGS[1]}" "$T/save1"; }
restore() { cp --sparse=always "$T/save0" "${IMGS[0]}" && cp --sparse=always "$T/save1" "${IMGS[1]}"; }
dev_num() {	# dev_num IDX FIELD: a device counter of twinfs-ctl status --json
	"$CTL" status "$MNT" --json |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["devices"][int(sys.argv[1])][sys.argv[2]])' "$1" "$2"
}
check_files() {	# every file of every directory but those named reads right
	python3 - "$MNT" "$*" <<'PY' || h_fail "a file reads wrong (above)"
import sys
mnt, skip = sys.argv[1], sys.argv[2].split()
for d in range(4):
    if "d%d" % d in skip:
        continue
    for i in range(1, 61):
        with open("%s/d%d/f%d" % (mnt, d, i)) as f:
            if f.read() != "file %d %d\n" % (d, i):
                sys.exit("d%d/f%d reads wrong" % (d, i))
PY
	cmp -s "$MNT/data" "$T/data" || h_fail "data reads wrong"
}
leaf_of() {	# leaf_of INO TYPE [OFF]: the inodes-tree leaf holding that key, image 0
	python3 "$NODES" "${IMGS[0]}" 1 "$@"
}

h_setup 2 128M -O v2
h_mount
for d in 0 1 2 3; do
	mkdir "$MNT/d$d"
	(cd "$MNT/d$d" && for i in $(seq 1 60); do echo "file $d $i" >"f$i"; done)
done
head -c 1M /dev/urandom >"$T/data"
cp "$T/data" "$MNT/data"
ino1=$(stat -c %i "$MNT/d1")
ino2=$(stat -c %i "$MNT/d2")
h_umount
h_fsck 0 -n "${IMGS[@]}"
save
read -r lvl leaf1 < <(leaf_of "$ino1" 1)
read -r lvl leaf2 < <(leaf_of "$ino2" 3 $((1 << 55)))
[[ -n $leaf1 && -n $leaf2 && $leaf1 != "$leaf2" ]] ||
	h_fail "leaves: d1's inode at '$leaf1', d2's entries at '$leaf2': add files"
h_log "d1 (inode $ino1) in leaf $leaf1, d2's entries (inode $ino2) in leaf $leaf2"

h_log "(1) one copy of leaf $leaf1 garbled on image 1"
node_garbage "${IMGS[1]}" "$leaf1" 2
h_mount
check_files
((($(dev_num 1 csum_errors)) > 0)) || h_fail "the bad node copy was not counted"
((($(dev_num 1 repaired)) > 0)) || h_fail "the bad node copy was not repaired"
(($(dev_num 1 unrecoverable) == 0)) || h_fail "a node with a good copy counted unrecoverable"
h_umount
cmp -s <(dd if="${IMGS[0]}" bs=4096 skip="$leaf1" count=4 status=none) \
	<(dd if="${IMGS[1]}" bs=4096 skip="$leaf1" count=4 status=none) ||
	h_fail "the bad copy of leaf $leaf1 was not rewritten"

h_log "(2) both copies of leaf $leaf1 garbled"
restore
node_garbage "${IMGS[0]}" "$leaf1" 1
node_garbage "${IMGS[1]}" "$leaf1" 3
h_mount
ls "$MNT" >"$T/ls" 2>&1 || true
grep -qx d1 "$T/ls" || h_fail "the root's listing drops d1 without a word: $(tr '\n' ' ' <"$T/ls")"
grep -qx d0 "$T/ls" && grep -qx d3 "$T/ls" || h_fail "the root's listing lost its other entries"
stat "$MNT/d1" >/dev/null 2>&1 && h_fail "stat of a directory whose inode is lost succeeds"
ls "$MNT/d1" >/dev/null 2>&1 && h_fail "listing a directory whose inode is lost succeeds"
grep -q "unrecoverable" "$DAEMON_LOG" || h_fail "the lost node was not logged"
grep -q "event unrecoverable" "$DAEMON_LOG" || h_fail "no unrecoverable event for the lost node"
((($(dev_num 0 unrecoverable)) > 0)) || h_fail "the lost node was not counted"
h_umount
h_fsck 4 -n "${IMGS[@]}"

h_log "(3) both copies of leaf $leaf2 (d2's entries) garbled"
restore
node_garbage "${IMGS[0]}" "$leaf2" 1
node_garbage "${IMGS[1]}" "$leaf2" 1
h_mount
n=$(ls "$MNT/d2" 2>/dev/null | wc -l) && rc=0 || rc=$?
((rc != 0)) || h_fail "listing d2 with its entries lost succeeds ($n names)"
grep -q "unrecoverable" "$DAEMON_LOG" || h_fail "the lost node was not logged"
h_umount
h_fsck 4 -n "${IMGS[@]}"

h_log "(4) superblocks"
restore
read -r s0 s1 < <(python3 -c 'import struct, sys
f = open(sys.argv[1], "rb")
g = [struct.unpack_from("<Q", f.read(4096), 296)[0] for _ in (0, 1)]
print(*(sorted((0, 1), key=lambda s: -g[s])))' "${IMGS[1]}")
garbage "${IMGS[1]}" "$s0"
h_mount
check_files
h_umount
h_fsck 0 -n "${IMGS[@]}"
restore
garbage "${IMGS[1]}" 0
garbage "${IMGS[1]}" 1
h_mount_fails "$(h_devspec "${IMGS[@]}")"
grep -q "disk1.img" <<<"$FAIL_OUT" || h_fail "the refusal does not name image 1: $FAIL_OUT"
h_mount "${IMGS[0]}" degraded
check_files
h_umount
restore
garbage "${IMGS[0]}" 0
garbage "${IMGS[0]}" 1
garbage "${IMGS[1]}" 0
garbage "${IMGS[1]}" 1
h_mount_fails "$(h_devspec "${IMGS[@]}")"
grep -Eq "disk0.img: (not a twinfs device|.*superblock)" <<<"$FAIL_OUT" ||
	h_fail "the refusal does not name image 0 and what is wrong: $FAIL_OUT"

h_log "(5) one data block garbled on both images"
restore
blk=$(python3 -c 'import sys
want = open(sys.argv[2], "rb").read()[4096 * 100:4096 * 101]
with open(sys.argv[1], "rb") as f:
    b = 0
    while True:
        c = f.read(1 << 20)
        if not c:
            sys.exit("not found")
        i = c.find(want)
        if i >= 0:
            print(b + i // 4096)
            break
        b += len(c) // 4096' "${IMGS[0]}" "$T/data")
garbage "${IMGS[0]}" "$blk"
garbage "${IMGS[1]}" "$blk"
h_mount "" ""
cmp -s "$MNT/data" "$T/data" 2>/dev/null && h_fail "a block with no good copy read back"
dd if="$MNT/data" of=/dev/null bs=4096 skip=100 count=1 iflag=direct status=none 2>"$T/err" &&
	h_fail "reading the lost block succeeds"
grep -q "Input/output error" "$T/err" || h_fail "reading the lost block: $(cat "$T/err"), want EIO"
grep -q "event unrecoverable .*block $blk verifies" "$DAEMON_LOG" || h_fail "no unrecoverable event names block $blk"
st=$("$CTL" status "$MNT") && h_fail "status exits 0 after a lost block"
grep -q "state: DEGRADED" <<<"$st" || h_fail "status does not say DEGRADED after a lost block: $st"
cmp -s <(head -c $((4096 * 100)) "$MNT/data") <(head -c $((4096 * 100)) "$T/data") ||
	h_fail "the blocks before the lost one read wrong"
rc=0
js=$("$CTL" scrub start "$MNT" --wait --json | tail -n 1) || rc=$?
((rc == 1)) || h_fail "scrub with a lost block exits $rc, want 1: $js"
grep -q '"unrecoverable": *1' <<<"$js" || h_fail "scrub does not count the lost block: $js"
h_umount
h_fsck 4 -n "${IMGS[@]}"
h_log "(6) the log after the checkpoint damaged on one image, then the other"
restore
h_mount "" ""
for i in 1 2 3 4 5 6; do
	head -c $((i * 5000)) /dev/urandom >"$T/l$i"
	dd if="$T/l$i" of="$MNT/l$i" bs=64k conv=fsync status=none
done
h_crash
save
flip_log() {	# flip_log IMG: a payload byte of the first chunk after the checkpoint
	python3 "$(dirname "$0")/logflip.py" "$1" || h_fail "logflip $1"
}
for img in 1 0; do
	restore
	flip_log "${IMGS[$img]}"
	h_mount "" ""
	for i in 1 2 3 4 5 6; do
		cmp -s "$MNT/l$i" "$T/l$i" || h_fail "fsynced l$i lost with the log damaged on image $img only"
	done
	h_umount
done
h_fsck 0 -n "${IMGS[@]}"
# The byte matters: damaged on both images, the mount is refused.
restore
flip_log "${IMGS[0]}"
flip_log "${IMGS[1]}"
h_mount_fails "$(h_devspec "${IMGS[@]}")"

echo "v2damage: one node copy repaired; lost inode, lost entries, superblocks, a lost data block reported; one-sided log damage read around"
