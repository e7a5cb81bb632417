#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: fallocate's promise on a full file system (xfstests
# generic/274): space fallocated with KEEP_SIZE past a file's end is
# written in place later, so once the file system is full (1 MiB, 4 KiB
# and O_SYNC writers ran it out of space) every write into that range must
# still succeed, one open per 4 KiB block as generic/274 does and then all
# the others through one open, while a write anywhere else gets ENOSPC.
# Fallocating the same range again takes nothing and must succeed too.
# All of it must read back after a remount, with fsck clean.  Before the
# low-space admission counted what the map says a write takes, all 2,048
# single-block writes failed with ENOSPC.  Then space a delete freed must
# be usable at once by a writer whose open is cached (xfstests generic/371):
# its write(2) right after the delete got ENOSPC until the next log
# commit released the deleted blocks.
source "$(dirname "$0")/harness.sh"

h_setup 2 256M
# Allocated images: low-space mode's write-back is slow on holes of the
# host file system, and that is not what is tested.
for i in "${IMGS[@]}"; do fallocate -l 256M "$i"; done
h_mount
F=$MNT/pre
# Opened while space is plentiful: a cached open, whose write(2) calls
# meet the low-space gate once the mount is low.
exec 3>"$MNT/cached"
# Blocks 16..4111: 16 MiB fallocated past the 64 KiB the file holds.
python3 - "$F" <<'EOF' || h_fail "could not write the first 64 KiB"
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
for i in range(16):
    os.pwrite(fd, (b"%08d" % i) * 512, i * 4096)
os.fsync(fd)
EOF
fallocate -n -o 65536 -l 16M "$F" || h_fail "fallocate -n of 16 MiB failed"
[[ $(stat -c %s "$F") == 65536 ]] || h_fail "fallocate -n changed the size: $(stat -c %s "$F")"

h_log "filling the file system"
dd if=/dev/zero of="$MNT/fill1" bs=1M status=none 2>/dev/null &&
	h_fail "1 MiB writes of 500 MiB into 256 MiB never got ENOSPC"
dd if=/dev/zero of="$MNT/fill2" bs=4K status=none 2>/dev/null || true
sync -f "$MNT"
dd if=/dev/zero of="$MNT/fill3" bs=4K oflag=sync status=none 2>/dev/null || true
h_log "available after the fill: $(stat -f -c '%a' "$MNT") blocks"
if dd if=/dev/zero of="$MNT/new" bs=64K count=1 conv=fsync status=none 2>/dev/null; then
	h_fail "a new file got 64 KiB on a full file system"
fi

h_log "odd blocks of the fallocated range, one open each"
python3 - "$F" <<'EOF' || h_fail "a write into fallocated space failed on a full file system"
import os, sys
for i in range(17, 4112, 2):
    fd = os.open(sys.argv[1], os.O_WRONLY)
    try:
        os.pwrite(fd, (b"%08d" % i) * 512, i * 4096)
    except OSError as e:
        sys.exit("block %d: %s" % (i, e))
    os.close(fd)
EOF
sync -f "$MNT"
h_log "even blocks, one open for all, then fsync"
python3 - "$F" <<'EOF' || h_fail "a write into fallocated space failed on a full file system"
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
for i in range(16, 4112, 2):
    try:
        os.pwrite(fd, (b"%08d" % i) * 512, i * 4096)
    except OSError as e:
        sys.exit("block %d: %s" % (i, e))
os.fsync(fd)
EOF
fallocate -n -o 65536 -l 16M "$F" ||
	h_fail "fallocate over space already allocated failed on a full file system"

h_log "deleting the 1 MiB filler, then 8 MiB through the cached open"
head -c 8M /dev/urandom >"$T/pat"
rm "$MNT/fill1"
cat "$T/pat" >&3 || h_fail "write(2) right after a delete got an error (ENOSPC?) with the space freed"
exec 3>&-
h_umount
h_need_fsck
h_fsck 0 -n "${IMGS[@]}"
h_mount
python3 - "$F" <<'EOF' || h_fail "data written into fallocated space did not read back"
import os, sys
with open(sys.argv[1], "rb") as f:
    data = f.read()
if len(data) != 4112 * 4096:
    sys.exit("size %d, expected %d" % (len(data), 4112 * 4096))
for i in range(4112):
    if data[i * 4096:(i + 1) * 4096] != (b"%08d" % i) * 512:
        sys.exit("block %d reads wrong" % i)
EOF
cmp "$T/pat" "$MNT/cached" || h_fail "what the cached open wrote does not read back"
h_umount
echo "fallocfull: writes into fallocated space worked on a full file system and read back"
