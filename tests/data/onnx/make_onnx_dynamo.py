#!/usr/bin/python3
"""Writes the test models of PyTorch 2's default ONNX exporter
(torch.onnx.export(..., dynamo=True): torch.export, then onnxscript, opset 20,
weights over the size threshold in an external "<file>.data"), the
external-data models and hand-made models of the exporter's ops (committed,
like make_onnx.py's). Run it with the bench
venv (bench/torch_venv.sh makes it, with torch 2.15) after
`pip install onnx onnxscript transformers` in it (Debian's python3-torch is too
old for the dynamo exporter; transformers is for make_hf alone):

    ~/.cache/sgrt-bench/venv/bin/python tests/data/onnx/make_onnx_dynamo.py [NAME...]

(NAME: a generator function, e.g. make_dyn_forms or make_hf; none runs them
all.)

Every dynamo export keeps the exporter's external data file as written (the
"location" in the model is the bare file name "<file>.data"; initializers under
the exporter's 1 KiB threshold stay inline). The nodes' metadata_props (FX node,
module names, stack trace with this machine's paths: about 70% of each file) are
dropped by rewriting the .onnx alone; dyn_sdpa_boolmask.onnx keeps all but the
stack trace, so that one file has them. The value_info metadata that the
importer reads (pkg.torch.export.graph_signature.InputSpec.kind PARAMETER /
BUFFER, pkg.onnxscript.optimizer.folded_from) is kept everywhere. Graph inputs
and outputs keep the exporter's names ("idx", "x", "mask", "input"; outputs
"linear_N"): the C tests name them.

Dynamo exports (opset 20):
  dyn_gpt_noopt.onnx (+ .onnx.data)  make_onnx.GPT (vocab 64, block 16, 2
                        layers, 2 heads, width 32, lm_head tied to wte; wte
                        N(0, 0.1), LayerNorms randomized) in train mode,
                        optimize=False (CastLike, SplitToSequence/SequenceAt,
                        Range, lifted scalars as Constants), input "idx" [2,16]
                        int64 (dyn_gpt_ids.i64; dyn_gpt_ref.f32)
  dyn_gpt_opt.onnx (+ .onnx.data)  the same model and weights with the default
                        optimize=True: transposed weights folded into
                        initializers "val_N" (metadata folded_from), lm_head's
                        folded transposed copy of the tied wte ("val_84"; the
                        Gather reads "lm_head.weight"), wpe's lookup of
                        arange(16) folded into "embedding_1" (folded_from lists
                        wpe.weight; no wpe.weight initializer), the two layers'
                        causal masks folded into one BOOL "eq", lifted scalars
                        as initializers; the same inputs and
                        references as dyn_gpt_noopt.onnx (the C test compares
                        the logits and the 3 losses)
  dyn_llama_noopt.onnx (+ .onnx.data)  a llama-style stack, train mode,
                        optimize=False: nn.Embedding(64, 32), 2 blocks of
                        nn.RMSNorm -> attention (4 query heads, 2 key/value
                        heads repeated by repeat_interleave, RoPE from cos/sin
                        tables [16,8] registered as non-persistent buffers,
                        F.scaled_dot_product_attention(is_causal=True)) ->
                        a hand-written RMSNorm (x * rsqrt(mean(x^2) + eps) * w)
                        -> SwiGLU (32 -> 64 -> 32, no biases); a final
                        nn.RMSNorm, an untied Linear(32, 64, bias=False) head;
                        every RMSNorm weight 1 + 0.3 N(0, 1); input "idx"
                        [2,16] int64 (dyn_llama_x.i64; dyn_llama_ref.f32)
  dyn_encoder_noopt.onnx (+ .onnx.data)  nn.TransformerEncoderLayer(32, 4, 64,
                        dropout 0, batch_first, norm_first, activation "gelu")
                        and a Linear(32, 5) head, train mode, optimize=False
                        (CastLike), input "x" [2,8,32] float
                        (dyn_encoder_x.f32; dyn_encoder_ref.f32, labels i % 5)
  dyn_sdpa_boolmask.onnx (+ .onnx.data)  Linear(16, 48) split into q, k, v
                        (2 heads), F.scaled_dot_product_attention(q, k, v,
                        attn_mask=mask), Linear(16, 16); default optimize, eval
                        mode (there is no dropout: train mode exports the same
                        graph); inputs "x" [2,8,16] float (dyn_sdpa_boolmask_x.f32)
                        and "mask" [2,1,8,8] BOOL (dyn_sdpa_boolmask_mask.u8, one
                        byte each): causal for batch 0; causal and keys 6, 7
                        masked for batch 1, where query row 2 is masked entirely.
                        PyTorch gives 0 attention for that row (the output row
                        is c_proj's bias). The exporter adds Where(mask, 0,
                        finfo(float32).min) to the scores (not -inf), then
                        Softmax, IsNaN -> Where(0): the masked row's scores stay
                        finite and equal, so its softmax is uniform over all 8
                        keys and IsNaN never fires for finite inputs; the
                        graph's output differs from PyTorch's in that row only.
                        dyn_sdpa_boolmask_y.f32: PyTorch's output [2,8,16];
                        dyn_sdpa_boolmask_y_onnx.f32: the graph's (ONNX
                        semantics: PyTorch with that float mask; equal to
                        onnx.reference's) [2,8,16]; dyn_sdpa_boolmask_ref.f32:
                        the train reference of the graph's semantics: the
                        graph written out in PyTorch (SDPABoolMaskMath: scores
                        plus the float mask, softmax, IsNaN -> 0), since
                        PyTorch's fused attention differs from the graph in the
                        backward of the wholly masked row (labels i % 5 over
                        the 16 rows of 16 classes)
  dyn_gpt_sdpa_dynbatch.onnx (+ .onnx.data)  dyn_gpt_noopt.onnx's model and
                        weights with attention written as
                        F.scaled_dot_product_attention(is_causal=True) (no tril
                        buffer), eval mode, default optimize, batch dim dynamic
                        (torch.export.Dim "batch", 1..64): input "idx"
                        ["batch",16] int64; dyn_gpt_sdpa_dynbatch_logits.f32 the
                        eval logits [2,16,64] for dyn_gpt_ids.i64's ids (run
                        with batch 2)
  dyn_gpt_bs_noopt.onnx (+ .onnx.data)  dyn_gpt_noopt.onnx's model and
                        weights with batch AND sequence dynamic
                        (torch.export.Dim "batch" 1..64, "seq" 2..16): input
                        "idx" ["batch","seq"] int64, train mode,
                        optimize=False; the causal mask's slice, the position
                        ids' Range and the reshapes read the sequence length
                        through Shape. dyn_gpt_bs_ids.i64: ids [3,5] and 15
                        targets; dyn_gpt_bs_ref.f32: the train reference at
                        [3,5] (dyn_gpt_ref.f32 is the one at [2,16])
  dyn_gpt_bs_ts.onnx    the same model by the TorchScript exporter (torch
                        2.15, dynamo=False, opset 17, eval mode), dynamic_axes
                        {"idx": {0: "batch", 1: "seq"}}, output "logits";
                        dyn_gpt_bs_logits.f32: its logits [3,5,64] for
                        dyn_gpt_bs_ids.i64's ids
  dyn_gpt_dedup.onnx (+ .onnx.data)  make_onnx.GPT with PyTorch's default
                        LayerNorm init (every weight 1, every bias 0; wte
                        N(0, 0.1)), eval mode, default optimize: the exporter's
                        optimizer merges the equal LayerNorm initializers into
                        one, so the importer must warn that parameters were
                        merged; dyn_gpt_dedup_logits.f32 the eval logits
                        [2,16,64] for dyn_gpt_ids.i64's ids
TorchScript export (torch 2.15, dynamo=False, opset 17, weights inline):
  dyn_mha_ts2.onnx      a pre-norm encoder layer written with
                        nn.MultiheadAttention(32, 4, batch_first) (LayerNorm,
                        self-attention, residual, LayerNorm, Linear 32 -> 64,
                        ReLU, Linear 64 -> 32, residual) and a Linear(32, 5)
                        head (LayerNorms randomized), eval mode; the packed
                        q/k/v projection's unflatten(-1, (3, 32)) becomes
                        Shape/Slice/Concat/Reshape whose slice bounds come from a
                        Mod of int64 Constants (2 mod 3); input "x" [2,8,32]
                        (dyn_mha_ts2_x.f32), output "y" [2,8,5]
                        (dyn_mha_ts2_y.f32)
External data (nn.Linear(4, 3), dynamo=True, default optimize: one Gemm, input
"input" [2,4], output "linear" [2,3], initializers "weight" [3,4] (48 bytes at
offset 0) and "bias" [3] (12 bytes at offset 48); moved by
onnx.external_data_helper, size_threshold 0, all in one file; node metadata
dropped):
  dyn_linear_inline.onnx    the export, every initializer inline
  dyn_linear_ext.onnx (+ dyn_linear_ext.onnx.data)  the same with every
                        initializer external (the same output as the inline one)
  dyn_linear_x.f32, dyn_linear_y.f32  input [2,4] and output [2,3]
  bad_ext.data          the weights as dyn_linear_ext.onnx.data has them, for:
  bad_ext_absolute.onnx     "weight"'s location "/etc/passwd" (each bad model
                            spoils "weight" alone)
  bad_ext_dotdot.onnx       location "../onnx/bad_ext.data" (climbs out with
                            "..", although it names this folder's file)
  bad_ext_missing.onnx      location "bad_ext_nonexistent.data" (no such file)
  bad_ext_past_end.onnx     offset 4096, past the end of bad_ext.data
  bad_ext_length.onnx       length 4 bytes short of the tensor's
  bad_ext_checksum.onnx     an extra key "checksum": the (correct) SHA-1 of the
                            tensor's bytes, 40 hex digits
  bad_ext_key.onnx          an extra unknown key "basepath"
  bad_ext_no_location.onnx  external_data with offset and length, no location
  bad_ext_both.onnx         data_location EXTERNAL and raw_data too
  ("bias" is external in bad_ext.data and valid in every bad model)
Hand-made with onnx.helper (make_dyn_forms; opset 20, ir_version 10, every
constant a Constant node, no initializers; checked by onnx.checker; references
from NumPy, equal to onnx.reference's): the ops of the dynamo exporter's
optimize=False graphs, each at run time and folded from Constants:
  dyn_forms.onnx        inputs "x" [2,6] float (dyn_forms_x.f32: NaN, +inf,
                        -inf, 0.0, -0.0, the subnormal 1e-40 and ordinary
                        numbers), "i" [2,6] int64 (dyn_forms_i.i64: negatives,
                        123456789 and 2^40, not all exact in float32), "z"
                        [2,6] float (dyn_forms_z.f32, ordinary finite numbers);
                        every output FLOAT (int and BOOL results Cast at the
                        end), dyn_forms_y.f32 holds them flattened in this
                        order (float offset):
                          isnan_x [2,6] (0)   IsNaN(x) at run time
                          isnan_c [5] (12)    IsNaN of a Constant [NaN, inf,
                                              -inf, 0, 1] (folded)
                          mod_py [6] (17)     Mod fmod=0 of int64 Constants
                                              [7,-7,7,-7,0,5] by [3,3,-3,-3,4,-2]
                                              (Python %: the divisor's sign)
                          mod_c [6] (23)      the same with fmod=1 (C fmod: the
                                              dividend's sign)
                          mod_f [4] (29)      Mod fmod=1 of float Constants
                                              [5.5,-5.5,5.5,-5.5] by [2,2,-2,-2]
                          castlike_xi [2,6] (33)  CastLike(i, x) at run time
                          castlike_c [3] (45) CastLike(Constant int64 [1,2,3], x)
                          seq_a [2,4] (48)    SequenceAt(SplitToSequence(z,
                                              split scalar 4, axis 1), 0)
                          seq_b [2,2] (56)    the same sequence at -1 (the short
                                              last part)
                          seq_c [1,6] (60)    SplitToSequence(z, [1,1], axis 0)
                                              at 1
                          seq_d [2] (66)      SplitToSequence(z, axis 1,
                                              keepdims 0, no split) at 3
                          seq_cast [2] (68)   SplitToSequence of a float Constant
                                              [6], split scalar 4, at 1 (folded)
                        (70 floats in all)
  Refused (opset 20, the same style; the status sgrt's import must give):
  bad_mod_runtime.onnx      Mod fmod=0 of the run-time int64 input "i" [2,6] and
                            a Constant: SG_ERR_UNSUPPORTED (input "computed at
                            run time"; Mod is folded only for constants)
  bad_mod_float_fmod0.onnx  Mod fmod=0 of two float Constants (ONNX requires
                            fmod=1 for floats): SG_ERR_ATTRIBUTE
  bad_sequence_at_runtime.onnx  SequenceAt whose position is the graph's int64
                            input "pos" []: SG_ERR_UNSUPPORTED
  bad_sequence_use.onnx     a SplitToSequence output read by ConcatFromSequence:
                            SG_ERR_UNSUPPORTED (ConcatFromSequence is not a
                            supported op)
Hand-made with onnx.helper (make_dyn_forms2; the same style): And / Or / Xor,
Sin / Cos, GatherND and GatherElements, the ops that Hugging Face exports hold:
  dyn_forms2.onnx       inputs "a" [2,3] BOOL (dyn_forms2_a.u8), "b" [3] BOOL
                        (dyn_forms2_b.u8, broadcast against a), "x" [2,3,4]
                        float (dyn_forms2_x.f32: 0.5 i - 5.25), "ids" [2,5]
                        int64 (dyn_forms2_ids.i64, in 0..6); every output
                        FLOAT, dyn_forms2_y.f32 holds them flattened in this
                        order (float offset):
                          and_ab [2,3] (0)    And(a, b) at run time
                          or_ab [2,3] (6)     Or(a, b) at run time
                          xor_ab [2,3] (12)   Xor(a, b) at run time
                          and_c [4] (18)      And of two BOOL Constants (folded)
                          or_ac [2,3] (22)    Or(a, a BOOL Constant [2,3])
                          sin_c [6] (28)      Sin of a float Constant [0, -0,
                                              1e-3, 3.14159, -100, 1e4] (folded)
                          cos_c [6] (34)      Cos of the same (folded)
                          gnd_x [3,4] (40)    GatherND(x, Constant [[0,1],[1,2],
                                              [1,0]]): rows of the run-time x
                          gnd_x3 [2,1] (52)   GatherND(x, Constant [2,1,3] of
                                              whole tuples [0,2,3], [-1,0,-1])
                          gnd_c [3] (54)      GatherND of an int64 Constant
                                              [2,3] (2^40 in it) by [[1,2],
                                              [0,-1],[1,0]] (folded)
                          ge_c [2,2] (57)     GatherElements(float Constant
                                              [2,3], Constant [[2,0],[-1,1]],
                                              axis 1) (folded)
                          ge_uniform [2,5] (61)  GatherElements(Expand(int64
                                              Constant zeros [1,7], [2,7]),
                                              ids, axis 1): zeros (RoBERTa's
                                              token_type_ids form)
                        (71 floats in all). sin_c and cos_c are NumPy's float32
                        np.sin / np.cos of the float32 values; np.sin(3.14159f)
                        (2.5351815e-06) is 1 ulp below the float64 sine rounded
                        to float32 (2.5351817e-06), which sgrt gives; every
                        other value equals the float64-rounded one (the C test
                        allows 1 ulp there). -0 stays -0 (sin_c[1]).
  Refused (opset 20; the status sgrt's import must give):
  bad_gathernd_runtime_idx.onnx  GatherND(x [2,3,4], indices the graph's int64
                            input "idx" [3,2]): SG_ERR_UNSUPPORTED (indices
                            "computed at run time")
  bad_gathernd_batch_dims.onnx   GatherND(x [2,3,4], Constant [[1],[2]],
                            batch_dims 1): SG_ERR_UNSUPPORTED
  bad_gather_elements_runtime.onnx  GatherElements of a float Constant [2,3] of
                            unequal values by the int64 input "idx" [2,2]:
                            SG_ERR_UNSUPPORTED
  sin_runtime.onnx          Sin of the float input "x" [2,3] (the sin op)
  bad_and_float.onnx        And of the float inputs "x", "z" [2,3]: SG_ERR_DTYPE
Hugging Face transformers 5.25 (make_hf; tiny configs, random weights (seeded),
eager attention, wrapped (HFLogits, parameters "m.*") to return the logits
alone, use_cache off): inputs "input_ids" [2,8] int64 (in 2..63) and
"attention_mask" [2,8] int64 (ones, mask[1, 6:] = 0: right padding of row 1),
output [2,8,64] float; each model's inputs in hf_<model>_ids.i64 and
hf_<model>_mask.i64 (16 int64 each):
  hf_llama_noopt.onnx (+ .onnx.data)  LlamaForCausalLM (vocab 64, hidden 32, 2
                        layers, 4 heads, 2 key/value heads, intermediate 64,
                        max positions 32; lm_head untied; every RMSNorm weight
                        1 + 0.3 N(0, 1)), train mode (no dropout), dynamo,
                        optimize=False (And of the masks at run time, GatherND
                        of constant indices, Sin/Cos of the folded RoPE table);
                        output "linear_14"; 21 parameters, 22688 elements, named
                        as PyTorch's. hf_llama_ref.f32: train_reference_inputs
                        (logits [2,8,64] = 1024 floats, the 21 gradients sorted
                        by name (22688), 3 losses: 23715 floats), labels i % 5
                        over the 16 rows of 64 classes
  hf_roberta_dyn.onnx (+ .onnx.data)  RobertaForMaskedLM (vocab 64, hidden 32, 2
                        layers, 2 heads, intermediate 64, max positions 40, pad
                        id 1; decoder tied to the word embeddings), eval mode,
                        dynamo, default optimize; no token_type_ids input, so
                        the zero token_type_ids buffer is Expanded and read by
                        GatherElements at the run-time position ids; output
                        "linear_13". PyTorch: 42 parameters, 21728 elements;
                        the optimizer merges equal ones (zero biases, LayerNorm
                        1 / 0) and folds transposed weights ("val_N"): sgrt has
                        19 parameters, 20928 elements and warns.
                        hf_roberta_logits.f32: eval logits [2,8,64]
  hf_gpt2_ts.onnx       GPT2LMHeadModel (vocab 64, n_embd 32, 2 layers, 2
                        heads, n_positions 32; lm_head tied to wte), eval mode,
                        TorchScript exporter (dynamo=False, opset 17, weights
                        inline; And of the masks at run time); output "logits".
                        PyTorch: 28 parameters, 28544 elements; the export
                        holds the tied lm_head as a transposed copy of wte
                        ("onnx::MatMul_523" [32,64]): sgrt has 29 parameters,
                        30592 elements. hf_gpt2_logits.f32: eval logits [2,8,64]
Reference data (raw little-endian, C order): *.f32 float32; *.i64 int64;
*.u8 one byte per BOOL. dyn_gpt_ids.i64 and dyn_llama_x.i64 hold the ids [2,16]
then the targets [32]. The *_ref.f32 files are make_onnx.train_reference's:
PyTorch's logits (train mode), the gradient of every parameter (sorted by name;
the tied wte/lm_head weight once, as "wte.weight"), then the losses of 3 steps of
SGD (lr 0.1, momentum 0.9) on cross_entropy(logits as [rows, classes], labels).
"""
import copy
import hashlib
import math
import os
import sys

