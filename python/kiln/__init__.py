"""kiln: a JIT-compiling ML runtime, from Python.

    import kiln, numpy as np
    rt = kiln.Runtime(threads=2)
    m = rt.load("model.mlir")             # MLIR (TOSA / linalg), text or bytecode
    y = m(np.ones((1, 3, 224, 224), np.float32))   # JIT-compiles on the first call
    y = m(x=...)                           # inputs by name
    f = m.call_async(x); y = f.result()    # asynchronous
    with kiln.profile(rt) as prof:
        m(x)
    prof.kernels                           # the per-kernel table, rows of plain values

A thin layer over kiln's C API (libkiln.so): arrays cross without copies
where their layout allows, the GIL is released while kiln runs, and errors
are kiln.Error subclasses carrying kiln's code, message and location.
"""

from __future__ import annotations

import json as _json
import os as _os
import threading as _threading
from typing import Any, Dict, Iterable, Mapping, Optional, Union

from . import _kiln
from ._errors import (
    CancelledError,
    CompileError,
    Error,
    InternalError,
    InvalidArgumentError,
    IoError,
    ResourceExhaustedError,
    UnavailableError,
    UnsupportedError,
    _CLASSES,
)

_kiln._set_error_classes(_CLASSES)

Module = _kiln.Module
Function = _kiln.Function
Call = _kiln.Call
TensorInfo = _kiln.TensorInfo
Value = _kiln.Value
Eager = _kiln.Eager

__version__ = _kiln.version()

__all__ = [
    "Runtime", "Module", "Function", "Call", "TensorInfo", "Value", "Eager", "Profile",
    "load", "load_onnx", "profile", "trace", "builtin_models", "default_runtime",
    "Error", "InvalidArgumentError", "UnsupportedError", "CompileError", "IoError",
    "ResourceExhaustedError", "CancelledError", "UnavailableError", "InternalError",
]


