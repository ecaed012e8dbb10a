#!/usr/bin/env bash
# Copies into DEST every shared library the given binaries need that the
# device machine lacks: all that ldd lists except glibc, libstdc++, libgcc and
# the driver's libcuda (the device has those), and except the project's own
# libgdn_*.so, which the bundling scripts place themselves.
#   scripts/device/copy_runtime_libs.sh DEST FILE...
set -euo pipefail
dest=$1; shift
mkdir -p "$dest"
for f in "$@"; do
  ldd "$f" | awk '/=> \// {print $3}'
done | sort -u \
  | { grep -Ev '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libstdc\+\+|libgcc_s|libcuda)\.so' || true; } \
  | { grep -v '/libgdn_' || true; } | while read -r lib; do cp -L "$lib" "$dest/"; done
# (|| true: a binary that needs none of them, e.g. tprep_test, is no error.)
