#!/usr/bin/env python3
"""kiln from Python: per-call overhead and the cost of Python on a real model.

1. Per-call overhead on a one-element add (a + b, float32[1]), in the same
   process, alternating rounds: kiln's `m(a, b)`, kiln's `m.run([a, b],
   out=[y])`, the same call made from C++ in a loop (`_time_calls`: the C
   API without Python), ONNX Runtime's `InferenceSession.run` and
   OpenVINO's `InferRequest.infer` (peers skipped, saying so, when not
   installed). Prints medians in microseconds and kiln's ratio to each peer.
2. ResNet-50 (kiln's built-in model, batch 1) called from Python against the
   same module called from C++ in the same process (same runtime, same
   input memory), alternating rounds: the ratio of medians.

Run with the peers venv (onnx, onnxruntime, openvino) and the build's
package:
  PYTHONPATH=build/python ~/.cache/kiln/peers-venv/bin/python bench/python/overhead.py
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

import kiln

ADD = """
func.func @main(%a: tensor<1xf32>, %b: tensor<1xf32>) -> tensor<1xf32> {
  %0 = tosa.add %a, %b : (tensor<1xf32>, tensor<1xf32>) -> tensor<1xf32>
  return %0 : tensor<1xf32>
}
"""


def per_call(fn, n):
    """Median seconds per call over `n` calls timed one by one."""
    times = []
    clock = time.perf_counter
    for _ in range(n):
        t = clock()
        fn()
        times.append(clock() - t)
    return statistics.median(times)


def onnx_add(path):
    import onnx
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info("a", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("b", TensorProto.FLOAT, [1])
    z = helper.make_tensor_value_info("sum", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Add", ["a", "b"], ["sum"])], "add", [x, y], [z])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def peers(a, b, threads):
    """{name: call} for the peers that are installed; prints those skipped."""
    calls = {}
    tmp = tempfile.mkdtemp(prefix="kiln-bench-python-")
    path = os.path.join(tmp, "add.onnx")
    try:
        onnx_add(path)
    except ImportError as e:
        print(f"peers skipped: onnx is not installed ({e})")
        return calls
    try:
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        feed = {"a": a, "b": b}
        calls[f"ONNX Runtime {ort.__version__} InferenceSession.run"] = lambda: sess.run(None, feed)
    except ImportError as e:
        print(f"ONNX Runtime skipped: {e}")
    try:
        import openvino as ov
        core = ov.Core()
        compiled = core.compile_model(path, "CPU", {"INFERENCE_PRECISION_HINT": "f32",
                                                    "PERFORMANCE_HINT": "LATENCY",
                                                    "INFERENCE_NUM_THREADS": str(threads)})
        req = compiled.create_infer_request()
        inputs = {"a": a, "b": b}
        calls[f"OpenVINO {ov.__version__.split('-')[0]} InferRequest.infer"] = lambda: req.infer(inputs)
    except ImportError as e:
        print(f"OpenVINO skipped: {e}")
    return calls


def overhead(args):
    rt = kiln.Runtime(threads=args.threads)
    m = rt.load(ADD)
    a = np.ones(1, np.float32)
    b = np.full(1, 2.0, np.float32)
    y = np.empty(1, np.float32)
    m(a, b)
    calls = {
        "kiln m(a, b)": lambda: m(a, b),
        "kiln m.run([a, b], out=[y])": lambda: m.run([a, b], out=[y]),
    }
    calls.update(peers(a, b, args.threads))
    for fn in calls.values():
        fn()
    results = {name: [] for name in calls}
    results["kiln, the same call from C++ (no Python)"] = []
    for _ in range(args.rounds):
        for name, fn in calls.items():
            results[name].append(per_call(fn, args.calls))
        results["kiln, the same call from C++ (no Python)"].append(statistics.median(m._time_calls([a, b], args.calls)))
    med = {name: statistics.median(v) * 1e6 for name, v in results.items()}
    print(f"\nPer-call time on a one-element add ({args.rounds} rounds x {args.calls} calls, medians, µs):")
    for name, us in med.items():
        print(f"  {name:55s} {us:8.2f}")
    k = med["kiln m(a, b)"]
    for name, us in med.items():
        if not name.startswith("kiln"):
            print(f"  kiln m(a, b) / {name}: {k / us:.2f}x")
    py = k - med["kiln, the same call from C++ (no Python)"]
    print(f"  Python's share of kiln m(a, b): {py:.2f} µs")
    rt.close()


def resnet(args):
    rt = kiln.Runtime(threads=args.threads)
    m = rt.load_builtin("resnet50")
    shape = tuple(d if d is not None else 1 for d in m.inputs[0].shape)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    m(x)
    m(x)
    py, cpp = [], []
    for _ in range(args.resnet_rounds):
        py.append(per_call(lambda: m(x), args.resnet_calls))
        cpp.append(statistics.median(m._time_calls([x], args.resnet_calls)))
    p, c = statistics.median(py) * 1e3, statistics.median(cpp) * 1e3
    print(f"\nResNet-50 batch 1 ({args.resnet_rounds} rounds x {args.resnet_calls} calls, alternating, medians):")
    print(f"  from Python m(x): {p:.3f} ms   from C++ (same module, same input): {c:.3f} ms   "
          f"Python / C++: {p / c:.4f}")
    rt.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--resnet-rounds", type=int, default=10)
    ap.add_argument("--resnet-calls", type=int, default=10)
    ap.add_argument("--skip-resnet", action="store_true")
    args = ap.parse_args()
    print(f"kiln {kiln.__version__}, Python {sys.version.split()[0]}, numpy {np.__version__}, {args.threads} threads")
    overhead(args)
    if not args.skip_resnet:
        resnet(args)


if __name__ == "__main__":
    main()
