#!/usr/bin/env bash
# Installs the build tree into a fresh prefix, then configures, builds and runs a consumer that
# finds it with find_package(megamoe). Usage: consumer_test.sh BUILD_DIR
set -euo pipefail
build=$1
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/megamoe-consumer-XXXXXX)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" --component cpp >/dev/null
cmake -S "$here/consumer" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" \
      -DCUDAToolkit_ROOT=/usr/local/cuda >/dev/null
ninja -C "$work/build" >/dev/null
"$work/build/consumer"
