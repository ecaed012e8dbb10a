#!/usr/bin/env bash
# Bundles the chunked-prefill libraries for the device machine into
# .bundle/prefill/ (git-ignored; carry ".bundle"): libgdn_chunked_prefill.so,
# libgdn_capi.so and gtest binaries when built, plus every shared library they
# need that the device lacks (scripts/device/copy_runtime_libs.sh).
#   bench/prefill/bundle.sh [build-dir]   (default build-prefill)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build-prefill}"
dest="$root/.bundle/prefill"
rm -rf "$dest"
mkdir -p "$dest/lib" "$dest/bin"
files=()
for f in "$build/bench/prefill/libgdn_chunked_prefill.so" \
         "$build/kernels/cuda/capi/libgdn_capi.so" \
         "$build/tests/gpu/chunked_prefill_test"; do
  [[ -f "$f" ]] && files+=("$f")
done
for f in "${files[@]}"; do
  case "$f" in
    *.so) cp "$f" "$dest/lib/" ;;
    *) cp "$f" "$dest/bin/" ;;
  esac
done
bash "$root/scripts/device/copy_runtime_libs.sh" "$dest/lib" "${files[@]}"
cp "$root/bench/prefill/compare_fla.py" "$dest/"
du -sh "$dest"
ls "$dest/lib" | wc -l
