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
  embedding_eval.onnx   token and position nn.Embedding (50 x 8, 6 x 8) added,
                   tanh, Linear(8, 5), in inference form: a Gather of the token
                   table by the int64 input "ids" [2,6]; the position rows
                   folded into a constant by the exporter
  embedding_train.onnx  the same exported for training: the position lookup
                   stays a Gather of its table by constant indices
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
  embedding_ids.i64               the ids [2,6] (raw little-endian int64)
  embedding_logits.f32            the embedding models' output [2,6,5]
  embedding_grad.f32              d loss / d wte.weight [50,8], then
                                  d loss / d wpe.weight [6,8], for loss =
                                  cross_entropy(logits as [12,5], labels
                                  i % 5), mean
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
  bad_gather_axis.onnx  a Gather of a parameter along axis 1 (no embedding)
  slice_split_opset13.onnx  Slice of a run-time input (negative start, clamped
                        end, several axes, default axes, explicit steps 1, one
                        that cuts nothing) and Split (sizes as an input, the
                        equal-split default) (slice_x.f32 [2,3,8] in)
  split_opset11.onnx    Split with its sizes as an attribute and without (opset 11)
  split_opset18.onnx    Split with num_outputs 3 of a dim of 8: 3, 3, 2 (opset 18,
                        written unchecked)
  mask_opset14.onnx     Range (int64, negative delta, float), Trilu, Equal (float
                        and int64), Not, Expand of constants and of a run-time
                        input (broadcast_to) and one that keeps the shape, Where
                        (mask_x.f32 [4,4] and mask_xr.f32 [1,4] in, mask_y.f32 out)
  bad_split_sizes.onnx, bad_equal_runtime.onnx, bad_equal_weight.onnx,
  bad_trilu_runtime.onnx  refused Split, Equal, Trilu forms (see the C test;
                        a strided Slice of a run-time tensor, once refused here,
                        imports: make_onnx_families.py has the refused forms)
Transformers (issue 21), exported for training (torch.onnx.TrainingMode.TRAINING,
do_constant_folding=False); the weights are those of the export:
  gpt2_train.onnx       a nanoGPT-style GPT-2 (vocab 64, context 16, 2 layers,
                        2 heads, width 32; causal attention written out with a
                        tril buffer `bias`, tanh GELU, pre-LayerNorm, lm_head tied
                        to wte) at opset 14, input "ids" [2,16] int64
  encoder_train.onnx    nn.TransformerEncoderLayer(32, 4, 64, dropout 0,
                        batch_first) and a Linear(32, 5) head at opset 17, input
                        "x" [2,8,32]
  bad_transformer_op.onnx  a one-head attention whose scores are torch.einsum
                        (once refused; Einsum imports now, and the name stays)
  padmask_train.onnx    two nn.TransformerEncoderLayers (16, 2 heads) masked by
                        the BOOL input "pad" and by ids == 0 (Equal at run
                        time), heads on every position and on h[:, 0], opset
                        14, inputs "ids" [2,6] (padmask_ids.i64) and "pad"
                        [2,6] (padmask_pad.u8, one byte each)
  t5mix_train.onnx      T5 position buckets, Hugging Face's causal mask,
                        arange.expand(B, -1), .repeat, F.normalize,
                        clamp(min=1e-9), opset 17, input "x" [2,6,16]
                        (t5mix_x.f32); labels i % 5 for both
  padmask_ref.f32, t5mix_ref.f32  as gpt2_ref.f32
  forms_opset14.onnx    hand-made: Gather by constant indices, folded
                        comparisons, Where, unary math, Min, a DOUBLE Constant,
                        Equal/Not at run time, a BOOL input through layout ops,
                        Tile, ReduceL2, the order comparisons at run time on
                        special floats and extreme int64s (forms_x.f32,
                        forms_ids.i64, forms_pad.u8, forms_fs.f32, forms_is.i64
                        in; forms_y.f32 out, every output as float32)
  reduce_l2_opset18.onnx  ReduceL2 with axes as an input (reduce_l2_y.f32)
  bool_io_opset14.onnx  BOOL graph outputs: the input "pad" under a second name
                        and its Not
  bad_greater_bool.onnx, bad_tile_zero.onnx, bad_double_constant.onnx,
  bad_gather_index.onnx  refused forms (see the C test)
  `make_onnx.py NAME...` runs only the named functions (make_transformer_forms,
  make_transformer_exports, bad_models_forms, ...).
  gpt2_ids.i64          the ids [2,16], then the targets [32] (int64)
  encoder_x.f32         the input [2,8,32]; the labels are i % 5
  gpt2_ref.f32, encoder_ref.f32  PyTorch's logits (train mode), then the
                        gradient of every parameter (sorted by name) for
                        cross_entropy(logits as [rows, classes], labels), mean,
                        then the losses of 3 steps of SGD (lr 0.1, momentum 0.9)
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


