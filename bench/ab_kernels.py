#!/usr/bin/env python3
"""Per-kernel A/B of two kiln builds (or two environments) on one model.

Runs `kiln profile MODEL --serial --placement fixed` for A and B in
alternating rounds (each with a compile cache of its own), then prints, for
every kernel whose plan differs between them (the `how:` line of
kernels.txt), A's and B's median time over the rounds and their ratio, and
the sum over those kernels. Kernels whose plan is the same are left out:
on a VM whose speed moves by 15% between minutes, a kernel's own median in
alternating serial runs is the figure that holds, where a whole model's
time is mostly noise.

    python3 bench/ab_kernels.py MODEL.mlir -i 0=x.npy --a /tmp/kiln-before --b build/bin/kiln
    python3 bench/ab_kernels.py MODEL.mlir -i 0=x.npy --b-env KILN_MAX_VECTOR_BITS=256 [--rounds 3] [-n 100]
    python3 bench/ab_kernels.py MODEL.mlir -i 0=x.npy --a-env KILN_PREFETCH_BYTES=0 --all

Needs nothing but Python 3 and the kiln binaries.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile


def kernel_rows(path):
    """kernels.txt (`kiln profile --out`) -> (its header line, one dict per
    kernel row: key, calls, median_ms, mflop, output, kernel (name: ops),
    how). Also bench/peak_audit.py's reader."""
    lines = open(path).read().splitlines()
    rows = []
    for i, line in enumerate(lines[2:], start=2):
        parts = line.split(None, 10)
        if line.strip().startswith("how:") or len(parts) < 11:
            continue
        m = re.search(r"(jit:@\S+?|kernel:\S+?):", line)
        if not m:
            continue
        key = m.group(1)
        if key.startswith("kernel:"):  # one handwritten kernel serves many ops: tell them apart by output
            key += "/" + parts[9]
        nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
        rows.append({"key": key, "calls": int(parts[1]), "median_ms": float(parts[4]), "mflop": float(parts[8]),
                     "output": parts[9], "kernel": parts[10],
                     "how": nxt[len("how:"):].strip() if nxt.startswith("how:") else ""})
    return (lines[0] if lines else ""), rows


def parse_kernels(path):
    """kernels.txt -> {kernel key: (median ms, how)}."""
    return {r["key"]: (r["median_ms"], r["how"]) for r in kernel_rows(path)[1]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("-i", "--input", action="append", default=[], help="ARG=FILE.npy, as for kiln profile")
    ap.add_argument("--a", default="build/bin/kiln", help="kiln binary A")
    ap.add_argument("--b", default=None, help="kiln binary B (default: A's)")
    ap.add_argument("--a-env", action="append", default=[], help="NAME=VALUE set for A's runs")
    ap.add_argument("--b-env", action="append", default=[], help="NAME=VALUE set for B's runs")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-n", "--iterations", type=int, default=60)
    ap.add_argument("--all", action="store_true",
                    help="every kernel, not only those whose plan differs (a change the how: line does not show, "
                         "such as prefetches); kernels within 3%% are summed but not listed")
    args = ap.parse_args()
    b_bin = args.b or args.a
    for binary in (args.a, b_bin):
        if not os.access(binary, os.X_OK):
            sys.exit(f"ab_kernels: {binary} is not an executable kiln binary")
    work = tempfile.mkdtemp(prefix="kiln-ab-")
    results = {"A": [], "B": []}
    try:
        for r in range(args.rounds):
            for tag, binary, env_list in (("A", args.a, args.a_env), ("B", b_bin, args.b_env)):
                env = dict(os.environ)
                for kv in env_list:
                    name, _, value = kv.partition("=")
                    env[name] = value
                out = os.path.join(work, f"{tag}{r}")
                cmd = [binary, "profile", args.model, "-n", str(args.iterations), "--serial", "--placement", "fixed",
                       "--cache-dir", os.path.join(work, f"cache-{tag}"), "--out", out]
                for i in args.input:
                    cmd += ["-i", i]
                p = subprocess.run(cmd, env=env, capture_output=True, text=True)
                if p.returncode != 0:
                    sys.exit(f"ab_kernels: {' '.join(cmd)} failed:\n{p.stderr[-2000:]}")
                results[tag].append(parse_kernels(os.path.join(out, "kernels.txt")))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    a0, b0 = results["A"][0], results["B"][0]
    sum_a = sum_b = 0.0
    changed = 0
    for key in a0:
        if key not in b0 or (not args.all and a0[key][1] == b0[key][1]):
            continue
        ma = statistics.median(run[key][0] for run in results["A"] if key in run)
        mb = statistics.median(run[key][0] for run in results["B"] if key in run)
        sum_a += ma
        sum_b += mb
        changed += 1
        if args.all and abs(mb / ma - 1) <= 0.03:
            continue
        print(f"{key:32s} A {ma * 1000:9.1f} us  B {mb * 1000:9.1f} us  B/A {mb / ma:.3f}")
        print(f"    A: {a0[key][1]}")
        print(f"    B: {b0[key][1]}")
    if changed:
        print(f"{changed} kernels {'in all' if args.all else 'with different plans'}: A {sum_a * 1000:.1f} us, B {sum_b * 1000:.1f} us, "
              f"B/A {sum_b / sum_a:.3f} (medians of {args.rounds} alternating rounds)")
    else:
        print("no kernel's plan differs between A and B")
    return 0


if __name__ == "__main__":
    sys.exit(main())