def _option_text(name: str, value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if name == "op_mode" and isinstance(value, Mapping):
        return ",".join(f"{op}={mode}" for op, mode in value.items())
    return str(value)


def _is_mlir_text(s: str) -> bool:
    head = s.lstrip()[:200]
    return "\n" in s or head.startswith(("module", "func.func", "#", "//", "!", "\"builtin.module\""))


class Runtime:
    """A kiln runtime: its threads, compile cache and options.

    Keyword options are kiln's runtime options (``kiln_options_set``), e.g.
    ``threads=2, cache_dir="/tmp/kc", op_mode={"tosa.conv2d": "kernel"},
    device="cpu", compile_policy="tiered", call_timeout=5``; those not given
    come from ``$KILN_*`` variables, else defaults. ``close()`` (or ``with``)
    ends it: later calls on its modules raise kiln.InvalidArgumentError.
    """

    def __init__(self, cache_dir: Optional[str] = None, threads: Optional[int] = None,
                 op_mode: Union[None, str, Mapping[str, str]] = None, device: Optional[str] = None,
                 **options: Any) -> None:
        given = dict(cache_dir=cache_dir, threads=threads, op_mode=op_mode, device=device, **options)
        pairs = [(k, _option_text(k, v)) for k, v in given.items() if v is not None]
        self._rt = _kiln._Runtime(pairs)
        self._eager: Optional[Eager] = None

    def load(self, model: Union[str, bytes, "_os.PathLike[str]"], name: str = "<memory>") -> Module:
        """Loads MLIR: a path, MLIR text, or bytes (text or bytecode)."""
        if isinstance(model, (bytes, bytearray, memoryview)):
            return self._rt.load_memory(bytes(model), name)
        if isinstance(model, _os.PathLike):
            return self._rt.load_file(_os.fspath(model))
        if not isinstance(model, str):
            raise TypeError(f"kiln.Runtime.load takes a path, MLIR text or bytes, not {type(model).__name__}")
        if _is_mlir_text(model) and not _os.path.exists(model):
            return self._rt.load_memory(model.encode(), name)
        return self._rt.load_file(model)

    def load_onnx(self, path: Union[str, "_os.PathLike[str]"]) -> Module:
        """Loads an ONNX file through torch-mlir (kiln import's route)."""
        from ._onnx import import_onnx
        return self.load(import_onnx(_os.fspath(path)), name=_os.fspath(path))

    def load_builtin(self, name: str) -> Module:
        """A built-in model ("mlp", "cnn", "resnet50"; see kiln.builtin_models())."""
        return self._rt.load_builtin(name)

    def eager(self) -> Eager:
        """This runtime's eager context (one, made on first use)."""
        if self._eager is None:
            self._eager = Eager(self._rt)
        return self._eager

    def trace(self, fn, *examples) -> Module:
        """Records fn's eager ops on values of the example types as a module.

        ``fn(*values)`` runs once on symbolic values of the examples' types
        (arrays, TensorInfo, or ``(shape, dtype)``) and returns a value or a
        tuple of values made with ``rt.eager().execute(...)``.
        """
        return self.eager().trace(fn, *examples)

    def cache_stats(self) -> Dict[str, Union[int, float]]:
        return self._rt.cache_stats()

    @property
    def target(self) -> str:
        return self._rt.target

    @property
    def closed(self) -> bool:
        return self._rt.closed

    def close(self) -> None:
        self._eager = None
        self._rt.close()

    def __enter__(self) -> "Runtime":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"kiln.Runtime({'closed' if self.closed else ' '.join(self.target.split()[:2])})"


_default: Optional[Runtime] = None
_default_lock = _threading.Lock()


def default_runtime() -> Runtime:
    """The process's shared runtime (options from $KILN_* and defaults)."""
    global _default
    with _default_lock:
        if _default is None or _default.closed:
            _default = Runtime()
        return _default


def load(model, name: str = "<memory>") -> Module:
    """default_runtime().load(model)."""
    return default_runtime().load(model, name)


def load_onnx(path) -> Module:
    """default_runtime().load_onnx(path)."""
    return default_runtime().load_onnx(path)


def trace(fn, *examples, runtime: Optional[Runtime] = None) -> Module:
    """(runtime or default_runtime()).trace(fn, *examples)."""
    return (runtime or default_runtime()).trace(fn, *examples)


def builtin_models() -> list:
    return _kiln.builtin_models()


class Profile:
    """What kiln.profile() recorded: ``kernels`` (rows: dicts of plain
    values, slowest first), ``table`` (the same as text), and the totals."""

    def __init__(self) -> None:
        self.kernels: list = []
        self.table: str = ""
        self.recorded_ms = 0.0
        self.step_ms = 0.0
        self.peak_gflops = 0.0
        self.bandwidth_gbs = 0.0
        self.threads = 0

    def __repr__(self) -> str:
        return f"kiln.Profile({len(self.kernels)} kernels, {self.step_ms:.3f} ms in steps)"


class profile:
    """Context manager: profiles a runtime's calls and compiles.

        with kiln.profile(rt, trace="t.json", report="r.html") as prof:
            m(x)
        for row in prof.kernels: print(row["name"], row["total_ms"])
    """

    def __init__(self, runtime: Optional[Runtime] = None, trace: Optional[str] = None,
                 report: Optional[str] = None) -> None:
        self._runtime = runtime or default_runtime()
        self._trace = _os.fspath(trace) if trace is not None else None
        self._report = _os.fspath(report) if report is not None else None
        self._profiler = None
        self.result = Profile()

    def __enter__(self) -> Profile:
        self._profiler = _kiln._Profiler(self._runtime._rt)
        return self.result

    def __exit__(self, *exc) -> None:
        table, text = self._profiler.stop(self._trace, self._report)
        data = _json.loads(text)
        r = self.result
        r.table = table
        r.kernels = data.get("kernels", [])
        for key in ("recorded_ms", "step_ms", "peak_gflops", "bandwidth_gbs", "threads"):
            setattr(r, key, data.get(key, 0))


def _await_call(self):
    import asyncio
    return asyncio.get_running_loop().run_in_executor(None, self.result).__await__()


Call.__await__ = _await_call  # `await m.call_async(x)` in asyncio code
