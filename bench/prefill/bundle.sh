#!/usr/bin/env bash
# Bundles the chunked-prefill libraries for the device machine into
# .bundle/prefill/ (git-ignored; carry ".bundle"): libgdn_chunked_prefill.so,
# libgdn_capi.so and gtest binaries when built, plus every shared library they
# need that the device lacks (all but glibc / libstdc++ / libgcc).
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
  ldd "$f" | awk '/=> \// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libstdc++*|libgcc_s*|ld-linux*|libpthread*|libdl.so*|librt.so*) ;;
      *) cp -n "$lib" "$dest/lib/" ;;
    esac
  done
done
cp "$root/bench/prefill/compare_fla.py" "$dest/"
du -sh "$dest"
ls "$dest/lib" | wc -l
