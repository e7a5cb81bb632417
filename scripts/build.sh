#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Install missing dependencies, configure build/ once and build it.
# Extra arguments are meson options (e.g. -Dwerror=true); they are applied to
# an existing build directory too.  BUILD_DIR overrides build/.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
build=${BUILD_DIR:-build}
if [[ ! -f $build/build.ninja ]]; then
	meson setup "$build" "$@"
elif (($# > 0)); then
	meson configure "$build" "$@"
fi
ninja -C "$build"
