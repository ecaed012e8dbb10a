#!/usr/bin/env bash
# The test command: installs, builds and runs the whole test suite with ctest.
# GPU tests (label "gpu") skip themselves where there is no CUDA device.
#
# Sanitizer runs: `scripts/test.sh --sanitize=address` (ASan + UBSan, into
# build-asan) or `--sanitize=thread` (TSan, into build-tsan), or
# GDN_SANITIZE=address|thread. CPU only (-DGDN_WITH_CUDA=OFF); builds only
# the tests of the folders in GDN_SANITIZE_DIRS (default: the state cache,
# the server and the end-to-end tests) and runs ctest in each. Any finding
# fails its test (UBSan aborts: -fno-sanitize-recover).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sanitize="${GDN_SANITIZE:-}"
if [ $# -gt 0 ] && [[ "$1" == --sanitize=* ]]; then
  sanitize="${1#--sanitize=}"
  shift
fi

if [ -z "$sanitize" ]; then
  build="${GDN_BUILD_DIR:-$root/build}"
  bash "$root/scripts/build.sh"
  cd "$build"
  ctest --output-on-failure -j "${GDN_TEST_JOBS:-2}" --timeout 900 "$@"
  exit 0
fi

case "$sanitize" in
  address) build="${GDN_BUILD_DIR:-$root/build-asan}" ;;
  thread) build="${GDN_BUILD_DIR:-$root/build-tsan}" ;;
  *) echo "test.sh: --sanitize takes address or thread, got '$sanitize'" >&2; exit 2 ;;
esac
default_dirs="tests/state_cache tests/server tests/client/e2e tests/client/bench"
read -r -a dirs <<< "${GDN_SANITIZE_DIRS:-$default_dirs}"
bash "$root/scripts/install_deps.sh"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DGDN_WITH_CUDA=OFF -DGDN_BUILD_BENCHMARKS=OFF -DGDN_SANITIZE="$sanitize"
# Only the chosen folders' targets (Ninja's per-folder "all"), not the tree.
targets=()
for d in "${dirs[@]}"; do targets+=("$d/all"); done
cmake --build "$build" -j "${GDN_JOBS:-2}" --target "${targets[@]}"
# Findings are fatal and carry a stack; leaks count (LeakSanitizer, ASan).
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}"
status=0
for d in "${dirs[@]}"; do
  # ctest in a folder of the build tree runs that folder's tests only.
  (cd "$build/$d" && ctest --output-on-failure -j "${GDN_TEST_JOBS:-2}" --timeout 1800 "$@") ||
    status=1
done
exit $status
