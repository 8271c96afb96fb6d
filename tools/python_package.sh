#!/usr/bin/env bash
# Builds the Python package and installs it, with what its tests need (numpy, pytest; matplotlib
# for tools/bench/plot.py's test; lizard for the functions' size check; nanobind and scikit-build-core to build), into the virtual
# environment build/venv: `pip install .` from
# the repository root, its CMake build kept in build/python so that a second run is quick.
# Needs the C++ build's dependencies (tools/setup.sh); installs python3-venv and python3-dev
# where missing.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
python3 -c "import ensurepip" 2>/dev/null || need+=(python3-venv)
python3 - <<'PY' || need+=(python3-dev)
import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))
PY
if [ ${#need[@]} -gt 0 ]; then
  echo "python: installing ${need[*]}"
  if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
[ -x build/venv/bin/python ] || python3 -m venv build/venv
py=build/venv/bin/python
$py -m pip install -q --disable-pip-version-check numpy pytest matplotlib lizard "nanobind>=2.0" "scikit-build-core>=0.10"
echo "python: building and installing the package (pip install ., CMake build in build/python)"
start=$(date +%s)
$py -m pip install -q --disable-pip-version-check --no-build-isolation -C build-dir=build/python .
echo "python: megamoe $($py -c 'import megamoe; print(megamoe.__version__)') installed in build/venv ($(( $(date +%s) - start )) s)"
