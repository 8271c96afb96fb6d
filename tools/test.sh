#!/usr/bin/env bash
# Sets up, builds and runs every test: the C++ suites (ctest), then the Python package's (pytest,
# after building the package into build/venv). GPU tests (ctest label `gpu`, pytest marker `gpu`)
# run where a GPU is present and are reported as skipped elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
bash tools/setup.sh
t1=$(date +%s)
# Tests must not read or write the user's kernel cache or configs.
unset MEGAMOE_CACHE_DIR MEGAMOE_CONFIG_DIR MEGAMOE_BOUNDS_CHECK MEGAMOE_DISABLE_CACHE
export MEGAMOE_CACHE_DIR="$PWD/build/test-cache"
rm -rf "$MEGAMOE_CACHE_DIR"
# The compile checks share it too (emptied above): a kernel several configs launch compiles once a run.
export MEGAMOE_TEST_COMPILE_CACHE="$MEGAMOE_CACHE_DIR"
# Say plainly, up front, whether the GPU suite can run here.
probe=0
probe_out=$(./build/tests/megamoe_gpu_tests "[probe-matches-no-test]" 2>&1) || probe=$?
if [ "$probe" = 77 ]; then echo "GPU tests: ${probe_out}"; else echo "GPU tests: a GPU is present, running them"; fi
ctest --test-dir build --output-on-failure -j "$(nproc)"
t2=$(date +%s)
bash tools/python_package.sh
build/venv/bin/python -m pytest tests/python tests/tools -q -rs
t3=$(date +%s)
echo "test suite: $((t3 - t0)) s (set-up and build $((t1 - t0)) s, ctest $((t2 - t1)) s, Python package and pytest $((t3 - t2)) s)"
