#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Summarize one bench/run.sh run: every workload ran once per round on
every target; this gives the median and min-max per workload and target,
ratios of the medians against each anchor for twinfs (format v2, the
default) and twinfs1 (the deprecated format v1) side by side, issue 15's targets met or missed (on
medians), issue 13's (v2 keeps v1's ratio to btrfs RAID1), the machine's CPU use, and a gnuplot chart
(results.png: medians as bars, min-max as error bars).

Input: RESULTS_DIR/json/LABEL@TARGET.rN.{json,val,cpu,ctl} (fio JSON; a
{"value", "unit"} object from the non-fio workloads; CPU busy %; the
daemon's stats before and after a run, {"before", "after"}, for the node
reads per 1000 reads of the big-file workload).  Results
of older runs (LABEL@TARGET.json, one round) are read as round 1; in runs
from before format v2 was the default (a twinfs2 target in them), twinfs
was format v1: read as twinfs1, and twinfs2 as twinfs.
Usage: report.py RESULTS_DIR"""
import json
import os
import re
import statistics
import subprocess
import sys

TARGETS = ["twinfs", "twinfs1", "btrfs", "xfs", "passthrough", "raw"]
# The twinfs formats: v2 (the default) and v1 (the same mounts, mkfs.twinfs
# -O v1 and -o format=1).
TWINS = ["twinfs", "twinfs1"]
# Target names of runs made while v1 was the default (twinfs2 was v2).
OLD_NAMES = {"twinfs": "twinfs1", "twinfs2": "twinfs"}
ANCHORS = ["btrfs", "passthrough", "xfs", "raw"]
WT = "-writethrough"

# Row order and what each row is; a label not listed here goes last.
DESCR = {
    "W1": "4k random O_DIRECT writes, 8 jobs qd64, one file",
    "W3-4k": "4k random O_DIRECT writes, 1 job qd64",
    "W3-64k": "64k random O_DIRECT writes, 1 job qd64",
    **{f"W4-{j}j": f"4k O_DSYNC buffered overwrites, {j} job{'s' if j > 1 else ''} qd32"
       for j in (1, 2, 4, 8)},
    "W4qd1-1j": "4k O_DSYNC buffered overwrites, 1 job qd1",
    "W4qd1-8j": "4k O_DSYNC buffered overwrites, 8 jobs qd1",
    "W2": "128k buffered sequential write, 2 GiB + fsync",
    "R4k-1j": "4k random O_DIRECT reads, 1 job qd64",
    "R4k-8j": "4k random O_DIRECT reads, 8 jobs qd16, one file",
    "Rseq-cold": "1 MiB sequential reads, cold file (fresh mount)",
    "Rcached": "1 MiB buffered re-reads of a cached file",
    "Rdeg-seq-cold": "DEGRADED (one mirror missing): 1 MiB sequential reads, cold",
    "Rdeg-4k-1j": "DEGRADED (one mirror missing): 4k random O_DIRECT reads, 1 job qd64",
    "Rdeg-4k-8j": "DEGRADED (one mirror missing): 4k random O_DIRECT reads, 8 jobs qd16",
    "TAR": "tar -x of 10,000 small files (308 MB) + sync",
    "SQLITE": "SQLite WAL, synchronous=FULL, 1 insert per transaction",
    "PG": "PostgreSQL pgbench, scale 20, 4 clients",
    "Rbig-cold-1j": "BIG FILE (twinfs -o cache=64M): 4k random O_DIRECT reads, 1 job qd32, from a cold mount",
    "Rbig-1j": "BIG FILE (twinfs -o cache=64M): 4k random O_DIRECT reads, 1 job qd32, after that",
    "Rbig-8j": "BIG FILE (twinfs -o cache=64M): 4k random O_DIRECT reads, 8 jobs qd4, one file",
}
# A v2 tree node (docs/FORMAT.md, "Nodes"): a node cache miss reads this much.
NODE_BYTES = 16384

# Issue 15's targets on the default mount: (workload, anchor, factor).
GOALS = ([(w, "btrfs", 1.5) for w in ["W1", "W3-4k", "W3-64k", "W4-1j", "W4-2j", "W4-4j",
                                       "W4-8j", "W4qd1-1j", "W4qd1-8j", "W2"]]
         + [(w, "btrfs", 1.0) for w in ["R4k-1j", "R4k-8j", "Rseq-cold", "Rcached",
                                        "Rdeg-seq-cold", "Rdeg-4k-1j", "Rdeg-4k-8j"]]
         + [("TAR", "passthrough", 1.25), ("TAR", "btrfs", 0.5)])

NAME = re.compile(r"^(?P<label>[^@]+)@(?P<target>[^.]+)(?:\.r(?P<round>\d+))?\.(?P<ext>json|val|cpu|ctl)$")


def read_fio(path):
    """(MiB/s, IOPS, errors) of one fio JSON file (reads and writes summed:
    a workload does one or the other), or None."""
    try:
        with open(path) as f:
            txt = f.read()
        # fio may print warnings before the JSON object.
        j = json.loads(txt[txt.index("{"):])
    except (ValueError, OSError):
        return None
    bw = iops = 0.0
    err = 0
    for job in j.get("jobs", []):
        for d in ("read", "write"):
            bw += job.get(d, {}).get("bw_bytes", 0)
            iops += job.get(d, {}).get("iops", 0)
        err += job.get("error", 0)
    return bw / 2**20, iops, err


def load(d):
    """samples[(label, target)] = [(value, iops or None)] over rounds;
    units[label]; cpu[(label, target)] = [busy %]; errors[(label, target)]."""
    samples, units, cpu, errors = {}, {}, {}, {}
    names = sorted(os.listdir(os.path.join(d, "json")))
    old = any((m := NAME.match(n)) and m["target"] == "twinfs2" for n in names)
    for name in names:
        m = NAME.match(name)
        if not m:
            continue
        key = (m["label"], OLD_NAMES.get(m["target"], m["target"]) if old else m["target"])
        path = os.path.join(d, "json", name)
        if m["ext"] == "json":
            r = read_fio(path)
            if r is None:
                continue
            samples.setdefault(key, []).append((r[0], r[1]))
            errors[key] = errors.get(key, 0) + r[2]
            units[m["label"]] = "MiB/s"
        elif m["ext"] == "ctl":
            continue	# node_reads() reads these with their fio runs
        elif m["ext"] == "val":
            try:
                with open(path) as f:
                    v = json.load(f)
                samples.setdefault(key, []).append((float(v["value"]), None))
                units[m["label"]] = v.get("unit", "")
            except (ValueError, OSError, KeyError, TypeError):
                continue
        else:
            try:
                with open(path) as f:
                    cpu.setdefault(key, []).append(int(f.read().strip()))
            except (ValueError, OSError):
                pass
    return samples, units, cpu, errors


class Stat:
    def __init__(self, vals):
        self.n = len(vals)
        self.med = statistics.median(vals)
        self.lo, self.hi = min(vals), max(vals)


def fmt(v):
    if v is None:
        return "—"
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def cell(s):
    if s is None:
        return "—"
    if s.n == 1:
        return fmt(s.med)
    return f"{fmt(s.med)} ({fmt(s.lo)}–{fmt(s.hi)})"


def ratio(a, b):
    return f"{a.med / b.med:.2f}×" if a and b and b.med > 0 else "—"


def row_name(label):
    base = label[:-len(WT)] if label.endswith(WT) else label
    name = f"{label} " if not label.endswith(WT) else f"{base} (twinfs -o writethrough) "
    return f"{name}— {DESCR[base]}" if base in DESCR else name.strip()


def goals(out, stats, tw_name):
    """Issue 15's targets for one twinfs format, on medians."""
    out += [f"## Targets (issue 15, default mount, on medians): {tw_name}", ""]
    unmeasured = []
    for (label, anchor, k) in GOALS:
        tw, a = stats.get((label, tw_name)), stats.get((label, anchor))
        if tw and a and a.med > 0:
            r = tw.med / a.med
            extra = ""
            wt = stats.get((label + WT, tw_name))
            if wt:
                extra = f" (-o writethrough: {wt.med / a.med:.2f}×)"
            out.append(f"- {label} ≥ {k}× {anchor}: {r:.2f}× — {'met' if r >= k else 'MISSED'}{extra}")
        else:
            unmeasured.append(f"{label} ≥ {k}× {anchor}")
    for v in ["", WT]:
        one, eight = stats.get(("W4-1j" + v, tw_name)), stats.get(("W4-8j" + v, tw_name))
        if one and eight and one.med > 0:
            r = eight.med / one.med
            what = "" if not v else " (not a target: -o writethrough)"
            out.append(f"- W4 8 jobs ≥ 1.5× 1 job ({tw_name}){what}: {r:.2f}× — "
                       f"{'met' if r >= 1.5 else 'MISSED'}")
    if unmeasured:
        out.append(f"- not measured in this run: {', '.join(unmeasured)}")
    for lab in ["SQLITE", "PG"]:
        tw = stats.get((lab, tw_name))
        if tw:
            out.append(f"- (no target) {lab}: {tw_name}/btrfs {ratio(tw, stats.get((lab, 'btrfs')))}, "
                       f"{tw_name}/passthrough {ratio(tw, stats.get((lab, 'passthrough')))}")
    out.append("")