class Embed(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(50, 8)
        self.wpe = nn.Embedding(6, 8)
        self.head = nn.Linear(8, 5)
        self.register_buffer("pos", torch.arange(6), persistent=False)

    def forward(self, ids):  # ids [2,6]
        return self.head(torch.tanh(self.wte(ids) + self.wpe(self.pos)))


class CausalSelfAttention(nn.Module):
    """nanoGPT's attention, written out: one projection split into q, k, v."""

    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head, self.n_embd = n_head, n_embd
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size,
                                                                                           block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class GPTBlock(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * n_embd, n_embd))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab=64, block_size=16, n_layer=2, n_head=2, n_embd=32):
        super().__init__()
        self.wte = nn.Embedding(vocab, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.h = nn.ModuleList([GPTBlock(n_embd, n_head, block_size) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # weight tying

    def forward(self, idx):
        _, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, dropout=0.0, batch_first=True)
        self.head = nn.Linear(32, 5)

    def forward(self, x):
        return self.head(self.enc(x))


class EinsumAttention(nn.Module):
    """One attention head whose scores are an einsum: an op sgrt lacks."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(4, 12)

    def forward(self, x):
        q, k, v = self.qkv(x).split(4, dim=-1)
        att = torch.softmax(torch.einsum("bqd,bkd->bqk", q, k) * 0.5, dim=-1)
        return att @ v


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


def make_embedding():
    torch.manual_seed(13)
    model = Embed()
    ids = torch.tensor([[3, 17, 3, 49, 0, 17], [17, 8, 8, 3, 22, 41]])  # repeats: their rows' grads add up
    kw = dict(input_names=["ids"], output_names=["logits"])
    export(model, ids, "embedding_eval.onnx", False, **kw)
    export(model, ids, "embedding_train.onnx", True, **kw)
    write("embedding_ids.i64", np.ascontiguousarray(ids.numpy(), dtype="<i8").tobytes())
    logits = model(ids)
    save_f32("embedding_logits.f32", logits)
    loss = F.cross_entropy(logits.reshape(12, 5), torch.arange(12) % 5)
    loss.backward()
    save_f32("embedding_grad.f32", torch.cat([model.wte.weight.grad.flatten(), model.wpe.weight.grad.flatten()]))


def randomize_layer_norms(model):
    # LayerNorm scales and shifts other than 1 and 0, so that their gradients count.
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, nn.LayerNorm):
                mod.weight.copy_(1 + 0.3 * torch.randn(mod.weight.shape))
                mod.bias.copy_(0.2 * torch.randn(mod.bias.shape))


def train_reference(model, x, labels, name):
    """PyTorch's side of the C test's transformer parity: the logits, the
    gradient of every parameter (sorted by name) at the first step, and the
    losses of 3 SGD steps (lr 0.1, momentum 0.9), in one file."""
    m = copy.deepcopy(model)
    m.train()
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    losses, parts = [], []
    for step in range(3):
        opt.zero_grad()
        logits = m(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels)
        loss.backward()
        if step == 0:
            parts = [logits.detach().flatten()] + [p.grad.flatten().clone() for _, p in sorted(m.named_parameters())]
        losses.append(loss.item())
        opt.step()
    save_f32(name, torch.cat(parts + [torch.tensor(losses)]))
    return logits


def make_transformers():
    torch.manual_seed(21)
    gpt = GPT()
    with torch.no_grad():
        gpt.wte.weight.normal_(0, 0.1)  # tied to lm_head: logits of order 1
    randomize_layer_norms(gpt)
    ids = torch.randint(0, 64, (2, 16))
    targets = torch.randint(0, 64, (32,))
    export(gpt, ids, "gpt2_train.onnx", True, input_names=["ids"], output_names=["logits"])
    write("gpt2_ids.i64", np.ascontiguousarray(torch.cat([ids.flatten(), targets]).numpy(), dtype="<i8").tobytes())
    train_reference(gpt, ids, targets, "gpt2_ref.f32")

    enc = Encoder()
    randomize_layer_norms(enc)
    x = torch.randn(2, 8, 32)
    export(enc, x, "encoder_train.onnx", True, opset=17, input_names=["x"], output_names=["logits"])
    save_f32("encoder_x.f32", x)
    train_reference(enc, x, torch.arange(16) % 5, "encoder_ref.f32")

    export(EinsumAttention(), torch.randn(1, 3, 4), "bad_transformer_op.onnx", False, input_names=["x"],
           output_names=["y"])


def make_slice_split():
    """Slice and Split of run-time tensors (sg_slice), with NumPy references."""
    f32 = onnx.TensorProto.FLOAT
    big = np.iinfo(np.int64).max

    def ints(name, v):
        return onh.from_array(np.array(v, np.int64), name)

    def vi(name, shape):
        return oh.make_tensor_value_info(name, f32, shape)

    a = np.random.RandomState(14).randn(2, 3, 8).astype(np.float32)
    save_f32("slice_x.f32", a)
    inits = [ints("s_neg", [-5]), ints("e_big", [big]), ints("ax2", [2]), ints("s12", [1, 0]),
             ints("e12", [3, 100]), ints("ax12", [1, -3]), ints("one", [1]), ints("two", [2]),
             ints("zero", [0]), ints("split26", [2, 6])]
    nodes = [oh.make_node("Slice", ["x", "s_neg", "e_big", "ax2"], ["s1"], name="slice_tail"),
             oh.make_node("Slice", ["x", "s12", "e12", "ax12"], ["s2"], name="slice_two_axes"),
             oh.make_node("Slice", ["x", "one", "two"], ["s3"], name="slice_default_axes"),
             oh.make_node("Slice", ["x", "zero", "e_big", "ax2", "one"], ["s4"], name="slice_whole"),
             oh.make_node("Split", ["x", "split26"], ["p0", "p1"], name="split_sizes", axis=-1),
             oh.make_node("Split", ["x"], ["e0", "e1", "e2"], name="split_equal", axis=1)]
    outs = [("s1", a[:, :, -5:]), ("s2", a[:, 1:3, :]), ("s3", a[1:2]), ("s4", a), ("p0", a[:, :, :2]),
            ("p1", a[:, :, 2:]), ("e0", a[:, 0:1]), ("e1", a[:, 1:2]), ("e2", a[:, 2:3])]
    g = oh.make_graph(nodes, "slice_split13", [vi("x", [2, 3, 8])], [vi(n, list(r.shape)) for n, r in outs], inits)
    save_model("slice_split_opset13.onnx", oh.make_model(g, opset_imports=[oh.make_opsetid("", 13)]))
    save_f32("slice_y.f32", np.concatenate([r.ravel() for _, r in outs]))

    nodes = [oh.make_node("Split", ["x"], ["p0", "p1"], name="split_attr", axis=2, split=[2, 6]),
             oh.make_node("Split", ["x"], ["e0", "e1", "e2"], name="split_equal", axis=1)]
    outs11 = [o for o in outs if o[0] in ("p0", "p1", "e0", "e1", "e2")]
    g = oh.make_graph(nodes, "split11", [vi("x", [2, 3, 8])], [vi(n, list(r.shape)) for n, r in outs11])
    save_model("split_opset11.onnx", oh.make_model(g, opset_imports=[oh.make_opsetid("", 11)]))
    # Opset 18's num_outputs (onnx 1.12's checker stops at opset 17: written unchecked).
    g = oh.make_graph([oh.make_node("Split", ["x"], ["q0", "q1", "q2"], name="split_num", axis=2, num_outputs=3)],
                      "split18", [vi("x", [2, 3, 8])], [vi("q0", [2, 3, 3]), vi("q1", [2, 3, 3]), vi("q2", [2, 3, 2])])
    write("split_opset18.onnx", oh.make_model(g, opset_imports=[oh.make_opsetid("", 18)]).SerializeToString())


def make_mask():
    """The ops exporters write to build attention masks, folded at import,
    and Expand of a run-time input."""
    f32 = onnx.TensorProto.FLOAT

    def c(name, v, dt=np.int64):
        return onh.from_array(np.array(v, dt), name)

    inits = [c("i0", 0), c("i4", 4), c("i1", 1), c("i5", 5), c("im2", -2), c("i2", 2), c("shape44", [4, 4]),
             c("ax0", [0]), c("shape41", [4, 1]), c("shape311", [3, 1, 1]), c("shape11", [1, 1]),
             c("f05", 0.5, np.float32), c("f2", 2.0, np.float32)]
    one = oh.make_tensor("one", f32, [1], [1.0])
    # Float scalars are Constant nodes, as PyTorch writes them (f05 and f2,
    # initializers that only Range reads, are constants too).
    nodes = [
        oh.make_node("Constant", [], ["fzero"], name="zero", value=oh.make_tensor("z", f32, [], [0.0])),
        oh.make_node("Range", ["i0", "i4", "i1"], ["r"], name="range"),  # [0 1 2 3]
        oh.make_node("ConstantOfShape", ["shape44"], ["ones"], name="ones", value=one),
        oh.make_node("Trilu", ["ones"], ["tril"], name="tril", upper=0),
        oh.make_node("Equal", ["tril", "fzero"], ["above"], name="eq_float"),
        oh.make_node("Not", ["above"], ["keep"], name="not"),
        oh.make_node("Where", ["keep", "x", "fzero"], ["y1"], name="where_tril"),
        oh.make_node("Unsqueeze", ["r", "ax0"], ["r1"], name="unsqueeze"),
        oh.make_node("Expand", ["r1", "shape41"], ["cols"], name="expand_const"),  # [4,4]
        oh.make_node("Cast", ["cols"], ["colsf"], name="cast", to=f32),
        oh.make_node("Trilu", ["colsf", "i1"], ["triu1"], name="triu_k1"),  # upper, k = 1
        oh.make_node("Add", ["x", "triu1"], ["y2"], name="add_triu"),
        oh.make_node("Expand", ["xr", "shape311"], ["y3"], name="expand_run_time"),  # [3,1,4]
        oh.make_node("Expand", ["x", "shape11"], ["y4"], name="expand_same"),
        oh.make_node("Equal", ["r", "i2"], ["is2"], name="eq_int"),
        oh.make_node("Where", ["is2", "x", "fzero"], ["y5"], name="where_col2"),
        oh.make_node("Range", ["f05", "f2", "f05"], ["y6"], name="range_float"),  # [0.5 1 1.5]
        oh.make_node("Range", ["i5", "i0", "im2"], ["rn"], name="range_down"),  # [5 3 1]
        oh.make_node("Cast", ["rn"], ["y7"], name="cast_down", to=f32),
    ]
    x = np.random.RandomState(15).randn(4, 4).astype(np.float32)
    xr = np.random.RandomState(16).randn(1, 4).astype(np.float32)
    cols = np.tile(np.arange(4, dtype=np.float32), (4, 1))
    outs = [("y1", np.tril(x)), ("y2", x + np.triu(cols, 1)), ("y3", np.broadcast_to(xr, (3, 1, 4))), ("y4", x),
            ("y5", np.where(np.arange(4) == 2, x, 0)), ("y6", np.array([0.5, 1, 1.5])), ("y7", np.array([5, 3, 1]))]
    vis = [oh.make_tensor_value_info(n, f32, list(r.shape)) for n, r in outs]
    ins = [oh.make_tensor_value_info("x", f32, [4, 4]), oh.make_tensor_value_info("xr", f32, [1, 4])]
    g = oh.make_graph(nodes, "mask14", ins, vis, inits)
    save_model("mask_opset14.onnx", oh.make_model(g, opset_imports=[oh.make_opsetid("", 14)]))
    save_f32("mask_x.f32", x)
    save_f32("mask_xr.f32", xr)
    save_f32("mask_y.f32", np.concatenate([r.ravel() for _, r in outs]))


def bad_models_transformer(model, vi):
    def ints(name, v):
        return onh.from_array(np.array(v, np.int64), name)

    # Split sizes that do not add up to the dim.
    write("bad_split_sizes.onnx", model(
        [oh.make_node("Split", ["x", "sizes"], ["y", "z"], name="split", axis=1)], [vi("x", [2, 8])],
        [vi("y", [2, 2]), vi("z", [2, 5])], [ints("sizes", [2, 5])]).SerializeToString())
    # Equal of a run-time tensor: sgrt has no comparison op.
    zero = onh.from_array(np.zeros(1, np.float32), "zero")
    write("bad_equal_runtime.onnx", model(
        [oh.make_node("Equal", ["x", "zero"], ["y"], name="eq")], [vi("x", [2, 4])],
        [vi("y", [2, 4], onnx.TensorProto.BOOL)], [zero]).SerializeToString())
    # A float initializer compared and also multiplied: a weight, not a buffer.
    w = onh.from_array(np.ones((2, 4), np.float32), "w")
    write("bad_equal_weight.onnx", model(
        [oh.make_node("Equal", ["w", "zero"], ["m"], name="eq_w"), oh.make_node("Mul", ["x", "w"], ["xw"], name="mul"),
         oh.make_node("Where", ["m", "xw", "x"], ["y"], name="where")],
        [vi("x", [2, 4])], [vi("y", [2, 4])], [w, zero]).SerializeToString())
    # Trilu of a run-time tensor.
    write("bad_trilu_runtime.onnx", model(
        [oh.make_node("Trilu", ["x"], ["y"], name="triu")], [vi("x", [4, 4])], [vi("y", [4, 4])],
        opset=14).SerializeToString())


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
    # A Gather of a parameter along axis 1: no embedding lookup (that is axis 0).
    write("bad_gather_axis.onnx", model(
        [oh.make_node("Gather", ["fc.weight", "idx"], ["y"], name="gather1", axis=1)],
        [vi("idx", [2], onnx.TensorProto.INT64)], [vi("y", [3, 2])], [w]).SerializeToString())
    bad_attribute_models(model, vi)
    bad_models_transformer(model, vi)


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


# ---- transformer forms of unseen exports (issue 21 follow-up) -----------------


class PadMaskEncoder(nn.Module):
    """Two nn.TransformerEncoderLayers: the first masks keys by the BOOL input
    `pad`, the second by `ids == 0` computed at run time; a head on every
    position plus one on the first token (h[:, 0], a Gather of a run-time
    tensor)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 16)
        self.l1 = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.l2 = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True, activation="gelu",
                                             norm_first=True)
        self.head = nn.Linear(16, 5)
        self.cls = nn.Linear(16, 5)

    def forward(self, ids, pad):
        h = self.l1(self.emb(ids), src_key_padding_mask=pad)
        h = self.l2(h, src_key_padding_mask=ids == 0)
        return self.head(h) + self.cls(h[:, 0]).unsqueeze(1)


