#!/usr/bin/env python3
"""Cold starts of every zoo model: kiln's load + first call from an empty
compile cache (`kiln run ... -n 0 --compile-policy P`) beside ONNX Runtime's
session creation + first run of the same model, alternating, in one run.

    ~/.cache/kiln/peers-venv/bin/python bench/peers/cold.py [--models a,b] [--rounds 2]
        [--policy tiered] [--kiln build/bin/kiln[,other/kiln]]

The models are the zoo's exports (`~/.cache/kiln/zoo/<model>/`: tosa.mlir, or
linalg.mlir where torch-mlir's TOSA lowering lacks an op, model.onnx, x.npy),
which `kiln_zoo_tests` writes (tests/zoo). Several kiln binaries (comma-
separated) are timed in the same rounds, for before/after comparisons. Prints
the medians and kiln's ratio to ONNX Runtime; issue 37's target is <= 2x.
"""
import argparse
import os
import statistics
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "models"))
import run as peers  # noqa: E402  (time_ort, kiln_cold)


def zoo_paths(folder, model):
    d = os.path.join(folder, model)
    mlir = os.path.join(d, "tosa.mlir")
    if not os.path.exists(mlir):
        mlir = os.path.join(d, "linalg.mlir")
    paths = {"mlir": mlir, "onnx": os.path.join(d, "model.onnx"), "x.npy": os.path.join(d, "x.npy")}
    missing = [p for p in paths.values() if not os.path.exists(p)]
    return paths, missing


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zoo", default=os.path.expanduser("~/.cache/kiln/zoo"))
    ap.add_argument("--models", default="", help="comma-separated; default: every model in --zoo but tiny")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--policy", default="tiered")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--kiln", default=os.path.join(here, "..", "..", "build", "bin", "kiln"))
    args = ap.parse_args()
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        print("onnxruntime is not installed (bench/peers/setup.sh): nothing to compare with; skipped")
        return 0
    if not os.path.isdir(args.zoo):
        print(f"no zoo exports in {args.zoo} (ctest -R kiln_zoo_tests writes them): skipped")
        return 0
    models = [m for m in args.models.split(",") if m] or sorted(
        m for m in os.listdir(args.zoo) if m != "tiny" and os.path.isdir(os.path.join(args.zoo, m)))
    kilns = args.kiln.split(",")
    print(f"cold start: load + first call, kiln --compile-policy {args.policy} (empty cache) vs ONNX Runtime "
          f"session + first run; {args.threads} threads, medians of {args.rounds} alternating rounds")
    worst = 0.0
    for model in models:
        paths, missing = zoo_paths(args.zoo, model)
        if missing:
            print(f"{model:20s} skipped: missing {', '.join(missing)}")
            continue
        ort, kiln = [], {k: [] for k in kilns}
        for _ in range(args.rounds):
            time.sleep(0.5)  # the previous runtime's threads stop spinning
            ort.append(peers.time_ort(paths, 1, args.threads)[1])
            for k in kilns:
                time.sleep(0.5)
                kiln[k].append(peers.kiln_cold(k, paths, args.policy))
        o = statistics.median(ort)
        cols = []
        for k, v in kiln.items():
            ms = statistics.median(v)
            worst = max(worst, ms / o) if k == kilns[-1] else worst
            cols.append(f"{(k if len(kilns) > 1 else 'kiln')}: {ms:7.0f} ms ({ms / o:.2f}x)")
        print(f"{model:20s} onnxruntime {o:7.0f} ms   " + "   ".join(cols), flush=True)
    print(f"worst ratio ({kilns[-1]}): {worst:.2f}x ONNX Runtime")
    return 0


if __name__ == "__main__":
    sys.exit(main())
