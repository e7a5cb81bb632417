#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: Permissions under default_permissions (the daemon always mounts with it),
# checked through the kernel as three ordinary users: A owns the files, B is
# in A's group, C is neither.  Owner/group/other modes on files and
# directories, sticky directories, setgid directories passing their group
# (and the bit to subdirectories), suid/sgid cleared by the kernel's rules
# (sgid also without group execute for a user outside the file's group) on
# a write by anyone but root (buffered, O_DIRECT, O_DSYNC; also a second
# write of an open file whose bits came back), fallocate, truncate
# and chown (the daemon asks for FUSE_HANDLE_KILLPRIV_V2), the utimes
# rules, chmod/chown rules; then allow_other: without it nobody but the
# mounter enters (root included), with it (user_allow_other in
# /etc/fuse.conf for a user's mount) others do.
source "$(dirname "$0")/harness.sh"
source "$(dirname "$0")/userlib.sh"

A=twinfs-it-pa
B=twinfs-it-pb
C=twinfs-it-pc
u_adduser "$A"
u_adduser "$B"
u_adduser "$C"
usermod -a -G "$A" "$B"
u_need_fusermount

h_setup 2 256M
h_mount "" allow_other
chmod 0777 "$MNT"
M=$MNT

# expect_mode PATH MODE (as ls shows it, e.g. -rwxr-xr-x) WHAT
expect_mode() {
	local m
	m=$(stat -c %A "$1")
	[[ $m == "$2" ]] || h_fail "$3: $1 has mode $m, expected $2"
}

# ---- file modes: owner, group, other ------------------------------------------
h_log "file modes"
u_ok "$A" "create f" sh -c 'echo data >"$1/f" && chmod 0640 "$1/f"' sh "$M"
u_ok "$A" "owner reads 0640" cat "$M/f"
u_ok "$A" "owner writes 0640" sh -c 'echo more >>"$1/f"' sh "$M"
u_ok "$B" "group reads 0640" cat "$M/f"
u_denied "$B" "group writes 0640" "Permission denied" sh -c 'echo x >>"$1/f"' sh "$M"
u_denied "$C" "other reads 0640" "Permission denied" cat "$M/f"
# The first class that matches decides: group bits deny B even though
# other would allow.
u_ok "$A" "chmod 0604" chmod 0604 "$M/f"
u_denied "$B" "group reads 0604" "Permission denied" cat "$M/f"
u_ok "$C" "other reads 0604" cat "$M/f"
u_ok "$A" "chmod 0400" chmod 0400 "$M/f"
u_denied "$A" "owner writes 0400" "Permission denied" sh -c 'echo x >>"$1/f"' sh "$M"
u_ok root "root writes 0400" sh -c 'echo root >>"$1/f"' sh "$M"
u_ok "$A" "create x" sh -c 'printf "#!/bin/sh\necho ran\n" >"$1/x" && chmod 0750 "$1/x"' sh "$M"
[[ $(u_run "$B" "$M/x") == ran ]] || h_fail "group cannot execute 0750"
u_denied "$C" "other executes 0750" "Permission denied" "$M/x"

# ---- directory modes ------------------------------------------------------------
h_log "directory modes"
u_ok "$A" "mkdir d 0750" sh -c 'mkdir -m 0750 "$1/d" && echo k >"$1/d/known" && chmod 0644 "$1/d/known"' sh "$M"
u_ok "$B" "group lists 0750" ls "$M/d"
u_ok "$B" "group reads in 0750" cat "$M/d/known"
u_denied "$B" "group creates in 0750" "Permission denied" touch "$M/d/new"
u_denied "$B" "group removes in 0750" "Permission denied" rm -f "$M/d/known"
u_denied "$C" "other lists 0750" "Permission denied" ls "$M/d"
u_denied "$C" "other reads in 0750" "Permission denied" cat "$M/d/known"
u_ok "$A" "chmod d 0711" chmod 0711 "$M/d"
u_denied "$C" "other lists 0711" "Permission denied" ls "$M/d"
u_ok "$C" "other reads a known name in 0711" cat "$M/d/known"
u_ok "$A" "chmod d 0770" chmod 0770 "$M/d"
u_ok "$B" "group creates in 0770" touch "$M/d/bfile"
u_ok "$B" "group renames in 0770" mv "$M/d/bfile" "$M/d/bfile2"
u_ok "$B" "group removes A's file in 0770" rm -f "$M/d/known"
u_denied "$C" "other creates in 0770" "Permission denied" touch "$M/d/cfile"

