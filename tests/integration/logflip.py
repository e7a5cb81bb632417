#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""logflip.py IMAGE: flip one payload byte of the metadata log chunk the
image's newest superblock names as the log head (the first chunk after the
checkpoint: every later chunk depends on it).  docs/FORMAT.md "Log": the
region starts at block 16, the superblock's generation is at byte 296 and
its log head at byte 344.  For tests that damage one copy of the log on an
unmounted image."""
import struct
import sys

with open(sys.argv[1], "r+b") as f:
    sb = []
    for slot in (0, 1):
        f.seek(slot * 4096)
        b = f.read(4096)
        sb.append((struct.unpack_from("<Q", b, 296)[0], b))
    off = (16 + struct.unpack_from("<Q", max(sb)[1], 344)[0]) * 4096 + 64 + 40
    f.seek(off)
    c = f.read(1)
    f.seek(off)
    f.write(bytes([c[0] ^ 0x10]))
