#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck disable=SC2317  # the suites are called as run_$name
# The external file system suites, run by hand (not in CI: they download,
# and pjdfstest alone takes about 25 minutes here).  As root, with build/
# built.  Fetches and builds in $EXT_WORK (default /tmp/twinfs-extsuite):
#   pjdfstest  github.com/pjd/pjdfstest: prove -r from inside the mount
#   fsx        xfstests' ltp/fsx: several seeds, buffered with mmap, without
#              mmap (-W -R), O_DIRECT (-Z), a tiny cache (-o cache=4M) and
#              threads=16, 4 processes at once on 16 MiB files
#   fsstress   xfstests' ltp/fsstress -p 4 -n 20000: unmount, fsck -n,
#              remount, every file reads back the same (md5); default and
#              -o cache=4M
#   crash      fsstress with kill -9 of the daemon mid-run, ROUNDS times on
#              one file system: remount (the log replayed), read
#              everything, unmount, fsck -n (it checks the trees, not the
#              log: only after a replay), remount for the next round
#   xfstests   xfstests' ./check (built with its configure) on FSTYP=fuse
#              FUSE_SUBTYP=.twinfs, test and scratch file systems each a
#              pair of image files, in a private mount namespace (its df
#              stats every mount and hangs on other sessions' busy ones);
#              which tests: XFSTESTS_ARGS (default "-g quick"), less those
#              in scripts/xfstests.exclude (each with its reason); after
#              each, fsck -n of both file systems; the scratch one made
#              anew whenever a test makes it (of XFSTESTS_SIZE, default 3G, or the size a
#              test asks for).  About an hour; not in the default set: name
#              it.
# Usage: scripts/extsuite.sh [pjdfstest|fsx|fsstress|crash|xfstests]...
# (default: pjdfstest fsx fsstress crash)
# Environment: EXT_WORK, EXT_OPS (fsx operations per run, default 100000),
# EXT_ROUNDS (crash rounds, default 4), PJDFSTEST_GIT, XFSTESTS_GIT (where to
# clone from), XFSTESTS_ARGS, XFSTESTS_SIZE.  Build dependencies: autoconf automake
# libaio-dev liburing-dev uuid-dev xfslibs-dev (fsstress includes xfs/xfs.h),
# perl's prove; for xfstests also libacl1-dev libattr1-dev attr acl
# libtool-bin gawk bc libcap-dev xfsprogs.
# Prints one line per run; each run's log is in $EXT_WORK/logs.  Exit 1 if
# any run failed.  Images are sparse files in /dev/shm.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
B=$REPO/build
W=${EXT_WORK:-/tmp/twinfs-extsuite}
OPS=${EXT_OPS:-100000}
ROUNDS=${EXT_ROUNDS:-4}
SHM=/dev/shm/twinfs-extsuite.$$
LOGS=$W/logs
FAILED=0

((EUID == 0)) || { echo "extsuite: run as root (pjdfstest changes owners, mounts use allow_other)" >&2; exit 2; }
for f in twinfs mkfs.twinfs fsck.twinfs; do
	[[ -x $B/$f ]] || { echo "extsuite: $B/$f missing: build first (scripts/build.sh)" >&2; exit 2; }
done
mkdir -p "$W" "$LOGS" "$SHM"

# ---- fetch and build ---------------------------------------------------------
get_suites() {
	[[ -d $W/xfstests ]] || git clone -q "${XFSTESTS_GIT:-https://github.com/kdave/xfstests}" "$W/xfstests"
	[[ " $SUITES " == *" pjdfstest "* ]] &&
		{ [[ -d $W/pjdfstest ]] || git clone -q "${PJDFSTEST_GIT:-https://github.com/pjd/pjdfstest}" "$W/pjdfstest"; }
	if [[ " $SUITES " == *" pjdfstest "* && ! -x $W/pjdfstest/pjdfstest ]]; then
		(cd "$W/pjdfstest" && autoreconf -ifs && ./configure && make pjdfstest) >"$LOGS/build-pjdfstest.log" 2>&1
	fi
	# fsx and fsstress alone, without xfstests' configure: a config.h
	# naming the headers this system has.
	local cfg=$W/cfg cf
	mkdir -p "$cfg"
	{
		for h in ASSERT_H DIRENT_H ERRNO_H ERR_H LIBGEN_H LINUX_FALLOC_H LINUX_FIEMAP_H \
			 MALLOC_H STDLIB_H STRINGS_H STRING_H SYS_FCNTL_H SYS_IOCTL_H SYS_MMAN_H \
			 SYS_PARAM_H SYS_PRCTL_H SYS_STATVFS_H SYS_STAT_H SYS_TIME_H SYS_TYPES_H \
			 SYS_WAIT_H TIME_H UNISTD_H COPY_FILE_RANGE RENAMEAT2 XFS_XFS_H; do
			echo "#define HAVE_$h 1"
		done
		echo '#define _GNU_SOURCE 1'
		echo '#include <getopt.h>'
	} >"$cfg/config.h"
	cf=(-O2 -g -include "$cfg/config.h" -I"$cfg" -I"$W/xfstests/src" -I"$W/xfstests/include"
	    -DAIO -DURING -DHAVE_LIBURING)
	[[ -x $W/fsx ]] || gcc "${cf[@]}" "$W/xfstests/ltp/fsx.c" -o "$W/fsx" -laio -luring
	[[ -x $W/fsstress ]] || gcc "${cf[@]}" "$W/xfstests/ltp/fsstress.c" -o "$W/fsstress" -laio -luring -lm
}