# ---- sticky directory -------------------------------------------------------------
h_log "sticky directory"
mkdir -m 1777 "$M/tmp"
expect_mode "$M/tmp" drwxrwxrwt "mkdir -m 1777"
u_ok "$A" "create in sticky" sh -c 'echo a >"$1/tmp/afile" && chmod 0666 "$1/tmp/afile"' sh "$M"
u_ok "$B" "create own in sticky" touch "$M/tmp/bfile"
u_denied "$B" "remove A's file in sticky" "Operation not permitted" rm -f "$M/tmp/afile"
u_denied "$B" "rename A's file in sticky" "Operation not permitted" mv "$M/tmp/afile" "$M/tmp/stolen"
u_denied "$C" "rename over B's file in sticky" "Operation not permitted" \
	sh -c 'touch "$1/tmp/cfile" && mv -f "$1/tmp/cfile" "$1/tmp/bfile"' sh "$M"
u_ok "$B" "write A's 0666 file in sticky" sh -c 'echo b >>"$1/tmp/afile"' sh "$M"
u_ok "$B" "remove own in sticky" rm "$M/tmp/bfile"
u_ok "$A" "remove own in sticky" rm "$M/tmp/afile"
u_ok "$C" "create in sticky" touch "$M/tmp/cfile2"
rm "$M/tmp/cfile2" || h_fail "root cannot remove C's file in a sticky directory"
# The directory's owner may remove anything in it.
u_ok "$A" "mkdir sticky owned by A" sh -c 'mkdir -m 1777 "$1/atmp"' sh "$M"
u_ok "$C" "create in A's sticky" touch "$M/atmp/c"
u_ok "$A" "sticky dir owner removes C's file" rm -f "$M/atmp/c"

# ---- setgid directory ----------------------------------------------------------------
h_log "setgid directory"
u_ok "$A" "mkdir sg 2775" sh -c 'mkdir "$1/sg" && chmod 2775 "$1/sg"' sh "$M"
expect_mode "$M/sg" drwxrwsr-x "chmod 2775"
u_ok "$B" "B creates in sg" sh -c 'echo b >"$1/sg/bfile" && mkdir "$1/sg/bdir" && mkdir "$1/sg/bdir/deeper"' sh "$M"
[[ $(stat -c %U:%G "$M/sg/bfile") == "$B:$A" ]] ||
	h_fail "file in setgid dir: $(stat -c %U:%G "$M/sg/bfile"), expected $B:$A"
[[ $(stat -c %U:%G "$M/sg/bdir") == "$B:$A" ]] ||
	h_fail "dir in setgid dir: $(stat -c %U:%G "$M/sg/bdir"), expected $B:$A"
expect_mode "$M/sg/bdir" drwxr-sr-x "subdirectory of a setgid dir"
[[ $(stat -c %G "$M/sg/bdir/deeper") == "$A" ]] || h_fail "setgid not inherited two levels down"
expect_mode "$M/sg/bdir/deeper" drwxr-sr-x "sub-subdirectory of a setgid dir"
# A plain directory passes the creator's group.
u_ok "$B" "B creates in plain dir" touch "$M/tmp/plain"
[[ $(stat -c %G "$M/tmp/plain") == "$B" ]] || h_fail "file in a plain dir did not get the creator's group"
# Survives a remount.
h_remount
[[ $(stat -c %G "$M/sg/bdir/deeper") == "$A" ]] || h_fail "setgid group lost at remount"
expect_mode "$M/sg/bdir" drwxr-sr-x "setgid subdir after remount"

