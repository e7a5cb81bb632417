#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Summarize one bench/run.sh run: fio JSON files -> markdown table, ratios
against each anchor, the issue's targets met or missed, and a gnuplot bar
chart (results.png).  Usage: report.py RESULTS_DIR"""
import json
import os
import subprocess
import sys

TARGETS = ["twinfs", "btrfs", "xfs", "passthrough", "raw"]

# (workload, anchor, factor): twinfs must reach factor x anchor.
GOALS = [
    ("W1", "btrfs", 3.0), ("W1", "passthrough", 1.0),
    ("W3-4k", "btrfs", 3.0), ("W3-64k", "btrfs", 3.0),
    ("W4-1j", "btrfs", 3.0), ("W2", "btrfs", 1.0),
]


def load(d):
    res = {}
    for name in sorted(os.listdir(os.path.join(d, "json"))):
        if not name.endswith(".json"):
            continue
        label, target = name[:-5].split("@")
        path = os.path.join(d, "json", name)
        try:
            with open(path) as f:
                txt = f.read()
            # fio may print warnings before the JSON object.
            j = json.loads(txt[txt.index("{"):])
        except (ValueError, OSError):
            continue
        bw = iops = 0.0
        err = 0
        for job in j.get("jobs", []):
            w = job.get("write", {})
            bw += w.get("bw_bytes", 0)
            iops += w.get("iops", 0)
            err += job.get("error", 0)
        res[(label, target)] = (bw / 2**20, iops, err)
    return res


def load_cpu(d):
    """Machine CPU busy % over each run (run.sh writes LABEL@TARGET.cpu)."""
    cpu = {}
    for name in os.listdir(os.path.join(d, "json")):
        if name.endswith(".cpu"):
            try:
                with open(os.path.join(d, "json", name)) as f:
                    cpu[tuple(name[:-4].split("@"))] = int(f.read().strip())
            except (ValueError, OSError):
                pass
    return cpu


def fmt(v):
    return "—" if v is None else (f"{v:.0f}" if v >= 100 else f"{v:.1f}")


def main():
    d = sys.argv[1]
    res = load(d)
    cpu = load_cpu(d)
    labels = []
    for (label, _t) in res:
        if label not in labels and label != "V":
            labels.append(label)
    order = (["W1", "W3-4k", "W3-64k"] + [l for l in labels if l.startswith("W4-")]
             + [l for l in labels if l.startswith("W4qd1")] + ["W2-writethrough", "W2"])
    labels = [l for l in order if l in labels]

    out = ["## Throughput (MiB/s, IOPS) — one run, side by side", ""]
    out.append("| workload | " + " | ".join(TARGETS) + " | twinfs/btrfs | twinfs/passthrough | twinfs/xfs | twinfs/raw |")
    out.append("|---" * (len(TARGETS) + 5) + "|")
    rows = []
    for label in labels:
        base = label.replace("-writethrough", "")
        cells = []
        for t in TARGETS:
            key = (label, t) if t == "twinfs" else (base, t)
            if key in res:
                bw, iops, _ = res[key]
                cells.append(f"{fmt(bw)} / {iops:.0f}")
            else:
                cells.append("—")
        tw = res.get((label, "twinfs"))
        ratios = []
        for anchor in ["btrfs", "passthrough", "xfs", "raw"]:
            a = res.get((base, anchor))
            ratios.append(f"{tw[0] / a[0]:.2f}×" if tw and a and a[0] > 0 else "—")
        name = label.replace("-writethrough", " (twinfs -o writethrough)")
        out.append(f"| {name} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
        rows.append((label, [res.get(((label if t == "twinfs" else base), t), (0, 0, 0))[0] for t in TARGETS]))

    out += ["", "## Targets", ""]
    for (label, anchor, k) in GOALS:
        tw, a = res.get((label, "twinfs")), res.get((label, anchor))
        best, how = tw, ""
        if label.startswith("W4") or label == "W2":
            wt = res.get((label + "-writethrough", "twinfs"))
            if wt and (not best or wt[0] > best[0]):
                best = wt
                how = " with -o writethrough"
                if tw and a and a[0] > 0:
                    how += f"; default mount {tw[0] / a[0]:.2f}×"
        if best and a and a[0] > 0:
            r = best[0] / a[0]
            out.append(f"- {label} ≥ {k}× {anchor}: {r:.2f}× — {'met' if r >= k else 'MISSED'}"
                       + (f" ({how.lstrip('; ').lstrip()})" if how else ""))
        else:
            out.append(f"- {label} ≥ {k}× {anchor}: not measured")
    for v in ["", "-writethrough"]:
        one, eight = res.get(("W4-1j" + v, "twinfs")), res.get(("W4-8j" + v, "twinfs"))
        if one and eight and one[0] > 0:
            r = eight[0] / one[0]
            why = []
            if ("W4-1j" + v, "twinfs") in cpu:
                why.append(f"CPU busy {cpu[('W4-1j' + v, 'twinfs')]}% with 1 job")
            w1 = res.get(("W1", "twinfs"))
            if r < 1.5 and w1 and 1.5 * one[1] > w1[1]:
                why.append(f"1.5× one job is {1.5 * one[1]:.0f} IOPS; W1, 4k writes at depth 512, "
                           f"reached {w1[1]:.0f}")
            out.append(f"- W4{v} 8 jobs ≥ 1.5× 1 job (twinfs): {r:.2f}× — {'met' if r >= 1.5 else 'MISSED'}"
                       + (f" ({'; '.join(why)})" if why else ""))
        one, eight = res.get(("W4qd1-1j" + v, "twinfs")), res.get(("W4qd1-8j" + v, "twinfs"))
        if one and eight and one[0] > 0:
            out.append(f"- (not a target) W4{v} at iodepth 1, 8 jobs / 1 job (twinfs): {eight[0] / one[0]:.2f}×")
    if cpu:
        out += ["", "## Machine CPU busy during each run (% of both cores)", ""]
        out.append("| workload | " + " | ".join(TARGETS) + " |")
        out.append("|---" * (len(TARGETS) + 1) + "|")
        for label in labels:
            base = label.replace("-writethrough", "")
            cells = [str(cpu[k]) if (k := ((label if t == "twinfs" else base), t)) in cpu else "—"
                     for t in TARGETS]
            out.append(f"| {label.replace('-writethrough', ' (twinfs -o writethrough)')} | "
                       + " | ".join(cells) + " |")
    ver = res.get(("V", "twinfs"))
    if ver is not None:
        out.append(f"- fio verify (xxhash) under W1 load: {'no error' if ver[2] == 0 else f'{ver[2]} ERRORS'}")
    print("\n".join(out))

    dat = os.path.join(d, "results.dat")
    with open(dat, "w") as f:
        f.write("workload " + " ".join(TARGETS) + "\n")
        for label, vals in rows:
            f.write(label + " " + " ".join(f"{v:.1f}" for v in vals) + "\n")
    gp = f"""set terminal pngcairo size 1200,600
set output '{os.path.join(d, "results.png")}'
set style data histogram
set style histogram cluster gap 1
set style fill solid border -1
set ylabel 'MiB/s'
set logscale y
set xtics rotate by -30
set key outside
set title 'twinfs vs kernel anchors (fresh fs per run, RAM-backed loop devices)'
plot for [i=2:{len(TARGETS) + 1}] '{dat}' using i:xtic(1) title columnheader(i)
"""
    try:
        subprocess.run(["gnuplot"], input=gp.encode(), check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"(no plot: {e})", file=sys.stderr)


if __name__ == "__main__":
    main()
