#!/usr/bin/python3
"""The PyTorch side of the GPT-2 parity check (tests/gpt2/gpt2_parity.c), as
llm.c's test_gpt2 does it: a nanoGPT-style GPT-2 in PyTorch (written here,
independent of sgrt) draws its initial weights and one batch, then writes, as
raw little-endian files in OUTDIR:

  config.txt          vocab context layers heads width batch seq steps lr weight_decay beta1 beta2 eps
  params/<name>.bin   every parameter before training (f32; state_dict keys, lm_head tied to wte)
  tokens.bin          the batch's token ids [batch, seq] (i64), targets.bin the next tokens (i64)
  logits.bin          logits of the first step [batch * seq, vocab] (f32)
  grads/<name>.bin    every parameter's gradient in the first step (f32)
  losses.bin          the loss of each of `steps` AdamW steps on that batch (f64 of the f32 loss)
  final/<name>.bin    every parameter after the last step (f32)

AdamW as GPT-2 is trained: two parameter groups, weight decay on the
matrices and embeddings (dim >= 2) only. Run with Debian's /usr/bin/python3
(torch 1.13); exits 77 when torch is missing (ctest: skipped).

usage: gpt2_ref.py OUTDIR [--preset tiny|mini] [--batch B] [--seq T] [--steps N] [--seed S]
"""
import argparse
import math
import os
import sys

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    print("gpt2_ref: torch is not installed (apt-get install python3-torch): skipped")
    sys.exit(77)

PRESETS = {
    "tiny": dict(vocab=256, context=64, layers=2, heads=4, width=64),
    "mini": dict(vocab=256, context=256, layers=6, heads=6, width=384),
}


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.heads, self.width = c["heads"], c["width"]
        self.c_attn = nn.Linear(c["width"], 3 * c["width"])
        self.c_proj = nn.Linear(c["width"], c["width"])
        t = c["context"]
        self.register_buffer("bias", torch.tril(torch.ones(t, t)).view(1, 1, t, t), persistent=False)

    def forward(self, x):
        b, t, w = x.shape
        q, k, v = self.c_attn(x).split(self.width, dim=2)
        d = w // self.heads
        q = q.view(b, t, self.heads, d).transpose(1, 2)
        k = k.view(b, t, self.heads, d).transpose(1, 2)
        v = v.view(b, t, self.heads, d).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, w)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = nn.Linear(c["width"], 4 * c["width"])
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * c["width"], c["width"])

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c["width"])
        self.attn = Attention(c)
        self.ln_2 = nn.LayerNorm(c["width"])
        self.mlp = MLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(c["vocab"], c["width"]),
            wpe=nn.Embedding(c["context"], c["width"]),
            h=nn.ModuleList([Block(c) for _ in range(c["layers"])]),
            ln_f=nn.LayerNorm(c["width"]),
        ))
        self.lm_head = nn.Linear(c["width"], c["vocab"], bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tied
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * c["layers"]) if name.endswith("c_proj.weight") else 0.02
                nn.init.normal_(p, mean=0.0, std=std)
            elif name.endswith(".bias"):
                nn.init.zeros_(p)

    def forward(self, idx):
        b, t = idx.shape
        pos = torch.arange(0, t, dtype=torch.long)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x)).view(b * t, -1)


def write(path, tensor, dtype):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tensor.detach().contiguous().numpy().astype(dtype).tofile(path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--preset", default="tiny", choices=sorted(PRESETS))
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=0, help="0: the context")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    a = ap.parse_args()
    c = PRESETS[a.preset]
    seq = a.seq or c["context"]
    torch.manual_seed(a.seed)
    torch.set_num_threads(2)
    model = GPT(c)
    params = dict(model.named_parameters())  # tied: lm_head.weight is not listed twice
    for name, p in params.items():
        write(os.path.join(a.outdir, "params", name + ".bin"), p, "<f4")
    data = torch.randint(0, c["vocab"], (a.batch, seq + 1), dtype=torch.long)
    tokens, targets = data[:, :-1].contiguous(), data[:, 1:].contiguous()
    write(os.path.join(a.outdir, "tokens.bin"), tokens, "<i8")
    write(os.path.join(a.outdir, "targets.bin"), targets, "<i8")
    betas, eps = (0.9, 0.95), 1e-8
    decay = [p for p in params.values() if p.dim() >= 2]
    no_decay = [p for p in params.values() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=a.lr, betas=betas, eps=eps)
    losses = []
    for step in range(a.steps):
        opt.zero_grad(set_to_none=True)
        logits = model(tokens)
        loss = F.cross_entropy(logits, targets.view(-1))
        loss.backward()
        if step == 0:
            write(os.path.join(a.outdir, "logits.bin"), logits, "<f4")
            for name, p in params.items():
                write(os.path.join(a.outdir, "grads", name + ".bin"), p.grad, "<f4")
        losses.append(loss.item())
        opt.step()
    write(os.path.join(a.outdir, "losses.bin"), torch.tensor(losses, dtype=torch.float64), "<f8")
    for name, p in params.items():
        write(os.path.join(a.outdir, "final", name + ".bin"), p, "<f4")
    with open(os.path.join(a.outdir, "config.txt"), "w") as f:
        f.write("%d %d %d %d %d %d %d %d %.17g %.17g %.17g %.17g %.17g\n" % (
            c["vocab"], c["context"], c["layers"], c["heads"], c["width"], a.batch, seq, a.steps, a.lr,
            a.weight_decay, betas[0], betas[1], eps))
    print("gpt2_ref: %s, %d parameters, batch %d x %d, %d steps: loss %.6f -> %.6f" % (
        a.preset, sum(p.numel() for p in params.values()), a.batch, seq, a.steps, losses[0], losses[-1]))


if __name__ == "__main__":
    main()
