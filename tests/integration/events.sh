#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: -o event_cmd=PATH runs PATH for every event with its details
# in the environment: device_failed (missing and stale at mount, an image
# deleted while mounted), rebuild_done + device_online, scrub_done with
# the damage it found (fault injector), space_low / space_ok (a filled and
# emptied file system), fs_unusable (every image deleted).  A hanging
# command neither blocks the file system nor its unmount and is killed at
# event_timeout.  twinfs-ctl status exits 0 healthy, 1 degraded, 2
# unusable or unreachable; -x prints one line.  A relative event_cmd is
# refused with one line.
source "$(dirname "$0")/harness.sh"

: "${CTL:?CTL must name twinfs-ctl}"
# Events are logged at their severity; these are the ones provoked here.
LOG_ALLOW='event |image file was deleted|device failed|Input/output error|No such device|'\
'final checkpoint failed|unusable|killed|still running|No space left|scrub (finished|canceled)|'\
'unrecoverable|bad copies'

EVLOG=$T/events.log
cat >"$T/ev.sh" <<EOF
#!/bin/bash
# One write, so the test never reads half a block.
out="BEGIN \$1
\$(env | grep '^TWINFS_' | sort)
END"
printf '%s\n' "\$out" >>"$EVLOG"
EOF
chmod +x "$T/ev.sh"
# Hangs, leaving a child in its process group; both pids recorded.
cat >"$T/hang.sh" <<EOF
#!/bin/bash
sleep 1000 &
echo "\$\$ \$!" >>"$T/hang.pids"
wait
EOF
chmod +x "$T/hang.sh"

# wait_event NAME [N]: at least N (default 1) NAME events arrived (20 s).
wait_event() {
	local name=$1 n=${2:-1} i c
	for ((i = 0; i < 200; i++)); do
		c=$(grep -c "^BEGIN $name\$" "$EVLOG" 2>/dev/null) || true
		((${c:-0} >= n)) && return 0
		sleep 0.1
	done
	cat "$EVLOG" >&2 2>/dev/null || true
	h_fail "no $name event (want $n) within 20 s"
}
# alive PID: running (a killed child reparented to init may linger as a
# zombie until init reaps it: that counts as gone).
alive() {
	[[ -e /proc/$1/status ]] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}
# ev_var NAME VAR: VAR of the last NAME event.
ev_var() {
	awk -v ev="BEGIN $1" -v var="$2" '
		$0 == ev { on = 1; v = ""; next }
		$0 == "END" { if (on) last = v; on = 0; next }
		on && index($0, var "=") == 1 { v = substr($0, length(var) + 2) }
		END { print last }' "$EVLOG"
}
expect_var() {
	local got
	got=$(ev_var "$1" "$2")
	[[ $got == "$3" ]] || { cat "$EVLOG" >&2; h_fail "$1: $2='$got', want '$3'"; }
}
# status_rc: twinfs-ctl status's exit status.
status_rc() {
	local rc=0
	"$CTL" status "$MNT" "$@" >"$T/status.out" 2>&1 || rc=$?
	echo "$rc"
}
expect_status() {
	local want=$1 what=$2 rc line
	rc=$(status_rc)
	[[ $rc == "$want" ]] || { cat "$T/status.out" >&2; h_fail "status exits $rc $what, want $want"; }
	line=$("$CTL" status "$MNT" -x 2>&1 || true)
	h_log "status -x: $line"
	[[ $(grep -c . <<<"$line") == 1 ]] || h_fail "status -x printed more than one line: $line"
	case $want in
	0) grep -q "healthy$" <<<"$line" || h_fail "status -x $what: $line" ;;
	1) grep -q ": degraded: " <<<"$line" || h_fail "status -x $what: $line" ;;
	2) grep -q ": unusable" <<<"$line" || h_fail "status -x $what: $line" ;;
	esac
}

