#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: twinfs-ctl stats/status --prometheus prints valid Prometheus
# text exposition (checked by promcheck.py: HELP and TYPE before samples,
# `name{labels} value` lines, no duplicate series, counters _total,
# mountpoint/fs_uuid labels everywhere) with the metrics a dashboard needs
# and values that match the file system; a degraded mount and a directory
# no daemon answers on give twinfs_health 1 and 2 and the status exit codes.
source "$(dirname "$0")/harness.sh"

: "${CTL:?CTL must name twinfs-ctl}"
LOG_ALLOW='event device_failed'
command -v python3 >/dev/null || { echo "SKIP: python3 is needed for the format check"; exit 77; }
check="python3 $(dirname "$0")/promcheck.py"

h_setup 2 128M -L "prom\"q"
h_mount "" ""
head -c 5M /dev/urandom >"$MNT/f"
"$CTL" sync "$MNT"
# A checkpoint with something in it: format 2's mount checkpoint has
# nothing changed to write (0 bytes), v1's wrote the whole state.
"$CTL" raw "$MNT" checkpoint >/dev/null || h_fail "twinfs-ctl raw checkpoint failed"
"$CTL" stats "$MNT" --prometheus >"$T/stats.prom" || h_fail "stats --prometheus failed"
$check --labels mountpoint,fs_uuid "$T/stats.prom" >"$T/samples" ||
	{ cat "$T/stats.prom" >&2; h_fail "stats --prometheus is not valid exposition"; }
"$CTL" status "$MNT" --prometheus >"$T/status.prom" || h_fail "status --prometheus failed"
$check --labels mountpoint,fs_uuid "$T/status.prom" >/dev/null || h_fail "status --prometheus invalid"
h_log "$(wc -l <"$T/samples") samples"

has() {
	grep -Eq -- "$1" "$T/samples" || { cat "$T/samples" >&2; h_fail "no sample matches: $1"; }
}
for m in device_read_errors_total device_write_errors_total device_flush_errors_total \
	device_csum_errors_total device_repaired_total device_unrecoverable_total; do
	has "^twinfs_$m\{.*device=\"${IMGS[0]}\",slot=\"0\"\} 0$"
	has "^twinfs_$m\{.*device=\"${IMGS[1]}\",slot=\"1\"\} 0$"
done
has '^twinfs_device_state\{.*slot="0",state="ONLINE"\} 1$'
has '^twinfs_device_state\{.*slot="1",state="FAILED"\} 0$'
has '^twinfs_health\{.*\} 0$'
has '^twinfs_info\{.*label="prom\\"q".*\} 1$'
has '^twinfs_log_commits_total\{.*\} [1-9][0-9]*$'
has '^twinfs_log_group_commit_records_sum\{.*\} [1-9][0-9]*$'
has '^twinfs_log_group_commit_records_count\{.*\} [1-9][0-9]*$'
has '^twinfs_checkpoints_total\{.*\} [1-9][0-9]*$'
has '^twinfs_checkpoint_written_bytes_total\{.*\} [1-9][0-9]*$'
for m in size_bytes used_bytes available_bytes free_bytes inodes scrub_running \
	scrub_bytes_done scrub_bytes_total rebuild_running rebuild_bytes_done rebuild_bytes_total; do
	has "^twinfs_$m\{mountpoint=\"$MNT\",fs_uuid=\"[0-9a-f-]{36}\"\} [0-9]+$"
done
used=$(sed -n 's/^twinfs_used_bytes{.*} //p' "$T/samples")
((used >= 5 << 20)) || h_fail "used_bytes $used after writing 5 MiB"

# The example unit in docs/prometheus/ as systemd would run it (specifiers
# and $$ expanded): it leaves one valid .prom file and no temporary.
unit=$(dirname "$0")/../../docs/prometheus/twinfs-prometheus@.service
line=$(sed -n "s/^ExecStart=\/bin\/sh -c '\(.*\)'\$/\1/p" "$unit")
[[ -n $line ]] || h_fail "no ExecStart=/bin/sh -c '...' in $unit"
esc=mnt-escaped
line=${line//\$\$/\$}
line=${line//%i/$esc}
line=${line//%f/$MNT}
mkdir "$T/textfile"
PATH=$(dirname "$CTL"):$PATH DIR=$T/textfile sh -c "$line" || h_fail "the unit's command failed"
$check --labels mountpoint,fs_uuid "$T/textfile/twinfs-$esc.prom" >/dev/null ||
	h_fail "the unit wrote an invalid textfile"
[[ $(ls "$T/textfile") == "twinfs-$esc.prom" ]] || h_fail "textfile dir: $(ls "$T/textfile")"
h_umount

h_mount "${IMGS[0]}" degraded
rc=0
"$CTL" status "$MNT" --prometheus >"$T/deg.prom" || rc=$?
((rc == 1)) || h_fail "status --prometheus of a degraded mount exits $rc, want 1"
$check "$T/deg.prom" >"$T/deg.samples" || h_fail "degraded exposition invalid"
grep -Eq '^twinfs_health\{.*\} 1$' "$T/deg.samples" || h_fail "degraded: health is not 1"
grep -Eq '^twinfs_device_state\{.*slot="1",state="MISSING"\} 1$' "$T/deg.samples" ||
	h_fail "degraded: slot 1 is not MISSING"
h_umount

rc=0
"$CTL" stats "$MNT" --prometheus >"$T/gone.prom" 2>/dev/null || rc=$?
((rc == 2)) || h_fail "--prometheus with no daemon exits $rc, want 2"
$check "$T/gone.prom" >"$T/gone.samples" || h_fail "no-daemon exposition invalid"
grep -Eq '^twinfs_health\{mountpoint=".*"\} 2$' "$T/gone.samples" || h_fail "no daemon: health is not 2"
h_log "PASS"
