#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: a real program under kill -9: SQLite in WAL mode with
# synchronous=FULL inserts one row per transaction (row id N holds bytes
# derived from N) and prints each id once its COMMIT has returned; the
# daemon is killed at a random moment (a checkpoint loop runs beside it on
# format v2, so kills land inside checkpoints too), the dead mount dropped
# and the file system mounted again.  Each round, before writing more:
# PRAGMA integrity_check says ok, every committed row is there with its
# bytes (none lost, none changed), and SQLite writes on.  fsck is clean at
# the end.  SQLKILL_ROUNDS (default 8) rounds.
source "$(dirname "$0")/harness.sh"

h_need_fsck
python3 -c 'import sqlite3' 2>/dev/null ||
	{ echo "SKIP: python3 with its sqlite3 module is not installed"; exit 77; }
rounds=${SQLKILL_ROUNDS:-8}
ckpt_loop=0
[[ $(h_format) == v2 ]] && ckpt_loop=1
RANDOM=${SQLKILL_SEED:-7}
h_setup 2 512M

cat >"$T/writer.py" <<'PY'
import hashlib, os, sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("pragma journal_mode=wal")
db.execute("pragma synchronous=full")
db.execute("create table if not exists t(id integer primary key, v blob)")
n = db.execute("select coalesce(max(id), 0) from t").fetchone()[0]
while True:
    n += 1
    db.execute("begin")
    db.execute("insert into t(id, v) values(?, ?)", (n, hashlib.sha256(b"%d" % n).digest() * 100))
    db.execute("commit")
    print(n, flush=True)
PY
cat >"$T/check.py" <<'PY'
import hashlib, sqlite3, sys
acked = int(sys.argv[2])
ids = 0
try:
    db = sqlite3.connect(sys.argv[1], isolation_level=None)
    ok = db.execute("pragma integrity_check").fetchone()[0]
    if ok != "ok":
        sys.exit("integrity_check: " + ok)
    for i, v in db.execute("select id, v from t order by id"):
        ids += 1
        if i != ids:
            sys.exit("row %d missing (next is %d)" % (ids, i))
        if v != hashlib.sha256(b"%d" % i).digest() * 100:
            sys.exit("row %d holds other bytes" % i)
except sqlite3.Error as e:
    sys.exit("SQLite: %s (%d commits had returned)" % (e, acked))
if ids < acked:
    sys.exit("%d rows, but %d commits had returned" % (ids, acked))
print(ids)
PY

acked=0
ckpts=0
wp=""
wc=""
# A failure while the writer runs stops it first: left behind, it would
# hold the dead mount (and the images under it) open.
fail() {
	[[ -z $wp ]] || kill -9 "$wp" $wc 2>/dev/null
	h_fail "$@"
}
for ((round = 0; round < rounds; round++)); do
	h_mount
	if ((round > 0)); then
		rows=$(python3 "$T/check.py" "$MNT/db" "$acked" 2>&1) ||
			h_fail "after the kill of round $((round - 1)): $rows"
		h_log "round $round: $rows rows intact ($acked acknowledged)"
	fi
	python3 "$T/writer.py" "$MNT/db" >"$T/acked.$round" 2>/dev/null &
	wp=$!
	wc=""
	if ((ckpt_loop)); then
		h_ckpt_loop "$T/ckpts.$round"
		wc=$CKPT_LOOP_PID
	fi
	# Kill only once this round has committed (python and SQLite start
	# slowly on a busy machine), then at a random moment.
	for ((i = 0; i < 300; i++)); do
		[[ -s $T/acked.$round ]] && break
		sleep 0.1
	done
	[[ -s $T/acked.$round ]] || fail "round $round: SQLite committed nothing in 30 s"
	sleep "$((RANDOM % 2)).$((RANDOM % 10))"
	h_crash
	wait "$wp" $wc 2>/dev/null || true
	wp=""
	h_check_log "$DAEMON_LOG" || { h_dump_log; exit 1; }
	acked=$(tail -n 1 "$T/acked.$round")
	ckpts=$((ckpts + $(cat "$T/ckpts.$round" 2>/dev/null || echo 0)))
done
h_mount
rows=$(python3 "$T/check.py" "$MNT/db" "$acked" 2>&1) || h_fail "after the last kill: $rows"
h_umount
h_fsck 0 -n "${IMGS[@]}"
((ckpt_loop == 0 || ckpts > 0)) || h_fail "no checkpoint completed while SQLite wrote"
echo "sqlkill: $rounds kill -9 rounds, $rows rows, every one of the $acked acknowledged intact" \
	"($ckpts checkpoints during the rounds)"
