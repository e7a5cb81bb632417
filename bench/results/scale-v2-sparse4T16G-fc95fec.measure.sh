#!/usr/bin/env bash
# The rest of bench/scale.sh's sparse step (measure(), then its stop_daemon),
# by hand with the script's own commands, for a step whose fio was stopped
# early (host disk).  Args: DAEMON_PID IMG1 IMG2 MNT OUTPREFIX EXTRA...
set -euo pipefail
DAEMON_PID=$1 A=$2 B=$3 MNT=$4 OUTP=$5; shift 5
ROOT=/work/wt/scale4t; CTL=$ROOT/build/twinfs-ctl; TWINFS=$ROOT/build/twinfs
CK0=0 CB0=0 LB0=0
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
status_kb() { awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status"; }
mounted() { awk -v m="$MNT" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; }
stats() {
	"$CTL" stats "$MNT" --prometheus | awk -v want="$*" '
		BEGIN { n = split(want, w, " ") }
		/^twinfs_/ { name = $1; sub(/\{.*/, "", name); v[name] = $NF }
		END { for (i = 1; i <= n; i++) printf "%s%.0f", (i > 1 ? " " : ""), v["twinfs_" w[i]]; print "" }'
}
stat_plain() { "$CTL" stats "$MNT" | awk -F': ' -v k="$1" '$1 == k { v = $2 } END { printf "%.0f\n", v }'; }
N=10
start_daemon() {
	local t0; N=$((N + 1)); t0=$(now)
	"$TWINFS" -f "$A:$B" "$MNT" > /var/tmp/scale4t-diag/daemon.$N.log 2>&1 &
	DAEMON_PID=$!
	until mounted; do kill -0 "$DAEMON_PID" || { echo "daemon exited" >&2; exit 1; }; sleep 0.02; done
	MOUNT_S=$(since "$t0")
}
stop_daemon() { local t0; t0=$(now); fusermount3 -u "$MNT"; while kill -0 "$DAEMON_PID" 2>/dev/null; do sleep 0.02; done; UMOUNT_S=$(since "$t0"); }
"$CTL" sync "$MNT" >/dev/null
hwm=$(status_kb "$DAEMON_PID" VmHWM); rss=$(status_kb "$DAEMON_PID" VmRSS)
read -r ck cb < <(stats checkpoints_total checkpoint_written_bytes_total)
lb=$(stat_plain log.chunk_blocks)
"$CTL" raw "$MNT" stats > "$OUTP.stats-before-kill.json"
set -- "$@" "log_bytes=$(((lb - LB0) * 4096))"
kill -9 "$DAEMON_PID"; while kill -0 "$DAEMON_PID" 2>/dev/null; do sleep 0.02; done
umount -l "$MNT" 2>/dev/null || fusermount3 -uz "$MNT" 2>/dev/null || true
start_daemon; crash=$MOUNT_S
read -r mck mcb < <(stats checkpoints_total checkpoint_written_bytes_total)
stop_daemon; umnt=$UMOUNT_S
start_daemon; clean=$MOUNT_S
rss2=$(status_kb "$DAEMON_PID" VmRSS)
t0=$(now); n=$(find "$MNT" | wc -l); find_s=$(since "$t0")
printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' sparse 4T 4398046511104 \
	"$hwm" "$rss" "$rss2" "$((ck - CK0))" "$((cb - CB0))" "$mcb" "$umnt" "$clean" \
	"$crash" "$find_s" "$n" "$*" >> "$OUTP.tsv"
echo "peak $hwm rss $rss rss2 $rss2 ck $ck cb $cb mck $mck mcb $mcb umount $umnt mount $clean crash $crash find $find_s ($n) $*" >&2
stop_daemon
echo "final unmount ${UMOUNT_S}s" >&2
