#!/usr/bin/env python3
"""A stream of calls whose shapes change from call to call, from a cold
start: kiln under each compile policy, with and without range code for
batches (every size as calls of batch 1; "-noranges": every size compiles on
its own), against ONNX Runtime and OpenVINO on the same stream.

Exports a torchvision model with a dynamic batch dimension, or (`--model
bert`) BERT-base with a dynamic sequence length (token ids and attention
mask in), to ONNX (fixed random weights, nothing downloaded) into a cache
folder and imports it with `kiln import` (torch-mlir's ONNX route: TOSA for
the batch, linalg on tensors for the sequence length, which torch-mlir's
TOSA lowering cannot take). Draws the stream (batch sizes or sequence
lengths uniform in LO..HI, fixed seed), runs it through
`kiln_shape_stream` (a fresh process and cache per policy) and through an
ONNX Runtime session created at the start (its creation counted in the first
call, as kiln's compile is) and an OpenVINO compiled model (likewise; skipped
when openvino is not installed), and prints p50, p99, max and the last 100
calls' p50 of each, the compiles, and kiln's ratios to both.

  bench/peers/setup.sh                                   # once: the Python environment
  ~/.cache/kiln/peers-venv/bin/python bench/shapes/run.py [--model mobilenet_v2]
        [--calls 300] [--sizes 1..16] [--policies wait,tiered,wait-noranges,...] [--threads 2]
  ~/.cache/kiln/peers-venv/bin/python bench/shapes/run.py --model bert --sizes 8..256 --policies tiered,wait
"""
import argparse
import os
import random
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(HERE, "..", "peers"))
from run import cache_dir  # noqa: E402  (the peer benchmarks' model cache)


