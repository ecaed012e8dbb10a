#!/usr/bin/env bash
# Prints, one a line, the distribution packages that provide the shared
# libraries the given binaries load. The build stage of each Dockerfile runs
# it, so the run stage installs exactly the runtime libraries (no -dev
# packages, no compiler) without a hand-kept list of versioned names such as
# libgrpc++1.51 (Debian) vs libgrpc++1.51t64 (Ubuntu 24.04).
# Libraries that no package owns (e.g. under /usr/local/cuda) are skipped: the
# CUDA runtime is linked statically and the driver comes from the host.
set -euo pipefail
for binary in "$@"; do
  ldd "$binary" | awk '/=> \// { print $3 }'
done | sort -u | while read -r lib; do
  # dpkg may have recorded the /usr or the / spelling (merged /usr).
  for path in "$lib" "$(readlink -f "$lib")" "/usr${lib#/usr}" "${lib#/usr}"; do
    if owner=$(dpkg-query -S "$path" 2>/dev/null); then
      echo "${owner%%:*}"
      break
    fi
  done
done | sort -u
