#!/usr/bin/env bash
# Runs the Python package's tests against the build tree's package
# (PYTHONPATH=BUILD/python):
# - test_kiln.py with the Python the package was built for (CMake's
#   Python_EXECUTABLE: the venv tools/setup.sh makes from PyPI, with numpy,
#   pytest, nanobind and scikit-build-core);
# - test_torch.py in the peers venv (torch, torch-mlir, torchvision,
#   transformers, onnx: bench/peers/setup.sh), with pytest added to it if
#   missing; without that venv, or where its Python cannot load the
#   extension, it is skipped, saying so.
# Usage: run_pytest.sh BUILD_DIR PYTHON
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" && pwd)
python=$2
cache=${XDG_CACHE_HOME:-$HOME/.cache}/kiln
if ! "$python" -c "import numpy, pytest" 2> /dev/null; then
  echo "SKIPPED: $python, which the package was built with, lacks numpy or pytest (tools/setup.sh makes a venv with both)"
  exit 0
fi
export PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}"
"$python" -m pytest -q -p no:cacheprovider "$here/test_kiln.py" "$here/test_torch.py" || exit 1

peers=${KILN_PEERS_VENV:-$cache/peers-venv}
if [ ! -x "$peers/bin/python" ] || ! "$peers/bin/python" -c "import torch, torch_mlir" 2> /dev/null; then
  echo "note: test_torch.py (torch.compile, load_onnx) skipped: no venv with torch and torch-mlir at $peers (bench/peers/setup.sh makes it)"
  exit 0
fi
if ! "$peers/bin/python" -c "import kiln" 2> /dev/null; then
  echo "note: test_torch.py skipped: the peers venv's Python cannot load the package built for $("$python" -V)"
  exit 0
fi
if ! "$peers/bin/python" -c "import pytest" 2> /dev/null; then
  "$peers/bin/pip" install -q --disable-pip-version-check pytest > /dev/null 2>&1 ||
    { echo "note: test_torch.py skipped: cannot add pytest to $peers"; exit 0; }
fi
exec "$peers/bin/python" -m pytest -q -p no:cacheprovider "$here/test_torch.py"
