#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# Example twinfs event command: log every event to syslog and mail the ones
# that need a person.  Install it executable and mount with
#   twinfs -o event_cmd=/usr/local/sbin/twinfs-event-mail.sh DEV1:DEV2 MNT
# (or event_cmd=... in the fstab options).  The daemon runs it once per
# event, with the details in TWINFS_* variables (twinfs(8), EVENTS), kills
# it after event_timeout seconds (30 by default), and never waits for it.
# Set MAILTO in the daemon's environment, or edit the default below.
MAILTO=${MAILTO:-root}

msg="twinfs $TWINFS_MOUNTPOINT ($TWINFS_LABEL $TWINFS_FS_UUID): $TWINFS_EVENT"
[ -n "$TWINFS_DEVICE" ] && msg="$msg device $TWINFS_DEVICE_SLOT ($TWINFS_DEVICE, $TWINFS_DEVICE_STATE)"
msg="$msg: $TWINFS_DETAIL"
case $TWINFS_SEVERITY in
error) prio=daemon.err ;;
warning) prio=daemon.warning ;;
*) prio=daemon.notice ;;
esac
logger -t twinfs-event -p "$prio" -- "$msg"

# Mail what needs someone: failures, damage, low space.  A scrub that found
# nothing and a device back online are only logged.
case $TWINFS_EVENT in
device_online | space_ok | rebuild_done | replace_done) exit 0 ;;
scrub_done) [ "${TWINFS_CSUM_ERRORS:-0}" = 0 ] && [ "${TWINFS_UNRECOVERABLE:-0}" = 0 ] &&
	[ "${TWINFS_READ_ERRORS:-0}" = 0 ] && exit 0 ;;
esac
command -v mail >/dev/null 2>&1 || exit 0
{
	echo "$msg"
	echo
	echo "time: $TWINFS_TIME"
	[ "${TWINFS_COUNT:-1}" != 1 ] && echo "happened $TWINFS_COUNT times"
	[ "${TWINFS_DROPPED:-0}" != 0 ] && echo "$TWINFS_DROPPED earlier events were dropped (see the daemon's log)"
	echo
	twinfs-ctl status "$TWINFS_MOUNTPOINT" 2>&1
} | mail -s "twinfs: $TWINFS_EVENT on $TWINFS_MOUNTPOINT" "$MAILTO"
