#!/usr/bin/env bash
# One call on a lent GPU machine. Binaries are built on the CPU machine and kernels precompiled
# there into .megamoe-cache/ (tools/precompile/gpu_session_cache.sh); carry build/tests, the three
# tools in build/, build/wheels and
# .megamoe-cache (docs/perf-notes.md, "How to measure"). Every step has a time bound, so that a
# hang costs its bound, not the call.
#   quick: the GPU suite, the layer with checks at every bucket, the bench (world 1)
#   ep:    the suite's expert-parallel tests (loopback and ipc; about the whole call), or the cases
#          of a spec file SUITE_CASES (one case or wildcard without a comma a line)
#   ab:    the world-1 bench side by side with earlier commits (build-ab from tools/ab/build.sh)
#   ep-tools: megamoe-run and megamoe-bench over loopback ranks (W = 2, 4, 8), fused and serial
#   python: the Python package's GPU tests and examples/moe_block.py (the wheel of build/wheels)
#   multi: on a machine of several GPUs, W = their count: both configs over ipc and
#          peer with checks, the serial path, and the bench's fused, serial and floor (peer)
#   multi-suite: the suite's EP cases with a rank per GPU (MEGAMOE_TEST_EP_TRANSPORT=peer)
#   eplb:  the engine features: the suite's [eplb] cases and the dropped-rows case, the Python
#          tests of them (the wheel of build/wheels), megamoe-run with redundant slots under zipf
#          routing (checked) and side by side without them, and past a capacity
#   shared: shared experts in the call: the suite's [shared] cases, the Python tests of them,
#          megamoe-run --shared-experts with checks (one GPU and loopback ranks), the bench's
#          fused call against the layer plus a dense FFN, and loopback stage times with and without
#   fp8res: the fp8-resident kernels: the suite's cases (same bits as mxfp4, references, over
#          loopback ranks), megamoe-run --check at every bucket, the bench's crossover
#   engines: one runtime for a model's layers (the suite's [layers] cases, their Python tests) and
#          the nvshmem transport over processes on GPU 0 (the suite's [nvshmem] cases); the kernels
#          compiled there first on all cores (NVSHMEM from the machine's nvidia-nvshmem-cu13 wheel)
#   nvshmem: the nvshmem transport alone (the suite's [nvshmem] cases, its Python tests, Kimi-K3 over
#          processes in nodes of two with redundant slots), and loopback ranks checked beside it;
#          NVSHMEM_PART=suite stops after the suite, =tools skips it (two calls of 10 minutes)
#   ep32:  worlds past 16 ranks: Kimi-K3 over 28 loopback ranks, checked, fused and serial; then
#          the suite's skewed-routing case
#   suite: the kernels the GPU suite uses compiled there on all cores (as gpu_session_cache.sh lists
#          them: a call without a carried cache), then the suite but its EP cases, or a part of
#          them (SUITE_PART=k SUITE_PARTS=n: every n-th case from the k-th; three parts fit calls),
#          or the cases of a spec file SUITE_CASES (bound SUITE_BOUND seconds, default 480)
#   configs: every built-in config's kernels compiled there on all cores, then each checked at
#          every bucket (megamoe-run --check; the Kimi models as a rank of EP8 holds them), and
#          generic_a8w4 over 4 loopback ranks on every path, fused and serial
#   tables: the bucket table of this card for each built-in model (TABLE_MODELS, default all six):
#          megamoe-tune from the config's table for this card (else its default), written to
#          TABLE_DIR/NAME.json with its report and journal, checked at every bucket (megamoe-run),
#          then timed beside the config's table of the other card (TABLE_AGAINST, by default the
#          H200's on an H100 and the H100's on an H200; megamoe-bench --against NAME
#          --against-bucket-table), both on the experts a rank holds where the config's bucket keys
#          count; TABLE_TUNE=0 checks and times the shipped tables instead of tuning (TABLE_CHECK=0:
#          times them only, their kernels first compiled on all cores); results in $OUT/tables.tgz
#   full:  quick, then Kimi-K3 against generic_a8w4's buckets, the portable path's times, the
#          kernels' resources, compile times
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-full}
case "$mode" in quick | ep | ab | ep-tools | python | eplb | shared | engines | nvshmem | ep32 | multi | multi-suite | fp8res | suite | configs | tables | full) ;;
  *) echo "usage: gpu_session.sh [quick|ep|ab|ep-tools|python|eplb|shared|engines|nvshmem|ep32|multi|multi-suite|fp8res|suite|configs|tables|full]" >&2; exit 2 ;;
