#!/usr/bin/env bash
# On the CPU machine, before a call on a lent GPU machine: compiles into .megamoe-cache/ every
# kernel that the GPU suite, megamoe-run and megamoe-bench use there (both built-in configs on
# every path, on one GPU and as a rank of a group, and the suite's own config variants), so that
# the GPU machine spends none of its time compiling. Carry build and .megamoe-cache. Needs a
# built tree (tools/setup.sh).
# Usage: bash tools/precompile/gpu_session_cache.sh [-j N]
set -euo pipefail
cd "$(dirname "$0")/../.."
jobs=(-j "$(nproc)")
[ "${1:-}" = -j ] && jobs=(-j "$2")
export MEGAMOE_CACHE_DIR="$PWD/.megamoe-cache"
rm -rf "$MEGAMOE_CACHE_DIR" build/test-configs
configs=(kimi_k3_a8w4 generic_a8w4)
while read -r file; do configs+=("$file"); done < <(./build/tests/megamoe_gpu_tests --write-configs build/test-configs)
for c in "${configs[@]}"; do
  for world in 1 2; do  # the single-GPU layer's kernels, and a rank's of an expert-parallel group
    echo "== $c (world $world)"
    ./build/megamoe-precompile --config "$c" --all --path all --world "$world" "${jobs[@]}" | tail -1
  done
done
rm -rf build/test-cache  # the CPU suite's own cache, not needed there
du -sh "$MEGAMOE_CACHE_DIR"