def export(name, kiln):
    """model.onnx (batch or sequence length dynamic) and model.mlir (what
    `kiln import` makes of it) for `name`."""
    folder = os.path.join(cache_dir(), name + ("-dynseq" if name == "bert" else "-dynbatch"))
    onnx, mlir = os.path.join(folder, "model.onnx"), os.path.join(folder, "model.mlir")
    if os.path.exists(onnx) and os.path.exists(mlir):
        return onnx, mlir
    os.makedirs(folder, exist_ok=True)
    import torch
    torch.manual_seed(0)
    if name == "bert":
        sys.path.insert(0, os.path.join(HERE, "..", "models"))
        from zoo_models import build_model
        encoder, ids = build_model("bert")

        class WithMask(torch.nn.Module):  # ids and attention mask in, as served
            def __init__(self, m):
                super().__init__()
                self.m = m.m

            def forward(self, ids, mask):
                pos = torch.arange(ids.shape[1]).unsqueeze(0)
                return self.m(input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids),
                              position_ids=pos).last_hidden_state

        torch.onnx.export(WithMask(encoder).eval(), (ids, torch.ones_like(ids)), onnx, opset_version=17,
                          dynamo=False, input_names=["ids", "mask"], output_names=["y"],
                          dynamic_axes={"ids": {1: "seq"}, "mask": {1: "seq"}, "y": {1: "seq"}})
    else:
        import torchvision
        model = getattr(torchvision.models, name)(weights=None).eval()
        torch.onnx.export(model, torch.randn(1, 3, 224, 224), onnx, opset_version=17, dynamo=False,
                          input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    subprocess.run([kiln, "import", "--force", onnx, "-o", mlir], check=True, capture_output=True)
    return onnx, mlir


def feeds(name, n, rng):
    """The peers' inputs for one call of size n (kiln_shape_stream's are
    alike: f32 uniform in [-1, 1], integers 0; BERT's mask is all ones
    here, all zeros there: the same work)."""
    if name == "bert":
        return [np.zeros((1, n), np.int64), np.ones((1, n), np.int64)]
    return [rng.uniform(-1, 1, (n, 3, 224, 224)).astype(np.float32)]


def summary(times):
    s = sorted(times)
    pick = lambda v, p: v[min(len(v) - 1, int(p * len(v)))]  # noqa: E731
    last = sorted(times[-100:])
    return {"p50": pick(s, 0.5), "p99": pick(s, 0.99), "max": s[-1], "last100_p50": pick(last, 0.5)}


def run_kiln(binary, mlir, policy, sizes, threads):
    """policy: wait | tiered | kernels-only, with "-noranges": every batch size
    compiles on its own (KILN_BATCH_RANGES=0) instead of running as calls of
    batch 1."""
    env = dict(os.environ)
    if policy.endswith("-noranges"):
        policy = policy[: -len("-noranges")]
        env["KILN_BATCH_RANGES"] = "0"
    out = subprocess.run([binary, mlir, "main_graph", policy, ",".join(map(str, sizes)), str(threads)],
                         capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"kiln_shape_stream ({policy}) failed: {out.stderr.strip()[:500]}")
    times, stats = [], {"events": []}
    for line in out.stdout.splitlines():
        f = line.split()
        if f[0] == "call":
            times.append(float(f[4]))
        elif f[0] == "summary":
            stats.update(dict(zip(f[1::2], f[2::2])))
        elif f[0] == "event":
            stats["events"].append(line[len("event "):])
    return times, stats


def run_ort(name, onnx, sizes, threads):
    import onnxruntime as ort
    rng = np.random.default_rng(7)
    times = []
    t0 = time.perf_counter()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(onnx, opts, providers=["CPUExecutionProvider"])
    created = (time.perf_counter() - t0) * 1e3
    names = [i.name for i in sess.get_inputs()]
    for i, n in enumerate(sizes):
        x = feeds(name, n, rng)
        t1 = time.perf_counter()
        sess.run(None, dict(zip(names, x)))
        times.append((time.perf_counter() - t1) * 1e3 + (created if i == 0 else 0))
    return times, created


def run_openvino(name, onnx, sizes, threads):
    """OpenVINO on the same stream: the model read and compiled with a
    dynamic batch at the start (counted in the first call), f32 inference
    precision, the LATENCY hint, `threads` threads."""
    import openvino as ov
    rng = np.random.default_rng(7)
    times = []
    t0 = time.perf_counter()
    core = ov.Core()
    model = core.read_model(onnx)
    compiled = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY",
                                                "INFERENCE_NUM_THREADS": str(threads)})
    request = compiled.create_infer_request()
    created = (time.perf_counter() - t0) * 1e3
    for i, n in enumerate(sizes):
        x = feeds(name, n, rng)
        t1 = time.perf_counter()
        request.infer(dict(enumerate(x)))
        times.append((time.perf_counter() - t1) * 1e3 + (created if i == 0 else 0))
    return times, created


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="mobilenet_v2")
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--sizes", default=None, help="LO..HI (default 1..16; bert: 8..256)")
    ap.add_argument("--policies", default="wait,tiered,wait-noranges,tiered-noranges")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--kiln", default=os.path.join(ROOT, "build", "bin", "kiln"))
    ap.add_argument("--stream", default=os.path.join(ROOT, "build", "bin", "kiln_shape_stream"))
    args = ap.parse_args()
    lo, hi = (int(v) for v in (args.sizes or ("8..256" if args.model == "bert" else "1..16")).split(".."))
    onnx, mlir = export(args.model, args.kiln)
    sizes = [random.Random(11 + i).randint(lo, hi) for i in range(args.calls)]
    dim = "sequence length" if args.model == "bert" else "batch"
    print(f"{args.model}, {dim} {lo}..{hi}, {args.calls} calls, {args.threads} threads, cold start")
    rows = {}
    try:
        t, created = run_ort(args.model, onnx, sizes, args.threads)
        rows["onnxruntime"] = (summary(t), f"session created in {created:.0f} ms")
    except ImportError:
        print("onnxruntime not installed: skipped")
    try:
        t, created = run_openvino(args.model, onnx, sizes, args.threads)
        rows["openvino"] = (summary(t), f"compiled in {created:.0f} ms")
    except ImportError:
        print("openvino not installed (pip install openvino into the peers venv): skipped")
    for policy in args.policies.split(","):
        t, st = run_kiln(args.stream, mlir, policy, sizes, args.threads)
        plans = int(st.get("plans", 0))
        rows["kiln " + policy] = (summary(t), f"{int(st.get('compiles', 0)) - plans} JIT compiles + {plans} kernel plans "
                                              f"in {st.get('compile_ms', '?')} ms, "
                                              f"{st.get('deferred_shapes', '?')} shapes on plans until hot, "
                                              f"{st.get('hot_shape_compiles', '?')} compiled when hot, "
                                              f"{st.get('kernel_plan_calls', '?')} item calls on kernel plans, "
                                              f"{st.get('range_calls', '?')} calls as batch-1 items, "
                                              f"{st.get('hot_compiles', '?')} hot sizes compiled "
                                              f"({st.get('range_kept', '?')} kept batch-1 code)")
        for e in st["events"]:  # tiered swaps and hot sizes, one line each
            print(f"  kiln {policy}: {e}")
    print(f"{'':18s} {'p50 ms':>9s} {'p99 ms':>9s} {'max ms':>9s} {'last-100 p50':>13s}")
    for name, (s, note) in rows.items():
        print(f"{name:18s} {s['p50']:9.1f} {s['p99']:9.1f} {s['max']:9.1f} {s['last100_p50']:13.1f}   {note}")
    for peer in ("onnxruntime", "openvino"):
        if peer not in rows:
            continue
        base = rows[peer][0]
        for name, (s, _) in rows.items():
            if name.startswith("kiln"):
                print(f"{name} / {peer}: p50 {s['p50'] / base['p50']:.2f}x, p99 {s['p99'] / base['p99']:.2f}x, "
                      f"max {s['max'] / base['max']:.2f}x, last-100 p50 {s['last100_p50'] / base['last100_p50']:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