esac
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export CUDA_DEVICE_MAX_CONNECTIONS=32
out=${OUT:-/tmp/megamoe-out}
mkdir -p "$out"
export MEGAMOE_CACHE_DIR="$PWD/.megamoe-cache"
status=0
step() {  # bound in seconds, then the command
  local bound=$1
  shift
  echo "== $*"
  timeout --kill-after=10 "$bound" "$@" || { echo "!! failed ($?): $*"; status=1; }
}
# NVSHMEM from the machine's nvidia-nvshmem-cu13 wheel, and Kimi-K3's kernels for a rank of a group
# on it (buckets 1 to 256) compiled on all cores.
precompile_nvshmem() {
  MEGAMOE_NVSHMEM_DIR=$(python3 -c "import nvidia.nvshmem as n; print(list(n.__path__)[0])")
  export MEGAMOE_NVSHMEM_DIR
  echo "NVSHMEM: $MEGAMOE_NVSHMEM_DIR"
  buckets=()  # the engines mode precompiles more with the same list
  for b in 1 2 4 8 16 32 64 128 256; do buckets+=(--bucket "$b"); done
  step 300 ./build/megamoe-precompile --config kimi_k3_a8w4 --world 2 --transport nvshmem --path hopper \
    "${buckets[@]}" -j 16
}
{
  date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  if [ "$mode" = ep ]; then
    # SUITE_CASES=file: those cases instead (the EP cases take about a whole call).
    if [ -n "${SUITE_CASES:-}" ]; then step 560 ./build/tests/megamoe_gpu_tests -f "$SUITE_CASES" --durations yes
    else step 560 ./build/tests/megamoe_gpu_tests "[ep]" --durations yes; fi
    echo "gpu_session status $status (ep)"
    exit $status
  fi
  if [ "$mode" = fp8res ]; then
    # build/test-configs: the suite's config variants (gpu_session_cache.sh writes them; carry it).
    step 200 ./build/tests/megamoe_gpu_tests "[fp8res]" --durations yes
    step 150 ./build/tests/megamoe_gpu_tests "EP loopback: every activation*" --durations yes
    step 240 ./build/megamoe-run --config build/test-configs/kimi_fp8res.json --check --ref-tokens 64 \
      --bs 1,8,32,64,128,256,512,1024,2048,4096,8192
    step 140 ./build/megamoe-bench --world 1 --config kimi_k3_a8w4 --experts-per-rank 112 --crossover --reps 10 \
      --bs 256,512,1024,2048,4096,8192 --json "$out/bench_crossover.json"
    echo "gpu_session status $status (fp8res)"
    exit $status
  fi
  if [ "$mode" = engines ]; then
    precompile_nvshmem
    step 200 ./build/megamoe-precompile --config qwen3_235b_a8w4 --world 2 --path hopper "${buckets[@]}" -j 16
    step 100 ./build/megamoe-precompile --config qwen3_235b_a8w4 --path hopper --bucket 128 -j 16
    step 240 ./build/tests/megamoe_gpu_tests "[layers]" --durations yes
    step 420 ./build/tests/megamoe_gpu_tests "[nvshmem]" --durations yes
    if ls build/wheels/megamoe-*.whl >/dev/null 2>&1; then
      rm -rf build/gpu-python
      step 60 python3 -m pip install -q --no-deps --no-index --target build/gpu-python build/wheels/megamoe-*.whl
      PYTHONPATH="$PWD/build/gpu-python" step 240 python3 -X faulthandler -m pytest tests/python -q -rs -m gpu \
        -p no:cacheprovider -k "layers or runtime or group_of_two or nvshmem"
    fi
    echo "gpu_session status $status (engines)"
    exit $status
  fi
  if [ "$mode" = nvshmem ]; then
    precompile_nvshmem
    if [ "${NVSHMEM_PART:-all}" != tools ]; then
      step 480 ./build/tests/megamoe_gpu_tests "[nvshmem]" --durations yes
      [ "${NVSHMEM_PART:-all}" = suite ] && { echo "gpu_session status $status (nvshmem suite)"; exit $status; }
    fi
    step 120 ./build/megamoe-run --config kimi_k3_a8w4 --world 4 --experts-per-rank 28 --redundant-experts 16 \
      --transport nvshmem --devices 0,0,0,0 --node-size 2 --route zipf --bs 64 --check --ref-tokens 16
    # The other transports beside it (their dispatch and combine share the templates).
    for c in "EP loopback: every activation*" "EP loopback: skewed, empty*" "EP loopback: the fused and the serial*" \
      "EP loopback: a burst*" "EP loopback: rows past*" "ipc: two processes on GPU 0 run the layer*"; do
      step 150 ./build/tests/megamoe_gpu_tests "$c" --durations yes
    done
    step 150 ./build/megamoe-run --config kimi_k3_a8w4 --world 4 --experts-per-rank 56 --bs 1,128,1024 --check
    step 100 ./build/megamoe-run --config kimi_k3_a8w4 --world 4 --experts-per-rank 56 --bs 1,128 --serial --check
    if ls build/wheels/megamoe-*.whl >/dev/null 2>&1; then
      rm -rf build/gpu-python
      step 60 python3 -m pip install -q --no-deps --no-index --target build/gpu-python build/wheels/megamoe-*.whl
      PYTHONPATH="$PWD/build/gpu-python" step 180 python3 -X faulthandler -m pytest tests/python -q -rs -m gpu \
        -p no:cacheprovider -k "nvshmem or group_of_two"
    fi
    echo "gpu_session status $status (nvshmem)"
    exit $status
  fi
  if [ "$mode" = ep32 ]; then
    # Past 16 ranks on one GPU: loopback takes at most 31 ranks (a hardware queue each, and one
    # for the process: CUDA has 32), and 32 processes' contexts and NVSHMEM heaps did not fit 80 GB
    # (journal, 2026-12-06). Kimi-K3's 896 experts over 28 loopback ranks (32 a rank) run the
    # kernels of worlds past 16 (route_ep's 32-wide counts).
    for b in 1 2 4 8 16 32 64 128; do buckets+=(--bucket "$b"); done
    step 100 ./build/megamoe-precompile --config kimi_k3_a8w4 --world 28 --path hopper "${buckets[@]}" -j 16
    step 150 ./build/megamoe-run --config kimi_k3_a8w4 --world 28 --bs 1,16 --taper --check --ref-tokens 8
    step 100 ./build/megamoe-run --config kimi_k3_a8w4 --world 28 --bs 16 --serial --route holes --check --ref-tokens 8
    step 170 ./build/tests/megamoe_gpu_tests "EP loopback: skewed*" --durations yes
    echo "gpu_session status $status (ep32)"
    exit $status
  fi
  if [ "$mode" = eplb ]; then
    step 150 ./build/tests/megamoe_gpu_tests "[eplb]" --durations yes
    step 100 ./build/tests/megamoe_gpu_tests "EP loopback: rows past a rank*" --durations yes
    rm -rf build/gpu-python
    step 60 python3 -m pip install -q --no-deps --no-index --target build/gpu-python build/wheels/megamoe-*.whl
    PYTHONPATH="$PWD/build/gpu-python" step 180 python3 -X faulthandler -m pytest tests/python -q -rs -m gpu \
      -p no:cacheprovider -k "workspace or replaced or strict or redundant"
    step 120 ./build/megamoe-run --config kimi_k3_a8w4 --world 4 --experts-per-rank 28 --redundant-experts 16 \
      --route zipf --bs 1,64,512 --check
    for slots in 0 16; do  # under skew, without and with redundant slots
      step 120 ./build/megamoe-run --config kimi_k3_a8w4 --world 8 --experts-per-rank 14 --redundant-experts $slots \
        --route zipf --bs 128,1024,4096
    done
    echo "== past a capacity: the dropped rows printed, the size FAILs (expected)"
    timeout 60 ./build/megamoe-run --config kimi_k3_a8w4 --world 2 --experts-per-rank 16 --capacity 300 --bs 100 --check
    echo "gpu_session status $status (eplb)"
    exit $status
  fi
  if [ "$mode" = shared ]; then
    step 300 ./build/tests/megamoe_gpu_tests "[shared]" --durations yes
    rm -rf build/gpu-python
    step 60 python3 -m pip install -q --no-deps --no-index --target build/gpu-python build/wheels/megamoe-*.whl
    PYTHONPATH="$PWD/build/gpu-python" step 150 python3 -X faulthandler -m pytest tests/python -q -rs -m gpu \
      -p no:cacheprovider -k "shared"
    step 100 ./build/megamoe-run --config kimi_k3_a8w4 --experts-per-rank 112 --shared-experts 1 --check \
      --ref-tokens 64 --bs 1,128,1024
    step 100 ./build/megamoe-run --config kimi_k3_a8w4 --world 4 --experts-per-rank 28 --shared-experts 1 \
      --route zipf --check --ref-tokens 32 --bs 1,64,512
    step 100 ./build/megamoe-run --config gpt_oss_120b_a8w4 --experts-per-rank 32 --shared-experts 1 \
      --inputs massive --check --ref-tokens 64 --bs 1,128,512
    step 150 ./build/megamoe-bench --world 1 --config kimi_k3_a8w4 --experts-per-rank 112 --shared-experts 1 \
      --reps 10 --bs 1,8,32,128,512,1024,4096,8192 --json "$out/bench_shared.json"
    for s in 0 1; do  # a rank's wait for the others' rows, with and without a shared expert's tiles to fill it
      step 90 ./build/megamoe-run --config kimi_k3_a8w4 --world 8 --experts-per-rank 14 --shared-experts $s \
        --bs 1,8,128,1024
    done
    echo "gpu_session status $status (shared)"
    exit $status
  fi
  if [ "$mode" = ab ]; then
    step 300 bash tools/ab/bench.sh --bs 1,8,128,1024,8192 --reps 10
    echo "gpu_session status $status (ab)"
    exit $status
  fi
  if [ "$mode" = python ]; then
    # The wheel was built on the CPU machine for this machine's Python; installed into a folder of
    # its own, beside the PyTorch that is here.
    rm -rf build/gpu-python
    step 120 python3 -m pip install -q --no-deps --no-index --target build/gpu-python build/wheels/megamoe-*.whl
    export PYTHONPATH="$PWD/build/gpu-python"
    step 400 python3 -m pytest tests/python -q -rs -m gpu -p no:cacheprovider
    step 200 python3 examples/moe_block.py --config kimi_k3_a8w4 --experts-per-rank 112 --tokens 1,8,128,1024
    echo "gpu_session status $status (python)"
    exit $status
  fi
  if [ "$mode" = multi ]; then
    w=$(nvidia-smi -L | grep -c '^GPU')
    if [ "$w" -lt 2 ]; then echo "multi: $w GPU here, this mode needs at least 2"; exit 1; fi
    nvidia-smi topo -m
    # Bounds that add up to under the call's 600 s (the suite's EP tests are loopback ones: not here).
    for c in kimi_k3_a8w4 generic_a8w4; do
      for t in ipc peer; do
        step 90 ./build/megamoe-run --config "$c" --world "$w" --transport "$t" --check --bs 1,8,128,1024,8192 --ref-tokens 16
      done
    done
    step 60 ./build/megamoe-run --config kimi_k3_a8w4 --experts-per-rank 112 --world "$w" --transport peer --serial --check --bs 1,128,1024 --ref-tokens 16
    step 170 ./build/megamoe-bench --world "$w" --transport peer --config kimi_k3_a8w4 --experts-per-rank 112 --bs 1,8,32,64,128,256,512,1024,2048,4096,8192 --reps 10 --json "$out/bench_ep$w.json"
    echo "gpu_session status $status (multi, W = $w)"
    exit $status
  fi
  if [ "$mode" = multi-suite ]; then
    MEGAMOE_TEST_EP_TRANSPORT=peer step 560 ./build/tests/megamoe_gpu_tests "[ep]" --durations yes
    echo "gpu_session status $status (multi-suite)"
    exit $status
  fi
  if [ "$mode" = suite ]; then
    configs=(kimi_k3_a8w4 generic_a8w4 deepseek_v3_a8w4 kimi_k2_a8w4 qwen3_235b_a8w4 gpt_oss_120b_a8w4 gpt_oss_20b_a8w4)
    while read -r file; do configs+=("$file"); done < <(./build/tests/megamoe_gpu_tests --write-configs build/test-configs)
    for c in "${configs[@]}"; do ./build/megamoe-precompile --config "$c" --all --path all -j 16 | tail -1; done
    # The cases but the EP ones take longer than a call: SUITE_PART=k of SUITE_PARTS=n runs every
    # n-th case from the k-th (each as a wildcard of its longest stretch without a comma, since a
    # comma separates test specs), so that n calls run them all.
    # SUITE_CASES=file: a spec file of its own instead (one case or wildcard a line).
    if [ -n "${SUITE_CASES:-}" ]; then cp "$SUITE_CASES" build/suite-part.txt; else
      ./build/tests/megamoe_gpu_tests "~[ep]" --list-test-names-only | python3 tools/suite_part.py \
        "${SUITE_PART:-1}" "${SUITE_PARTS:-1}" >build/suite-part.txt
    fi
    step "${SUITE_BOUND:-480}" ./build/tests/megamoe_gpu_tests -f build/suite-part.txt --durations yes
    echo "gpu_session status $status (suite, part ${SUITE_PART:-1} of ${SUITE_PARTS:-1})"
    exit $status
  fi
  if [ "$mode" = tables ]; then
    card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
    case "$card" in *H200*) other="NVIDIA H100 80GB HBM3" ;; *) other="NVIDIA H200" ;; esac
    other=${TABLE_AGAINST:-$other}
    echo "card: $card; against: $other"
    # TABLE_DIR: where the tuner writes (a carried folder with an earlier call's journals resumes
    # them); everything in it comes back packed as $OUT/tables.tgz (the device tool returns 8 files).
    dir=${TABLE_DIR:-$out/tables}
    mkdir -p "$dir"
    for c in ${TABLE_MODELS:-kimi_k3_a8w4 kimi_k2_a8w4 deepseek_v3_a8w4 qwen3_235b_a8w4 gpt_oss_120b_a8w4 gpt_oss_20b_a8w4}; do
      # checked and timed on the experts a rank holds where the table's keys count, as tuned
      keys=$(python3 -c "import json; print(json.load(open('configs/$c.json')).get('bucket_keys', {}).get('experts_per_rank', ''))")
      per_rank=(); [ -n "$keys" ] && per_rank=(--experts-per-rank "$keys")
      tables=$dir/$c.json
      if [ "${TABLE_TUNE:-1}" = 0 ]; then
        tables=$c  # the shipped tables: this card's against the other's
        step 150 ./build/megamoe-precompile --config "$c" --all -j 16  # every table the config holds
      else
        step "${TABLE_BOUND:-300}" ./build/megamoe-tune --config "$c" --out "$tables" -j 16 --minutes "${TABLE_MINUTES:-4}"
      fi
      if [ "${TABLE_CHECK:-1}" != 0 ]; then
        step 150 ./build/megamoe-run --config "$tables" "${per_rank[@]}" --check --ref-tokens 32 \
          --bs 1,8,32,64,128,256,512,1024,2048,4096,8192
      fi
      step 200 ./build/megamoe-bench --world 1 --config "$tables" "${per_rank[@]}" --reps 10 \
        --bs 1,8,32,64,128,256,512,1024,2048,4096,8192 --against "$c" --against-bucket-table "$other" \
        --json "$dir/$c.bench.json"
    done
    tar czf "$out/tables.tgz" -C "$dir" . && [ "$dir" = "$out/tables" ] && rm -rf "$dir"
    echo "gpu_session status $status (tables on $card)"
    exit $status
  fi
  if [ "$mode" = configs ]; then
    every=1,8,32,64,128,256,512,1024,2048,4096,8192
    for c in kimi_k3_a8w4 kimi_k2_a8w4 deepseek_v3_a8w4 qwen3_235b_a8w4 gpt_oss_120b_a8w4 gpt_oss_20b_a8w4 generic_a8w4; do
      per_rank=(); case "$c" in kimi_k3_*) per_rank=(--experts-per-rank 112) ;; kimi_k2_*) per_rank=(--experts-per-rank 48) ;; esac
      step 120 ./build/megamoe-precompile --config "$c" --all -j 16
      step 150 ./build/megamoe-run --config "$c" "${per_rank[@]}" --check --ref-tokens 64 --bs "$every"
    done
    for p in portable tensor_core hopper; do
      step 120 ./build/megamoe-precompile --config generic_a8w4 --all --world 2 --path "$p" -j 16
      step 90 ./build/megamoe-run --config generic_a8w4 --world 4 --path "$p" --check --ref-tokens 32 --bs 1,64,1024
      step 90 ./build/megamoe-run --config generic_a8w4 --world 4 --path "$p" --serial --check --ref-tokens 32 --bs 1,64,1024
    done
    echo "gpu_session status $status (configs)"
    exit $status
  fi
  if [ "$mode" = ep-tools ]; then
    for w in 2 8; do
      step 150 ./build/megamoe-run --config kimi_k3_a8w4 --experts-per-rank 112 --world "$w" --check --bs 1,8,128,1024,8192 --ref-tokens 16
    done
    step 100 ./build/megamoe-run --config kimi_k3_a8w4 --experts-per-rank 112 --world 4 --serial --check --bs 1,128,1024 --ref-tokens 16
    step 200 ./build/megamoe-run --config kimi_k3_a8w4 --world 16 --check --bs 1,8,128,1024 --ref-tokens 8  # the model at EP16
    step 150 ./build/megamoe-bench --world 4 --config kimi_k3_a8w4 --experts-per-rank 112 --bs 1,8,128,1024,8192 --reps 5 --json "$out/bench_ep4.json"
    echo "gpu_session status $status (ep-tools)"
    exit $status
  fi
  step 420 ./build/tests/megamoe_gpu_tests "~[ep]" --durations yes
  step 200 ./build/megamoe-run --config kimi_k3_a8w4 --experts-per-rank 112 --check --bs 1,8,32,64,128,256,512,1024,2048,4096,8192
  step 200 ./build/megamoe-bench --world 1 --config kimi_k3_a8w4 --experts-per-rank 112 --json "$out/bench_kimi.json"
  step 60 python3 tools/bench/plot.py "$out/bench_kimi.json"  # the picture beside the JSON
  if [ "$mode" = quick ]; then echo "gpu_session status $status (quick)"; exit $status; fi
  step 300 ./build/megamoe-bench --world 1 --config kimi_k3_a8w4 --experts-per-rank 112 --against generic_a8w4 --reps 10 --json "$out/bench_against.json"
  step 60 python3 tools/bench/plot.py "$out/bench_against.json"
  step 200 ./build/megamoe-run --config kimi_k3_a8w4 --experts-per-rank 112 --check --path portable --bs 1,128,8192
  step 200 ./build/megamoe-run --config generic_a8w4 --check --bs 1,64,4096
  echo "== resources of the expert-GEMM kernels"
  for f in .megamoe-cache/v1/megamoe_stage*_bm1*/kernel.cubin; do
    echo "$f"; cuobjdump -res-usage "$f" 2>&1 | grep -E "REG|STACK|SHARED" | head -2
    cuobjdump -sass "$f" 2>&1 | grep -oE "\b(QGMMA|HGMMA|QMMA|HMMA|UTMALDG|UBLKCP|LDL|STL|PRMT|FFMA)\b" | sort | uniq -c | tr '\n' ' '; echo
  done
  step 200 ./build/megamoe-run --config kimi_k3_a8w4 --experts-per-rank 112 --check --route holes --bs 1000 --save-routing "$out/holes.routing"
  step 200 ./build/megamoe-run --config kimi_k3_a8w4 --experts-per-rank 112 --check --routing-file "$out/holes.routing"
  echo "== cold compile, then cache hit (-j 1, fresh cache folder)"
  rm -rf /tmp/megamoe-cold
  MEGAMOE_CACHE_DIR=/tmp/megamoe-cold step 300 ./build/megamoe-precompile --config kimi_k3_a8w4 --all -j 1
  MEGAMOE_CACHE_DIR=/tmp/megamoe-cold step 100 ./build/megamoe-precompile --config kimi_k3_a8w4 --all -j 1
  echo "gpu_session status $status"
  exit $status
} 2>&1 | tee "$out/gpu_session.log"
exit "${PIPESTATUS[0]}"
