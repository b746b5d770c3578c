#!/usr/bin/python3
"""Writes the test models of the ops that further transformer families
export (tests/unit/test_onnx_families.c): GPT-J's and CodeGen's
rotate_every_two (Slice with step 2 of a run-time tensor), Swin's window
padding and MobileBERT's shifted embeddings (Pad), Whisper's and
SqueezeBERT's Conv1d, BLOOM's and MPT's ALiBi slopes (Pow of constants with a
vector exponent), DeBERTa's and Funnel's position buckets (Ceil),
SegFormer's upsampling (Resize, linear and nearest), and the
TorchScript exporter's pads reversed by Slice and Transpose of constants.
Committed, like make_onnx.py's. Run it with the bench venv (torch 2.15; both
exporters):

    ~/.cache/sgrt-bench/venv/bin/python tests/data/onnx/make_onnx_families.py [NAME...]

Training exports of FamilyOps (below; input "x" [2,8,16], logits [2,8,5],
labels i % 5 over the 16 rows; PyTorch's logits, gradients sorted by name and
3 SGD losses in fam_ref.f32, the input in fam_x.f32):
  fam_train_ts.onnx     torch.onnx.export(dynamo=False, opset 17, training mode)
  fam_train_dyn.onnx (+ .onnx.data)  torch.onnx.export(dynamo=True,
                        optimize=False), train mode
Hand-made (onnx.helper, opset 18; references from NumPy; input "x" [2,3,8]
float, fam_forms_x.f32; every output float32 in fam_forms_y.f32):
  fam_forms.onnx        Slice of x with steps 2 and 3 (with and without a last
                        element short of a whole step, two axes at once) and
                        negative steps (reversals), Pad of x
                        in modes constant (a value, negative pads, the axes
                        input), edge, reflect and wrap, Conv1d (pads, stride,
                        dilation, groups, a bias), Transpose, Ceil, Floor, Round
                        and Pow of constants (float ** int64 vector, int64 **
                        int64)
  bad_pad_reflect.onnx  reflect pads 3 of a dim of 3
  bad_pad_empty.onnx    pads that crop a dim to nothing
  bad_pow_negative.onnx  Pow of int64 constants with a negative exponent
  bad_ceil_runtime.onnx  Ceil of x
  bad_resize_cubic.onnx  Resize of x to twice its last dim in mode cubic
  bad_resize_huge.onnx  Resize of x by a scale of 1e30 (a size no int64 holds)
  fam_resize.onnx       (same input; fam_resize_y.f32, from onnx.reference)
                        Resize in modes linear (half_pixel, align_corners,
                        pytorch_half_pixel, asymmetric; up and down) and
                        nearest (floor, round_prefer_floor and _ceil, ceil)
  bad_empty_use.onnx    Relu of an empty slice of x
  bad_scatter_add_runtime.onnx  ScatterND of x with reduction add
  bad_gather_elements_both.onnx  GatherElements of x by indices computed from x
  bad_topk_int.onnx     TopK of x cast to int64
  bad_gathernd_pairs.onnx  GatherND of a weight by index pairs computed from x
  fam_forms2.onnx       (same input; fam_forms2_y.f32) an empty slice that
                        Concat drops, EyeLike, Resize to the input's own size
                        (scales, sizes), ScatterND and ScatterElements of
                        constants (reductions none, add, max), Flatten,
                        ReduceSum and ReduceMean of constants, GatherND of a
                        weight's rows by 150 scattered constant rows, Sin,
                        Cos and Acos (of Tanh) of x
"""
import copy
import math
import os
import sys

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_onnx as mo  # noqa: E402

HERE = mo.HERE


