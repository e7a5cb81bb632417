#!/usr/bin/env bash
# The measure() steps of bench/scale.sh by hand, on the 4 TiB file system whose
# scale.sh run was stopped (host disk nearly full) after 10 GiB of overwrites.
set -u
B=/work/main/build; CTL=$B/twinfs-ctl; TW=$B/twinfs
MNT=/tmp/twinfs-scale.sUZZfd/mnt; D=/var/tmp/xfsbig/twinfs-scale.6b0r7k
PID=9692
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
mounted() { grep -q " $MNT fuse" /proc/mounts; }
st() { "$CTL" stats "$MNT" --prometheus | grep -E "^twinfs_($1)[ {]"; }
echo "load: $(cat /proc/loadavg)"
"$CTL" sync "$MNT" >/dev/null
grep -E 'VmHWM|VmRSS' /proc/$PID/status
st 'checkpoints_total|checkpoint_written_bytes_total'
"$CTL" stats "$MNT" | grep -E '^log.chunk_blocks'
kill -9 $PID; sleep 0.5; umount -l "$MNT" 2>/dev/null || fusermount3 -uz "$MNT"
t0=$(now); "$TW" -f "$D/a.img:$D/b.img" "$MNT" > /work/scale/d2.log 2>&1 & P2=$!
until mounted; do sleep 0.02; done; echo "mount after kill -9: $(since $t0) s"
st 'checkpoints_total|checkpoint_written_bytes_total'
grep -E 'VmHWM|VmRSS' /proc/$P2/status
t0=$(now); fusermount3 -u "$MNT"; wait $P2; echo "unmount: $(since $t0) s rc=$?"
t0=$(now); "$TW" -f "$D/a.img:$D/b.img" "$MNT" > /work/scale/d3.log 2>&1 & P3=$!
until mounted; do sleep 0.02; done; echo "mount clean: $(since $t0) s"
grep -E 'VmRSS' /proc/$P3/status
t0=$(now); n=$(find "$MNT" | wc -l); echo "find: $(since $t0) s ($n)"
echo "load: $(cat /proc/loadavg)"
echo "P3=$P3"
