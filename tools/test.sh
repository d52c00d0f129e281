#!/usr/bin/env bash
# Builds kiln (installing what is missing) and runs every test: the gtest
# suites and lit/FileCheck tests through CTest, then the host-runtime tests
# again under ThreadSanitizer and under AddressSanitizer + UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/build.sh "$@"
ctest --test-dir build --output-on-failure -j2

for san in thread address; do
  dir=build-${san}-san
  echo "== host runtime tests under -fsanitize=${san}"
  cmake -S . -B "$dir" -G Ninja -DKILN_SANITIZE=$san -DKILN_RUNTIME_ONLY=ON \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$dir.log" 2>&1 || { cat "$dir.log"; exit 1; }
  ninja -C "$dir" > "$dir.log" 2>&1 || { cat "$dir.log"; exit 1; }
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tools/sanitizers/tsan.supp" \
  ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1" \
    ctest --test-dir "$dir" --output-on-failure
done
