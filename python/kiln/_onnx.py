"""ONNX files to the TOSA MLIR kiln loads, by kiln import's route:
torch-mlir's ONNX importer, then torch-mlir-opt's ONNX -> torch backend ->
TOSA pipelines. The tools are looked for next to this Python, in
$KILN_IMPORT_TOOLS, on $PATH and in the peers venv (as `kiln import` does)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from typing import List

from ._errors import InvalidArgumentError, UnavailableError


def _search_dirs() -> List[str]:
    dirs = [os.path.dirname(sys.executable)]
    if os.environ.get("KILN_IMPORT_TOOLS"):
        dirs.append(os.environ["KILN_IMPORT_TOOLS"])
    dirs += [d for d in os.environ.get("PATH", "").split(os.pathsep) if d]
    venv = os.environ.get("KILN_PEERS_VENV") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "kiln", "peers-venv")
    dirs.append(os.path.join(venv, "bin"))
    return dirs


def _find(tool: str) -> str:
    dirs = _search_dirs()
    found = shutil.which(tool, path=os.pathsep.join(dirs))
    if not found:
        raise UnavailableError(
            f"kiln.load_onnx needs {tool} from torch-mlir (pip install torch-mlir; bench/peers/setup.sh installs "
            f"it), which was not found next to {sys.executable}, in $KILN_IMPORT_TOOLS, on $PATH or in the peers venv",
            "unavailable", "", 7)
    return found


def import_onnx(path: str, timeout: float = 1800) -> bytes:
    """Returns the TOSA MLIR (text) of an ONNX file."""
    if not os.path.isfile(path):
        raise InvalidArgumentError(f"kiln.load_onnx: no such file '{path}'", "invalid argument", "", 1)
    importer = _find("torch-mlir-import-onnx")
    opt = _find("torch-mlir-opt")
    with tempfile.TemporaryDirectory(prefix="kiln-import-") as tmp:
        torch_file = os.path.join(tmp, "torch.mlir")
        tosa_file = os.path.join(tmp, "tosa.mlir")
        for cmd in ([importer, path, "--temp-dir", tmp, "-o", torch_file],
                    [opt, torch_file, "--torch-onnx-to-torch-backend-pipeline",
                     "--torch-backend-to-tosa-backend-pipeline", "-o", tosa_file]):
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
            if r.returncode != 0:
                err = r.stderr.decode(errors="replace").strip().splitlines()[-20:]
                raise InvalidArgumentError(
                    f"kiln.load_onnx: {os.path.basename(cmd[0])} failed on '{path}' (exit {r.returncode}):\n"
                    + "\n".join(err), "invalid argument", "", 1)
        with open(tosa_file, "rb") as f:
            return f.read()
