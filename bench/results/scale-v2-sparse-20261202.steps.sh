#!/bin/bash
# The 4T sparse step measured by hand (the scripted fallocate could not finish before the deadline).
set -u
B=/work/wt/v2scale/build; CTL=$B/twinfs-ctl; TW=$B/twinfs
IMG=/var/tmp/twinfs-scale.LsFUc6; M=/tmp/twinfs-scale.4LVuQu/mnt
P=4334
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
st() { $CTL stats $M | awk -F': ' -v want="$*" 'BEGIN{n=split(want,w," ")} {v[$1]=$2} END{for(i=1;i<=n;i++) printf "%s=%s ", w[i], v[w[i]]; print ""}'; }
mounted() { awk -v m="$M" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; }
start() { local t0=$(now); $TW -f $IMG/a.img:$IMG/b.img $M > /tmp/v2scale-manual-d$1.log 2>&1 & P=$!; until mounted; do kill -0 $P || { echo daemon died; cat /tmp/v2scale-manual-d$1.log; exit 1; }; sleep 0.02; done; echo "mount$1_s=$(since $t0)"; }
rss() { echo "$1 VmHWM_kB=$(awk '/^VmHWM/{print $2}' /proc/$P/status) VmRSS_kB=$(awk '/^VmRSS/{print $2}' /proc/$P/status)"; }
echo "== at kill: $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
rss falloc-daemon; st space.used_bytes checkpoint.writes checkpoint.written_bytes log.chunk_blocks extent_cache.bytes icache.resident
kill -9 $P 2586; sleep 1; umount -l $M 2>/dev/null || fusermount3 -uz $M
start 1; echo "(after kill -9 during fallocate)"; st checkpoint.writes checkpoint.written_bytes log.chunk_blocks; rss after-crash-mount
echo "== fio 512M random 4k overwrites of f0: $(date -u +%T)"
L0=$($CTL stats $M | awk -F': ' '$1=="log.chunk_blocks"{print $2}')
t0=$(now)
fio --name=ow --filename=$M/f0 --size=946980519936 --io_size=512m --rw=randwrite --bs=4k --direct=1 --ioengine=io_uring --iodepth=32 --norandommap --randrepeat=0 --allow_file_create=0 --output=/tmp/v2scale-manual-fio.out > /dev/null 2>&1; echo "fio rc=$? s=$(since $t0)"
$CTL sync $M > /dev/null
rss after-overwrite; st checkpoint.writes checkpoint.written_bytes log.chunk_blocks; echo "log0=$L0"
kill -9 $P; sleep 1; umount -l $M 2>/dev/null || fusermount3 -uz $M
start 2; echo "(after kill -9 after the overwrites)"; st checkpoint.writes checkpoint.written_bytes; rss after-crash-mount2
t0=$(now); fusermount3 -u $M; wait $P; echo "umount_s=$(since $t0)"
start 3; echo "(clean)"; rss after-clean-mount
t0=$(now); n=$(find $M | wc -l); echo "find_s=$(since $t0) n=$n"
t0=$(now); fusermount3 -u $M; wait $P; echo "umount2_s=$(since $t0)"
echo "== done $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
rm -rf $IMG; rmdir $M /tmp/twinfs-scale.4LVuQu 2>/dev/null
