#!/usr/bin/env bash
# Installs what megamoe builds with (where missing) and builds it into build/.
# Debian packages: cmake, ninja, python3 (a test checks a generated header), fmt, nlohmann-json,
# Catch2, xxHash, and HIP's headers and hipRTC for the hip backend. The CUDA toolkit is expected at /usr/local/cuda.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v cmake >/dev/null || need+=(cmake)
command -v ninja >/dev/null || need+=(ninja-build)
command -v python3 >/dev/null || need+=(python3)
[ -f /usr/include/fmt/format.h ] || need+=(libfmt-dev)
[ -f /usr/include/nlohmann/json.hpp ] || need+=(nlohmann-json3-dev)
[ -f /usr/include/catch2/catch.hpp ] || need+=(catch2)
[ -f /usr/include/xxhash.h ] || need+=(libxxhash-dev)
[ -f /usr/include/hip/hiprtc.h ] || need+=(libamdhip64-dev)
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}"
  if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if [ ! -x /usr/local/cuda/bin/nvcc ] && [ ! -f /usr/local/cuda/include/nvrtc.h ]; then
  echo "setup: the CUDA toolkit (NVRTC) is needed at /usr/local/cuda" >&2
  exit 1
fi

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUDAToolkit_ROOT=/usr/local/cuda >/dev/null
ninja -C build -j "$(nproc)"
