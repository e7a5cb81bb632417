#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: a SETATTR of times, mode or owners does not wait for the
# file's writes behind (tar -x sets them on every file right after its
# data), and the times stay right: a file written and then given an
# explicit mtime T (utimens) shows T after the write's publish, after a
# remount and after kill -9 once synced; a write after the utimens still
# moves mtime past T; st_blocks seen right after the utimens is that of
# the data; twinfs-ctl stats counts no setattr that waited
# (write_behind.setattr_waits) during either phase, and tar's files carry
# the archive's mtimes.  Runs on format v1 and v2 (setattrwb_v2).
source "$(dirname "$0")/harness.sh"
: "${CTL:?CTL must name the twinfs-ctl binary}"
command -v python3 >/dev/null || h_fail "python3 is needed"
command -v tar >/dev/null || h_fail "tar is needed"
h_need_fsck
N=300
T0=1000000000123456789		# 2001-09-09, with nanoseconds

stat_of() { "$CTL" stats "$MNT" | awk -v k="write_behind.$1:" '$1 == k { print $2 }'; }

# write N files, each: write, utimens(T0 + i), then (every 10th) write
# again; st_blocks right after the utimens.
cat >"$T/write.py" <<'EOF'
import os, sys
d, n, t0 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
stale = 0
for i in range(n):
    p = f"{d}/f{i}"
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, bytes([i % 251]) * 65536)
    os.utime(fd, ns=(t0 + i, t0 + i))    # the kernel writes the pages back first
    if i % 10 == 9:
        os.write(fd, b"late")            # after the utimens: mtime moves on
    else:
        stale += os.stat(fd).st_blocks != 128
    os.close(fd)
print(f"stale st_blocks after utimens: {stale}")
sys.exit(stale != 0)
EOF
# every file's mtime: T0 + i, or past T0 + 1 day for the late ones.
cat >"$T/check.py" <<'EOF'
import os, sys
d, n, t0, what = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
bad = []
for i in range(n):
    m = os.stat(f"{d}/f{i}").st_mtime_ns
    if (i % 10 == 9 and m <= t0 + 86400 * 10**9) or (i % 10 != 9 and m != t0 + i):
        bad.append((i, m))
if bad:
    print(f"{what}: {len(bad)} of {n} files with a wrong mtime, e.g. {bad[:3]}")
    sys.exit(1)
EOF

h_setup 2 256M
# commit=600000: only the sync below makes anything durable.
h_mount "" commit=600000
mkdir "$MNT/u"
python3 "$T/write.py" "$MNT/u" "$N" "$T0" || h_fail "st_blocks stale after a utimens"
sleep 1		# every write behind published
python3 "$T/check.py" "$MNT/u" "$N" "$T0" "mounted" || h_fail "mtime wrong while mounted"
waits=$(stat_of setattr_waits)
h_log "setattr waits: ${waits:-none}, mtimes kept from a publish: $(stat_of mtime_kept)"
[[ $waits == 0 ]] || h_fail "setattrs waited for writes behind: ${waits:-no counter}"
"$CTL" sync "$MNT" || h_fail "twinfs-ctl sync failed"
h_crash
h_mount "" commit=600000
python3 "$T/check.py" "$MNT/u" "$N" "$T0" "after kill -9" || h_fail "mtime wrong after kill -9"
h_remount
python3 "$T/check.py" "$MNT/u" "$N" "$T0" "after a remount" || h_fail "mtime wrong after a remount"

# ---- tar -x: its chown, chmod and utimens per file --------------------------
mkdir "$T/src"
for ((i = 0; i < N; i++)); do
	head -c $(((i * 7919) % 65536 + 1)) /dev/urandom >"$T/src/g$i"
	touch -d "@$((1000000000 + i * 3600))" "$T/src/g$i"
done
chmod 600 "$T/src/g7"
tar -cf "$T/g.tar" -C "$T/src" .
mkdir "$MNT/t"
before=$(stat_of setattr_waits)
tar -xf "$T/g.tar" -C "$MNT/t" || h_fail "tar -x failed"
after=$(stat_of setattr_waits)
h_log "tar -x of $N files: setattr waits $before -> $after, mtimes kept: $(stat_of mtime_kept)"
[[ $after == "$before" ]] || h_fail "tar's setattrs waited for writes behind ($before -> $after)"
"$CTL" sync "$MNT" || h_fail "twinfs-ctl sync failed"
h_crash
h_mount "" commit=600000
(cd "$T/src" && find . -type f -printf '%P %T@ %m %s\n' | sort) >"$T/want"
(cd "$MNT/t" && find . -type f -printf '%P %T@ %m %s\n' | sort) >"$T/got"
diff "$T/want" "$T/got" >&2 || h_fail "tar's files: mtime, mode or size differ after kill -9"
h_umount
h_fsck 0 -n "${IMGS[@]}"
h_log "ok"
