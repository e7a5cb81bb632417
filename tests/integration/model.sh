#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: Randomized model-based test: 100k random writes/truncates/punches/reads
# against an in-memory model, buffered and O_DIRECT, fixed seeds, with
# remounts in the middle (the model is saved, the file system remounted, the
# next phase verifies everything before carrying on).  At the end each image
# alone must hold every block.
source "$(dirname "$0")/harness.sh"
: "${MODEL:?}"

scale=${MODEL_SCALE:-1}		# multiply the operation counts
ops() { echo $(($1 * scale)); }

h_setup 2 1G
h_mount
d=$MNT/model
"$MODEL" --dir "$d" --seed 1 --ops "$(ops 30000)" --buffered --save "$T/m1" ||
	h_fail "phase 1 (buffered)"
h_remount
"$MODEL" --dir "$d" --seed 2 --ops "$(ops 30000)" --direct --load "$T/m1" --save "$T/m2" ||
	h_fail "phase 2 (direct, after remount)"
h_umount
h_mount "" writethrough
"$MODEL" --dir "$d" --seed 3 --ops "$(ops 20000)" --buffered --load "$T/m2" --save "$T/m3" ||
	h_fail "phase 3 (buffered, writethrough)"
h_remount
"$MODEL" --dir "$d" --seed 4 --ops "$(ops 20000)" --direct --load "$T/m3" --save "$T/m4" ||
	h_fail "phase 4 (direct, writethrough)"
h_umount
for img in "${IMGS[@]}"; do
	h_mount "$img" degraded
	"$MODEL" --dir "$d" --seed 5 --ops 0 --buffered --load "$T/m4" ||
		h_fail "$img alone does not hold the model's data"
	h_umount
done
echo "model: $(ops 100000) operations verified"