# ---- bad option ----
h_setup 2 128M -L evtest
h_mount_fails "$(h_devspec "${IMGS[@]}")" "event_cmd=ev.sh"
((FAIL_RC == 2)) || h_fail "relative event_cmd: exit $FAIL_RC, want 2"
h_expect_one_line "$FAIL_OUT" "absolute" "relative event_cmd"
h_mount_fails "$(h_devspec "${IMGS[@]}")" "event_cmd=$T/none.sh"
h_expect_one_line "$FAIL_OUT" "none.sh" "missing event_cmd"

# ---- missing at mount, then stale, then rebuilt ----
h_mount "${IMGS[0]}" "degraded,commit=200,event_cmd=$T/ev.sh"
wait_event device_failed
expect_var device_failed TWINFS_EVENT device_failed
expect_var device_failed TWINFS_DEVICE_SLOT 1
expect_var device_failed TWINFS_DEVICE_STATE missing
expect_var device_failed TWINFS_SEVERITY error
expect_var device_failed TWINFS_MOUNTPOINT "$MNT"
expect_var device_failed TWINFS_LABEL evtest
uuid=$("$CTL" status "$MNT" --json 2>/dev/null | sed -n 's/.*"fs_uuid": *"\([^"]*\)".*/\1/p' || true)
[[ -n $uuid ]] || h_fail "no fs_uuid in status --json"
expect_var device_failed TWINFS_FS_UUID "$uuid"
[[ $(ev_var device_failed TWINFS_TIME) =~ ^20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z$ ]] ||
	h_fail "TWINFS_TIME: $(ev_var device_failed TWINFS_TIME)"
[[ -n $(ev_var device_failed TWINFS_DETAIL) ]] || h_fail "no TWINFS_DETAIL"
grep -q "event device_failed" "$DAEMON_LOG" || h_fail "the event was not logged"
expect_status 1 "with a device missing"
for i in 1 2 3 4; do
	head -c $((3 * 1024 * 1024 + i * 777)) /dev/urandom >"$MNT/g$i"
done
(cd "$MNT" && sha256sum g*) >"$T/gsums"
h_umount

: >"$EVLOG"
h_mount "" "degraded,commit=200,event_cmd=$T/ev.sh"
wait_event device_failed
expect_var device_failed TWINFS_DEVICE_STATE stale
expect_var device_failed TWINFS_DEVICE "${IMGS[1]}"
duuid=$("$CTL" status "$MNT" --json 2>/dev/null | tr '{' '\n' | grep '"index": *1,' |
	sed -n 's/.*"uuid": *"\([^"]*\)".*/\1/p' || true)
[[ -n $duuid ]] || h_fail "no uuid for device 1 in status --json"
expect_var device_failed TWINFS_DEVICE_UUID "$duuid"
expect_status 1 "with a device stale"
"$CTL" rebuild "$MNT" 1 --wait >/dev/null
wait_event rebuild_done
wait_event device_online
expect_var rebuild_done TWINFS_DEVICE_SLOT 1
expect_var rebuild_done TWINFS_DEVICE "${IMGS[1]}"
expect_var rebuild_done TWINFS_UNRECOVERABLE 0
expect_var device_online TWINFS_DEVICE_SLOT 1
expect_var device_online TWINFS_DEVICE_STATE ok
expect_status 0 "after the rebuild"
h_umount

# ---- scrub finds (and repairs) damage; space low and fine again ----
: >"$EVLOG"
# As tests/integration/scrub.sh: reads of device 1 return flipped bits.
off=$(((16 + 4096) * 4096))
h_mount "" "commit=200,event_cmd=$T/ev.sh,fault=dev=1\\,op=read\\,off=$off\\,len=33554432\\,kind=corrupt\\,count=-1"
"$CTL" scrub start "$MNT" --wait >/dev/null
wait_event scrub_done
[[ $(ev_var scrub_done TWINFS_CSUM_ERRORS) -gt 0 ]] || h_fail "scrub_done: no csum errors reported"
[[ $(ev_var scrub_done TWINFS_REPAIRED) -gt 0 ]] || h_fail "scrub_done: nothing repaired reported"
expect_var scrub_done TWINFS_UNRECOVERABLE 0
expect_var scrub_done TWINFS_SEVERITY warning
[[ -z $(ev_var scrub_done TWINFS_DEVICE) ]] || h_fail "scrub_done names a device"
expect_status 0 "after a scrub that repaired everything"