# ---- one file system ---------------------------------------------------------
D='' PID='' OPTS=''
up() {			# up SIZE OPTS: fresh 2-device file system, mounted on $D/mnt
	D=$SHM/fs
	mkdir -p "$D/mnt"
	rm -f "$D"/?.img
	truncate -s "$1" "$D/a.img" "$D/b.img"
	"$B/mkfs.twinfs" "$D/a.img" "$D/b.img" >/dev/null
	OPTS=$2
	mount_it
}
mount_it() {
	"$B/twinfs" -f "$D/a.img:$D/b.img" "$D/mnt" -o "allow_other${OPTS:+,$OPTS}" >>"$D/daemon.log" 2>&1 &
	PID=$!
	for _ in $(seq 100); do mountpoint -q "$D/mnt" && return 0; sleep 0.1; done
	echo "extsuite: mount failed" >&2
	return 1
}
down() {		# clean unmount; the daemon's exit status
	local rc=0
	fusermount3 -u "$D/mnt" || umount -l "$D/mnt"
	wait "$PID" || rc=$?
	PID=
	return "$rc"
}
crash() {
	kill -9 "$PID"
	wait "$PID" 2>/dev/null || true
	PID=
	umount -l "$D/mnt" 2>/dev/null || true
}
fsck_n() { "$B/fsck.twinfs" -n "$D/a.img" "$D/b.img"; }
cleanup() {
	[[ -n $PID ]] && { kill -9 "$PID" 2>/dev/null; umount -l "$SHM/fs/mnt" 2>/dev/null; }
	rm -rf "$SHM"
}
trap cleanup EXIT
# result NAME LOG OK: one line, and the log kept
result() {
	if [[ $3 == ok ]]; then
		echo "PASS $1"
	else
		echo "FAIL $1 ($3; see $2)"
		FAILED=1
	fi
}

# ---- suites ------------------------------------------------------------------
run_pjdfstest() {
	local opts log sum
	for opts in "" cache=4M; do
		log=$LOGS/pjdfstest-${opts:-default}.log
		up 512M "$opts"
		chmod 755 "$D/mnt"
		(cd "$D/mnt" && prove -r "$W/pjdfstest/tests") >"$log" 2>&1 || true
		down || echo "daemon exited nonzero" >>"$log"
		fsck_n >>"$log" 2>&1 || echo "fsck failed" >>"$log"
		sum=$(grep -E '^Files=|^Result' "$log" | tr '\n' ' ')
		if grep -q '^Result: PASS' "$log" && ! grep -qE 'daemon exited|fsck failed' "$log"; then
			result "pjdfstest ${opts:-default}: $sum" "$log" ok
		else
			result "pjdfstest ${opts:-default}: $sum" "$log" failed
		fi
	done
}

