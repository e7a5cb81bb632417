#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: format v2: scrub checks every tree node on every mirror.
# Enough files for an INODES tree of two levels; one copy of a leaf and
# of the root (an interior node) overwritten with garbage on image 1:
# scrub repairs both (status "nodes": 2 bad copies, 2 repaired), the
# images then hold the same bytes there and fsck is clean.  Both copies of
# another leaf overwritten: scrub reports it (exit 1, "nodes": 1
# unrecoverable, the bad list names the node, also when the scrub's walk
# of the inodes is the first to meet it), fsck says so (exit 4).  The
# nodes are damaged under the mounted file system: the result does not
# depend on which copy a read tries first.
source "$(dirname "$0")/harness.sh"

h_need_fsck
: "${CTL:?CTL must name twinfs-ctl}"
NODES="$(dirname "$0")/v2nodes.py"
# Expected: the damage is counted and logged.
LOG_ALLOW='checksum mismatch|repaired|unrecoverable|no good copy|tree node'

# node field F of a scrub status document (stdin)
node_num() {
	python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["nodes"][sys.argv[1]])' "$1"
}
garbage() {	# garbage IMG ADDR: overwrite the first 4 KiB block of node ADDR:
	# inside the node's image whatever its nb (with short nodes the blocks
	# of the slot past nb are not the node's)
	dd if=/dev/urandom of="$1" bs=4096 seek="$2" count=1 conv=notrunc \
		oflag=direct status=none || h_fail "dd into $1"
}
node_bytes() {	# node_bytes IMG ADDR: the node's 16 KiB, as a checksum
	dd if="$1" bs=4096 skip="$2" count=4 status=none | cksum
}

h_setup 2 512M -O v2
h_mount
h_log "600 files in 6 directories"
for d in 0 1 2 3 4 5; do
	mkdir "$MNT/d$d"
	(cd "$MNT/d$d" && for i in $(seq 1 100); do echo "file $d $i" >"f$i"; done)
done
h_umount
h_fsck 0 -n "${IMGS[@]}"

mapfile -t nodes < <(python3 "$NODES" "${IMGS[0]}" 1)
root=(${nodes[0]})
((root[0] >= 1)) || h_fail "INODES tree has one level (${nodes[*]}): add files"
leaves=()
for n in "${nodes[@]}"; do
	set -- $n
	[[ $1 == 0 ]] && leaves+=("$2")
done
((${#leaves[@]} >= 2)) || h_fail "fewer than two leaves: ${nodes[*]}"
h_log "INODES tree: ${#nodes[@]} nodes, root ${root[1]} (level ${root[0]}), leaves ${leaves[*]}"

h_log "one copy of the root and of leaf ${leaves[0]} damaged on ${IMGS[1]}"
h_mount
garbage "${IMGS[1]}" "${root[1]}"
garbage "${IMGS[1]}" "${leaves[0]}"
[[ $(node_bytes "${IMGS[0]}" "${root[1]}") != $(node_bytes "${IMGS[1]}" "${root[1]}") ]] ||
	h_fail "the damage did not reach the image"
js=$("$CTL" scrub start "$MNT" --wait --json | tail -n 1) || h_fail "scrub failed: $js"
echo "$js"
[[ $(node_num bad_copies <<<"$js") == 2 ]] || h_fail "scrub found not 2 bad node copies: $js"
[[ $(node_num repaired <<<"$js") == 2 ]] || h_fail "scrub repaired not 2 node copies: $js"
[[ $(node_num unrecoverable <<<"$js") == 0 ]] || h_fail "unrecoverable nodes: $js"
((($(node_num checked <<<"$js")) >= ${#nodes[@]})) || h_fail "scrub checked too few nodes: $js"
h_log "compare the images"
for a in "${root[1]}" "${leaves[0]}"; do
	[[ $(node_bytes "${IMGS[0]}" "$a") == $(node_bytes "${IMGS[1]}" "$a") ]] ||
		h_fail "node $a differs between the images after the scrub"
done
grep -q "tree nodes: .* 2 copies repaired" "$DAEMON_LOG" ||
	h_fail "the scrub_done event does not count the nodes"
h_log "second scrub"
js=$("$CTL" scrub start "$MNT" --wait --json | tail -n 1) || h_fail "second scrub failed: $js"
[[ $(node_num bad_copies <<<"$js") == 0 ]] || h_fail "second scrub still finds bad nodes: $js"
h_umount
h_fsck 0 -n "${IMGS[@]}"

h_log "both copies of leaf ${leaves[1]} damaged"
h_mount
garbage "${IMGS[0]}" "${leaves[1]}"
garbage "${IMGS[1]}" "${leaves[1]}"
rc=0
js=$("$CTL" scrub start "$MNT" --wait --json | tail -n 1) || rc=$?
echo "$js"
((rc == 1)) || h_fail "scrub with a lost node exits $rc, want 1"
[[ $(node_num unrecoverable <<<"$js") == 1 ]] || h_fail "lost node not counted: $js"
grep -q "tree node at block ${leaves[1]}" <<<"$js" || h_fail "bad list does not name the node: $js"
grep -q "tree nodes have no good copy" "$DAEMON_LOG" || h_fail "lost node not logged"
h_umount
h_fsck 4 -n "${IMGS[@]}"
# The mount reads only the nodes it needs (issue 13: its time does not
# grow with the file system), so it no longer meets a lost leaf and is not
# refused: fsck above and the scrub find it.
echo "v2scrub: ${#nodes[@]} nodes; 2 single-copy damages repaired, a double one reported"
