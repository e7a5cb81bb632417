#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: prints a manifest of a tree (v2mount.sh): for every path in
# name order its inode number, type and mode, link count, size, mtime
# (not of regular files),
# symlink target, xattrs, sha256 of a file's bytes, and for a directory
# every entry with the d_off (readdir cookie) getdents64 returned for it.
# Two manifests are equal when nothing a remount may not change changed.
#
# Usage: v2manifest.py DIR
import ctypes
import hashlib
import os
import stat
import sys

libc = ctypes.CDLL(None, use_errno=True)


class Dirent(ctypes.Structure):
    _fields_ = [("d_ino", ctypes.c_uint64), ("d_off", ctypes.c_int64),
                ("d_reclen", ctypes.c_ushort), ("d_type", ctypes.c_ubyte),
                ("d_name", ctypes.c_char * 256)]


libc.opendir.restype = ctypes.c_void_p
libc.opendir.argtypes = [ctypes.c_char_p]
libc.readdir.restype = ctypes.POINTER(Dirent)
libc.readdir.argtypes = [ctypes.c_void_p]
libc.closedir.argtypes = [ctypes.c_void_p]


def cookies(path):
    d = libc.opendir(path.encode())
    if not d:
        raise OSError(ctypes.get_errno(), "opendir " + path)
    out = []
    while True:
        e = libc.readdir(d)
        if not e:
            break
        name = e.contents.d_name.decode("utf-8", "surrogateescape")
        if name not in (".", ".."):
            out.append("%s@%d" % (name, e.contents.d_off))
    libc.closedir(d)
    return sorted(out)


def describe(root, rel):
    p = os.path.join(root, rel)
    st = os.lstat(p)
    f = [rel, "ino=%d" % st.st_ino, "mode=%o" % st.st_mode, "nlink=%d" % st.st_nlink,
         "size=%d" % st.st_size]
    # A regular file's mtime as the kernel shows it (writeback cache) may
    # differ from the daemon's by the last write's few milliseconds, on
    # version 1 too: a remount shows the daemon's.
    if not stat.S_ISREG(st.st_mode):
        f.append("mtime=%d" % st.st_mtime_ns)
    if stat.S_ISLNK(st.st_mode):
        f.append("target=" + os.readlink(p))
    else:
        for x in sorted(os.listxattr(p)):
            f.append("xattr %s=%s" % (x, hashlib.sha256(os.getxattr(p, x)).hexdigest()[:16]))
    if stat.S_ISREG(st.st_mode):
        h = hashlib.sha256()
        with open(p, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        f.append("sha256=" + h.hexdigest())
    if stat.S_ISDIR(st.st_mode):
        f.append("entries=" + ",".join(cookies(p)))
    return " ".join(f)


def main():
    root = sys.argv[1]
    print(describe(root, "."))
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        for n in sorted(dirs + files):
            print(describe(root, os.path.relpath(os.path.join(dirpath, n), root)))


main()
