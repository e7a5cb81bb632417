#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# What a mirror leg that is not a local disk costs (README, "Beyond one
# machine").  Two twinfs mirrors are compared, three interleaved runs each,
# medians printed:
#   local:  two direct-I/O loop devices on tmpfs files
#   remote: one such loop device + one NBD device served by nbd-server on
#           127.0.0.1 (apt-get install nbd-server nbd-client; the kernel
#           needs the nbd driver)
# When the kernel has no nbd driver (no /dev/nbd0 and no modprobe), the second
# leg is an image file on the same tmpfs instead (twinfs's pread/pwrite
# backend path: a leg that is not a direct-I/O block device), and the script
# says so.  Workloads (fio): 4k random O_DIRECT writes, iodepth 16, and a
# 1 MiB sequential buffered write with a final fsync.  Root only; cleans up
# its mounts, loop and nbd devices and the nbd-server by pid.
set -euo pipefail
BUILD=${BUILD:-$(dirname "$0")/../build}
RUNTIME=${RUNTIME:-8}
SIZE_MB=${SIZE_MB:-1024}
TWINFS=$BUILD/twinfs
MKFS=$BUILD/mkfs.twinfs
((EUID == 0)) || { echo "run as root" >&2; exit 1; }
command -v fio >/dev/null || { echo "fio is needed" >&2; exit 1; }

D=$(mktemp -d /tmp/twinfs-leg.XXXXXX)
mkdir -p "$D/tmpfs" "$D/mnt"
mount -t tmpfs -o size=$((3 * SIZE_MB + 256))m tmpfs "$D/tmpfs"
LOOPS=() DPID="" NBDPID="" NBDDEV=""
cleanup() {
	set +e
	if [[ -n $DPID ]]; then
		fusermount3 -u "$D/mnt" 2>/dev/null
		while kill -0 "$DPID" 2>/dev/null; do sleep 0.1; done
	fi
	[[ -n $NBDDEV ]] && nbd-client -d "$NBDDEV" >/dev/null 2>&1
	[[ -n $NBDPID ]] && kill "$NBDPID" 2>/dev/null
	for l in "${LOOPS[@]}"; do losetup -d "$l"; done
	umount "$D/tmpfs"
	rm -rf "$D"
}
trap cleanup EXIT

if [[ ! -e /dev/nbd0 ]] && command -v modprobe >/dev/null; then
	modprobe nbd 2>/dev/null || true
fi
if [[ -e /dev/nbd0 ]] && command -v nbd-server >/dev/null && command -v nbd-client >/dev/null; then
	MODE=nbd
else
	MODE=file
	echo "no nbd driver in this kernel ($(uname -r)): /dev/nbd0 absent" \
		"$(command -v modprobe >/dev/null || echo '(no modprobe, no modules)')"
	echo "comparing a second loop leg with an image-file leg instead"
fi

# leg_local NAME: a fresh zeroed tmpfs file behind a direct-I/O loop
# device, in LEG (not echoed: LOOPS must be set in this shell).
leg_local() {
	truncate -s 0 "$D/tmpfs/$1.img"
	truncate -s "${SIZE_MB}M" "$D/tmpfs/$1.img"
	LEG=$(losetup --direct-io=on -f --show "$D/tmpfs/$1.img")
	LOOPS+=("$LEG")
}
leg_remote() {
	truncate -s 0 "$D/tmpfs/r.img"
	truncate -s "${SIZE_MB}M" "$D/tmpfs/r.img"
	if [[ $MODE == file ]]; then
		LEG=$D/tmpfs/r.img
		return
	fi
	if [[ -z $NBDPID ]]; then
		cat >"$D/nbd.conf" <<-EOF
		[generic]
		listenaddr = 127.0.0.1
		port = 10809
		[leg]
		exportname = $D/tmpfs/r.img
		flush = true
		EOF
		nbd-server -C "$D/nbd.conf" -p "$D/nbd.pid" -d &
		NBDPID=$!
		sleep 0.5
	fi
	NBDDEV=/dev/nbd0
	nbd-client 127.0.0.1 10809 "$NBDDEV" -N leg -b 4096 >/dev/null
	LEG=$NBDDEV
}
free_legs() {
	for l in "${LOOPS[@]}"; do losetup -d "$l"; done
	LOOPS=()
	if [[ -n $NBDDEV ]]; then
		nbd-client -d "$NBDDEV" >/dev/null 2>&1 || true
		NBDDEV=""
	fi
}

run_one() {	# config name -> RES="randw_iops seqw_mibs"
	local a b
	leg_local a
	a=$LEG
	if [[ $1 == local ]]; then leg_local b; else leg_remote; fi
	b=$LEG
	"$MKFS" -f "$a" "$b" >/dev/null
	"$TWINFS" -f "$a:$b" "$D/mnt" >"$D/daemon.log" 2>&1 &
	DPID=$!
	for _ in $(seq 100); do mountpoint -q "$D/mnt" && break; sleep 0.05; done
	local r s
	r=$(fio --name=r --filename="$D/mnt/r" --size=256M --bs=4k --rw=randwrite --direct=1 \
		--ioengine=libaio --iodepth=16 --runtime="$RUNTIME" --time_based \
		--output-format=terse --terse-version=3 | awk -F';' '{print $49}')
	s=$(fio --name=s --filename="$D/mnt/s" --size=$((SIZE_MB / 2))M --bs=1M --rw=write \
		--end_fsync=1 --ioengine=psync --output-format=terse --terse-version=3 |
		awk -F';' '{printf "%.0f", $48 / 1024}')
	fusermount3 -u "$D/mnt"
	while kill -0 "$DPID" 2>/dev/null; do sleep 0.1; done
	DPID=""
	free_legs
	RES="$r $s"
}

declare -A R S
for i in 1 2 3; do
	for c in local remote; do
		run_one "$c"
		read -r r s <<<"$RES"
		R[$c]+="$r "
		S[$c]+="$s "
		echo "run $i $c: 4k randwrite ${r} IOPS, 1M seq write ${s} MiB/s"
	done
done
median() { tr ' ' '\n' | grep . | sort -n | sed -n 2p; }
for c in local remote; do
	echo "median $c ($([[ $c == local ]] && echo "2 loop legs" || echo "loop + $MODE leg")):" \
		"4k randwrite $(median <<<"${R[$c]}") IOPS, 1M seq write $(median <<<"${S[$c]}") MiB/s"
done
