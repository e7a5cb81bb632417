#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: chattr and lsattr (FS_IOC_GETFLAGS/SETFLAGS, and xfs_io's
# FS_IOC_FSGETXATTR/FSSETXATTR): immutable and append-only are kept and
# enforced (the kernel leaves that to a FUSE server).  An immutable file
# refuses every open for writing, truncate, chmod, chown, touch, setfattr,
# rm, mv and ln, and keeps its data; an append-only one takes appends
# only; an immutable directory takes no new name and loses none, an
# append-only one takes new names and loses none.  The flags survive a
# remount and a kill -9 (they are logged), come off again, and a user
# without CAP_LINUX_IMMUTABLE cannot set them on a file it owns but can set
# nodump.  Before this every chattr failed ("Inappropriate ioctl").
source "$(dirname "$0")/harness.sh"

command -v chattr >/dev/null && command -v lsattr >/dev/null ||
	{ echo "SKIP: chattr/lsattr (e2fsprogs) are not installed"; exit 77; }
h_setup 2 128M
h_mount
echo data >"$MNT/f"
mkdir "$MNT/d"
echo x >"$MNT/d/in"

refused() {	# refused WHAT CMD...: CMD must fail with EPERM
	local what=$1 out
	shift
	if out=$("$@" 2>&1); then
		h_fail "$what succeeded on a flagged inode"
	fi
	[[ $out == *"Operation not permitted"* ]] || h_fail "$what: '$out', not EPERM"
}
flags() { lsattr -d "$1" | cut -c1-22; }

chattr +i "$MNT/f" || h_fail "chattr +i failed"
[[ $(flags "$MNT/f") == ----i----------------- ]] || h_fail "lsattr after +i: $(flags "$MNT/f")"
refused "append" sh -c "echo more >>'$MNT/f'"
refused "overwrite" sh -c "echo new >'$MNT/f'"
refused "truncate" truncate -s 0 "$MNT/f"
refused "chmod" chmod 600 "$MNT/f"
refused "chown" chown 1:1 "$MNT/f"
refused "touch" touch "$MNT/f"
refused "setfattr" setfattr -n user.x -v 1 "$MNT/f"
refused "rm" rm -f "$MNT/f"
refused "mv" mv "$MNT/f" "$MNT/g"
refused "ln" ln "$MNT/f" "$MNT/h"
refused "fallocate" fallocate -l 1M -n "$MNT/f"
[[ $(cat "$MNT/f") == data ]] || h_fail "the immutable file changed"

chattr -i +a "$MNT/f" || h_fail "chattr -i +a failed"
echo more >>"$MNT/f" || h_fail "an append to an append-only file failed"
refused "overwrite (+a)" sh -c "echo new >'$MNT/f'"
refused "open O_RDWR (+a)" python3 -c "import os; os.open('$MNT/f', os.O_RDWR)"
refused "truncate (+a)" truncate -s 0 "$MNT/f"
refused "rm (+a)" rm -f "$MNT/f"
[[ $(cat "$MNT/f") == $'data\nmore' ]] || h_fail "the append-only file reads $(cat "$MNT/f")"
if command -v xfs_io >/dev/null; then
	xfs_io -r -c lsattr "$MNT/f" | grep -q '^-*a' ||
		h_fail "xfs_io lsattr does not show append-only: $(xfs_io -r -c lsattr "$MNT/f" 2>&1)"
fi

chattr +i "$MNT/d" || h_fail "chattr +i on a directory failed"
refused "create in an immutable directory" touch "$MNT/d/new"
refused "rm in an immutable directory" rm -f "$MNT/d/in"
chattr -i +a "$MNT/d"
touch "$MNT/d/new" || h_fail "create in an append-only directory failed"
refused "rm in an append-only directory" rm -f "$MNT/d/in"
refused "mv out of an append-only directory" mv "$MNT/d/in" "$MNT/in2"

# Logged: once committed a kill -9 keeps them, and so does a remount.
"$CTL" sync "$MNT" >/dev/null || h_fail "twinfs-ctl sync failed"
h_crash
h_mount
[[ $(flags "$MNT/f") == -----a---------------- ]] || h_fail "after kill -9: $(flags "$MNT/f")"
[[ $(flags "$MNT/d") == -----a---------------- ]] || h_fail "after kill -9 (dir): $(flags "$MNT/d")"
h_remount
refused "rm (+a) after remount" rm -f "$MNT/f"
chattr -a "$MNT/f" "$MNT/d" || h_fail "chattr -a failed"
rm "$MNT/f" "$MNT/d/in" || h_fail "rm after the flags came off failed"

# The kernel's rule: CAP_LINUX_IMMUTABLE for +i/+a, ownership for the rest.
if command -v setpriv >/dev/null; then
	h_umount
	h_mount "" allow_other
	chmod 755 "$T"
	touch "$MNT/mine" && chown 65534:65534 "$MNT/mine"
	refused "chattr +i without CAP_LINUX_IMMUTABLE" \
		setpriv --reuid=65534 --regid=65534 --clear-groups chattr +i "$MNT/mine"
	setpriv --reuid=65534 --regid=65534 --clear-groups chattr +d "$MNT/mine" ||
		h_fail "the owner could not set nodump"
	[[ $(flags "$MNT/mine") == ------d--------------- ]] || h_fail "nodump: $(flags "$MNT/mine")"
	out=$(chattr +C "$MNT/mine" 2>&1) && h_fail "chattr +C, a flag twinfs does not keep, succeeded"
	[[ $out == *"not supported"* ]] || h_fail "chattr +C: '$out', not EOPNOTSUPP"
	chmod 700 "$T"
else
	echo "chattr: the unprivileged part skipped: no setpriv"
fi
h_umount
h_need_fsck
h_fsck 0 -n "${IMGS[@]}"
echo "chattr: immutable and append-only kept and enforced, through kill -9 and remount"
