# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck shell=bash
#
# Description: Ordinary users for the integration tests that check unprivileged use,
# permissions and containers (user.sh, perms.sh, container.sh), sourced right
# after harness.sh.  It owns the machine-wide state those tests change and
# puts every piece of it back in its EXIT trap, which then runs the harness's
# own cleanup:
#   - the test users (u_adduser; removed with their home directories),
#   - the mode of /dev/fuse (u_fuse_mode; often 0600 on CI machines),
#   - /etc/fuse.conf (u_user_allow_other),
#   - the setuid bit of fusermount3 (Debian ships it setuid; made so if not).
# The tests that change this state take one lock, so two of them (from two
# build directories) never run at once.
#
# Daemons run as a user through a wrapper passed as TWINFS to h_mount and
# h_mount_fails: setpriv execs, so the harness still gets the daemon's pid.

UL_LOCK=/run/lock/twinfs-it-users.lock
UL_USERS=()		# users we created
UL_FUSE_MODE=""		# /dev/fuse mode to restore
UL_FUSE_CONF=""		# saved copy of /etc/fuse.conf, to restore
UL_FUSERMOUNT=""	# fusermount3 we made setuid, to restore
UL_PIDS=()		# background processes to kill at the end
TWINFS_BIN=$TWINFS	# the real daemon (TWINFS may be a wrapper per mount)

for _c in setpriv useradd userdel fusermount3; do
	command -v "$_c" >/dev/null || { echo "SKIP: $_c is missing"; exit 77; }
done

exec 9>"$UL_LOCK"
flock -w 600 9 || h_fail "could not take $UL_LOCK in 600 s"

# The users must reach the mount point and their files in the temp dir.
chmod 0755 "$T"

u_cleanup() {
	local rc=$? i p u
	set +e
	trap - EXIT
	# Mounts first: a user with a running daemon cannot be deleted.
	if h_is_mounted "$MNT"; then
		fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null
	fi
	for p in "${UL_PIDS[@]}"; do
		kill -9 "$p" 2>/dev/null
	done
	if [[ -n $DAEMON_PID ]]; then
		for ((i = 0; i < 100; i++)); do
			kill -0 "$DAEMON_PID" 2>/dev/null || break
			sleep 0.1
		done
	fi
	for u in "${UL_USERS[@]}"; do
		userdel -r -f "$u" >/dev/null 2>&1
	done
	# A group with another test user as member outlives userdel.
	for u in "${UL_USERS[@]}"; do
		groupdel "$u" >/dev/null 2>&1
	done
	[[ -n $UL_FUSE_MODE ]] && chmod "$UL_FUSE_MODE" /dev/fuse
	[[ -n $UL_FUSE_CONF ]] && cat "$UL_FUSE_CONF" >/etc/fuse.conf
	[[ -n $UL_FUSERMOUNT ]] && chmod u-s "$UL_FUSERMOUNT"
	(exit "$rc")
	h_cleanup
}
trap u_cleanup EXIT

# u_adduser NAME: a fresh user with its own group and home.  Any leftover
# of an earlier run that was killed is removed first.
u_adduser() {
	userdel -r -f "$1" >/dev/null 2>&1 || true
	groupdel "$1" >/dev/null 2>&1 || true
	useradd -m -U -s /bin/sh "$1" || h_fail "useradd $1"
	UL_USERS+=("$1")
}

# u_run USER CMD...: run CMD as USER (uid, gid, supplementary groups).
u_run() {
	local u=$1
	shift
	if [[ $u == root ]]; then
		"$@"
	else
		setpriv --reuid="$u" --regid="$u" --init-groups -- \
			env HOME="/home/$u" USER="$u" LOGNAME="$u" "$@"
	fi
}

