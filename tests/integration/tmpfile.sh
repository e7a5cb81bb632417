#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: O_TMPFILE and RENAME_WHITEOUT, and overlayfs with its upper
# layer on twinfs (a container's storage).  A file opened O_TMPFILE has no
# name and no link, reads back what was written, and linkat(AT_EMPTY_PATH)
# names it (one opened O_EXCL the kernel refuses to link); after remount
# the named one is intact.  One left unnamed, fsynced with 8 MiB and open
# when the daemon is killed, is deleted by the next mount (its space comes
# back, fsck -n clean).  renameat2(RENAME_WHITEOUT) moves the file and
# leaves a character device 0:0 at the old name.  Overlayfs mounts with
# upper and work directories on twinfs (the kernel asks a FUSE upper layer
# for RENAME_WHITEOUT: "upper fs missing required features" before this),
# copies up on write, leaves whiteouts for deletes and renames.  Each part
# failed before twinfs answered FUSE_TMPFILE (libfuse 3.14 answers ENOSYS)
# and took the rename flag.
source "$(dirname "$0")/harness.sh"

h_setup 2 256M
h_mount
mkdir "$MNT/d"
head -c 1M /dev/urandom >"$T/p"

used() { df -B1 --output=used "$MNT" | tail -1; }

# 1. Unnamed, linkable, named; O_EXCL not linkable; RENAME_WHITEOUT.
python3 - "$MNT/d" "$T/p" <<'PY' || h_fail "O_TMPFILE / RENAME_WHITEOUT: the check above failed"
import ctypes, errno, os, stat, sys
d, src = sys.argv[1], sys.argv[2]
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, AT_EMPTY_PATH, RENAME_WHITEOUT = -100, 0x1000, 4
def fail(msg):
    sys.exit("tmpfile: " + msg)
data = open(src, "rb").read()
fd = os.open(d, os.O_TMPFILE | os.O_RDWR, 0o640)
os.write(fd, data)
st = os.fstat(fd)
if not stat.S_ISREG(st.st_mode) or st.st_nlink != 0 or st.st_size != len(data):
    fail("fstat: mode %o nlink %d size %d" % (st.st_mode, st.st_nlink, st.st_size))
if stat.S_IMODE(st.st_mode) != 0o640:
    fail("mode %o, not 640" % stat.S_IMODE(st.st_mode))
if os.listdir(d):
    fail("the unnamed file is listed: %s" % os.listdir(d))
if os.pread(fd, len(data), 0) != data:
    fail("reads back wrong before it has a name")
if libc.linkat(fd, b"", AT_FDCWD, os.path.join(d, "named").encode(), AT_EMPTY_PATH):
    fail("linkat: %s" % os.strerror(ctypes.get_errno()))
if os.fstat(fd).st_nlink != 1 or os.listdir(d) != ["named"]:
    fail("after linkat: nlink %d, listing %s" % (os.fstat(fd).st_nlink, os.listdir(d)))
os.close(fd)
if open(os.path.join(d, "named"), "rb").read() != data:
    fail("the named file reads back wrong")
fd = os.open(d, os.O_TMPFILE | os.O_RDWR | os.O_EXCL, 0o600)
if not libc.linkat(fd, b"", AT_FDCWD, os.path.join(d, "excl").encode(), AT_EMPTY_PATH):
    fail("an O_EXCL tmpfile was linked")
if ctypes.get_errno() != errno.ENOENT:
    fail("O_EXCL link: %s, not ENOENT" % os.strerror(ctypes.get_errno()))
os.close(fd)
try:
    os.open(os.path.join(d, "named"), os.O_TMPFILE | os.O_RDWR, 0o600)
    fail("O_TMPFILE on a regular file succeeded")
except NotADirectoryError:
    pass
