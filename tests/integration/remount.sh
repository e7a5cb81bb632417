#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: The issue's acceptance run: cp -a /usr/include in, unmount, remount, diff -r
# clean and identical hashes; then each image alone (-o degraded) holds every
# block of it.
source "$(dirname "$0")/harness.sh"

src=${REMOUNT_SRC:-/usr/include}
[[ -d $src ]] || h_fail "$src is missing"
h_setup 2 1G
h_mount
h_log "copy $src"
cp -a "$src" "$MNT/tree"
(cd "$src" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$T/sums"
h_remount
diff -r --no-dereference "$src" "$MNT/tree" >"$T/diff" 2>&1 ||
	{ head -n 20 "$T/diff" >&2; h_fail "diff -r after remount"; }
(cd "$MNT/tree" && sha256sum --quiet -c "$T/sums") || h_fail "hashes differ after remount"
# Metadata cp -a preserves: owners, modes, mtimes, symlinks.
# (Directory sizes are the file system's own business.)
meta() {
	(cd "$1" && find . \( -type d -printf '%p %y %m %U %G %T@\n' \) -o \
		-printf '%p %y %m %U %G %s %T@ %n %l\n' | sort)
}
meta "$src" >"$T/meta.src"
meta "$MNT/tree" >"$T/meta.mnt"
diff "$T/meta.src" "$T/meta.mnt" >"$T/meta.diff" ||
	{ head -n 20 "$T/meta.diff" >&2; h_fail "metadata differs after remount"; }
h_umount

for img in "${IMGS[@]}"; do
	h_mount "$img" degraded
	diff -r --no-dereference "$src" "$MNT/tree" >"$T/diff" 2>&1 ||
		{ head -n 20 "$T/diff" >&2; h_fail "diff -r with only $img"; }
	(cd "$MNT/tree" && sha256sum --quiet -c "$T/sums") || h_fail "hashes differ with only $img"
	h_umount
done
echo "remount: $(wc -l <"$T/sums") files identical after remount and on each image alone"
