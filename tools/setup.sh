#!/usr/bin/env bash
# Installs the Debian packages kiln needs (only the missing ones).
set -euo pipefail
PACKAGES=(
  cmake ninja-build ccache g++ pkg-config
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools   # LLVM/MLIR 22, lit, FileCheck
  libtbb-dev libeigen3-dev                                  # executor, CPU kernels
  libgtest-dev libbenchmark-dev libcli11-dev                # tests, benchmarks, CLI
  libxxhash-dev nlohmann-json3-dev                          # cache keys/checksums, cache metadata
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc libboost-dev  # kiln serve
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "kiln setup: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
  $SUDO apt-get update -qq || echo "kiln setup: apt-get update failed; trying the cached package lists"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi

# The Python package (python/) builds with nanobind, and its tests run with
# numpy and pytest: a venv made from PyPI. Without it (no network), kiln
# builds and tests without the Python package, saying so.
venv=${KILN_PYTHON_VENV:-$HOME/.cache/kiln/python-venv}
if ! "$venv/bin/python" -c "import nanobind, numpy, pytest" 2> /dev/null; then
  echo "kiln setup: making $venv (numpy, pytest, nanobind, scikit-build-core from PyPI)"
  mkdir -p "$(dirname "$venv")"  # a fresh machine has no ~/.cache/kiln yet (the log goes beside the venv)
  if ! { python3 -m venv "$venv" && "$venv/bin/pip" install -q --disable-pip-version-check \
           numpy pytest nanobind scikit-build-core; } > "$venv.log" 2>&1; then
    echo "kiln setup: could not make $venv (see $venv.log); the Python package will not be built"
  fi
fi