class T5Mix(nn.Module):
    """Forms of Hugging Face-era exports: T5's relative position buckets
    (Abs, Less, Log, Cast, Min, Where of constants), the causal mask of
    _make_causal_mask (Less of aranges, masked_fill_ of a full tensor),
    position ids by arange(T).expand(B, -1) (a Where over the shape), a class
    token by .repeat (Tile), cosine scores by F.normalize (ReduceL2), and a
    clamp(min=1e-9) (a DOUBLE constant in training exports)."""

    def __init__(self):
        super().__init__()
        self.rel = nn.Embedding(8, 2)
        self.wpe = nn.Embedding(7, 16)
        self.cls_tok = nn.Parameter(0.5 * torch.randn(1, 1, 16))
        self.qkv = nn.Linear(16, 48)
        self.ln = nn.LayerNorm(16)
        self.head = nn.Linear(16, 5)

    @staticmethod
    def bucket(rp, nb=8, md=16):
        nb //= 2
        ret = (rp > 0).to(torch.long) * nb
        rp = torch.abs(rp)
        me = nb // 2
        small = rp < me
        large = me + (torch.log(rp.float() / me) / math.log(md / me) * (nb - me)).to(torch.long)
        large = torch.min(large, torch.full_like(large, nb - 1))
        return ret + torch.where(small, rp, large)

    def forward(self, x):  # x [2,6,16]
        b = x.shape[0]
        x = torch.cat([self.cls_tok.repeat(b, 1, 1), x], dim=1)  # [2,7,16]
        t = x.shape[1]
        pos = torch.arange(t).unsqueeze(0).expand(b, -1)
        x = x + self.wpe(pos)
        ctx = torch.arange(t, dtype=torch.long)[:, None]
        mem = torch.arange(t, dtype=torch.long)[None, :]
        bias = self.rel(self.bucket(mem - ctx)).permute(2, 0, 1).unsqueeze(0)  # [1,2,7,7]
        mask = torch.full((t, t), torch.finfo(x.dtype).min)
        cond = torch.arange(t)
        mask.masked_fill_(cond < (cond + 1).view(t, 1), 0)
        q, k, v = self.qkv(self.ln(x)).view(b, t, 3, 2, 8).permute(2, 0, 3, 1, 4)
        q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
        s = 4.0 * (q @ k.transpose(-1, -2)) + bias + mask
        h = (s.softmax(-1) @ v).transpose(1, 2).reshape(b, t, 16)
        h = h / torch.clamp(h.abs().sum(-1, keepdim=True), min=1e-9)
        return self.head(x + 4.0 * h)


