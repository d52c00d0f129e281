"""ONNX Runtime's time per op on a peers model, to set beside kiln's per-kernel times.

Runs the model that bench/peers/run.py exported (ONNX in
~/.cache/kiln/peers-models) under ONNX Runtime with its profiler on (graph
optimizations on, the same intra-op threads as run.py), and prints each node's
median kernel time over the calls after the warm-up, slowest first, with its
op type and output shape, and the sum. Compare with kiln's own steps, one at a
time so that each kernel's time is its own:

  ~/.cache/kiln/peers-venv/bin/python bench/peers/ort_ops.py resnet50 [--calls 40] [--top 40]
  build/bin/kiln profile ~/.cache/kiln/peers-models/resnet50.mlir \\
      -i 0=$HOME/.cache/kiln/peers-models/resnet50.x.npy -n 40 --serial

(ONNX Runtime's fused nodes are named after their last op: a conv with its
ReLU is "..._Relu_output_0_nchwc".)
"""
import argparse
import collections
import json
import os
import sys

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", help="resnet50, mobilenet_v2 or bert (exported by run.py)")
    ap.add_argument("--calls", type=int, default=40, help="profiled calls (the first 10 are warm-up)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--top", type=int, default=40, help="rows to print")
    args = ap.parse_args()
    try:
        import onnxruntime as ort
    except ImportError:
        print("onnxruntime is not installed (bench/peers/setup.sh)")
        return 0
    folder = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "kiln", "peers-models")
    onnx_path = os.path.join(folder, args.model + ".onnx")
    if not os.path.exists(onnx_path):
        print(f"{onnx_path} is missing: run bench/peers/run.py --models {args.model} first")
        return 1
    warmup = min(10, args.calls - 1)
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(folder, f"ort-profile-{args.model}")
    session = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
    x = np.load(os.path.join(folder, args.model + ".x.npy"))
    name = session.get_inputs()[0].name
    for _ in range(args.calls):
        session.run(None, {name: x})
    trace = session.end_profiling()
    with open(trace) as f:
        events = json.load(f)
    os.remove(trace)
    runs = collections.defaultdict(list)
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            a = e.get("args", {})
            runs[e["name"][: -len("_kernel_time")]].append((e["dur"], a.get("op_name", "?"), a.get("output_type_shape")))
    rows = []
    for node, calls in runs.items():
        durs = sorted(d for d, _, _ in calls[warmup:]) or sorted(d for d, _, _ in calls)
        shape = calls[0][2]
        shape = "x".join(str(d) for d in next(iter(shape[0].values()))) if shape else "?"
        rows.append((float(np.median(durs)), node, calls[0][1], shape, float(durs[0])))
    rows.sort(reverse=True)
    print(f"ONNX Runtime {ort.__version__}, {args.model}, {args.threads} threads, median of {args.calls - warmup} "
          f"calls per node: {sum(r[0] for r in rows) / 1e3:.2f} ms in {len(rows)} nodes "
          f"(sum of per-node minima: {sum(r[4] for r in rows) / 1e3:.2f} ms)")
    print(f"{'us':>8} {'min us':>8}  {'op':<20} {'output (NCHW)':<18} node")
    for us, node, op, shape, least in rows[: args.top]:
        print(f"{us:8.0f} {least:8.0f}  {op:<20} {shape:<18} {node}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
