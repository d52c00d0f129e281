"""import kiln: call forms, zero-copy, errors, threads, reference counts,
eager ops, trace, profile, prewarm. Runs with numpy and pytest only
(tests/python/run_pytest.sh); torch-only tests are in test_torch.py."""

import gc
import os
import sys
import threading
import time

import numpy as np
import pytest

import kiln

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CLASSIFIER = os.path.join(ROOT, "samples", "models", "classifier.mlir")
NEVER_ENDING = os.path.join(ROOT, "tests", "e2e", "inputs", "never_ending.mlir")

ADD = """
func.func @main(%a: tensor<4xf32> {kiln.name = "a"}, %b: tensor<4xf32> {kiln.name = "b"})
    -> (tensor<4xf32> {kiln.name = "sum"}) {
  %0 = tosa.add %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""

TWO_OUT = """
func.func @main(%a: tensor<?x4xf32>, %b: tensor<?x4xf32>) -> (tensor<?x4xf32>, tensor<?x4xf32>) {
  %0 = tosa.add %a, %b : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %1 = tosa.sub %a, %b : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  return %0, %1 : tensor<?x4xf32>, tensor<?x4xf32>
}
func.func @abs(%a: tensor<3xi32>) -> tensor<3xi32> {
  %0 = tosa.abs %a : (tensor<3xi32>) -> tensor<3xi32>
  return %0 : tensor<3xi32>
}
"""


def slow_model(n=384, steps=12):
    """A chain of n x n matmuls: long enough to watch other threads run."""
    t = f"tensor<1x{n}x{n}xf32>"
    lines = [f"func.func @main(%x: {t}, %w: {t}) -> {t} {{",
             '  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>']
    prev = "%x"
    for i in range(steps):
        lines.append(f"  %m{i} = tosa.matmul {prev}, %w, %zp, %zp : ({t}, {t}, tensor<1xf32>, tensor<1xf32>) -> {t}")
        prev = f"%m{i}"
    lines += [f"  return {prev} : {t}", "}"]
    return "\n".join(lines)


@pytest.fixture(scope="module")
def rt(tmp_path_factory):
    r = kiln.Runtime(threads=2, cache_dir=str(tmp_path_factory.mktemp("cache")))
    yield r
    r.close()


@pytest.fixture(scope="module")
def add(rt):
    return rt.load(ADD)


A = np.arange(4, dtype=np.float32)
B = np.full(4, 0.5, dtype=np.float32)


# ---- call forms ----------------------------------------------------------------

def test_signature(add):
    assert [i.name for i in add.inputs] == ["a", "b"]
    assert add.inputs[0].dtype == "float32" and add.inputs[0].shape == (4,)
    assert add.outputs[0].name == "sum"
    assert list(add.functions) == ["main"]


def test_positional_keyword_and_mixed(add):
    want = A + B
    np.testing.assert_array_equal(add(A, B), want)
    np.testing.assert_array_equal(add(a=A, b=B), want)
    np.testing.assert_array_equal(add(b=B, a=A), want)
    np.testing.assert_array_equal(add(A, b=B), want)
    np.testing.assert_array_equal(add.main(A, B), want)
    np.testing.assert_array_equal(add.functions["main"](A, B), want)


def test_run_forms(add):
    (y,) = add.run([A, B])
    np.testing.assert_array_equal(y, A + B)
    (y,) = add.run({"a": A, "b": B})
    np.testing.assert_array_equal(y, A + B)
    (y,) = add.run((A, B), timeout=5)
    np.testing.assert_array_equal(y, A + B)


def test_lists_and_scalars_take_the_declared_dtype(add):
    np.testing.assert_array_equal(add([1, 2, 3, 4], [0.5] * 4), np.array([1.5, 2.5, 3.5, 4.5], np.float32))


def test_several_outputs_and_functions(rt):
    m = rt.load(TWO_OUT)
    a = np.ones((3, 4), np.float32)
    b = np.full((3, 4), 2, np.float32)
    s, d = m(a, b)
    np.testing.assert_array_equal(s, a + b)
    np.testing.assert_array_equal(d, a - b)
    assert m.inputs[0].shape == (None, 4)
    a5 = np.ones((5, 4), np.float32)
    assert m(a5, a5)[0].shape == (5, 4)
    np.testing.assert_array_equal(m.functions["abs"](np.array([1, -2, 3], np.int32)), [1, 2, 3])


def test_async(add):
    c = add.call_async(A, B)
    np.testing.assert_array_equal(c.result(timeout=10), A + B)
    assert c.done()
    assert c.exception() is None
    calls = [add.call_async(A + i, B) for i in range(20)]
    for i, c in enumerate(calls):
        np.testing.assert_array_equal(c.result(), A + i + B)
    (y,) = add.run_async({"a": A, "b": B}).result()
    np.testing.assert_array_equal(y, A + B)


def test_await(add):
    import asyncio

    async def main():
        return await add.call_async(A, B)

    np.testing.assert_array_equal(asyncio.run(main()), A + B)


def test_cancel_and_timeout(rt):
    m = rt.load(NEVER_ENDING)
    x = np.array(1.0, np.float32)
    c = m.call_async(x)
    with pytest.raises(TimeoutError):
        c.result(timeout=0.05)
    c.cancel()
    with pytest.raises(kiln.CancelledError) as e:
        c.result(timeout=30)
    assert e.value.code == "cancelled"
    t = time.monotonic()
    with pytest.raises(kiln.CancelledError):
        m.run([x], timeout=0.2)
    assert time.monotonic() - t < 20
    # the module's other function still works
    np.testing.assert_array_equal(m.functions["twice"](A), 2 * A)


def test_dropping_a_running_call_cancels_it(rt):
    m = rt.load(NEVER_ENDING)
    c = m.call_async(np.array(1.0, np.float32))
    del c  # must not hang or crash: the destructor cancels and waits
    gc.collect()


# ---- zero copy -----------------------------------------------------------------

def test_inputs_are_read_in_place():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    addr, copied = kiln._kiln._input_address(x)
    assert addr == x.ctypes.data and not copied
    t = x.T  # not C-contiguous: one copy
    addr, copied = kiln._kiln._input_address(t)
    assert copied and addr != t.ctypes.data


def test_non_contiguous_inputs_compute_right(rt):
    m = rt.load(TWO_OUT)
    a = np.arange(32, dtype=np.float32).reshape(4, 8)[:, ::2]
    b = np.ones((4, 4), np.float32)
    np.testing.assert_array_equal(m(a, b)[0], a + 1)


def test_out_arrays_are_written_in_place(add):
    out = np.empty(4, np.float32)
    (r,) = add.run([A, B], out=[out])
    assert r is out and r.ctypes.data == out.ctypes.data
    np.testing.assert_array_equal(out, A + B)
    with pytest.raises(kiln.InvalidArgumentError):
        add.run([A, B], out=[np.empty(4, np.float32)[::1], np.empty(4, np.float32)])


def _dlpack_data(capsule):
    """The data pointer of a DLPack capsule (DLManagedTensor starts with DLTensor.data)."""
    import ctypes
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return ctypes.c_void_p.from_address(get(capsule, b"dltensor")).value


def test_outputs_are_kiln_memory_without_copies(add):
    (d,) = add.run([A, B], output="dlpack")
    assert type(d).__name__ == "PyCapsule"
    addr = _dlpack_data(d)
    assert addr % 64 == 0  # kiln's tensors are 64-byte aligned
    import ctypes
    np.testing.assert_array_equal(np.ctypeslib.as_array((ctypes.c_float * 4).from_address(addr)), A + B)
    y = add(A, B)
    assert not y.flags.owndata and y.ctypes.data % 64 == 0  # a view over kiln's tensor


# ---- errors ----------------------------------------------------------------------

def test_wrong_dtype(add):
    with pytest.raises(kiln.InvalidArgumentError) as e:
        add(A.astype(np.float64), B)
    assert "f64" in str(e.value) and e.value.code == "invalid argument" and e.value.code_value == 1
    assert isinstance(e.value, ValueError)


def test_wrong_shape(add):
    with pytest.raises(kiln.InvalidArgumentError) as e:
        add(np.zeros(5, np.float32), B)
    assert "5" in str(e.value)


def test_bad_input_names_and_counts(add):
    with pytest.raises(kiln.InvalidArgumentError, match="no input named 'c'.*a, b"):
        add(A, B, c=A)
    with pytest.raises(kiln.InvalidArgumentError, match="'b' is missing"):
        add(A)
    with pytest.raises(kiln.InvalidArgumentError, match="takes 2 input"):
        add(A, B, A)
    with pytest.raises(kiln.InvalidArgumentError, match="given twice"):
        add(A, a=A)
    with pytest.raises(kiln.InvalidArgumentError, match="complex"):
        add(A.astype(np.complex64), B)
    with pytest.raises(kiln.InvalidArgumentError, match="output must be"):
        add.run([A, B], output="pandas")


def test_inputs_that_are_not_arrays(add):
    with pytest.raises(kiln.InvalidArgumentError, match=r"input 0 \('a'\).*NoneType is not an array"):
        add(None, B)
    with pytest.raises(kiln.InvalidArgumentError, match="str is not an array"):
        add("1234", B)
    with pytest.raises(kiln.InvalidArgumentError, match="cannot convert a object"):
        add(object(), B)
    with pytest.raises(kiln.InvalidArgumentError, match="expected tensor<4xf32>, got tensor<f32>"):
        add(np.float32(1), B)
    with pytest.raises(kiln.InvalidArgumentError, match="rank 40"):
        add(np.ones([1] * 40, np.float32), B)


def test_read_only_arrays(add):
    ro = np.arange(4, dtype=np.float32)
    ro.flags.writeable = False
    np.testing.assert_array_equal(add(ro, B), ro + B)  # read in place
    assert kiln._kiln._input_address(ro)[0] == ro.ctypes.data
    with pytest.raises(kiln.InvalidArgumentError, match="read-only"):
        add.run([A, B], out=[ro])
    np.testing.assert_array_equal(ro, np.arange(4))
    with pytest.raises(kiln.InvalidArgumentError, match="the result is tensor<4xf32>"):
        add.run([A, B], out=[np.empty(3, np.float32)])


def test_malformed_mlir_names_where(rt):
    with pytest.raises(kiln.InvalidArgumentError) as e:
        rt.load("func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n  return %b : tensor<4xf32>\n}\n")
    assert "2:" in e.value.location or "2:" in str(e.value)
    with pytest.raises(kiln.Error, match="/nonexistent/model.mlir"):
        rt.load("/nonexistent/model.mlir")


def test_unknown_option():
    with pytest.raises(kiln.InvalidArgumentError, match="no_such_option"):
        kiln.Runtime(no_such_option=1)
    with pytest.raises(kiln.InvalidArgumentError):
        kiln.Runtime(threads="many")


def test_closed_runtime(tmp_path):
    r = kiln.Runtime(threads=1, cache_dir=str(tmp_path))
    m = r.load(ADD)
    np.testing.assert_array_equal(m(A, B), A + B)
    with r:
        pass  # __exit__ closes
    assert r.closed
    with pytest.raises(kiln.InvalidArgumentError, match="closed"):
        m(A, B)
    with pytest.raises(kiln.InvalidArgumentError, match="closed"):
        r.load(ADD)
    r.close()  # twice is fine


def test_bf16_result_needs_torch_or_dlpack(rt):
    m = rt.load("""