# fsx_runs NAME OPTS SEEDS -- FSXARGS
fsx_runs() {
	local name=$1 opts=$2 s log bad=ok
	shift 2
	local seeds=()
	while [[ $1 != -- ]]; do seeds+=("$1"); shift; done
	shift
	log=$LOGS/fsx-$name.log
	: >"$log"
	up 1G "$opts"
	for s in "${seeds[@]}"; do
		echo "== fsx -N $OPS -S $s $* (mount: $opts)" >>"$log"
		(cd "$D/mnt" && "$W/fsx" -q -N "$OPS" -S "$s" "$@" "f$s") >>"$log" 2>&1 || bad="fsx -S $s"
	done
	down || bad="daemon exit"
	fsck_n >>"$log" 2>&1 || bad="fsck"
	result "fsx $name: seeds ${seeds[*]}, $OPS ops each, fsx $*, -o ${opts:-(defaults)}" "$log" "$bad"
}
run_fsx() {
	local log bad=ok i pids=()
	fsx_runs buffered "" 1 2 3 --
	fsx_runs nommap "" 21 22 -- -W -R
	fsx_runs direct "" 31 32 -- -Z -r 4096 -t 4096 -w 4096 -R -W
	fsx_runs direct-mmap cache=4M 41 -- -Z -r 4096 -t 4096 -w 4096
	fsx_runs tinycache cache=4M,threads=16 11 12 --
	# 4 at once on one mount, 16 MiB files, up to 1 MiB per operation.
	log=$LOGS/fsx-parallel.log
	: >"$log"
	up 2G cache=4M,threads=16
	for i in 1 2 3 4; do
		(cd "$D/mnt" && "$W/fsx" -q -N $((OPS / 2)) -S $((100 + i)) -l 16777216 -o 1048576 "p$i") \
			>>"$log" 2>&1 &
		pids+=($!)
	done
	for i in "${pids[@]}"; do wait "$i" || bad="fsx"; done
	down || bad="daemon exit"
	fsck_n >>"$log" 2>&1 || bad="fsck"
	result "fsx parallel: 4 processes, $((OPS / 2)) ops each, -l 16M -o 1M, -o cache=4M,threads=16" "$log" "$bad"
}

sums() { (cd "$D/mnt" && find t -type f -print0 | sort -z | xargs -0 -r md5sum); }
run_fsstress() {
	local opts s log bad
	for opts in "" cache=4M; do
		for s in 1 2; do
			log=$LOGS/fsstress-${opts:-default}-$s.log
			bad=ok
			up 2G "$opts"
			mkdir "$D/mnt/t"
			"$W/fsstress" -d "$D/mnt/t" -p 4 -n 20000 -s "$s" >"$log" 2>&1 || bad="fsstress"
			sums >"$D/sum.before"
			down || bad="daemon exit"
			fsck_n >>"$log" 2>&1 || bad="fsck after unmount"
			mount_it
			sums >"$D/sum.after"
			cmp -s "$D/sum.before" "$D/sum.after" || bad="files differ after remount"
			ls -lR "$D/mnt/t" >/dev/null 2>>"$log" || bad="ls -lR"
			down || bad="daemon exit"
			fsck_n >>"$log" 2>&1 || bad="fsck after remount"
			result "fsstress -p 4 -n 20000 -s $s, -o ${opts:-(defaults)}" "$log" "$bad"
		done
	done
}

run_crash() {
	local opts r k fp log bad
	for opts in "" cache=4M; do
		log=$LOGS/crash-${opts:-default}.log
		bad=ok
		: >"$log"
		up 2G "$opts"
		for r in $(seq "$ROUNDS"); do
			k=$((3 + RANDOM % 18))
			mkdir -p "$D/mnt/t$r"
			echo "== round $r: fsstress -p 4 -n 20000 -s $r, kill -9 after ${k}s" >>"$log"
			"$W/fsstress" -d "$D/mnt/t$r" -p 4 -n 20000 -s "$r" >/dev/null 2>&1 &
			fp=$!
			sleep "$k"
			crash
			wait "$fp" 2>/dev/null || true	# its calls fail with ENOTCONN
			# fsck checks the trees, not the log: after the replay.
			mount_it
			find "$D/mnt" -type f -exec cat {} + >/dev/null 2>>"$log" || bad="read, round $r"
			down || bad="daemon exit, round $r"
			fsck_n >>"$log" 2>&1 || bad="fsck after kill and replay, round $r"
			mount_it
		done
		down || bad="daemon exit"
		fsck_n >>"$log" 2>&1 || bad="fsck at the end"
		result "crash: $ROUNDS rounds of fsstress + kill -9, -o ${opts:-(defaults)}" "$log" "$bad"
	done
}

