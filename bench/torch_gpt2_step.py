#!/usr/bin/python3
"""PyTorch peer of build/examples/gpt2_train for bench/gpt2_vs_torch.sh: the
same GPT-2 (the nanoGPT module of tests/gpt2/gpt2_ref.py, which the parity
test holds equal to sgrt's) trained on random bytes of the same shape, fp32 on
the CPU.

  torch_gpt2_step.py [--preset tiny|mini] [--batch N] [--seq N] [--steps N] [--threads N]
                     [--mode eager|compile] [--attention sdpa|manual] [--autocast bf16]
                     [--matmul-precision f32|bf16] [--json]

AdamW as gpt2_train: lr 1e-3, betas 0.9/0.95, eps 1e-8, weight decay 0.1 on
the matrices and embeddings only. --autocast bf16 runs the forward pass
under torch.autocast("cpu", torch.bfloat16), PyTorch's mixed precision
(products in bf16 where the CPU has it; not sgrt's arithmetic, which is f32:
a reference point, not a peer). --matmul-precision bf16 is the peer of
gpt2_train --matmul-precision bf16: every tensor f32, each matrix product's
operands rounded to bfloat16 and summed in f32, through PyTorch's own switch
for it (torch.backends.mkldnn.matmul.fp32_precision = "bf16", or
torch.set_float32_matmul_precision("medium") before that existed). oneDNN
takes that switch as a hint and honours it on x86 only where it has a kernel
for it (AMX); elsewhere PyTorch quietly stays f32. So the switch is checked
first (bf16_probe) and, where it has no effect, the script ends with exit
status 2 and a message saying so rather than time f32 under a bf16 label.
Prints the median ms per step over --steps
steps after the warm-up (eager: 1 step; compile: 3, compiling included),
tokens per second, peak RSS and the torch version; with --json only one JSON
line. Runs under /usr/bin/python3 (PyTorch 1.13: --mode compile ends with a
message) and the python of bench/torch_venv.sh (PyTorch 2.x)."""
import argparse, importlib.util, os, sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import torch
import torch_peer

spec = importlib.util.spec_from_file_location("gpt2_ref", os.path.join(here, "..", "tests", "gpt2", "gpt2_ref.py"))
gpt2_ref = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpt2_ref)

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--preset", choices=sorted(gpt2_ref.PRESETS), default="mini")
ap.add_argument("--batch", type=int, default=4)
ap.add_argument("--seq", type=int, default=0, help="0: the context")
ap.add_argument("--steps", type=int, default=5)
ap.add_argument("--threads", type=int, default=torch.get_num_threads())
ap.add_argument("--mode", choices=("eager", "compile"), default="eager")
ap.add_argument("--attention", choices=("sdpa", "manual"), default="sdpa",
                help="sdpa: F.scaled_dot_product_attention(is_causal=True), as nanoGPT does where torch has it "
                     "(2.0 on; 1.13 falls back to manual); manual: matmuls, mask and softmax")
ap.add_argument("--autocast", choices=("bf16",), default=None,
                help="the forward under torch.autocast(\"cpu\", torch.bfloat16) (mixed precision)")
ap.add_argument("--matmul-precision", choices=("f32", "bf16"), default="f32",
                help="bf16: f32 tensors, matrix products of operands rounded to bfloat16 and summed in f32 (PyTorch's "
                     "bf32 switch; exit status 2 where it has no effect)")
ap.add_argument("--json", action="store_true")
a = ap.parse_args()
torch_peer.compile_or_exit(a.mode)

torch.set_num_threads(a.threads)
F = torch.nn.functional


def bf16_matmul_switch():
    """Turns on PyTorch's f32 matmuls with bf16 operands on the CPU; returns the switch, as code."""
    mkldnn_matmul = getattr(torch.backends.mkldnn, "matmul", None)
    if mkldnn_matmul is not None and hasattr(mkldnn_matmul, "fp32_precision"):
        # The newer, per-backend API; mixing it with the legacy one makes PyTorch refuse to say the precision.
        mkldnn_matmul.fp32_precision = "bf16"
        return 'torch.backends.mkldnn.matmul.fp32_precision = "bf16"'
    torch.set_float32_matmul_precision("medium")
    return 'torch.set_float32_matmul_precision("medium")'


