#!/usr/bin/python3
"""Writes the ONNX test models of tests/unit/test_onnx_import.c (committed, so
the C tests need neither torch nor onnx at run time) and the ONNX fuzzing
seeds. Run it with Debian's interpreter, which has python3-torch,
python3-torchvision and python3-onnx:

    /usr/bin/python3 tests/data/onnx/make_onnx.py

Models exported by torch.onnx.export (torch 1.13, opset 14):
  mlp_eval.onnx    MLP in inference form, symbolic batch dim "batch" (the
                   flatten is x.view(x.size(0), -1): a Shape/Gather/Unsqueeze/
                   Concat chain that the importer folds)
  mlp_train.onnx   the same MLP exported for training (Dropout in training mode)
  mlp_train_opset9.onnx  the same at opset 9 (Dropout's ratio an attribute, training
                   mode told by its mask output; Unsqueeze axes an attribute)
  cnn_eval.onnx    small CNN (conv, batch norm, relu, max pool, grouped conv,
                   relu6, residual add, average pool, global average pool,
                   flatten, linear) in inference form: batch norm folded into
                   the convolutions
  cnn_train.onnx   the same CNN exported for training: BatchNormalization
                   nodes with training_mode=1
  cnn_train_opset9.onnx  the same at opset 9: BatchNormalization with five
                   outputs instead of training_mode, Clip with attributes, Pad
                   with attributes (same weights, so the same references)
  ops_opset11.onnx a model with Clip-from-inputs, Pad, Squeeze/Unsqueeze,
                   ReduceMean, Concat, Transpose, MatMul, LogSoftmax, Sub/Div
                   by constants, at opset 11
  ops_opset17.onnx the same model at opset 17
Reference data (raw little-endian float32, C order; shapes in the C test):
  mlp_x.f32, mlp_logits.f32       input [4,3,4] and the eval-mode output [4,5]
                                  (dropout is off in eval mode, so this is the
                                  reference for both MLP files)
  cnn_x.f32                       input [2,3,8,8]
  cnn_eval_logits.f32             eval-mode output of cnn_eval.onnx's model
  cnn_train_logits.f32            train-mode output (batch statistics) with
                                  cnn_train.onnx's weights
  cnn_train_eval_logits.f32       eval-mode output with cnn_train.onnx's weights
  cnn_train_running.f32           bn1.running_mean, bn1.running_var,
                                  bn2.running_mean, bn2.running_var after that
                                  one train-mode forward
  ops_x.f32, ops_out*.f32         input [2,3,4] and outputs of the ops models
Hand-written models (onnx.helper; references computed with numpy):
  softmax_opset11.onnx  Softmax/LogSoftmax over axis 1 of a rank-3 input
                        under opset 11's flatten-to-2-D semantics
  fold_chain.onnx       ConstantOfShape, Slice, Gather, Cast, Mul and Add on
                        int64 constants feeding a Reshape; ReduceSum; Identity
  reduce_opset18.onnx   ReduceMean with its axes as an input (opset 18)
  reduce_axes_opset13.onnx  ReduceSum (axes input, negative; no axes with and
                        without noop_with_empty_axes) and ReduceMean (negative axes
                        attribute) at opset 13 (reduce_axes_x.f32, reduce_axes_y.f32)
  math_opset17.onnx     Abs, Neg, Exp, Log, Sqrt, Reciprocal, Sign, Erf, Max, Min
                        (three inputs), Pow, Where, Cast (run time) summed into y,
                        and LayerNormalization over the last two dims with its Mean
                        and InvStdDev outputs (math_x.f32 in, math_y.f32 and
                        math_ln.f32 = ln_y, ln_mean, ln_invstd out)
  bad_*.onnx            one defect each (see the C test for the expected error)
"""
import copy
import os
import sys

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "..", "fuzz", "corpus", "onnx")
OPSET = 14


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(12, 16)
        self.fc2 = nn.Linear(16, 16)
        self.fc3 = nn.Linear(16, 5)
        self.drop = nn.Dropout(0.25)

    def forward(self, x):
        h = x.view(x.size(0), -1)
        h = torch.relu(self.fc1(h))
        h = self.drop(h)
        h = torch.sigmoid(self.fc2(h)) * 2.0 - 1.0
        return self.fc3(h)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, groups=2, bias=False)
        self.bn2 = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        y = self.pool(torch.relu(self.bn1(self.conv1(x))))
        z = F.relu6(self.bn2(self.conv2(y)))
        z = F.avg_pool2d(z + y, 2)
        z = torch.flatten(F.adaptive_avg_pool2d(z, 1), 1)
        return self.fc(z)


