#!/usr/bin/env bash
# Packs what bench/gpu/run.sh needs on a GPU machine that cannot build kiln
# (no LLVM/MLIR 22, no package archive): the kiln CLI, kiln_gpu_tests and
# every shared library they load, glibc and its loader included (so the
# pack runs whatever glibc the GPU machine has), into one xz tarball small
# enough to travel with the working tree (the device tool's 64 MiB).
# Usage: bench/gpu/pack.sh [BUILD_DIR] [OUT_FILE]   (default: build, .gpu-pack/kiln-gpu.tar.xz)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
out=${2:-.gpu-pack/kiln-gpu.tar.xz}
bins=("$build/bin/kiln" "$build/tests/kiln_gpu_tests")
for b in "${bins[@]}"; do
  [[ -x $b ]] || { echo "pack.sh: $b is missing: build kiln first (./tools/build.sh)" >&2; exit 1; }
done
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/lib"
cp "${bins[@]}" "$stage/"
# Every library the binaries load, resolved, plus glibc's pieces that the
# CUDA driver (dlopen'ed at run time) may load in turn.
ldd "${bins[@]}" | awk '/=> \//{print $3} /^\t\/.*ld-linux/{print $1}' | sort -u >"$stage/libs.txt"
for l in libpthread.so.0 libdl.so.2 librt.so.1 libm.so.6 libc.so.6; do
  p=$(ldconfig -p | awk -v n="$l" '$1 == n && /x86-64/ {print $NF; exit}')
  [[ -n $p ]] && echo "$p" >>"$stage/libs.txt"
done
sort -u "$stage/libs.txt" | while read -r lib; do cp -L "$lib" "$stage/lib/"; done
rm "$stage/libs.txt"
# libLLVM links Z3 (the static analyzer's solver) and, through libxml2, ICU's
# 31 MB data table; kiln calls neither (libLLVM binds Z3 lazily; ICU reads its
# table only to convert text encodings). Empty libraries of the same names
# stand in for them, which leaves room in the device tool's 64 MiB for
# models (bench/gpu/zoo.sh). KILN_PACK_FULL=1 packs the real ones.
if [[ -z ${KILN_PACK_FULL:-} ]] && command -v cc >/dev/null; then
  for l in "$stage"/lib/libz3.so.* "$stage"/lib/libicudata.so.*; do
    [[ -f $l ]] || continue
    name=$(basename "$l")
    src="$stage/empty.c"
    : >"$src"
    # ICU's libicuuc refers to the table's symbol (icudtNN_dat) at load.
    if [[ $name == libicudata.so.* ]]; then
      v=${name#libicudata.so.}
      v=${v%%.*}
      echo "const char icudt${v}_dat[64] __attribute__((aligned(16))) = {0};" >"$src"
    fi
    cc -shared -fPIC -o "$l" -Wl,-soname,"$name" "$src"
    rm "$src"
  done
fi
strip --strip-unneeded "$stage"/kiln "$stage"/kiln_gpu_tests 2>/dev/null || true
mkdir -p "$(dirname "$out")"
tar -C "$stage" -cf - . | xz -T0 -9 --lzma2=preset=9,dict=128MiB >"$out.tmp"
mv "$out.tmp" "$out"
size=$(stat -c %s "$out")
echo "pack.sh: $out: $((size / 1024 / 1024)) MiB ($(ls "$stage/lib" | wc -l) libraries)"
if ((size > 62 * 1024 * 1024)); then
  echo "pack.sh: warning: over 62 MiB; with the working tree it may not fit the device tool's 64 MiB" >&2
fi
