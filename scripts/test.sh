#!/usr/bin/env bash
# The test command: installs, builds and runs the whole test suite with ctest.
# GPU tests (label "gpu") skip themselves where there is no CUDA device.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${GDN_BUILD_DIR:-$root/build}"
bash "$root/scripts/build.sh"
cd "$build"
ctest --output-on-failure -j "${GDN_TEST_JOBS:-2}" --timeout 900 "$@"