# ---- suid/sgid cleared --------------------------------------------------------------
h_log "suid/sgid cleared on write, truncate, chown"
u_ok "$A" "create s" sh -c 'echo s >"$1/s"' sh "$M"
privs() { u_ok "$A" "chmod $1 s" chmod "$1" "$M/s"; }
privs 6777
u_ok "$B" "buffered write" sh -c 'echo b >>"$1/s"' sh "$M"
expect_mode "$M/s" -rwxrwxrwx "buffered write by a non-owner"
privs 6777
u_ok "$B" "O_DIRECT write" dd if=/dev/zero of="$M/s" bs=4096 count=1 oflag=direct conv=notrunc status=none
expect_mode "$M/s" -rwxrwxrwx "O_DIRECT write by a non-owner"
privs 6777
u_ok "$A" "owner writes" sh -c 'echo a >>"$1/s"' sh "$M"
expect_mode "$M/s" -rwxrwxrwx "buffered write by the (unprivileged) owner"
privs 6777
u_ok "$A" "owner O_DIRECT write" dd if=/dev/zero of="$M/s" bs=4096 count=1 oflag=direct conv=notrunc status=none
expect_mode "$M/s" -rwxrwxrwx "O_DIRECT write by the owner"
privs 6777
u_ok "$B" "truncate" truncate -s 100 "$M/s"
expect_mode "$M/s" -rwxrwxrwx "truncate by a non-owner"
# open(O_TRUNC): the daemon truncates (atomic_o_trunc), so it clears them.
privs 6777
u_ok "$B" "open O_TRUNC" sh -c ': >"$1/s"' sh "$M"
expect_mode "$M/s" -rwxrwxrwx "open(O_TRUNC) by a non-owner"
privs 6777
u_ok "$A" "owner open O_TRUNC" sh -c ': >"$1/s"' sh "$M"
expect_mode "$M/s" -rwxrwxrwx "open(O_TRUNC) by the (unprivileged) owner"
# sgid without group execute is not a privilege bit: kept.
privs 2666
u_ok "$B" "write to 2666" sh -c 'echo b >>"$1/s"' sh "$M"
expect_mode "$M/s" -rw-rwSrw- "write to a sgid file without group x"
privs 2666
u_ok "$B" "O_DIRECT write to 2666" dd if=/dev/zero of="$M/s" bs=4096 count=1 oflag=direct conv=notrunc status=none
expect_mode "$M/s" -rw-rwSrw- "O_DIRECT write to a sgid file without group x"
# A writer outside the file's group (and without CAP_FSETID) loses sgid
# even without group execute (the kernel's setattr_should_drop_sgid, as
# tmpfs does): every path that changes the data.
for m in 6666 2666; do
	privs $m
	u_ok "$C" "write to $m" sh -c 'echo c >>"$1/s"' sh "$M"
	expect_mode "$M/s" -rw-rw-rw- "buffered write to $m by a user outside the group"
	privs $m
	u_ok "$C" "O_DIRECT write to $m" dd if=/dev/zero of="$M/s" bs=4096 count=1 oflag=direct conv=notrunc status=none
	expect_mode "$M/s" -rw-rw-rw- "O_DIRECT write to $m by a user outside the group"
	for fa in "-l 16384" "-n -o 65536 -l 4096" "-p -o 0 -l 4096" "-z -o 0 -l 4096" "-z -n -o 0 -l 4096"; do
		privs $m
		# shellcheck disable=SC2086
		u_ok "$C" "fallocate $fa on $m" fallocate $fa "$M/s"
		expect_mode "$M/s" -rw-rw-rw- "fallocate $fa on $m by a user outside the group"
	done
	privs $m
	u_ok "$C" "truncate $m" truncate -s 100 "$M/s"
	expect_mode "$M/s" -rw-rw-rw- "truncate of $m by a user outside the group"
	privs $m
	u_ok "$C" "open O_TRUNC $m" sh -c ': >"$1/s"' sh "$M"
	expect_mode "$M/s" -rw-rw-rw- "open(O_TRUNC) of $m by a user outside the group"
done
# O_DSYNC opens are direct opens (no page cache): the daemon clears them.
for m in 6666 2666; do
	privs $m
	u_ok "$C" "O_DSYNC write to $m" dd if=/dev/zero of="$M/s" bs=4096 count=1 oflag=dsync conv=notrunc status=none
	expect_mode "$M/s" -rw-rw-rw- "O_DSYNC write to $m by a user outside the group"
done
# With FUSE_HANDLE_KILLPRIV_V2 the mount is SB_NOSEC: the kernel stops
# checking an inode once a write found nothing to clear, until its
# attributes change.  A writer keeps its file open across root's chmod:
# its next write must clear the new bits.
privs 0666
u_ok "$B" "write, wait, write" sh -c 'exec 3>>"$1/s"; echo 1 >&3; sleep 2; echo 2 >&3' sh "$M" &
upid=$!
sleep 1
chmod 6777 "$M/s"
wait "$upid" || h_fail "the writer across chmod failed"
expect_mode "$M/s" -rwxrwxrwx "second write of an open file after chmod 6777"
# In the group: only suid goes.
privs 6666
u_ok "$B" "write to 6666" sh -c 'echo b >>"$1/s"' sh "$M"
expect_mode "$M/s" -rw-rwSrw- "write to 6666 by a member of the group"
privs 6666
u_ok "$B" "fallocate 6666" fallocate -l 8192 "$M/s"
expect_mode "$M/s" -rw-rwSrw- "fallocate on 6666 by a member of the group"
# root (CAP_FSETID) keeps them.
privs 6777
echo r >>"$M/s"
expect_mode "$M/s" -rwsrwsrwx "buffered write by root"
dd if=/dev/zero of="$M/s" bs=4096 count=1 oflag=direct conv=notrunc status=none
expect_mode "$M/s" -rwsrwsrwx "O_DIRECT write by root"
: >"$M/s"
expect_mode "$M/s" -rwsrwsrwx "open(O_TRUNC) by root"
# chown and chgrp clear them, even root's.
chown "$B" "$M/s"
expect_mode "$M/s" -rwxrwxrwx "chown by root"
chown "$A" "$M/s"
privs 6777
u_ok "$A" "chgrp to own group" chgrp "$A" "$M/s"
expect_mode "$M/s" -rwxrwxrwx "chgrp by the owner"
# chgrp by an owner outside the old group drops sgid; root's chown keeps
# a sgid without group execute.
chgrp "$C" "$M/s"
u_ok "$A" "chmod 2666 (group C)" chmod 2666 "$M/s"
chmod 2666 "$M/s"
u_ok "$A" "chgrp from C to A" chgrp "$A" "$M/s"
expect_mode "$M/s" -rw-rw-rw- "chgrp by an owner outside the old group"
chmod 2666 "$M/s"
chown "$B" "$M/s"
expect_mode "$M/s" -rw-rwSrw- "chown of 2666 by root"
chown "$A" "$M/s"
# A non-owner may not set them (or anything else).
u_denied "$B" "chmod of A's file" "Operation not permitted" chmod 6777 "$M/s"
u_denied "$A" "chown to B" "Operation not permitted" chown "$B" "$M/s"
u_denied "$A" "chgrp to a group A is not in" "Operation not permitted" chgrp "$C" "$M/s"
# The owner setting sgid on a file of a group they are not in: dropped.
chgrp "$C" "$M/s"
u_ok "$A" "chmod 2777 (group C)" chmod 2777 "$M/s"
expect_mode "$M/s" -rwxrwxrwx "sgid set by an owner outside the file's group"

