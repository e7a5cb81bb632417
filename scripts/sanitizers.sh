#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The sanitizer half of CI (.ci/run runs it after scripts/test.sh):
#   asan  build-asan, -Db_sanitize=address,undefined: the unit and integration
#         suites; the daemon runs under ASan/UBSan too, and the mount harness
#         fails a test on any sanitizer line in the daemon's log
#   tsan  build-tsan, -Db_sanitize=thread: the parallel-writer unit tests
#         (file and file_space, rangelock, namei, log group commit, the
#         asynchronous data path on the io_uring completion threads, the v2
#         B+tree's per-node locks: btree, btree_mt; alloc_v2's checkpoint
#         writes while other threads allocate)
#   fuzz  build-fuzz, clang -Dfuzz=true with ASan/UBSan: every libFuzzer
#         target for FUZZ_SECONDS (20) from its own seeds
# Usage: scripts/sanitizers.sh [asan|tsan|fuzz]...   (default: all three)
# SAN_BUILD_PREFIX (default "build") names the build dirs: PREFIX-asan...
set -euo pipefail
cd "$(dirname "$0")/.."

# Any report fails the test: UBSan and TSan would otherwise print and go on.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}

# No -Werror here: the instrumentation makes GCC's flow warnings (format
# truncation, null arguments) fire on code the plain -Werror build accepts;
# warnings are that build's job, these builds look for runtime errors.
# setup DIR OPTIONS...: configure once, reconfigure when options change.
setup() {
	local dir=$1
	shift
	if [[ -f $dir/build.ninja ]]; then
		meson configure "$dir" "$@"
	else
		meson setup "$dir" "$@"
	fi
}

B=${SAN_BUILD_PREFIX:-build}
t0=$SECONDS
stamp() { echo "== sanitizers: $1 done at +$((SECONDS - t0)) s"; }

run_asan() {
	setup "$B-asan" -Dwerror=false -Db_sanitize=address,undefined
	ninja -C "$B-asan"
	# The instrumented daemon is several times slower: the same tests on
	# smaller trees and fewer kill rounds.  Like scripts/test.sh, two tests
	# at a time (meson's default -j, nproc) but those the integration
	# meson.build marks exclusive, which run alone at the end.
	REMOUNT_SRC=${REMOUNT_SRC:-/usr/include/linux} DEGRADED_SRC=${DEGRADED_SRC:-/usr/include/linux} \
	KILL_ROUNDS=${KILL_ROUNDS:-8} \
	meson test -C "$B-asan" --no-rebuild --print-errorlogs --suite unit --suite integration
	stamp asan
}

run_tsan() {
	local tests=(file file_space rangelock namei gcommit async btree btree_mt alloc_v2 extcache)
	setup "$B-tsan" -Dwerror=false -Db_sanitize=thread
	ninja -C "$B-tsan" "${tests[@]/#/tests/unit/test_}"
	meson test -C "$B-tsan" --no-rebuild --print-errorlogs --suite unit "${tests[@]}"
	stamp tsan
}

run_fuzz() {
	local f targets=()
	for f in tests/fuzz/fuzz_*.c; do
		f=${f##*/}
		targets+=("tests/fuzz/${f%.c}")
	done
	if [[ ! -f "$B-fuzz"/build.ninja ]]; then
		CC=clang meson setup "$B-fuzz" -Dwerror=false -Dfuzz=true \
			-Dfuzz_seconds="${FUZZ_SECONDS:-20}" -Db_sanitize=address,undefined -Db_lundef=false
	else
		meson configure "$B-fuzz" -Dfuzz_seconds="${FUZZ_SECONDS:-20}"
	fi
	ninja -C "$B-fuzz" "${targets[@]}"
	meson test -C "$B-fuzz" --no-rebuild --print-errorlogs --suite fuzz -v
	stamp fuzz
}

(($#)) || set -- asan tsan fuzz
for what in "$@"; do
	case $what in
	asan) run_asan ;;
	tsan) run_tsan ;;
	fuzz) run_fuzz ;;
	*) echo "unknown: $what (asan, tsan or fuzz)" >&2; exit 2 ;;
	esac
done
