#!/usr/bin/env bash
# On the CPU machine: builds megamoe-bench for each named commit and precompiles that commit's
# Hopper kernels for a config, so that one call on a GPU machine can time them side by side with
# the working tree (tools/ab/bench.sh). Each commit goes to build-ab/<commit>/ (bench binary and
# kernel cache; git ignores build-*), built in a temporary worktree. Its megamoe-precompile goes
# beside the bench, so that the GPU machine can compile what AB_BUCKETS left out on all its cores.
# Usage: bash tools/ab/build.sh [--config NAME] COMMIT ...
# AB_BUCKETS="32 8192" precompiles only those buckets (then bench with --bs to match).
set -euo pipefail
cd "$(dirname "$0")/../.."
config=kimi_k3_a8w4
if [ "${1:-}" = --config ]; then config=$2; shift 2; fi
[ $# -gt 0 ] || { echo "usage: bash tools/ab/build.sh [--config NAME] COMMIT ..." >&2; exit 2; }
root=$PWD
for rev in "$@"; do
  sha=$(git rev-parse --short "$rev^{commit}")
  work=$(mktemp -d /tmp/megamoe-ab-XXXXXX)
  echo "== $rev ($sha): worktree $work"
  git worktree add -q --detach "$work" "$sha"
  cmake -S "$work" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  ninja -C "$work/build" megamoe-bench megamoe-precompile | tail -1
  rm -rf "build-ab/$sha" && mkdir -p "build-ab/$sha"
  cp "$work/build/megamoe-bench" "$work/build/megamoe-precompile" "build-ab/$sha/"  # the GPU machine compiles the rest on all cores
  buckets=(--all)
  if [ -n "${AB_BUCKETS:-}" ]; then buckets=(); for b in $AB_BUCKETS; do buckets+=(--bucket "$b"); done; fi
  MEGAMOE_CACHE_DIR="$root/build-ab/$sha/cache" "$work/build/megamoe-precompile" --config "$config" "${buckets[@]}" --path hopper |
    tail -1
  git worktree remove --force "$work"
done
du -sh build-ab