def train_reference_inputs(model, xs, labels, name):
    """train_reference for a model of several inputs."""
    m = copy.deepcopy(model)
    m.train()
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    losses, parts = [], []
    for step in range(3):
        opt.zero_grad()
        logits = m(*xs)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels)
        loss.backward()
        if step == 0:
            parts = [logits.detach().flatten()] + [p.grad.flatten().clone() for _, p in sorted(m.named_parameters())]
        losses.append(loss.item())
        opt.step()
    save_f32(name, torch.cat(parts + [torch.tensor(losses)]))


def make_transformer_exports():
    """Training exports of PadMaskEncoder (opset 14) and T5Mix (opset 17)
    with PyTorch's logits, gradients and losses."""
    torch.manual_seed(22)
    enc = PadMaskEncoder()
    randomize_layer_norms(enc)
    ids = torch.tensor([[3, 7, 11, 2, 0, 0], [5, 1, 9, 14, 19, 0]])
    pad = torch.tensor([[False, False, False, True, True, True], [False, False, False, False, False, True]])
    export(enc, (ids, pad), "padmask_train.onnx", True, input_names=["ids", "pad"], output_names=["logits"])
    write("padmask_ids.i64", np.ascontiguousarray(ids.numpy(), dtype="<i8").tobytes())
    write("padmask_pad.u8", np.ascontiguousarray(pad.numpy(), dtype="u1").tobytes())
    train_reference_inputs(enc, (ids, pad), torch.arange(12) % 5, "padmask_ref.f32")

    torch.manual_seed(23)
    t5 = T5Mix()
    randomize_layer_norms(t5)
    x = torch.randn(2, 6, 16)
    export(t5, x, "t5mix_train.onnx", True, opset=17, input_names=["x"], output_names=["logits"])
    save_f32("t5mix_x.f32", x)
    train_reference_inputs(t5, (x,), torch.arange(14) % 5, "t5mix_ref.f32")


