#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: -o lazyreplay keeps the replayed extent records of files
# whose map leaves are not in memory pending (lib/extpend.c) and applies
# them, leaf by leaf in log order, as the mount's checkpoint writes them.
# A workload of overwrites, punches, truncates (down and up), shares
# (copy_file_range), creates and deletes over files a checkpoint already
# holds, every file fsynced at the end (-o commit=3600000: only the
# fsyncs make records durable), kill -9; the mount with lazyreplay must
# show every file byte for byte as the model says (a piece lost or applied
# out of order differs), say it kept records pending and found none left
# after its checkpoint's changes; kill -9 again, mount again, the same
# content; unmount, fsck -n clean (the accounting followed the drops and
# shares).  With and without -o compact_dirty, and once with
# TWINFS_ALLOC_CHECK=1 (the allocator, once the pending records are
# applied, equals one built from every extent).
# The mount after the crash serves before any checkpoint (part B: the log
# continues under a new log_id, status says so and counts no checkpoint);
# a second workload runs on it while records are still pending, kill -9
# before its first checkpoint, and the mount after that replays both logs
# (then writes its checkpoint: one continuation at most) and must show
# every fsynced byte of both workloads.
source "$(dirname "$0")/harness.sh"
: "${CTL:?CTL must name twinfs-ctl}"
h_need_fsck

h_setup 2 256M -O v2

status_mount() {
	"$CTL" raw "$MNT" status >"$T/status.json" || h_fail "twinfs-ctl raw status"
	"$CTL" raw "$MNT" stats >"$T/stats.json" || h_fail "twinfs-ctl raw stats"
	python3 -c 'import json,sys
m = json.load(open(sys.argv[1]))["mount"]
c = json.load(open(sys.argv[2]))["checkpoint"]
print(m["replay_pending"], m["pending_late"], m["replay_records"], m["log_continued"],
      m["log_cont_pending"], c["writes"], m["ckpt_write_ns"])' "$T/status.json" "$T/stats.json"
}