def v1v2(out, stats, labels):
    """Issue 13: format v2 keeps at least v1's ratio to btrfs RAID1, on
    every workload both ran in this run (the same rounds, interleaved)."""
    rows = []
    for label in labels:
        v1, v2, b = (stats.get((label, t)) for t in ("twinfs1", "twinfs", "btrfs"))
        if not (v1 and v2 and b and b.med > 0 and v1.med > 0):
            continue
        r1, r2 = v1.med / b.med, v2.med / b.med
        rows.append(f"| {label} | {r1:.2f}× | {r2:.2f}× | {r2 / r1:.2f} | "
                    f"{'kept' if r2 >= r1 else 'LOWER'} |")
    if rows:
        out += ["## Format v2 against v1 (issue 13: v2 keeps v1's ratio to btrfs RAID1, on medians)", "",
                "| workload | twinfs1/btrfs (v1) | twinfs/btrfs (v2) | v2/v1 | |",
                "|---|---|---|---|---|"] + rows + [""]


def main():
    d = sys.argv[1]
    samples, units, cpu, errors = load(d)
    stats = {k: Stat([v for v, _ in vals]) for k, vals in samples.items()}
    iops = {k: Stat([i for _, i in vals]) for k, vals in samples.items() if vals[0][1] is not None}
    order = list(DESCR)
    labels = sorted({l for (l, _t) in stats if l != "V"},
                    key=lambda l: (order.index(l.replace(WT, "")) if l.replace(WT, "") in order
                                   else len(order), l.endswith(WT), l))
    rounds = max((s.n for s in stats.values()), default=0)

    def get(label, t):
        """twinfs's own row; for -o writethrough rows, the anchors' default."""
        base = label.replace(WT, "")
        return stats.get((label if t in TWINS else base, t))

    out = [f"## Results — median (min–max) of {rounds} interleaved round{'s' if rounds != 1 else ''}, "
           "ratios of medians", ""]
    groups = [("Throughput (MiB/s)", [l for l in labels if units.get(l) == "MiB/s"]),
              ("Small files and real programs", [l for l in labels if units.get(l) != "MiB/s"])]
    plots = []
    for title, rows in groups:
        if not rows:
            continue
        # Only the targets measured here (no raw device under tar).
        tl = [t for t in TARGETS if any(get(label, t) for label in rows)]
        al = [a for a in ANCHORS if a in tl]
        # Each format's ratio to an anchor, the two next to each other.
        rl = [(a, w) for a in al for w in TWINS if w in tl]
        out += [f"### {title}", ""]
        out.append("| workload | unit | " + " | ".join(tl) + " | "
                   + " | ".join(f"{w}/{a}" for a, w in rl) + " |")
        out.append("|---" * (len(tl) + len(rl) + 2) + "|")
        for label in rows:
            cells = [cell(get(label, t)) for t in tl]
            rat = [ratio(get(label, w), get(label, a)) for a, w in rl]
            out.append(f"| {row_name(label)} | {units.get(label, '')} | " + " | ".join(cells)
                       + " | " + " | ".join(rat) + " |")
        out.append("")
        plots.append((title, rows))
    k4 = [l for l in labels if ("4k" in l or l.startswith(("W1", "W4")))
          and any((l, w) in iops for w in TWINS)]
    if k4:
        out += ["4k workloads in IOPS (median): "
                + "; ".join(f"{l} " + ", ".join(f"{t} {iops[(l if t in TWINS else l.replace(WT, ''), t)].med:,.0f}"
                                                for t in TARGETS
                                                if (l if t in TWINS else l.replace(WT, ""), t) in iops
                                                and (t in TWINS or not l.endswith(WT)))
                            for l in k4), ""]

    for w in [w for w in TWINS if any((l, w) in stats for l in labels)]:
        goals(out, stats, w)
    v1v2(out, stats, labels)


    tl = [t for t in TARGETS if any(get(label, t) for label in labels)]
    if rounds > 1:
        out += ["", "## Spread: max/min over the rounds", ""]
        out.append("| workload | " + " | ".join(tl) + " |")
        out.append("|---" * (len(tl) + 1) + "|")
        for label in labels:
            cells = [(f"{s.hi / s.lo:.2f}" if (s := get(label, t)) and s.lo > 0 else "—")
                     for t in tl]
            out.append(f"| {label} | " + " | ".join(cells) + " |")
    if cpu:
        out += ["", "## Machine CPU busy during each run (% of all cores, median)", ""]
        out.append("| workload | " + " | ".join(tl) + " |")
        out.append("|---" * (len(tl) + 1) + "|")
        for label in labels:
            base = label.replace(WT, "")
            cells = [f"{statistics.median(c):.0f}" if (c := cpu.get(((label if t in TWINS else base), t)))
                     else "—" for t in tl]
            out.append(f"| {label} | " + " | ".join(cells) + " |")
    node_reads(out, d)
    if ("V", "twinfs") in samples:
        e = errors.get(("V", "twinfs"), 0)
        out += ["", f"- fio verify (xxhash) under W1 load: {'no error' if e == 0 else f'{e} ERRORS'}"]
    failed = [f"{l}@{t}" for (l, t), e in errors.items() if e and l != "V"]
    if failed:
        out.append(f"- fio reported errors in: {', '.join(failed)}")
    print("\n".join(out))
    plot(d, plots, units, get)


