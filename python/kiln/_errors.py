"""kiln's errors: one class per kiln_code, each a kiln.Error (and, where
one fits, the matching built-in exception, so `except ValueError` works)."""

from __future__ import annotations


class Error(Exception):
    """A kiln error: ``code`` (its name, e.g. "invalid argument"),
    ``code_value`` (kiln_code), ``message`` and ``location`` ("file:line:col"
    of the model; "" when unknown)."""

    code_value = 0

    def __init__(self, message: str, code: str = "", location: str = "", code_value: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.location = location
        if code_value:
            self.code_value = code_value

    def __str__(self) -> str:
        return f"{self.message} (at {self.location})" if self.location else self.message


class InvalidArgumentError(Error, ValueError):
    """Bad input: a malformed model, wrong shapes or dtypes, bad options."""
    code_value = 1


class UnsupportedError(Error, NotImplementedError):
    """Well-formed, but kiln cannot run it (op, dtype, dialect)."""
    code_value = 2


class CompileError(Error):
    """MLIR or LLVM failed on input kiln accepted."""
    code_value = 3


class IoError(Error, OSError):
    """Files, the disk cache."""
    code_value = 4


class ResourceExhaustedError(Error, MemoryError):
    """Memory, sizes that do not fit."""
    code_value = 5


class CancelledError(Error):
    """A cancelled call, or one past its deadline."""
    code_value = 6


class UnavailableError(Error):
    """A device that is not there; too many calls in flight."""
    code_value = 7


class InternalError(Error):
    """A kiln bug."""
    code_value = 8


_CLASSES = {c.code_value: c for c in (InvalidArgumentError, UnsupportedError, CompileError, IoError,
                                      ResourceExhaustedError, CancelledError, UnavailableError, InternalError)}
