#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: FUSE_HANDLE_KILLPRIV_V2 and what it leaves to the daemon.
# With it (the default) a file written by 64 write(2) calls costs at most
# two GETXATTRs of security.capability (counted in the -o debug log: the
# kernel checks a new inode once, then marks it S_NOSEC); with
# -o nokillpriv_v2 the kernel asks before every write(2).  On both mounts:
# a write by a user without CAP_FSETID clears suid (and sgid with group
# execute), buffered and O_DIRECT; root's writes keep them, but not
# without CAP_FSETID, and a user given CAP_FSETID keeps them (the kernel
# says which in the WRITE, fuseio.c); and every
# write, root's too, removes security.capability, also O_DIRECT and
# O_DSYNC writes (direct opens, which the kernel leaves to the daemon),
# truncate, open(O_TRUNC), fallocate and chown; a chown by its owner clears
# suid/sgid of a fifo and a device node too.  perms.sh has the rest of
# the suid/sgid rules, as ordinary users.
source "$(dirname "$0")/harness.sh"

command -v setcap >/dev/null && command -v getcap >/dev/null || h_skip "setcap/getcap missing"
command -v setpriv >/dev/null || h_skip "setpriv missing"
# -o debug prints every reply, failed lookups (ENODATA) included.
LOG_ALLOW='unique: [0-9]+, error: '
NOBODY=65534
chmod 0755 "$T"	# uid 65534 reaches the mount point
h_setup 2 256M

# nwrites_getxattr FILE: GETXATTR requests for FILE's inode while python
# writes it with 64 write(2) calls.
nwrites_getxattr() {
	local ino from
	from=$(wc -l <"$DAEMON_LOG")
	python3 - "$1" <<'EOF' || h_fail "write loop failed"
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
for i in range(64):
    os.write(fd, b"x" * 4096)
os.close(fd)
EOF
	ino=$(stat -c %i "$1")
	tail -n +"$((from + 1))" "$DAEMON_LOG" | grep -a "opcode: GETXATTR .*nodeid: $ino," | wc -l
}

# expect_mode PATH MODE WHAT
expect_mode() {
	local m
	m=$(stat -c %A "$1")
	[[ $m == "$2" ]] || h_fail "$3: $1 has mode $m, expected $2"
}

# nocaps WHAT CMD...: set a capability on $M/c, run CMD as root, expect it gone.
nocaps() {
	local what=$1 c
	shift
	setcap cap_net_raw+ep "$M/c" || h_fail "setcap failed"
	"$@" || h_fail "$what failed"
	c=$(getcap "$M/c")
	[[ -z $c ]] || h_fail "$what ($MOUNT_OPTS) kept security.capability: $c"
}

# as_nobody CMD...: run CMD as uid/gid 65534 without capabilities.
as_nobody() { setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups "$@"; }