class FamilyOps(nn.Module):
    """The ops above in one model that trains."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(16, 16)
        self.conv = nn.Conv1d(16, 16, 3, padding=2, dilation=2, groups=2)
        self.conv2 = nn.Conv1d(16, 8, 3, stride=2, padding=1)
        self.head = nn.Linear(16, 5)

    def forward(self, x):  # [B, T=8, 16]
        h = self.inp(x)
        x1, x2 = h[..., ::2], h[..., 1::2]  # GPT-J's rotate_every_two
        h = h + 0.5 * torch.stack((-x2, x1), dim=-1).flatten(-2)
        sub = h[:, 1::3]  # [B, 3, 16]: rows 1, 4, 7 (the last short of a whole step)
        c = self.conv(h.transpose(1, 2))  # [B, 16, 8]
        c = F.pad(c, (1, 2), mode="replicate")  # 11
        c = F.pad(c, (2, 1), mode="reflect")  # 14
        c = F.pad(c, (-3, -3))  # 8
        c = F.pad(c, (0, 0, 1, 1), value=0.25)[:, 1:-1]  # the channels padded, then cut back
        h = h + c.transpose(1, 2)
        pos = torch.ceil(torch.arange(8, dtype=torch.float32) / 3.0)  # 0 1 1 1 2 2 2 3
        slopes = torch.pow(torch.tensor(2.0), -torch.arange(1, 17))  # ALiBi-style
        h = h * (1 + slopes) + 0.01 * pos[None, :, None]
        c2 = self.conv2(h.transpose(1, 2))  # [B, 8, 4]
        # c2 weighted per class: a term equal across a row's classes would have no gradient
        per_class = torch.arange(1, 6, dtype=torch.float32) / 5
        up = F.interpolate(c2, size=5, mode="linear") + F.interpolate(c2, size=5, mode="nearest")  # [B, 8, 5]
        return (self.head(h) + self.head(sub).mean(1, keepdim=True) + 0.1 * c2.mean(-1)[:, :, None] * per_class
                + 0.05 * up)


def make_family_exports():
    torch.manual_seed(41)
    model = FamilyOps()
    x = torch.randn(2, 8, 16)
    labels = torch.arange(16) % 5
    m = copy.deepcopy(model).train()
    path = os.path.join(HERE, "fam_train_ts.onnx")
    torch.onnx.export(m, (x,), path, dynamo=False, opset_version=17, input_names=["x"], output_names=["logits"],
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    onnx.checker.check_model(path)
    path = os.path.join(HERE, "fam_train_dyn.onnx")
    for p in (path, path + ".data"):
        if os.path.exists(p):
            os.remove(p)
    torch.onnx.export(copy.deepcopy(model).train(), (x,), path, dynamo=True, optimize=False, external_data=True,
                      verbose=False)
    m = onnx.load(path, load_external_data=False)
    for n in m.graph.node:  # the FX node, module names and stack trace (this machine's paths)
        del n.metadata_props[:]
    mo.write("fam_train_dyn.onnx", m.SerializeToString())
    onnx.checker.check_model(path)
    for name in ("fam_train_ts.onnx", "fam_train_dyn.onnx"):
        ops = sorted({n.op_type for n in onnx.load(os.path.join(HERE, name), load_external_data=False).graph.node})
        print(name, ops)
    mo.save_f32("fam_x.f32", x)
    mo.train_reference(model, x, labels, "fam_ref.f32")


class RemapOps(nn.Module):
    """Index ops of run-time tensors by indices known at export: DeBERTa-v2's gather of relative-position
    scores (expanded over the batch, and indices that differ per sample), torch.flip, a slice assignment
    (Funnel's, ScatterND) and Tensor.scatter (ScatterElements) of computed values."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(16, 16)
        self.head = nn.Linear(16, 5)
        g = torch.Generator().manual_seed(5)
        self.register_buffer("idx", torch.randint(0, 16, (2, 8, 4), generator=g))  # per sample, row, column
        self.register_buffer("sidx", torch.randperm(16, generator=g)[:6].repeat(2, 8, 1))  # distinct per row

    def forward(self, x):  # [B=2, T=8, 16]
        h = self.inp(x)
        rel = torch.arange(8)[:, None] - torch.arange(8)[None, :]
        rel = rel.clamp(-4, 3) + 4  # 0..7, DeBERTa's bucketed relative positions
        g = torch.gather(h, -1, rel[None].expand(2, 8, 8))  # [B, 8, 8], one index table for the batch
        g2 = torch.gather(h, 2, self.idx)  # [B, 8, 4], indices of their own per sample
        f = torch.flip(h, dims=[1]) + 0.5 * torch.flip(h, dims=[0, 2])
        s = h.clone()
        s[:, 1:3] = f[:, 5:7] * 2.0  # a slice assignment of computed values
        e = h.scatter(2, self.sidx, g2[..., :1].expand(2, 8, 6) * 0.5)  # Tensor.scatter of computed values
        return self.head(s + e) + 0.3 * g[..., :5] + 0.2 * g2.mean(-1, keepdim=True)


def export_training_pair(model, stem):
    """STEM_train_ts.onnx (TorchScript exporter, opset 17, training mode) and STEM_train_dyn.onnx
    (torch.export, unoptimised, metadata stripped) of model on x [2,8,16]; STEM_x.f32 and PyTorch's
    reference STEM_ref.f32 (labels i % 5)."""
    x = torch.randn(2, 8, 16)
    labels = torch.arange(16) % 5
    path = os.path.join(HERE, stem + "_train_ts.onnx")
    torch.onnx.export(copy.deepcopy(model).train(), (x,), path, dynamo=False, opset_version=17,
                      input_names=["x"], output_names=["logits"], training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)
    onnx.checker.check_model(path)
    onnx_program = torch.onnx.export(copy.deepcopy(model).train(), (x,), dynamo=True, optimize=False, verbose=False)
    m = onnx_program.model_proto
    for n in m.graph.node:  # the FX node, module names and stack trace (this machine's paths)
        del n.metadata_props[:]
    mo.write(stem + "_train_dyn.onnx", m.SerializeToString())
    onnx.checker.check_model(os.path.join(HERE, stem + "_train_dyn.onnx"))
    for name in (stem + "_train_ts.onnx", stem + "_train_dyn.onnx"):
        ops = sorted({n.op_type for n in onnx.load(os.path.join(HERE, name)).graph.node})
        print(name, ops)
    mo.save_f32(stem + "_x.f32", x)
    mo.train_reference(model, x, labels, stem + "_ref.f32")


def make_remap_exports():
    torch.manual_seed(51)
    export_training_pair(RemapOps(), "remap")


class MoEOps(nn.Module):
    """Mixtral's router and batched experts, small: softmax over 4 experts, TopK 2, the picks renormalised,
    each token's 2 experts' weights gathered by the indices (GatherND or Gather of a weight by run-time
    indices), a bmm, and F.one_hot of the picks (OneHot at run time) weighting a per-expert bias."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(16, 16)
        self.gate = nn.Linear(16, 4, bias=False)
        self.w_up = nn.Parameter(torch.randn(4, 24, 16) * 0.2)  # [experts, hidden, d]
        self.w_down = nn.Parameter(torch.randn(4, 16, 24) * 0.2)
        self.expert_bias = nn.Parameter(torch.randn(4, 16) * 0.1)
        self.head = nn.Linear(16, 5)

    def forward(self, x):  # [B=2, T=8, 16]
        h = self.inp(x).reshape(-1, 16)  # 16 tokens
        probs = F.softmax(self.gate(h), dim=-1)
        top_p, top_i = torch.topk(probs, 2, dim=-1)  # [16, 2]
        top_p = top_p / top_p.sum(-1, keepdim=True)
        flat = top_i.reshape(-1)  # 32 picks
        up = self.w_up[flat]  # [32, 24, 16]
        tok = h.repeat_interleave(2, dim=0)  # [32, 16]
        a = F.silu(torch.bmm(up, tok.unsqueeze(-1)).squeeze(-1))  # [32, 24]
        y = torch.bmm(self.w_down[flat], a.unsqueeze(-1)).squeeze(-1)  # [32, 16]
        y = (y.reshape(-1, 2, 16) * top_p.unsqueeze(-1)).sum(1)  # [16, 16]
        onehot = F.one_hot(top_i, 4).to(h.dtype).sum(1)  # [16, 4]: which experts each token took
        y = y + onehot @ self.expert_bias
        low_v, low_i = torch.topk(h, 3, dim=0, largest=False)  # the 3 smallest of each feature, over tokens
        return self.head(h + y).reshape(2, 8, 5) + 0.1 * low_v.mean(0)[:5] + 0.01 * low_i.float().mean()


def make_moe_exports():
    torch.manual_seed(61)
    export_training_pair(MoEOps(), "moe")


def conv1d_ref(x, w, b, stride, pads, dilation, groups):
    n, cin, length = x.shape
    cout, cg, k = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[1])))
    lout = (xp.shape[2] - (k - 1) * dilation - 1) // stride + 1
    y = np.zeros((n, cout, lout))
    og = cout // groups
    for o in range(cout):
        g = o // og
        for t in range(lout):
            win = xp[:, g * cg:(g + 1) * cg, t * stride:t * stride + (k - 1) * dilation + 1:dilation]
            y[:, o, t] = (win * w[o]).sum((1, 2)) + b[o]
    return y


class Forms:
    """A hand-made model of input "x" [2,3,8] float: its nodes, initializers (weights), and outputs with
    NumPy's values (saved as NAME.onnx, opset 18, and NAME_y.f32)."""

    def __init__(self):
        self.nodes, self.inits, self.outputs, self.refs = [], [], [], []

    def const(self, name, value):  # a Constant node: an import-time constant, never a weight
        self.nodes.append(oh.make_node("Constant", [], [name], name="const_" + name,
                                       value=onh.from_array(np.asarray(value), name)))
        return name

    def out(self, name, ref):
        self.outputs.append((name, np.shape(ref)))
        self.refs.append(np.asarray(ref, np.float32).flatten())

    def save(self, name):
        f32, vi = onnx.TensorProto.FLOAT, oh.make_tensor_value_info
        g = oh.make_graph(self.nodes, name, [vi("x", f32, [2, 3, 8])],
                          [vi(n, f32, list(s)) for n, s in self.outputs], self.inits)
        mo.save_model(name + ".onnx", oh.make_model(g, opset_imports=[oh.make_opsetid("", 18)]))
        mo.save_f32(name + "_y.f32", np.concatenate(self.refs))
        print(name + ":", ", ".join("%s %d" % (n, int(np.prod(s))) for n, s in self.outputs))


def make_family_forms():
    f32, i64 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64
    rng = np.random.default_rng(42)
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    f = Forms()
    nodes, inits, const, out = f.nodes, f.inits, f.const, f.out

    def slice_(name, starts, ends, axes, steps):
        nodes.append(oh.make_node("Slice", ["x", const(name + "_s", np.array(starts, np.int64)),
                                            const(name + "_e", np.array(ends, np.int64)),
                                            const(name + "_a", np.array(axes, np.int64)),
                                            const(name + "_st", np.array(steps, np.int64))], [name], name=name))
        sl = [slice(None)] * 3
        for s, e, a, st in zip(starts, ends, axes, steps):
            sl[a] = slice(s, e, st)
        out(name, x[tuple(sl)])

    slice_("s_even", [0], [8], [2], [2])  # 0 2 4 6: whole steps
    slice_("s_odd", [1], [8], [2], [2])  # 1 3 5 7: the last step runs past the end
    slice_("s_three", [1], [100], [-1], [3])  # 1 4 7, end clamped
    slice_("s_two_axes", [0, 2], [3, 8], [1, 2], [2, 3])  # rows 0 2, columns 2 5
    slice_("s_one", [5], [8], [2], [4])  # one element: a plain slice
    slice_("s_rev", [-1], [-100], [2], [-1])  # torch.flip's x[..., ::-1]
    slice_("s_rev_two", [1, 7], [-100, 0], [0, 2], [-1, -2])  # two axes reversed, one by 2s: 7 5 3 1

    def pad(name, pads, mode=None, value=None, axes=None, ref=None):
        ins = ["x", const(name + "_p", np.array(pads, np.int64))]
        if value is not None or axes is not None:
            ins.append(const(name + "_v", np.array(value, np.float32)) if value is not None else "")
        if axes is not None:
            ins.append(const(name + "_ax", np.array(axes, np.int64)))
        kw = {"mode": mode} if mode else {}
        nodes.append(oh.make_node("Pad", ins, [name], name=name, **kw))
        out(name, ref)

    pad("p_const", [0, 1, 2, 0, 0, 3], value=0.5,
        ref=np.pad(x, ((0, 0), (1, 0), (2, 3)), constant_values=0.5))
    pad("p_zero", [1, 0, 0, 0, 0, 1], ref=np.pad(x, ((1, 0), (0, 0), (0, 1))))
    pad("p_crop", [0, 0, -2, 0, 1, -1], value=-1.0, ref=np.pad(x[:, :, 2:7], ((0, 0), (0, 1), (0, 0)),
                                                                 constant_values=-1.0))
    pad("p_axes", [2, 1], value=3.0, axes=[-1], ref=np.pad(x, ((0, 0), (0, 0), (2, 1)), constant_values=3.0))
    pad("p_edge", [0, 2, 3, 0, 1, 2], mode="edge", ref=np.pad(x, ((0, 0), (2, 1), (3, 2)), mode="edge"))
    pad("p_reflect", [0, 0, 3, 0, 0, 2], mode="reflect", ref=np.pad(x, ((0, 0), (0, 0), (3, 2)), mode="reflect"))
    pad("p_wrap", [0, 0, 5, 0, 0, 8], mode="wrap", ref=np.pad(x, ((0, 0), (0, 0), (5, 8)), mode="wrap"))

    # Conv1d: x [2,3,8] would need 3 channels per group; a 4-channel input from x by Concat.
    w = rng.standard_normal((4, 2, 3)).astype(np.float32) * 0.5
    b = rng.standard_normal(4).astype(np.float32)
    x4 = np.concatenate([x, x[:, :1] * 2], axis=1)
    nodes.append(oh.make_node("Mul", ["x", const("two", np.array(2.0, np.float32))], ["x2"], name="mul_two"))
    nodes.append(oh.make_node("Slice", ["x2", const("c0", np.array([0], np.int64)),
                                        const("c1", np.array([1], np.int64)), const("c1a", np.array([1], np.int64))],
                              ["x2row"], name="slice_row"))
    nodes.append(oh.make_node("Concat", ["x", "x2row"], ["x4"], name="concat_x4", axis=1))
    inits += [onh.from_array(w, "conv_w"), onh.from_array(b, "conv_b")]  # weights
    nodes.append(oh.make_node("Conv", ["x4", "conv_w", "conv_b"], ["conv1d"], name="conv1d", pads=[2, 1],
                              strides=[2], dilations=[2], group=2, kernel_shape=[3]))
    out("conv1d", conv1d_ref(x4.astype(np.float64), w, b, 2, (2, 1), 2, 2))
    nodes.append(oh.make_node("Conv", ["x4", "conv_w"], ["conv1d_plain"], name="conv1d_plain", group=2))
    out("conv1d_plain", conv1d_ref(x4.astype(np.float64), w, np.zeros(4), 1, (0, 0), 1, 2))

    # Folded: Transpose, Ceil, Floor, Round, Pow of constants, then added to x so that they reach an output.
    t = rng.standard_normal((8, 3)).astype(np.float32)
    nodes.append(oh.make_node("Transpose", [const("t83", t)], ["t38"], name="transpose_const", perm=[1, 0]))
    nodes.append(oh.make_node("Add", ["x", "t38"], ["f_transpose"], name="add_t"))
    out("f_transpose", x + t.T)
    r = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 1.2, -1.7], np.float32)
    for op, fn in (("Ceil", np.ceil), ("Floor", np.floor), ("Round", np.round)):
        name = "f_" + op.lower()
        nodes.append(oh.make_node(op, [const(name + "_in", r)], [name + "_c"], name=op.lower()))
        nodes.append(oh.make_node("Add", ["x", name + "_c"], [name], name="add_" + op.lower()))
        out(name, x + fn(r))
    e = -np.arange(1, 9, dtype=np.int64)
    nodes.append(oh.make_node("Pow", [const("two_f", np.array(2.0, np.float32)), const("alibi_e", e)], ["slopes"],
                              name="pow_alibi"))
    nodes.append(oh.make_node("Mul", ["x", "slopes"], ["f_pow"], name="mul_slopes"))
    out("f_pow", x * np.power(2.0, e.astype(np.float64)))
    nodes.append(oh.make_node("Pow", [const("ib", np.array([3, -2, 0, 1], np.int64)),
                                      const("ie", np.array([4, 3, 0, 5], np.int64))], ["ipow"], name="pow_int"))
    nodes.append(oh.make_node("Cast", ["ipow"], ["f_ipow"], name="cast_ipow", to=f32))
    out("f_ipow", np.array([81, -8, 1, 1]))

    f.save("fam_forms")
    mo.save_f32("fam_forms_x.f32", x)