import numpy as np
import onnx
import onnx.external_data_helper as oedh
import onnx.helper as oh
import onnx.numpy_helper as onh
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_onnx as mo  # noqa: E402

HERE = mo.HERE


def write_i64(name, *ts):
    mo.write(name, np.ascontiguousarray(torch.cat([t.flatten() for t in ts]).numpy(), dtype="<i8").tobytes())


def randomize_norms(model):
    """make_onnx.randomize_layer_norms, and RMSNorm weights (nn.RMSNorm and
    HandRMSNorm) 1 + 0.3 N(0, 1): no two norm weights equal."""
    mo.randomize_layer_norms(model)
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, (nn.RMSNorm, HandRMSNorm)):
                mod.weight.copy_(1 + 0.3 * torch.randn(mod.weight.shape))


def strip_node_metadata(path, keep=False):
    """Drop the nodes' metadata_props (the exporter's FX node, module names and
    stack trace, which holds this machine's paths; keep=True drops the stack
    trace only); rewrites the .onnx only, never its .data."""
    m = onnx.load(path, load_external_data=False)

    def strip(graph):
        for n in graph.node:
            props = [p for p in n.metadata_props if keep and p.key != "pkg.torch.onnx.stack_trace"]
            del n.metadata_props[:]
            n.metadata_props.extend(props)
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    strip(a.g)
                for g in a.graphs:
                    strip(g)
    strip(m.graph)
    mo.write(os.path.basename(path), m.SerializeToString())


