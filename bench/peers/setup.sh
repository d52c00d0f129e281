#!/usr/bin/env bash
# Creates the Python environment the peer benchmarks and model exports use:
# PyTorch + torchvision + transformers (reference models and a peer), torch-mlir (the
# exporter to TOSA / linalg), onnx + onnxruntime (a peer). kiln itself never
# needs Python; nothing here is committed or required to build or test.
#
#   bench/peers/setup.sh            # venv at $KILN_PEERS_VENV (default ~/.cache/kiln/peers-venv)
set -euo pipefail
VENV="${KILN_PEERS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln/peers-venv}"
PY="${PYTHON:-python3}"
if [[ ! -x "$VENV/bin/python" ]]; then
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/pip" install --quiet --upgrade pip
"$VENV/bin/pip" install --quiet torch torchvision torch-mlir onnx onnxruntime openvino numpy transformers
"$VENV/bin/python" - <<'PY'
import importlib
for m in ("torch", "torchvision", "torch_mlir", "onnx", "onnxruntime", "numpy", "transformers"):
    mod = importlib.import_module(m)
    print(f"{m:12s} {getattr(mod, '__version__', '?')}")
PY
echo "peers venv: $VENV"
