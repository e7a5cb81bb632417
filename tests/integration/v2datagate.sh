#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: format v2, node area full of data changes: on a small v2
# file system (two 128M images, 256 node slots) whose node area empty files
# have nearly filled, random 4k overwrites, hole fills and punches of a
# 48 MiB file (O_DIRECT and buffered opens in turn, fsync every 256) cut
# its extents until a write fails.  It must fail with ENOSPC, never hang,
# and every write acknowledged before must read back after sync, unmount,
# fsck and mount (a model of every block's content); statfs then shows no
# blocks and no inodes available; an O_CREAT open of an existing file
# still works there; deleting gives the room back.  On the code before the data gate the writes hang once the
# log is full (every checkpoint fails with ENOSPC) until the watchdog
# kills the daemon.
source "$(dirname "$0")/harness.sh"
h_need_fsck

h_setup 2 128M -O v2
h_mount
DG=$T/dg.py
cat >"$DG" <<'PY'
# dg.py init FILE MIB | frag FILE MODEL SECONDS SEED | verify FILE MODEL
# Blocks hold (block, gen, seed) repeated: gen 0 is the initial write
# (seed 0), -1 a punched hole.  frag writes the model: the gen of every
# block it changed, and the op that failed as "u BLK OLD NEW" (either may
# be there).
import ctypes, errno, mmap, os, random, struct, sys, time
BS = 4096
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
PUNCH = 3  # FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE

def pat(blk, gen, seed):
    if gen < 0:
        return b"\0" * BS
    return (struct.pack("<qqq", blk, gen, seed) * (BS // 24)).ljust(BS, b"\0")

def init(path, mib):
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    for b0 in range(0, mib * 256, 256):
        os.write(fd, b"".join(pat(b, 0, 0) for b in range(b0, b0 + 256)))
    os.fsync(fd)
    os.close(fd)

def frag(path, model_path, secs, seed):
    nblk = os.stat(path).st_size // BS
    rnd = random.Random(seed)
    buf = mmap.mmap(-1, BS)
    fds = [os.open(path, os.O_RDWR | os.O_DIRECT), os.open(path, os.O_RDWR)]
    model, unsure, n, err, gen = {}, None, 0, "none", 1
    t_end = time.time() + secs
    while time.time() < t_end:
        blk = rnd.randrange(nblk)
        old = model.get(blk, 0)
        try:
            if rnd.random() < 0.1:
                if libc.fallocate(fds[1], PUNCH, blk * BS, BS):
                    raise OSError(ctypes.get_errno(), "punch")
                model[blk] = -1
            else:
                buf.seek(0)
                buf.write(pat(blk, gen, seed))
                if os.pwritev(fds[n % 2], [buf], blk * BS) != BS:
                    raise OSError(errno.EIO, "short write")
                model[blk] = gen
            gen += 1
            n += 1
            if n % 256 == 0:
                os.fsync(fds[1])
        except OSError as e:
            err = errno.errorcode.get(e.errno, str(e.errno))
            unsure = (blk, old, gen)
            break
    try:
        for fd in fds:
            os.fsync(fd)
    except OSError as e:
        err = "fsync-" + errno.errorcode.get(e.errno, str(e.errno))
    with open(model_path, "w") as f:
        f.write("%d %d\n" % (seed, nblk))
        for b, g in sorted(model.items()):
            f.write("%d %d\n" % (b, g))
        if unsure:
            f.write("u %d %d %d\n" % unsure)
    print(n, err)

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
            want[b] = [pat(b, g, seed if g else 0)]
    bad = 0
    with open(path, "rb") as f:
        for b in range(nblk):
            d = f.read(BS)
            if d not in want.get(b, [pat(b, 0, 0)]):
                bad += 1
                if bad <= 5:
                    print("block %d: got %r" % (b, struct.unpack("<qqq", d[:24])))
    print("bad", bad)
    return 1 if bad else 0

if sys.argv[1] == "init":
    init(sys.argv[2], int(sys.argv[3]))
elif sys.argv[1] == "frag":
    frag(sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5]))
