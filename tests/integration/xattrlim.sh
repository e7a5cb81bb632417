#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: xattr limits through the kernel.  10,000 xattrs of 1,000
# bytes on one file: setxattr fails with ENOSPC once the values reach 1 MiB;
# names alone stop at the 64 KiB name list (XATTR_LIST_MAX).  listxattr
# works on both files (it failed with E2BIG forever once the list was too
# long), before and after a remount.
source "$(dirname "$0")/harness.sh"

command -v python3 >/dev/null || h_fail "python3 is needed"

cat >"$T/xattrs.py" <<'EOF2'
import errno, os, sys

mnt, phase = sys.argv[1], sys.argv[2]
f, g = os.path.join(mnt, "f"), os.path.join(mnt, "g")

def fill(path, names, value):
    for i, n in enumerate(names):
        try:
            os.setxattr(path, n, value)
        except OSError as e:
            if e.errno != errno.ENOSPC:
                sys.exit("%s: setxattr #%d: %s, expected ENOSPC" % (path, i, e))
            return i
    sys.exit("%s: all %d setxattr calls succeeded; the limit is missing" % (path, len(names)))

def listed(path, want):
    names = os.listxattr(path)
    if len(names) != want:
        sys.exit("%s: listxattr gives %d names, expected %d" % (path, len(names), want))

if phase == "fill":
    open(f, "w").close()
    open(g, "w").close()
    n = fill(f, ["user.%05d" % i for i in range(10000)], b"v" * 1000)
    if n != (1 << 20) // 1000:
        sys.exit("f: ENOSPC after %d xattrs of 1,000 bytes, expected %d" % (n, (1 << 20) // 1000))
    m = fill(g, ["user.%05d" % i + "n" * 245 for i in range(10000)], b"")
    if m != 65536 // 256:
        sys.exit("g: ENOSPC after %d names of 250 bytes, expected %d" % (m, 65536 // 256))
    print(n, m)
else:
    n, m = map(int, sys.argv[3:5])
    listed(f, n)
    listed(g, m)
    if os.getxattr(f, "user.00007") != b"v" * 1000:
        sys.exit("f: user.00007 reads back wrong")
EOF2

h_setup 2 256M
h_mount
h_log "fill two files with xattrs up to the limits"
counts=$(python3 "$T/xattrs.py" "$MNT" fill) || h_fail "xattr limits (see above)"
python3 "$T/xattrs.py" "$MNT" check $counts || h_fail "listxattr"
h_remount
python3 "$T/xattrs.py" "$MNT" check $counts || h_fail "listxattr after a remount"
h_umount
h_log "ok"
