#!/usr/bin/env bash
# Builds kiln (installing what is missing) and runs every test: gtest suites
# and lit/FileCheck tests, through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/build.sh "$@"
ctest --test-dir build --output-on-failure -j2