# ---- utimes -----------------------------------------------------------------------
h_log "utimes"
u_ok "$A" "create t" sh -c 'echo t >"$1/t" && chmod 0666 "$1/t" && echo u >"$1/u" && chmod 0644 "$1/u"' sh "$M"
u_ok "$A" "owner sets explicit times" touch -d 2001-02-03 "$M/t"
[[ $(stat -c %y "$M/t") == 2001-02-03* ]] || h_fail "owner's explicit mtime not set: $(stat -c %y "$M/t")"
u_denied "$B" "explicit times by a writer" "Operation not permitted" touch -c -d 2002-01-01 "$M/t"
[[ $(stat -c %y "$M/t") == 2001-02-03* ]] || h_fail "a refused utimes changed mtime"
u_ok "$B" "NOW by a writer" touch "$M/t"
[[ $(stat -c %Y "$M/t") -gt $(($(date +%s) - 60)) ]] || h_fail "touch (NOW) by a writer did not set mtime"
u_denied "$C" "NOW without write access" "Permission denied" touch -c "$M/u"
u_denied "$C" "explicit times without write access" "Operation not permitted" touch -c -d 2002-01-01 "$M/u"
touch -d 2003-01-01 "$M/u" || h_fail "root cannot set explicit times"
[[ $(stat -c %y "$M/u") == 2003-01-01* ]] || h_fail "root's explicit mtime not set"

h_umount

# ---- allow_other ----------------------------------------------------------------------
h_log "allow_other"
u_fuse_mode 0666
AT=$T/$A
mkdir "$AT"
chown "$A:$A" "$AT" "$MNT"
u_ok "$A" "images" sh -c 'truncate -s 256M "$1/a.img" "$1/b.img" && "$2" "$1/a.img" "$1/b.img" >/dev/null' sh "$AT" "$MKFS"
SPEC=$AT/a.img:$AT/b.img
TWINFS=$(u_wrapper "$A") h_mount "$SPEC" ""
u_ok "$A" "owner enters" sh -c 'chmod 0755 "$1" && echo a >"$1/pub" && chmod 0644 "$1/pub"' sh "$M"
u_denied "$B" "enter without allow_other" "Permission denied" ls "$M"
u_denied "$C" "read without allow_other" "Permission denied" cat "$M/pub"
[[ $(stat -c %a "$M" 2>&1) != 755 ]] || h_fail "root entered a user's mount without allow_other"
u_ok "$A" "fusermount3 -u" fusermount3 -u "$M"
h_umount
u_user_allow_other off
TWINFS=$(u_wrapper "$A") h_mount_fails "$SPEC" allow_other
grep -q "user_allow_other" <<<"$FAIL_OUT" || h_fail "allow_other refused without naming user_allow_other: $FAIL_OUT"
u_user_allow_other on
TWINFS=$(u_wrapper "$A") h_mount "$SPEC" allow_other
u_ok "$B" "enter with allow_other" ls "$M"
u_ok "$C" "read with allow_other" cat "$M/pub"
u_denied "$C" "write A's 0644 file with allow_other" "Permission denied" sh -c 'echo c >>"$1/pub"' sh "$M"
[[ $(cat "$M/pub") == a ]] || h_fail "root cannot read with allow_other"
u_ok "$A" "fusermount3 -u" fusermount3 -u "$M"
h_umount
echo "perms: modes, sticky, setgid, suid/sgid clearing, utimes, chmod/chown rules and allow_other hold for 3 users"