# xfstests: TEST_DEV and SCRATCH_DEV are "a.img:b.img" pairs; mount(8) runs
# mount.fuse3, which runs "twinfs" from mount's own PATH: inside the
# namespace a directory holding a link to build/twinfs is mounted on
# /usr/local/sbin, first in that PATH.
# FSTYP=fuse has no mkfs: the scratch file system is made once, and
# _scratch_mkfs empties it.  df names the type fuse.twinfs; common/rc's
# _fs_type is taught to call that fuse, as it does fuse.glusterfs.
get_xfstests() {
	local rc=$W/xfstests/common/rc
	grep -q 'fuse.twinfs' "$rc" ||
		sed -i "s|-e 's/fuse.glusterfs/glusterfs/'|& -e 's/^fuse\\.twinfs\$/fuse/'|" "$rc"
	grep -q 'fuse.twinfs' "$rc" || { echo "extsuite: could not patch $rc" >&2; return 1; }
	# It checks no FSTYP=fuse file system after a test: for twinfs,
	# _check_twinfs_fs (appended) unmounts, runs fsck.fuse (the wrapper
	# run_xfstests puts first in PATH) and mounts again.  Its generic
	# check cannot: it looks the mount up by type "fuse", not fuse.twinfs.
	if ! grep -q '^_check_twinfs_fs()' "$rc"; then
		# shellcheck disable=SC2016  # sed writes shell code into common/rc
		sed -i \
			-e '/^_check_test_fs()/,/^}/s|# no way to check consistency for fuse|[ "$FUSE_SUBTYP" != .twinfs ] \|\| _check_twinfs_fs $TEST_DEV|' \
			-e '/^_check_dev_fs()/,/^}/s|# no way to check consistency for fuse|[ "$FUSE_SUBTYP" != .twinfs ] \|\| _check_twinfs_fs $device|' \
			"$rc"
		cat >>"$rc" <<-'EOF'

			# Added by twinfs's scripts/extsuite.sh: unmount, fsck.fuse -n, mount again.
			_check_twinfs_fs()
			{
				local dev=$1 mnt ok=0
				mnt=$(findmnt -rncv -S "$dev" -o TARGET | head -1)
				[ -n "$mnt" ] && _unmount "$mnt"
				if ! fsck.fuse -n "$dev" >$tmp.fsck 2>&1; then
					_log_err "_check_twinfs_fs: filesystem on $dev is inconsistent"
					cat $tmp.fsck >>$seqres.full
					ok=1
				fi
				rm -f $tmp.fsck
				[ -n "$mnt" ] && { _mount -t fuse.twinfs $MOUNT_OPTIONS "$dev" "$mnt" || ok=1; }
				return $ok
			}
		EOF
	fi
	[[ $(grep -c '_check_twinfs_fs \$' "$rc") == 2 ]] ||
		{ echo "extsuite: could not patch the fsck into $rc" >&2; return 1; }
	# Nor can it make an FSTYP=fuse file system: _scratch_mkfs empties the
	# old one and _scratch_mkfs_sized (the ENOSPC tests) is not run.  For
	# twinfs both make new scratch images (_twinfs_mkfs, appended): of
	# the size asked, or of XFSTESTS_SIZE.
	if ! grep -q '^_twinfs_mkfs()' "$rc"; then
		# shellcheck disable=SC2016  # sed writes shell code into common/rc
		sed -i \
			-e '/^_scratch_mkfs()/,/^}/{/^\tnfs\*|afs|cifs|/i\
\tfuse)\
\t\t[ "$FUSE_SUBTYP" = .twinfs ] \&\& { _twinfs_mkfs; return $?; }\
\t\t_scratch_cleanup_files\
\t\treturn $?\
\t\t;;
}' \
			-e '/^_try_scratch_mkfs_sized()/,/^}/{/^\t\*)$/i\