def make_transformer_forms():
    """Hand-made forms (opset 14) against NumPy: Gather of a run-time tensor by
    constant indices, Where / Less / Greater / LessOrEqual / GreaterOrEqual /
    Abs / Neg / Log / Min folded, a DOUBLE Constant, a folded Cast of -inf to
    int64 (0), Equal and Not at run time, a BOOL input through Unsqueeze,
    Expand, Transpose, Slice, Concat, Gather and Tile into Where, Tile of a
    run-time tensor, ReduceL2."""
    f32, i64, b8, f64 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64, onnx.TensorProto.BOOL, onnx.TensorProto.DOUBLE

    def c(name, v, dt=np.int64):
        return onh.from_array(np.array(v, dt), name)

    inits = [c("i0", 0), c("im1", [-1, 0, 1, 3]), c("i2x2", [[0, 1], [1, 2]]), c("ax2", [2]), c("shape243", [2, 4, 3]),
             c("perm", [1, 0, 2]), c("s1", [1]), c("e4", [4]), c("s0", [0]), c("ax0", [0]), c("rep12", [1, 2]),
             c("rep212", [2, 1, 2]), c("rc", [[0], [1], [2]]), c("rr", [[0, 1, 2]]), c("fa", [1.0, np.nan, 3.0], np.float32),
             c("fb", [2.0, 2.0, 3.0], np.float32), c("neg", [-3, 2, 0]), c("mn", [1, 1, 1]), c("fe", [1.0, 8.0, 0.0], np.float32),
             c("w13", [[1.0, 2.0, 3.0]], np.float32), c("fm1", -1.0, np.float32), c("f0", 0.0, np.float32)]
    dbl = oh.make_tensor("dv", f64, [2], [0.1, 2.5])
    nodes = [
        oh.make_node("Gather", ["x", "i0"], ["g0"], name="gather_scalar", axis=1),           # [2,3]
        oh.make_node("Gather", ["x", "im1"], ["g1"], name="gather_runs", axis=1),            # [2,4,3]
        oh.make_node("Gather", ["x", "i2x2"], ["g2"], name="gather_2d", axis=-1),            # [2,4,2,2]
        oh.make_node("Less", ["rc", "rr"], ["lt"], name="less"),                               # [3,3]
        oh.make_node("Where", ["lt", "w13", "fm1"], ["wf"], name="where_fold"),               # [3,3] folded
        oh.make_node("Identity", ["wf"], ["yw"], name="id_where"),
        oh.make_node("GreaterOrEqual", ["rc", "rr"], ["ge"], name="ge"),
        oh.make_node("Cast", ["ge"], ["yge"], name="cast_ge", to=f32),
        oh.make_node("Greater", ["fa", "fb"], ["gt"], name="gt"),
        oh.make_node("LessOrEqual", ["fa", "fb"], ["le"], name="le"),
        oh.make_node("Cast", ["gt"], ["ygt"], name="cast_gt", to=f32),
        oh.make_node("Cast", ["le"], ["yle"], name="cast_le", to=f32),
        oh.make_node("Abs", ["neg"], ["ab"], name="abs_int"),
        oh.make_node("Neg", ["ab"], ["ng"], name="neg_int"),
        oh.make_node("Min", ["ng", "mn"], ["mi"], name="min_int"),
        oh.make_node("Cast", ["mi"], ["ymi"], name="cast_min", to=f32),
        oh.make_node("Log", ["fe"], ["lg"], name="log_const"),                                # [0, 2.08, -inf]
        oh.make_node("Cast", ["lg"], ["lgi"], name="cast_log", to=i64),                       # [0, 2, 0]
        oh.make_node("Cast", ["lgi"], ["ylg"], name="cast_log_f", to=f32),
        oh.make_node("Constant", [], ["d"], name="double", value=dbl),
        oh.make_node("Cast", ["d"], ["yd"], name="cast_double", to=f32),
        oh.make_node("Cast", ["d"], ["di"], name="cast_double_int", to=i64),
        oh.make_node("Cast", ["di"], ["ydi"], name="cast_double_int_f", to=f32),
        oh.make_node("Equal", ["ids", "i0"], ["isz"], name="eq_run_time"),
        oh.make_node("Not", ["isz"], ["nz"], name="not_run_time"),
        oh.make_node("Cast", ["isz"], ["yeq"], name="cast_eq", to=f32),
        oh.make_node("Cast", ["nz"], ["yne"], name="cast_not", to=f32),
        oh.make_node("Unsqueeze", ["pad", "ax2"], ["pu"], name="pad_unsqueeze"),              # [2,4,1]
        oh.make_node("Expand", ["pu", "shape243"], ["pe"], name="pad_expand"),                # [2,4,3]
        oh.make_node("Transpose", ["pe"], ["pt"], name="pad_transpose", perm=[1, 0, 2]),     # [4,2,3]
        oh.make_node("Slice", ["pt", "s1", "e4", "ax0"], ["ps"], name="pad_slice"),          # [3,2,3]
        oh.make_node("Slice", ["pt", "s0", "s1", "ax0"], ["ph"], name="pad_head"),           # [1,2,3]
        oh.make_node("Concat", ["ps", "ph"], ["pc"], name="pad_concat", axis=0),             # [4,2,3]
        oh.make_node("Transpose", ["pc"], ["pr"], name="pad_back", perm=[1, 0, 2]),          # [2,4,3]
        oh.make_node("Where", ["pr", "x", "fm1"], ["yb"], name="where_pad"),
        oh.make_node("Gather", ["pad", "i0"], ["pg"], name="pad_gather", axis=1),             # [2]
        oh.make_node("Where", ["pg", "f0", "fm1"], ["ypg"], name="where_pad_gather"),
        oh.make_node("Tile", ["pad", "rep12"], ["ptl"], name="pad_tile"),                    # [2,8]
        oh.make_node("Cast", ["ptl"], ["ytb"], name="cast_tile", to=f32),
        oh.make_node("Tile", ["x", "rep212"], ["yt"], name="tile"),                          # [4,4,6]
        oh.make_node("ReduceL2", ["x"], ["yl2"], name="l2", axes=[2], keepdims=1),          # [2,4,1]
    ]
    # Less, Greater, LessOrEqual, GreaterOrEqual at run time, every pair of
    # special floats (NaN, infinities, signed zeros, subnormals, extremes) and
    # of extreme int64 values (a - b overflows), and against a constant.
    for kind, src in (("f", "fs"), ("i", "is")):
        nodes += [oh.make_node("Unsqueeze", [src, "ax1"], [kind + "col"], name=kind + "_col"),
                  oh.make_node("Unsqueeze", [src, "ax0"], [kind + "row"], name=kind + "_row")]
        for op in ("Less", "Greater", "LessOrEqual", "GreaterOrEqual"):
            nodes += [oh.make_node(op, [kind + "col", kind + "row"], [kind + op], name=kind + "_" + op),
                      oh.make_node("Cast", [kind + op], ["y" + kind + op], name=kind + "_cast_" + op, to=f32)]
    nodes += [oh.make_node("Greater", ["x", "half"], ["xgt"], name="gt_const"),
              oh.make_node("Cast", ["xgt"], ["ygt_half"], name="cast_gt_const", to=f32)]
    inits += [c("ax1", [1]), c("half", 0.5, np.float32)]
    rs = np.random.RandomState(24)
    x = rs.randn(2, 4, 3).astype(np.float32)
    ids = np.array([[3, 0, 5, 0], [0, 1, 2, 7]], np.int64)
    pad = np.array([[False, True, False, True], [True, True, False, False]])
    pe = np.broadcast_to(pad[:, :, None], (2, 4, 3))
    pr = np.roll(pe, -1, axis=1)
    with np.errstate(invalid="ignore"):
        fa, fb = np.array([1.0, np.nan, 3.0], np.float32), np.array([2.0, 2.0, 3.0], np.float32)
        gt, le = fa > fb, fa <= fb
    rc, rr = np.arange(3)[:, None], np.arange(3)[None, :]
    outs = [("g0", x[:, 0]), ("g1", x[:, [3, 0, 1, 3]]), ("g2", x[:, :, [[0, 1], [1, 2]]]),
            ("yw", np.where(rc < rr, np.array([[1.0, 2.0, 3.0]]), -1.0)), ("yge", (rc >= rr).astype(np.float32)),
            ("ygt", gt.astype(np.float32)), ("yle", le.astype(np.float32)),
            ("ymi", np.minimum(-np.abs(np.array([-3, 2, 0])), 1).astype(np.float32)),
            ("ylg", np.array([0.0, 2.0, 0.0])), ("yd", np.array([0.1, 2.5], np.float32)), ("ydi", np.array([0.0, 2.0])),
            ("yeq", (ids == 0).astype(np.float32)), ("yne", (ids != 0).astype(np.float32)),
            ("yb", np.where(pr, x, -1.0)), ("ypg", np.where(pad[:, 0], 0.0, -1.0)),
            ("ytb", np.tile(pad, (1, 2)).astype(np.float32)), ("yt", np.tile(x, (2, 1, 2))),
            ("yl2", np.sqrt((x.astype(np.float64) ** 2).sum(axis=2, keepdims=True)))]
    fs = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 3.4e38, -3.4e38, 1.0, 1.0000001, -2.5],
                  np.float32)
    big = np.iinfo(np.int64)
    ist = np.array([big.min, big.min + 1, -1, 0, 1, big.max - 1, big.max], np.int64)
    with np.errstate(invalid="ignore"):
        for kind, v in (("f", fs), ("i", ist)):
            a, b = v[:, None], v[None, :]
            outs += [("y" + kind + "Less", a < b), ("y" + kind + "Greater", a > b),
                     ("y" + kind + "LessOrEqual", a <= b), ("y" + kind + "GreaterOrEqual", a >= b)]
    outs += [("ygt_half", x > 0.5)]
    vis = [oh.make_tensor_value_info(n, f32, list(r.shape)) for n, r in outs]
    ins = [oh.make_tensor_value_info("x", f32, [2, 4, 3]), oh.make_tensor_value_info("ids", i64, [2, 4]),
           oh.make_tensor_value_info("pad", b8, [2, 4]), oh.make_tensor_value_info("fs", f32, [12]),
           oh.make_tensor_value_info("is", i64, [7])]
    g = oh.make_graph(nodes, "forms14", ins, vis, inits)
    save_model("forms_opset14.onnx", oh.make_model(g, opset_imports=[oh.make_opsetid("", 14)]))
    save_f32("forms_x.f32", x)
    write("forms_ids.i64", np.ascontiguousarray(ids, dtype="<i8").tobytes())
    write("forms_pad.u8", np.ascontiguousarray(pad, dtype="u1").tobytes())
    save_f32("forms_fs.f32", fs)
    write("forms_is.i64", np.ascontiguousarray(ist, dtype="<i8").tobytes())
    save_f32("forms_y.f32", np.concatenate([np.asarray(r, np.float32).ravel() for _, r in outs]))
    # BOOL graph outputs: a BOOL input under a second name (a copy), its Not.
    g = oh.make_graph([oh.make_node("Identity", ["pad"], ["same"], name="same"),
                       oh.make_node("Not", ["pad"], ["inverse"], name="inverse")], "bool_io",
                      [oh.make_tensor_value_info("pad", b8, [2, 4])],
                      [oh.make_tensor_value_info("same", b8, [2, 4]), oh.make_tensor_value_info("inverse", b8, [2, 4])])
    save_model("bool_io_opset14.onnx", oh.make_model(g, opset_imports=[oh.make_opsetid("", 14)]))
    # ReduceL2 with its axes as an input (opset 18).
    g = oh.make_graph([oh.make_node("ReduceL2", ["x", "ax"], ["y"], name="l2", keepdims=0)], "l2_18",
                      [oh.make_tensor_value_info("x", f32, [2, 4, 3])], [oh.make_tensor_value_info("y", f32, [2, 3])],
                      [c("ax", [1])])
    write("reduce_l2_opset18.onnx", oh.make_model(g, opset_imports=[oh.make_opsetid("", 18)]).SerializeToString())
    save_f32("reduce_l2_y.f32", np.sqrt((x.astype(np.float64) ** 2).sum(axis=1)))


