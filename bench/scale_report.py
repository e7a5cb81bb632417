#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""
bench/scale_report.py PREFIX [STOPPED...]: the markdown report of a
bench/scale.sh run from PREFIX.tsv (one line per step), PREFIX.chunks.tsv
(create rate per chunk of files) and PREFIX.params, on stdout; the reasons
a scenario stopped early follow as arguments ("stopped: ..." lines).
Draws PREFIX.png: the daemon's RSS (peak, after the workload, after a
remount) against the file system's size and against the number of files.
"""
import os
import subprocess
import sys

COLS = ["sc", "step", "x", "hwm", "rss", "rss2", "ck", "cb", "mcb", "umount", "mount",
        "crash", "find", "entries", "extra"]


def load(prefix):
    rows = []
    with open(prefix + ".tsv") as f:
        for line in f:
            v = line.rstrip("\n").split("\t")
            if len(v) < len(COLS):
                v += [""] * (len(COLS) - len(v))
            r = dict(zip(COLS, v))
            r["extra"] = dict(kv.split("=", 1) for kv in r["extra"].split() if "=" in kv)
            rows.append(r)
    return rows


def mib(kb):
    return f"{int(kb) / 1024:,.0f}"


def gib(b):
    if int(b) < 2**30:
        return f"{int(b) / 2**20:,.0f} MiB"
    b = int(b) / 2**30
    return f"{b / 1024:,.2f} TiB" if b >= 1024 else f"{b:,.1f} GiB"


def mb(b):
    return f"{int(b) / 1e6:,.1f}"


def log_cols(r):
    """The log the workload wrote (what changed) and the checkpoints' bytes
    (during it and at the mount after kill -9) over it; blank for runs
    from before bench/scale.sh measured the log."""
    lb = r["extra"].get("log_bytes", "")
    if not lb:
        return ["", ""]
    ratio = f"{(int(r['cb']) + int(r['mcb'])) / int(lb):.2f}" if int(lb) else ""
    return [mb(lb), ratio]


def common(r):
    return [mib(r["hwm"]), mib(r["rss"]), mib(r["rss2"]), r["ck"], mb(r["cb"]), mb(r["mcb"])] + \
        log_cols(r) + [r["umount"], r["mount"], r["crash"],
                       r["extra"].get("deferred_ckpt_s", "-"), r["find"]]


HEAD = ("peak RSS MiB | RSS after MiB | RSS after remount MiB | checkpoints | "
        "checkpoint MB written | checkpoint MB at mount after kill -9 | log MB written | "
        "checkpoint MB / log MB | unmount s | mount s (clean) | mount s (after kill -9) | "
        "its deferred checkpoint s | cold find s")


def sparse_table(rows):
    out = ["### Sparse images: fallocate most of the space, then random 4k overwrites", "",
           "| fs size | fallocated | overwritten | " + HEAD + " | fallocate s | overwrite MiB/s |",
           "|" + "---|" * 18]
    for r in rows:
        e = r["extra"]
        out.append("| " + " | ".join([gib(r["x"]), gib(e.get("fallocated", 0)),
                                       gib(e.get("overwritten", 0))] + common(r) +
                                      [e.get("falloc_s", ""), e.get("overwrite_mibs", "")]) + " |")
    return out


def files_table(rows):
    per = ""
    if rows:
        per = f"{-(-int(rows[-1]['x']) // max(1, int(rows[-1]['extra'].get('dirs', 1)))):,}"
    out = [f"### Many files: empty files, {per} per directory, one file system grown step by step",
           "", "| files | directories | " + HEAD + " | create files/s (this step) |",
           "|" + "---|" * 16]
    for r in rows:
        e = r["extra"]
        out.append("| " + " | ".join([f"{int(r['x']):,}", e.get("dirs", "")] + common(r) +
                                      [e.get("create_per_s", "")]) + " |")
    return out


def chunk_table(prefix):
    try:
        with open(prefix + ".chunks.tsv") as f:
            ch = [line.split() for line in f if line.strip()]
    except OSError:
        return []
    if not ch:
        return []
    out = ["", "Create rate per chunk of files (the issue's target: the last million within "
           "20% of the first):", "", "| files | files/s |", "|---|---|"]
    for a, b, rate in ch:
        out.append(f"| {int(a):,}–{int(b):,} | {float(rate):,.0f} |")
    return out


def plot(prefix, rows):
    parts = []
    for sc, xl, div in (("sparse", "file system size (GiB)", 2**30), ("files", "files", 1)):
        rs = [r for r in rows if r["sc"] == sc]
        if not rs:
            continue
        dat = f"{prefix}.{sc}.dat"
        with open(dat, "w") as f:
            for r in rs:
                f.write(f"{int(r['x']) / div} {int(r['hwm']) / 1024} {int(r['rss']) / 1024} "
                        f"{int(r['rss2']) / 1024}\n")
        parts.append(f"""set title 'daemon RSS, {sc}'
