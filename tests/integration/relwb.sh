#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: RELEASE does not wait for the file's writes behind, and no
# open file is released under one.  Files closed right after their data
# went behind (write, utimens, close: what tar -x does to every file) are
# released early (twinfs-ctl stats: write_behind.releases_deferred counts
# them, and must be above 0); every file reads back before and after a
# remount; a file unlinked while open and closed right after its data went
# behind gives its blocks back (statfs after twinfs-ctl sync); the unmount
# right after the closes finds no file the kernel left open; fsck finds
# nothing wrong.  Runs on format v1 and v2 (relwb_v2).
source "$(dirname "$0")/harness.sh"
: "${CTL:?CTL must name the twinfs-ctl binary}"
command -v python3 >/dev/null || h_fail "python3 is needed"
h_need_fsck
N=200

stat_of() { "$CTL" stats "$MNT" | awk -v k="write_behind.$1:" '$1 == k { print $2 }'; }
free_kib() { stat -f -c '%a %S' "$MNT" | awk '{ print $1 * $2 / 1024 }'; }

cat >"$T/write.py" <<'EOF'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    fd = os.open(f"{d}/f{i}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, bytes([i % 251]) * (65536 + 4096 * (i % 48)))
    os.utime(fd, ns=(10**18 + i, 10**18 + i))	# the pages go back, behind
    os.close(fd)
EOF
cat >"$T/check.py" <<'EOF'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
bad = [i for i in range(n)
       if open(f"{d}/f{i}", "rb").read() != bytes([i % 251]) * (65536 + 4096 * (i % 48))]
if bad:
    print(f"{len(bad)} of {n} files read back wrong, e.g. {bad[:3]}")
    sys.exit(1)
EOF
# Unlinked while open: 16 MiB written back at the utimens, then closed.
cat >"$T/unlinked.py" <<'EOF'
import os, sys
p = sys.argv[1]
fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
os.unlink(p)
for _ in range(16):
    os.write(fd, b"u" * (1 << 20))
os.utime(fd, ns=(10**18, 10**18))
os.close(fd)
EOF

h_setup 2 256M
h_mount
mkdir "$MNT/d"
python3 "$T/write.py" "$MNT/d" "$N" || h_fail "writing the files failed"
python3 "$T/check.py" "$MNT/d" "$N" || h_fail "files read back wrong before the remount"
deferred=$(stat_of releases_deferred)
h_log "releases answered while the file's writes were behind: ${deferred:-none} of $N"
((${deferred:-0} > 0)) || h_fail "every release waited for its file's writes behind"

"$CTL" sync "$MNT" >/dev/null || h_fail "twinfs-ctl sync failed"
before=$(free_kib)
python3 "$T/unlinked.py" "$MNT/gone" || h_fail "the unlinked file's writes failed"
# close(2) returns before the kernel sends RELEASE (and FORGET) for it:
# FUSE sends them in the background, so the sync below may be served
# first.  The blocks must come back, within 10 s.
for ((i = 0; i < 100; i++)); do
	"$CTL" sync "$MNT" >/dev/null || h_fail "twinfs-ctl sync failed"
	after=$(free_kib)
	((before - after < 1024)) && break
	sleep 0.1
done
h_log "free KiB before the unlinked file $before, after its close $after (after $i waits)"
((before - after < 1024)) || h_fail "the unlinked file's blocks were not given back ($before -> $after KiB)"

# The unmount comes right after the closes of files still written behind.
python3 "$T/write.py" "$MNT" 40 || h_fail "writing the last files failed"
h_umount
grep -a "the kernel left open" "$DAEMON_LOG" && h_fail "released files counted as left open"
h_mount
python3 "$T/check.py" "$MNT/d" "$N" || h_fail "files read back wrong after the remount"
python3 "$T/check.py" "$MNT" 40 || h_fail "the last files read back wrong after the remount"
h_umount
h_fsck 0 -n "${IMGS[@]}"
h_log "ok"
