#!/usr/bin/python3
"""Exports a torchvision classification model to ONNX, in inference or
training form, for sgrt's ONNX importer (docs/onnx.md).

usage: export_torchvision.py OUT.onnx [--model resnet50] [--res 224] [--batch 1]
                             [--classes 1000] [--form eval|train] [--seed 0]
                             [--randomize-bn] [--dynamic-batch]

--form eval   model.eval(), constant folding on: PyTorch folds batch norm into
              the preceding convolution; for inference (`sgrt run`).
--form train  TrainingMode.TRAINING, do_constant_folding=False: batch norm
              stays a BatchNormalization node with its running-statistics
              outputs and initializers keep their state_dict names, so the
              model can be trained after import (sgrt.Model.from_onnx(...)
              .add_sgd(...), or resnet50_onnx_check).
--randomize-bn  draws batch-norm weights, biases and running statistics at
              random (seeded), so that a check which copies them by name
              actually checks something.

The model is torchvision.models.<model>(weights=None, num_classes=CLASSES)
with torch.manual_seed(SEED); input "images" [BATCH, 3, RES, RES], output
"logits". Run it with Debian's /usr/bin/python3 (torch 1.13, torchvision
0.14). Exit 77 when torch, torchvision or onnx is missing, 2 for bad usage.
"""
import argparse
import sys

try:
    import torch
    import torchvision
    import onnx  # noqa: F401  (torch.onnx.export needs it)
except ImportError as e:  # tests skip on 77 instead of failing
    print("export_torchvision: %s" % e, file=sys.stderr)
    sys.exit(77)


def build(name, classes, seed, randomize_bn):
    if not hasattr(torchvision.models, name) or not callable(getattr(torchvision.models, name)):
        raise SystemExit("export_torchvision: torchvision has no model '%s'" % name)
    torch.manual_seed(seed)
    model = getattr(torchvision.models, name)(weights=None, num_classes=classes)
    if randomize_bn:
        g = torch.Generator().manual_seed(seed + 1)
        with torch.no_grad():
            for m in model.modules():
                if isinstance(m, torch.nn.BatchNorm2d):
                    c = m.num_features
                    m.weight.copy_(1 + 0.2 * torch.randn(c, generator=g))
                    m.bias.copy_(0.1 * torch.randn(c, generator=g))
                    m.running_mean.copy_(0.1 * torch.randn(c, generator=g))
                    m.running_var.copy_(1 + 0.3 * torch.rand(c, generator=g))
    return model


def main():
    ap = argparse.ArgumentParser(description="Export a torchvision model to ONNX for sgrt.")
    ap.add_argument("out")
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--res", type=int, default=224)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--form", choices=("eval", "train"), default="eval")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--randomize-bn", action="store_true")
    ap.add_argument("--dynamic-batch", action="store_true", help="a symbolic batch dimension (eval form)")
    a = ap.parse_args()
    for k in ("res", "batch", "classes"):
        if getattr(a, k) < 1:
            ap.error("--%s must be positive" % k)
    model = build(a.model, a.classes, a.seed, a.randomize_bn)
    x = torch.zeros(a.batch, 3, a.res, a.res)
    kw = dict(input_names=["images"], output_names=["logits"], opset_version=14)
    if a.form == "train":
        model.train()
        kw.update(training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    else:
        model.eval()
        if a.dynamic_batch:
            kw["dynamic_axes"] = {"images": {0: "batch"}, "logits": {0: "batch"}}
    torch.onnx.export(model, (x,), a.out, **kw)
    print("export_torchvision: %s (%s form, %dx%d, batch %d, %d classes) -> %s"
          % (a.model, a.form, a.res, a.res, a.batch, a.classes, a.out), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
