#!/usr/bin/env bash
# Builds kiln (installing what is missing) and runs every test: the gtest
# suites and lit/FileCheck tests through CTest; then the whole suite again
# under AddressSanitizer + UBSan (leak checks on), and the suites that call
# from many threads under ThreadSanitizer: the host runtime's, the models'
# end to end (tiered execution's swap under concurrent callers, async calls,
# concurrent first calls, eager dispatch from many threads) and the public
# API's (LLVM/MLIR and libtbb are not instrumented). The model zoo
# (kiln_zoo_tests: real models, where bench/models/export.py made them) runs
# once, uninstrumented.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/build.sh "$@"
ctest --test-dir build --output-on-failure -j2

sanitized() {  # name, targets to build ('' = all), CTest regex of the suites to run, extra cmake args...
  local san=$1 targets=$2 suites=$3
  shift 3
  local dir=build-${san}-san
  echo "== tests under -fsanitize=${san}"
  # -O1 -g1 (line tables): what the sanitizers' docs advise, and it compiles
  # in 55-70% of -O2 -g's time (two of the heaviest files under ASan+UBSan).
  cmake -S . -B "$dir" -G Ninja -DKILN_SANITIZE=$san -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
        -DKILN_BUILD_BENCH=OFF "$@" > "$dir.log" 2>&1 || { cat "$dir.log"; exit 1; }
  # shellcheck disable=SC2086  # targets: a list
  ninja -C "$dir" $targets > "$dir.log" 2>&1 || { cat "$dir.log"; exit 1; }
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tools/sanitizers/tsan.supp" \
  ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    ctest --test-dir "$dir" --output-on-failure -j2 ${suites:+-R "$suites"} -E kiln_zoo_tests
}
# ThreadSanitizer: the multi-threaded suites only (the whole library is
# built: their models JIT-compile; ~6 min on 2 cores). Op tests, lit, the
# fuzzer and the server run single calls or through processes (ASan below).
sanitized thread "tests/runtime/all tests/kiln_e2e_tests tests/kiln_cpp_api_tests tests/kiln_capi_test" \
  '^(kiln_runtime_tests|kiln_executor_tests|kiln_e2e_tests|kiln_cpp_api_tests|kiln_capi_test)$' \
  -DKILN_RUNTIME_ONLY=OFF -DKILN_BUILD_SERVER=OFF -DKILN_BUILD_PYTHON=OFF
sanitized address "" "" -DKILN_RUNTIME_ONLY=OFF
