#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: timestamps never run backwards across operations.  On the
# default mount the kernel stamps some times itself (a buffered write with
# the writeback cache sets mtime and ctime) and the daemon stamps the rest
# (create, mkdir, setxattr, chmod).  Thousands of rounds of "one, then the
# other" must each give the later change a time no earlier than the first:
# make and rsync compare them.
source "$(dirname "$0")/harness.sh"

command -v python3 >/dev/null || h_fail "python3 is needed"

cat >"$T/times.py" <<'EOF'
import os, sys

d, rounds = sys.argv[1], int(sys.argv[2])
bad = {}

def times(p):
    s = os.stat(p)
    return s.st_mtime_ns, s.st_ctime_ns

def later(what, first, then, fields=(0, 1)):
    a, b = times(first), times(then)
    behind = max(a[f] - b[f] for f in fields)
    if behind > 0:
        n = bad.setdefault(what, [0, 0])
        n[0] += 1
        n[1] = max(n[1], behind)

def write(p):                   # buffered: the kernel stamps mtime and ctime
    fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"x")
    os.close(fd)

def create(p):                  # the daemon stamps every time
    os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))

j = lambda n: os.path.join(d, n)
write(j("old"))
create(j("x"))
for i in range(rounds):
    write(j("ref"))
    create(j("new"))
    later("kernel write, then daemon create", j("ref"), j("new"))
    write(j("old"))
    later("daemon create, then kernel write", j("new"), j("old"))
    os.mkdir(j("dir"))
    later("kernel write, then daemon mkdir", j("old"), j("dir"))
    write(j("ref"))
    os.setxattr(j("x"), "user.t", b"%d" % i)
    later("kernel write, then daemon setxattr (ctime)", j("ref"), j("x"), (1,))
    os.chmod(j("new"), 0o600)
    write(j("old"))
    later("daemon chmod, then kernel write (ctime)", j("new"), j("old"), (1,))
    os.unlink(j("new"))
    os.rmdir(j("dir"))
    os.unlink(j("ref"))
for what, (n, worst) in sorted(bad.items()):
    print("FAIL: %s: the later time was earlier in %d of %d rounds (by up to %d ns)"
          % (what, n, rounds, worst))
sys.exit(1 if bad else 0)
EOF

h_setup 2 256M
h_mount
h_log "1200 rounds of kernel-stamped and daemon-stamped changes"
python3 "$T/times.py" "$MNT" 1200 || h_fail "timestamps ran backwards (see above)"
h_umount
h_log "ok"
