#!/usr/bin/env python3
"""kiln serve under load beside the usual ONNX Runtime server, same machine, same run.

For each model (a directory holding model.mlir with a dynamic batch and the
model.onnx it came from, e.g. ~/.cache/kiln/peers-models/resnet50-dynbatch),
at each concurrency: kiln serve without and with dynamic batching, a KServe
Python model server running ONNX Runtime (kserve_ort.py) on the ONNX file,
and kiln's in-process call. kiln-loadgen drives all of them over gRPC with
binary tensors (PyPI's perf-analyzer package is a placeholder), closed loop.

  python3 bench/serve/run.py [--models DIR...] [--concurrency 1,4,16] [--seconds 10]

Needs the peers venv (bench/peers/setup.sh, with `kserve` added) for the
KServe peer; without it the peer is skipped, saying so.
"""
import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "kiln")
LINE = re.compile(r"(\d+) ok,\s+([\d.]+) items/s, p50\s+([\d.]+) ms, p90\s+([\d.]+), p99\s+([\d.]+), max\s+([\d.]+)(.*)")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def loadgen(build, args, label, extra):
    cmd = [os.path.join(build, "bin", "kiln-loadgen"), "--seconds", str(args.seconds), "--warmup", str(args.warmup),
           "--label", label] + extra
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.seconds * 4 + 120)
    print(out.stdout.strip() or out.stderr.strip(), flush=True)
    m = LINE.search(out.stdout)
    return None if not m else {"ok": int(m.group(1)), "tput": float(m.group(2)), "p50": float(m.group(3)),
                               "p99": float(m.group(5)), "errors": m.group(7).strip(", ")}


def wait_ready(url, proc, seconds=600):
    for _ in range(seconds * 10):
        if proc.poll() is not None:
            return False
        try:
            if urllib.request.urlopen(url, timeout=1).status == 200:
                return True
        except Exception:
            pass
        time.sleep(0.1)
    return False


TINY = '''func.func @main(%x: tensor<1x4xf32> {kiln.name = "x"}) -> tensor<1x4xf32> {
  %y = tosa.add %x, %x : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<1x4xf32>
  return %y : tensor<1x4xf32>
}
'''


