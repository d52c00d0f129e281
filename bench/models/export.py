#!/usr/bin/env python3
"""Exports kiln's model zoo into a cache folder (never committed).

For each model (fixed seed, random weights; nothing downloaded) it writes
  <zoo>/<model>/x.npy            the input
  <zoo>/<model>/y.npy            the framework's (PyTorch's) output
  <zoo>/<model>/tosa.mlir        torch-mlir, output_type="tosa"
  <zoo>/<model>/linalg.mlir      torch-mlir, output_type="linalg-on-tensors"
  <zoo>/<model>/model.onnx       torch.onnx
  <zoo>/<model>/onnx.mlir        the ONNX file through `kiln import` (torch-mlir's ONNX route)
Models: the architectures of zoo_models.py (torchvision CNNs, ViT, BERT-base,
a T5-small encoder, GPT-2; random weights) and `tiny` (a small CNN, a few
MB, for quick checks). An exporter that fails on a model is reported and
the other routes go on. The zoo test (kiln_zoo_tests)
runs every file through kiln and compares with y.npy.

  bench/models/setup.sh                              # the Python environment, once
  ~/.cache/kiln/peers-venv/bin/python bench/models/export.py [--models resnet50,bert,...]
      [--zoo DIR] [--kiln build/bin/kiln]            # default DIR: $KILN_ZOO_DIR or ~/.cache/kiln/zoo
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from zoo_models import build_model, onnx_export  # noqa: E402


class Tiny(torch.nn.Module):
    """conv + BN + ReLU, depthwise conv + BN, residual add, pooling, linear."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.b1 = torch.nn.BatchNorm2d(16)
        self.dw = torch.nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.b2 = torch.nn.BatchNorm2d(16)
        self.fc = torch.nn.Linear(16, 10)

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        y = y + self.b2(self.dw(y))
        return self.fc(torch.nn.functional.adaptive_avg_pool2d(y, 1).flatten(1))


def make(name):
    if name == "tiny":
        torch.manual_seed(0)
        m = Tiny().eval()
        with torch.no_grad():  # non-trivial batch-norm statistics
            for b in (m.b1, m.b2):
                b.running_mean.uniform_(-0.5, 0.5)
                b.running_var.uniform_(0.5, 2.0)
                b.weight.uniform_(0.5, 1.5)
                b.bias.uniform_(-0.2, 0.2)
        return m, torch.randn(1, 3, 32, 32)
    return build_model(name)


def export(name, folder, kiln):
    os.makedirs(folder, exist_ok=True)
    model, x = make(name)
    with torch.no_grad():
        y = model(x)
    np.save(os.path.join(folder, "x.npy"), x.numpy())
    np.save(os.path.join(folder, "y.npy"), y.numpy())
    from torch_mlir import fx
    for kind, file in (("tosa", "tosa.mlir"), ("linalg-on-tensors", "linalg.mlir")):
        t0 = time.time()
        try:
            module = fx.export_and_import(model, x, output_type=kind, func_name="main")
            text = str(module)
            if "tm_tensor." in text:  # torch-mlir's own dialect (e.g. cumsum), not an input kiln takes
                print(f"  {name}: {kind} export uses torch-mlir's tm_tensor dialect: not written", flush=True)
                continue
            with open(os.path.join(folder, file), "w") as f:
                f.write(text)
            print(f"  {name}: {kind} in {time.time() - t0:.1f} s", flush=True)
        except Exception as e:  # an exporter failure is reported, the rest goes on
            print(f"  {name}: {kind} export failed: {str(e)[:300]}", flush=True)
    onnx = os.path.join(folder, "model.onnx")
    try:
        onnx_export(model, x, onnx)
        r = subprocess.run([kiln, "import", "--force", onnx, "-o", os.path.join(folder, "onnx.mlir")],
                           capture_output=True, text=True)
        print(f"  {name}: onnx -> kiln import: {'ok' if r.returncode == 0 else r.stderr.strip()[:300]}", flush=True)
    except Exception as e:
        print(f"  {name}: ONNX export failed: {str(e)[:300]}", flush=True)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="tiny,resnet50,mobilenet_v2,mobilenet_v3_small,efficientnet_b0,convnext_tiny,"
                    "regnet_y_400mf,shufflenet_v2_x1_0,densenet121,vit_b_16,bert,t5_encoder,gpt2")
    ap.add_argument("--zoo", default=os.environ.get("KILN_ZOO_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "kiln", "zoo"))
    ap.add_argument("--kiln", default=os.path.join(here, "..", "..", "build", "bin", "kiln"))
    args = ap.parse_args()
    for name in args.models.split(","):
        export(name, os.path.join(args.zoo, name), args.kiln)
    print(f"zoo: {args.zoo}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
