#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: format v2, node area nearly full, buffered writes on the
# default (writeback_cache) mount with no fsync: on a small v2 file system
# (two 256M images, 512 node slots, the data area mostly free, so low-space
# mode for data blocks stays off) whose node area empty files have filled
# (then a tenth of them deleted), random 4k buffered overwrites of a 64 MiB
# file (20,000 at most, 120 s at most), through an open made before the fill
# and one made after, must fail at write(2) with ENOSPC, and every write(2)
# that returned success must read back after unmount, fsck and mount.  On
# the code before low-space mode looked at the node area, write(2) kept
# succeeding from the page cache, the WRITEs the kernel sent back were
# refused by the node gate (close and fsync reported ENOSPC, or nothing
# did), and the data was gone after the remount.
source "$(dirname "$0")/harness.sh"
h_need_fsck

h_setup 2 256M -O v2
h_mount
NL=$T/nl.py
cat >"$NL" <<'PY'
# nl.py run MNT MODEL SECONDS SEED | verify FILE MODEL
# Blocks hold (block, gen, seed) repeated; gen 0 is the initial write.
import errno, os, random, struct, subprocess, sys, time
BS = 4096

def pat(blk, gen, seed):
    return (struct.pack("<qqq", blk, gen, seed) * (BS // 24)).ljust(BS, b"\0")

def ename(e):
    return errno.errorcode.get(e.errno, str(e.errno))

def run(mnt, model_path, secs, seed):
    path = os.path.join(mnt, "big")
    nblk = 64 * 256
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    for b0 in range(0, nblk, 256):
        os.write(fd, b"".join(pat(b, 0, 0) for b in range(b0, b0 + 256)))
    os.fsync(fd)
    os.close(fd)
    # Opened while the node area has room: a cached open.
    fds = [os.open(path, os.O_RDWR)]
    d = os.path.join(mnt, "d")
    os.mkdir(d)
    nf = 0
    while True:
        try:
            os.close(os.open(os.path.join(d, "f%d" % nf), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise
            break
        nf += 1
    # Room for some extent items, not for a fragmented file's.
    for i in range(nf // 10):
        os.unlink(os.path.join(d, "f%d" % i))
    # syncfs(2), this mount only: sync(2) would flush the tests beside it
    subprocess.run(["sync", "-f", d], check=True)
    fds.append(os.open(path, os.O_RDWR))
    rnd = random.Random(seed)
    model, unsure, n, err, gen = {}, None, 0, "none", 1
    t_end = time.time() + secs
    while time.time() < t_end and n < 20000:
        blk = rnd.randrange(nblk)
        try:
            if os.pwrite(fds[n % 2], pat(blk, gen, seed), blk * BS) != BS:
                raise OSError(errno.EIO, "short write")
        except OSError as e:
            err = ename(e)
            unsure = (blk, model.get(blk, 0), gen)
            break
        model[blk] = gen
        gen += 1
        n += 1
    cerr = "none"
    for fd in fds:
        try:
            os.close(fd)
        except OSError as e:
            cerr = ename(e)
    with open(model_path, "w") as f:
        f.write("%d %d\n" % (seed, nblk))
        for b, g in sorted(model.items()):
            f.write("%d %d\n" % (b, g))
        if unsure:
            f.write("u %d %d %d\n" % unsure)
    print(nf, n, err, cerr)

def verify(path, model_path):
    lines = open(model_path).read().split("\n")
    seed, nblk = map(int, lines[0].split())
    want = {}
    for l in lines[1:]:
        p = l.split()
        if p and p[0] == "u":
            b, o, g = map(int, p[1:])
            want[b] = [pat(b, o, seed if o else 0), pat(b, g, seed)]
        elif p:
            b, g = map(int, p)
            want[b] = [pat(b, g, seed)]
    bad = 0
    with open(path, "rb") as f:
        for b in range(nblk):
            d = f.read(BS)
            if d not in want.get(b, [pat(b, 0, 0)]):
                bad += 1
                if bad <= 5:
                    print("block %d: got %r" % (b, struct.unpack("<qqq", d[:24])))
    print("bad", bad, "of", len(want), "written")
    return 1 if bad else 0

if sys.argv[1] == "run":
    run(sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5]))
else:
    sys.exit(verify(sys.argv[2], sys.argv[3]))
PY

read -r nf nops err cerr < <(python3 "$NL" run "$MNT" "$T/model" 120 11)
h_log "node area full after $nf empty files; $nops buffered 4k writes, then $err; close: $cerr"
((nf > 1000)) || h_fail "only $nf files fit"
h_umount
h_fsck 0 -n "${IMGS[@]}"
h_mount
python3 "$NL" verify "$MNT/big" "$T/model" ||
	h_fail "write(2) acknowledged, data lost after the remount (write: $err, close: $cerr)"
[[ $err == ENOSPC ]] || h_fail "buffered writes stopped on $err after $nops writes, want ENOSPC at write(2)"
((nops > 100)) || h_fail "only $nops writes before ENOSPC"
grep -q "writes the node area has room for" "$T/daemon.1.log" ||
	h_fail "low-space mode never entered for the node area"
h_umount
h_log "ok"