def delta(a, b, part, key):
    return a.get(part, {}).get(key, 0) - b.get(part, {}).get(key, 0)


def node_reads(out, d):
    """What the reads of a run cost in metadata: from the daemon's stats
    before and after it (LABEL@TARGET.rN.ctl) and fio's count of reads
    (LABEL@TARGET.rN.json): node cache misses (each one node read of 16
    KiB from one mirror) and extent-cache faults (a map leaf loaded, from
    the node cache or a device) per 1000 reads; the node reads' share of
    all reads (fio's O_DIRECT reads, one device read each, plus the node
    reads) and of the bytes read.  Beside them the device reads as the
    devices' counters give them (every mirror's) and those beyond fio's
    (before commit c09630d these counted each node read twice:
    mirror_read_pick counted the read it picked a device for, and bstore's
    mirror_read_dev counted it again).
    Medians over the rounds."""
    per = {}
    for name in sorted(os.listdir(os.path.join(d, "json"))):
        m = NAME.match(name)
        if not m or m["ext"] != "ctl":
            continue
        try:
            with open(os.path.join(d, "json", name)) as f:
                c = json.load(f)
            with open(os.path.join(d, "json", name[:-4] + ".json")) as f:
                txt = f.read()
            j = json.loads(txt[txt.index("{"):])
            a, b = c["after"], c["before"]
        except (ValueError, OSError, KeyError):
            continue
        ios = sum(job.get("read", {}).get("total_ios", 0) for job in j.get("jobs", []))
        iob = sum(job.get("read", {}).get("io_bytes", 0) for job in j.get("jobs", []))
        dev = sum(x.get("reads", 0) for x in a.get("devices", [])) - \
            sum(x.get("reads", 0) for x in b.get("devices", []))
        devb = sum(x.get("read_bytes", 0) for x in a.get("devices", [])) - \
            sum(x.get("read_bytes", 0) for x in b.get("devices", []))
        miss = delta(a, b, "node_cache", "misses")
        if ios <= 0:
            continue
        per.setdefault((m["label"], m["target"]), []).append(
            (1000 * miss / ios, 1000 * delta(a, b, "extent_cache", "faults") / ios,
             1000 * dev / ios, 1000 * (dev - ios) / ios, miss / (ios + miss),
             miss * NODE_BYTES / (iob + miss * NODE_BYTES) if iob + miss else 0.0, ios))
    if not per:
        return
    out += ["", "## Node reads (twinfs daemon stats around each run; medians over the rounds)", "",
            "| workload | target | reads per round | node cache misses /1000 reads | extent-cache "
            "faults /1000 reads | device reads /1000 reads (counters) | beyond fio's /1000 reads "
            "(counters) | node reads: share of reads | node reads: share of bytes "
            "read |", "|---" * 9 + "|"]
    order = list(DESCR)
    for (label, t), v in sorted(per.items(), key=lambda kv: (kv[0][1], order.index(kv[0][0])
                                                             if kv[0][0] in order else len(order))):
        med = [statistics.median(x[i] for x in v) for i in range(7)]
        out.append(f"| {label} | {t} | {med[6]:,.0f} | {med[0]:.0f} | {med[1]:.0f} | {med[2]:.0f} | "
                   f"{med[3]:.0f} | {100 * med[4]:.0f}% | {100 * med[5]:.0f}% |")


