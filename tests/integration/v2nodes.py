#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""List the tree nodes of a format v2 image (docs/FORMAT.md, version 2):
v2nodes.py IMAGE [TREE] prints "level addr" for every node of tree TREE
(1 inodes, the default; 2 refcounts; 3 free space) reachable from the root
the image's newest superblock names, root first, then depth first.  addr
is the node's first 4 KiB block.  Reads only: for tests that damage one
node copy with dd.  Checks nothing (fsck does): it follows the pointers."""
import struct
import sys

BLK = 4096
NODE = 16384


def newest_super(f):
    best = None
    for slot in (0, 1):
        f.seek(slot * BLK)
        b = f.read(BLK)
        if len(b) < BLK or b[:8] == bytes(8):
            continue
        gen = struct.unpack_from("<Q", b, 296)[0]
        if best is None or gen > best[0]:
            best = (gen, b)
    if best is None:
        sys.exit("no superblock")
    return best[1]


def main():
    img = sys.argv[1]
    tree = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    with open(img, "rb") as f:
        sb = newest_super(f)
        addr, gen, csum, level = struct.unpack_from("<QQQB", sb, 992 + 32 * (tree - 1))
        if not addr:
            return
        key = None
        if len(sys.argv) > 4:
            off = int(sys.argv[5]) if len(sys.argv) > 5 else 0
            key = (int(sys.argv[3]), int(sys.argv[4]) << 56 | off)
        todo = [(addr, level)]
        while todo:
            addr, level = todo.pop(0)
            f.seek(addr * BLK)
            n = f.read(NODE)
            if key is None:
                print(level, addr)
            elif struct.unpack_from("<QQ", n, 64) <= key <= struct.unpack_from("<QQ", n, 80):
                if level == 0:
                    print(level, addr)
            else:
                continue
            if level == 0:
                continue
            nritems = struct.unpack_from("<H", n, 58)[0]
            kids = []
            for i in range(nritems):
                child = struct.unpack_from("<Q", n, 96 + 40 * i + 16)[0]
                kids.append((child, level - 1))
            todo = kids + todo


if __name__ == "__main__":
    main()
