#!/usr/bin/env bash
# On the CPU machine, before a call on a lent GPU machine: compiles into .megamoe-cache/ every
# kernel that the GPU suite, megamoe-run and megamoe-bench use there (every built-in config on
# every path, on one GPU and as a rank of a group, and the suite's own config variants), so that
# the GPU machine spends none of its time compiling; and builds the Python package's wheel for the
# GPU machine's Python (3.12) into build/wheels, since that machine lacks the C++ build's
# libraries. Carry build and .megamoe-cache. Needs a built tree (tools/setup.sh) and a Python 3.12
# here (PYTHON312, default python3.12), with PyPI reachable for the wheel's build requirements.
# Kernels already in the cache are kept (a key names its code, compiler and options), so only what
# changed compiles; entries no listed kernel uses are removed at the end.
# Usage: bash tools/precompile/gpu_session_cache.sh [-j N]
set -euo pipefail
cd "$(dirname "$0")/../.."
jobs=(-j "$(nproc)")
[ "${1:-}" = -j ] && jobs=(-j "$2")
export MEGAMOE_CACHE_DIR="$PWD/.megamoe-cache"
rm -rf build/test-configs
keep=$(mktemp)
configs=(kimi_k3_a8w4 generic_a8w4 deepseek_v3_a8w4 kimi_k2_a8w4 qwen3_235b_a8w4 gpt_oss_120b_a8w4 gpt_oss_20b_a8w4 tests/python/configs/small_a8w4.json tests/python/configs/small_a8w4_fp8res.json)
while read -r file; do configs+=("$file"); done < <(./build/tests/megamoe_gpu_tests --write-configs build/test-configs)
for c in "${configs[@]}"; do
  for world in 1 2; do  # the single-GPU layer's kernels, and a rank's of an expert-parallel group
    echo "== $c (world $world)"
    ./build/megamoe-precompile --config "$c" --all --path all --world "$world" "${jobs[@]}" | tail -1
    ./build/megamoe-precompile --config "$c" --all --path all --world "$world" --list | awk 'NR > 1 {print $1 "_" $2}' >>"$keep"
  done
done
echo "== kimi_k3_a8w4 with a shared expert (the kernel that routes every token to it)"
for world in 1 2; do
  ./build/megamoe-precompile --config kimi_k3_a8w4 --shared-experts 1 --bucket 1 --world "$world" "${jobs[@]}" | tail -1
  ./build/megamoe-precompile --config kimi_k3_a8w4 --shared-experts 1 --bucket 1 --world "$world" --list | awk 'NR > 1 {print $1 "_" $2}' >>"$keep"
done
echo "== kimi_k3_a8w4 with generic_a8w4's buckets (megamoe-bench --against generic_a8w4)"
./build/megamoe-precompile --config kimi_k3_a8w4 --buckets-of generic_a8w4 --all "${jobs[@]}" | tail -1
./build/megamoe-precompile --config kimi_k3_a8w4 --buckets-of generic_a8w4 --all --list | awk 'NR > 1 {print $1 "_" $2}' >>"$keep"
for entry in "$MEGAMOE_CACHE_DIR"/v1/*; do  # what no listed kernel uses
  grep -qxF "$(basename "$entry")" "$keep" || rm -rf "$entry"
done
rm -f "$keep"
rm -rf build/test-cache  # the CPU suite's own cache, not needed there
py312=${PYTHON312:-python3.12}
echo "== the Python package's wheel for $($py312 --version)"
rm -rf build/wheels
$py312 -m pip wheel -q --no-deps -w build/wheels -C build-dir=build/python312 .
ls -l build/wheels
du -sh "$MEGAMOE_CACHE_DIR"
