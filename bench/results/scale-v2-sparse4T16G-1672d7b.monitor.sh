#!/bin/bash
# monitor of the scale4t2 bench: RSS (VmRSS, VmHWM) every 0.5 s to rss.log;
# every 10 s status + cache/checkpoint counters + load + host disk to monitor.log;
# smaps_rollup and raw stats at each new RSS peak over 300 MiB (stats at most every 5 s);
# fstrim of the XFS every 120 s; SIGINT to fio (the script's child) when the host
# has under 12 GB free or at the deadline.  Args: SCALE_PID
SP=$1
CTL=/work/wt/scale4t2/build/twinfs-ctl
D=/var/tmp/scale4t2-diag
XFS=/var/tmp/scale4t2-mnt
DEADLINE=$(date -u -d '05:35' +%s)
peak=0; lastjs=0; i=0; stopped=0
while kill -0 "$SP" 2>/dev/null; do
  [ -f /tmp/scale4t2-mon.stop ] && exit 0
  pid=$(pgrep -f "twinfs -f $XFS/twinfs-scale.*/a.img" | head -1)
  t=$(date -u +%T.%N | cut -c1-10)
  if [ -n "$pid" ]; then
    read -r rss hwm < <(awk '/^VmRSS:/{r=$2} /^VmHWM:/{h=$2} END{print r, h}' /proc/$pid/status 2>/dev/null)
    echo "$t $pid $rss $hwm" >> $D/rss.log
    if [ -n "$rss" ] && ((rss > peak)); then
      peak=$rss
      if ((rss > 300 * 1024)); then
        { echo "== $t pid=$pid VmRSS=$rss"; cat /proc/$pid/smaps_rollup; grep -E '^(Vm|Rss)' /proc/$pid/status; } > $D/peak.smaps 2>/dev/null
        now=$(date +%s)
        if ((now - lastjs >= 5)); then lastjs=$now
          M=$(tr '\0' '\n' < /proc/$pid/cmdline | sed -n 4p)
          (timeout 5 $CTL raw $M stats > $D/peak.stats.json.tmp 2>/dev/null && echo "$t VmRSS=$rss" > $D/peak.stats.when && mv $D/peak.stats.json.tmp $D/peak.stats.json) &
        fi
      fi
    fi
  fi
  i=$((i + 1))
  if ((i % 20 == 0)) && [ -n "$pid" ]; then (
    M=$(tr '\0' '\n' < /proc/$pid/cmdline 2>/dev/null | sed -n 4p)
    st=$(awk '/^(VmRSS|VmHWM|RssAnon|VmPin|Threads):/{printf "%s=%s ", $1, $2}' /proc/$pid/status 2>/dev/null)
    js=$(timeout 5 $CTL raw $M stats 2>/dev/null | python3 -c '
import json,sys
try: d=json.load(sys.stdin)
except Exception: sys.exit(0)
n=d["node_cache"]; e=d["extent_cache"]; y=d["dirty"]; s=d["space"]; i=d["icache"]; c=d["checkpoint"]
print("node=%d nmax=%d ndirty=%d nbudget=%d ext=%d dirty=%d leafd=%d ckw=%d ckb=%d logblk=%d bm=%d acc=%d ires=%d" % (n["bytes"],n["max_bytes"],n["dirty_bytes"],y["node_budget_bytes"],e["bytes"],y["bytes"],y["leaf_bytes"],c["writes"],c["written_bytes"],d["log"]["chunk_blocks"],s["alloc_bitmap_bytes"],s["accounting_bitmap_bytes"],i["resident"]))' 2>&1)
    avail=$(df -k --output=avail / | tail -1)
    echo "$(date -u +%T) pid=$pid $st $js load=$(cut -d' ' -f1-3 /proc/loadavg) hostavail=$avail xfsbacking=$(du -k /var/tmp/scale4t2-xfs.img | cut -f1) iopsi=$(awk '/some/{print $2}' /proc/pressure/io)" >> $D/monitor.log
    fio=$(pgrep -P "$SP" -x fio)
    if [ -n "$fio" ] && [ ! -f $D/fio.stopped ]; then
      why=
      ((avail < 12000000)) && why="host disk $((avail / 1000000)) GB free"
      (($(date +%s) >= DEADLINE)) && why="deadline 05:35 UTC"
      if [ -n "$why" ]; then kill -INT "$fio"; touch $D/fio.stopped; echo "$(date -u +%T) SIGINT fio $fio: $why" >> $D/monitor.log; fi
    fi
  ) & fi
  if ((i % 240 == 0)); then (
    t0=$(date +%s.%N); fstrim $XFS 2>&1 | head -1 > $D/fstrim.last
    echo "$(date -u +%T) fstrim $(awk -v a=$t0 -v b=$(date +%s.%N) 'BEGIN{printf "%.1f", b-a}')s $(cat $D/fstrim.last) backing=$(du -k /var/tmp/scale4t2-xfs.img | cut -f1)" >> $D/monitor.log
  ) & fi
  sleep 0.5
done
