#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: POSIX ACLs (on by default; -o noacl turns them off), through
# setfacl/getfacl and the kernel's checks as ordinary users: A owns the
# files, B is named in their ACLs, C is neither.  A named-user entry grants
# B access and the mask restricts it; chmod changes the mask; a default ACL
# is inherited by files and subdirectories, masked by the create mode and
# instead of the umask; without one the umask applies; setting an ACL moves
# the mode; the ACLs and modes survive kill -9 after fsync and a remount,
# and fsck finds the images clean.  With -o noacl setfacl is refused and
# the umask applies as before.  A raw setxattr of an ACL whose named ids
# are unsorted and repeated (the kernel accepts it) reads back the same,
# and fsck -v says it checked the ACLs.
source "$(dirname "$0")/harness.sh"
source "$(dirname "$0")/userlib.sh"

command -v setfacl >/dev/null || h_fail "setfacl is missing (package acl: scripts/deps.sh)"
A=twinfs-it-aa
B=twinfs-it-ab
C=twinfs-it-ac
u_adduser "$A"
u_adduser "$B"
u_adduser "$C"

h_setup 2 256M
h_mount "" allow_other
chmod 0777 "$MNT"
M=$MNT

# as USER UMASK CMD...: CMD as USER under UMASK.
as() {
	local u=$1 m=$2
	shift 2
	u_run "$u" sh -c 'umask "$1"; shift; exec "$@"' sh "$m" "$@"
}
expect_mode() {
	local m
	m=$(stat -c %A "$1")
	[[ $m == "$2" ]] || h_fail "$3: $1 has mode $m, expected $2"
}
# expect_acl PATH LINE WHAT: getfacl PATH shows LINE.
expect_acl() {
	getfacl -p "$1" 2>/dev/null | grep -qxF -- "$2" ||
		h_fail "$3: getfacl $1 lacks '$2': $(getfacl -p "$1" 2>&1 | tr '\n' ' ')"
}

# ---- a named user, the mask, chmod ---------------------------------------------
h_log "named user and mask"
as "$A" 022 sh -c 'echo secret >"$1/f" && chmod 0640 "$1/f"' sh "$M" || h_fail "create f"
u_denied "$B" "B reads 0640 f" "Permission denied" cat "$M/f"
u_ok "$A" "setfacl u:B:rw" setfacl -m "u:$B:rw" "$M/f"
expect_acl "$M/f" "user:$B:rw-" "setfacl u:B:rw"
expect_acl "$M/f" "mask::rw-" "setfacl u:B:rw"
expect_mode "$M/f" "-rw-rw----" "the mask is the group bits"
u_ok "$B" "B reads through its entry" cat "$M/f"
u_ok "$B" "B writes through its entry" sh -c 'echo more >>"$1/f"' sh "$M"
u_denied "$C" "C reads" "Permission denied" cat "$M/f"
u_ok "$A" "setfacl m::r" setfacl -m m::r "$M/f"
expect_mode "$M/f" "-rw-r-----" "mask r"
u_ok "$B" "B reads under mask r" cat "$M/f"
u_denied "$B" "B writes under mask r" "Permission denied" sh -c 'echo x >>"$1/f"' sh "$M"
u_ok "$A" "chmod 0600" chmod 0600 "$M/f"
expect_acl "$M/f" "mask::---" "chmod 0600"
expect_acl "$M/f" "user:$B:rw-	#effective:---" "chmod 0600"
u_denied "$B" "B reads after chmod 0600" "Permission denied" cat "$M/f"
u_ok "$A" "chmod 0660" chmod 0660 "$M/f"
expect_acl "$M/f" "mask::rw-" "chmod 0660"
u_ok "$B" "B writes after chmod 0660" sh -c 'echo again >>"$1/f"' sh "$M"
u_denied "$B" "B may not set the ACL" "Operation not permitted" setfacl -m "u:$B:rwx" "$M/f"
# An ACL the mode says all of is not kept: the mode takes it.
u_ok "$A" "setfacl -b" setfacl -b "$M/f"
[[ -z $(getfattr -n system.posix_acl_access "$M/f" 2>/dev/null) ]] ||
	h_fail "setfacl -b left an access ACL"
u_denied "$B" "B reads after setfacl -b" "Permission denied" cat "$M/f"
u_ok "$A" "setfacl --set u::rwx,g::r,o::-" setfacl --set u::rwx,g::r,o::- "$M/f"
expect_mode "$M/f" "-rwxr-----" "a minimal ACL sets the mode"

# A raw value the kernel's posix_acl_valid accepts with named users out of
# id order and repeated (as tmpfs and ext4 do): stored and read back as
# the kernel hands it on (the object entries' ids as ACL_UNDEFINED_ID).
# USER_OBJ rw, users 2000 r and 1000 r twice, GROUP_OBJ r, MASK r, OTHER
# none: mode 0640.
hx() { printf '%02x%02x%02x%02x' $(($1 & 255)) $(($1 >> 8 & 255)) $(($1 >> 16 & 255)) $(($1 >> 24 & 255)); }
ent() { printf '%s%s' "$(hx $(($1 | $2 << 16)))" "$(hx "$3")"; }
raw=0x02000000$(ent 1 6 4294967295)$(ent 2 4 2000)$(ent 2 4 1000)$(ent 2 4 1000)
raw+=$(ent 4 4 4294967295)$(ent 16 4 4294967295)$(ent 32 0 4294967295)
touch "$M/raw" || h_fail "touch raw"
setfattr -n system.posix_acl_access -v "$raw" "$M/raw" ||
	h_fail "setfattr of an ACL with unsorted, repeated ids (the kernel accepts it)"