# All but 4 MiB of what is available.  Near full, buffered writers get
# ENOSPC from write(2) itself up to a few MiB early (the low-space gate,
# see README "A full file system"): that is fine here, 90% is the point.
avail=$(df -B1M --output=avail "$MNT" | tail -n 1)
head -c $(((avail - 4) << 20)) /dev/zero >"$MNT/fill" 2>"$T/fill.err" ||
	grep -q "No space left" "$T/fill.err" || h_fail "filling: $(cat "$T/fill.err")"
"$CTL" sync "$MNT"
wait_event space_low
pct=$(ev_var space_low TWINFS_USED_PCT)
((pct >= 90)) || h_fail "space_low at $pct%"
expect_var space_low TWINFS_SEVERITY warning
rm -f "$MNT/fill"
"$CTL" sync "$MNT"
wait_event space_ok
pct=$(ev_var space_ok TWINFS_USED_PCT)
((pct < 85)) || h_fail "space_ok at $pct%"
(cd "$MNT" && sha256sum --quiet -c "$T/gsums") || h_fail "files differ"
h_umount

# ---- failed while mounted, then unusable ----
: >"$EVLOG"
h_mount "" "commit=200,event_cmd=$T/ev.sh"
expect_status 0 "before the failure"
rm -f "${IMGS[1]}"
wait_event device_failed
expect_var device_failed TWINFS_DEVICE "${IMGS[1]}"
expect_var device_failed TWINFS_DEVICE_SLOT 1
expect_var device_failed TWINFS_DEVICE_STATE failed
expect_status 1 "with a device failed"
rm -f "${IMGS[0]}"
wait_event fs_unusable
expect_status 2 "with no device left"
[[ -z $(ev_var fs_unusable TWINFS_DEVICE) ]] || h_fail "fs_unusable names a device"
# The final checkpoint cannot be written: the daemon exits nonzero.
fusermount3 -u "$MNT"
wait "$DAEMON_PID" || true
DAEMON_PID=""
rm -f "$T/daemon.pid"
rc=0
"$CTL" status "$MNT" >/dev/null 2>&1 || rc=$?
((rc == 2)) || h_fail "status of an unmounted directory exits $rc, want 2"

# ---- a hanging command blocks nothing ----
h_setup 2 128M
h_mount "${IMGS[0]}" "degraded,event_cmd=$T/hang.sh"
for ((i = 0; i < 100; i++)); do
	[[ -s $T/hang.pids ]] && break
	sleep 0.1
done
[[ -s $T/hang.pids ]] || h_fail "the event command did not start"
read -r hpid hchild <"$T/hang.pids"
timeout 20 bash -c "head -c 4M /dev/urandom >'$MNT/while-hanging' && sync '$MNT/while-hanging' &&
	cmp <(head -c 4M '$MNT/while-hanging') '$MNT/while-hanging' && ls '$MNT' >/dev/null" ||
	h_fail "the file system did not serve while the event command hung"
alive "$hpid" || h_fail "the hanging command is gone already"
t0=$(date +%s)
h_umount
t1=$(date +%s)
((t1 - t0 <= 15)) || h_fail "unmount took $((t1 - t0)) s with a hanging event command"
alive "$hpid" && h_fail "hanging command $hpid survived the unmount"
alive "$hchild" && h_fail "its child $hchild survived the unmount"

rm -f "$T/hang.pids"
h_mount "${IMGS[0]}" "degraded,event_cmd=$T/hang.sh,event_timeout=1"
for ((i = 0; i < 100; i++)); do
	grep -q "killed" "$DAEMON_LOG" && break
	sleep 0.1
done
grep -q "still running after .* s; killed" "$DAEMON_LOG" || h_fail "no timeout kill within 10 s"
read -r hpid hchild <"$T/hang.pids"
sleep 0.2
alive "$hchild" && h_fail "the timed-out command's child $hchild survived"
h_umount

h_log "PASS"
