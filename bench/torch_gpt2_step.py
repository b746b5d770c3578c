#!/usr/bin/python3
"""PyTorch peer of build/examples/gpt2_train for bench/gpt2_vs_torch.sh: the
same GPT-2 (the nanoGPT module of tests/gpt2/gpt2_ref.py, which the parity
test holds equal to sgrt's) trained on random bytes of the same shape, fp32 on
the CPU.

  torch_gpt2_step.py [--preset tiny|mini] [--batch N] [--seq N] [--steps N] [--threads N]
                     [--mode eager|compile] [--attention sdpa|manual] [--autocast bf16] [--json]

AdamW as gpt2_train: lr 1e-3, betas 0.9/0.95, eps 1e-8, weight decay 0.1 on
the matrices and embeddings only. --autocast bf16 runs the forward pass
under torch.autocast("cpu", torch.bfloat16), PyTorch's mixed precision
(products in bf16 where the CPU has it; not sgrt's arithmetic, which is f32:
a reference point, not a peer). Prints the median ms per step over --steps
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
ap.add_argument("--json", action="store_true")
a = ap.parse_args()
torch_peer.compile_or_exit(a.mode)

torch.set_num_threads(a.threads)
torch.manual_seed(0)
F = torch.nn.functional
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
                    "attention": "sdpa" if sdpa else "manual", "autocast": a.autocast or "none"},
                   emit_line=False)
r["tokens_per_second"] = a.batch * seq * 1000.0 / r["ms_per_step"]
import json
print(json.dumps(r))
