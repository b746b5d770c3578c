#!/usr/bin/python3
"""The torch.compile peer of ResNet-50 for bench/fusion.sh: the training step
of ../shared/bench/torch_resnet50_step.py (torchvision's resnet50, 1000
classes, SGD lr 0.01 momentum 0.9, cross-entropy, fp32 on the CPU), with the
forward and backward compiled by torch.compile and the optimizer step compiled
too. Needs PyTorch 2.x (bench/torch_venv.sh); under 1.13 it ends with a
message.

  torch_resnet50_compile.py RES BATCH STEPS [THREADS] [cl|nchw]

Prints one JSON line: median ms per step over STEPS steps after 3 warm-up
steps (compiling included; their time is warmup_seconds), images/s, peak RSS,
the torch version."""
import os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch
import torch_peer

if len(sys.argv) < 4 or sys.argv[1] in ("-h", "--help"):
    sys.exit(__doc__)
torch_peer.compile_or_exit("compile")
import torchvision

res, batch, steps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
threads = int(sys.argv[4]) if len(sys.argv) > 4 else torch.get_num_threads()
layout = sys.argv[5] if len(sys.argv) > 5 else "cl"
fmt = torch.channels_last if layout == "cl" else torch.contiguous_format
torch.set_num_threads(threads)
torch.manual_seed(0)
model = torchvision.models.resnet50(num_classes=1000).to(memory_format=fmt)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
x = torch.randn(batch, 3, res, res).to(memory_format=fmt)
y = torch.randint(0, 1000, (batch,))
loss_fn = torch.nn.CrossEntropyLoss()


@torch.compile
def forward(x, y):
    return loss_fn(model(x), y)


def model_step():
    loss = forward(x, y)
    loss.backward()
    return loss


r = torch_peer.run(torch_peer.prepare("compile", model_step, opt), "compile", steps,
                   {"model": "resnet50", "res": res, "batch": batch, "layout": layout}, emit_line=False)
r["images_per_s"] = round(batch / r["ms_per_step"] * 1e3, 3)
torch_peer.emit(r)
