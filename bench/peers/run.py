#!/usr/bin/env python3
"""kiln side by side with ONNX Runtime, OpenVINO and PyTorch on the same models.

Exports torchvision models and a transformers BERT-base encoder (same
weights, same input) once into a cache folder: TOSA through torch-mlir for
kiln, ONNX for ONNX Runtime. Then runs
rounds (the order rotating each round, a pause before each turn) that
alternate ONNX Runtime, OpenVINO (f32 inference precision,
LATENCY hint), PyTorch eager and kiln (the `kiln run` CLI, warm persistent
compile cache, 2 threads each), and prints each runtime's p50/p90 over the
rounds, kiln's ratio to each peer and to the best of them, and cold starts:
kiln's load + first call from an empty compile cache (per `--cold` compile
policy) beside ONNX Runtime's session creation + first run and OpenVINO's
compile + first run, medians over the rounds. Checks that
kiln's outputs match PyTorch's. Peers that are not installed are skipped
with a note.

  bench/peers/setup.sh                      # once: the Python environment
  ~/.cache/kiln/peers-venv/bin/python bench/peers/run.py [--models resnet50,mobilenet_v2,bert]
        [--batch 1,8,32] [--rounds 5] [--iterations 20] [--kiln build/bin/kiln]

With --batch, each model runs at each batch size (its own export per size);
above batch 1 the table adds throughput (items per second) and kiln's
throughput against the best peer's.

Weights are the architectures' fixed random initialisation (no download):
speed does not depend on the values.
"""
import argparse
import os
import re
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
from zoo_models import build_model, onnx_export  # noqa: E402


