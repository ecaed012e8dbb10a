#!/usr/bin/env bash
# Bundles gdn-eval (built with the cuda backend) for the device machine into
# .bundle/eval/ (git-ignored; carry ".bundle" and ".whl"): bin/gdn-eval,
# lib/libgdn_capi.so when built, every shared library they need that the
# device lacks (scripts/device/copy_runtime_libs.sh), and COMMIT.
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
done
bash "$root/scripts/device/copy_runtime_libs.sh" "$dest/lib" "${files[@]}"
dirty=""
git -C "$root" diff --quiet HEAD 2>/dev/null || dirty=" (+ uncommitted changes)"
echo "$(git -C "$root" rev-parse HEAD)${dirty}" > "$dest/COMMIT"
du -sh "$dest"
