#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: format 1 is deprecated: twinfs and fsck.twinfs refuse a format 1
# file system (mkfs -O v1) with one line naming the image, the format and
# the opt-in, exit non-zero (fsck: 8) and leave both images byte for byte as
# they were; with the opt-in (-o format=1, fsck.twinfs --format=1) it
# mounts with a one-line deprecation warning, its files read back intact, and
# fsck checks it.  mkfs without -O makes format 2.
# The refusals are the point: the harness must not add the opt-in itself.
TWINFS_FORMAT=v2
source "$(dirname "$0")/harness.sh"

h_need_fsck

# mkfs's default is format 2 (its summary says which it wrote).
h_setup 2 256M
out=$("$MKFS" -f "${IMGS[@]}") || h_fail "mkfs without -O failed: $out"
grep -q "format:  v2" <<<"$out" || h_fail "mkfs without -O did not make format 2: $out"
h_mount
h_umount

out=$("$MKFS" -f -O v1 "${IMGS[@]}") || h_fail "mkfs -O v1 failed: $out"
grep -q "format:  v1 (deprecated" <<<"$out" || h_fail "mkfs -O v1 summary: $out"

# Files written through the opt-in, the deprecation warning said once.
h_mount "" format=1
n=$(grep -c "format 1 is deprecated" "$DAEMON_LOG" || true)
((n == 1)) || { cat "$DAEMON_LOG"; h_fail "-o format=1: $n deprecation warnings, want 1"; }
mkdir "$MNT/d"
head -c 3M /dev/urandom >"$MNT/d/big"
echo small >"$MNT/small"
(cd "$MNT" && sha256sum d/big small) >"$T/files"
h_umount

sha256sum "${IMGS[@]}" >"$T/imgs"
unchanged() {
	sha256sum -c --quiet "$T/imgs" || h_fail "$1 changed an image"
}

# Mount without the opt-in: refused, one line, nothing written.  With one
# image (degraded) too, and with format=2 asked for explicitly.
for args in "$(h_devspec "${IMGS[@]}")|" "$(h_devspec "${IMGS[@]}")|format=2" \
	"${IMGS[0]}|degraded"; do
	spec=${args%%|*}
	opts=${args#*|}
	h_mount_fails "$spec" "$opts"
	what="mount $spec${opts:+ -o $opts}"
	h_expect_one_line "$FAIL_OUT" "${IMGS[0]}: format 1 image" "$what"
	grep -qF -- "-o format=1" <<<"$FAIL_OUT" || h_fail "$what: no way out named: $FAIL_OUT"
	grep -qF "mkfs.twinfs" <<<"$FAIL_OUT" || h_fail "$what: mkfs.twinfs not named: $FAIL_OUT"
	unchanged "$what"
done
h_mount_fails "$(h_devspec "${IMGS[@]}")" format=3
grep -qF "format=3: expected 1 or 2" <<<"$FAIL_OUT" || h_fail "format=3: $FAIL_OUT"
unchanged "format=3"

# fsck without the opt-in: exit 8 (operational error), one line, in every
# mode; -y must not repair (write) anything either.
for mode in -n -y -p; do
	h_fsck 8 "$mode" "${IMGS[@]}"
	h_expect_one_line "$FOUT" "format 1 image" "fsck $mode"
	grep -qF -- "--format=1" <<<"$FOUT" || h_fail "fsck $mode: no way out named: $FOUT"
	unchanged "fsck $mode"
done
h_fsck 8 --format=3 -n "${IMGS[@]}"

# The opt-in: fsck checks it (clean, with the warning), mount reads the files.
h_fsck 0 --format=1 -n "${IMGS[@]}"
grep -q "0 errors found" <<<"$FOUT" || h_fail "fsck --format=1: $FOUT"
grep -q "format 1 is deprecated" <<<"$FOUT" || h_fail "fsck --format=1 does not warn: $FOUT"
h_mount "" format=1
(cd "$MNT" && sha256sum -c --quiet "$T/files") || h_fail "files differ after the refusals"
h_umount
h_log "format 1 refused without the opt-in, mounted and checked with it"
