"""One rank of `sgrt launch -n 2 -- python3 dist_model_check.py pp|tp` (check_train_dist.sh):
sgrt.Dist.model as a 2-stage pipeline (2 micro-batches) or a 2-way tensor group; each step's loss
must equal, within 1e-5 relative, that of one sgrt.Session trained on the same batches with the
same optimizer (SGD, momentum 0.9)."""
import os
import sys

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "python"))
sys.path.insert(0, os.path.join(here, "..", "..", "examples", "python"))
import sgrt  # noqa: E402
import train_dist as td  # noqa: E402

B, STEPS, LR = 16, 4, 0.05


def forward_graph(training):
    rng = np.random.default_rng(0)
    g = sgrt.Graph()
    x = g.input("x", "f32", (B, td.FEATURES))
    y = g.input("y", "i64", (B,))
    lr = g.input("lr", "f32", ())
    w1 = g.parameter("fc1.weight", (rng.standard_normal((td.HIDDEN, td.FEATURES)) * 0.2).astype(np.float32))
    w2 = g.parameter("fc2.weight", (rng.standard_normal((td.CLASSES, td.HIDDEN)) * 0.2).astype(np.float32))
    loss = g.mark_output(g.cross_entropy(g.linear(g.relu(g.linear(x, w1)), w2), y), "loss")
    if training:
        g.backward(loss)
        g.add_sgd(lr, momentum=0.9)
    g.finalize()
    return g, loss


mode = sys.argv[1]
g, loss = forward_graph(False)
kw = dict(pipeline=2, micro_batches=2) if mode == "pp" else dict(tensor=2)
got = []
with sgrt.Dist.model(g, loss, optimizer="sgd", momentum=0.9, threads=1, **kw) as d:
    for k in range(STEPS):
        x, y = td.global_batch(k, B)
        d.set_input("x", x)
        d.set_input("y", y)
        d.set_input("lr", np.float32(LR))
        got.append(d.step()["loss_mean"])
    rank = d.rank
ref_g, _ = forward_graph(True)
want = []
with sgrt.Session(ref_g, threads=1) as s:
    for k in range(STEPS):
        x, y = td.global_batch(k, B)
        want.append(float(s.step({"x": x, "y": y, "lr": np.float32(LR)})["loss"]))
worst = max(abs(a - b) / abs(b) for a, b in zip(got, want))
print("rank %d: Dist.model %s: losses %s, one process %s, worst %.2e" % (
    rank, mode, ["%.5f" % v for v in got], ["%.5f" % v for v in want], worst))
sys.exit(0 if worst <= 1e-5 else 1)
