#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Install the Debian packages twinfs needs to build, test and benchmark.
# Touches apt only when something is missing, so it is cheap to run before
# every build and works offline on a machine that is already set up.
set -euo pipefail

pkgs=(
	# build
	meson ninja-build pkg-config gcc
	libfuse3-dev liburing-dev libxxhash-dev libaio-dev libcmocka-dev
	# run and test
	fuse3 e2fsprogs sqlite3
	# setfacl/getfacl (tests/integration/acl.sh), setfattr/getfattr (acl.sh, chattr.sh)
	acl attr
	# a slow daemon's stacks in a failing test's log (harness.sh h_stacks)
	gdb
	# benchmarks, sandboxed tests, comparison file systems, fuzzing
	fio gnuplot-nox bubblewrap btrfs-progs xfsprogs clang
	# man page lint (tests/docs)
	mandoc
	# the Debian package (tests/package)
	dpkg-dev debhelper
)

missing=()
for p in "${pkgs[@]}"; do
	# "install ok installed" only: half-removed packages count as missing.
	st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	[[ $st == "install ok installed" ]] || missing+=("$p")
done
((${#missing[@]} == 0)) && exit 0

if ((EUID != 0)); then
	echo "deps.sh: missing packages: ${missing[*]}" >&2
	echo "deps.sh: run as root (or: sudo apt-get install ${missing[*]})" >&2
	exit 1
fi
echo "deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