def bad_models_forms():
    """Refused forms: a comparison of bools, Tile by 0, a DOUBLE
    constant float32 cannot hold, a constant index out of range."""
    f32 = onnx.TensorProto.FLOAT

    def model(nodes, inputs, outputs, inits=(), opset=14):
        g = oh.make_graph(nodes, "bad", inputs, outputs, list(inits))
        return oh.make_model(g, opset_imports=[oh.make_opsetid("", opset)]).SerializeToString()

    def vi(name, shape, t=f32):
        return oh.make_tensor_value_info(name, t, shape)

    write("bad_greater_bool.onnx", model(
        [oh.make_node("Greater", ["p", "p"], ["m"], name="gt"),
         oh.make_node("Where", ["m", "x", "x"], ["y"], name="where")],
        [vi("x", [2, 4]), vi("p", [2, 4], onnx.TensorProto.BOOL)], [vi("y", [2, 4])]))
    write("bad_tile_zero.onnx", model(
        [oh.make_node("Tile", ["x", "reps"], ["y"], name="tile0")], [vi("x", [2, 4])], [vi("y", [2, 4])],
        [onh.from_array(np.array([0, 1], np.int64), "reps")]))
    big = oh.make_tensor("big", onnx.TensorProto.DOUBLE, [], [16777217.0])
    write("bad_double_constant.onnx", model(
        [oh.make_node("Constant", [], ["d"], name="dconst", value=big),
         oh.make_node("Cast", ["d"], ["di"], name="cast", to=onnx.TensorProto.INT64),
         oh.make_node("Cast", ["di"], ["df"], name="castf", to=f32),
         oh.make_node("Add", ["x", "df"], ["y"], name="add")], [vi("x", [2, 4])], [vi("y", [2, 4])]))
    write("bad_gather_index.onnx", model(
        [oh.make_node("Gather", ["x", "five"], ["y"], name="gather5", axis=1)], [vi("x", [2, 4])], [vi("y", [2])],
        [onh.from_array(np.array(5, np.int64), "five")]))