def make_family_forms2():
    """Constants that models build in forward, folded, and the forms around them."""
    f32, i64 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64
    rng = np.random.default_rng(43)
    x = np.fromfile(os.path.join(HERE, "fam_forms_x.f32"), dtype="<f4").reshape(2, 3, 8)
    f = Forms()
    nodes, inits, const, out = f.nodes, f.inits, f.const, f.out

    def to_f32(src, name):
        nodes.append(oh.make_node("Cast", [src], [name], name="cast_" + name, to=f32))

    # An empty slice (Phi-3's q[..., rotary_dim:] with rotary_dim = head_dim) that a Concat drops.
    nodes.append(oh.make_node("Slice", ["x", const("e_s", np.array([8], np.int64)),
                                        const("e_e", np.array([100], np.int64)),
                                        const("e_a", np.array([2], np.int64))], ["empty"], name="slice_empty"))
    nodes.append(oh.make_node("Concat", ["x", "empty"], ["g_concat_empty"], name="concat_empty", axis=2))
    out("g_concat_empty", x)
    nodes.append(oh.make_node("Concat", ["empty", "x", "empty", "x"], ["g_concat_two"], name="concat_two", axis=2))
    out("g_concat_two", np.concatenate([x, x], axis=2))
    # EyeLike of a 2-D constant's shape, k = 2 and -1.
    c38 = const("c38", np.zeros((3, 8), np.float32))
    for k in (2, -1):
        name = "g_eye%s" % ("m1" if k < 0 else k)
        nodes.append(oh.make_node("EyeLike", [c38], [name + "_c"], name="eyelike_%d" % (k + 1), k=k))
        nodes.append(oh.make_node("Add", ["x", name + "_c"], [name], name="add_" + name))
        out(name, x + np.eye(3, 8, k, dtype=np.float32))
    # Resize to the input's own size: by scales 1 (roi empty) and by sizes.
    nodes.append(oh.make_node("Resize", ["x", "", const("ones3", np.ones(3, np.float32))], ["g_resize_scales"],
                              name="resize_scales", mode="linear"))
    out("g_resize_scales", x)
    nodes.append(oh.make_node("Resize", ["x", "", "", const("size3", np.array([2, 3, 8], np.int64))],
                              ["g_resize_sizes"], name="resize_sizes", mode="cubic"))
    out("g_resize_sizes", x)
    # ScatterND (BEiT's index[0, 0:] = ...) and ScatterElements of constants, with and without a reduction.
    data = rng.integers(-5, 5, (4, 3)).astype(np.int64)
    idx = np.array([[1], [3]], np.int64)
    upd = rng.integers(-5, 5, (2, 3)).astype(np.int64)
    for red in ("none", "add"):
        name = "g_scatter_nd_" + red
        nodes.append(oh.make_node("ScatterND", [const(name + "_d", data), const(name + "_i", idx),
                                                const(name + "_u", upd)], [name + "_c"], name="scatter_nd_" + red,
                                  reduction=red))
        to_f32(name + "_c", name)
        ref = data.copy()
        for t in range(2):
            ref[idx[t, 0]] = upd[t] if red == "none" else ref[idx[t, 0]] + upd[t]
        out(name, ref)
    fdata = rng.standard_normal((3, 4)).astype(np.float32)
    eidx = np.array([[1, 0, 3], [2, 2, 0]], np.int64)
    eupd = rng.standard_normal((2, 3)).astype(np.float32)
    for red in ("none", "max"):
        name = "g_scatter_el_" + red
        nodes.append(oh.make_node("ScatterElements", [const(name + "_d", fdata), const(name + "_i", eidx),
                                                      const(name + "_u", eupd)], [name], name="scatter_el_" + red,
                                  axis=1, reduction=red))
        ref = fdata.copy()
        for i in range(2):
            for j in range(3):
                v = eupd[i, j]
                ref[i, eidx[i, j]] = v if red == "none" else max(ref[i, eidx[i, j]], v)
        out(name, ref)
    # Flatten, ReduceSum (integers) and ReduceMean (floats) of constants.
    c234 = rng.integers(-9, 9, (2, 3, 4)).astype(np.int64)
    nodes.append(oh.make_node("Flatten", [const("c234", c234)], ["flat_c"], name="flatten_const", axis=2))
    to_f32("flat_c", "g_flatten")
    out("g_flatten", c234.reshape(6, 4))
    nodes.append(oh.make_node("ReduceSum", ["c234", const("ax_1", np.array([1], np.int64))], ["rsum_c"],
                              name="reduce_sum_const", keepdims=0))
    to_f32("rsum_c", "g_reduce_sum")
    out("g_reduce_sum", c234.sum(1))
    f234 = rng.standard_normal((2, 3, 4)).astype(np.float32)
    nodes.append(oh.make_node("ReduceMean", [const("f234", f234), const("ax_m1", np.array([-1], np.int64))],
                              ["g_reduce_mean"], name="reduce_mean_const"))
    out("g_reduce_mean", f234.astype(np.float64).mean(-1, keepdims=True))
    # GatherND of a weight's rows by many scattered constant rows (Swin's relative position bias table):
    # an embedding lookup.
    table = rng.standard_normal((10, 2)).astype(np.float32)
    rows = rng.integers(0, 10, (150, 1)).astype(np.int64)  # some 135 runs: more than 64 slices
    inits.append(onh.from_array(table, "bias_table"))
    nodes.append(oh.make_node("GatherND", ["bias_table", const("rows", rows)], ["g_gather_rows"],
                              name="gather_nd_rows"))
    out("g_gather_rows", table[rows[:, 0]])
    # Sin, Cos and Acos of a run-time tensor (rotary angles from input positions; YOSO's angles).
    xd = x.astype(np.float64)
    nodes.append(oh.make_node("Sin", ["x"], ["g_sin"], name="sin_x"))
    out("g_sin", np.sin(xd))
    nodes.append(oh.make_node("Cos", ["x"], ["g_cos"], name="cos_x"))
    out("g_cos", np.cos(xd))
    nodes.append(oh.make_node("Tanh", ["x"], ["tanh_x"], name="tanh_x"))
    nodes.append(oh.make_node("Acos", ["tanh_x"], ["g_acos"], name="acos_x"))
    out("g_acos", np.arccos(np.tanh(x).astype(np.float64)))

    f.save("fam_forms2")


