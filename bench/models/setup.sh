#!/usr/bin/env bash
# The model zoo's Python environment is the peer benchmarks' (torch,
# torchvision, transformers, torch-mlir, onnx, onnxruntime from PyPI).
#   bench/models/setup.sh && ~/.cache/kiln/peers-venv/bin/python bench/models/export.py
exec "$(dirname "$0")/../peers/setup.sh" "$@"
