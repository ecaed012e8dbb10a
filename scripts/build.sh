#!/usr/bin/env bash
# Installs dependencies, configures and builds into ${GDN_BUILD_DIR:-build}.
# Extra arguments go to cmake's configure step (e.g. -DGDN_WITH_CUDA=OFF).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${GDN_BUILD_DIR:-$root/build}"
bash "$root/scripts/install_deps.sh"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${GDN_BUILD_TYPE:-RelWithDebInfo}" "$@"
cmake --build "$build" -j "${GDN_JOBS:-$(nproc)}"