else:
    sys.exit(verify(sys.argv[2], sys.argv[3]))
PY

# Create d/f0, d/f1, ... until the first failure; prints the count made.
fill() {
	python3 - "$MNT/d" <<'PY'
import errno, os, sys
i = 0
while True:
    try:
        os.close(os.open(os.path.join(sys.argv[1], "f%d" % i), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
        break
    i += 1
print(i)
PY
}

python3 "$DG" init "$MNT/big" 48
mkdir "$MNT/d"
nf=$(fill)
h_log "node area full after $nf empty files"
((nf > 1000)) || h_fail "only $nf files fit"
# Room for some extent items, not for a fragmented file's: a tenth back.
python3 -c 'import os, sys
for i in range(0, int(sys.argv[2]) // 10):
    os.unlink(os.path.join(sys.argv[1], "f%d" % i))' "$MNT/d" "$nf"
sync -f "$MNT"

read -r nops err < <(python3 "$DG" frag "$MNT/big" "$T/model" 150 7)
h_log "$nops random 4k ops, then $err"
[[ $err == ENOSPC ]] || h_fail "random overwrites stopped on $err after $nops ops, want ENOSPC"
((nops > 100)) || h_fail "only $nops ops before ENOSPC"
sync -f "$MNT" || h_fail "sync after ENOSPC failed"
read -r avail ffree < <(stat -f -c '%a %d' "$MNT")
h_log "statfs at ENOSPC: $avail blocks available, $ffree inodes free"
((avail == 0 && ffree == 0)) || h_fail "writes get ENOSPC, statfs shows $avail blocks, $ffree inodes available"
# Opening an existing file needs no room, O_CREAT or not.
python3 -c 'import os, sys; os.close(os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY))' \
	"$MNT/d/f$((nf - 1))" || h_fail "O_CREAT open of an existing file failed on a full node area"
python3 -c 'import errno, os, sys
try:
    os.open(sys.argv[1], os.O_CREAT | os.O_EXCL | os.O_WRONLY)
except OSError as e:
    sys.exit(0 if e.errno == errno.EEXIST else 1)
sys.exit(1)' "$MNT/d/f$((nf - 1))" || h_fail "O_CREAT|O_EXCL of an existing name is not EEXIST"
h_umount
h_fsck 0 -n "${IMGS[@]}"
h_mount
python3 "$DG" verify "$MNT/big" "$T/model" || h_fail "acknowledged writes lost or wrong after the remount"
got=$(find "$MNT/d" -type f | wc -l)
((got == nf - nf / 10)) || h_fail "$((nf - nf / 10)) files acknowledged, $got after the remount"

# Deleting gives the room back: the big file and the files go, a new
# fragmented file takes random writes without a failure.
rm -rf "$MNT/d" "$MNT/big"
sync -f "$MNT"
# The slots come back with the next checkpoint (every few seconds).
for ((i = 0; i < 40; i++)); do
	read -r avail ffree < <(stat -f -c '%a %d' "$MNT")
	((avail > 1000 && ffree > 1000)) && break
	sleep 0.5
done
h_log "statfs after the delete: $avail blocks available, $ffree inodes free"
((avail > 1000 && ffree > 1000)) || h_fail "after the delete statfs shows $avail blocks, $ffree inodes available"
python3 "$DG" init "$MNT/big2" 16
read -r nops err < <(python3 "$DG" frag "$MNT/big2" "$T/model2" 15 8)
h_log "after the delete: $nops ops, then $err"
[[ $err == none ]] || h_fail "after the delete, random writes stopped on $err after $nops ops"
h_umount
h_fsck 0 -n "${IMGS[@]}"
h_mount
python3 "$DG" verify "$MNT/big2" "$T/model2" || h_fail "writes after the delete lost after the remount"
h_umount
h_log "ok"
