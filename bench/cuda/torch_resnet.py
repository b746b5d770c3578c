#!/usr/bin/env python3
"""PyTorch's ResNet-50 training step on the GPU, the peer of
`resnet50_train --device cuda` in scripts/gpu-check.sh: torchvision's
resnet50 (1000 classes), SGD lr 0.02 momentum 0.9, cross-entropy, one fixed
random batch already on the device, channels_last, eager or torch.compile,
strict fp32 or TF32.

  torch_resnet.py eager|compile fp32|tf32 BATCH STEPS [RES]

Prints one JSON line: median ms per step over STEPS steps after 3 warm-up
steps (whose time, compilation included, is warmup_seconds), images/s, the
peak of torch.cuda.max_memory_allocated and max_memory_reserved, the torch
version."""
import json
import statistics
import sys
import time

import torch
import torchvision

if len(sys.argv) < 5 or sys.argv[1] not in ("eager", "compile") or sys.argv[2] not in ("fp32", "tf32"):
    sys.exit(__doc__)
mode, prec, batch, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
res = int(sys.argv[5]) if len(sys.argv) > 5 else 224
tf32 = prec == "tf32"
torch.backends.cuda.matmul.allow_tf32 = tf32
torch.backends.cudnn.allow_tf32 = tf32
torch.backends.cudnn.benchmark = True
dev = torch.device("cuda")
torch.manual_seed(0)
model = torchvision.models.resnet50(num_classes=1000).to(dev, memory_format=torch.channels_last)
opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
x = torch.randn(batch, 3, res, res, device=dev).to(memory_format=torch.channels_last)
y = torch.randint(0, 1000, (batch,), device=dev)


def fwd(x, y):
    return torch.nn.functional.cross_entropy(model(x), y)


f = torch.compile(fwd) if mode == "compile" else fwd


def step():
    opt.zero_grad(set_to_none=True)
    loss = f(x, y)
    loss.backward()
    opt.step()
    return loss


t0 = time.perf_counter()
for _ in range(3):
    step()
torch.cuda.synchronize()
warm = time.perf_counter() - t0
times = []
for _ in range(steps):
    t = time.perf_counter()
    step()
    torch.cuda.synchronize()
    times.append(time.perf_counter() - t)
ms = statistics.median(times) * 1e3
print(json.dumps({"peer": "torch_" + mode, "precision": prec, "batch": batch, "res": res, "ms_per_step": ms,
                  "images_per_second": batch / ms * 1e3, "warmup_seconds": warm,
                  "max_memory_allocated": torch.cuda.max_memory_allocated(),
                  "max_memory_reserved": torch.cuda.max_memory_reserved(), "torch": torch.__version__}))