\tfuse)\
\t\t[ "$FUSE_SUBTYP" = .twinfs ] \&\& { _twinfs_mkfs $fssize; return $?; }\
\t\t_notrun "Filesystem $FSTYP not supported in _scratch_mkfs_sized"\
\t\t;;
}' \
			"$rc"
		cat >>"$rc" <<-'EOF'

			# Added by twinfs's scripts/extsuite.sh: new scratch images of
			# $1 bytes (default $TWINFS_SCRATCH_SIZE), once no daemon has them.
			_twinfs_mkfs()
			{
				local size=${1:-$TWINFS_SCRATCH_SIZE} devs=${SCRATCH_DEV//:/ } d
				_scratch_unmount 2>/dev/null
				for _ in $(seq 300); do fuser -s $devs 2>/dev/null || break; sleep 0.1; done
				for d in $devs; do
					rm -f "$d" && truncate -s "$size" "$d" || return 1
				done
				mkfs.twinfs $devs
			}
		EOF
	fi
	[[ $(grep -c '_twinfs_mkfs' "$rc") == 3 ]] ||
		{ echo "extsuite: could not patch the mkfs into $rc" >&2; return 1; }
	[[ -x $W/xfstests/src/fsync-tester ]] && return 0
	(cd "$W/xfstests" && make -j2) >"$LOGS/build-xfstests.log" 2>&1 ||
		{ echo "extsuite: xfstests build failed, see $LOGS/build-xfstests.log" >&2; return 1; }
}
run_xfstests() {
	local x=$SHM/xt args=${XFSTESTS_ARGS:--g quick} log=$LOGS/xfstests.log bad=ok t0
	get_xfstests
	mkdir -p "$x/bin" "$x/test" "$x/scratch"
	ln -sf "$B/twinfs" "$x/bin/twinfs"
	ln -sf "$B/mkfs.twinfs" "$x/bin/mkfs.twinfs"
	# fsck -t fuse [-n] A.img:B.img, after each test: once the daemon that
	# the unmount stopped has let go of the images (it writes its clean
	# checkpoint after umount returns), fsck.twinfs -n on both; its exit
	# status, one line a check, in xfstests-fsck.log.
	cat >"$x/bin/fsck.fuse" <<-EOF
		#!/bin/bash
		dev=\${!#}
		for _ in \$(seq 300); do fuser -s \${dev//:/ } 2>/dev/null || break; sleep 0.1; done
		"$B/fsck.twinfs" -n \${dev//:/ }; rc=\$?
		echo "\$rc \$dev" >>"$LOGS/xfstests-fsck.log"
		exit \$rc
	EOF
	chmod +x "$x/bin/fsck.fuse"
	truncate -s "${XFSTESTS_SIZE:-3G}" "$x/ta.img" "$x/tb.img" "$x/sa.img" "$x/sb.img"
	"$B/mkfs.twinfs" "$x/ta.img" "$x/tb.img" >/dev/null
	"$B/mkfs.twinfs" "$x/sa.img" "$x/sb.img" >/dev/null
	: >"$LOGS/xfstests-fsck.log"
	t0=$SECONDS
	# shellcheck disable=SC2086,SC2016  # args are ./check's words; the
	# namespace's shell expands its own variables
	X=$x XW=$W/xfstests XEXCL=$REPO/scripts/xfstests.exclude XSIZE=${XFSTESTS_SIZE:-3G} \
		unshare -m --propagation private bash -c '
		mount --bind "$X/bin" /usr/local/sbin || exit 2
		export FSTYP=fuse FUSE_SUBTYP=.twinfs TWINFS_SCRATCH_SIZE=$XSIZE
		export TEST_DEV=$X/ta.img:$X/tb.img TEST_DIR=$X/test
		export SCRATCH_DEV=$X/sa.img:$X/sb.img SCRATCH_MNT=$X/scratch
		export TEST_FS_MOUNT_OPTS="-o allow_other" MOUNT_OPTIONS="-o allow_other"
		cd "$XW" && ./check -E "$XEXCL" "$@"; rc=$?
		for m in "$X/test" "$X/scratch"; do
			mountpoint -q "$m" && { fusermount3 -u "$m" || umount -l "$m"; }
		done
		exit $rc' xfstests $args >"$log" 2>&1 || bad="./check failed"
	# A ./check stopped by a signal may exit 0: its summary says.
	grep -q '^Ran: ' "$log" || bad="no summary"
	grep -q '^Failures: ' "$log" && bad="$(grep -E '^(Failures|Failed)' "$log" | tr '\n' ' ')"
	for _ in $(seq 300); do fuser -s "$x/ta.img" "$x/sa.img" 2>/dev/null || break; sleep 0.1; done
	"$B/fsck.twinfs" -n "$x/ta.img" "$x/tb.img" >>"$log" 2>&1 || bad+=" fsck of the test file system"
	local what=$args n fscks
	fscks="$(wc -l <"$LOGS/xfstests-fsck.log") fsck -n after tests, $(grep -vc '^0 ' "$LOGS/xfstests-fsck.log" || true) not clean"
	n=$(wc -w <<<"$args")
	((n <= 4)) || what="$n tests"
	bad=${bad/Failed*of*tests/}
	result "xfstests ./check $what, $((SECONDS - t0)) s: $(grep -E '^(Passed all|Failed [0-9]+ of)' "$log" | tail -1); $fscks" "$log" "$bad"
	rm -rf "$x"
}

SUITES="${*:-pjdfstest fsx fsstress crash}"
get_suites
echo "extsuite: $(git -C "$REPO" describe --always --dirty), $(date -u +%F), logs in $LOGS"
for t in $SUITES; do
	case $t in
	pjdfstest | fsx | fsstress | crash | xfstests) "run_$t" ;;
	*) echo "extsuite: unknown suite $t" >&2; exit 2 ;;
	esac
done
exit $FAILED
