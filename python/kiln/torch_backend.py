"""``torch.compile(model, backend="kiln")``.

TorchDynamo hands kiln each captured FX graph; AOTAutograd lowers it to ATen
ops (functional, with the parameters as inputs); torch-mlir's FX importer
turns that into TOSA, which kiln loads and JIT-compiles on the first call.
Graphs or ops that torch-mlir or kiln cannot take run in PyTorch instead
(eager), with one warning per reason. Tensors cross as DLPack without
copies; results come back as torch tensors over kiln's memory.

Importing this module registers the backend name "kiln" with TorchDynamo
(the package's entry point does the same for installed wheels), so
``torch.compile(m, backend="kiln")`` works; ``kiln_backend`` can also be
passed directly. Options: ``torch.compile(m, backend="kiln",
options={"runtime": rt})`` to use a given kiln.Runtime.
"""

from __future__ import annotations

import re
import threading
import warnings
from typing import Any, Callable, List, Optional

import torch

import kiln

_warned: set = set()
_warned_lock = threading.Lock()

#: Counters for tests and users: graphs kiln runs / graphs left to PyTorch.
stats = {"graphs_compiled": 0, "graphs_fallback": 0}


def _warn_once(reason: str) -> None:
    with _warned_lock:
        if reason in _warned:
            return
        _warned.add(reason)
    warnings.warn(f"kiln torch.compile backend: {reason}; this graph runs in PyTorch", RuntimeWarning, stacklevel=3)


def _reason(e: BaseException) -> str:
    text = str(e).strip()
    first = text.splitlines()[0] if text else ""
    # torch-mlir names the op it could not lower further down its diagnostics.
    op = re.search(r'name = "(torch\.[\w.]+)"', text) or re.search(r"operation '([\w.]+)'", text)
    return f"{type(e).__name__}: {first}" [:240] + (f" (op {op.group(1)})" if op else "")


def _to_kiln(gm: torch.fx.GraphModule, runtime: "kiln.Runtime") -> Optional[Callable]:
    """A callable running gm's ATen graph on kiln, or None (warned) when
    torch-mlir or kiln cannot take it."""
    try:
        from torch_mlir import fx
    except ImportError as e:
        _warn_once(f"torch-mlir is not installed (pip install torch-mlir): {e}")
        return None
    try:
        mlir = fx.stateless_fx_import(gm, output_type="tosa", model_name="main")
        module = runtime.load(str(mlir), name="torch.compile graph")
    except Exception as e:  # the importer's errors are many kinds
        _warn_once(f"torch-mlir or kiln cannot take the graph ({_reason(e)})")
        return None
    fn = module.main
    state = {"eager": False}

    def run(args: List[Any]):
        if not state["eager"]:
            inputs = [a.detach() if isinstance(a, torch.Tensor) and a.requires_grad else a for a in args]
            args.clear()
            try:
                return list(fn.run(inputs, output="torch"))
            except kiln.Error as e:
                # First calls compile: what kiln cannot compile runs in PyTorch.
                _warn_once(f"kiln failed on the graph ({_reason(e)})")
                state["eager"] = True
                stats["graphs_fallback"] += 1
                stats["graphs_compiled"] -= 1
                args = inputs
        out = gm(*args)
        return list(out) if isinstance(out, (list, tuple)) else [out]

    run._boxed_call = True  # AOTAutograd passes the argument list itself
    stats["graphs_compiled"] += 1
    return run


def kiln_backend(gm: torch.fx.GraphModule, example_inputs: List[torch.Tensor], **options: Any):
    """The TorchDynamo backend: kiln for what it can run, PyTorch for the rest."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    runtime = options.get("runtime") or kiln.default_runtime()

    def forward(fx_gm: torch.fx.GraphModule, inputs: List[torch.Tensor]):
        compiled = _to_kiln(fx_gm, runtime)
        if compiled is None:
            stats["graphs_fallback"] += 1
            return make_boxed_func(fx_gm.forward)
        return compiled

    def backward(fx_gm: torch.fx.GraphModule, inputs: List[torch.Tensor]):
        return make_boxed_func(fx_gm.forward)  # gradients run in PyTorch

    try:
        from torch_mlir.fx import get_decomposition_table
        decompositions = get_decomposition_table()
    except ImportError:
        decompositions = None  # _to_kiln warns that torch-mlir is missing
    return aot_autograd(fw_compiler=forward, bw_compiler=backward, decompositions=decompositions)(gm, example_inputs)


def register() -> None:
    """Registers "kiln" with TorchDynamo (done on import)."""
    from torch._dynamo import list_backends
    from torch._dynamo.backends.registry import register_backend

    if "kiln" not in list_backends(exclude_tags=()):
        register_backend(name="kiln")(kiln_backend)


register()
