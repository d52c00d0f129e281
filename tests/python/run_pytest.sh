#!/usr/bin/env bash
# Runs the Python package's tests against the build tree's package
# (PYTHONPATH=BUILD/python):
# - test_kiln.py in the venv tools/setup.sh makes (numpy, pytest, nanobind,
#   scikit-build-core from PyPI; made here if missing);
# - test_torch.py in the peers venv (torch, torch-mlir, torchvision,
#   transformers, onnx: bench/peers/setup.sh), with pytest added to it if
#   missing; without that venv, or where its Python cannot load the
#   extension, it is skipped, saying so.
# Usage: run_pytest.sh BUILD_DIR
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/kiln
venv=${KILN_PYTHON_VENV:-$cache/python-venv}
if ! "$venv/bin/python" -c "import numpy, pytest" 2> /dev/null; then
  if ! { python3 -m venv "$venv" && "$venv/bin/pip" install -q --disable-pip-version-check \
           numpy pytest nanobind scikit-build-core; } > "$venv.log" 2>&1; then
    echo "SKIPPED: cannot make the venv for the Python tests from PyPI (see $venv.log):"
    tail -3 "$venv.log"
    exit 0
  fi
fi
export PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}"
"$venv/bin/python" -m pytest -q -p no:cacheprovider "$here/test_kiln.py" "$here/test_torch.py" || exit 1

peers=${KILN_PEERS_VENV:-$cache/peers-venv}
if [ ! -x "$peers/bin/python" ] || ! "$peers/bin/python" -c "import torch, torch_mlir" 2> /dev/null; then
  echo "note: test_torch.py (torch.compile, load_onnx) skipped: no venv with torch and torch-mlir at $peers (bench/peers/setup.sh makes it)"
  exit 0
fi
if ! "$peers/bin/python" -c "import kiln" 2> /dev/null; then
  echo "note: test_torch.py skipped: the peers venv's Python cannot load the package built for $("$venv/bin/python" -V)"
  exit 0
fi
if ! "$peers/bin/python" -c "import pytest" 2> /dev/null; then
  "$peers/bin/pip" install -q --disable-pip-version-check pytest > /dev/null 2>&1 ||
    { echo "note: test_torch.py skipped: cannot add pytest to $peers"; exit 0; }
fi
exec "$peers/bin/python" -m pytest -q -p no:cacheprovider "$here/test_torch.py"