def main():
    if not sys.version_info >= (3, 9):
        sys.exit("needs python 3.9+")
    if len(sys.argv) > 1:  # make_onnx.py NAME...: only these functions (make_transformer_forms, ...)
        for name in sys.argv[1:]:
            globals()[name]()
        return
    make_mlp()
    make_cnn()
    make_ops()
    make_softmax_opset11()
    make_fold_chain()
    make_reduce_opset18()
    make_math_opset17()
    make_reduce_axes()
    make_embedding()
    make_transformers()
    make_slice_split()
    make_mask()
    make_transformer_exports()
    make_transformer_forms()
    bad_models()
    bad_models_math()
    bad_models_forms()
    os.makedirs(CORPUS, exist_ok=True)
    for name in ("mlp_eval", "mlp_train", "cnn_eval", "cnn_train", "cnn_train_opset9", "ops_opset11",
                 "softmax_opset11", "fold_chain", "reduce_opset18", "math_opset17", "embedding_train",
                 "slice_split_opset13", "mask_opset14", "bad_cycle", "bad_attr_ints_in_i",
                 "bad_conv_kernel_too_large", "bad_op_type_paren_null"):
        with open(os.path.join(HERE, name + ".onnx"), "rb") as f:
            data = f.read()
        with open(os.path.join(CORPUS, name + ".onnx"), "wb") as f:
            f.write(data)
    print("wrote the models to", HERE, "and seeds to", os.path.normpath(CORPUS))


if __name__ == "__main__":
    main()
