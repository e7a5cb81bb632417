#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: struct tfs_inode stays behind the seam of lib/inode.h: only
# the metadata core includes lib/inode_i.h or dereferences an inode; every
# other lib/ and daemon/ file goes through handles and accessors.
#
# Two rules, over lib/ and daemon/ (comments and strings dropped):
#  1. only the files in INCLUDE_OK include "inode_i.h";
#  2. outside DEREF_OK no name declared as a struct tfs_inode pointer (a
#     variable, parameter or member, here or in a lib/ header) is followed
#     by "->" and a field of struct tfs_inode (read from inode_i.h).
# The compiler backs rule 2 up where the struct is incomplete; the rule
# catches a file that sees the layout anyway through a new include.
#
# Usage: inodeseam.py SRCROOT [-v]
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from callcircles import strip  # noqa: E402  (same comment/string stripping)

# The metadata core: the table and handles, the format v2 inode cache, the only mutator, checkpoint
# serialization, the delete transaction, the offline checker.
CORE = {"inode.c", "inode_cache.c", "apply.c", "ckpt.c", "ckpt_v2.c", "ckpt_v2names.c", "idelete.c", "fsck.c", "fsck_tree.c",
        "fsck_data.c", "fsck_i.h", "inode_i.h"}
# Never grow these without a reason in docs/MODULES.md ("The inode seam").
INCLUDE_OK = CORE
DEREF_OK = CORE

DECL_RE = re.compile(r"\bstruct\s+tfs_inode\s*((?:\*+\s*(?:const\s+)?\w+\s*(?:\[[^\]]*\])?"
                     r"\s*(?:=[^,;){]*)?,?\s*)+)")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"inode_i\.h"', re.M)


def fields(root):
    with open(os.path.join(root, "lib", "inode_i.h"), encoding="utf-8") as fh:
        text = strip(fh.read())
    m = re.search(r"struct\s+tfs_inode\s*\{(.*?)\n\};", text, re.S)
    if not m:
        sys.exit("inodeseam: no struct tfs_inode in lib/inode_i.h")
    out = set()
    for decl in m.group(1).split(";"):
        decl = re.sub(r"\[[^\]]*\]", "", decl).strip()
        if not decl:
            continue
        # "type a, b, *c": the names after the type
        parts = decl.split(",")
        out.add(re.findall(r"\w+", parts[0])[-1])
        for p in parts[1:]:
            out.add(re.findall(r"\w+", p)[-1])
    return out


def pointer_names(text, members_only=False):
    """Names declared as struct tfs_inode pointers, as (name, indexed):
    indexed for a pointer to pointers or an array (only name[...]-> is an
    inode then).  members_only: only declarations that start a statement
    (struct members and globals, not the parameters of prototypes)."""
    names = set()
    for m in DECL_RE.finditer(text):
        before = text[:m.start()].rstrip()
        if members_only and before and before[-1] not in ";{}":
            continue
        for stars, name, arr in re.findall(r"(\*+)\s*(?:const\s+)?(\w+)\s*(\[)?", m.group(1)):
            names.add((name, len(stars) > 1 or bool(arr)))
    return names


def unpreprocess(src):
    """Blank preprocessor lines (and their continuations), keeping line numbers."""
    out, cont = [], False
    for line in src.split("\n"):
        if cont or line.lstrip().startswith("#"):
            cont = line.endswith("\\")
            out.append("")
        else:
            out.append(line)
    return "\n".join(out)


def sources(root):
    for d in ("lib", "daemon"):
        path = os.path.join(root, d)
        for f in sorted(os.listdir(path)):
            if f.endswith((".c", ".h")):
                with open(os.path.join(path, f), encoding="utf-8") as fh:
                    yield d, f, fh.read()


def main():
    if len(sys.argv) < 2:
        print("usage: inodeseam.py SRCROOT [-v]", file=sys.stderr)
        return 2
    root = sys.argv[1]
    flds = fields(root)
    files = list(sources(root))
    # Members declared in lib/ headers (struct tfs_file's ip, ...) are seen
    # by every file.
    shared = set()
    for d, f, raw in files:
        if f.endswith(".h"):
            shared |= pointer_names(strip(unpreprocess(raw)), members_only=True)
    bad = []
    for d, f, raw in files:
        if INCLUDE_RE.search(raw) and f not in INCLUDE_OK:
            bad.append("%s/%s: includes inode_i.h (metadata core only)" % (d, f))
        if f in DEREF_OK:
            continue
        text = strip(unpreprocess(raw))
        names = pointer_names(text) | shared
        plain = sorted(n for n, idx in names if not idx)
        indexed = sorted(n for n, idx in names if idx)
        alts = []
        if plain:
            alts.append(r"\b(%s)\s*->" % "|".join(plain))
        if indexed:
            alts.append(r"\b(%s)\s*\[[^\]]*\]\s*->" % "|".join(indexed))
        if not alts:
            continue
        deref = re.compile(r"(?:%s)\s*(%s)\b" % ("|".join(alts), "|".join(sorted(flds))))
        for m in deref.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            bad.append("%s/%s:%d: %s: use inode.h" % (d, f, line, " ".join(m.group(0).split())))
    if "-v" in sys.argv:
        print("fields: %s" % " ".join(sorted(flds)))
    for b in bad:
        print(b)
    if bad:
        print("inodeseam: %d access(es) past the inode seam; go through inode.h "
              "(inode_get/inode_put and the accessors)" % len(bad))
        return 1
    print("inodeseam: %d files, struct tfs_inode used only by %s"
          % (len(files), " ".join(sorted(INCLUDE_OK))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