def bf16_probe(mode):
    """Whether the switch takes effect where the model's products run: F.linear (what nn.Linear calls) of x
    [256, 384] and w [1536, 384] (the mini preset's c_fc), forward and the input's gradient (dy @ w), eagerly or
    compiled as --mode says. Returns the errors (max abs / max abs of the reference) against the f32 product of
    bf16-rounded operands and against the exact product, each the larger of forward and gradient."""
    g = torch.Generator().manual_seed(1)  # not the global generator: the model's initial weights stay the same
    x = torch.randn(256, 384, generator=g, requires_grad=True)
    w = torch.randn(1536, 384, generator=g)
    dy = torch.randn(256, 1536, generator=g)

    def linear(x, w):
        return F.linear(x, w)
    if mode == "compile":
        linear = torch.compile(linear)
    y = linear(x, w)
    y.backward(dy)

    def rnd(t):
        return t.detach().to(torch.bfloat16).double()  # round to nearest even, as sgrt rounds

    def err(got, ref):
        return ((got.double() - ref).abs().max() / ref.abs().max()).item()
    xd, wd, dyd = x.detach().double(), w.double(), dy.double()
    to_bf16 = max(err(y, rnd(x) @ rnd(w).T), err(x.grad, rnd(dy) @ rnd(w)))
    to_f32 = max(err(y, xd @ wd.T), err(x.grad, dyd @ wd))
    return to_bf16, to_f32


matmul_fields = {"matmul_precision": a.matmul_precision}
if a.matmul_precision == "bf16":
    switch = bf16_matmul_switch()
    to_bf16, to_f32 = bf16_probe(a.mode)
    # bf16 operands move a product of 384 terms by ~1e-3 of its largest value; f32 sums by ~1e-6.
    if not (to_bf16 <= 1e-5 and to_f32 >= 1e-4):
        try:
            flags = set(open("/proc/cpuinfo").read().split())
        except OSError:
            flags = set()
        cpu = ", ".join(f for f in ("avx512_bf16", "amx_bf16") if f in flags) or "neither avx512_bf16 nor amx_bf16"
        print("torch_gpt2_step.py: --matmul-precision bf16: PyTorch %s's switch (%s) does not make f32 matmuls use "
              "bf16 operands here (%s): F.linear of [256, 384] x [1536, 384]^T under it is %.1e from the product of "
              "bf16-rounded operands and %.1e from the f32 one. oneDNN takes the switch as a hint and honours it on "
              "x86 only with AMX (this CPU: %s), so there is no PyTorch peer with bf16 products on this machine"
              % (torch.__version__, switch, a.mode, to_bf16, to_f32, cpu), file=sys.stderr)
        sys.exit(2)
    matmul_fields.update({"matmul_switch": switch, "matmul_probe_to_bf16": float("%.3g" % to_bf16),
                          "matmul_probe_to_f32": float("%.3g" % to_f32)})

torch.manual_seed(0)
sdpa = a.attention == "sdpa" and hasattr(F, "scaled_dot_product_attention")
if sdpa:
    def attention_forward(self, x):  # nanoGPT's flash path: the same model, attention fused by PyTorch
        b, t, w = x.shape
        q, k, v = self.c_attn(x).split(self.width, dim=2)
        d = w // self.heads
        q, k, v = (z.view(b, t, self.heads, d).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, w))
    gpt2_ref.Attention.forward = attention_forward
cfg = gpt2_ref.PRESETS[a.preset]
seq = a.seq or cfg["context"]
model = gpt2_ref.GPT(cfg)
params = list(model.parameters())
opt = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
                         {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                        lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
data = torch.randint(0, cfg["vocab"], (a.batch, seq + 1))
tokens, targets = data[:, :-1].contiguous(), data[:, 1:].reshape(-1)


def forward(tokens, targets):
    if a.autocast:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return torch.nn.functional.cross_entropy(model(tokens), targets)
    return torch.nn.functional.cross_entropy(model(tokens), targets)


fwd = forward if a.mode == "eager" else torch.compile(forward)


def model_step():
    loss = fwd(tokens, targets)
    loss.backward()
    return loss


if not a.json:
    print("torch %s, %s: GPT-2 %s, batch %d x %d, %d threads" % (
        torch.__version__, a.mode, a.preset, a.batch, seq, a.threads), file=sys.stderr)
r = torch_peer.run(torch_peer.prepare(a.mode, model_step, opt), a.mode, a.steps,
                   {"model": "gpt2", "preset": a.preset, "batch": a.batch, "seq": seq,
                    "attention": "sdpa" if sdpa else "manual", "autocast": a.autocast or "none", **matmul_fields},
                   emit_line=False)
r["tokens_per_second"] = a.batch * seq * 1000.0 / r["ms_per_step"]
import json
print(json.dumps(r))
