#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The bench workloads that are not fio jobs (bench/run.sh calls them).

  workloads.py mktar TARBALL          a deterministic tarball of 10,000 small
                                      files (about 300 MB) in 100 directories
  workloads.py sqlite DB SECONDS      SQLite in WAL mode, synchronous=FULL:
                                      one-row transactions for SECONDS
  workloads.py clone SRC DST SIZE     DST made of copies of SRC, end to end,
                                      up to SIZE bytes, by copy_file_range
                                      (which shares the blocks on twinfs and
                                      btrfs), then fsync

Both print one JSON object on stdout ({"value": ..., "unit": ...}); run.sh
stores it as json/LABEL@TARGET.rN.val for report.py."""
import json
import os
import random
import sqlite3
import sys
import tarfile
import io
import time

NFILES = 10000
NDIRS = 100


def mktar(path):
    """The same bytes on every run and every machine (seeded sizes and
    contents, fixed owner, mode and times), so tar -x does the same work on
    every target; sizes 512 B to 60 KiB, like a source tree."""
    rng = random.Random(15)
    total = 0
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tar:
        for d in range(NDIRS):
            ti = tarfile.TarInfo(f"tree/d{d:03d}")
            ti.type, ti.mode, ti.mtime = tarfile.DIRTYPE, 0o755, 1700000000
            tar.addfile(ti)
            for i in range(NFILES // NDIRS):
                size = rng.randint(512, 60 * 1024)
                ti = tarfile.TarInfo(f"tree/d{d:03d}/f{i:03d}.dat")
                ti.size, ti.mode, ti.mtime = size, 0o644, 1700000000
                tar.addfile(ti, io.BytesIO(rng.randbytes(size)))
                total += size
    print(json.dumps({"files": NFILES, "dirs": NDIRS, "bytes": total}))


def sqlite(db, seconds):
    """One INSERT per transaction into an indexed table, each commit
    durable (WAL + synchronous=FULL fsyncs the WAL on every commit); the
    WAL's -shm index is a shared mmap, so the file system must support it."""
    con = sqlite3.connect(db, isolation_level=None)
    mode = con.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    if mode.lower() != "wal":
        sys.exit(f"workloads.py: journal_mode is {mode}, not wal")
    con.execute("PRAGMA synchronous=FULL")
    con.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER, v BLOB)")
    con.execute("CREATE INDEX tk ON t(k)")
    rng = random.Random(15)
    n = 0
    t0 = time.monotonic()
    end = t0 + seconds
    while time.monotonic() < end:
        con.execute("BEGIN")
        con.execute("INSERT INTO t(k, v) VALUES(?, ?)", (rng.getrandbits(31), rng.randbytes(100)))
        con.execute("COMMIT")
        n += 1
    el = time.monotonic() - t0
    got = con.execute("SELECT count(*) FROM t").fetchone()[0]
    con.close()
    if got != n:
        sys.exit(f"workloads.py: {got} rows after {n} commits")
    print(json.dumps({"value": n / el, "unit": "tx/s", "count": n, "seconds": el}))


def clone(src, dst, size):
    """The big file of bench/run.sh's Rbig: SRC's blocks (and so its block
    map, item for item) repeated until DST is SIZE bytes, without writing
    the data again: copy_file_range shares whole blocks on twinfs and on
    btrfs.  Fails rather than fall back to a short copy."""
    t0 = time.monotonic()
    s = os.open(src, os.O_RDONLY)
    d = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    piece = os.fstat(s).st_size
    if piece <= 0 or size % piece:
        sys.exit(f"workloads.py: {size} is not a multiple of {src}'s {piece} bytes")
    for k in range(size // piece):
        off = 0
        while off < piece:
            n = os.copy_file_range(s, d, piece - off, off, k * piece + off)
            if n <= 0:
                sys.exit(f"workloads.py: copy_file_range returned {n} at {k * piece + off}")
            off += n
    os.fsync(d)
    st = os.fstat(d)
    os.close(s)
    os.close(d)
    if st.st_size != size:
        sys.exit(f"workloads.py: {dst} is {st.st_size} bytes, not {size}")
    print(json.dumps({"copies": size // piece, "piece": piece, "bytes": size,
                      "seconds": time.monotonic() - t0}))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "mktar":
        mktar(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "sqlite":
        sqlite(sys.argv[2], float(sys.argv[3]))
    elif len(sys.argv) == 5 and sys.argv[1] == "clone":
        clone(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
