#!/usr/bin/env bash
# Builds tools/profile/overlap_rate.cu with nvcc for sm_90a and, where a GPU is present, runs it:
# whether one warpgroup's wgmma overlap another's arithmetic (docs/perf-notes.md, ninth
# session). Build on the CPU machine, carry build/overlap_rate, run it on the GPU machine.
# Usage: bash tools/profile/overlap_rate.sh [--build-only]
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p build
/usr/local/cuda/bin/nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -I templates \
  tools/profile/overlap_rate.cu -o build/overlap_rate
[ "${1:-}" = --build-only ] || ./build/overlap_rate