checks() {
	M=$MNT
	chmod 0777 "$M"
	h_log "security.capability ($MOUNT_OPTS)"
	echo data >"$M/c"
	nocaps "buffered write" sh -c 'echo b >>"$1"' sh "$M/c"
	nocaps "O_DIRECT write" dd if=/dev/zero of="$M/c" bs=4096 count=1 oflag=direct conv=notrunc status=none
	nocaps "O_DSYNC write" dd if=/dev/zero of="$M/c" bs=4096 count=1 oflag=dsync conv=notrunc status=none
	nocaps "truncate" truncate -s 100 "$M/c"
	nocaps "open(O_TRUNC)" sh -c ': >"$1"' sh "$M/c"
	nocaps "fallocate" fallocate -l 16384 "$M/c"
	nocaps "chown" chown $NOBODY "$M/c"
	chown 0 "$M/c"
	# Reading, or setting times, keeps it.
	setcap cap_net_raw+ep "$M/c"
	cat "$M/c" >/dev/null
	touch "$M/c"
	[[ -n $(getcap "$M/c") ]] || h_fail "read and utimes removed security.capability"

	h_log "suid/sgid ($MOUNT_OPTS)"
	echo s >"$M/s"
	for how in buffered direct; do
		local w=(sh -c 'echo b >>"$1"' sh "$M/s")
		[[ $how == direct ]] &&
			w=(dd if=/dev/zero of="$M/s" bs=4096 count=1 oflag=direct conv=notrunc status=none)
		chmod 6777 "$M/s"
		as_nobody "${w[@]}" || h_fail "$how write by uid $NOBODY failed"
		expect_mode "$M/s" -rwxrwxrwx "$how write by uid $NOBODY ($MOUNT_OPTS)"
		# sgid without group execute: kept for a writer in the group.
		chmod 2766 "$M/s"
		chgrp $NOBODY "$M/s"
		as_nobody "${w[@]}" || h_fail "$how write to 2766 failed"
		expect_mode "$M/s" -rwxrwSrw- "$how write to 2766 by a member of its group ($MOUNT_OPTS)"
		chgrp 0 "$M/s"
		chmod 6777 "$M/s"
		"${w[@]}" || h_fail "$how write by root failed"
		expect_mode "$M/s" -rwsrwsrwx "$how write by root ($MOUNT_OPTS)"
	done
	# CAP_FSETID decides, not the uid: the kernel says which in the
	# request (WRITE's FUSE_WRITE_KILL_SUIDGID, 7.33 on).
	for how in buffered direct; do
		local w=(sh -c 'echo b >>"$1"' sh "$M/s")
		[[ $how == direct ]] &&
			w=(dd if=/dev/zero of="$M/s" bs=4096 count=1 oflag=direct conv=notrunc status=none)
		chmod 6777 "$M/s"
		setpriv --inh-caps=-fsetid --bounding-set=-fsetid "${w[@]}" ||
			h_fail "$how write by root without CAP_FSETID failed"
		expect_mode "$M/s" -rwxrwxrwx "$how write by root without CAP_FSETID ($MOUNT_OPTS)"
		[[ $how == direct ]] || continue
		chmod 6777 "$M/s"
		as_nobody --inh-caps=+fsetid --ambient-caps=+fsetid "${w[@]}" ||
			h_fail "$how write by uid $NOBODY with CAP_FSETID failed"
		expect_mode "$M/s" -rwsrwsrwx "$how write by uid $NOBODY with CAP_FSETID ($MOUNT_OPTS)"
	done
	# open(O_TRUNC) says it (FUSE_OPEN_KILL_SUIDGID) only under
	# FUSE_HANDLE_KILLPRIV_V2; without it root stands for CAP_FSETID.
	if [[ $MOUNT_OPTS != *nokillpriv_v2* ]]; then
		chmod 6777 "$M/s"
		setpriv --inh-caps=-fsetid --bounding-set=-fsetid sh -c ': >"$1"' sh "$M/s" ||
			h_fail "open(O_TRUNC) by root without CAP_FSETID failed"
		expect_mode "$M/s" -rwxrwxrwx "open(O_TRUNC) by root without CAP_FSETID ($MOUNT_OPTS)"
	fi
	for t in "truncate -s 10" "sh -c :>\$0"; do
		chmod 6777 "$M/s"
		# shellcheck disable=SC2086
		as_nobody $t "$M/s" || h_fail "$t by uid $NOBODY failed"
		expect_mode "$M/s" -rwxrwxrwx "$t by uid $NOBODY ($MOUNT_OPTS)"
	done
	# chown kills suid (and sgid with group execute) on every type but
	# directories: a fifo's and a device node's too (pjdfstest chown/00).
	mkfifo "$M/p" && mknod "$M/n" c 1 3 || h_fail "mkfifo/mknod failed"
	for n in p n; do
		chown $NOBODY:$NOBODY "$M/$n"
		chmod 6555 "$M/$n"
		as_nobody chgrp $NOBODY "$M/$n" || h_fail "chgrp of $n by its owner failed"
		[[ $(stat -c %a "$M/$n") == 555 ]] ||
			h_fail "chgrp by uid $NOBODY left $n at mode $(stat -c %a "$M/$n") ($MOUNT_OPTS)"
		chmod 6555 "$M/$n"
		chown 0 "$M/$n" || h_fail "chown of $n by root failed"
		[[ $(stat -c %a "$M/$n") == 555 ]] ||
			h_fail "chown by root left $n at mode $(stat -c %a "$M/$n") ($MOUNT_OPTS)"
	done
	rm -f "$M/p" "$M/n"
}

# The daemon logs INIT's flags after its reply, which the mount may beat.
init_logged() {
	local i
	for ((i = 0; i < 100; i++)); do
		grep -aq "HANDLE_KILLPRIV_V2 o" "$DAEMON_LOG" && return
		sleep 0.1
	done
}

h_mount "" debug,allow_other
init_logged
grep -aq "HANDLE_KILLPRIV_V2 on" "$DAEMON_LOG" || h_skip "the kernel does not offer FUSE_HANDLE_KILLPRIV_V2"
n_v2=$(nwrites_getxattr "$MNT/w")
h_log "default mount: $n_v2 GETXATTR for 64 write(2) calls"
((n_v2 <= 2)) || h_fail "$n_v2 GETXATTR for 64 write(2) calls under FUSE_HANDLE_KILLPRIV_V2"
checks
h_umount

h_mount "" debug,allow_other,nokillpriv_v2
init_logged
grep -aq "HANDLE_KILLPRIV_V2 off" "$DAEMON_LOG" || h_fail "nokillpriv_v2: the kernel still got the flag"
n_v1=$(nwrites_getxattr "$MNT/w")
h_log "nokillpriv_v2: $n_v1 GETXATTR for 64 write(2) calls"
((n_v1 >= 32)) || h_fail "only $n_v1 GETXATTR for 64 write(2) calls without FUSE_HANDLE_KILLPRIV_V2: is the option ignored?"
checks
h_umount
echo "killpriv: GETXATTR per 64 writes: $n_v2 (killpriv_v2), $n_v1 (nokillpriv_v2); caps and suid/sgid rules on both"