# RENAME_WHITEOUT: the old name becomes a whiteout, the new one the file.
open(os.path.join(d, "old"), "wb").write(b"moved\n")
open(os.path.join(d, "victim"), "wb").write(b"replaced\n")
for new in ("new", "victim"):
    if new == "victim":
        open(os.path.join(d, "old"), "wb").write(b"moved\n")
    r = libc.renameat2(AT_FDCWD, os.path.join(d, "old").encode(), AT_FDCWD,
                       os.path.join(d, new).encode(), RENAME_WHITEOUT)
    if r:
        fail("renameat2(RENAME_WHITEOUT) to %s: %s" % (new, os.strerror(ctypes.get_errno())))
    w = os.lstat(os.path.join(d, "old"))
    if not stat.S_ISCHR(w.st_mode) or w.st_rdev != 0 or stat.S_IMODE(w.st_mode) != 0:
        fail("the whiteout: mode %o rdev %d" % (w.st_mode, w.st_rdev))
    if open(os.path.join(d, new), "rb").read() != b"moved\n":
        fail("the renamed file (%s) reads back wrong" % new)
    if new == "new":
        os.unlink(os.path.join(d, "old"))
PY
h_remount
cmp -s "$T/p" "$MNT/d/named" || h_fail "the linked tmpfile is not intact after remount"
[[ -c $MNT/d/old && $(stat -c %t:%T "$MNT/d/old") == 0:0 ]] || h_fail "the whiteout is gone after remount"

# 2. An unnamed file open at kill -9: the next mount deletes it.
base=$(used)
python3 - "$MNT/d" "$T/ready" <<'PY' &
import os, sys, time
fd = os.open(sys.argv[1], os.O_TMPFILE | os.O_RDWR, 0o600)
os.write(fd, os.urandom(8 << 20))
os.fsync(fd)
open(sys.argv[2], "w").write("ready\n")
time.sleep(600)
PY
holder=$!
for _ in $(seq 300); do [[ -e $T/ready ]] && break; sleep 0.1; done
[[ -e $T/ready ]] || h_fail "the tmpfile holder did not get ready"
held=$(used)
(( held - base >= 8 << 20 )) || h_fail "8 MiB written to a tmpfile show as $((held - base)) bytes used"
h_crash
kill -9 "$holder" 2>/dev/null || true
wait "$holder" 2>/dev/null || true
h_mount
after=$(used)
(( after - base < 1 << 20 )) ||
	h_fail "the tmpfile open at the crash still holds $((after - base)) bytes after the mount"
grep -q "reclaimed 1 orphan inode" "$DAEMON_LOG" ||
	{ h_dump_log; h_fail "the mount did not say it reclaimed the tmpfile"; }
cmp -s "$T/p" "$MNT/d/named" || h_fail "the named file changed over the crash"

# 3. Overlayfs with its upper layer here.
if ! grep -qw overlay /proc/filesystems && ! modprobe overlay 2>/dev/null; then
	echo "tmpfile: overlayfs part skipped: this kernel has no overlay file system"
else
	mkdir -p "$T/low/sub" "$MNT/up" "$MNT/work" "$T/ovl"
	echo lower >"$T/low/f"
	echo gone >"$T/low/g"
	echo moving >"$T/low/sub/m"
	mount -t overlay ovl -o "lowerdir=$T/low,upperdir=$MNT/up,workdir=$MNT/work" "$T/ovl" ||
		h_fail "overlayfs refused twinfs as its upper layer: $(dmesg | grep overlayfs | tail -2 | tr '\n' ' ')"
	echo more >>"$T/ovl/f"
	rm "$T/ovl/g"
	mv "$T/ovl/sub/m" "$T/ovl/m2"
	[[ $(cat "$T/ovl/f") == $'lower\nmore' ]] || h_fail "overlay: the copied-up file reads wrong"
	[[ ! -e $T/ovl/g && ! -e $T/ovl/sub/m && $(cat "$T/ovl/m2") == moving ]] ||
		h_fail "overlay: a delete or a rename does not show"
	umount "$T/ovl"
	[[ $(cat "$MNT/up/f") == $'lower\nmore' ]] || h_fail "overlay: no copy-up in the upper layer"
	[[ -c $MNT/up/g && $(stat -c %t:%T "$MNT/up/g") == 0:0 ]] ||
		h_fail "overlay: no whiteout for the deleted file in the upper layer"
	[[ -c $MNT/up/sub/m ]] || h_fail "overlay: no whiteout for the renamed file in the upper layer"
	[[ $(cat "$T/low/f") == lower && -e $T/low/g ]] || h_fail "overlay: the lower layer changed"
fi
h_umount
h_need_fsck
h_fsck 0 -n "${IMGS[@]}"
echo "tmpfile: O_TMPFILE unnamed, linkable, deleted after a crash; RENAME_WHITEOUT; overlayfs upper layer"
