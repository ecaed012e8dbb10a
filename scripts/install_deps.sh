#!/usr/bin/env bash
# Installs the build and test dependencies (Debian's packages; matplotlib from
# PyPI for the plots). Idempotent:
# does nothing (and needs no network) when everything is already installed.
# CUDA is not installed here: the CUDA backend is built when /usr/local/cuda
# (or CUDACXX) provides nvcc.
#   install_deps.sh          everything: build, tests, plots (developers, CI)
#   install_deps.sh --build  only what building the binaries needs (images)
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev prometheus-cpp-dev libcivetweb-dev zlib1g-dev
  libssl-dev  # token digests (server/auth/tokens_file.cc)
)
build_only=0
[ "${1:-}" = "--build" ] && build_only=1
if [ $build_only = 0 ]; then
  packages+=(
    libgtest-dev libgmock-dev libbenchmark-dev
    curl python3-venv
    openssl  # the TLS tests make their certificates at run time
    nginx  # tests/deploy/affinity_test.sh: the session-affinity proxy
    chromium  # tests/deploy/status_page_browser_test.sh loads the status page
    clang libclang-rt-14-dev  # scripts/fuzz.sh: libFuzzer and the sanitizers' runtimes
  )
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "install_deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -q
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# matplotlib (PyPI) draws the PNG plots of gdn-bench and gdn-eval.
if [ $build_only = 1 ]; then exit 0; fi
if ! python3 -c "import matplotlib" 2>/dev/null; then
  echo "install_deps: installing matplotlib from PyPI"
  python3 -m pip install --quiet matplotlib 2>/dev/null ||
    python3 -m pip install --quiet --break-system-packages matplotlib
fi

