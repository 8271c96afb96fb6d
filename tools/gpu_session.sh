#!/usr/bin/env bash
# One call on a lent GPU machine: the GPU tests, the main run with checks, and cold-compile
# versus cache-hit times, with binaries built here and kernels precompiled into
# .megamoe-cache/ (see docs/perf-notes.md for how it is invoked).
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
out=${OUT:-/tmp/megamoe-out}
mkdir -p "$out"
export MEGAMOE_CACHE_DIR="$PWD/.megamoe-cache"
status=0
{
  date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  echo "== GPU tests"; ./build/tests/megamoe_gpu_tests --durations yes || status=1
  echo "== main run"; ./build/megamoe-run --config kimi_k3_a8w4 --check || status=1
  ./build/megamoe-run --config generic_a8w4 --check --bs 1,64,4096 || status=1
  echo "== cold compile, then cache hit (-j 1, fresh cache folder)"
  rm -rf /tmp/megamoe-cold
  MEGAMOE_CACHE_DIR=/tmp/megamoe-cold ./build/megamoe-precompile --config kimi_k3_a8w4 --all -j 1 || status=1
  MEGAMOE_CACHE_DIR=/tmp/megamoe-cold ./build/megamoe-precompile --config kimi_k3_a8w4 --all -j 1 || status=1
  echo "gpu_session status $status"
} 2>&1 | tee "$out/gpu_session.log"
exit $status
