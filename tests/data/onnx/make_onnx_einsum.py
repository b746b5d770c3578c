#!/usr/bin/python3
"""Writes the Einsum and CumSum test models of tests/unit/test_onnx_transformer.c
and test_onnx_import.c (committed, like make_onnx.py's; run with Debian's
interpreter, which has python3-torch and python3-onnx):

    /usr/bin/python3 tests/data/onnx/make_onnx_einsum.py [NAME...]

Training exports (torch.onnx.TrainingMode.TRAINING, do_constant_folding=False):
  einsum_train.onnx     attention written with torch.einsum (opset 14, input
                        "x" [2,5,16]): "bhid,bhjd->bhij" scores,
                        "...ij,...jd->...id" (ellipsis) weighted values,
                        "bhid->bihd" (one operand), "bid,jd->bij" (a weight),
                        "bid,d->bi" (a vector weight), "bi,bj->bij" (an
                        outer product), "bij->bi" (a sum) and "bid,bid" (implicit
                        output); labels i % 5 (einsum_x.f32, einsum_ref.f32)
  roberta_pos_train.onnx  RoBERTa's position ids from the input ids (opset 14,
                        input "ids" [2,7] int64 with padding 1):
                        mask = ids.ne(1).int(); cumsum(mask, 1).type_as(mask) *
                        mask + 1, token and position embeddings, LayerNorm, a
                        Linear head; labels i % 5 (roberta_ids.i64,
                        roberta_ref.f32)
  The references are PyTorch's logits, the gradient of every parameter
  (sorted by name) and the losses of 3 SGD steps, as make_onnx.py's.
Hand-made (onnx.helper, opset 14; references from NumPy):
  einsum_forms_opset14.onnx  Einsum forms (transpose, sums, batched and plain
                        products, dot and outer products, ellipsis, implicit
                        output, spaces, constant operands) and CumSum of
                        run-time f32, int64 and int32 tensors and of constants
                        (folded), every flag combination, negative axis
                        (einsum_a.f32 [2,3,4], einsum_b.f32 [2,4,5] in;
                        einsum_forms_y.f32 out, every output as float32)
  einsum2_train.onnx    a training export (opset 14, input "x" [2,5,16]) of
                        the forms once refused: three operands
                        ("bid,de,ef->bif"), a diagonal ("bii->bi") and a
                        trace ("bii->b") of a run-time product, a parameter
                        [1,1,8] broadcast against [2,5,8] ("bif,bif->bif"), a
                        contracted label of size 1 ("bij,jf->bif" with j 1),
                        an explicit output that drops the ellipsis
                        ("...f,fk->k"); labels i % 5 (einsum2_x.f32,
                        einsum2_ref.f32: logits, gradients, 3 SGD losses)
  einsum_forms2_opset14.onnx  hand-made forms of the same kinds against NumPy
                        (inputs "a" [2,3,4], "b" [2,4,5] as einsum_a.f32 and
                        einsum_b.f32; einsum_forms2_y.f32 out)
  bad_einsum_output_twice.onnx ("i->ii"), bad_einsum_mismatch.onnx
  ("ij,ij->ij" of [2,3] and [3,3]), bad_cumsum_axis.onnx  refused forms (see
                        test_onnx_import.c)
Run without NAME, it also copies einsum_forms_opset14.onnx and
einsum_forms2_opset14.onnx to the fuzzing seeds (tests/fuzz/corpus/onnx).
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


class EinsumAttention(nn.Module):
    """One attention layer with every product a torch.einsum."""

    def __init__(self, d=16, h=2):
        super().__init__()
        self.h, self.dh = h, d // h
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Parameter(torch.randn(d, d) * 0.25)
        self.gate = nn.Parameter(torch.randn(d) * 0.3)
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, 5)

    def forward(self, x):  # [B,T,d]
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln(x)).view(b, t, 3, self.h, self.dh).permute(2, 0, 3, 1, 4)
        s = torch.einsum("bhid,bhjd->bhij", q, k) * self.dh ** -0.5
        o = torch.einsum("...ij,...jd->...id", s.softmax(-1), v)
        o = torch.einsum("bhid->bihd", o).reshape(b, t, d)
        o = torch.einsum("bid,jd->bij", o, self.proj)
        g = torch.sigmoid(2 * torch.einsum("bid,d->bi", o, self.gate))  # [B,T]
        outer = torch.einsum("bi,bj->bij", g, g)  # [B,T,T]
        o = o + torch.einsum("bij,bjd->bid", outer, o) * (torch.einsum("bij->bi", outer)[..., None] / (t * t))
        norm = torch.einsum("bid,bid", o, o)  # implicit output: every label is used twice, so []
        return self.head(x + o / torch.sqrt(norm / (b * t * d)))


class EinsumForms2(nn.Module):
    """The Einsum forms sgrt once refused, in a model that trains."""

    def __init__(self):
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(16, 8) * 0.3)
        self.w2 = nn.Parameter(torch.randn(8, 8) * 0.3)
        self.w3 = nn.Parameter(torch.randn(8, 5) * 0.3)
        self.s = nn.Parameter(1 + 0.3 * torch.randn(1, 1, 8))
        self.c = nn.Parameter(torch.randn(1, 8) * 0.3)

    def forward(self, x):
        h = torch.einsum("bid,de,ef->bif", x, self.w1, self.w2)  # three operands
        sq = torch.einsum("bif,bjf->bij", h, h)
        diag = torch.einsum("bii->bi", sq)  # a diagonal
        tr = torch.einsum("bii->b", sq)  # a trace
        hs = torch.einsum("bif,bif->bif", h, self.s)  # s [1,1,8] broadcast over b and i
        hc = torch.einsum("bij,jf->bif", h[..., :1], self.c)  # j of size 1, contracted
        bias = torch.einsum("...f,fk->k", h, self.w3)  # the ellipsis summed
        logits = torch.einsum("bif,fk->bik", hs + hc, self.w3)
        return logits + 0.01 * bias + 0.1 * diag[..., None] + 0.01 * tr[:, None, None]


class RobertaPositions(nn.Module):
    """Hugging Face's create_position_ids_from_input_ids (padding_idx 1) with
    token and position embeddings (no padding_idx: ONNX keeps no trace of it,
    and PyTorch zeroes that row's gradient), LayerNorm and a head."""

    def __init__(self):
        super().__init__()
        self.word = nn.Embedding(20, 16)
        self.pos = nn.Embedding(10, 16)
        self.ln = nn.LayerNorm(16)
        self.head = nn.Linear(16, 5)

    def forward(self, ids):
        mask = ids.ne(1).int()
        incremental = (torch.cumsum(mask, dim=1).type_as(mask) + 0) * mask
        pos = incremental.long() + 1
        return self.head(self.ln(self.word(ids) + self.pos(pos)))


def make_einsum_exports():
    torch.manual_seed(31)
    att = EinsumAttention()
    mo.randomize_layer_norms(att)
    x = torch.randn(2, 5, 16)
    mo.export(att, x, "einsum_train.onnx", True, input_names=["x"], output_names=["logits"])
    mo.save_f32("einsum_x.f32", x)
    mo.train_reference_inputs(att, (x,), torch.arange(10) % 5, "einsum_ref.f32")

    torch.manual_seed(34)
    forms = EinsumForms2()
    x2 = torch.randn(2, 5, 16)
    mo.export(forms, x2, "einsum2_train.onnx", True, input_names=["x"], output_names=["logits"])
    mo.save_f32("einsum2_x.f32", x2)
    mo.train_reference_inputs(forms, (x2,), torch.arange(10) % 5, "einsum2_ref.f32")

    torch.manual_seed(32)
    rob = RobertaPositions()
    mo.randomize_layer_norms(rob)
    ids = torch.tensor([[0, 5, 7, 9, 2, 1, 1], [0, 11, 1, 4, 18, 3, 2]])
    mo.export(rob, ids, "roberta_pos_train.onnx", True, input_names=["ids"], output_names=["logits"])
    mo.write("roberta_ids.i64", np.ascontiguousarray(ids.numpy(), dtype="<i8").tobytes())
    mo.train_reference_inputs(rob, (ids,), torch.arange(14) % 5, "roberta_ref.f32")


# (name, equation, operands): operands are graph inputs a [2,3,4], b [2,4,5] or constants.
EINSUM_FORMS = [
    ("e_transpose", "bij->bji", ["a"]),
    ("e_sum", "bij->b", ["a"]),
    ("e_sum_mid", "bij -> bj", ["a"]),
    ("e_identity", "bij->bij", ["a"]),
    ("e_implicit1", "bji", ["a"]),  # implicit output: sorted, "bij"
    ("e_bmm", "bij,bjk->bik", ["a", "b"]),
    ("e_bmm_t", "bij,bjk->bki", ["a", "b"]),
    ("e_ellipsis", "...ij,...jk->...ik", ["a", "b"]),
    ("e_weight", "bij,kj->bik", ["a", "w54"]),
    ("e_vec", "bij,j->bi", ["a", "v4"]),
    ("e_dot", "bij,bij->", ["a", "a"]),
    ("e_outer", "bi,bj->bij", ["r23", "r25"]),
    ("e_sum_both", "bij,bkl->bjl", ["a", "b"]),
    ("e_implicit2", "bij,bjk", ["a", "b"]),  # implicit output "bik"
    ("e_batch_only", "bij,bij->bij", ["a", "a"]),
    ("e_free_const", "ij,kj->ki", ["w34", "w54"]),
]


def make_einsum_forms():
    f32, i64, i32 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64, onnx.TensorProto.INT32
    rng = np.random.default_rng(33)
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    b = rng.standard_normal((2, 4, 5)).astype(np.float32)
    consts = {"w54": rng.standard_normal((5, 4)), "v4": rng.standard_normal(4), "w34": rng.standard_normal((3, 4))}
    consts = {k: v.astype(np.float32) for k, v in consts.items()}
    nodes, outputs, refs = [], [], []
    vals = {"a": a, "b": b, **consts}
    # r23 = a summed over j, r25 = b summed over j: run-time operands of rank 2.
    nodes.append(oh.make_node("Einsum", ["a"], ["r23"], name="einsum_r23", equation="bij->bi"))
    nodes.append(oh.make_node("Einsum", ["b"], ["r25"], name="einsum_r25", equation="bjk->bk"))
    vals["r23"], vals["r25"] = a.sum(2), b.sum(1)
    for name, eq, ops in EINSUM_FORMS:
        nodes.append(oh.make_node("Einsum", ops, [name], name=name, equation=eq))
        ref = np.einsum(eq.replace(" ", ""), *[vals[o].astype(np.float64) for o in ops])
        outputs.append((name, np.shape(ref)))
        refs.append(np.asarray(ref, np.float32).flatten())
    # CumSum: of a (f32 at run time), every flag combination along axes 1 and -1.
    inits = [onh.from_array(v, k) for k, v in consts.items()]
    axis_name = {1: "axis_p1", -1: "axis_m1"}
    for ax, nm in axis_name.items():
        inits.append(onh.from_array(np.array(ax, np.int64), nm))
    inits.append(onh.from_array(np.array([0], np.int32), "axis_0_i32"))
    ids = np.array([[0, 5, 1, 1, 7, 2], [3, 1, 1, 9, 1, 4]], np.int64)
    inits.append(onh.from_array(np.array([[3, -2, 5], [7, 1, -4]], np.int64), "cint"))
    inits.append(onh.from_array(np.array(1, np.int64), "one"))

    def cumsum_ref(x, axis, exclusive, reverse):
        x = np.asarray(x, np.float64)
        if reverse:
            x = np.flip(x, axis)
        y = np.cumsum(x, axis)
        if exclusive:
            y = y - x
        return np.flip(y, axis) if reverse else y

    k = 0
    for ax in (1, -1):
        for exclusive in (0, 1):
            for reverse in (0, 1):
                name = "c_f%d" % k
                nodes.append(oh.make_node("CumSum", ["a", axis_name[ax]], [name], name=name, exclusive=exclusive,
                                          reverse=reverse))
                outputs.append((name, a.shape))
                refs.append(cumsum_ref(a, ax, exclusive, reverse).astype(np.float32).flatten())
                k += 1
    # int64 at run time: RoBERTa's form from "ids" [2,6]; int32 via a Cast.
    nodes += [
        oh.make_node("Equal", ["ids", "one"], ["is_pad"], name="eq_pad"),
        oh.make_node("Not", ["is_pad"], ["keep"], name="not_pad"),
        oh.make_node("Cast", ["keep"], ["keep64"], name="cast_keep64", to=i64),
        oh.make_node("CumSum", ["keep64", "axis_p1"], ["cs64"], name="cumsum_i64"),
        oh.make_node("Cast", ["cs64"], ["c_i64"], name="cast_cs64", to=f32),
        oh.make_node("Cast", ["ids"], ["ids32"], name="cast_ids32", to=i32),
        oh.make_node("CumSum", ["ids32", "axis_0"], ["cs32"], name="cumsum_i32", exclusive=1, reverse=1),
        oh.make_node("Cast", ["cs32"], ["c_i32"], name="cast_cs32", to=f32),
        oh.make_node("CumSum", ["cint", "axis_0_i32"], ["csc"], name="cumsum_const_int", reverse=1),
        oh.make_node("Cast", ["csc"], ["c_cint"], name="cast_csc", to=f32),
        oh.make_node("Constant", [], ["cflt"], name="const_float",  # a Constant, not a weight: folded
                     value=onh.from_array(np.array([1.5, -2.25, 4.0, 0.125], np.float32))),
        oh.make_node("CumSum", ["cflt", "axis_0_i32"], ["c_cflt"], name="cumsum_const_float", exclusive=1),
    ]
    inits.append(onh.from_array(np.array(0, np.int64), "axis_0"))
    keep = (ids != 1).astype(np.int64)
    for name, ref in (("c_i64", np.cumsum(keep, 1)), ("c_i32", cumsum_ref(ids, 0, 1, 1)),
                      ("c_cint", cumsum_ref([[3, -2, 5], [7, 1, -4]], 0, 0, 1)),
                      ("c_cflt", cumsum_ref([1.5, -2.25, 4.0, 0.125], 0, 1, 0))):
        outputs.append((name, np.shape(ref)))
        refs.append(np.asarray(ref, np.float32).flatten())
    vi = oh.make_tensor_value_info
    g = oh.make_graph(nodes, "einsum_forms", [vi("a", f32, [2, 3, 4]), vi("b", f32, [2, 4, 5]), vi("ids", i64, [2, 6])],
                      [vi(n, f32, list(s)) for n, s in outputs], inits)
    mo.save_model("einsum_forms_opset14.onnx", oh.make_model(g, opset_imports=[oh.make_opsetid("", 14)]))
    mo.save_f32("einsum_a.f32", a)
    mo.save_f32("einsum_b.f32", b)
    mo.write("einsum_ids.i64", np.ascontiguousarray(ids, dtype="<i8").tobytes())
    mo.save_f32("einsum_forms_y.f32", np.concatenate(refs))
    print("einsum forms:", ", ".join("%s %d" % (n, int(np.prod(s))) for n, s in outputs))


# (name, equation, operands) of einsum_forms2_opset14.onnx: a [2,3,4], b [2,4,5], r33 [2,3,3] (a times
# a, at run time), x33 [3,3] (summed over b, at run time), a1 [1,3,4] (a's first batch, at run time),
# constants w57 [5,7], v2 [2], c134 [1,3,1].
EINSUM_FORMS2 = [
    ("f_three", "bij,bjk,kl->bil", ["a", "b", "w57"]),
    ("f_four", "bi,bj,b,bk->bijk", ["r23", "r23", "v2", "r23"]),
    ("f_three_sum", "bij,bjk,bkl->b", ["a", "b", "b5"]),
    ("f_diag", "bii->bi", ["r33"]),
    ("f_trace", "bii->b", ["r33"]),
    ("f_trace2", "ii->", ["x33"]),
    ("f_diag_dot", "bii,bi->b", ["r33", "r23"]),
    ("f_diag_outer", "iij,kk->jk", ["r33t", "x33"]),
    ("f_bcast", "bij,bjk->bik", ["a1", "b"]),
    ("f_bcast_contract", "bij,bjk->bik", ["c134", "a1k"]),
    ("f_bcast_both", "bij,bij->bij", ["a", "c134"]),
    ("f_ell_sum", "...ij->ij", ["a"]),
    ("f_ell_sum2", "...ij,...jk->ik", ["a", "b"]),
    ("f_ell_keep1", "...ij->...i", ["a"]),
]


NUMPY_EQ = {"...ij->ij": "bij->ij", "...ij,...jk->ik": "bij,bjk->ik"}


def make_einsum_forms2():
    f32 = onnx.TensorProto.FLOAT
    rng = np.random.default_rng(35)
    a = np.fromfile(os.path.join(mo.HERE, "einsum_a.f32"), dtype="<f4").reshape(2, 3, 4)
    b = np.fromfile(os.path.join(mo.HERE, "einsum_b.f32"), dtype="<f4").reshape(2, 4, 5)
    consts = {"w57": rng.standard_normal((5, 7)), "v2": rng.standard_normal(2), "c134": rng.standard_normal((1, 3, 1)),
              "b5": rng.standard_normal((2, 5, 3))}
    consts = {k: v.astype(np.float32) for k, v in consts.items()}
    vals = {"a": a, "b": b, **consts}
    # Run-time operands made from a and b by Einsum forms einsum_forms_opset14.onnx checks.
    nodes = [
        oh.make_node("Einsum", ["a"], ["r23"], name="einsum_r23", equation="bij->bi"),
        oh.make_node("Einsum", ["a", "a"], ["r33"], name="einsum_r33", equation="bij,bkj->bik"),
        oh.make_node("Einsum", ["r33"], ["x33"], name="einsum_x33", equation="bij->ij"),
        oh.make_node("Einsum", ["r33"], ["r33t"], name="einsum_r33t", equation="bij->ijb"),
        oh.make_node("Slice", ["a", "zero1", "one1", "zero1"], ["a1"], name="slice_a1"),
        oh.make_node("Einsum", ["a1"], ["a1k"], name="einsum_a1k", equation="bij->bji"),
    ]
    inits = [onh.from_array(v, k) for k, v in consts.items()]
    inits += [onh.from_array(np.array([0], np.int64), "zero1"), onh.from_array(np.array([1], np.int64), "one1")]
    vals["r23"], vals["r33"] = a.sum(2), np.einsum("bij,bkj->bik", a, a)
    vals["x33"], vals["r33t"] = vals["r33"].sum(0), np.transpose(vals["r33"], (1, 2, 0))
    vals["a1"] = a[:1]
    vals["a1k"] = np.transpose(vals["a1"], (0, 2, 1))
    outputs, refs = [], []
    for name, eq, ops in EINSUM_FORMS2:
        nodes.append(oh.make_node("Einsum", ops, [name], name=name, equation=eq))
        # NumPy refuses an explicit output without the ellipsis (torch.einsum sums its dims): its
        # reference names the dims instead.
        ref = np.einsum(NUMPY_EQ.get(eq, eq), *[vals[o].astype(np.float64) for o in ops])
        outputs.append((name, np.shape(ref)))
        refs.append(np.asarray(ref, np.float32).flatten())
    vi = oh.make_tensor_value_info
    g = oh.make_graph(nodes, "einsum_forms2", [vi("a", f32, [2, 3, 4]), vi("b", f32, [2, 4, 5])],
                      [vi(n, f32, list(s)) for n, s in outputs], inits)
    mo.save_model("einsum_forms2_opset14.onnx", oh.make_model(g, opset_imports=[oh.make_opsetid("", 14)]))
    mo.save_f32("einsum_forms2_y.f32", np.concatenate(refs))
    print("einsum forms2:", ", ".join("%s %d" % (n, int(np.prod(s))) for n, s in outputs))


def bad_models_einsum():
    f32 = onnx.TensorProto.FLOAT

    def model(nodes, inputs, outputs, inits=()):
        g = oh.make_graph(nodes, "bad", inputs, outputs, list(inits))
        return oh.make_model(g, opset_imports=[oh.make_opsetid("", 14)]).SerializeToString()

    def vi(name, shape, t=f32):
        return oh.make_tensor_value_info(name, t, shape)

    mo.write("bad_einsum_output_twice.onnx", model(
        [oh.make_node("Einsum", ["x"], ["y"], name="twice", equation="i->ii")], [vi("x", [3])],
        [vi("y", [3, 3])]))
    mo.write("bad_einsum_mismatch.onnx", model(
        [oh.make_node("Einsum", ["x", "z"], ["y"], name="mismatch", equation="ij,ij->ij")],
        [vi("x", [2, 3]), vi("z", [3, 3])], [vi("y", [3, 3])]))
    mo.write("bad_cumsum_axis.onnx", model(
        [oh.make_node("CumSum", ["x", "ax"], ["y"], name="cs_axis")],
        [vi("x", [2, 3]), vi("ax", [], onnx.TensorProto.INT64)], [vi("y", [2, 3])]))


def main():
    if len(sys.argv) > 1:
        for name in sys.argv[1:]:
            globals()[name]()
        return
    make_einsum_exports()
    make_einsum_forms()
    make_einsum_forms2()
    bad_models_einsum()
    # Fuzzing seeds with every Einsum and CumSum form (tests/fuzz/corpus/onnx, as make_onnx.py's).
    os.makedirs(mo.CORPUS, exist_ok=True)
    for name in ("einsum_forms_opset14.onnx", "einsum_forms2_opset14.onnx"):
        with open(os.path.join(mo.HERE, name), "rb") as f:
            data = f.read()
        with open(os.path.join(mo.CORPUS, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
