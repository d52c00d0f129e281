"""A tiny Linear + ReLU model as ONNX and as a saved torch.export program,
with an input and PyTorch's output (for lit/cli/import.test)."""
import os
import sys

import numpy as np
import torch

out = sys.argv[1]
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU()).eval()
x = torch.randn(2, 8)
np.save(os.path.join(out, "x.npy"), x.numpy())
np.save(os.path.join(out, "y.npy"), model(x).detach().numpy())
torch.onnx.export(model, x, os.path.join(out, "tiny.onnx"), opset_version=17, dynamo=False)
torch.export.save(torch.export.export(model, (x,)), os.path.join(out, "tiny.pt2"))
