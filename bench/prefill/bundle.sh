#!/usr/bin/env bash
# Bundles the prefill work for the device machine into .bundle/prefill/
# (git-ignored; carry ".bundle"): libgdn_capi.so (the C ABI: gdn_prefill routed
# as the server routes, gdn_prefill_variant, gdn_chunked_prefill_tuned), the GPU
# gtests that cover prefill when built, every shared library they need that the
# device lacks (scripts/device/copy_runtime_libs.sh), compare_fla.py with its
# modules (prefill_problem.py, prefill_checks.py) and the
# ctypes mirror gdn_capi.py.
#   bench/prefill/bundle.sh [build-dir]   (default build-prefill)
# Build first:
#   cmake --build build-prefill --target gdn_capi chunked_prefill_test gdn_capi_test cuda_backend_test
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build-prefill}"
dest="$root/.bundle/prefill"
rm -rf "$dest"
mkdir -p "$dest/lib" "$dest/bin"
files=()
for f in "$build/kernels/cuda/capi/libgdn_capi.so" \
         "$build/tests/gpu/chunked_prefill_test" \
         "$build/tests/gpu/gdn_capi_test" \
         "$build/tests/gpu/cuda_backend_test"; do
  if [[ -f "$f" ]]; then files+=("$f"); else echo "missing (not bundled): $f" >&2; fi
done
for f in "${files[@]}"; do
  case "$f" in
    *.so) cp "$f" "$dest/lib/" ;;
    *) cp "$f" "$dest/bin/" ;;
  esac
done
bash "$root/scripts/device/copy_runtime_libs.sh" "$dest/lib" "${files[@]}"
cp "$root"/bench/prefill/{compare_fla,prefill_problem,prefill_checks}.py "$dest/"
cp "$root/kernels/capi/gdn_capi.py" "$dest/"
du -sh "$dest"
ls "$dest/lib" | wc -l