class Ops(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 6) * 0.5)

    def forward(self, x):  # x [2,3,4]
        a = torch.clamp(x, min=-0.5, max=0.75)
        b = (a - 0.25) / 3.0
        c = torch.matmul(b, self.w)  # [2,3,6]
        d = c.unsqueeze(1).squeeze(1).transpose(1, 2)  # [2,6,3]
        m = d.mean(dim=2, keepdim=True)  # [2,6,1]
        e = torch.cat([d, m], dim=2)  # [2,6,4]
        f = e.reshape(e.size(0), -1)  # [2,24]
        return torch.log_softmax(f, dim=1), torch.tanh(m).flatten(1)


def write(name, data):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)


def save_f32(name, t):
    a = t.detach().numpy() if isinstance(t, torch.Tensor) else t
    write(name, np.ascontiguousarray(a, dtype="<f4").tobytes())


def export(model, x, name, train, **kw):
    m = copy.deepcopy(model)
    path = os.path.join(HERE, name)
    if train:
        m.train()
        torch.onnx.export(m, x, path, opset_version=kw.pop("opset", OPSET),
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False, **kw)
    else:
        m.eval()
        torch.onnx.export(m, x, path, opset_version=kw.pop("opset", OPSET), **kw)
    onnx.checker.check_model(onnx.load(path))
    return path


def weights_of(path):
    return {t.name: torch.from_numpy(onh.to_array(t).copy()) for t in onnx.load(path).graph.initializer}


def save_model(name, model):
    onnx.checker.check_model(model)
    write(name, model.SerializeToString())


def make_mlp():
    torch.manual_seed(1)
    model = MLP()
    x = torch.randn(4, 3, 4)
    kw = dict(input_names=["x"], output_names=["logits"],
              dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}})
    export(model, x, "mlp_eval.onnx", False, **kw)
    export(model, x, "mlp_train.onnx", True, **kw)
    export(model, x, "mlp_train_opset9.onnx", True, opset=9, **kw)
    model.eval()
    with torch.no_grad():
        save_f32("mlp_x.f32", x)
        save_f32("mlp_logits.f32", model(x))


def make_cnn():
    torch.manual_seed(2)
    model = CNN()
    with torch.no_grad():
        for bn in (model.bn1, model.bn2):
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.5, 0.5)
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 1.5)
    x = torch.randn(2, 3, 8, 8)
    kw = dict(input_names=["images"], output_names=["logits"])
    model.eval()
    with torch.no_grad():
        before = model(x)
    export(model, x, "cnn_eval.onnx", False, **kw)
    path = export(model, x, "cnn_train.onnx", True, **kw)
    path9 = export(model, x, "cnn_train_opset9.onnx", True, opset=9, **kw)
    with torch.no_grad():
        assert torch.equal(before, model(x)), "exporting changed the model"
        save_f32("cnn_x.f32", x)
        save_f32("cnn_eval_logits.f32", before)
        # References for the training file come from the weights it holds.
        w = weights_of(path)
        assert {"conv1.weight", "bn1.running_mean", "bn2.running_var"} <= set(w)
        w9 = weights_of(path9)
        assert w.keys() == w9.keys() and all(torch.equal(w[k], w9[k]) for k in w), "opset 9 weights differ"
        t = CNN()
        t.load_state_dict(w, strict=False)
        t.eval()
        save_f32("cnn_train_eval_logits.f32", t(x))
        t.train()
        save_f32("cnn_train_logits.f32", t(x))
        save_f32("cnn_train_running.f32",
                 torch.cat([t.bn1.running_mean, t.bn1.running_var, t.bn2.running_mean, t.bn2.running_var]))