def dynamo_export(model, args, name, train, keep_node_metadata=False, **kw):
    """torch.onnx.export(dynamo=True) of a copy of model into tests/data/onnx,
    its external data kept; checked by onnx.checker (path form)."""
    m = copy.deepcopy(model)
    m.train(train)
    path = os.path.join(HERE, name)
    for p in (path, path + ".data"):
        if os.path.exists(p):
            os.remove(p)
    torch.manual_seed(0)
    torch.onnx.export(m, args, path, dynamo=True, external_data=True, verbose=False, **kw)
    strip_node_metadata(path, keep_node_metadata)
    onnx.checker.check_model(path)
    return path


def describe(path):
    m = onnx.load(path, load_external_data=False)

    def vi(v):
        t = v.type.tensor_type
        return "%s %s %s" % (v.name, onnx.TensorProto.DataType.Name(t.elem_type),
                             [d.dim_param or d.dim_value for d in t.shape.dim])
    ext = sum(1 for t in m.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL)
    print("%s: inputs %s; outputs %s; %d initializers (%d external); ops %s" % (
        os.path.basename(path), [vi(v) for v in m.graph.input], [vi(v) for v in m.graph.output],
        len(m.graph.initializer), ext, " ".join(sorted({n.op_type for n in m.graph.node}))))


