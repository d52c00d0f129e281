#!/usr/bin/env bash
# The installed package as a user meets it: `cmake --install` kiln from
# BUILD_DIR into a temporary prefix, then build every program in samples/
# with its own CMakeLists (find_package(kiln) only; no LLVM, MLIR or kiln
# source directory on any include path) and run it; and build the C sample
# a second time through pkg-config (kiln.pc). Prints how long compiling a
# file that includes kiln/kiln.hpp took.
#   run_samples.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
model=$src/samples/models/classifier.mlir

cmake --install "$build" --prefix "$prefix" > "$tmp/install.log"
for f in include/kiln/kiln_c.h include/kiln/kiln.hpp include/kiln/version.h bin/kiln \
         lib/cmake/kiln/kilnConfig.cmake lib/pkgconfig/kiln.pc; do
  [ -e "$prefix/$f" ] || { echo "not installed: $f"; cat "$tmp/install.log"; exit 1; }
done
lib=$(ls "$prefix"/lib/libkiln.so.*.*.* 2>/dev/null | head -1)
[ -n "$lib" ] || { echo "libkiln.so.X.Y.Z not installed"; exit 1; }
# libkiln.so exports the C API and nothing else but the storage of MLIR's
# name-based type IDs, which must be one object with libMLIR.so's
# (api/c/libkiln.map) — and must be there.
exported=$(nm -D --defined-only "$lib")
typeids='^_Z(GV)?ZN4mlir6detail14TypeIDResolver'
others=$(awk -v t="$typeids" '$3 !~ /^kiln_/ && $3 != "KILN_0" && $3 !~ t {print $3}' <<<"$exported")
[ -z "$others" ] || { echo "libkiln.so exports more than kiln_* and MLIR's type-ID storage:"; echo "$others" | head; exit 1; }
grep -q 'TypeIDResolverINS_7OpTrait12ConstantLike' <<<"$exported" ||
  { echo "libkiln.so does not export MLIR's type-ID storage for op traits (api/c/libkiln.map)"; exit 1; }
# The public headers include nothing but the C/C++ standard library and each other.
if grep -hE '^#include' "$prefix"/include/kiln/*.h* | grep -vE '^#include <[a-z_]+(\.h)?>|^#include "kiln/'; then
  echo "a public header includes something besides the standard library"; exit 1
fi

for s in run_model prewarm op_modes profile c_api; do
  if ! cmake -S "$src/samples/$s" -B "$tmp/build-$s" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON > "$tmp/$s.log" 2>&1 ||
     ! cmake --build "$tmp/build-$s" >> "$tmp/$s.log" 2>&1; then
    echo "sample $s did not build against the installed kiln:"; cat "$tmp/$s.log"; exit 1
  fi
  if grep -oE '(-I|-isystem) ?[^ "]+' "$tmp/build-$s/compile_commands.json" | grep -v "$prefix/include" | grep -q .; then
    echo "sample $s compiles with an LLVM/MLIR or kiln source include path:"; cat "$tmp/build-$s/compile_commands.json"; exit 1
  fi
done
echo "== built 5 samples against $prefix with find_package(kiln)"

# Compile time of a file that includes the C++ API.
start=$(date +%s%N)
c++ -std=c++17 -fsyntax-only -I"$prefix/include" "$src/samples/run_model/main.cpp" -DKILN_SAMPLE_MODEL='""'
echo "== compiling samples/run_model/main.cpp (kiln/kiln.hpp): $(( ($(date +%s%N) - start) / 1000000 )) ms"

export KILN_CACHE=off
"$tmp/build-run_model/run_model" "$model"
"$tmp/build-op_modes/op_modes" "$model"
mkdir -p "$tmp/profile"
"$tmp/build-profile/profile" "$tmp/profile" "$model" | tail -3
[ -s "$tmp/profile/trace.json" ] && [ -s "$tmp/profile/report.html" ] || { echo "profile wrote no files"; exit 1; }
unset KILN_CACHE
"$tmp/build-prewarm/prewarm" compile "$tmp/cache" "$model"
"$tmp/build-prewarm/prewarm" run "$tmp/cache" "$model"
"$tmp/build-c_api/c_api" "$model"

# The library compiles what the CLI compiles, byte for byte (placement fixed,
# so nothing depends on timing): a matmul with parallel tiles, which
# libkiln.so once compiled without them (api/c/libkiln.map).
parallel=$src/tests/install/parallel-matmul.mlir
KILN_OP_MODE=measure=off "$tmp/build-prewarm/prewarm" compile "$tmp/cache-lib" "$parallel" > /dev/null
"$prefix/bin/kiln" prewarm "$parallel" --placement fixed --cache-dir "$tmp/cache-cli" > /dev/null
lib_entries=$(cd "$tmp/cache-lib" && find . -name '*.kiln' | sort)
cli_entries=$(cd "$tmp/cache-cli" && find . -name '*.kiln' | sort)
[ -n "$cli_entries" ] && [ "$lib_entries" = "$cli_entries" ] ||
  { echo "the library and the CLI wrote different cache entries: [$lib_entries] [$cli_entries]"; exit 1; }
for e in $cli_entries; do
  cmp -s "$tmp/cache-lib/$e" "$tmp/cache-cli/$e" ||
    { echo "the library compiled other code than the CLI for $parallel ($e)"; exit 1; }
done
echo "== the library and the CLI compile the same code"

# The C sample through pkg-config, as a Makefile would build it.
PKG_CONFIG_PATH="$prefix/lib/pkgconfig" cc -std=c11 -o "$tmp/c_api_pc" "$src/samples/c_api/main.c" \
  -DKILN_SAMPLE_MODEL="\"$model\"" $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs kiln)
"$tmp/c_api_pc" "$model" > /dev/null
echo "== the C sample built with pkg-config runs"
"$prefix/bin/kiln" --version > /dev/null 2>&1 || "$prefix/bin/kiln" models > /dev/null
echo "== samples passed"