def make_ops():
    torch.manual_seed(3)
    model = Ops()
    x = torch.randn(2, 3, 4)
    kw = dict(input_names=["x"], output_names=["logp", "m"])
    export(model, x, "ops_opset11.onnx", False, opset=11, **kw)
    export(model, x, "ops_opset17.onnx", False, opset=17, **kw)
    with torch.no_grad():
        logp, m = model(x)
        save_f32("ops_x.f32", x)
        save_f32("ops_out_logp.f32", logp)
        save_f32("ops_out_m.f32", m)


def np_softmax(a, log):
    e = a - a.max(axis=1, keepdims=True)
    s = np.exp(e) / np.exp(e).sum(axis=1, keepdims=True)
    return np.log(s) if log else s


def make_softmax_opset11():
    # Opset 11 Softmax coerces its input to 2-D at `axis`: [2, 3*4] here.
    x = oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3, 4])
    ys = [oh.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [2, 3, 4]) for n in ("sm", "lsm")]
    nodes = [oh.make_node("Softmax", ["x"], ["sm"], name="softmax", axis=1),
             oh.make_node("LogSoftmax", ["x"], ["lsm"], name="log_softmax", axis=1)]
    g = oh.make_graph(nodes, "softmax11", [x], ys)
    save_model("softmax_opset11.onnx", oh.make_model(g, opset_imports=[oh.make_opsetid("", 11)]))
    a = np.random.RandomState(4).randn(2, 3, 4).astype(np.float32)
    flat = a.reshape(2, 12).astype(np.float64)
    save_f32("softmax_x.f32", a)
    save_f32("softmax_sm.f32", np_softmax(flat, False).reshape(2, 3, 4))
    save_f32("softmax_lsm.f32", np_softmax(flat, True).reshape(2, 3, 4))


def make_fold_chain():
    # x [2,3,4] -> reshape to a shape computed from constants only:
    #   s = ConstantOfShape([2]) with value 3      -> [3,3]
    #   t = Slice(Shape(x), 1, 3)                  -> [3,4]
    #   u = Gather(t, [1, 0])                      -> [4,3]
    #   v = Cast(u * s - [9, 0], INT64)            -> [3,9]   (12-9=3, 9-0=9)
    #   w = Concat([1], v)                         -> [1,3,9]... used with x2 [1,27]
    # y = ReduceSum(Reshape(x2, v), axes [1], keepdims 0) then Identity.
    i64 = onnx.TensorProto.INT64
    x = oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3, 4])
    x2 = oh.make_tensor_value_info("x2", onnx.TensorProto.FLOAT, [1, 27])
    y = oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 9])
    inits = [onh.from_array(np.array([2], np.int64), "two"),
             onh.from_array(np.array([1], np.int64), "start"),
             onh.from_array(np.array([3], np.int64), "end"),
             onh.from_array(np.array([1, 0], np.int64), "perm_idx"),
             onh.from_array(np.array([9, 0], np.int64), "offset"),
             onh.from_array(np.array([1], np.int64), "one")]
    nodes = [
        oh.make_node("ConstantOfShape", ["two"], ["s"], name="cos", value=oh.make_tensor("v", i64, [1], [3])),
        oh.make_node("Shape", ["x"], ["sx"], name="shape"),
        oh.make_node("Slice", ["sx", "start", "end"], ["t"], name="slice"),
        oh.make_node("Gather", ["t", "perm_idx"], ["u"], name="gather", axis=0),
        oh.make_node("Mul", ["u", "s"], ["us"], name="mul"),
        oh.make_node("Sub", ["us", "offset"], ["vs"], name="sub"),
        oh.make_node("Cast", ["vs"], ["v"], name="cast", to=i64),
        oh.make_node("Concat", ["one", "v"], ["w"], name="concat", axis=0),
        oh.make_node("Reshape", ["x2", "w"], ["r"], name="reshape"),
        oh.make_node("ReduceSum", ["r", "one"], ["rs"], name="reduce_sum", keepdims=0),
        oh.make_node("Identity", ["rs"], ["y"], name="identity"),
    ]
    g = oh.make_graph(nodes, "fold_chain", [x, x2], [y], inits)
    save_model("fold_chain.onnx", oh.make_model(g, opset_imports=[oh.make_opsetid("", 13)]))
    a = np.random.RandomState(5).randn(1, 27).astype(np.float32)
    save_f32("fold_x2.f32", a)
    save_f32("fold_y.f32", a.astype(np.float64).reshape(1, 3, 9).sum(axis=1))


