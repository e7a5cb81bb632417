#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: run one libFuzzer target for a bounded time on a fresh corpus
# seeded by the target itself, plus the files of SEEDDIR (- for none), with
# the target's own libFuzzer FLAGS after it.
#   run_libfuzzer.sh FUZZER SECONDS [SEEDDIR [FLAGS...]]
set -euo pipefail
fz=$1 secs=$2 seeds=${3:--}
shift $(($# < 3 ? $# : 3))
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/corpus"
"$fz" -twinfs_seeds="$dir/corpus"
if [[ $seeds != - ]]; then
	cp "$seeds"/* "$dir/corpus/"
fi
# -error_exitcode: libFuzzer's default (77) is meson's "skipped", which hid
# a crash; a crash input is kept in the build dir (artifact_prefix).
"$fz" -max_total_time="$secs" -seed=1 -rss_limit_mb=1024 -timeout=10 \
	-error_exitcode=1 -artifact_prefix="$PWD/" \
	-print_final_stats=1 "$@" "$dir/corpus" 2>&1 | tail -n 40
