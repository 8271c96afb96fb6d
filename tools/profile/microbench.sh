#!/usr/bin/env bash
# Builds one of the Hopper microbenchmarks beside this script with nvcc for sm_90a and, where a
# GPU is present, runs it (docs/journal/ says what each measured):
#   wgmma_rate    what the kernels' wgmma cost a warpgroup by token-tile width (2026-11.md)
#   overlap_rate  whether one warpgroup's wgmma and another's arithmetic slow each other (2026-11.md)
#   grouped_ss_rate  an fp8 grouped GEMM with both operands in shared memory against cuBLASLt,
#                 the measurement behind the fp8-resident weights (2026-12.md)
# Build on the CPU machine, carry build/NAME, run it on the GPU machine.
# Usage: bash tools/profile/microbench.sh NAME [--build-only]   (exit 77 where there is no nvcc: a CPU
# test compiles each with --build-only)
set -euo pipefail
cd "$(dirname "$0")/../.."
name=${1:-}
if [ ! -f "tools/profile/$name.cu" ]; then
  echo "usage: bash tools/profile/microbench.sh wgmma_rate|overlap_rate|grouped_ss_rate [--build-only]" >&2
  exit 2
fi
if [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "microbench.sh: no nvcc at /usr/local/cuda/bin: $name not built (skipped)"
  exit 77
fi
mkdir -p build
# grouped_ss_rate also uses the library's weight layouts (build/libmegamoe.a: ninja -C build first).
lib=()
[ "$name" = grouped_ss_rate ] && lib=(-I src build/libmegamoe.a)
/usr/local/cuda/bin/nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -I templates \
  "tools/profile/$name.cu" -o "build/$name" "${lib[@]}" -lcublasLt
[ "${2:-}" = --build-only ] || "./build/$name"