def make_reduce_opset18():
    # Opset 18 moved ReduceMean's axes from an attribute to an input (onnx 1.12's
    # checker stops at opset 17, so this one is written unchecked).
    x = oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3, 4])
    y = oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 4])
    axes = onh.from_array(np.array([1], np.int64), "axes")
    g = oh.make_graph([oh.make_node("ReduceMean", ["x", "axes"], ["y"], name="mean", keepdims=0)], "reduce18",
                      [x], [y], [axes])
    write("reduce_opset18.onnx", oh.make_model(g, opset_imports=[oh.make_opsetid("", 18)]).SerializeToString())
    a = np.random.RandomState(6).randn(2, 3, 4).astype(np.float32)
    save_f32("reduce_x.f32", a)
    save_f32("reduce_y.f32", a.astype(np.float64).mean(axis=1))


def make_math_opset17():
    # Every elementwise op of issue 17 at once, plus LayerNormalization with its
    # Mean and InvStdDev outputs; references in float64 numpy.
    f32, i32, b = onnx.TensorProto.FLOAT, onnx.TensorProto.INT32, onnx.TensorProto.BOOL
    x = oh.make_tensor_value_info("x", f32, [2, 3, 4])
    outs = [oh.make_tensor_value_info(n, f32, s) for n, s in
            (("y", [2, 3, 4]), ("ln_y", [2, 3, 4]), ("ln_mean", [2, 1, 1]), ("ln_invstd", [2, 1, 1]))]

    def const(name, a):
        return oh.make_node("Constant", [], [name], value=onh.from_array(a, name + "_v"))
    rng = np.random.RandomState(9)
    cond = rng.rand(3, 1) > 0.5
    lo, hi = rng.randn(4).astype(np.float32), rng.randn(3, 1).astype(np.float32)
    nodes = [
        const("half", np.array(0.5, np.float32)), const("one", np.array(1.0, np.float32)),
        const("two", np.array(2.0, np.float32)), const("onehalf", np.array(1.5, np.float32)),
        const("lo", lo), const("hi", hi), const("cond", cond),
        oh.make_node("Abs", ["x"], ["ax"], name="abs"),
        oh.make_node("Neg", ["ax"], ["nax"], name="neg"),
        oh.make_node("Exp", ["nax"], ["e"], name="exp"),
        oh.make_node("Add", ["ax", "half"], ["axh"], name="add_half"),
        oh.make_node("Log", ["axh"], ["l"], name="log"),
        oh.make_node("Sqrt", ["ax"], ["s"], name="sqrt"),
        oh.make_node("Add", ["ax", "one"], ["ax1"], name="add_one"),
        oh.make_node("Reciprocal", ["ax1"], ["r"], name="reciprocal"),
        oh.make_node("Sign", ["x"], ["sg"], name="sign"),
        oh.make_node("Erf", ["x"], ["er"], name="erf"),
        oh.make_node("Max", ["x", "lo"], ["mx"], name="max"),
        oh.make_node("Min", ["x", "hi", "lo"], ["mn"], name="min3"),
        oh.make_node("Pow", ["x", "two"], ["p2"], name="pow2"),
        oh.make_node("Pow", ["ax", "onehalf"], ["p15"], name="pow15"),
        oh.make_node("Where", ["cond", "x", "e"], ["w"], name="where"),
        oh.make_node("Mul", ["x", "two"], ["x2"], name="mul_two"),
        oh.make_node("Cast", ["x2"], ["xi"], name="to_int", to=i32),
        oh.make_node("Cast", ["xi"], ["xf"], name="to_float", to=f32),
    ]
    terms = ["e", "l", "s", "r", "sg", "er", "mx", "mn", "p2", "p15", "w", "xf"]
    acc = terms[0]
    for i, t in enumerate(terms[1:]):
        out = "y" if i == len(terms) - 2 else "acc%d" % i
        nodes.append(oh.make_node("Add", [acc, t], [out], name="sum%d" % i))
        acc = out
    scale = onh.from_array((1 + 0.3 * rng.randn(3, 4)).astype(np.float32), "ln.weight")
    bias = onh.from_array((0.2 * rng.randn(3, 4)).astype(np.float32), "ln.bias")
    nodes.append(oh.make_node("LayerNormalization", ["x", "ln.weight", "ln.bias"], ["ln_y", "ln_mean", "ln_invstd"],
                              name="ln", axis=-2, epsilon=1e-3))
    g = oh.make_graph(nodes, "math17", [x], outs, [scale, bias])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    save_model("math_opset17.onnx", m)
    a = rng.randn(2, 3, 4).astype(np.float32)
    a[0, 0, :2] = [2.75, -1.25]  # exact truncations in the casts
    d = a.astype(np.float64)
    ad = np.abs(d)
    from math import erf
    y = (np.exp(-ad) + np.log(ad + 0.5) + np.sqrt(ad) + 1 / (ad + 1) + np.sign(d) + np.vectorize(erf)(d)
         + np.maximum(d, lo) + np.minimum(np.minimum(d, hi), lo) + d ** 2 + ad ** 1.5
         + np.where(cond, d, np.exp(-ad)) + np.trunc((a * np.float32(2)).astype(np.float64)))
    mean = d.reshape(2, -1).mean(axis=1).reshape(2, 1, 1)
    var = ((d - mean) ** 2).reshape(2, -1).mean(axis=1).reshape(2, 1, 1)
    inv = 1 / np.sqrt(var + 1e-3)
    ln = (d - mean) * inv * onh.to_array(scale) + onh.to_array(bias)
    save_f32("math_x.f32", a)
    save_f32("math_y.f32", y)
    save_f32("math_ln.f32", np.concatenate([ln.ravel(), mean.ravel(), inv.ravel()]))


