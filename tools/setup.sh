#!/usr/bin/env bash
# Installs what megamoe builds with (where missing) and builds it into build/: every target, or
# only the ninja targets named (tools/main.sh builds its two tools, not the test suites).
# Debian packages: cmake, ninja, python3 (a test checks a generated header), fmt, nlohmann-json,
# Catch2, xxHash, CLI11 (the tools' flags), and HIP's headers and hipRTC for the hip backend. The CUDA toolkit is expected at /usr/local/cuda.
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
[ -f /usr/include/CLI/CLI.hpp ] || need+=(libcli11-dev)
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

# NVSHMEM (the nvshmem transport, optional): the nvidia-nvshmem-cu13 wheel's headers and libraries
# in build/deps/nvshmem, where the build finds them (cmake/FindNvshmem.cmake); MEGAMOE_NO_NVSHMEM=1
# skips it, and a machine that cannot reach PyPI builds without the transport.
nvshmem_version=3.4.5
if [ "${MEGAMOE_NO_NVSHMEM:-0}" != 1 ] && [ ! -f build/deps/nvshmem/nvidia/nvshmem/include/nvshmem.h ]; then
  python3 -m pip --version >/dev/null 2>&1 || {
    if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
    $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3-pip >/dev/null
  }
  echo "setup: installing nvidia-nvshmem-cu13 $nvshmem_version into build/deps/nvshmem"
  python3 -m pip install -q --disable-pip-version-check --no-deps --target build/deps/nvshmem \
    "nvidia-nvshmem-cu13==$nvshmem_version" || echo "setup: NVSHMEM not installed: building without the nvshmem transport"
fi

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUDAToolkit_ROOT=/usr/local/cuda >/dev/null
ninja -C build -j "$(nproc)" "$@"