def param_count(model):
    ps = list(model.parameters())
    return "%d parameters, %d elements" % (len(ps), sum(p.numel() for p in ps))


# ----------------------------------------------------------------------------- models


class SDPACausal(nn.Module):
    """make_onnx.CausalSelfAttention with F.scaled_dot_product_attention(is_causal=True)."""

    def __init__(self, c_attn, c_proj, n_head):
        super().__init__()
        self.c_attn, self.c_proj, self.n_head = c_attn, c_proj, n_head

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class SDPABoolMask(nn.Module):
    """One attention layer masked by a BOOL input (True: attend)."""

    def __init__(self, d=16, h=2):
        super().__init__()
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.h = h

    def forward(self, x, mask):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.h, C // self.h).transpose(1, 2)
        k = k.view(B, T, self.h, C // self.h).transpose(1, 2)
        v = v.view(B, T, self.h, C // self.h).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class SDPABoolMaskMath(SDPABoolMask):
    """SDPABoolMask's exported graph written out in PyTorch: scores plus the
    float mask, softmax, NaN rows zeroed (IsNaN, Where). Its gradient is the
    graph's: PyTorch's fused scaled_dot_product_attention differs from it in
    the backward of a row whose mask is float32's lowest throughout."""

    def forward(self, x, mask):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.h, C // self.h).transpose(1, 2)
        k = k.view(B, T, self.h, C // self.h).transpose(1, 2)
        v = v.view(B, T, self.h, C // self.h).transpose(1, 2)
        p = torch.softmax((q @ k.transpose(-2, -1)) / math.sqrt(C // self.h) + mask, dim=-1)
        p = torch.where(torch.isnan(p), 0.0, p)
        return self.c_proj((p @ v).transpose(1, 2).contiguous().view(B, T, C))


class HandRMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(T, hd, base=10000.0):
    inv = 1.0 / (base ** (torch.arange(0, hd, 2).float() / hd))
    f = torch.outer(torch.arange(T).float(), inv)
    emb = torch.cat([f, f], -1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class LlamaAttn(nn.Module):
    """RoPE (cos/sin buffers), grouped-query attention by repeat_interleave, SDPA."""

    def __init__(self, d=32, nh=4, nkv=2, T=16):
        super().__init__()
        self.nh, self.nkv, self.hd = nh, nkv, d // nh
        self.q = nn.Linear(d, nh * self.hd, bias=False)
        self.k = nn.Linear(d, nkv * self.hd, bias=False)
        self.v = nn.Linear(d, nkv * self.hd, bias=False)
        self.o = nn.Linear(nh * self.hd, d, bias=False)
        cos, sin = rope_tables(T, self.hd)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, x):
        B, T, _ = x.shape
        q = self.q(x).view(B, T, self.nh, self.hd).transpose(1, 2)
        k = self.k(x).view(B, T, self.nkv, self.hd).transpose(1, 2)
        v = self.v(x).view(B, T, self.nkv, self.hd).transpose(1, 2)
        cos, sin = self.cos[:T], self.sin[:T]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.nh // self.nkv
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(y.transpose(1, 2).reshape(B, T, -1))


class SwiGLU(nn.Module):
    def __init__(self, d=32, h=64):
        super().__init__()
        self.w1 = nn.Linear(d, h, bias=False)
        self.w3 = nn.Linear(d, h, bias=False)
        self.w2 = nn.Linear(h, d, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class LlamaBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.n1 = nn.RMSNorm(32, eps=1e-6)
        self.attn = LlamaAttn()
        self.n2 = HandRMSNorm(32)
        self.mlp = SwiGLU()

    def forward(self, x):
        x = x + self.attn(self.n1(x))
        return x + self.mlp(self.n2(x))


class Llama(nn.Module):
    def __init__(self, vocab=64, n_layer=2):
        super().__init__()
        self.tok = nn.Embedding(vocab, 32)
        self.blocks = nn.ModuleList([LlamaBlock() for _ in range(n_layer)])
        self.norm = nn.RMSNorm(32, eps=1e-6)
        self.head = nn.Linear(32, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx)
        for b in self.blocks:
            x = b(x)
        return self.head(self.norm(x))


class EncoderHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, dropout=0.0, batch_first=True,
                                              norm_first=True, activation="gelu")
        self.head = nn.Linear(32, 5)

    def forward(self, x):
        return self.head(self.enc(x))


class MHABlock(nn.Module):
    """A pre-norm encoder layer around nn.MultiheadAttention, and a head."""

    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(32)
        self.mha = nn.MultiheadAttention(32, 4, dropout=0.0, batch_first=True)
        self.ln2 = nn.LayerNorm(32)
        self.ff = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 32))
        self.head = nn.Linear(32, 5)

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.mha(h, h, h, need_weights=False)[0]
        return self.head(x + self.ff(self.ln2(x)))


# ----------------------------------------------------------------------------- exports


def gpt_and_ids(randomize=True):
    torch.manual_seed(21)
    gpt = mo.GPT()
    with torch.no_grad():
        gpt.wte.weight.normal_(0, 0.1)  # tied to lm_head: logits of order 1
    if randomize:
        randomize_norms(gpt)
    g = torch.Generator().manual_seed(121)  # the same ids with and without randomize
    ids = torch.randint(0, 64, (2, 16), generator=g)
    targets = torch.randint(0, 64, (32,), generator=g)
    return gpt, ids, targets


def make_dyn_gpt():
    gpt, ids, targets = gpt_and_ids()
    print("GPT:", param_count(gpt))
    describe(dynamo_export(gpt, (ids,), "dyn_gpt_noopt.onnx", True, optimize=False))
    describe(dynamo_export(gpt, (ids,), "dyn_gpt_opt.onnx", True))
    write_i64("dyn_gpt_ids.i64", ids, targets)
    mo.train_reference(gpt, ids, targets, "dyn_gpt_ref.f32")

    sdpa = copy.deepcopy(gpt)
    for b in sdpa.h:
        b.attn = SDPACausal(b.attn.c_attn, b.attn.c_proj, b.attn.n_head)
    print("GPT (SDPA):", param_count(sdpa))
    batch = torch.export.Dim("batch", min=1, max=64)
    describe(dynamo_export(sdpa, (ids,), "dyn_gpt_sdpa_dynbatch.onnx", False,
                           dynamic_shapes={"idx": {0: batch}}))
    sdpa.eval()
    with torch.no_grad():
        y = sdpa(ids)
        y_plain = gpt.eval()(ids)
    print("  SDPA vs written-out attention: max |diff| %.3g" % float((y - y_plain).abs().max()))
    mo.save_f32("dyn_gpt_sdpa_dynbatch_logits.f32", y)


def make_dyn_gpt_bs():
    """Dynamic batch AND sequence: two symbols, which sg_onnx_params.dims sizes by name."""
    gpt, ids, targets = gpt_and_ids()
    batch = torch.export.Dim("batch", min=1, max=64)
    seq = torch.export.Dim("seq", min=2, max=16)
    describe(dynamo_export(gpt, (ids,), "dyn_gpt_bs_noopt.onnx", True, optimize=False,
                           dynamic_shapes={"idx": {0: batch, 1: seq}}))
    m = copy.deepcopy(gpt).eval()
    path = os.path.join(HERE, "dyn_gpt_bs_ts.onnx")
    torch.onnx.export(m, (ids,), path, dynamo=False, opset_version=17, input_names=["idx"],
                      output_names=["logits"], dynamic_axes={"idx": {0: "batch", 1: "seq"}})
    onnx.checker.check_model(path)
    describe(path)
    g = torch.Generator().manual_seed(35)
    ids35 = torch.randint(0, 64, (3, 5), generator=g)
    targets35 = torch.randint(0, 64, (15,), generator=g)
    write_i64("dyn_gpt_bs_ids.i64", ids35, targets35)
    mo.train_reference(gpt, ids35, targets35, "dyn_gpt_bs_ref.f32")
    with torch.no_grad():
        mo.save_f32("dyn_gpt_bs_logits.f32", m(ids35))


def make_dyn_gpt_dedup():
    gpt, ids, _ = gpt_and_ids(randomize=False)
    assert torch.equal(ids, gpt_and_ids()[1])  # dyn_gpt_ids.i64's
    print("GPT (default LayerNorms):", param_count(gpt))
    describe(dynamo_export(gpt, (ids,), "dyn_gpt_dedup.onnx", False))
    with torch.no_grad():
        mo.save_f32("dyn_gpt_dedup_logits.f32", gpt.eval()(ids))


def make_dyn_llama():
    torch.manual_seed(24)
    model = Llama()
    randomize_norms(model)
    ids = torch.randint(0, 64, (2, 16))
    targets = torch.randint(0, 64, (32,))
    print("Llama:", param_count(model))
    describe(dynamo_export(model, (ids,), "dyn_llama_noopt.onnx", True, optimize=False))
    write_i64("dyn_llama_x.i64", ids, targets)
    mo.train_reference(model, ids, targets, "dyn_llama_ref.f32")


def make_dyn_encoder():
    torch.manual_seed(25)
    model = EncoderHead()
    randomize_norms(model)
    x = torch.randn(2, 8, 32)
    print("Encoder:", param_count(model))
    describe(dynamo_export(model, (x,), "dyn_encoder_noopt.onnx", True, optimize=False))
    mo.save_f32("dyn_encoder_x.f32", x)
    mo.train_reference(model, x, torch.arange(16) % 5, "dyn_encoder_ref.f32")


def make_dyn_sdpa_boolmask():
    torch.manual_seed(26)
    model = SDPABoolMask()
    x = torch.randn(2, 8, 16)
    causal = torch.tril(torch.ones(8, 8, dtype=torch.bool))
    mask = causal.repeat(2, 1, 1, 1)  # [2,1,8,8]
    mask[1, 0, :, 6:] = False
    mask[1, 0, 2, :] = False  # query row 2 of batch 1 attends to nothing
    print("SDPA bool mask:", param_count(model))
    describe(dynamo_export(model, (x, mask), "dyn_sdpa_boolmask.onnx", False, keep_node_metadata=True))
    model.eval()
    with torch.no_grad():
        y = model(x, mask)
    row = y[1, 2]
    print("  fully masked row: output - c_proj.bias max |diff| %.3g (nan: %s)" % (
        float((row - model.c_proj.bias.detach()).abs().max()), bool(torch.isnan(y).any())))
    mo.save_f32("dyn_sdpa_boolmask_x.f32", x)
    mo.write("dyn_sdpa_boolmask_mask.u8", np.ascontiguousarray(mask.numpy(), dtype="u1").tobytes())
    mo.save_f32("dyn_sdpa_boolmask_y.f32", y)
    # The export adds Where(mask, 0, finfo(float32).min) to the scores, not -inf: the
    # masked row's scores stay finite and equal, its softmax is uniform, and IsNaN
    # never fires. The same float mask in PyTorch gives the graph's semantics.
    fmask = torch.zeros(mask.shape).masked_fill(~mask, torch.finfo(torch.float32).min)
    with torch.no_grad():
        y_onnx = model(x, fmask)
    print("  float-mask (ONNX) vs bool-mask (PyTorch) output: max |diff| %.3g, rows differing: %s" % (
        float((y_onnx - y).abs().max()), ((y_onnx - y).abs().amax(-1) > 1e-6).nonzero().tolist()))
    mo.save_f32("dyn_sdpa_boolmask_y_onnx.f32", y_onnx)
    graph = SDPABoolMaskMath()
    graph.load_state_dict(model.state_dict())
    with torch.no_grad():
        print("  the graph written out vs PyTorch with the float mask: max |diff| %.3g" % float(
            (graph(x, fmask) - y_onnx).abs().max()))
    mo.train_reference_inputs(graph, (x, fmask), torch.arange(16) % 5, "dyn_sdpa_boolmask_ref.f32")


def make_dyn_mha_ts2():
    torch.manual_seed(27)
    model = MHABlock()
    mo.randomize_layer_norms(model)
    model.eval()
    x = torch.randn(2, 8, 32)
    print("MHA block (TorchScript):", param_count(model))
    path = os.path.join(HERE, "dyn_mha_ts2.onnx")
    torch.onnx.export(copy.deepcopy(model), (x,), path, dynamo=False, opset_version=17, input_names=["x"],
                      output_names=["y"])
    onnx.checker.check_model(path)
    describe(path)
    with torch.no_grad():
        mo.save_f32("dyn_mha_ts2_y.f32", model(x))
    mo.save_f32("dyn_mha_ts2_x.f32", x)


def make_ext_data():
    torch.manual_seed(28)
    model = nn.Linear(4, 3)
    x = torch.randn(2, 4)
    tmp = os.path.join(HERE, "dyn_linear_tmp.onnx")
    torch.manual_seed(0)
    torch.onnx.export(model.eval(), (x,), tmp, dynamo=True, external_data=True, verbose=False)
    m = onnx.load(tmp)  # external data (if any) read in
    for p in (tmp, tmp + ".data"):
        if os.path.exists(p):
            os.remove(p)
    for n in m.graph.node:
        del n.metadata_props[:]
    mo.save_model("dyn_linear_inline.onnx", m)
    with torch.no_grad():
        mo.save_f32("dyn_linear_y.f32", model(x))
    mo.save_f32("dyn_linear_x.f32", x)
    describe(os.path.join(HERE, "dyn_linear_inline.onnx"))

    def externalize(location):
        e = copy.deepcopy(m)
        oedh.convert_model_to_external_data(e, all_tensors_to_one_file=True, location=location, size_threshold=0)
        return e
    good = externalize("dyn_linear_ext.onnx.data")
    path = os.path.join(HERE, "dyn_linear_ext.onnx")
    if os.path.exists(path + ".data"):
        os.remove(path + ".data")  # onnx appends to an existing data file
    onnx.save_model(good, path)  # writes dyn_linear_ext.onnx.data next to it
    onnx.checker.check_model(path)
    describe(path)
    with open(path + ".data", "rb") as f:
        mo.write("bad_ext.data", f.read())

    base = onnx.load(path, load_external_data=False)
    for t in base.graph.initializer:
        for kv in t.external_data:
            if kv.key == "location":
                kv.value = "bad_ext.data"
    first = base.graph.initializer[0]
    raw = onh.to_array(onnx.load(path).graph.initializer[0]).astype("<f4").tobytes()

    def edited(name, edit):
        b = copy.deepcopy(base)
        edit(b.graph.initializer[0])
        mo.write(name, b.SerializeToString())

    def set_key(key, value):
        def f(t):
            for kv in t.external_data:
                if kv.key == key:
                    kv.value = value
                    return
            t.external_data.add(key=key, value=value)
        return f

    def drop_location(t):
        keep = [kv for kv in t.external_data if kv.key != "location"]
        del t.external_data[:]
        t.external_data.extend(keep)

    def both(t):
        t.raw_data = raw

    nbytes = len(raw)
    print("external data: %s %s, %d bytes, in bad_ext.data (%d bytes)" % (
        first.name, list(first.dims), nbytes, os.path.getsize(os.path.join(HERE, "bad_ext.data"))))
    edited("bad_ext_absolute.onnx", set_key("location", "/etc/passwd"))
    edited("bad_ext_dotdot.onnx", set_key("location", "../onnx/bad_ext.data"))
    edited("bad_ext_missing.onnx", set_key("location", "bad_ext_nonexistent.data"))
    edited("bad_ext_past_end.onnx", set_key("offset", "4096"))
    edited("bad_ext_length.onnx", set_key("length", str(nbytes - 4)))
    edited("bad_ext_checksum.onnx", set_key("checksum", hashlib.sha1(raw).hexdigest()))
    edited("bad_ext_key.onnx", set_key("basepath", "."))
    edited("bad_ext_no_location.onnx", drop_location)
    edited("bad_ext_both.onnx", both)


def make_dyn_forms():
    """dyn_forms.onnx: the ops that the dynamo exporter's optimize=False graphs
    hold (IsNaN, Mod, CastLike, SplitToSequence/SequenceAt), hand-made with
    onnx.helper, each at run time and folded from Constant nodes; every output
    cast to FLOAT. References from NumPy."""
    f32, i64 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64
    nan, inf = np.float32(np.nan), np.float32(np.inf)
    x = np.array([[nan, inf, -inf, 0.0, -0.0, 1e-40],
                  [1.5, -2.25, 3.0, nan, 7.0, -0.5]], np.float32)
    i = np.array([[-3, 0, 5, -1, 2, 9],
                  [100, -100, 7, 123456789, -123456789, 1 << 40]], np.int64)
    z = np.array([[0.5, -1.5, 2.25, -3.0, 4.75, -5.5],
                  [6.0, -7.25, 8.5, -9.75, 10.0, -11.125]], np.float32)
    c_nan = np.array([nan, inf, -inf, 0.0, 1.0], np.float32)
    ma = np.array([7, -7, 7, -7, 0, 5], np.int64)
    mb = np.array([3, 3, -3, -3, 4, -2], np.int64)
    fa = np.array([5.5, -5.5, 5.5, -5.5], np.float32)
    fb = np.array([2, 2, -2, -2], np.float32)
    c123 = np.array([1, 2, 3], np.int64)
    c6 = np.array([0.5, -1.25, 2.0, 3.75, -4.5, 6.125], np.float32)

    def const(name, value):  # a Constant node, not a weight: folded at import
        return oh.make_node("Constant", [], [name], name="const_" + name, value=onh.from_array(value))

    def cast(src, dst):
        return oh.make_node("Cast", [src], [dst], name="cast_" + dst, to=f32)

    nodes = [
        const("c_nan", c_nan), const("ma", ma), const("mb", mb), const("fa", fa), const("fb", fb),
        const("c123", c123), const("c6", c6), const("four", np.array(4, np.int64)),
        const("ones2", np.array([1, 1], np.int64)), const("p0", np.array(0, np.int64)),
        const("p1", np.array(1, np.int64)), const("pm1", np.array(-1, np.int64)),
        const("p3", np.array(3, np.int64)),
        oh.make_node("IsNaN", ["x"], ["isnan_x_b"], name="isnan_x"), cast("isnan_x_b", "isnan_x"),
        oh.make_node("IsNaN", ["c_nan"], ["isnan_c_b"], name="isnan_c"), cast("isnan_c_b", "isnan_c"),
        oh.make_node("Mod", ["ma", "mb"], ["mod_py_i"], name="mod_py", fmod=0), cast("mod_py_i", "mod_py"),
        oh.make_node("Mod", ["ma", "mb"], ["mod_c_i"], name="mod_c", fmod=1), cast("mod_c_i", "mod_c"),
        oh.make_node("Mod", ["fa", "fb"], ["mod_f"], name="mod_f", fmod=1),
        oh.make_node("CastLike", ["i", "x"], ["castlike_xi"], name="castlike_xi"),
        oh.make_node("CastLike", ["c123", "x"], ["castlike_c"], name="castlike_c"),
        oh.make_node("SplitToSequence", ["z", "four"], ["seq_z4"], name="split_z4", axis=1),
        oh.make_node("SequenceAt", ["seq_z4", "p0"], ["seq_a"], name="seq_at_a"),
        oh.make_node("SequenceAt", ["seq_z4", "pm1"], ["seq_b"], name="seq_at_b"),
        oh.make_node("SplitToSequence", ["z", "ones2"], ["seq_z11"], name="split_z11", axis=0),
        oh.make_node("SequenceAt", ["seq_z11", "p1"], ["seq_c"], name="seq_at_c"),
        oh.make_node("SplitToSequence", ["z"], ["seq_z1"], name="split_z1", axis=1, keepdims=0),
        oh.make_node("SequenceAt", ["seq_z1", "p3"], ["seq_d"], name="seq_at_d"),
        oh.make_node("SplitToSequence", ["c6", "four"], ["seq_c6"], name="split_c6", axis=0),
        oh.make_node("SequenceAt", ["seq_c6", "p1"], ["seq_cast"], name="seq_at_cast"),
    ]
    refs = [
        ("isnan_x", np.isnan(x)),
        ("isnan_c", np.isnan(c_nan)),
        ("mod_py", np.mod(ma, mb)),            # Python %: the divisor's sign
        ("mod_c", np.fmod(ma, mb)),            # C fmod: the dividend's sign
        ("mod_f", np.fmod(fa, fb)),
        ("castlike_xi", i),
        ("castlike_c", c123),
        ("seq_a", z[:, :4]),
        ("seq_b", z[:, 4:]),
        ("seq_c", z[1:2, :]),
        ("seq_d", z[:, 3]),
        ("seq_cast", c6[4:]),
    ]
    vi = oh.make_tensor_value_info
    g = oh.make_graph(nodes, "dyn_forms", [vi("x", f32, [2, 6]), vi("i", i64, [2, 6]), vi("z", f32, [2, 6])],
                      [vi(n, f32, list(r.shape)) for n, r in refs])
    mo.save_model("dyn_forms.onnx", oh.make_model(g, opset_imports=[oh.make_opsetid("", 20)], ir_version=10))
    mo.save_f32("dyn_forms_x.f32", x)
    mo.write("dyn_forms_i.i64", np.ascontiguousarray(i, dtype="<i8").tobytes())
    mo.save_f32("dyn_forms_z.f32", z)
    mo.save_f32("dyn_forms_y.f32", np.concatenate([np.asarray(r, np.float32).flatten() for _, r in refs]))
    off = 0
    for n, r in refs:
        print("dyn forms: %-12s %-7s offset %3d" % (n, list(r.shape), off))
        off += r.size

    # Refused models (opset 20, the same style).
    def model(nodes, inputs, outputs):
        g = oh.make_graph(nodes, "bad", inputs, outputs)
        return oh.make_model(g, opset_imports=[oh.make_opsetid("", 20)], ir_version=10)

    mo.save_model("bad_mod_runtime.onnx", model(
        [const("three", np.array([3, -3, 3, -3, 3, -3], np.int64)),
         oh.make_node("Mod", ["i", "three"], ["y"], name="mod_runtime", fmod=0)],
        [vi("i", i64, [2, 6])], [vi("y", i64, [2, 6])]))
    mo.save_model("bad_mod_float_fmod0.onnx", model(
        [const("fa", fa), const("fb", fb),
         oh.make_node("Mod", ["fa", "fb"], ["m"], name="mod_float_fmod0", fmod=0),
         oh.make_node("Add", ["x", "m"], ["y"], name="add")],
        [vi("x", f32, [4])], [vi("y", f32, [4])]))
    mo.save_model("bad_sequence_at_runtime.onnx", model(
        [const("four", np.array(4, np.int64)),
         oh.make_node("SplitToSequence", ["x", "four"], ["seq"], name="split", axis=1),
         oh.make_node("SequenceAt", ["seq", "pos"], ["y"], name="seq_at_runtime")],
        [vi("x", f32, [2, 6]), vi("pos", i64, [])], [vi("y", f32, [2, 4])]))
    mo.save_model("bad_sequence_use.onnx", model(
        [const("four", np.array(4, np.int64)),
         oh.make_node("SplitToSequence", ["x", "four"], ["seq"], name="split", axis=1),
         oh.make_node("ConcatFromSequence", ["seq"], ["y"], name="concat_seq", axis=1)],
        [vi("x", f32, [2, 6])], [vi("y", f32, [2, 6])]))


def make_dyn_forms2():
    """dyn_forms2.onnx: And/Or/Xor (at run time on BOOLs and folded), Sin/Cos
    (folded), GatherND (constant indices; run-time or constant data) and
    GatherElements (folded, and of a uniform constant by run-time indices),
    hand-made with onnx.helper in make_dyn_forms's style; every output cast to
    FLOAT. References from NumPy. Also the refused forms of these ops."""
    f32, i64, b8 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64, onnx.TensorProto.BOOL
    a = np.array([[True, False, True], [False, False, True]])
    b = np.array([True, False, False])
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) * np.float32(0.5) - np.float32(5.25)
    ids = np.array([[0, 1, 2, 3, 4], [6, 5, 3, 1, 0]], np.int64)
    bc1 = np.array([True, True, False, False])
    bc2 = np.array([True, False, True, False])
    bca = np.array([[False, True, False], [False, True, True]])
    sv = np.array([0.0, -0.0, 1e-3, 3.14159, -100.0, 1e4], np.float32)
    gnd_i = np.array([[0, 1], [1, 2], [1, 0]], np.int64)
    gnd_i3 = np.array([[[0, 2, 3]], [[-1, 0, -1]]], np.int64)
    gc = np.array([[10, -20, 30], [-40, 50, 1 << 40]], np.int64)
    gc_i = np.array([[1, 2], [0, -1], [1, 0]], np.int64)
    ge_d = np.array([[1.5, -2.5, 3.5], [4.25, -5.75, 6.0]], np.float32)
    ge_i = np.array([[2, 0], [-1, 1]], np.int64)
    zeros17 = np.zeros((1, 7), np.int64)

    def const(name, value):  # a Constant node, not a weight: folded at import
        return oh.make_node("Constant", [], [name], name="const_" + name, value=onh.from_array(value))

    def cast(src, dst):
        return oh.make_node("Cast", [src], [dst], name="cast_" + dst, to=f32)

    nodes = [
        const("bc1", bc1), const("bc2", bc2), const("bca", bca), const("sv", sv), const("gnd_i", gnd_i),
        const("gnd_i3", gnd_i3), const("gc", gc), const("gc_i", gc_i), const("ge_d", ge_d),
        const("ge_i", ge_i), const("zeros17", zeros17), const("shape27", np.array([2, 7], np.int64)),
        oh.make_node("And", ["a", "b"], ["and_ab_b"], name="and_ab"), cast("and_ab_b", "and_ab"),
        oh.make_node("Or", ["a", "b"], ["or_ab_b"], name="or_ab"), cast("or_ab_b", "or_ab"),
        oh.make_node("Xor", ["a", "b"], ["xor_ab_b"], name="xor_ab"), cast("xor_ab_b", "xor_ab"),
        oh.make_node("And", ["bc1", "bc2"], ["and_c_b"], name="and_c"), cast("and_c_b", "and_c"),
        oh.make_node("Or", ["a", "bca"], ["or_ac_b"], name="or_ac"), cast("or_ac_b", "or_ac"),
        oh.make_node("Sin", ["sv"], ["sin_c"], name="sin_c"),
        oh.make_node("Cos", ["sv"], ["cos_c"], name="cos_c"),
        oh.make_node("GatherND", ["x", "gnd_i"], ["gnd_x"], name="gnd_x"),
        oh.make_node("GatherND", ["x", "gnd_i3"], ["gnd_x3"], name="gnd_x3"),
        oh.make_node("GatherND", ["gc", "gc_i"], ["gnd_c_i"], name="gnd_c"), cast("gnd_c_i", "gnd_c"),
        oh.make_node("GatherElements", ["ge_d", "ge_i"], ["ge_c"], name="ge_c", axis=1),
        oh.make_node("Expand", ["zeros17", "shape27"], ["zeros27"], name="expand_zeros"),
        oh.make_node("GatherElements", ["zeros27", "ids"], ["ge_uniform_i"], name="ge_uniform", axis=1),
        cast("ge_uniform_i", "ge_uniform"),
    ]

    def gather_nd(data, idx):  # batch_dims 0
        flat = idx.reshape(-1, idx.shape[-1])
        return np.stack([data[tuple(t)] for t in flat]).reshape(idx.shape[:-1] + data.shape[idx.shape[-1]:])

    sin32, cos32 = np.sin(sv.astype(np.float32)), np.cos(sv.astype(np.float32))
    refs = [
        ("and_ab", a & b),
        ("or_ab", a | b),
        ("xor_ab", a ^ b),
        ("and_c", bc1 & bc2),
        ("or_ac", a | bca),
        ("sin_c", sin32),
        ("cos_c", cos32),
        ("gnd_x", gather_nd(x, gnd_i)),
        ("gnd_x3", gather_nd(x, gnd_i3)),
        ("gnd_c", gather_nd(gc, gc_i)),
        ("ge_c", np.take_along_axis(ge_d, np.where(ge_i < 0, ge_i + 3, ge_i), axis=1)),
        ("ge_uniform", np.zeros((2, 5), np.int64)),
    ]
    vi = oh.make_tensor_value_info
    g = oh.make_graph(nodes, "dyn_forms2", [vi("a", b8, [2, 3]), vi("b", b8, [3]), vi("x", f32, [2, 3, 4]),
                                            vi("ids", i64, [2, 5])],
                      [vi(n, f32, list(r.shape)) for n, r in refs])
    mo.save_model("dyn_forms2.onnx", oh.make_model(g, opset_imports=[oh.make_opsetid("", 20)], ir_version=10))
    mo.write("dyn_forms2_a.u8", np.ascontiguousarray(a, dtype="u1").tobytes())
    mo.write("dyn_forms2_b.u8", np.ascontiguousarray(b, dtype="u1").tobytes())
    mo.save_f32("dyn_forms2_x.f32", x)
    mo.write("dyn_forms2_ids.i64", np.ascontiguousarray(ids, dtype="<i8").tobytes())
    mo.save_f32("dyn_forms2_y.f32", np.concatenate([np.asarray(r, np.float32).flatten() for _, r in refs]))
    off = 0
    for n, r in refs:
        print("dyn forms2: %-11s %-7s offset %3d" % (n, list(r.shape), off))
        off += r.size
    print("dyn forms2: %d floats" % off)
    for name, f, r32 in (("sin", np.sin, sin32), ("cos", np.cos, cos32)):
        r64 = f(sv.astype(np.float64)).astype(np.float32)
        ulps = np.abs(r32.view(np.int32).astype(np.int64) - r64.view(np.int32).astype(np.int64))
        print("dyn forms2: %s float32 %s vs float64-rounded: ulps %s" % (
            name, [float(v) for v in r32], ulps.tolist()))

    # Refused models (opset 20, the same style).
    def model(nodes, inputs, outputs):
        g = oh.make_graph(nodes, "bad", inputs, outputs)
        return oh.make_model(g, opset_imports=[oh.make_opsetid("", 20)], ir_version=10)

    mo.save_model("bad_gathernd_runtime_idx.onnx", model(
        [oh.make_node("GatherND", ["x", "idx"], ["y"], name="gathernd_runtime_idx")],
        [vi("x", f32, [2, 3, 4]), vi("idx", i64, [3, 2])], [vi("y", f32, [3, 4])]))
    mo.save_model("bad_gathernd_batch_dims.onnx", model(
        [const("idx", np.array([[1], [2]], np.int64)),
         oh.make_node("GatherND", ["x", "idx"], ["y"], name="gathernd_batch_dims", batch_dims=1)],
        [vi("x", f32, [2, 3, 4])], [vi("y", f32, [2, 4])]))
    mo.save_model("bad_gather_elements_runtime.onnx", model(
        [const("ge_d", ge_d),
         oh.make_node("GatherElements", ["ge_d", "idx"], ["y"], name="gather_elements_runtime", axis=1)],
        [vi("idx", i64, [2, 2])], [vi("y", f32, [2, 2])]))
    mo.save_model("sin_runtime.onnx", model(
        [oh.make_node("Sin", ["x"], ["y"], name="sin_runtime")],
        [vi("x", f32, [2, 3])], [vi("y", f32, [2, 3])]))
    mo.save_model("bad_and_float.onnx", model(
        [oh.make_node("And", ["x", "z"], ["y"], name="and_float")],
        [vi("x", f32, [2, 3]), vi("z", f32, [2, 3])], [vi("y", b8, [2, 3])]))


class HFLogits(nn.Module):
    """A Hugging Face model that returns its logits alone (use_cache off)."""

    def __init__(self, model):
        super().__init__()
        self.m = model

    def forward(self, input_ids, attention_mask):
        kw = {"use_cache": False} if hasattr(self.m.config, "use_cache") else {}
        return self.m(input_ids=input_ids, attention_mask=attention_mask, return_dict=False, **kw)[0]


def hf_build(cfg, cls, seed):
    """cls(cfg) with random weights (seed), eager attention, wrapped in HFLogits."""
    torch.manual_seed(seed)
    cfg._attn_implementation = "eager"
    m = cls(cfg)
    try:
        m.set_attn_implementation("eager")
    except Exception:
        pass
    assert m.config._attn_implementation == "eager"
    return HFLogits(m)


def hf_inputs(vocab, seed):
    """input_ids [2,8] in [2, vocab) (never RoBERTa's pad id 1), attention_mask
    [2,8] int64 ones with mask[1, 6:] = 0 (right padding)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(2, vocab, (2, 8), generator=g, dtype=torch.int64)
    mask = torch.ones(2, 8, dtype=torch.int64)
    mask[1, 6:] = 0
    return ids, mask


def make_hf():
    """Tiny Hugging Face transformers models (random weights from small
    configs), exported by the dynamo and TorchScript exporters."""
    import transformers as tf

    # Llama: train-mode dynamo export without the optimizer, and the train reference.
    cfg = tf.LlamaConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, intermediate_size=64, max_position_embeddings=32)
    llama = hf_build(cfg, tf.LlamaForCausalLM, 31)
    with torch.no_grad():
        for mod in llama.modules():
            if type(mod).__name__.endswith("RMSNorm"):
                mod.weight.copy_(1 + 0.3 * torch.randn(mod.weight.shape))
    ids, mask = hf_inputs(64, 131)
    print("HF Llama:", param_count(llama))
    describe(dynamo_export(llama, (ids, mask), "hf_llama_noopt.onnx", True, optimize=False))
    write_i64("hf_llama_ids.i64", ids)
    write_i64("hf_llama_mask.i64", mask)
    mo.train_reference_inputs(llama, (ids, mask), torch.arange(16) % 5, "hf_llama_ref.f32")

    # RoBERTa: default dynamo export (optimize=True), eval mode, no token_type_ids input.
    cfg = tf.RobertaConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=64, max_position_embeddings=40, pad_token_id=1)
    roberta = hf_build(cfg, tf.RobertaForMaskedLM, 32).eval()
    ids, mask = hf_inputs(64, 132)
    print("HF RoBERTa:", param_count(roberta))
    describe(dynamo_export(roberta, (ids, mask), "hf_roberta_dyn.onnx", False))
    write_i64("hf_roberta_ids.i64", ids)
    write_i64("hf_roberta_mask.i64", mask)
    with torch.no_grad():
        mo.save_f32("hf_roberta_logits.f32", roberta(ids, mask))

    # GPT-2: TorchScript exporter (opset 17), eval mode, weights inline.
    cfg = tf.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=32)
    gpt2 = hf_build(cfg, tf.GPT2LMHeadModel, 33).eval()
    ids, mask = hf_inputs(64, 133)
    print("HF GPT-2 (TorchScript):", param_count(gpt2))
    path = os.path.join(HERE, "hf_gpt2_ts.onnx")
    torch.manual_seed(0)
    torch.onnx.export(copy.deepcopy(gpt2), (ids, mask), path, dynamo=False, opset_version=17,
                      input_names=["input_ids", "attention_mask"], output_names=["logits"])
    strip_node_metadata(path)
    onnx.checker.check_model(path)
    describe(path)
    write_i64("hf_gpt2_ids.i64", ids)
    write_i64("hf_gpt2_mask.i64", mask)
    with torch.no_grad():
        mo.save_f32("hf_gpt2_logits.f32", gpt2(ids, mask))


def main():
    if len(sys.argv) > 1:
        for name in sys.argv[1:]:
            globals()[name]()
        return
    make_dyn_gpt()
    make_dyn_gpt_bs()
    make_dyn_gpt_dedup()
    make_dyn_llama()
    make_dyn_encoder()
    make_dyn_sdpa_boolmask()
    make_dyn_mha_ts2()
    make_ext_data()
    make_dyn_forms()
    make_dyn_forms2()
    make_hf()
    make_fuzz_seeds()


def make_fuzz_seeds():
    """Fuzzing seeds (tests/fuzz/corpus/onnx; the fuzzer imports from
    memory, so the seeds hold their weights inline): the hand-made forms, and
    the bool-mask attention export, whose value_info metadata exercises the
    reading of torch.export's signature."""
    os.makedirs(mo.CORPUS, exist_ok=True)
    for name in ("dyn_forms", "dyn_forms2"):
        with open(os.path.join(HERE, name + ".onnx"), "rb") as f:
            data = f.read()
        mo.write(os.path.join(mo.CORPUS, name + ".onnx"), data)
    m = onnx.load(os.path.join(HERE, "dyn_sdpa_boolmask.onnx"))  # external data read in
    for n in m.graph.node:
        del n.metadata_props[:]
    mo.write(os.path.join(mo.CORPUS, "dyn_sdpa_boolmask_inline.onnx"), m.SerializeToString())


if __name__ == "__main__":
    main()
