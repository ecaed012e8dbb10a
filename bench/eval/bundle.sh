#!/usr/bin/env bash
# Bundles gdn-eval (built with the cuda backend) for the device machine into
# .bundle/eval/ (git-ignored; carry ".bundle" and ".whl"): bin/gdn-eval,
# lib/libgdn_capi.so when built, every shared library they need that the
# device lacks (all but glibc / libstdc++ / libgcc), and COMMIT.
#   cmake -S . -B build-eval-cuda -G Ninja -DGDN_WITH_CUDA=ON -DCMAKE_BUILD_TYPE=Release
#   cmake --build build-eval-cuda --target gdn-eval gdn_capi -j2
#   bench/eval/bundle.sh [build-dir]   (default build-eval-cuda)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build-eval-cuda}"
dest="$root/.bundle/eval"
rm -rf "$dest"
mkdir -p "$dest/lib" "$dest/bin"
files=("$build/bench/eval/gdn-eval")
capi="$(find "$build/kernels" -name libgdn_capi.so 2>/dev/null | head -1)"
[[ -n "$capi" ]] && files+=("$capi")
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
dirty=""
git -C "$root" diff --quiet HEAD 2>/dev/null || dirty=" (+ uncommitted changes)"
echo "$(git -C "$root" rev-parse HEAD)${dirty}" > "$dest/COMMIT"
du -sh "$dest"
