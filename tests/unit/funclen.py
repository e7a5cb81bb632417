#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: no function in lib/ or daemon/ is over 120 lines, and no .c
# file there is over 1200 lines (STYLE.md: a long function is a list of
# phases that wants a name for each; issue 12).
#
# Functions are found as callcircles.py finds them (comments, strings and
# preprocessor lines dropped, top-level definitions by brace depth).  A
# function's length is its body's, from the line of its opening "{" to the
# line of its closing "}", both counted.
#
# Usage: funclen.py DIR... [-v]   (-v prints every function over 60 lines)
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from callcircles import spans, strip  # noqa: E402

MAX_FUNC = 120
MAX_FILE = 1200


def lengths(path):
    """Yield (line, name, length) for every function defined in path."""
    with open(path, encoding="utf-8") as fh:
        text = strip(fh.read())
    for name, _static, start, end in spans(text):
        first = text.count("\n", 0, start) + 1
        yield first, name, text.count("\n", start, end) + 1


def main():
    dirs = [a for a in sys.argv[1:] if a != "-v"]
    if not dirs:
        print("usage: funclen.py DIR... [-v]", file=sys.stderr)
        return 2
    bad, nfunc = 0, 0
    for d in dirs:
        for f in sorted(os.listdir(d)):
            if not f.endswith(".c"):
                continue
            path = os.path.join(d, f)
            with open(path, encoding="utf-8") as fh:
                nlines = sum(1 for _ in fh)
            if nlines > MAX_FILE:
                print("%s: %d lines (limit %d): move a concept into its own file"
                      % (path, nlines, MAX_FILE))
                bad += 1
            for line, name, n in lengths(path):
                nfunc += 1
                if n > MAX_FUNC:
                    print("%s:%d: %s() is %d lines (limit %d): split it by phase"
                          % (path, line, name, n, MAX_FUNC))
                    bad += 1
                elif "-v" in sys.argv and n > MAX_FUNC // 2:
                    print("%s:%d: %s() %d lines" % (path, line, name, n))
    if nfunc == 0:
        print("funclen: no functions found under %s" % " ".join(dirs), file=sys.stderr)
        return 1
    if bad:
        print("funclen: %d function(s) or file(s) over the limit" % bad)
        return 1
    print("funclen: %d functions, none over %d lines; no file over %d lines"
          % (nfunc, MAX_FUNC, MAX_FILE))
    return 0


if __name__ == "__main__":
    sys.exit(main())
