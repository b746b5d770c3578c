#!/usr/bin/python3
"""Writes tests/data/onnx/buffer_pe*.{onnx,bin} for test_onnx_constants.c:
a model whose arithmetic reads a registered buffer (a sinusoidal positional
encoding `pe`, as PyTorch exports it: an initializer like the weights), with
PyTorch's logits and the losses of three SGD steps in which `pe`, a buffer,
is not trained. Run with Debian's /usr/bin/python3 (PyTorch 1.13, onnx)."""
import math
import os
import sys

import numpy as np
import onnx
import torch

out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
B, T, D, C, K = 2, 6, 8, 16, 5


class PositionalModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Linear(D, C)
        pos = torch.arange(T, dtype=torch.float32).unsqueeze(1)
        freq = torch.exp(torch.arange(0, C, 2, dtype=torch.float32) * (-math.log(100.0) / C))
        pe = torch.zeros(T, C)
        pe[:, 0::2] = torch.sin(pos * freq)
        pe[:, 1::2] = torch.cos(pos * freq)
        self.register_buffer("pe", pe)
        self.head = torch.nn.Linear(C, K)

    def forward(self, x):
        h = self.emb(x) + self.pe  # arithmetic reads the buffer, twice
        h = h * (1.0 + 0.5 * self.pe)
        return self.head(torch.tanh(h))


torch.manual_seed(0)
m = PositionalModel()
x = torch.randn(B, T, D)
labels = torch.randint(0, K, (B * T,))
path = os.path.join(out, "buffer_pe.onnx")
torch.onnx.export(m, (x,), path, input_names=["x"], output_names=["logits"], opset_version=14,
                  training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
names = [i.name for i in onnx.load(path).graph.initializer]
assert "pe" in names, names

logits = m(x).detach()
opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)  # pe is a buffer: not among them
losses = []
for _ in range(3):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(m(x).reshape(B * T, K), labels)
    loss.backward()
    opt.step()
    losses.append(loss.item())
x.numpy().astype("<f4").tofile(os.path.join(out, "buffer_pe_x.bin"))
labels.numpy().astype("<i8").tofile(os.path.join(out, "buffer_pe_labels.bin"))
np.concatenate([logits.numpy().ravel(), np.array(losses)]).astype("<f4").tofile(os.path.join(out, "buffer_pe_ref.bin"))
print("initializers:", names, "losses:", losses)
