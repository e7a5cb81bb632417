#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: format v2, node area filled by namespace changes and xattrs
# in flight: on a small v2 file system (two 128M images) mounted with 64
# FUSE worker threads, 64 threads create files and give each 16 xattrs of
# 4 KiB (64 KiB of XCHUNK items a file: about nine leaves to rewrite at
# the next checkpoint, while its notes count two) until the node gate
# refuses them (ENOSPC) or 40 s pass.  The gate's reservations must be
# back to 0 once they stop, no background checkpoint may fail or write
# more node slots than the gate counted (dirty.checkpoint_slots_over), the
# unmount must succeed (the daemon exits 0: its final checkpoint fits),
# fsck -n must be clean, the next normal mount must work and every
# acknowledged create and xattr must be there.  Before the namespace
# reservations (and the xattr rewrites counted in the gate), the final
# checkpoint ran out of node slots: the unmount failed and the next mount
# refused the file system.
source "$(dirname "$0")/harness.sh"
h_need_fsck

h_setup 2 128M -O v2
h_mount "$(h_devspec "${IMGS[@]}")" threads=64
NS=$T/ns.py
cat >"$NS" <<'PY'
# ns.py run MNT MODEL SECONDS THREADS | verify MNT MODEL
# Thread t makes d/tT_K with xattrs user.x0..user.x15, each 4 KiB of
# (T, K, J) repeated.
import errno, os, struct, sys, threading, time
NX, XV = 16, 4096

def val(t, k, j):
    return (struct.pack("<qqq", t, k, j) * (XV // 24 + 1))[:XV]

def run(mnt, model_path, secs, nthr):
    d = os.path.join(mnt, "d")
    os.mkdir(d)
    t_end = time.time() + secs
    res = [None] * nthr

    def worker(t):
        files, nospc, other, miss, k = {}, 0, 0, 0, 0
        while time.time() < t_end and miss < 20:
            p = os.path.join(d, "t%d_%d" % (t, k))
            try:
                os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    other += 1
                    break
                nospc += 1
                miss += 1
                time.sleep(0.05)
                continue
            files[k] = 0
            for j in range(NX):
                try:
                    os.setxattr(p, "user.x%d" % j, val(t, k, j))
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        other += 1
                    nospc += 1
                    break
                files[k] = j + 1
            miss = 0 if files[k] else miss + 1
            k += 1
        res[t] = (files, nospc, other)

    thr = [threading.Thread(target=worker, args=(t,)) for t in range(nthr)]
    for x in thr:
        x.start()
    for x in thr:
        x.join()
    with open(model_path, "w") as f:
        for t, r in enumerate(res):
            for k, n in r[0].items():
                f.write("%d %d %d\n" % (t, k, n))
    print(sum(len(r[0]) for r in res), sum(sum(r[0].values()) for r in res),
          sum(r[1] for r in res), sum(r[2] for r in res))

def verify(mnt, model_path):
    bad = n = 0
    for l in open(model_path):
        t, k, nx = map(int, l.split())
        p = os.path.join(mnt, "d", "t%d_%d" % (t, k))
        n += 1
        try:
            for j in range(nx):
                if os.getxattr(p, "user.x%d" % j) != val(t, k, j):
                    raise OSError(errno.EIO, "user.x%d differs" % j)
        except OSError as e:
            bad += 1
            if bad <= 5:
                print("%s: %s" % (p, e))
    print("bad", bad, "of", n, "files")
    return 1 if bad else 0

if sys.argv[1] == "run":
    run(sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5]))
else:
    sys.exit(verify(sys.argv[2], sys.argv[3]))
PY

read -r nfiles nxattrs nnospc nother < <(python3 "$NS" run "$MNT" "$T/model" 40 64)
h_log "64 threads: $nfiles files, $nxattrs xattrs of 4k, $nnospc ENOSPC, $nother other errors"
((nother == 0)) || h_fail "$nother changes failed with something else than ENOSPC"
((nnospc > 0)) || h_fail "the node area never filled"
((nfiles > 20 && nxattrs > 200)) || h_fail "only $nfiles files and $nxattrs xattrs went in"
h_node_gate_idle
h_umount
h_fsck 0 -n "${IMGS[@]}"
h_mount
python3 "$NS" verify "$MNT" "$T/model" || h_fail "an acknowledged create or xattr was lost"
h_umount
h_log "ok"