# Resize forms of fam_resize.onnx: (name, attributes, scales or None, sizes or None).
RESIZE_FORMS = [
    ("r_lin_up", {"mode": "linear"}, None, [2, 3, 16]),
    ("r_lin_corners", {"mode": "linear", "coordinate_transformation_mode": "align_corners"}, [1, 2, 1.5], None),
    ("r_lin_torch_down", {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"}, None,
     [2, 3, 5]),
    ("r_lin_asym_half", {"mode": "linear", "coordinate_transformation_mode": "asymmetric"}, [1, 1, 0.5], None),
    ("r_near_floor", {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
     [1, 2, 2], None),
    ("r_near_half", {"mode": "nearest"}, None, [2, 5, 11]),
    ("r_near_ceil", {"mode": "nearest", "nearest_mode": "round_prefer_ceil"}, None, [2, 4, 12]),
    ("r_near_corners", {"mode": "nearest", "coordinate_transformation_mode": "align_corners",
                        "nearest_mode": "ceil"}, None, [2, 2, 6]),
]


def make_family_resize():
    """Resize in modes linear and nearest, against onnx.reference (an independent implementation)."""
    from onnx.reference import ReferenceEvaluator
    x = np.fromfile(os.path.join(HERE, "fam_forms_x.f32"), dtype="<f4").reshape(2, 3, 8)
    f = Forms()
    for name, attrs, scales, sizes in RESIZE_FORMS:
        ins = ["x", ""]
        ins.append(f.const(name + "_sc", np.array(scales, np.float32)) if scales else "")
        if sizes:
            ins.append(f.const(name + "_sz", np.array(sizes, np.int64)))
        node = oh.make_node("Resize", ins, [name], name=name, **attrs)
        f.nodes.append(node)
        one = oh.make_graph([n for n in f.nodes if n.op_type == "Constant" and n.output[0].startswith(name)] + [node],
                            name, [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3, 8])],
                            [oh.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None)])
        ref = ReferenceEvaluator(oh.make_model(one, opset_imports=[oh.make_opsetid("", 18)])).run(None, {"x": x})[0]
        f.out(name, ref)
    f.save("fam_resize")


