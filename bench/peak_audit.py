#!/usr/bin/env python3
"""Which matmul and convolution kernels run below a fraction of the FMA peak.

Issue 37's kernel target: every matmul and convolution kernel of at least
100 MFLOP a call at >= 70% of the machine's measured FMA peak. For each model
this runs `kiln profile MODEL --serial` (one step at a time, each on every
thread, so a kernel's time is its own), reads the table it writes
(kernels.txt), and prints every kernel of at least --min-mflop whose ops
include a matmul or a convolution, with its median-based %peak (the table's
own %peak column is mean-based, and a few slow calls on a shared VM move a
mean by 10-40%) and its `how:` line, those under --target marked. The peak
is the one `kiln profile` measured in the same run (one core's FMA
throughput times the executor's threads).

    python3 bench/peak_audit.py ~/.cache/kiln/peers-models/convnext_tiny.mlir [...] [-n 30]
    python3 bench/peak_audit.py --zoo [--models resnet50,bert] [--min-mflop 100] [--target 70]

`--zoo` takes the models `bench/peers/run.py` exported (~/.cache/kiln/peers-models/NAME.mlir,
each with its NAME.x.npy input). Needs nothing but Python 3 and the kiln binary.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
sys.path.insert(0, HERE)
from ab_kernels import kernel_rows  # noqa: E402  (kernels.txt's reader)
HEAVY = re.compile(r"matmul|conv|depthwise|fully_connected|batch_matmul|winograd", re.I)


def parse(path):
    """kernels.txt -> (peak GFLOP/s, the kernel rows of ab_kernels.kernel_rows)."""
    header, rows = kernel_rows(path)
    m = re.search(r"peak ([0-9.]+) GFLOP/s", header)
    if not m:
        raise SystemExit(f"{path}: no peak on the header line (was the peak measured?)")
    return float(m.group(1)), rows


def audit(kiln, model, inputs, n, env):
    with tempfile.TemporaryDirectory(prefix="kiln-audit-") as tmp:
        cmd = [kiln, "profile", model, "--serial", "-n", str(n), "--out", tmp]
        for i in inputs:
            cmd += ["-i", i]
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
        return parse(os.path.join(tmp, "kernels.txt"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", help="model files (.mlir/.mlirbc); NAME.x.npy beside one is its input 0")
    ap.add_argument("--zoo", action="store_true", help="the models bench/peers/run.py exported")
    ap.add_argument("--models", dest="names", default=None, help="with --zoo: a comma-separated subset")
    ap.add_argument("-n", type=int, default=30, help="calls profiled per model")
    ap.add_argument("--min-mflop", type=float, default=100.0)
    ap.add_argument("--target", type=float, default=70.0, help="%% of peak")
    ap.add_argument("--kiln", default=os.path.join(ROOT, "build", "bin", "kiln"))
    args = ap.parse_args()

    models = list(args.models)
    if args.zoo:
        folder = os.path.join(os.environ.get("KILN_PEERS_CACHE", os.path.expanduser("~/.cache/kiln/peers-models")))
        names = args.names.split(",") if args.names else sorted(
            f[:-len(".mlir")] for f in os.listdir(folder) if f.endswith(".mlir") and "-b" not in f)
        models += [os.path.join(folder, name + ".mlir") for name in names]
    if not models:
        ap.error("no models: name some, or --zoo (after bench/peers/run.py has exported them)")

    below = total = 0
    for model in models:
        if not os.path.exists(model):
            print(f"== {model}: missing (bench/peers/run.py exports the zoo's models)")
            continue
        x = model[:-len(".mlir")] + ".x.npy" if model.endswith(".mlir") else ""
        inputs = [f"0={x}"] if x and os.path.exists(x) else []
        try:
            peak, rows = audit(args.kiln, model, inputs, args.n, dict(os.environ))
        except RuntimeError as e:
            print(f"== {os.path.basename(model)}: {e}")
            continue
        heavy = [r for r in rows if r["mflop"] >= args.min_mflop and HEAVY.search(r["kernel"] + " " + r["how"])]
        print(f"== {os.path.basename(model)}: peak {peak:.0f} GFLOP/s, {len(heavy)} matmul/conv kernels of "
              f">= {args.min_mflop:.0f} MFLOP")
        for r in sorted(heavy, key=lambda r: r["mflop"] / r["median_ms"]):
            pct = 100.0 * r["mflop"] / r["median_ms"] / peak if r["median_ms"] > 0 else 0.0
            mark = "BELOW" if pct < args.target else "ok   "
            below += pct < args.target
            total += 1
            print(f"  {mark} {pct:5.1f}%  {r['mflop']:8.1f} MFLOP  {r['median_ms']:8.3f} ms x{r['calls'] // args.n:<3} "
                  f"{r['kernel'][:90]}")
            if r["how"]:
                print(f"        how: {r['how'][:160]}")
    print(f"{below} of {total} kernels below {args.target:.0f}% of peak")


if __name__ == "__main__":
    sys.exit(main())
