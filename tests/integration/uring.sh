#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: -o uring (FUSE over io_uring, daemon/furing.c): refused in one line while
# the kernel has it off, where -o transport=auto mounts over /dev/fuse instead
# (transport=auto takes the ring once it is on, transport=dev never); with it on, every operation (opcheck) over the
# ring, surviving a remount, and the ring must have carried the requests
# (the daemon counts them); then teardown with requests in flight: a lazy
# unmount under writers, and kill -9 under fsyncing writers whose
# acknowledged records must survive.  Restores enable_uring as it found it.
source "$(dirname "$0")/harness.sh"
: "${OPCHECK:?}" "${KILLWRITER:?}"

PARAM=/sys/module/fuse/parameters/enable_uring
if [[ ! -e $PARAM ]]; then
	echo "SKIP: this kernel has no FUSE over io_uring ($PARAM is absent)"
	exit 77
fi
PREV=$(cat "$PARAM")
uring_restore() { echo "$PREV" >"$PARAM" 2>/dev/null || true; }
trap 'rc=$?; uring_restore; (exit $rc); h_cleanup' EXIT
if ! echo 0 >"$PARAM" 2>/dev/null; then
	echo "SKIP: cannot write $PARAM (read-only sysfs in a container?)"
	exit 77
fi

# served LOG: how many requests the daemon says came over the ring.
served() {
	sed -n 's/.*uring: \([0-9]*\) requests came over io_uring.*/\1/p' "$1" | tail -n 1
}

h_setup 2 1G
h_log "enable_uring off: -o uring is refused in one line"
h_mount_fails "$(h_devspec "${IMGS[@]}")" uring
h_expect_one_line "$FAIL_OUT" "enable_uring" "-o uring with enable_uring off"

h_log "transport=auto with enable_uring off: mounts, served over /dev/fuse"
h_mount "" transport=auto
echo auto-dev >"$MNT/t" && [[ $(cat "$MNT/t") == auto-dev ]] || h_fail "I/O on transport=auto"
h_umount
grep -q "uring: [0-9]* queues" "$DAEMON_LOG" && h_fail "transport=auto set up a ring while off"
grep -q "requests go over /dev/fuse" "$DAEMON_LOG" ||
	h_fail "transport=auto did not say it fell back to /dev/fuse"
h_mount_fails "$(h_devspec "${IMGS[@]}")" transport=ring
h_expect_one_line "$FAIL_OUT" "expected dev, uring or auto" "-o transport=ring"

echo 1 >"$PARAM"
h_log "transport=auto with enable_uring on: the ring"
h_mount "" transport=auto
[[ $(cat "$MNT/t") == auto-dev ]] || h_fail "file lost across transports"
rm "$MNT/t"
h_umount
n=$(served "$DAEMON_LOG")
((${n:-0} > 0)) || h_fail "transport=auto with enable_uring on served nothing over the ring"
h_mount "" transport=dev
h_umount
grep -q "uring: [0-9]* queues" "$DAEMON_LOG" && h_fail "transport=dev set up a ring"

h_mount "" uring
grep -q "uring: 2 queues\|uring: [0-9]* queues" "$DAEMON_LOG" || h_fail "the ring was not set up"
(cd / && "$OPCHECK" "$MNT" all "$T/state") || h_fail "opcheck failed over the ring"
h_remount
"$OPCHECK" "$MNT" post "$T/state" || h_fail "state lost across a remount over the ring"
# The kernel sends requests over the ring only once every queue is
# registered; the few of the check above may all come before that (seen
# once in CI).  Direct writes for up to 2 s more: each one is a request.
for ((i = 0; i < 20; i++)); do
	dd if=/dev/zero of="$MNT/ringcheck" bs=4k count=1 oflag=direct conv=notrunc status=none ||
		h_fail "direct write $i over the ring"
	sleep 0.1
done
rm "$MNT/ringcheck"
h_umount
n=$(served "$DAEMON_LOG")
((${n:-0} > 0)) || h_fail "no request came over io_uring (log: $(tail -n 3 "$DAEMON_LOG"))"
# opcheck's reads and writes complete on lib's threads: their replies go
# to the queue's thread through its eventfd, and the daemon counts them.
handed=$(sed -n 's/.*over io_uring, \([0-9]*\) of them replied on another thread.*/\1/p' \
	"$DAEMON_LOG" | tail -n 1)
((${handed:-0} > 0)) || h_fail "no hand-off of replies counted (log: $(tail -n 3 "$DAEMON_LOG"))"
h_log "the last mount served $n requests over the ring, $handed replied on other threads"

h_log "lazy unmount with writes in flight"
h_mount "" uring
fio --name=lazy --filename="$MNT/lazy" --size=64m --rw=randwrite --bs=4k --direct=1 \
	--ioengine=io_uring --iodepth=32 --numjobs=2 --time_based --runtime=3 \
	--output=/dev/null &
fio_pid=$!
sleep 1
umount -l "$MNT"
wait "$fio_pid" || h_fail "fio failed after the lazy unmount"
for ((i = 0; i < 300; i++)); do
	kill -0 "$DAEMON_PID" 2>/dev/null || break
	sleep 0.1
done
kill -0 "$DAEMON_PID" 2>/dev/null && h_fail "daemon still running 30 s after the lazy unmount"
rc=0
wait "$DAEMON_PID" || rc=$?
DAEMON_PID=""
rm -f "$T/daemon.pid"
((rc == 0)) || { h_dump_log; h_fail "daemon exited $rc after the lazy unmount"; }
h_check_log "$DAEMON_LOG" || { h_dump_log; exit 1; }

h_log "kill -9 with fsyncing writers in flight"
for round in 0 1 2; do
	h_mount "" uring
	"$KILLWRITER" write "$MNT/k$round" "$T/ack.$round" "$((round + 7))" 2>/dev/null &
	w=$!
	sleep "0.$((round * 3 + 3))"
	h_crash
	wait "$w" || true
	h_is_mounted "$MNT" && h_fail "dead mount still present after the kill"
	h_mount "" uring
	for ((r = 0; r <= round; r++)); do
		"$KILLWRITER" check "$MNT/k$r" "$T/ack.$r" "$((r + 7))" >/dev/null ||
			h_fail "records acknowledged before the kill -9 of round $round lost (file k$r)"
	done
	h_umount
done
echo "uring: refused when off; opcheck, remount, lazy unmount and kill -9 over the ring pass"
