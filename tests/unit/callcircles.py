#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: no circle of calls runs between lib/ modules (a calls b calls
# ... calls a), except inside one subsystem's files and the circles listed in
# ALLOWED below.
#
# The file-level call graph is derived from the sources: comments, strings
# and preprocessor lines are dropped, every top-level function definition is
# found by brace depth, and a name followed by "(" inside a body is a call
# when a function of that name with external linkage is defined in another
# lib/ file (a static function of the same file shadows it).  Taking a
# function's address (a registered callback) is not a call, which is the
# point: a lower module reaches an upper one only through callbacks the upper
# one registered.  Static inline functions in a header are a module of their
# own, named by the header (they are compiled into each caller; fs_i.h's
# inlines are not calls into fs.c).  Calls hidden in function-like macros are not seen.
#
# Usage: callcircles.py LIBDIR [-v]   (-v prints the whole module graph)
import os
import re
import sys

# Files of one subsystem: circles among them are that subsystem's business.
GROUPS = [("dev", re.compile(r"^dev")), ("fsck", re.compile(r"^fsck")),
          ("file", re.compile(r"^file")),
          # the inode table and the format v2 inode cache behind its misses
          ("inode", re.compile(r"^inode"))]

# Circles that remain, each the set of modules allowed to call each other
# in a circle.  A circle passes only if all its modules are inside one of
# these sets, so a new module joining a circle, or a new circle, fails.
# Shrink this list; never grow it without a reason written here.
ALLOWED = [
    # Empty: the last one, {"event", "rebuild"}, ended when the slot paths
    # moved into the mirror (issue 12).
]

KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "do", "else",
            "case", "goto", "_Alignof", "alignof", "_Static_assert",
            "__attribute__", "typeof", "__typeof__", "defined"}


def module(fname):
    stem = fname.rsplit(".", 1)[0]
    if stem.endswith("_i"):
        stem = stem[:-2]
    for name, pat in GROUPS:
        if pat.match(stem):
            return name
    return stem


def _breaks(s):
    """The line breaks in s, as strip() keeps them for a dropped piece."""
    return "".join(c for c in s if c in "\n\x00")


def strip(src):
    """Drop comments, string and char literals and preprocessor lines.

    Every newline stays, so an offset in the result is on the same line as
    in the source (funclen.py reports line numbers)."""
    src = re.sub(r"\\\n", " \x00", src)
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(_breaks(src[i:j]))
            i = j
        elif src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(_breaks(src[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            out.append(c + c + _breaks(src[i:j]))
            i = j + 1
        else:
            out.append(c)
            i += 1
    # A continued line's \x00 marks become newlines again, those of a
    # dropped preprocessor line empty lines.
    return "\n".join("\n" * l.count("\x00") if l.lstrip().startswith("#")
                     else l.replace("\x00", "\n")
                     for l in "".join(out).split("\n"))


DEF_RE = re.compile(r"([A-Za-z_]\w*)\s*\(")


def functions(text):
    """Yield (name, is_static, body) for every top-level function definition."""
    for name, static, body_start, end in spans(text):
        yield name, static, text[body_start:end]


def spans(text):
    """Yield (name, is_static, offset of the body's "{", offset of its "}")."""
    depth, i, n, start = 0, 0, len(text), 0
    while i < n:
        c = text[i]
        if c == "{":
            if depth == 0:
                head = text[start:i]
                # A definition's head ends with its parameter list.
                if re.search(r"\)\s*$", head) and "=" not in head.split("(")[0]:
                    m = DEF_RE.search(head)
                    # The declarator name: the first "name(" of the head
                    # that is not an attribute.
                    names = [x for x in DEF_RE.findall(head)
                             if x not in KEYWORDS and not x.startswith("__")]
                    if m and names:
                        body_start = i
                        d, j = 0, i
                        while j < n:
                            if text[j] == "{":
                                d += 1
                            elif text[j] == "}":
                                d -= 1
                                if d == 0:
                                    break
                            j += 1
                        yield (names[0], re.search(r"\bstatic\b", head) is not None,
                               body_start, j)
                        i = j + 1
                        start = i
                        continue
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                start = i + 1
        elif c == ";" and depth == 0:
            start = i + 1
        i += 1


def graph(libdir):
    defs = {}       # external function name -> module
    local = {}      # file -> set of static function names
    bodies = []     # (file, function, body)
    for f in sorted(os.listdir(libdir)):
        if not f.endswith((".c", ".h")):
            continue
        with open(os.path.join(libdir, f), encoding="utf-8") as fh:
            text = strip(fh.read())
        local[f] = set()
        for name, static, body in functions(text):
            if static and f.endswith(".c"):
                local[f].add(name)
            elif f.endswith(".c"):
                defs.setdefault(name, module(f))
            else:
                defs.setdefault(name, f)
            bodies.append((f, name, body))
    edges = {}      # (from module, to module) -> example "caller -> callee"
    for f, fn, body in bodies:
        src = module(f) if f.endswith(".c") else f
        for callee in sorted(set(DEF_RE.findall(body))):
            if callee in local[f] or callee not in defs:
                continue
            dst = defs[callee]
            if dst != src:
                edges.setdefault((src, dst), "%s:%s() -> %s()" % (f, fn, callee))
    return edges


def sccs(nodes, adj):
    """Tarjan's strongly connected components, iteratively."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(adj.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(adj.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = set()
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.add(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(comp)
    return out


def main():
    if len(sys.argv) < 2:
        print("usage: callcircles.py LIBDIR [-v]", file=sys.stderr)
        return 2
    edges = graph(sys.argv[1])
    if not edges:
        print("callcircles: no calls found under %s" % sys.argv[1], file=sys.stderr)
        return 1
    adj, nodes = {}, set()
    for a, b in edges:
        adj.setdefault(a, set()).add(b)
        nodes.update((a, b))
    if "-v" in sys.argv:
        for (a, b), ex in sorted(edges.items()):
            print("%-10s -> %-10s %s" % (a, b, ex))
    bad = 0
    for comp in sccs(nodes, adj):
        ok = any(comp <= set(g) for g in ALLOWED)
        print("%s circle: %s" % ("allowed" if ok else "NEW", " ".join(sorted(comp))))
        for (a, b), ex in sorted(edges.items()):
            if a in comp and b in comp:
                print("    %s -> %s   %s" % (a, b, ex))
        bad += not ok
    if bad:
        print("callcircles: %d circle(s) of calls between lib/ modules; break them "
              "(a lower module calls up only through a registered callback)" % bad)
        return 1
    print("callcircles: %d modules, %d calls between them, no new circle"
          % (len(nodes), len(edges)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
