#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: shared mmap of files opened for direct I/O.  A file opened
# O_DIRECT|O_RDWR is mapped MAP_SHARED and written through the map and
# through pwrite; msync and direct reads see each other's data.  With
# -o writethrough every open is direct I/O, so SQLite's WAL mode (its -shm
# file is a shared map) must work there too.
source "$(dirname "$0")/harness.sh"
: "${POSIXCHECK:?}"
if ! command -v sqlite3 >/dev/null; then
	echo "SKIP: sqlite3 is missing (scripts/deps.sh installs it)"
	exit 77
fi

h_setup 2 512M
for opts in "" "writethrough" "no_writeback_cache"; do
	h_log "==== mmap of O_DIRECT opens${opts:+ with -o $opts}"
	h_mount "" "$opts"
	"$POSIXCHECK" mmap-dio "$MNT/m" || h_fail "shared mmap of an O_DIRECT open${opts:+ (-o $opts)}"
	out=$(sqlite3 "$MNT/db" 'PRAGMA journal_mode=WAL;' \
		'CREATE TABLE t(x);' \
		'WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<1000) INSERT INTO t SELECT i FROM c;' \
		'SELECT count(*), sum(x) FROM t;' 2>&1) ||
		h_fail "sqlite3 in WAL mode${opts:+ (-o $opts)}: $out"
	[[ $out == $'wal\n1000|500500' ]] || h_fail "sqlite3 WAL${opts:+ (-o $opts)}: '$out'"
	out=$(sqlite3 "$MNT/db" 'PRAGMA integrity_check;' 'SELECT count(*) FROM t;' 2>&1) ||
		h_fail "sqlite3 reopen${opts:+ (-o $opts)}: $out"
	[[ $out == $'ok\n1000' ]] || h_fail "sqlite3 after reopen${opts:+ (-o $opts)}: '$out'"
	rm -f "$MNT/m" "$MNT/db" "$MNT/db-wal" "$MNT/db-shm"
	h_umount
done
echo "mmap: all checks passed"