# u_wrapper USER: prints a daemon wrapper that runs twinfs as USER, to be
# passed as TWINFS to h_mount / h_mount_fails.  It closes the lock fd so a
# daemon never holds the lock.
u_wrapper() {
	local w=$T/twinfs-as-$1
	if [[ $1 == root ]]; then
		printf '#!/bin/sh\nexec 9>&-\nexec "%s" "$@"\n' "$TWINFS_BIN" >"$w"
	else
		printf '#!/bin/sh\nexec 9>&-\nexec setpriv --reuid=%s --regid=%s --init-groups -- "%s" "$@"\n' \
			"$1" "$1" "$TWINFS_BIN" >"$w"
	fi
	chmod 0755 "$w"
	echo "$w"
}

# u_fuse_mode MODE: set the mode of /dev/fuse (restored at the end).
u_fuse_mode() {
	[[ -n $UL_FUSE_MODE ]] || UL_FUSE_MODE=$(stat -c %a /dev/fuse)
	chmod "$1" /dev/fuse
}

# u_user_allow_other on|off: user_allow_other in /etc/fuse.conf.
u_user_allow_other() {
	if [[ -z $UL_FUSE_CONF ]]; then
		UL_FUSE_CONF=$T/fuse.conf.saved
		if [[ -f /etc/fuse.conf ]]; then
			cp /etc/fuse.conf "$UL_FUSE_CONF"
		else
			: >"$UL_FUSE_CONF"
		fi
	fi
	grep -v '^[[:space:]]*user_allow_other' "$UL_FUSE_CONF" >"$T/fuse.conf.new" || true
	[[ $1 == on ]] && echo user_allow_other >>"$T/fuse.conf.new"
	cat "$T/fuse.conf.new" >/etc/fuse.conf
}

# Users mount through fusermount3, which must be setuid root.
u_need_fusermount() {
	local fm
	fm=$(command -v fusermount3)
	fm=$(readlink -f "$fm")
	if [[ ! -u $fm ]]; then
		chmod u+s "$fm" || h_fail "cannot make $fm setuid"
		UL_FUSERMOUNT=$fm
	fi
}

# u_ok USER WHAT CMD...: CMD run as USER must succeed.
u_ok() {
	local u=$1 what=$2 out
	shift 2
	out=$(u_run "$u" "$@" 2>&1) || h_fail "$u: $what failed: $out"
}

# u_denied USER WHAT ERRTEXT CMD...: CMD run as USER must fail, saying
# ERRTEXT (e.g. "Permission denied", "Operation not permitted").
u_denied() {
	local u=$1 what=$2 err=$3 out
	shift 3
	if out=$(u_run "$u" "$@" 2>&1); then
		h_fail "$u: $what succeeded; it must fail with '$err'"
	fi
	grep -qF -- "$err" <<<"$out" || h_fail "$u: $what failed, but not with '$err': $out"
}

# u_stat FORMAT PATH: stat as root.
u_mode() { stat -c %A "$1"; }

# u_wait_gone PID [SECS]: wait for a process to exit (0) or time out (1).
u_wait_gone() {
	local i n=$((${2:-30} * 10))
	for ((i = 0; i < n; i++)); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.1
	done
	return 1
}

# u_daemon_pids MNT: pids of the daemons serving MNT (daemons started in
# the background by twinfs itself or mount.fuse3): see h_daemon_pids.
u_daemon_pids() { h_daemon_pids "$1"; }

# u_sb_state IMG: superblock state of IMG's newest valid slot by generation
# (docs/FORMAT.md: generation at 296, state at 260): "clean" or "dirty".
u_sb_state() {
	local g0 g1 slot st
	g0=$(od -An -t u8 -j 296 -N 8 "$1" | tr -d ' ')
	g1=$(od -An -t u8 -j $((4096 + 296)) -N 8 "$1" | tr -d ' ')
	slot=0
	((g1 > g0)) && slot=1
	st=$(od -An -t u4 -j $((slot * 4096 + 260)) -N 4 "$1" | tr -d ' ')
	case $st in
	1) echo clean ;;
	0) echo dirty ;;
	*) echo "bad($st)" ;;
	esac
}
