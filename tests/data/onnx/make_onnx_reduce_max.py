#!/usr/bin/python3
"""Writes the ReduceMax / ReduceMin test model of tests/unit/test_onnx_transformer.c
(committed, like make_onnx.py's; run with Debian's interpreter, which has
python3-torch and python3-onnx):

    /usr/bin/python3 tests/data/onnx/make_onnx_reduce_max.py

Training export (torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
opset 14):
  reduce_max_train.onnx  one pre-norm transformer block (LayerNorm, fused qkv
                        Linear split in three, softmax attention, output
                        projection, a GELU MLP, residuals) on input "x"
                        [2,6,16], then a max- and a min-pooled head over the
                        sequence: h.amax(dim=1) and h.amin(dim=1) concatenated
                        into a Linear(32, 5), plus h.max(dim=2)[0] (which
                        torch 1.13 also exports as ReduceMax) averaged and
                        added; labels i % 5 (reduce_max_x.f32,
                        reduce_max_ref.f32)
  The reference is PyTorch's logits, the gradient of every parameter (sorted
  by name) and the losses of 3 SGD steps, as make_onnx.py's. The inputs are
  random, so no maximum is tied and PyTorch's amax rule (dy split among ties)
  and x.max(dim)'s (dy to one element) agree.
Hand-made (onnx.helper; references from NumPy, every output float32):
  reduce_max_forms_opset18.onnx  ReduceMax/ReduceMin of "a" [2,3,4] with axes
                        as an input (negative, several, none), keepdims
                        default and 0, noop_with_empty_axes 1 (an identity);
                        of constants (folded): floats with a NaN, int64
                        (reduce_max_a.f32 in; reduce_max_forms_opset18_y.f32 out)
  reduce_max_forms_opset13.onnx  the same forms (but the noop) with axes as an
                        attribute (reduce_max_forms_opset13_y.f32)
It also copies reduce_max_forms_opset13.onnx to the fuzzing seeds
(tests/fuzz/corpus/onnx).
"""
import os
import sys

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_onnx as mo  # noqa: E402


class MaxPooledBlock(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.d = d
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
        self.head = nn.Linear(2 * d, 5)

    def forward(self, x):  # [B,T,d]
        q, k, v = self.qkv(self.ln1(x)).split(self.d, dim=-1)
        att = torch.softmax(q @ k.transpose(1, 2) / self.d ** 0.5, dim=-1)
        h = x + self.proj(att @ v)
        h = h + self.mlp(self.ln2(h))
        pooled = torch.cat([h.amax(dim=1), h.amin(dim=1)], dim=-1)  # [B, 2d]
        return self.head(pooled) + h.max(dim=2)[0].mean(dim=1, keepdim=True)  # [B, 5]


def make_forms(opset):
    f32 = onnx.TensorProto.FLOAT
    rng = np.random.default_rng(42)
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    a[1, 2, 1] = a[1, 2, 3]  # a tie
    cflt = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, -6.0]], np.float32)
    cint = np.array([[3, -2], [7, 1]], np.int64)
    inits = [onh.from_array(cint, "cint")]
    nodes, outputs, refs = [], [], []

    def reduce(op, x, name, axes, ref, **attrs):
        ins = [x]
        if axes is not None and opset >= 18:
            inits.append(onh.from_array(np.array(axes, np.int64), name + "_axes"))
            ins.append(name + "_axes")
        elif axes is not None:
            attrs["axes"] = axes
        nodes.append(oh.make_node(op, ins, [name], name=name, **attrs))
        outputs.append((name, np.shape(ref)))
        refs.append(np.asarray(ref, np.float32).flatten())

    reduce("ReduceMax", "a", "r_max_last", [-1], a.max(-1, keepdims=True))  # keepdims default 1
    reduce("ReduceMin", "a", "r_min_02", [0, 2], a.min((0, 2)), keepdims=0)
    reduce("ReduceMax", "a", "r_max_all", None, a.max(), keepdims=0)
    reduce("ReduceMin", "a", "r_min_all_keep", None, a.min(keepdims=True))
    if opset >= 18:
        reduce("ReduceMax", "a", "r_noop", None, a, noop_with_empty_axes=1)
    nodes.append(oh.make_node("Constant", [], ["cflt"], name="const_float", value=onh.from_array(cflt)))
    reduce("ReduceMax", "cflt", "r_cflt", [1], np.array([np.nan, 5.0]), keepdims=0)
    reduce("ReduceMin", "cint", "r_cint64", [0], cint.min(0, keepdims=True))
    # The folded int64 result is cast for the float output.
    nodes[-1].output[0] = "r_cint"
    nodes.append(oh.make_node("Cast", ["r_cint"], ["r_cint64"], name="cast_cint", to=f32))
    name = "reduce_max_forms_opset%d.onnx" % opset
    g = oh.make_graph(nodes, "reduce_max_forms", [oh.make_tensor_value_info("a", f32, a.shape)],
                      [oh.make_tensor_value_info(n, f32, s) for n, s in outputs], inits)
    model = oh.make_model(g, opset_imports=[oh.make_opsetid("", opset)])
    if opset <= 17:
        mo.save_model(name, model)
    else:  # Debian's onnx checker stops at opset 17: written unchecked, as make_onnx.py's
        mo.write(name, model.SerializeToString())
    mo.save_f32("reduce_max_a.f32", a)
    mo.save_f32("reduce_max_forms_opset%d_y.f32" % opset, np.concatenate(refs))


def main():
    make_forms(13)
    make_forms(18)
    os.makedirs(mo.CORPUS, exist_ok=True)
    with open(os.path.join(mo.HERE, "reduce_max_forms_opset13.onnx"), "rb") as f:
        data = f.read()
    with open(os.path.join(mo.CORPUS, "reduce_max_forms_opset13.onnx"), "wb") as f:
        f.write(data)
    torch.manual_seed(41)
    m = MaxPooledBlock()
    mo.randomize_layer_norms(m)
    x = torch.randn(2, 6, 16)
    path = mo.export(m, x, "reduce_max_train.onnx", True, input_names=["x"], output_names=["logits"])
    ops = [n.op_type for n in onnx.load(path).graph.node]
    assert ops.count("ReduceMax") == 2 and ops.count("ReduceMin") == 1, ops
    mo.save_f32("reduce_max_x.f32", x)
    mo.train_reference_inputs(m, (x,), torch.arange(2) % 5, "reduce_max_ref.f32")
    print("parameters", len(list(m.parameters())), "elements", sum(p.numel() for p in m.parameters()))


if __name__ == "__main__":
    main()