def overhead(args):
    """What the protocol adds to a call: a one-row model served (gRPC, binary) vs the same loop in process."""
    repo = tempfile.mkdtemp(prefix="kiln-serve-tiny-")
    os.makedirs(os.path.join(repo, "tiny", "1"))
    with open(os.path.join(repo, "tiny", "1", "model.mlir"), "w") as f:
        f.write(TINY)
    http, grpc = free_port(), free_port()
    server = subprocess.Popen([os.path.join(args.build, "bin", "kiln-serve"), "--model-repository", repo, "--http-port",
                               str(http), "--grpc-port", str(grpc), "--metrics-port", "-1", "--option", "cache=off"],
                              stderr=subprocess.DEVNULL)
    if not wait_ready(f"http://127.0.0.1:{http}/v2/health/ready", server):
        sys.exit("tiny: kiln serve did not become ready")
    ping = loadgen(args.build, args, "gRPC ServerLive", ["--url", f"127.0.0.1:{grpc}", "--ping", "--concurrency", "1"])
    served = loadgen(args.build, args, "kiln serve tiny", ["--url", f"127.0.0.1:{grpc}", "--model", "tiny", "--concurrency", "1"])
    server.send_signal(signal.SIGTERM)
    server.wait(timeout=60)
    local = loadgen(args.build, args, "kiln in process tiny", ["--in-process", os.path.join(repo, "tiny", "1", "model.mlir"),
                                                              "--concurrency", "1", "--option", "cache=off"])
    if served and local:
        print(f"-- tiny: concurrency 1: kiln serve p50 - in-process p50 = {1000 * (served['p50'] - local['p50']):.0f} us "
              "(gRPC, binary tensors, loopback; target <= 100 us)", flush=True)
    if served and ping:
        print(f"   of which gRPC's own round trip (ServerLive p50): {1000 * ping['p50']:.0f} us; "
              f"kiln serve's infer path beyond it: {1000 * (served['p50'] - ping['p50']):.0f} us", flush=True)
    shutil.rmtree(repo, ignore_errors=True)


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def overload(args, repo, name):
    """Concurrency 64 against a queue limit of 16: beyond it only clean UNAVAILABLE answers, the served
    requests' p99 bounded, the server's memory flat."""
    http, grpc = free_port(), free_port()
    server = subprocess.Popen([os.path.join(args.build, "bin", "kiln-serve"), "--model-repository", repo,
                               "--http-port", str(http), "--grpc-port", str(grpc), "--metrics-port", "-1",
                               "--threads", str(args.threads), "--max-queue-size", "16",
                               "--cache-dir", os.path.join(CACHE, "serve-bench-cache")], stderr=subprocess.DEVNULL)
    if not wait_ready(f"http://127.0.0.1:{http}/v2/health/ready", server):
        sys.exit("overload: kiln serve did not become ready")
    rss = [rss_mib(server.pid)]
    rounds = []
    for i in range(4):
        rounds.append(loadgen(args.build, args, f"overload {name} ({i + 1})",
                              ["--url", f"127.0.0.1:{grpc}", "--model", name, "--concurrency", "64"]))
        rss.append(rss_mib(server.pid))
    server.send_signal(signal.SIGTERM)
    server.wait(timeout=120)
    errors = " / ".join((r and r["errors"]) or "none" for r in rounds)
    print(f"-- overload: queue limit 16, concurrency 64, 4 rounds: server RSS " + " -> ".join(f"{m:.0f}" for m in rss) +
          f" MiB; answers other than results per round: {errors} (grpc 14 = UNAVAILABLE)", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--models", nargs="*", default=[os.path.join(CACHE, "peers-models", "resnet50-dynbatch")])
    p.add_argument("--concurrency", default="1,4,16")
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--warmup", type=float, default=3)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--max-batch", type=int, default=16)
    p.add_argument("--queue-delay-us", type=int, default=2000)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--venv", default=os.path.join(CACHE, "peers-venv"))
    p.add_argument("--serve-option", action="append", default=[], help="a kiln runtime option NAME=VALUE for kiln serve")
    p.add_argument("--overhead", action="store_true", help="also: the protocol's overhead on a one-row model, served vs in process")
    p.add_argument("--overload", action="store_true",
                   help="also: concurrency 64 against a queue limit of 16 (answers beyond it, p99 of the served, memory)")
    args = p.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    python = os.path.join(args.venv, "bin", "python")
    have_kserve = os.path.exists(python) and subprocess.run(
        [python, "-c", "import kserve, onnxruntime"], capture_output=True).returncode == 0
    if not have_kserve:
        print(f"KServe peer skipped: no venv with kserve and onnxruntime at {args.venv} "
              "(bench/peers/setup.sh, then pip install kserve)")
    if args.overhead:
        overhead(args)
    for src in args.models:
        name = os.path.basename(src.rstrip("/")).replace("-dynbatch", "")
        mlir, onnx = os.path.join(src, "model.mlir"), os.path.join(src, "model.onnx")
        if not os.path.exists(mlir):
            print(f"{name}: skipped, no {mlir} (bench/shapes exports it)")
            continue
        repo = tempfile.mkdtemp(prefix="kiln-serve-bench-")
        for served, batching in ((name, ""), (name + "_batched",
                                               f"dynamic_batching {{ max_queue_delay_microseconds: {args.queue_delay_us} }}")):
            os.makedirs(os.path.join(repo, served, "1"))
            os.symlink(mlir, os.path.join(repo, served, "1", "model.mlir"))
            with open(os.path.join(repo, served, "config.pbtxt"), "w") as f:
                f.write(f"max_batch_size: {args.max_batch}\n{batching}\n")
        http, grpc = free_port(), free_port()
        log = open(os.path.join(repo, "serve.log"), "w")
        server = subprocess.Popen([os.path.join(args.build, "bin", "kiln-serve"), "--model-repository", repo,
                                   "--http-port", str(http), "--grpc-port", str(grpc), "--metrics-port", "-1",
                                   "--threads", str(args.threads), "--max-queue-size", "256",
                                   "--cache-dir", os.path.join(CACHE, "serve-bench-cache")]
                                  + [a for o in args.serve_option for a in ("--option", o)], stderr=log)
        t0 = time.time()
        if not wait_ready(f"http://127.0.0.1:{http}/v2/health/ready", server):
            print(open(log.name).read())
            sys.exit(f"{name}: kiln serve did not become ready")
        print(f"== {name}: kiln serve ready in {time.time() - t0:.1f} s (load + prewarm), {args.threads} threads")
        results = {}
        for c in levels:
            results[("kiln", c)] = loadgen(args.build, args, f"kiln serve {name}", ["--url", f"127.0.0.1:{grpc}", "--model", name, "--concurrency", str(c)])
            results[("kiln+batching", c)] = loadgen(args.build, args, f"kiln serve {name} batching",
                                                     ["--url", f"127.0.0.1:{grpc}", "--model", name + "_batched", "--concurrency", str(c)])
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=120)
        if args.overload:
            overload(args, repo, name)
        results[("in-process", 1)] = loadgen(args.build, args, f"kiln in process {name}", ["--in-process", mlir, "--concurrency", "1", "--option", "cache_dir=" + os.path.join(CACHE, "serve-bench-cache"),
                                                 "--option", f"threads={args.threads}"])
        if have_kserve and os.path.exists(onnx):
            khttp, kgrpc = free_port(), free_port()
            peer = subprocess.Popen([python, os.path.join(HERE, "kserve_ort.py"), "--model", name, "--onnx", onnx,
                                     "--threads", str(args.threads), "--http-port", str(khttp), "--grpc-port", str(kgrpc)],
                                    stdout=subprocess.DEVNULL, stderr=open(os.path.join(repo, "kserve.log"), "w"))
            if wait_ready(f"http://127.0.0.1:{khttp}/v2/models/{name}/ready", peer, 300):
                for c in levels:
                    results[("kserve+ort", c)] = loadgen(args.build, args, f"KServe+ORT {name}",
                                                         ["--url", f"127.0.0.1:{kgrpc}", "--model", name, "--concurrency", str(c),
                                                          "--input", "x:FP32:-1x3x224x224"])
            else:
                print(f"KServe peer did not become ready (see {repo}/kserve.log)")
            peer.send_signal(signal.SIGTERM)
            try:
                peer.wait(timeout=60)
            except subprocess.TimeoutExpired:
                peer.kill()
        print(f"-- {name}: ratios (one run, this machine)")
        k1, ip = results.get(("kiln", 1)), results.get(("in-process", 1))
        if k1 and ip:
            print(f"   concurrency 1: kiln serve p50 - in-process p50 = {1000 * (k1['p50'] - ip['p50']):.0f} us (target <= 100 us)")
        for c in levels:
            kb, kn, ko = results.get(("kiln+batching", c)), results.get(("kiln", c)), results.get(("kserve+ort", c))
            parts = []
            if kb and kn:
                parts.append(f"batching/no batching {kb['tput'] / kn['tput']:.2f}x")
            if kb and ko:
                parts.append(f"kiln batching/KServe+ORT {kb['tput'] / ko['tput']:.2f}x")
            if kn and ko:
                parts.append(f"kiln/KServe+ORT {kn['tput'] / ko['tput']:.2f}x")
            if parts:
                print(f"   concurrency {c} throughput: " + ", ".join(parts))
        shutil.rmtree(repo, ignore_errors=True)


if __name__ == "__main__":
    main()
