#!/usr/bin/env bash
# On a lent GPU machine: Nsight Compute source-level samples of the Stage1 and Stage2 kernels of
# one Kimi-K3 call per batch size, summarised by role (tools/profile/ncu_source_regions.py: the
# consumers' main loop, the producer, the storers), with each kernel's issue, pipe and memory
# use. The CSVs land under $OUT (or /tmp/megamoe-profile), also packed as one profile.tgz (the
# device tool brings back at most 8 files), so they can be summarised again elsewhere.
# Usage: bash tools/profile/stages.sh [BS ...]   (default: 128 8192)
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export MEGAMOE_CACHE_DIR="$PWD/.megamoe-cache" NCCL_NVLS_ENABLE=0
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -z "$ncu" ]; then echo "stages.sh: no ncu on this machine" >&2; exit 1; fi
out=${OUT:-/tmp/megamoe-profile}
mkdir -p "$out"
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(128 8192)
status=0
for bs in "${sizes[@]}"; do
  for kernel in stage1_hopper stage2_hopper; do
    rep="$out/${kernel}_bs$bs"
    echo "== $kernel, bs $bs"
    if ! "$ncu" --clock-control none --section SpeedOfLight --section WarpStateStats --section SourceCounters \
        --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
        --import-source no -f -o "$rep" -k "regex:$kernel" --launch-count 1 \
        ./build/megamoe-run --config kimi_k3_a8w4 --experts-per-rank 112 --bs "$bs" >"$rep.log" 2>&1; then
      echo "!! ncu failed, see $rep.log"; status=1; continue
    fi
    "$ncu" -i "$rep.ncu-rep" --page details 2>&1 | grep -E "Duration|DRAM Throughput|L2 Cache Throughput|Compute \(SM\)|Issue Slots|Executed Ipc|Mem Busy|Max Bandwidth|L2 Hit Rate"
    "$ncu" -i "$rep.ncu-rep" --page source --csv --print-source sass >"$rep.csv" 2>&1
    rm -f "$rep.ncu-rep"
    if command -v python3 >/dev/null; then
      python3 tools/profile/ncu_source_regions.py "$rep.csv" --top 8 || status=1
    else
      echo "(no python3 here: summarise $rep.csv with tools/profile/ncu_source_regions.py elsewhere)"
    fi
  done
done
(cd "$out" && tar czf profile.tgz ./*.csv ./*.log 2>/dev/null && rm -f ./*.csv ./*.log) || status=1
exit $status
