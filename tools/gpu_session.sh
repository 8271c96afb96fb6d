#!/usr/bin/env bash
# One call on a lent GPU machine: the GPU tests, the layer runs with checks (stage times
# included), and (unless the first argument is "quick") the portable path's times, the kernels'
# resources and cold-compile versus cache-hit times. Binaries are built on the CPU machine and
# kernels precompiled there into .megamoe-cache/ (tools/precompile/gpu_session_cache.sh);
# docs/perf-notes.md says how it is invoked.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
out=${OUT:-/tmp/megamoe-out}
mkdir -p "$out"
export MEGAMOE_CACHE_DIR="$PWD/.megamoe-cache"
status=0
step() { echo "== $*"; "$@" || { echo "!! failed: $*"; status=1; }; }
{
  date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  step ./build/tests/megamoe_gpu_tests --durations yes
  step ./build/megamoe-run --config kimi_k3_a8w4 --check --bs 1,8,32,64,128,256,512,1024,2048,4096,8192
  step ./build/megamoe-bench --world 1 --config kimi_k3_a8w4 --json "$out/bench_kimi.json"
  if [ "${1:-full}" = quick ]; then echo "gpu_session status $status (quick)"; exit $status; fi
  step ./build/megamoe-run --config kimi_k3_a8w4 --check --path portable --bs 1,128,8192
  step ./build/megamoe-run --config generic_a8w4 --check --bs 1,64,4096
  echo "== resources of the expert-GEMM kernels"
  for f in .megamoe-cache/v1/megamoe_stage*_bm1*/kernel.cubin; do
    echo "$f"; cuobjdump -res-usage "$f" 2>&1 | grep -E "REG|STACK|SHARED" | head -2
    cuobjdump -sass "$f" 2>&1 | grep -oE "\b(QGMMA|HGMMA|QMMA|HMMA|UTMALDG|UBLKCP|LDL|STL|PRMT|FFMA)\b" | sort | uniq -c | tr '\n' ' '; echo
  done
  step ./build/megamoe-run --config kimi_k3_a8w4 --check --route holes --bs 1000 --save-routing "$out/holes.routing"
  step ./build/megamoe-run --config kimi_k3_a8w4 --check --routing-file "$out/holes.routing"
  echo "== cold compile, then cache hit (-j 1, fresh cache folder)"
  rm -rf /tmp/megamoe-cold
  MEGAMOE_CACHE_DIR=/tmp/megamoe-cold step ./build/megamoe-precompile --config kimi_k3_a8w4 --all -j 1
  MEGAMOE_CACHE_DIR=/tmp/megamoe-cold step ./build/megamoe-precompile --config kimi_k3_a8w4 --all -j 1
  echo "gpu_session status $status"
  exit $status
} 2>&1 | tee "$out/gpu_session.log"
exit "${PIPESTATUS[0]}"
