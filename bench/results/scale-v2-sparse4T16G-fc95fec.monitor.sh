#!/bin/bash
# monitor of the scale4t bench daemon: one line every 10 s, per-mapping summary every 60 s
CTL=/work/wt/scale4t/build/twinfs-ctl
n=0
while sleep 10; do
  [ -f /tmp/scale4t-mon.stop ] && exit 0
  pid=$(pgrep -f 'scale4t-mnt/twinfs-scale.*/a.img' | head -1)
  [ -n "$pid" ] || continue
  M=$(tr '\0' '\n' < /proc/$pid/cmdline | sed -n 4p)
  st=$(awk '/^(VmRSS|VmHWM|RssAnon|VmPin|Threads):/{printf "%s=%s ", $1, $2}' /proc/$pid/status 2>/dev/null)
  js=$(timeout 5 $CTL raw $M stats 2>/dev/null | python3 -c '
import json,sys
try: d=json.load(sys.stdin)
except Exception: sys.exit(0)
n=d["node_cache"]; e=d["extent_cache"]; y=d["dirty"]; s=d["space"]; i=d["icache"]; c=d["checkpoint"]
print("node=%d nmax=%d ndirty=%d nbudget=%d ext=%d dirty=%d leafd=%d ckw=%d ckb=%d logblk=%d bm=%d acc=%d ires=%d bounce_trim=%d" % (n["bytes"],n["max_bytes"],n["dirty_bytes"],y["node_budget_bytes"],e["bytes"],y["bytes"],y["leaf_bytes"],c["writes"],c["written_bytes"],d["log"]["chunk_blocks"],s["alloc_bitmap_bytes"],s["accounting_bitmap_bytes"],i["resident"],d["bounce"]["trimmed"]))')
  echo "$(date -u +%T) pid=$pid $st $js hostused=$(df -k --output=used / | tail -1)"
  n=$((n+1))
  if ((n % 6 == 0)); then echo "--- maps $(date -u +%T)"; python3 /tmp/scale4t-maps.py $pid 2>/dev/null | head -8; fi
done
