"""A tiny Linear + ReLU model as ONNX and as a saved torch.export program,
with an input and PyTorch's output (for lit/cli/import.test); and a tiny
nn.MultiheadAttention block as ONNX, whose export computes its reshapes'
targets from shapes (Shape -> Gather/Slice -> Concat -> Reshape, as ViT's),
which torch-mlir's importer cannot lower unless they are folded first."""
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


class Attention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = torch.nn.MultiheadAttention(16, 4, batch_first=True)
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        y, _ = self.attn(x, x, x, need_weights=False)
        return self.head(y + x)


attention = Attention().eval()
xa = torch.randn(1, 5, 16)
np.save(os.path.join(out, "mha_x.npy"), xa.numpy())
np.save(os.path.join(out, "mha_y.npy"), attention(xa).detach().numpy())
torch.onnx.export(attention, xa, os.path.join(out, "mha.onnx"), opset_version=17, dynamo=False)
