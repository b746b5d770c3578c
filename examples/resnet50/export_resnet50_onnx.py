#!/usr/bin/python3
"""Exports torchvision's ResNet-50 to ONNX in training form, for
resnet50_onnx_check (the C-built ResNet-50 against the ONNX import).

usage: export_resnet50_onnx.py OUT.onnx RES BATCH CLASSES [SEED]

The model is torchvision.models.resnet50(num_classes=CLASSES) with a fixed
seed; batch-norm weights, biases and running statistics are randomised so that
copying them by name is actually checked. Exported with
training=TrainingMode.TRAINING and do_constant_folding=False (batch norm keeps
its running-statistics outputs and its state_dict names), input "images"
[BATCH, 3, RES, RES], output "logits". Run it with Debian's /usr/bin/python3
(torch 1.13, torchvision 0.14). Exit 77 when torch/torchvision/onnx are missing.
"""
import sys

try:
    import torch
    import torchvision
    import onnx  # noqa: F401  (torch.onnx.export needs it)
except ImportError as e:  # the test is skipped, not failed
    print("export_resnet50_onnx: %s" % e, file=sys.stderr)
    sys.exit(77)


def main():
    if len(sys.argv) not in (5, 6):
        print(__doc__, file=sys.stderr)
        return 2
    out, res, batch, classes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    seed = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    torch.manual_seed(seed)
    model = torchvision.models.resnet50(weights=None, num_classes=classes)
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                c = m.num_features
                m.weight.copy_(1 + 0.2 * torch.randn(c, generator=g))
                m.bias.copy_(0.1 * torch.randn(c, generator=g))
                m.running_mean.copy_(0.1 * torch.randn(c, generator=g))
                m.running_var.copy_(1 + 0.3 * torch.rand(c, generator=g))
    model.train()
    x = torch.zeros(batch, 3, res, res)
    torch.onnx.export(model, (x,), out, input_names=["images"], output_names=["logits"], opset_version=14,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