func.func @main(%a: tensor<2xbf16>) -> tensor<2xbf16> {
  %0 = tosa.add %a, %a : (tensor<2xbf16>, tensor<2xbf16>) -> tensor<2xbf16>
  return %0 : tensor<2xbf16>
}""")
    x = np.array([0x3F80, 0x4000], np.uint16)  # 1.0, 2.0 as bf16 bits
    with pytest.raises(kiln.InvalidArgumentError, match="dtype"):
        m(x)  # uint16 is not bf16


# ---- threads and the GIL -----------------------------------------------------------

def test_gil_is_released_while_kiln_runs(tmp_path):
    r = kiln.Runtime(threads=1, cache_dir=str(tmp_path))
    m = r.load(slow_model())
    x = np.random.default_rng(0).standard_normal((1, 384, 384)).astype(np.float32) / 20
    m(x, x)  # compile
    t = time.perf_counter()
    m(x, x)
    call_s = time.perf_counter() - t
    ticks = 0
    stop = threading.Event()

    def spin():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1

    sys.setswitchinterval(0.001)
    th = threading.Thread(target=spin)
    th.start()
    time.sleep(0.01)
    before = ticks
    m(x, x)
    during = ticks - before
    stop.set()
    th.join()
    r.close()
    # With the GIL held for the whole call, the spinning thread could not
    # count at all during it (a call of call_s seconds).
    assert during > 1000, f"only {during} ticks in a {call_s * 1e3:.1f} ms call: the GIL was held"


def test_many_threads_call_at_once(add, rt):
    m = rt.load(TWO_OUT)
    errors = []

    def worker(k):
        try:
            for i in range(200):
                a = np.full((2, 4), k + i, np.float32)
                s, d = m(a, a)
                assert (s == 2 * a).all() and (d == 0).all()
                np.testing.assert_array_equal(add(A + k, B), A + k + B)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


# ---- reference counts ---------------------------------------------------------------

def test_no_leaks_over_10000_calls(add):
    a, b = A.copy(), B.copy()
    add(a, b)
    gc.collect()
    live = kiln._kiln._live_outputs()
    ra, rb = sys.getrefcount(a), sys.getrefcount(b)
    out = np.empty(4, np.float32)
    ro = sys.getrefcount(out)
    for _ in range(10000):
        y = add(a, b)
        add.run([a, b], out=[out])
        add.call_async(a, b).result()
    del y
    gc.collect()
    assert sys.getrefcount(a) == ra and sys.getrefcount(b) == rb and sys.getrefcount(out) == ro
    assert kiln._kiln._live_outputs() == live


def test_errors_do_not_leak(add):
    a = A.copy()
    ra = sys.getrefcount(a)
    for _ in range(1000):
        with pytest.raises(kiln.InvalidArgumentError):
            add(a, np.zeros(5, np.float32))
    assert sys.getrefcount(a) == ra


# ---- runtime features -----------------------------------------------------------------

def test_prewarm_compile_info_and_stats(tmp_path):
    r = kiln.Runtime(threads=1, cache_dir=str(tmp_path))
    m = r.load(TWO_OUT)
    m.prewarm(((2, 4), "float32"), ((2, 4), "float32"))
    assert m.stats()["functions_compiled"] == 1
    # @main computes its batch row by row: every batch size runs as calls of
    # batch 1, so batch 1's code (compiled above) serves batch 3 as well.
    m.prewarm(np.zeros((3, 4), np.float32), np.zeros((3, 4), np.float32))
    assert m.stats()["functions_compiled"] == 1
    info = m.compile_info(*m.inputs[:0], ((3, 4), "float32"), ((3, 4), "float32"))
    assert set(info) >= {"compile_ms", "kernels_compiled", "placement", "from_disk_cache"}
    stats = r.cache_stats()
    assert stats["compiles"] + stats["disk_hits"] == 1  # one compile served all three
    sep, why = m.batch_separable()
    assert sep is True or isinstance(why, str)
    assert isinstance(m.tier_stats()["range_calls"], int)
    r.close()


def test_op_mode_dict(tmp_path):
    r = kiln.Runtime(threads=1, cache_dir=str(tmp_path), op_mode={"tosa.matmul": "kernel"})
    m = r.load(CLASSIFIER)
    x = np.ones((1, 4, 8), np.float32)
    scores, logits = m(features=x)
    assert "kernel" in m.compile_info(x)["placement"]
    np.testing.assert_allclose(scores, np.maximum(logits, 0))
    r.close()


def test_builtin_and_default_runtime():
    assert "mlp" in kiln.builtin_models()
    assert kiln.default_runtime() is kiln.default_runtime()
    m = kiln.default_runtime().load_builtin("mlp")
    assert len(m.inputs) >= 1


def test_profile(rt, add, tmp_path):
    trace, report = tmp_path / "t.json", tmp_path / "r.html"
    with kiln.profile(rt, trace=trace, report=report) as prof:
        for _ in range(3):
            add(A, B)
    assert prof.kernels, prof.table
    row = prof.kernels[0]
    assert row["calls"] >= 3 and row["kind"] in ("jit", "kernel", "copy", "other")
    assert isinstance(row["total_ms"], float) and "tosa.add" in row["ops"]
    assert "calls" in prof.table and trace.stat().st_size > 0 and report.stat().st_size > 0


def test_eager_ops_and_trace(rt):
    e = rt.eager()
    v = e.execute("tosa.add", A, B)
    assert v.shape == (4,) and v.dtype == "float32"
    np.testing.assert_array_equal(v.numpy(), A + B)
    w = e.execute("tosa.mul", v, A, shift=0)
    np.testing.assert_array_equal(w.numpy(), (A + B) * A)
    with pytest.raises(kiln.Error, match="tosa.no_such_op"):
        e.execute("tosa.no_such_op", A)
    m = rt.trace(lambda x, y: e.execute("tosa.sub", e.execute("tosa.add", x, y), y), A, B)
    np.testing.assert_array_equal(m(A, B), A)
    assert "tosa" in m.mlir

    def boom(x):
        raise RuntimeError("user error inside trace")

    with pytest.raises(RuntimeError, match="user error inside trace"):
        rt.trace(boom, A)


def test_load_bytes_and_paths(rt, tmp_path):
    p = tmp_path / "add.mlir"
    p.write_text(ADD)
    for m in (rt.load(p), rt.load(str(p)), rt.load(ADD.encode())):
        np.testing.assert_array_equal(m(A, B), A + B)


def test_load_onnx_missing_tools_is_a_clear_error(rt, tmp_path, monkeypatch):
    onnx = tmp_path / "m.onnx"
    onnx.write_bytes(b"not really onnx")
    import kiln._onnx as ko
    monkeypatch.setattr(ko, "_search_dirs", lambda: [str(tmp_path)])
    with pytest.raises(kiln.UnavailableError, match="torch-mlir"):
        rt.load_onnx(onnx)
    with pytest.raises(kiln.InvalidArgumentError, match="no such file"):
        rt.load_onnx(tmp_path / "absent.onnx")