def cache_dir():
    base = os.environ.get("KILN_PEERS_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "kiln", "peers-models")
    os.makedirs(base, exist_ok=True)
    return base


def export(name, batch, folder):
    """Exports `name` at `batch` to TOSA (kiln), ONNX (ONNX Runtime), input
    and reference output; returns the paths. Skips what exists."""
    import torch
    stem = name if batch == 1 else f"{name}-b{batch}"
    paths = {k: os.path.join(folder, f"{stem}.{k}") for k in ("mlir", "onnx", "x.npy", "y.npy")}
    if all(os.path.exists(p) for p in paths.values()):
        return paths
    model, x = build_model(name, batch)
    with torch.no_grad():
        y = model(x)
    np.save(paths["x.npy"], x.numpy())
    np.save(paths["y.npy"], y.numpy())
    try:
        from torch_mlir import fx
        # TOSA, or linalg on tensors where torch-mlir's TOSA lowering lacks
        # an op (RegNet's grouped convolutions): kiln raises it at load.
        for output_type in ("tosa", "linalg-on-tensors"):
            t0 = time.time()
            try:
                module = fx.export_and_import(model, x, output_type=output_type, func_name="main")
            except Exception as e:  # noqa: BLE001 (torch-mlir raises several kinds)
                print(f"  {output_type} export failed: {str(e).splitlines()[0][:200]}", flush=True)
                continue
            with open(paths["mlir"], "w") as f:
                f.write(str(module))
            print(f"  exported {name} to {output_type} in {time.time() - t0:.1f} s", flush=True)
            break
    except ImportError:
        print("  torch-mlir is not installed: kiln is skipped (bench/peers/setup.sh)")
    try:
        onnx_export(model, x, paths["onnx"])
    except Exception as e:  # onnx missing or export failure: ONNX Runtime is skipped
        print(f"  ONNX export failed ({e}): ONNX Runtime is skipped")
    return paths


# Untimed calls before each runtime's timed ones (kiln's come after its first
# call, which loads or compiles the model).
WARMUP = 3


def time_ort(paths, iterations, threads):
    """Per-call ms after warm-up, and the cold start: session creation + first run."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    x = np.load(paths["x.npy"])
    t0 = time.perf_counter()  # cold start: session creation + first run
    session = ort.InferenceSession(paths["onnx"], so, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    session.run(None, {name: x})
    cold = (time.perf_counter() - t0) * 1e3
    for _ in range(WARMUP):
        session.run(None, {name: x})
    times = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        session.run(None, {name: x})
        times.append((time.perf_counter() - t0) * 1e3)
    return times, cold


def time_openvino(paths, iterations, threads):
    """Per-call ms after warm-up, and the cold start: compile + first run."""
    import openvino as ov
    x = np.load(paths["x.npy"])
    t0 = time.perf_counter()  # cold start: compile (from the ONNX file) + first run
    core = ov.Core()
    compiled = core.compile_model(paths["onnx"], "CPU", {"INFERENCE_PRECISION_HINT": "f32",
                                                         "PERFORMANCE_HINT": "LATENCY",
                                                         "INFERENCE_NUM_THREADS": str(threads)})
    request = compiled.create_infer_request()
    request.infer([x])
    cold = (time.perf_counter() - t0) * 1e3
    for _ in range(WARMUP):
        request.infer([x])
    times = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        request.infer([x])
        times.append((time.perf_counter() - t0) * 1e3)
    return times, cold


def time_torch(name, paths, iterations, threads):
    import torch
    torch.set_num_threads(threads)
    model, _ = build_model(name)  # the weights; the input is the export's
    x = torch.from_numpy(np.load(paths["x.npy"]))
    times = []
    with torch.no_grad():
        for _ in range(WARMUP):
            model(x)
        for _ in range(iterations):
            t0 = time.perf_counter()
            model(x)
            times.append((time.perf_counter() - t0) * 1e3)
    return times


def kiln_run(kiln, paths, *options):
    """`kiln run` on the model and its input; its output."""
    r = subprocess.run([kiln, "run", paths["mlir"], "-i", f"0={paths['x.npy']}", *options], capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise RuntimeError(f"kiln failed:\n{r.stderr}")
    return r.stdout


def time_kiln(kiln, paths, iterations, out_dir):
    """Runs `kiln run` (warm disk cache after the first round); returns
    (p50, p90, first-call ms, outputs dir)."""
    out = kiln_run(kiln, paths, "--warmup", str(WARMUP), "-n", str(iterations), "-o", out_dir)
    m = re.search(r"steady state: median ([0-9.]+) ms, min [0-9.]+ ms, p90 ([0-9.]+) ms", out)
    first = re.search(r"first call \(([^)]*)\): ([0-9.]+) ms", out)
    return float(m.group(1)), float(m.group(2)), (first.group(1), float(first.group(2)))


def kiln_cold(kiln, paths, policy):
    """`kiln run` from an empty compile cache under `policy`: load + first
    call, ms (the model's read and graph rewrites count, as the peers'
    session creation reads theirs)."""
    import tempfile
    with tempfile.TemporaryDirectory() as cache:
        out = kiln_run(kiln, paths, "-n", "0", "--warmup", "0", "--cache-dir", cache, "--compile-policy", policy)
    load = float(re.search(r"^load: ([0-9.]+) ms", out, re.M).group(1))
    first = float(re.search(r"^first call \([^)]*\): ([0-9.]+) ms", out, re.M).group(1))
    return load + first


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="resnet50,mobilenet_v2,bert")
    ap.add_argument("--batch", default="1", help="batch sizes, comma-separated (each its own export)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--settle", type=float, default=1.0,
                    help="seconds of pause before each runtime's turn (the previous one's threads stop spinning)")
    ap.add_argument("--kiln", default=os.path.join(here, "..", "..", "build", "bin", "kiln"))
    ap.add_argument("--cold", default="wait,tiered",
                    help="compile policies to measure kiln's cold start under (load + first call from an empty "
                         "compile cache, once per round), beside the peers' session creation + first run; '' = none")
    args = ap.parse_args()
    folder = cache_dir()
    try:
        import torch  # noqa: F401
        import torchvision  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        print("PyTorch/torchvision/transformers are not installed (bench/peers/setup.sh): nothing to export; skipped")
        return 0
    have_ort = True
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        have_ort = False
        print("note: onnxruntime is not installed: ONNX Runtime is skipped")
    have_ov = True
    try:
        import openvino  # noqa: F401
    except ImportError:
        have_ov = False
        print("note: openvino is not installed: OpenVINO is skipped")
    for name, batch in [(n, int(b)) for n in args.models.split(",") for b in args.batch.split(",")]:
        print(f"== {name} (batch {batch}, f32, {args.threads} threads, {args.rounds} alternating rounds "
              f"of {args.iterations} calls)", flush=True)
        paths = export(name, batch, folder)
        res = {"onnxruntime": [], "openvino": [], "pytorch": [], "kiln": []}
        policies = [p for p in args.cold.split(",") if p]
        # Cold starts, ms per round: the peers' session creation (or compile)
        # + first run; kiln's load + first call from an empty compile cache.
        cold_ms = {"onnxruntime": [], "openvino": [], **{f"kiln {p}": [] for p in policies}}
        out_dir = os.path.join(folder, os.path.basename(paths["mlir"])[:-len(".mlir")] + ".kiln-out")
        firsts = []
        def run_ort():
            t, cold = time_ort(paths, args.iterations, args.threads)
            cold_ms["onnxruntime"].append(cold)
            res["onnxruntime"].append((np.percentile(t, 50), np.percentile(t, 90)))

        def run_openvino():
            t, cold = time_openvino(paths, args.iterations, args.threads)
            cold_ms["openvino"].append(cold)
            res["openvino"].append((np.percentile(t, 50), np.percentile(t, 90)))

        def run_torch():
            t = time_torch(name, paths, args.iterations, args.threads)
            res["pytorch"].append((np.percentile(t, 50), np.percentile(t, 90)))

        def run_kiln():
            for policy in policies:
                cold_ms[f"kiln {policy}"].append(kiln_cold(args.kiln, paths, policy))
                time.sleep(args.settle)
            p50, p90, first = time_kiln(args.kiln, paths, args.iterations, out_dir)
            res["kiln"].append((p50, p90))
            firsts.append(first)

        runners = []
        if have_ort and os.path.exists(paths["onnx"]):
            runners.append(run_ort)
        if have_ov and os.path.exists(paths["onnx"]):
            runners.append(run_openvino)
        runners.append(run_torch)
        if os.path.exists(paths["mlir"]):
            runners.append(run_kiln)
        for r in range(args.rounds):
            # The order rotates each round, and each runtime starts after a
            # pause: the peers' worker threads spin-wait for a while after a
            # run (OpenMP's block time, ONNX Runtime's spinning), and on a
            # 2-core machine they took the cores from whichever runtime
            # came next (kiln, always right after PyTorch: MobileNetV2 6.3
            # vs 3.7 ms).
            for run in runners[r % len(runners):] + runners[:r % len(runners)]:
                time.sleep(args.settle)
                run()
        summary = {k: (float(np.median([a for a, _ in v])), float(np.median([b for _, b in v])))
                   for k, v in res.items() if v}
        for k, (p50, p90) in summary.items():
            rate = f"   {batch * 1e3 / p50:8.1f} items/s" if batch > 1 else ""
            print(f"  {k:12s} p50 {p50:8.2f} ms   p90 {p90:8.2f} ms{rate}")
        if "kiln" in summary:
            peers = [p for p in ("onnxruntime", "openvino", "pytorch") if p in summary]
            for peer in peers:
                print(f"  kiln / {peer:11s} {summary['kiln'][0] / summary[peer][0]:.2f}x (p50; < 1 is faster)")
            if peers:
                best = min(peers, key=lambda p: summary[p][0])
                print(f"  kiln / best peer ({best}) {summary['kiln'][0] / summary[best][0]:.2f}x")
                if batch > 1:
                    print(f"  kiln throughput / best peer's ({best}) "
                          f"{summary[best][0] / summary['kiln'][0]:.2f}x (> 1 is faster)")
            print(f"  kiln first call: {firsts[0][1]:.0f} ms ({firsts[0][0]}); later rounds: "
                  f"{firsts[-1][1]:.0f} ms ({firsts[-1][0]})")
            cold = {k: float(np.median(v)) for k, v in cold_ms.items() if v}
            peers_cold = [p for p in ("onnxruntime", "openvino") if p in cold]
            for k, ms in cold.items():
                print(f"  cold start {k:14s} {ms:8.0f} ms (median of {len(cold_ms[k])})")
            for policy in policies:
                for peer in peers_cold:
                    print(f"  cold start kiln {policy} / {peer}: {cold['kiln ' + policy] / cold[peer]:.2f}x")
            got = np.load(os.path.join(out_dir, "out0.npy"))
            want = np.load(paths["y.npy"])
            err = float(np.abs(got - want).max() / max(1e-30, float(np.abs(want).max())))
            print(f"  kiln vs PyTorch: max relative error {err:.2e}", "(ok)" if err < 1e-3 else "(MISMATCH)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