def bad_family_models():
    f32, i64 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64

    def model(name, nodes, inits, out_shape, out_type=f32):
        g = oh.make_graph(nodes, "bad", [oh.make_tensor_value_info("x", f32, [2, 3, 8])],
                          [oh.make_tensor_value_info("y", out_type, out_shape)],
                          [onh.from_array(np.asarray(v), k) for k, v in inits.items()])
        mo.write(name, oh.make_model(g, opset_imports=[oh.make_opsetid("", 18)]).SerializeToString())

    model("bad_pad_reflect.onnx", [oh.make_node("Pad", ["x", "p"], ["y"], name="reflect3", mode="reflect")],
          {"p": np.array([0, 3, 0, 0, 0, 0], np.int64)}, [2, 6, 8])
    model("bad_pad_empty.onnx", [oh.make_node("Pad", ["x", "p"], ["y"], name="crop_all")],
          {"p": np.array([0, -2, 0, 0, -1, 0], np.int64)}, [2, 0, 8])
    model("bad_pow_negative.onnx", [oh.make_node("Pow", ["b", "e"], ["p"], name="pow_neg"),
                                    oh.make_node("Cast", ["p"], ["pf"], name="cast", to=f32),
                                    oh.make_node("Add", ["x", "pf"], ["y"], name="add")],
          {"b": np.array([2], np.int64), "e": np.array([-1], np.int64)}, [2, 3, 8])
    model("bad_ceil_runtime.onnx", [oh.make_node("Ceil", ["x"], ["y"], name="ceil_x")], {}, [2, 3, 8])
    model("bad_resize_cubic.onnx", [oh.make_node("Resize", ["x", "", "sc"], ["y"], name="upsample", mode="cubic")],
          {"sc": np.array([1, 1, 2], np.float32)}, [2, 3, 16])
    model("bad_resize_huge.onnx", [oh.make_node("Resize", ["x", "", "sc"], ["y"], name="huge", mode="nearest")],
          {"sc": np.array([1, 1, 1e30], np.float32)}, [2, 3, 8])
    model("bad_empty_use.onnx", [oh.make_node("Slice", ["x", "s", "e", "a"], ["z"], name="nothing"),
                                 oh.make_node("Relu", ["z"], ["y"], name="relu_empty")],
          {"s": np.array([8], np.int64), "e": np.array([9], np.int64), "a": np.array([2], np.int64)}, [2, 3, 0])
    model("bad_scatter_add_runtime.onnx",
          [oh.make_node("ScatterND", ["x", "i", "u"], ["y"], name="scatter_add_x", reduction="add")],
          {"i": np.array([[0]], np.int64), "u": np.zeros((1, 3, 8), np.float32)}, [2, 3, 8])
    model("bad_topk_int.onnx", [oh.make_node("Cast", ["x"], ["xi"], name="cast_x", to=onnx.TensorProto.INT64),
                                oh.make_node("TopK", ["xi", "k"], ["y", "yi"], name="topk_int")],
          {"k": np.array([2], np.int64)}, [2, 3, 2], onnx.TensorProto.INT64)
    model("bad_gathernd_pairs.onnx",
          [oh.make_node("Slice", ["x", "s", "e", "a"], ["x2"], name="first_two"),
           oh.make_node("Cast", ["x2"], ["pairs"], name="cast_pairs", to=onnx.TensorProto.INT64),
           oh.make_node("GatherND", ["w", "pairs"], ["y"], name="gather_pairs")],
          {"s": np.array([0], np.int64), "e": np.array([2], np.int64), "a": np.array([2], np.int64),
           "w": np.zeros((5, 5, 4), np.float32)}, [2, 3, 4])
    model("bad_gather_elements_both.onnx",
          [oh.make_node("Relu", ["x"], ["rx"], name="relu_x"),
           oh.make_node("Cast", ["rx"], ["ri"], name="cast_idx", to=onnx.TensorProto.INT64),
           oh.make_node("GatherElements", ["x", "ri"], ["y"], name="gather_both", axis=2)],
          {}, [2, 3, 8])


def main():
    if len(sys.argv) > 1:
        for name in sys.argv[1:]:
            globals()[name]()
        return
    make_family_exports()
    make_remap_exports()
    make_moe_exports()
    make_family_forms()
    make_family_forms2()
    make_family_resize()
    bad_family_models()
    os.makedirs(mo.CORPUS, exist_ok=True)  # a fuzzing seed with every form
    for name in ("fam_forms.onnx", "fam_forms2.onnx", "fam_resize.onnx"):
        with open(os.path.join(HERE, name), "rb") as f:
            mo.write(os.path.join(mo.CORPUS, name), f.read())


if __name__ == "__main__":
    main()
