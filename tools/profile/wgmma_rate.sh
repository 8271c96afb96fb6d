#!/usr/bin/env bash
# Builds tools/profile/wgmma_rate.cu with nvcc for sm_90a and, where a GPU is present, runs it:
# what the Hopper kernels' wgmma cost a warpgroup by token-tile width (docs/perf-notes.md, eighth
# session). Build on the CPU machine, carry build/wgmma_rate, run it on the GPU machine.
# Usage: bash tools/profile/wgmma_rate.sh [--build-only]
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p build
/usr/local/cuda/bin/nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -I templates \
  tools/profile/wgmma_rate.cu -o build/wgmma_rate
[ "${1:-}" = --build-only ] || ./build/wgmma_rate