def plot(d, plots, units, get):
    """One panel per table: bars at the median, error bars min to max."""
    if not plots:
        return
    parts = []
    for i, (title, rows) in enumerate(plots):
        dat = os.path.join(d, f"results{i}.dat" if i else "results.dat")
        # Only the targets with a figure here (gnuplot fails on a column of NaN).
        tl = [t for t in TARGETS if any(get(label, t) for label in rows)]
        with open(dat, "w") as f:
            f.write("# workload " + " ".join(f"{t} lo hi" for t in tl) + "\n")
            for label in rows:
                vals = []
                for t in tl:
                    s = get(label, t)
                    vals += [f"{s.med:.2f} {s.lo:.2f} {s.hi:.2f}" if s else "NaN NaN NaN"]
                f.write(f"{label} " + " ".join(vals) + "\n")
        unit = "MiB/s" if i == 0 and units.get(rows[0]) == "MiB/s" else "files/s, tx/s, TPS"
        parts.append(f"""set title '{title}: median, min-max of the rounds'
set ylabel '{unit}'
plot for [i=0:{len(tl) - 1}] '{dat}' using (column(2+3*i)):(column(3+3*i)):(column(4+3*i)):xtic(1) \\
     title word('{" ".join(tl)}', i+1)
""")
    gp = f"""set terminal pngcairo size 1400,{500 * len(parts)}
set output '{os.path.join(d, "results.png")}'
set multiplot layout {len(parts)},1
set style data histogram
set style histogram errorbars gap 1 lw 1
set style fill solid border -1
set logscale y
set xtics rotate by -30
set key outside
{"".join(parts)}unset multiplot
"""
    try:
        subprocess.run(["gnuplot"], input=gp.encode(), check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"(no plot: {e})", file=sys.stderr)


if __name__ == "__main__":
    main()
