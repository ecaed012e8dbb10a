#!/usr/bin/env bash
# Kernel instances (distinct __global__ functions) per object file of the
# CUDA kernels library, counted with nm: nvcc emits one host launch stub per
# kernel instance, each with one static guard variable
# `_ZGVZ<n>__device_stub__<kernel>...E5__tmp`; one line per instance.
# Usage: scripts/count_kernel_instances.sh BUILD/kernels/cuda/CMakeFiles/gdn_cuda_kernels.dir
set -euo pipefail
cd "$1"
pattern='_ZGVZ[A-Z]?[0-9]+__device_stub__.*E5__tmp$'
total=0
for f in ./*.cu.o; do
  n=$(nm "$f" | grep -cE "$pattern" || true)
  printf "%-36s %4d\n" "${f#./}" "$n"
  total=$((total + n))
done
echo "total kernel instances: $total"
echo "by kernel template:"
nm ./*.cu.o | grep -E "$pattern" |
  sed -E 's/.*__device_stub__Z(N3gdn4cuda(7chunked)?)?[0-9]+//; s/.*_cu_[0-9a-f]+[0-9]+//' |
  sed -E 's/^([A-Za-z]+).*/\1/' | sort | uniq -c
