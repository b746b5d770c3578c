#!/usr/bin/python3
"""PyTorch peer of build/examples/mlp_train for bench/fusion.sh: the same MLP
trained on synthetic data of the same shape, fp32 on the CPU.

  torch_mlp_step.py [--features N] [--hidden N] [--depth N] [--activation relu|gelu|gelu-tanh]
                    [--layernorm] [--batch N] [--steps N] [--threads N] [--mode eager|compile] [--json]

Model: per hidden layer Linear(in, hidden) -> LayerNorm(hidden) (with
--layernorm) -> activation; then Linear(hidden, 10); cross-entropy loss; AdamW
(lr 1e-3, betas 0.9/0.999, eps 1e-8, weight decay 0.01: sgrt's defaults).
Prints the median ms per step over --steps steps after the warm-up (eager: 1
step; compile: 3, compiling included), peak RSS (getrusage maxrss) and the
torch version; with --json only one JSON line. Runs under /usr/bin/python3
(PyTorch 1.13: --mode compile ends with a message) and the python of
bench/torch_venv.sh (PyTorch 2.x)."""
import argparse, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch
import torch_peer

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--features", type=int, default=1024)
ap.add_argument("--hidden", type=int, default=1024)
ap.add_argument("--depth", type=int, default=4)
ap.add_argument("--activation", choices=("relu", "gelu", "gelu-tanh"), default="gelu")
ap.add_argument("--layernorm", action="store_true")
ap.add_argument("--batch", type=int, default=256)
ap.add_argument("--steps", type=int, default=20)
ap.add_argument("--threads", type=int, default=torch.get_num_threads())
ap.add_argument("--mode", choices=("eager", "compile"), default="eager")
ap.add_argument("--json", action="store_true")
a = ap.parse_args()
torch_peer.compile_or_exit(a.mode)

torch.set_num_threads(a.threads)
torch.manual_seed(0)
act = {"relu": lambda: torch.nn.ReLU(), "gelu": lambda: torch.nn.GELU(),
       "gelu-tanh": lambda: torch.nn.GELU(approximate="tanh")}[a.activation]
layers, width = [], a.features
for _ in range(a.depth):
    layers.append(torch.nn.Linear(width, a.hidden))
    if a.layernorm:
        layers.append(torch.nn.LayerNorm(a.hidden))
    layers.append(act())
    width = a.hidden
layers.append(torch.nn.Linear(width, 10))
model = torch.nn.Sequential(*layers)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
x = torch.randn(a.batch, a.features)
y = torch.randint(0, 10, (a.batch,))
loss_fn = torch.nn.CrossEntropyLoss()


def forward(x, y):
    return loss_fn(model(x), y)


fwd = forward if a.mode == "eager" else torch.compile(forward)


def model_step():
    loss = fwd(x, y)
    loss.backward()
    return loss


if not a.json:
    print("torch %s, %s: MLP %d-%dx%d-10, %s%s, batch %d, %d threads" % (
        torch.__version__, a.mode, a.features, a.hidden, a.depth, a.activation,
        " + layernorm" if a.layernorm else "", a.batch, a.threads), file=sys.stderr)
torch_peer.run(torch_peer.prepare(a.mode, model_step, opt), a.mode, a.steps,
               {"model": "mlp", "features": a.features, "hidden": a.hidden, "depth": a.depth,
                "activation": a.activation, "layernorm": a.layernorm, "batch": a.batch})