def make_reduce_axes():
    # ReduceSum/ReduceMean at opset 13: ReduceSum's axes as an input (negative),
    # ReduceMean's as an attribute (negative), noop_with_empty_axes with no axes
    # (identity) and without it (every axis).
    f32 = onnx.TensorProto.FLOAT
    x = oh.make_tensor_value_info("x", f32, [2, 3, 4])
    outs = [oh.make_tensor_value_info(n, f32, s) for n, s in
            (("s_last", [2, 3]), ("m_mid", [2, 1, 4]), ("noop", [2, 3, 4]), ("s_all", [1, 1, 1]))]
    axes = onh.from_array(np.array([-1], np.int64), "axes")
    nodes = [oh.make_node("ReduceSum", ["x", "axes"], ["s_last"], name="sum_last", keepdims=0),
             oh.make_node("ReduceMean", ["x"], ["m_mid"], name="mean_mid", axes=[-2]),
             oh.make_node("ReduceSum", ["x"], ["noop"], name="sum_noop", noop_with_empty_axes=1),
             oh.make_node("ReduceSum", ["x"], ["s_all"], name="sum_all")]
    m = oh.make_model(oh.make_graph(nodes, "reduce13", [x], outs, [axes]),
                      opset_imports=[oh.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    save_model("reduce_axes_opset13.onnx", m)
    a = np.random.RandomState(12).randn(2, 3, 4).astype(np.float32)
    d = a.astype(np.float64)
    save_f32("reduce_axes_x.f32", a)
    save_f32("reduce_axes_y.f32", np.concatenate([d.sum(axis=-1).ravel(), d.mean(axis=-2).ravel(), d.ravel(),
                                                  [d.sum()]]))


def bad_models_math():
    f32 = onnx.TensorProto.FLOAT

    def vi(name, shape):
        return oh.make_tensor_value_info(name, f32, shape)

    def model(node, opset):
        g = oh.make_graph([node], "bad", [vi("x", [2, 4])], [vi("y", [2, 4])])
        return oh.make_model(g, opset_imports=[oh.make_opsetid("", opset)]).SerializeToString()
    # A Cast to a type sgrt does not have (FLOAT16).
    write("bad_cast_type.onnx", model(oh.make_node("Cast", ["x"], ["y"], name="cast16", to=10), 13))
    # Gelu in a model of an opset that does not have it.
    write("bad_gelu_opset.onnx", model(oh.make_node("Gelu", ["x"], ["y"], name="gelu"), 17))
    # Pow with an exponent computed at run time.
    write("bad_pow_exponent.onnx", model(oh.make_node("Pow", ["x", "x"], ["y"], name="pw"), 13))


def bad_models():
    f32 = onnx.TensorProto.FLOAT

    def model(nodes, inputs, outputs, inits=(), opset=13):
        g = oh.make_graph(nodes, "bad", inputs, outputs, list(inits))
        return oh.make_model(g, opset_imports=[oh.make_opsetid("", opset)])

    def vi(name, shape, t=f32):
        return oh.make_tensor_value_info(name, t, shape)

    w = onh.from_array(np.ones((3, 4), np.float32), "fc.weight")
    # An op sgrt does not have.
    write("bad_unsupported_op.onnx", model(
        [oh.make_node("Hardmax", ["x"], ["y"], name="hardmax1", axis=1)],
        [vi("x", [2, 4])], [vi("y", [2, 4])]).SerializeToString())
    # An op type that ends in "(null": the message closes a parenthesis after
    # it, which must not read as a NULL string printed (the fuzz target's check).
    write("bad_op_type_paren_null.onnx", model(
        [oh.make_node("X_(null", ["x"], ["y"], name="n1")],
        [vi("x", [2, 4])], [vi("y", [2, 4])]).SerializeToString())
    # A Gemm whose weight initializer is missing.
    write("bad_missing_initializer.onnx", model(
        [oh.make_node("Gemm", ["x", "fc.weight"], ["y"], name="fc", transB=1)],
        [vi("x", [2, 4])], [vi("y", [2, 3])]).SerializeToString())
    # Two nodes feeding each other.
    write("bad_cycle.onnx", model(
        [oh.make_node("Add", ["x", "b"], ["a"], name="first"),
         oh.make_node("Relu", ["a"], ["b"], name="second")],
        [vi("x", [2, 4])], [vi("b", [2, 4])]).SerializeToString())
    # A graph output nothing produces.
    write("bad_dangling_output.onnx", model(
        [oh.make_node("Relu", ["x"], ["y"], name="relu")],
        [vi("x", [2, 4])], [vi("y", [2, 4]), vi("nowhere", [2, 4])]).SerializeToString())
    # An input of 2^80 elements.
    write("bad_huge_dims.onnx", model(
        [oh.make_node("Relu", ["x"], ["y"], name="relu")],
        [vi("x", [1 << 40, 1 << 40])], [vi("y", [1 << 40, 1 << 40])]).SerializeToString())
    # A float16 weight.
    h = onh.from_array(np.ones((3, 4), np.float16), "fc.weight")
    write("bad_dtype.onnx", model(
        [oh.make_node("Gemm", ["x", "fc.weight"], ["y"], name="fc", transB=1)],
        [vi("x", [2, 4])], [vi("y", [2, 3])], [h]).SerializeToString())
    # raw_data shorter than the shape says.
    short = onnx.TensorProto(name="fc.weight", data_type=f32, dims=[3, 4], raw_data=b"\0" * 40)
    write("bad_raw_size.onnx", model(
        [oh.make_node("Gemm", ["x", "fc.weight"], ["y"], name="fc", transB=1)],
        [vi("x", [2, 4])], [vi("y", [2, 3])], [short]).SerializeToString())
    # Shapes that do not fit: a [2,5] input into a [3,4] weight.
    write("bad_shape.onnx", model(
        [oh.make_node("Gemm", ["x", "fc.weight"], ["y"], name="fc", transB=1)],
        [vi("x", [2, 5])], [vi("y", [2, 3])], [w]).SerializeToString())
    # The same, one op later: the message names the tensor as the model does.
    write("bad_shape_late.onnx", model(
        [oh.make_node("Relu", ["x"], ["hidden act"], name="relu"),
         oh.make_node("Gemm", ["hidden act", "fc.weight"], ["y"], name="fc", transB=1)],
        [vi("x", [2, 5])], [vi("y", [2, 3])], [w]).SerializeToString())
    # An attribute value sgrt does not implement.
    cw = onh.from_array(np.ones((2, 1, 3, 3), np.float32), "conv.weight")
    write("bad_auto_pad.onnx", model(
        [oh.make_node("Conv", ["x", "conv.weight"], ["y"], name="conv", auto_pad="SAME_UPPER")],
        [vi("x", [1, 1, 5, 5])], [vi("y", [1, 2, 5, 5])], [cw]).SerializeToString())
    # One tensor produced by two nodes.
    write("bad_duplicate_output.onnx", model(
        [oh.make_node("Relu", ["x"], ["y"], name="relu_a"),
         oh.make_node("Sigmoid", ["x"], ["y"], name="sigmoid_b")],
        [vi("x", [2, 4])], [vi("y", [2, 4])]).SerializeToString())
    # A node in a domain sgrt does not implement.
    write("bad_domain.onnx", model(
        [oh.make_node("FusedGemm", ["x", "fc.weight"], ["y"], name="fused", domain="com.microsoft")],
        [vi("x", [2, 4])], [vi("y", [2, 3])], [w]).SerializeToString())
    # A graph output declared with another shape than the model computes.
    write("bad_declared_shape.onnx", model(
        [oh.make_node("Relu", ["x"], ["y"], name="relu")],
        [vi("x", [2, 4])], [vi("y", [4, 2])]).SerializeToString())
    bad_attribute_models(model, vi)


def bad_attribute_models(model, vi):
    """Attributes whose declared type disagrees with the field that holds the
    value (onnx.checker rejects these; an importer that reads the declared
    field gets 0 or nothing and builds another model), and convolution and
    pooling windows out of range or larger than their input. Graph outputs
    are declared without a shape, so only the attribute can fail."""
    A = onnx.AttributeProto

    def node(op, inputs, name, attrs):
        n = oh.make_node(op, inputs, ["y"], name=name)
        n.attribute.extend(attrs)
        return n

    def out():
        return [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)]

    mismatched = {
        # INT declared, the value in f: read as i, axis 0 instead of 1.
        "bad_attr_int_in_f.onnx": model(
            [node("Flatten", ["x"], "flat", [A(name="axis", type=A.INT, f=1.0)])], [vi("x", [2, 3, 4])],
            out()),
        # INT declared, the value in ints.
        "bad_attr_int_in_ints.onnx": model(
            [node("Flatten", ["x"], "flat", [A(name="axis", type=A.INT, ints=[2])])], [vi("x", [2, 3, 4])],
            out()),
        # INTS declared, the value in i: read as an empty list, stride 1.
        "bad_attr_ints_in_i.onnx": model(
            [node("Conv", ["x", "conv.weight"], "conv", [A(name="strides", type=A.INTS, i=2)])],
            [vi("x", [1, 1, 5, 5])], out(),
            [onh.from_array(np.ones((2, 1, 3, 3), np.float32), "conv.weight")]),
        # Values in two fields.
        "bad_attr_two_fields.onnx": model(
            [node("Flatten", ["x"], "flat", [A(name="axis", type=A.INT, i=1, f=2.0)])], [vi("x", [2, 3, 4])],
            out()),
        # Declared as it carries it, but not the type Flatten's axis has.
        "bad_attr_wrong_type.onnx": model(
            [node("Flatten", ["x"], "flat", [A(name="axis", type=A.FLOAT, f=1.0)])], [vi("x", [2, 3, 4])],
            out()),
        # FLOAT declared, the value in i: read as alpha 0.
        "bad_attr_float_in_i.onnx": model(
            [node("Gemm", ["x", "fc.weight"], "fc", [A(name="alpha", type=A.FLOAT, i=2)])],
            [vi("x", [2, 4])], out(), [onh.from_array(np.ones((4, 3), np.float32), "fc.weight")]),
    }
    for name, m in mismatched.items():
        try:
            onnx.checker.check_model(m)
        except onnx.checker.ValidationError:
            pass
        else:
            sys.exit(name + ": onnx.checker accepts it")
        write(name, m.SerializeToString())

    def conv(name, x_shape, w_shape, **attrs):
        w = onh.from_array(np.ones(w_shape, np.float32), "conv.weight")
        write(name, model([oh.make_node("Conv", ["x", "conv.weight"], ["y"], name="conv", **attrs)],
                          [vi("x", x_shape)], out(), [w]).SerializeToString())

    conv("bad_conv_kernel_zero.onnx", [1, 1, 5, 5], [2, 1, 1, 3], kernel_shape=[0, 3])
    conv("bad_conv_stride_huge.onnx", [1, 1, 5, 5], [2, 1, 3, 3], strides=[1 << 31, 1])
    # A 1x3 kernel: with dilation 2^62 along its height of 1 the window still fits.
    conv("bad_conv_dilation_huge.onnx", [1, 1, 5, 5], [2, 1, 1, 3], dilations=[1 << 62, 1])
    conv("bad_conv_negative_pads.onnx", [1, 1, 5, 5], [2, 1, 3, 3], pads=[0, -1, 0, 0])
    conv("bad_conv_group_zero.onnx", [1, 1, 5, 5], [2, 1, 3, 3], group=0)
    # 3x3 with dilation 3 spans 7 rows; the input has 5, padded 6.
    conv("bad_conv_kernel_too_large.onnx", [1, 1, 5, 5], [2, 1, 3, 3], dilations=[3, 1], pads=[1, 0, 0, 0])
    write("bad_pool_stride_huge.onnx", model(
        [oh.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[2, 2], strides=[1 << 31, 1])],
        [vi("x", [1, 1, 4, 4])], out()).SerializeToString())
    write("bad_pool_kernel_too_large.onnx", model(
        [oh.make_node("AveragePool", ["x"], ["y"], name="pool", kernel_shape=[3, 5], pads=[0, 0, 1, 0])],
        [vi("x", [1, 1, 4, 4])], out()).SerializeToString())
    # A Gemm bias that does not broadcast to [M, N] (its message once named
    # the [M, N] result '(null)').
    write("bad_gemm_bias.onnx", model(
        [oh.make_node("Gemm", ["x", "fc.weight", "fc.bias"], ["y"], name="fc", transB=1)],
        [vi("x", [4, 3])], out(),
        [onh.from_array(np.ones((10, 3), np.float32), "fc.weight"),
         onh.from_array(np.ones(3, np.float32), "fc.bias")]).SerializeToString())


def main():
    if not sys.version_info >= (3, 9):
        sys.exit("needs python 3.9+")
    make_mlp()
    make_cnn()
    make_ops()
    make_softmax_opset11()
    make_fold_chain()
    make_reduce_opset18()
    make_math_opset17()
    make_reduce_axes()
    bad_models()
    bad_models_math()
    os.makedirs(CORPUS, exist_ok=True)
    for name in ("mlp_eval", "mlp_train", "cnn_eval", "cnn_train", "cnn_train_opset9", "ops_opset11",
                 "softmax_opset11", "fold_chain", "reduce_opset18", "math_opset17", "bad_cycle",
                 "bad_attr_ints_in_i", "bad_conv_kernel_too_large", "bad_op_type_paren_null"):
        with open(os.path.join(HERE, name + ".onnx"), "rb") as f:
            data = f.read()
        with open(os.path.join(CORPUS, name + ".onnx"), "wb") as f:
            f.write(data)
    print("wrote the models to", HERE, "and seeds to", os.path.normpath(CORPUS))


if __name__ == "__main__":
    main()
