#!/usr/bin/env bash
# Checkpoint bytes against the log on the 4 TiB file system left by the scale run,
# with the fixed counter (build-dev, commit 2d5d29b): 512 MiB more random 4k overwrites.
set -euo pipefail
A=$1 B=$2 MNT=$3 OUT=$4 IOSZ=${5:-512M}
CTL=/work/wt/scale4t/build-dev/twinfs-ctl; TW=/work/wt/scale4t/build-dev/twinfs
"$TW" -f "$A:$B" "$MNT" > "$OUT.daemon.log" 2>&1 &
P=$!
until awk -v m="$MNT" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; do sleep 0.05; done
snap() { "$CTL" raw "$MNT" stats | python3 -c 'import json,sys,time; d=json.load(sys.stdin); print("%.1f %d %d %d %d %d %d" % (time.time(), d["checkpoint"]["writes"], d["checkpoint"]["written_bytes"], d["log"]["chunk_blocks"], d["log"]["appends"], d["dirty"]["checkpoint_parts"], d["discard"]["meta_bytes"]))'; }
snap > "$OUT.snaps"
files=$(ls "$MNT"/f* | tr '\n' ':' | sed 's/:$//')
size=$(stat -c %s "$MNT/f0")
( while kill -0 $P 2>/dev/null; do snap >> "$OUT.snaps" 2>/dev/null || true; sleep 1; done ) &
S=$!
nice -n 5 fio --name=ow --filename="$files" --size=$((size * 4)) --io_size=$IOSZ --rw=randwrite --bs=4k --direct=1 \
	--ioengine=io_uring --iodepth=32 --norandommap --randrepeat=0 --file_service_type=random \
	--allow_file_create=0 --output="$OUT.fio.out" > /dev/null 2>&1
"$CTL" sync "$MNT" > /dev/null
snap >> "$OUT.snaps"
grep -E "VmHWM|VmRSS" /proc/$P/status > "$OUT.rss"
kill $S 2>/dev/null || true
fusermount3 -u "$MNT"; while kill -0 $P 2>/dev/null; do sleep 0.05; done
echo done
