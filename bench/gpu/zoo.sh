#!/usr/bin/env bash
# Fills .gpu-zoo with the zoo models bench/gpu/run.sh runs on a GPU and on the
# host (outputs compared): tiny as exported, and small CNNs whose weights are
# rounded to 4 mantissa bits (bench/gpu/zoo_round.py) and sent as xz'd MLIR
# bytecode, so that they fit beside the pack in the device tool's 64 MiB.
# Needs the zoo (bench/models/export.py) and a kiln build (kiln-opt).
# Usage: bench/gpu/zoo.sh [BUILD_DIR] [MODELS]   (default: build, "tiny shufflenet_v2_x1_0 mobilenet_v2")
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
models=${2:-tiny shufflenet_v2_x1_0 mobilenet_v2}
zoo=${KILN_ZOO_DIR:-$HOME/.cache/kiln/zoo}
out=.gpu-zoo
rm -rf "$out"
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for m in $models; do
  src="$zoo/$m/tosa.mlir"
  [[ -f $src ]] || { echo "zoo.sh: $src is missing (bench/models/export.py --models $m)" >&2; exit 1; }
  cp "$zoo/$m/x.npy" "$out/$m.npy"
  if [[ $m == tiny ]]; then
    cp "$src" "$out/$m.mlir"
  else
    python3 bench/gpu/zoo_round.py "$src" "$work/$m.mlir"
    "$build/bin/kiln-opt" --emit-bytecode "$work/$m.mlir" -o "$work/$m.mlirbc"
    xz -9 -T1 -c "$work/$m.mlirbc" >"$out/$m.mlirbc.xz"
  fi
done
du -sh "$out"/*
