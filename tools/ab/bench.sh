#!/usr/bin/env bash
# On a lent GPU machine: megamoe-bench for the working tree's build and for each commit that
# tools/ab/build.sh prepared under build-ab/, in turn and then the working tree again, so that
# drift between the first and last run shows. Carry build, .megamoe-cache and build-ab.
# Usage: bash tools/ab/bench.sh [bench options, e.g. --bs 1,128,8192]   (default config kimi_k3_a8w4)
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0
config=${AB_CONFIG:-kimi_k3_a8w4}
# Kimi-K3 as one rank of EP8 holds it (112 experts), as builds from before model.experts counted
# it; AB_EXPERTS_PER_RANK names another count (0: the model's own).
share=${AB_EXPERTS_PER_RANK:-$([ "$config" = kimi_k3_a8w4 ] && echo 112 || echo 0)}
status=0
run() {  # label, bench binary, cache folder, options...
  local label=$1 bench=$2 cache=$3 extra=()
  shift 3
  echo "== $label"
  # grep reads the whole help (with -q it would stop early, and pipefail would count the bench's
  # broken pipe as a failure: the flag silently dropped)
  if [ "$share" -gt 0 ] && "$bench" --help | grep -- --experts-per-rank >/dev/null; then
    extra=(--experts-per-rank "$share")
  fi
  echo "experts a rank: ${extra[1]:-all of the model}"
  MEGAMOE_CACHE_DIR=$cache "$bench" --world 1 --config "$config" "${extra[@]}" "$@" || status=1
}
run "working tree" ./build/megamoe-bench "$PWD/.megamoe-cache" "$@"
for dir in build-ab/*/; do
  [ -x "$dir/megamoe-bench" ] || continue
  run "$(basename "$dir")" "$dir/megamoe-bench" "$PWD/$dir/cache" "$@"
done
run "working tree, again" ./build/megamoe-bench "$PWD/.megamoe-cache" "$@"
exit $status
