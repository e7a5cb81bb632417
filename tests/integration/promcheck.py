#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: a strict checker of the Prometheus text exposition format
# (0.0.4) for tests/integration/prometheus.sh: every sample line is
# `name{labels} value`, every metric family has one HELP and one TYPE
# before its first sample, a family's samples are contiguous, no series
# appears twice, counters end in _total, and (with --labels) every sample
# carries the given labels.  Prints the samples as `name{labels} value` on
# stdout, sorted, for the caller to grep; exit 1 with a reason on stderr.
import math
import re
import sys

NAME = r'[a-zA-Z_:][a-zA-Z0-9_:]*'
LNAME = r'[a-zA-Z_][a-zA-Z0-9_]*'
LVAL = r'"(?:[^"\\\n]|\\\\|\\"|\\n)*"'
SAMPLE = re.compile(r'^(%s)(?:\{((?:%s=%s)(?:,%s=%s)*,?)?\})? (\S+)(?: (-?\d+))?$' %
                    (NAME, LNAME, LVAL, LNAME, LVAL))
LABEL = re.compile(r'(%s)=(%s)' % (LNAME, LVAL))
TYPES = {'counter', 'gauge', 'summary', 'histogram', 'untyped'}


def fail(lineno, msg):
    sys.stderr.write('promcheck: line %d: %s\n' % (lineno, msg))
    sys.exit(1)


def family(name, types):
    """The family a sample belongs to (summary/histogram suffixes)."""
    for suf in ('_sum', '_count', '_bucket'):
        base = name[:-len(suf)]
        if name.endswith(suf) and types.get(base) in ('summary', 'histogram'):
            return base
    return name


def main():
    need = []
    args = sys.argv[1:]
    if args[:1] == ['--labels']:
        need = args[1].split(',')
        args = args[2:]
    text = open(args[0]).read() if args else sys.stdin.read()
    if text and not text.endswith('\n'):
        fail(text.count('\n') + 1, 'no newline at the end')
    helps, types, seen, done = {}, {}, set(), set()
    current = None
    out = []
    for n, line in enumerate(text.split('\n')[:-1], 1):
        if not line.strip():
            fail(n, 'empty line')
        if line.startswith('#'):
            m = re.match(r'^# (HELP|TYPE) (%s) (.+)$' % NAME, line)
            if not m:
                if line.startswith('# HELP') or line.startswith('# TYPE'):
                    fail(n, 'malformed: %r' % line)
                continue
            kind, name, rest = m.groups()
            if name in done or name == current:
                fail(n, '%s %s after its samples' % (kind, name))
            table = helps if kind == 'HELP' else types
            if name in table:
                fail(n, 'second %s for %s' % (kind, name))
            if kind == 'TYPE' and rest not in TYPES:
                fail(n, 'unknown type %r' % rest)
            table[name] = rest
            continue
        m = SAMPLE.match(line)
        if not m:
            fail(n, 'not `name{labels} value`: %r' % line)
        name, labels, value = m.group(1), m.group(2) or '', m.group(3)
        fam = family(name, types)
        if fam not in helps or fam not in types:
            fail(n, '%s: sample before its HELP and TYPE' % name)
        if fam != current:
            if fam in done:
                fail(n, '%s: samples of the family are not contiguous' % fam)
            if current:
                done.add(current)
            current = fam
        if types[fam] == 'counter' and not name.endswith('_total'):
            fail(n, '%s: a counter whose name does not end in _total' % name)
        if not name.startswith('twinfs_'):
            fail(n, '%s: not prefixed twinfs_' % name)
        try:
            v = float(value)
        except ValueError:
            fail(n, '%s: value %r is not a number' % (name, value))
        if types[fam] == 'counter' and (v < 0 or math.isnan(v)):
            fail(n, '%s: counter value %r' % (name, value))
        pairs = LABEL.findall(labels)
        keys = [k for k, _ in pairs]
        if len(set(keys)) != len(keys):
            fail(n, '%s: a label given twice' % name)
        for k in need:
            if k not in keys:
                fail(n, '%s: no %s label' % (name, k))
        series = (name, tuple(sorted(pairs)))
        if series in seen:
            fail(n, 'duplicate series %s{%s}' % (name, labels))
        seen.add(series)
        out.append(line)
    for fam in types:
        if fam not in helps:
            fail(0, '%s: TYPE without HELP' % fam)
    if not out:
        fail(0, 'no samples')
    sys.stdout.write('\n'.join(sorted(out)) + '\n')


main()
