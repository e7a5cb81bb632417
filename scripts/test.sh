#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The whole test suite, as CI runs it (.ci/run): dependencies, a build with
# warnings as errors, then every meson suite (unit, integration, ...).
# Integration tests mount file systems: run as root, or they skip.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/build.sh -Dwerror=true
exec meson test -C "${BUILD_DIR:-build}" --print-errorlogs "$@"