got=$(getfattr -e hex -n system.posix_acl_access "$M/raw" 2>/dev/null |
	sed -n 's/^system.posix_acl_access=//p')
[[ $got == "$raw" ]] || h_fail "raw ACL read back as $got, set $raw"
expect_mode "$M/raw" "-rw-r-----" "the raw ACL's mode"

# ---- default ACLs ---------------------------------------------------------------
h_log "default ACL inherited, create modes masked, no umask"
u_ok "$A" "mkdir D" mkdir "$M/D"
u_ok "$A" "setfacl -d" setfacl -d -m "u:$B:rwx,g::rx,o::-" "$M/D"
as "$A" 077 touch "$M/D/file" || h_fail "touch D/file"
expect_mode "$M/D/file" "-rw-rw----" "file in D (0666 asked, umask 077 ignored)"
expect_acl "$M/D/file" "user:$B:rwx	#effective:rw-" "file in D"
expect_acl "$M/D/file" "mask::rw-" "file in D"
getfacl -p "$M/D/file" | grep -q '^default:' && h_fail "a file got a default ACL"
# open(O_CREAT, 0640) itself: the tools that take a mode (install, mkfifo
# -m) chmod after creating.
as "$A" 077 perl -e 'use Fcntl; sysopen(my $f, $ARGV[0], O_CREAT | O_WRONLY, 0640) or die "$!"' \
	"$M/D/m640" || h_fail "create D/m640"
expect_mode "$M/D/m640" "-rw-r-----" "file in D created 0640"
expect_acl "$M/D/m640" "mask::r--" "file in D created 0640"
as "$A" 077 mkdir "$M/D/sub" || h_fail "mkdir D/sub"
expect_mode "$M/D/sub" "drwxrwx---" "dir in D"
expect_acl "$M/D/sub" "default:user:$B:rwx" "dir in D inherits the default ACL"
expect_acl "$M/D/sub" "user:$B:rwx" "dir in D"
as "$A" 077 mkdir -m 0750 "$M/D/sub/s2" || h_fail "mkdir D/sub/s2"
expect_mode "$M/D/sub/s2" "drwxr-x---" "dir in D/sub created 0750"
expect_acl "$M/D/sub/s2" "mask::r-x" "dir in D/sub created 0750"
expect_acl "$M/D/sub/s2" "default:mask::rwx" "the default ACL passes on unmasked"
u_ok "$B" "B writes D/file" sh -c 'echo b >"$1/D/file"' sh "$M"
u_ok "$B" "B creates in D/sub" touch "$M/D/sub/byb"
u_denied "$C" "C creates in D" "Permission denied" touch "$M/D/byc"
as "$A" 077 ln -s file "$M/D/link" || h_fail "symlink in D"

h_log "no default ACL: the umask applies"
u_ok "$A" "mkdir E" mkdir "$M/E"
as "$A" 027 touch "$M/E/f" || h_fail "touch E/f"
expect_mode "$M/E/f" "-rw-r-----" "umask 027 file"
as "$A" 027 mkdir "$M/E/d" || h_fail "mkdir E/d"
expect_mode "$M/E/d" "drwxr-x---" "umask 027 dir"
as "$A" 0 touch "$M/E/g" || h_fail "touch E/g"
expect_mode "$M/E/g" "-rw-rw-rw-" "umask 0 file"
getfacl -p "$M/E/f" | grep -q '^mask' && h_fail "umask create stored an ACL"

# ---- crash and remount ------------------------------------------------------------
h_log "kill -9 after fsync, then remount: ACLs and modes kept"
u_ok "$A" "setfacl u:C:r on E/f" setfacl -m "u:$C:r" "$M/E/f"
u_ok "$A" "chmod 2770 D/sub" chmod 2770 "$M/D/sub"
# fsync of every file and directory (FUSE has no syncfs)
find "$M" ! -type l -exec sync {} +
(cd "$M" && getfacl -pR . && find . -printf '%p %M %U %G\n' | sort) >"$T/before"
h_crash
h_mount "" allow_other
(cd "$M" && getfacl -pR . && find . -printf '%p %M %U %G\n' | sort) >"$T/after"
diff "$T/before" "$T/after" >&2 || h_fail "ACLs or modes changed across kill -9"
u_ok "$C" "C reads E/f through its entry" cat "$M/E/f"
h_remount
(cd "$M" && getfacl -pR . && find . -printf '%p %M %U %G\n' | sort) >"$T/after2"
diff "$T/before" "$T/after2" >&2 || h_fail "ACLs or modes changed across a remount"
h_umount
h_need_fsck
h_fsck 0 -n -v "${IMGS[@]}"
# fsck read the ACLs (fsck_v2_acl.c) and found them valid and in step.
if [[ $(h_format) == v2 ]]; then
	grep -qE '^ACLs: [1-9][0-9]* checked' <<<"$FOUT" ||
		h_fail "fsck -v checked no ACLs: $(grep -i acl <<<"$FOUT")"
fi

# ---- noacl ------------------------------------------------------------------------
h_log "-o noacl: no ACLs, the kernel's umask"
h_mount "" allow_other,noacl
u_denied "$A" "setfacl under noacl" "Operation not supported" setfacl -m "u:$B:r" "$M/E/g"
as "$A" 027 touch "$M/E/n" || h_fail "touch E/n under noacl"
expect_mode "$M/E/n" "-rw-r-----" "umask 027 under noacl"
as "$A" 027 touch "$M/D/n" || h_fail "touch D/n under noacl"
expect_mode "$M/D/n" "-rw-r-----" "no inheritance under noacl"
h_umount
h_log "PASS"
