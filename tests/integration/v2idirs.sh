#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: format v2, issue 13: a resident directory counts its
# entries in the inode cache's budget.  160 directories of 2,000 empty
# files; remount with -o cache=4M (1,024 inodes) and list the root with
# attributes, which faults in every directory with all its names.  The
# daemon's peak RSS grows by less than 24 MiB (memtrim gives freed memory
# back every 16 MiB; each directory counted as one inode kept all 320,000
# names: 34 MiB more for half of them), every directory still lists its
# 2,000 names, and fsck is clean.
source "$(dirname "$0")/harness.sh"

h_need_fsck
N_DIRS=160
PER_DIR=2000
HWM_GROWTH_KIB=${HWM_GROWTH_KIB:-24576}
# AddressSanitizer keeps freed memory in quarantine: the bound does not
# apply there.
if h_asan; then
	echo "SKIP: the RSS bound does not apply under AddressSanitizer (freed memory stays quarantined)"
	exit 77
fi
hwm_kib() { awk '/^VmHWM/ { print $2 }' "/proc/$DAEMON_PID/status"; }

h_setup 2 4G -O v2
h_mount
h_log "$((N_DIRS * PER_DIR)) files in $N_DIRS directories"
python3 - "$MNT" $N_DIRS $PER_DIR <<'PY' || h_fail "creating the files"
import os, stat, sys
m, nd, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for d in range(nd):
    dp = os.path.join(m, "d%03d" % d)
    os.mkdir(dp)
    for i in range(per):
        os.mknod(os.path.join(dp, "file-with-a-longish-name-%05d" % i), 0o644 | stat.S_IFREG)
for d in range(4):
    dp = os.path.join(m, "warm", "w%d" % d)
    os.makedirs(dp)
    for i in range(20):
        os.mknod(os.path.join(dp, "f%d" % i), 0o644 | stat.S_IFREG)
PY
h_umount
h_fsck 0 -n "${IMGS[@]}"

h_mount "" cache=4M
# What a first listing costs whatever its size (threads, rings) first.
ls -lR "$MNT/warm" >/dev/null
h0=$(hwm_kib)
n=$(ls -l "$MNT" | grep -c '^d')
((n == N_DIRS + 1)) || h_fail "ls -l of the root saw $n directories, expected $((N_DIRS + 1))"
h1=$(hwm_kib)
h_log "peak RSS $h0 KiB after the mount and a small listing, $h1 KiB after listing the root"
((h1 - h0 < HWM_GROWTH_KIB)) ||
	h_fail "listing $N_DIRS directories raised the peak RSS by $((h1 - h0)) KiB (bound $HWM_GROWTH_KIB)"
for d in 0 80 159; do
	n=$(ls -f "$MNT/d$(printf %03d $d)" | grep -c '^file-')
	((n == PER_DIR)) || h_fail "d$d lists $n names, expected $PER_DIR"
done
h_umount
h_fsck 0 -n "${IMGS[@]}"
echo "v2idirs: all checks passed"
