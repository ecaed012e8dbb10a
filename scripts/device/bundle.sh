#!/usr/bin/env bash
# Builds the CUDA targets here and bundles them for the device machine:
# binaries and libgdn_capi.so into .bundle/bin, every shared library they
# need that the device lacks (all ldd lists except glibc, libstdc++, libgcc
# and the driver's libcuda) into .bundle/lib, and the commit into
# .bundle/COMMIT. .bundle/ is git-ignored; carry it with the `run` call:
#   run carry [".bundle", ".whl"] command "bash scripts/device/gpu_suite.sh"
# The server visit: bundle.sh gdn-server gdn-bench cuda_backend_test chunked_prefill_test
#   then run carry [".bundle"] command "bash scripts/device/server_bench.sh"
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build-cuda}
# Targets to bundle: the arguments, or the decode suite's by default.
if [ $# -gt 0 ]; then
  TARGETS=("$@")
else
  TARGETS=(cuda_backend_test recurrent_kernel_test cuda_stream_test gdn_capi_test decode_bench gdn_capi
           recurrent_pdl_test server_cuda_test)
fi

cmake -S . -B "$BUILD" -G Ninja -DGDN_WITH_CUDA=ON -DGDN_CUDA_ARCHITECTURES=90a >/dev/null
cmake --build "$BUILD" --target "${TARGETS[@]}" -j2

rm -rf .bundle
mkdir -p .bundle/bin .bundle/lib
for t in "${TARGETS[@]}"; do
  f=$(find "$BUILD" -type f \( -name "$t" -o -name "lib$t.so" \) | head -1)
  [ -n "$f" ] || { echo "missing build output for $t" >&2; exit 1; }
  cp "$f" .bundle/bin/
done
bash scripts/device/copy_runtime_libs.sh .bundle/lib .bundle/bin/*
strip --strip-debug .bundle/bin/*  # the debug info is most of the size; carry is 64 MiB

{
  echo "commit $(git rev-parse HEAD)"
  if [ -n "$(git status --porcelain -- kernels bench tests scripts)" ]; then
    echo "working tree had uncommitted changes under kernels/ bench/ tests/ scripts/"
  fi
} > .bundle/COMMIT
# Over the 64 MiB carry limit (every test binary holds all the kernels):
# pack bin/ and lib/ into one xz tarball (its 64 MiB window shares the
# kernels across binaries: ~10x smaller). gpu_suite.sh unpacks it (python3's
# lzma, no xz binary needed); PACK=1 forces it, PACK=0 never.
size_mib=$(du -sm .bundle | cut -f1)
if [ "${PACK:-auto}" = 1 ] || { [ "${PACK:-auto}" = auto ] && [ "$size_mib" -gt 60 ]; }; then
  tar -C .bundle -cf - bin lib | xz -9 -T2 > .bundle/pack.tar.xz
  rm -rf .bundle/bin .bundle/lib
  echo "packed ${size_mib} MiB into .bundle/pack.tar.xz"
fi
du -sh .bundle
cat .bundle/COMMIT
