# SPDX-License-Identifier: GPL-2.0-or-later
# Writes the kernel cannot refuse for a FUSE file system (it never learns of
# chattr's flags): through an open made before the flag, O_DIRECT, fcntl
# taking O_APPEND away, copy_file_range.  twinfs must refuse them with
# EPERM as ext4 does, and keep the file as it was.  Then, on every mount,
# an O_APPEND open's writes that say where they go (a shared mapping's
# writeback, pwrite after F_SETFL 0) land there, not at the end.
# Usage: chattr_writes.py MNT MODE   (MODE: default or writethrough)
import errno, fcntl, mmap, os, subprocess, sys

mnt, mode = sys.argv[1], sys.argv[2]
PAT = b'0123456789ABCDEF' * 256		# 4 KiB


def fail(msg):
	sys.exit(f"FAIL ({mode}): {msg}")


def eperm(what, fn):
	try:
		fn()
	except OSError as e:
		if e.errno != errno.EPERM:
			fail(f"{what}: {e}, not EPERM")
		return
	fail(f"{what} succeeded on a flagged file")


def chattr(flags, path):
	subprocess.run(['chattr', flags, path], check=True)


def content(path):
	with open(path, 'rb') as f:
		return f.read()


p = f"{mnt}/pre-{mode}"
with open(p, 'wb') as f:
	f.write(PAT)
blk = mmap.mmap(-1, 4096)		# aligned, for O_DIRECT
blk.write(b'Z' * 4096)
src = os.open(f"{mnt}/src-{mode}", os.O_RDWR | os.O_CREAT, 0o644)
os.write(src, b'S' * 4096)
fd = os.open(p, os.O_RDWR | os.O_DIRECT)
plain = os.open(p, os.O_RDWR)
chattr('+i', p)
eperm("an O_DIRECT write through an open made before +i", lambda: os.pwrite(fd, blk, 0))
eperm("copy_file_range into an immutable file", lambda: os.copy_file_range(src, plain, 4096, 0, 0))
if mode == 'writethrough':	# every open is direct: each write reaches the daemon
	eperm("a write through an open made before +i", lambda: os.pwrite(plain, b'XX', 0))
chattr('-i', p)
chattr('+a', p)
eperm("an O_DIRECT write below the end of an append-only file", lambda: os.pwrite(fd, blk, 0))
eperm("copy_file_range below the end of an append-only file",
      lambda: os.copy_file_range(src, plain, 4096, 0, 0))
afd = os.open(p, os.O_WRONLY | os.O_APPEND | os.O_DIRECT)
fcntl.fcntl(afd, fcntl.F_SETFL, os.O_DIRECT)	# O_APPEND taken away: ext4 refuses this
eperm("a write at 0 after fcntl took O_APPEND away", lambda: os.pwrite(afd, blk, 0))
os.close(afd)
afd = os.open(p, os.O_WRONLY | os.O_APPEND | os.O_DIRECT)
if os.write(afd, blk) != 4096:
	fail("an O_DIRECT append to an append-only file was short")
for f in (afd, fd, plain, src):
	os.close(f)
chattr('-a', p)
got = content(p)
if got != PAT + b'Z' * 4096:
	fail(f"the flagged file changed: {len(got)} bytes, starts {got[:16]!r}")

# O_APPEND opens: writes that name their place go there.
q = f"{mnt}/app-{mode}"
with open(q, 'wb') as f:
	f.write(b'a' * 8192)
fd = os.open(q, os.O_RDWR | os.O_APPEND)
m = mmap.mmap(fd, 8192)
m[0:2] = b'MM'
m.flush()
m.close()
fcntl.fcntl(fd, fcntl.F_SETFL, 0)
os.pwrite(fd, b'PW', 100)
os.fsync(fd)
os.close(fd)
fd = os.open(q, os.O_WRONLY | os.O_APPEND)
os.write(fd, b'END')
os.fsync(fd)
os.close(fd)
want = b'MM' + b'a' * 98 + b'PW' + b'a' * (8192 - 102) + b'END'
got = content(q)
if got != want:
	fail(f"an O_APPEND open's mapped store or pwrite after F_SETFL 0 landed elsewhere: "
	     f"{len(got)} bytes (want {len(want)}), head {got[:4]!r}, at 100 {got[100:102]!r}")
print(f"chattr_writes ({mode}): refused and in place")
