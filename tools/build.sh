#!/usr/bin/env bash
# Installs missing dependencies, configures and builds kiln into ./build.
# Extra arguments go to CMake (e.g. -DCMAKE_BUILD_TYPE=Debug).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
cmake -S . -B build -G Ninja "$@" > build.log 2>&1 || { cat build.log; exit 1; }
ninja -C build