set xlabel '{xl}'
set ylabel 'MiB'
set xrange [0:*]
set yrange [0:*]
set format x {"'%.1s%c'" if sc == "files" else "'%g'"}
set key left top
set grid
plot '{dat}' using 1:2 with linespoints title 'peak (VmHWM)', \\
     '' using 1:3 with linespoints title 'after the workload (VmRSS)', \\
     '' using 1:4 with linespoints title 'after a remount'
""")
    if not parts:
        return None
    png = prefix + ".png"
    gp = (f"set terminal pngcairo size 900,{450 * len(parts)}\nset output '{png}'\n"
          f"set multiplot layout {len(parts)},1\n" + "".join(parts) + "unset multiplot\n")
    try:
        subprocess.run(["gnuplot"], input=gp.encode(), check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"(no plot: {e})", file=sys.stderr)
        return None
    finally:
        for sc in ("sparse", "files"):
            try:
                os.unlink(f"{prefix}.{sc}.dat")
            except OSError:
                pass
    return png


def main():
    prefix, stopped = sys.argv[1], sys.argv[2:]
    rows = load(prefix)
    out = ["## bench/scale.sh: daemon memory, checkpoints, mount and unmount against size", ""]
    try:
        with open(prefix + ".params") as f:
            out += ["```", f.read().rstrip("\n"), "```", ""]
    except OSError:
        pass
    sp = [r for r in rows if r["sc"] == "sparse"]
    fl = [r for r in rows if r["sc"] == "files"]
    if sp:
        out += sparse_table(sp) + [""]
    if fl:
        out += files_table(fl) + chunk_table(prefix) + [""]
    if not rows:
        out += ["No step finished.", ""]
    for s in stopped:
        out.append(f"- stopped: {s}")
    if stopped:
        out.append("")
    out += ["Checkpoints and their MB: written during the step's workload (`twinfs-ctl stats`: "
            "`checkpoint.writes`, `checkpoint.written_bytes`, one mirror's copy); at mount after "
            "kill -9: what the mount that replayed the workload's log wrote (the same counter, "
            "read right after that mount; with `-o lazyreplay` that mount serves first and "
            "owes its checkpoint: it is asked for right after the mount (`twinfs-ctl raw MNT "
            "checkpoint`), timed (its deferred checkpoint s) and its bytes counted here). "
            "Log MB: the metadata log the workload wrote "
            "(`log.chunk_blocks`, 4 KiB each), i.e. what changed; the ratio is both "
            "checkpoint columns over it (the issue's target: at most 2). After the workload (committed with "
            "`twinfs-ctl sync`): kill -9 of the daemon and the mount after it (log replay), "
            "a clean unmount (its final checkpoint), the mount after that and its RSS, and a "
            "`find` of the whole tree on that fresh mount."]
    png = plot(prefix, rows)
    if png:
        out += ["", f"![RSS against size]({os.path.basename(png)})"]
    print("\n".join(out))


if __name__ == "__main__":
    main()
