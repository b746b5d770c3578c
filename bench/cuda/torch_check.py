#!/usr/bin/env python3
"""PyTorch's side of the GPU check (scripts/gpu-check.sh): trains
torchvision's ResNet-50 on the GPU from the values `test_cuda_gpu --dump DIR`
wrote -- sgrt's initial parameters and batch-norm state (the tensor names
are torchvision's state_dict keys), the batches, the learning rate -- with
the optimizer sgrt's ResNet-50 example uses (SGD, momentum 0.9), in strict
fp32 (no TF32), and compares every step's loss with sgrt's on CUDA.

  torch_check.py DIR [--json]

Prints the losses and, last, one JSON object: torch_losses, sgrt_losses,
max_rel_error (the goal: at most 1e-4), the torch version."""
import json
import sys

import numpy as np
import torch
import torchvision

if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
    sys.exit(__doc__)
d = sys.argv[1]
with open(d + "/manifest.json", encoding="utf-8") as f:
    m = json.load(f)
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.backends.cudnn.deterministic = True
dev = torch.device("cuda")
model = torchvision.models.resnet50(num_classes=m["classes"]).to(dev)
sd = model.state_dict()
missing = set(k for k in sd if not k.endswith("num_batches_tracked"))
for t in m["tensors"]:
    arr = np.fromfile("%s/%s.bin" % (d, t["name"]), dtype="<f4").reshape(t["shape"])
    if t["name"] not in sd:
        sys.exit("torch_check: sgrt tensor %s is not in torchvision's resnet50" % t["name"])
    sd[t["name"]].copy_(torch.from_numpy(arr))
    missing.discard(t["name"])
if missing:
    sys.exit("torch_check: no values for %s" % sorted(missing)[:5])
steps, (n, c, h, w) = m["steps"], m["images"]
images = np.fromfile(d + "/images.bin", dtype="<f4").reshape(steps, n, c, h, w)
labels = np.fromfile(d + "/labels.bin", dtype="<i8").reshape(steps, n)
opt = torch.optim.SGD(model.parameters(), lr=m["lr"], momentum=0.9)
model.train()
losses = []
for i in range(steps):
    x = torch.from_numpy(images[i]).to(dev)
    y = torch.from_numpy(labels[i]).to(dev)
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    losses.append(loss.item())
ours = m["sgrt_cuda_losses"]
rel = max(abs(a - b) / abs(b) for a, b in zip(ours, losses))
for i, (a, b) in enumerate(zip(ours, losses)):
    print("step %d  sgrt %.7f  torch %.7f" % (i + 1, a, b))
print(json.dumps({"check": "torch_resnet50_losses", "torch_losses": losses, "sgrt_losses": ours,
                  "max_rel_error": rel, "torch": torch.__version__}))
