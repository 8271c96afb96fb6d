#!/usr/bin/env bash
# Sets up, builds and runs the main job: on a machine with a GPU, the Kimi-K3 config run with
# checks, as one rank of EP8 holds it (112 of its 896 experts: the per-rank work on one GPU);
# without one, the precompile of all its kernels into the kernel cache.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh megamoe-run megamoe-precompile  # not the test suites
status=0
./build/megamoe-run --config kimi_k3_a8w4 --experts-per-rank 112 --check || status=$?
if [ "$status" = 3 ]; then
  echo "main: no GPU here; precompiling the kimi_k3_a8w4 kernels for sm_90a instead (one GPU, and a rank of a group)"
  ./build/megamoe-precompile --config kimi_k3_a8w4 --all --arch sm_90a
  exec ./build/megamoe-precompile --config kimi_k3_a8w4 --all --arch sm_90a --world 8
fi
exit "$status"
