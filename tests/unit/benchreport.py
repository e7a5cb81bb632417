#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: bench/report.py turns the rounds of bench/run.sh into the
# median and min-max per workload and target, takes its ratios and issue
# 15's targets from the medians, reads fio's read figures as well as its
# write figures and the {"value", "unit"} results of the non-fio workloads
# (tar, SQLite, pgbench), and still reads an old one-round results tree.
# Format v2 (target twinfs, the default) gets its ratios beside v1's
# (twinfs1) and a v2-against-v1 table (issue 13); a run from before v2 was
# the default (targets twinfs = v1, twinfs2 = v2) is read by those names;
# the daemon's stats around a run (.ctl) give node reads per 1000 reads.
#
# Usage: benchreport.py PATH/TO/bench/report.py
import json
import os
import subprocess
import sys
import tempfile


def fio(path, mib, rw="write", ios=0):
    with open(path, "w") as f:
        # fio may print a warning before its JSON: report.py must skip it.
        f.write("fio: warning, ignore me\n")
        json.dump({"jobs": [{rw: {"bw_bytes": mib * 2**20, "iops": mib * 256, "total_ios": ios,
                                   "io_bytes": ios * 4096},
                             "error": 0}]}, f)


def ctl(path, misses, faults, reads, read_bytes):
    """twinfs-ctl raw MNT stats before and after a run: only the deltas count."""
    def stats(k):
        return {"node_cache": {"misses": 5 + k * misses}, "extent_cache": {"faults": 7 + k * faults},
                "devices": [{"reads": 100 + k * reads // 2, "read_bytes": 9 + k * read_bytes // 2},
                            {"reads": 200 + k * reads // 2, "read_bytes": 9 + k * read_bytes // 2}]}
    with open(path, "w") as f:
        json.dump({"before": stats(0), "after": stats(1)}, f)


def val(path, v, unit):
    with open(path, "w") as f:
        json.dump({"value": v, "unit": unit}, f)


def main():
    report = sys.argv[1]
    fails = []
    with tempfile.TemporaryDirectory(prefix="benchreport.") as d:
        j = os.path.join(d, "json")
        os.mkdir(j)
        # Three rounds; the medians are the middle values whatever the order.
        for r, (tw, bt, rd, tar) in enumerate([(300, 60, 40, 900), (100, 50, 20, 1100),
                                               (200, 70, 30, 1000)], 1):
            fio(f"{j}/W1@twinfs1.r{r}.json", tw)
            fio(f"{j}/W1@btrfs.r{r}.json", bt)
            fio(f"{j}/W1@twinfs.r{r}.json", 2 * tw)
            # 4000 reads: 2000 node reads and 4000 data reads, of 4 KiB;
            # the device counters count every node read twice.
            fio(f"{j}/Rbig-1j@twinfs.r{r}.json", 10, "read", 4000)
            ctl(f"{j}/Rbig-1j@twinfs.r{r}.ctl", 2000, 1000 * r, 8000, 4000 * 16384 + 4000 * 4096)
            fio(f"{j}/R4k-1j@twinfs.r{r}.json", rd, "read")
            fio(f"{j}/R4k-1j@btrfs.r{r}.json", 2 * rd, "read")
            val(f"{j}/TAR@twinfs.r{r}.val", tar, "files/s")
            val(f"{j}/TAR@passthrough.r{r}.val", 1000, "files/s")
            with open(f"{j}/W1@twinfs.r{r}.cpu", "w") as f:
                f.write(f"{40 + 10 * r}\n")
            # -o writethrough rows are the default format's: twinfs1 has
            # none of its own.
            for name, v in [("W4-1j@twinfs", 10), ("W4-1j-writethrough@twinfs", 20),
                            ("W4-1j@twinfs1", 30), ("W4-1j@btrfs", 40)]:
                fio(f"{j}/{name}.r{r}.json", v)
                with open(f"{j}/{name}.r{r}.cpu", "w") as f:
                    f.write(f"{v + 1}\n")
        fio(f"{j}/W2@twinfs.json", 123)		# an older run: one round, no .rN
        out = subprocess.run([sys.executable, report, d], check=True, capture_output=True,
                             text=True).stdout
        want = [
            "median (min–max) of 3 interleaved rounds",
            "| 3.33× |",				# ratio of the medians, not of the means or bests
            "W1 ≥ 1.5× btrfs: 3.33× — met",
            "| 30.0 (20.0–40.0) | — | 60.0 (40.0–80.0) |",	# fio's read figures (no twinfs1)
            "R4k-1j ≥ 1.0× btrfs: 0.50× — MISSED",
            "| files/s | 1,000 (900–1,100) | 1,000 (1,000–1,000) |",
            "TAR ≥ 1.25× passthrough: 1.00× — MISSED",
            "| 123 |",					# W2 of the old layout
            "| W1 | 3.00 | 3.00 | 1.40 |",		# spread max/min: twinfs, twinfs1, btrfs
            "| W1 | 60 |",					# median CPU busy
            # v2 and v1 ratios side by side, in the order of the anchors.
            "| twinfs | twinfs1 | btrfs | twinfs/btrfs | twinfs1/btrfs |",
            "| 400 (200–600) | 200 (100–300) | 60.0 (50.0–70.0) | 6.67× | 3.33× |",
            "| W1 | 3.33× | 6.67× | 2.00 | kept |",
            "Targets (issue 15, default mount, on medians): twinfs1",
            "| W4-1j-writethrough | 21 | — | 41 |",		# CPU: no twinfs1 figure
            # node cache misses per 1000 reads, extent faults (median of
            # 250, 500, 750), device reads and those beyond fio's (as the
            # counters say), the node reads' share of all reads (2000 of
            # 6000) and of the bytes (2000 x 16 KiB against 4000 x 4 KiB).
            "| Rbig-1j | twinfs | 4,000 | 500 | 500 | 2000 | 1000 | 33% | 67% |",
        ]
        for w in want:
            if w not in out:
                fails.append(w)
        # A run from before v2 was the default: twinfs was v1, twinfs2 v2.
        old = os.path.join(d, "old")
        os.makedirs(os.path.join(old, "json"))
        for r, tw in enumerate([300, 100, 200], 1):
            fio(f"{old}/json/W1@twinfs.r{r}.json", tw)
            fio(f"{old}/json/W1@twinfs2.r{r}.json", 2 * tw)
            fio(f"{old}/json/W1@btrfs.r{r}.json", 60)
        out2 = subprocess.run([sys.executable, report, old], check=True, capture_output=True,
                              text=True).stdout
        for w in ["| W1 | 3.33× | 6.67× | 2.00 | kept |",
                  "| 400 (200–600) | 200 (100–300) | 60.0 (60.0–60.0) | 6.67× | 3.33× |"]:
            want.append(w)
            if w not in out2:
                fails.append(w)
                out += "\n--- the old run ---\n" + out2
    if fails:
        print(out)
        for w in fails:
            print(f"FAIL: report.py output lacks: {w}")
        sys.exit(1)
    print(f"benchreport: {len(want)} checks passed")


if __name__ == "__main__":
    main()
