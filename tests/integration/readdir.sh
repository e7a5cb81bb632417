#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: readdir while the directory changes.  One process renames
# files in a 5,000-entry directory (and creates and removes one) while
# another lists it again and again: no pass may return a name twice or
# more entries than ever existed, and every entry left alone must appear
# in every pass; rewinddir starts a pass that sees new entries.  On the
# page-cache mount and with -o writethrough (readdirplus either way).
source "$(dirname "$0")/harness.sh"
: "${POSIXCHECK:?}"

h_setup 2 512M
for opts in "" "writethrough"; do
	h_log "==== readdir during renames${opts:+ with -o $opts}"
	h_mount "" "$opts"
	"$POSIXCHECK" readdir "$MNT/d" 6 || h_fail "readdir during renames${opts:+ (-o $opts)}"
	rm -rf "$MNT/d"
	h_umount
done
echo "readdir: all checks passed"