# workload SEED [FROM]: the files' expected contents go to $T/expect/; the
# model starts from the mount's files, or from $T/expect/ when FROM is
# "expect" (reading the files would apply every pending record first).
workload() {
	python3 - "$MNT" "$T/expect" "$1" "${2:-mnt}" <<'PY'
import ctypes, os, random, sys
mnt, exp, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
src = exp if sys.argv[4] == "expect" else mnt
rnd = random.Random(seed)
libc = ctypes.CDLL(None, use_errno=True)
B = 4096
os.makedirs(exp, exist_ok=True)
model = {}
for name in sorted(os.listdir(src)):
    if name.startswith("f"):
        with open(os.path.join(src, name), "rb") as f:
            model[name] = bytearray(f.read())
def fd_of(name):
    return os.open(os.path.join(mnt, name), os.O_RDWR | os.O_CREAT, 0o644)
for step in range(1000):
    op = rnd.randrange(20)
    name = "f%d" % rnd.randrange(6)
    if name not in model and op >= 3:
        op = 0
    if op < 13:
        off = rnd.randrange(0, 3000) * B
        n = rnd.choice((1, 1, 1, 2, 3, 8, 16, 64)) * B
        data = rnd.randbytes(n)
        fd = fd_of(name)
        os.pwrite(fd, data, off)
        os.close(fd)
        m = model.setdefault(name, bytearray())
        if len(m) < off + n:
            m.extend(bytes(off + n - len(m)))
        m[off:off + n] = data
    elif op < 15:
        m = model[name]
        off = rnd.randrange(0, 3000) * B
        n = rnd.randrange(1, 700) * B
        fd = fd_of(name)
        # FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
        if libc.fallocate(fd, 3, ctypes.c_long(off), ctypes.c_long(n)) != 0:
            sys.exit("punch: errno %d" % ctypes.get_errno())
        os.close(fd)
        end = min(len(m), off + n)
        if off < end:
            m[off:end] = bytes(end - off)
    elif op < 16:
        # Rare: a truncate applies what is pending past its size during
        # the replay, and the checkpoint's applying is what is tested.
        if rnd.randrange(10):
            continue
        m = model[name]
        size = rnd.randrange(0, 3200) * B + rnd.choice((0, 100))
        os.truncate(os.path.join(mnt, name), size)
        if size < len(m):
            del m[size:]
        else:
            m.extend(bytes(size - len(m)))
    elif op < 18:
        dst = "f%d" % rnd.randrange(6)
        src = model[name]
        if dst == name or not src:
            continue
        soff = rnd.randrange(0, max(1, len(src) // B)) * B
        n = min(rnd.randrange(1, 512) * B, len(src) - soff)
        doff = rnd.randrange(0, 3000) * B
        s = os.open(os.path.join(mnt, name), os.O_RDONLY)
        d = fd_of(dst)
        done = 0
        while done < n:
            k = os.copy_file_range(s, d, n - done, soff + done, doff + done)
            if k <= 0:
                break
            done += k
        os.close(s)
        os.close(d)
        m = model.setdefault(dst, bytearray())
        if len(m) < doff + done:
            m.extend(bytes(doff + done - len(m)))
        m[doff:doff + done] = src[soff:soff + done]
    elif op == 18 and rnd.randrange(3) == 0:
        os.unlink(os.path.join(mnt, name))
        del model[name]
for name in model:
    fd = os.open(os.path.join(mnt, name), os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
dfd = os.open(mnt, os.O_RDONLY)
os.fsync(dfd)
os.close(dfd)
for old in os.listdir(exp):
    os.unlink(os.path.join(exp, old))
for name, m in model.items():
    with open(os.path.join(exp, name), "wb") as f:
        f.write(m)
PY
}

compare() {
	local f n=0
	for f in "$T"/expect/*; do
		cmp -s "$f" "$MNT/${f##*/}" || h_fail "$1: ${f##*/} differs from the model"
		n=$((n + 1))
	done
	for f in "$MNT"/f*; do
		[[ -e $f ]] || continue
		[[ -e $T/expect/${f##*/} ]] || h_fail "$1: ${f##*/} should have been deleted"
	done
	h_log "$1: $n files equal the model"
}

# lazy_mount OPTS WHAT [cont|ckpt]: cont (the default) the mount must
# have served without a checkpoint; ckpt: it found a continuation pending
# and wrote its checkpoint before serving.
lazy_mount() {
	local pending late records cont cpend writes wns
	h_mount "" "$1"
	read -r pending late records cont cpend writes wns < <(status_mount)
	h_log "$2: replayed $records records, $pending pieces pending, $late late;" \
		"log continued $cont (pending $cpend), $writes checkpoints, ${wns} ns in one"
	((pending > 0)) || h_fail "$2: the replay kept no record pending (lazyreplay not used)"
	((late == 0)) || h_fail "$2: $late pending pieces were left after the checkpoint's changes"
	if [[ ${3:-cont} == cont ]]; then
		((cont == 1 && cpend == 1 && writes == 0 && wns == 0)) ||
			h_fail "$2: the mount wrote a checkpoint before serving (continued $cont," \
				"pending $cpend, $writes checkpoints, $wns ns)"
	else
		((cont == 0 && writes >= 1 && wns > 0)) ||
			h_fail "$2: a second crash before a checkpoint: the mount must write one" \
				"(continued $cont, $writes checkpoints)"
	fi
}

# Files the trees hold (their leaves read in by nobody after the crash).
base=commit=3600000
h_mount "" "$base"
python3 - "$MNT" <<'PY'
import os, random, sys
rnd = random.Random(1)
for i in range(4):
    with open(os.path.join(sys.argv[1], "f%d" % i), "wb") as f:
        for _ in range(2500):
            f.write(rnd.randbytes(4096))
        os.fsync(f.fileno())
PY
"$CTL" raw "$MNT" checkpoint >/dev/null || h_fail "checkpoint"
mkdir -p "$T/expect"
for f in "$MNT"/f*; do cp "$f" "$T/expect/"; done

round=0
for opts in "lazyreplay,nocompact_dirty" "lazyreplay,compact_dirty" "lazyreplay,cache=8M"; do
	round=$((round + 1))
	workload "$round"
	h_crash
	lazy_mount "$base,$opts" "round $round ($opts), first mount"
	# More on the continued log, over records still pending, fsynced;
	# kill -9 before any checkpoint: both logs are replayed.
	workload "$((round + 100))" expect
	read -r _ _ _ _ cpend _ < <(status_mount)
	# A small cache's dirty budget may checkpoint meanwhile (which ends
	# the continuation); the default budget must not.
	[[ $cpend == 1 || $opts == *cache=* ]] ||
		h_fail "round $round: a checkpoint ended the continuation during the second workload"
	h_crash
	if [[ $cpend == 1 ]]; then
		# fsck reads both logs as mount does (nothing torn by kill -9)
		h_fsck 0 -n "${IMGS[@]}"
		grep -q "^0 errors found" <<<"$FOUT" ||
			h_fail "round $round: fsck with the continuation pending: $FOUT"
		lazy_mount "$base,$opts" "round $round ($opts), mount after the continued one" ckpt
	else
		lazy_mount "$base,$opts" "round $round ($opts), mount after a checkpoint" cont
	fi
	compare "round $round, both logs"
	h_crash
	# That mount's checkpoint holds it all now: replayed again from
	# there (nothing pending is fine), the same content.
	h_mount "" "$base,$opts"
	compare "round $round, second mount"
	h_umount
	h_fsck 0 -n "${IMGS[@]}"
	grep -q "^0 errors found" <<<"$FOUT" || h_fail "round $round: fsck: $FOUT"
	h_mount "" "$base"
done

# The allocator, pending records applied, against every extent.
workload 9
h_crash
export TWINFS_ALLOC_CHECK=1
lazy_mount "$base,lazyreplay" "allocator check"
unset TWINFS_ALLOC_CHECK
grep -q "allocator check: the trees' allocator equals the extents'" "$DAEMON_LOG" ||
	h_fail "no allocator check in the daemon log: $(cat "$DAEMON_LOG")"
compare "allocator check"
h_umount
h_fsck 0 -n "${IMGS[@]}"
grep -q "^0 errors found" <<<"$FOUT" || h_fail "allocator check: fsck: $FOUT"
# fsck -y of a continued log whose old part is damaged on every device
# cuts the log there and drops the continuation with it (its chunks are
# erased by the cut): the image mounts again.  Before, fsck said "1 fixed"
# and wrote the continuation back, and every mount refused the old log's
# early end as damage.
# New files only: nothing freed, so no block the trees hold is written
# again, and the files of the last checkpoint survive the cut whole.
newfiles() {
	python3 - "$MNT" "$1" <<'PY'
import os, sys
for i in range(8):
    with open(os.path.join(sys.argv[1], "%s%d" % (sys.argv[2], i)), "wb") as f:
        f.write(os.urandom(256 * 1024))
        os.fsync(f.fileno())
PY
}
h_mount "" "$base"
newfiles cut
h_crash
lazy_mount "$base,lazyreplay" "damaged old log, first mount"
newfiles cutb
h_crash
for img in "${IMGS[@]}"; do python3 "$(dirname "$0")/logflip.py" "$img"; done
h_fsck 1 -y "${IMGS[@]}"
h_fsck 0 -n "${IMGS[@]}"
grep -q "^0 errors found" <<<"$FOUT" || h_fail "fsck -n after fsck -y cut a continued log: $FOUT"
h_mount "" "$base"
compare "after fsck -y cut a continued log"
h_umount

echo "v2lazyreplay: 7 kill -9 mounts with pending records (3 after a continued log), every file as the model, fsck clean"
