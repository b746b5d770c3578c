"""Tests of the ctypes shim (python/sgrt) against independent references:
numpy computed from the same weights, and PyTorch doing the same steps."""
import gc
import math
import os

import numpy as np
import pytest

import sgrt

torch = pytest.importorskip("torch")

N, F, H, C = 8, 12, 16, 5


def mlp_weights(seed=0):
    rng = np.random.default_rng(seed)
    return {
        "fc1.weight": (rng.standard_normal((H, F)) / np.sqrt(F)).astype(np.float32),
        "fc1.bias": (rng.standard_normal(H) * 0.1).astype(np.float32),
        "fc2.weight": (rng.standard_normal((C, H)) / np.sqrt(H)).astype(np.float32),
        "fc2.bias": (rng.standard_normal(C) * 0.1).astype(np.float32),
    }


def batch(seed=1):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, F)).astype(np.float32)
    y = rng.integers(0, C, N).astype(np.int64)
    return x, y


def build_mlp(w, optimizer=None, lr_input=True, **opt):
    """x -> linear -> relu -> linear ("logits") -> cross_entropy ("loss")."""
    g = sgrt.Graph()
    x = g.input("x", "f32", (N, F))
    y = g.input("y", np.int64, (N,))
    p = {k: g.parameter(k, v) for k, v in w.items()}
    h = g.relu(g.linear(x, p["fc1.weight"], p["fc1.bias"]))
    logits = g.mark_output(g.linear(h, p["fc2.weight"], p["fc2.bias"]), "logits")
    loss = g.mark_output(g.cross_entropy(logits, y, "mean"), "loss")
    if optimizer:
        g.backward(loss)
        lr = g.input("lr", "f32", ()) if lr_input else opt.pop("lr")
        getattr(g, "add_" + optimizer)(lr, **opt)
    return g.finalize()


def numpy_mlp(w, x, y):
    """float64 forward: logits and mean cross entropy."""
    h = np.maximum(x.astype(np.float64) @ w["fc1.weight"].T.astype(np.float64) + w["fc1.bias"], 0)
    logits = h @ w["fc2.weight"].T.astype(np.float64) + w["fc2.bias"]
    z = logits - logits.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return logits, -logp[np.arange(len(y)), y].mean()


class TorchMLP(torch.nn.Module):
    def __init__(self, w):
        super().__init__()
        self.fc1 = torch.nn.Linear(F, H)
        self.fc2 = torch.nn.Linear(H, C)
        with torch.no_grad():
            for k, v in w.items():
                self.get_parameter(k).copy_(torch.from_numpy(v))

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def rel_err(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.abs(a - b).max() / max(np.abs(b).max(), 1e-30)


# ---- forward ------------------------------------------------------------------


def test_mlp_forward_matches_numpy():
    w = mlp_weights()
    x, y = batch()
    with build_mlp(w) as g, sgrt.Session(g, threads=2) as s:
        s.set_input("x", x)
        s.set_input("y", y)
        s.forward()
        ref_logits, ref_loss = numpy_mlp(w, x, y)
        logits = s.read("logits")
        assert logits.dtype == np.float32 and logits.shape == (N, C)
        assert np.abs(logits - ref_logits).max() <= 1e-5 * max(1.0, np.abs(ref_logits).max())
        loss = s.read("loss")
        assert loss.shape == () and abs(float(loss) - ref_loss) <= 1e-5 * max(1.0, abs(ref_loss))
        outs = s.outputs()
        assert set(outs) == {"logits", "loss"}
        np.testing.assert_array_equal(outs["logits"], logits)


def test_builder_ops_match_numpy():
    """A graph exercising most builder ops, checked op by op against numpy."""
    rng = np.random.default_rng(3)
    xv = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    g = sgrt.Graph()
    x = g.input("x", "f32", xv.shape)
    k = g.constant("k", rng.standard_normal((1, 3, 1, 1)).astype(np.float32))
    # embedding: a [7, 5] table, i64 ids [2, 3] with repeats and i32 ids of rank 0 (one row)
    tab = g.constant("tab", rng.standard_normal((7, 5)).astype(np.float32))
    ids64, id32 = np.array([[6, 0, 6], [3, 3, 1]], np.int64), np.array(4, np.int32)
    outs = {
        "add": g.add(x, k), "sub": x - k, "mul": x * k, "div": g.div(x, g.add_scalar(g.mul(k, k), 1.0)),
        "scal": (x + 2.0) * 0.5, "pow": g.pow_scalar(x, 2.0), "sig": g.sigmoid(x), "tanh": g.tanh(x),
        "clip": g.clip(x, -0.5, 0.25), "relu6": g.relu6(x * 4.0), "softmax": g.softmax(x, axis=1),
        "logsm": g.log_softmax(x, axis=-1), "mean": g.reduce_mean(x, axes=(2, 3), keepdims=True),
        "sum": g.reduce_sum(x, axes=1), "gap": g.global_avg_pool(x), "flat": g.flatten(x, 2),
        "reshape": g.reshape(x, (2, -1)), "transpose": g.transpose(x, (0, 2, 3, 1)),
        "concat": g.concat([x, x * 2.0], axis=1), "slice": g.slice(x, -1, 1, 4),
        "maxpool": g.max_pool2d(x, 2), "avgpool": g.avg_pool2d(x, 3, stride=1, padding=1, count_include_pad=False),
        "matmul": g.matmul(x, g.transpose(x, (0, 1, 3, 2))),
        "exp": g.exp(x), "log": g.log(g.add_scalar(g.abs(x), 0.5)), "sqrt": g.sqrt(g.abs(x)),
        "recip": g.reciprocal(g.add_scalar(g.abs(x), 1.0)), "erf": g.erf(x), "neg": g.neg(x), "sign": g.sign(x),
        "max": g.maximum(x, k), "min": g.minimum(x, k), "where": g.where(g.cast(k, "bool"), x, g.neg(x)),
        "cast": g.cast(g.cast(x * 4.0, "i32"), "f32"),
        "ln": g.layer_norm(x, g.constant("lw", rng.standard_normal(6).astype(np.float32)), None, axis=-1),
        "emb": g.embedding(tab, g.constant("ids64", ids64)), "emb0": g.embedding(tab, g.constant("id32", id32)),
    }
    for name, t in outs.items():
        g.mark_output(t, name)
    g.finalize()
    x64 = xv.astype(np.float64)
    k64 = g["k"].value().astype(np.float64)
    np.testing.assert_array_equal(g["k"].value(), g["k"].value())

    def softmax(a, axis):
        e = np.exp(a - a.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)

    def avgpool_excl(a):
        out = np.zeros_like(a)
        for i in range(a.shape[2]):
            for j in range(a.shape[3]):
                win = a[:, :, max(i - 1, 0):i + 2, max(j - 1, 0):j + 2]
                out[:, :, i, j] = win.mean(axis=(2, 3))
        return out

    ref = {
        "add": x64 + k64, "sub": x64 - k64, "mul": x64 * k64, "div": x64 / (k64 * k64 + 1), "scal": (x64 + 2) * 0.5,
        "pow": x64 ** 2, "sig": 1 / (1 + np.exp(-x64)), "tanh": np.tanh(x64), "clip": np.clip(x64, -0.5, 0.25),
        "relu6": np.clip(x64 * 4, 0, 6), "softmax": softmax(x64, 1), "logsm": np.log(softmax(x64, -1)),
        "mean": x64.mean(axis=(2, 3), keepdims=True), "sum": x64.sum(axis=1),
        "gap": x64.mean(axis=(2, 3), keepdims=True), "flat": x64.reshape(2 * 3, 36), "reshape": x64.reshape(2, -1),
        "transpose": x64.transpose(0, 2, 3, 1), "concat": np.concatenate([x64, 2 * x64], axis=1),
        "slice": x64[..., 1:5],
        "maxpool": x64.reshape(2, 3, 3, 2, 3, 2).max(axis=(3, 5)), "avgpool": avgpool_excl(x64),
        "matmul": x64 @ x64.transpose(0, 1, 3, 2),
        "exp": np.exp(x64), "log": np.log(np.abs(x64) + 0.5), "sqrt": np.sqrt(np.abs(x64)),
        "recip": 1 / (np.abs(x64) + 1), "erf": np.vectorize(math.erf)(x64), "neg": -x64, "sign": np.sign(x64),
        "max": np.maximum(x64, k64), "min": np.minimum(x64, k64), "where": np.where(k64 != 0, x64, -x64),
        "cast": np.trunc((xv * np.float32(4)).astype(np.float64)),
        "ln": (x64 - x64.mean(axis=-1, keepdims=True)) / np.sqrt(x64.var(axis=-1, keepdims=True) + 1e-5)
        * g["lw"].value().astype(np.float64),
        "emb": g["tab"].value()[ids64].astype(np.float64), "emb0": g["tab"].value()[id32].astype(np.float64),
    }
    with sgrt.Session(g, threads=1) as s:
        s.forward({"x": xv})
        for name, want in ref.items():
            got = s.read(name)
            assert got.shape == want.shape, name
            assert np.abs(got - want).max() <= 1e-5 * max(1.0, np.abs(want).max()), name
    g.close()


# ---- training -----------------------------------------------------------------


@pytest.mark.parametrize("opts", [
    dict(momentum=0.9),
    dict(momentum=0.9, nesterov=True, weight_decay=1e-2),
    dict(momentum=0.5, dampening=0.3, weight_decay=1e-3),
    dict(),
])
def test_sgd_steps_match_torch(opts):
    w = mlp_weights()
    lr = 0.1
    g = build_mlp(w, "sgd", **opts)
    s = sgrt.Session(g, threads=2)
    model = TorchMLP(w)
    topt = torch.optim.SGD(model.parameters(), lr=lr, **opts)
    for step in range(3):
        x, y = batch(10 + step)
        s.step({"x": x, "y": y, "lr": lr})
        topt.zero_grad()
        tloss = torch.nn.functional.cross_entropy(model(torch.from_numpy(x)), torch.from_numpy(y))
        tloss.backward()
        topt.step()
        assert rel_err(s.read("loss"), tloss.item()) <= 1e-5
        for name, p in model.named_parameters():
            assert rel_err(s.read(name), p.detach().numpy()) <= 1e-5, (step, name)
            if opts.get("momentum"):
                buf = topt.state[p]["momentum_buffer"].numpy()
                assert rel_err(s.read(name + ".momentum_buffer"), buf) <= 1e-5, (step, name)
    assert s.steps == 3
    s.close()
    g.close()


@pytest.mark.parametrize("decay_min_ndim", [0, 2])
def test_adamw_steps_match_torch(decay_min_ndim):
    """decay_min_ndim 2 against torch's two parameter groups (decay on the weights, none on the biases)."""
    w = mlp_weights(5)
    g = build_mlp(w, "adamw", lr_input=False, lr=0.01, betas=(0.9, 0.99), eps=1e-7, weight_decay=0.05,
                  decay_min_ndim=decay_min_ndim)
    assert g["lr"].role == "constant"
    model = TorchMLP(w)
    ps = list(model.parameters())
    groups = [{"params": [p for p in ps if p.dim() >= decay_min_ndim]},
              {"params": [p for p in ps if p.dim() < decay_min_ndim], "weight_decay": 0.0}]
    topt = torch.optim.AdamW([gr for gr in groups if gr["params"]], lr=0.01, betas=(0.9, 0.99), eps=1e-7,
                             weight_decay=0.05)
    with sgrt.Session(g) as s:
        for step in range(3):
            x, y = batch(20 + step)
            s.step({"x": x, "y": y})
            topt.zero_grad()
            torch.nn.functional.cross_entropy(model(torch.from_numpy(x)), torch.from_numpy(y)).backward()
            topt.step()
            for name, p in model.named_parameters():
                assert rel_err(s.read(name), p.detach().numpy()) <= 1e-5, (step, name)
                st = topt.state[p]
                assert rel_err(s.read(name + ".exp_avg"), st["exp_avg"].numpy()) <= 1e-5
                assert rel_err(s.read(name + ".exp_avg_sq"), st["exp_avg_sq"].numpy()) <= 1e-5
                assert float(s.read(name + ".step")) == step + 1
    g.close()


def build_cnn(wts, bn_training=True):
    """conv(bias) -> batch_norm -> relu -> max_pool -> conv -> gap -> flatten -> linear."""
    g = sgrt.Graph()
    x = g.input("images", "f32", (2, 3, 8, 8))
    y = g.input("labels", "i64", (2,))
    P = {k: (g.state(k, v) if "running" in k else g.parameter(k, v)) for k, v in wts.items()}
    h = g.conv2d(x, P["conv1.weight"], P["conv1.bias"], padding=1)
    h = g.batch_norm(h, P["bn1.weight"], P["bn1.bias"], P["bn1.running_mean"], P["bn1.running_var"],
                     momentum=0.1, eps=1e-5, training=bn_training)
    h = g.max_pool2d(g.relu(h), 2)
    h = g.conv2d(h, P["conv2.weight"], stride=2, padding=(1, 1), groups=2)
    h = g.flatten(g.global_avg_pool(h), 1)
    logits = g.mark_output(g.linear(h, P["fc.weight"], P["fc.bias"]), "logits")
    loss = g.mark_output(g.cross_entropy(logits, y), "loss")
    return g, loss


class TorchCNN(torch.nn.Module):
    def __init__(self, wts):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 6, 3, stride=2, padding=1, groups=2, bias=False)
        self.fc = torch.nn.Linear(6, 4)
        sd = {k: torch.from_numpy(v) for k, v in wts.items()}
        self.load_state_dict(sd, strict=False)

    def forward(self, x):
        h = torch.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 2)
        return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(self.conv2(h), 1), 1))


def cnn_weights():
    rng = np.random.default_rng(7)
    f = lambda *s: (rng.standard_normal(s) * 0.3).astype(np.float32)  # noqa: E731
    return {"conv1.weight": f(8, 3, 3, 3), "conv1.bias": f(8), "bn1.weight": 1 + f(8), "bn1.bias": f(8),
            "bn1.running_mean": f(8), "bn1.running_var": (1 + np.abs(f(8))), "conv2.weight": f(6, 4, 3, 3),
            "fc.weight": f(4, 6), "fc.bias": f(4)}


def test_cnn_train_step_and_eval_match_torch():
    wts = cnn_weights()
    g, loss = build_cnn(wts)
    g.backward(loss)
    g.add_sgd(0.05, momentum=0.9, weight_decay=1e-4)
    g.finalize()
    model = TorchCNN(wts)
    model.train()
    topt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    rng = np.random.default_rng(8)
    with sgrt.Session(g, threads=2) as s:
        for step in range(2):
            x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
            y = np.array([1, 3], dtype=np.int64)
            s.step({"images": x, "labels": y})
            topt.zero_grad()
            tl = torch.nn.functional.cross_entropy(model(torch.from_numpy(x)), torch.from_numpy(y))
            tl.backward()
            topt.step()
            assert rel_err(s.read("loss"), tl.item()) <= 1e-5
            sd = model.state_dict()
            for k in wts:
                assert rel_err(s.read(k), sd[k].numpy()) <= 1e-4, (step, k)
        # Evaluation pass: batch norm on running statistics.
        model.eval()
        x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
        s.forward({"images": x, "labels": np.zeros(2, np.int64)})
        with torch.no_grad():
            ref = model(torch.from_numpy(x)).numpy()
        assert rel_err(s.read("logits"), ref) <= 1e-5
    g.close()


@pytest.mark.parametrize("causal", [False, True])
def test_attention_matches_torch(causal):
    """Graph.attention (the fused op) and its gradients against PyTorch's attention in float64:
    softmax(q k^T / sqrt(d) + mask) v, loss sum(y * r); T 37 (not a multiple of the 64-row tile)."""
    rng = np.random.default_rng(11)
    shapes = {"q": (2, 3, 37, 16), "k": (2, 3, 37, 16), "v": (2, 3, 37, 8)}
    vals = {n: rng.standard_normal(sh).astype(np.float32) for n, sh in shapes.items()}
    r = rng.standard_normal((2, 3, 37, 8)).astype(np.float32)
    g = sgrt.Graph()
    p = {n: g.parameter(n, v) for n, v in vals.items()}
    y = g.mark_output(g.attention(p["q"], p["k"], p["v"], causal=causal), "y")
    g.backward(g.reduce_sum(y * g.constant("r", r)))
    for n in p:
        g.mark_output(g.grad(p[n]))
    g.finalize()
    t = {n: torch.tensor(v, dtype=torch.float64, requires_grad=True) for n, v in vals.items()}
    s = t["q"] @ t["k"].transpose(-1, -2) / math.sqrt(16)
    if causal:
        s = s.masked_fill(torch.ones(37, 37, dtype=torch.bool).triu(1), float("-inf"))
    ty = torch.softmax(s, -1) @ t["v"]
    (ty * torch.from_numpy(r).double()).sum().backward()
    with sgrt.Session(g, threads=2) as sess:
        sess.step()
        assert rel_err(sess.read("y"), ty.detach().numpy()) <= 1e-5
        for n in p:
            assert rel_err(sess.read(n + ".grad"), t[n].grad.numpy()) <= 1e-5, n
    g.close()


def test_reduce_max_min_cumsum_match_torch():
    """Graph.reduce_max / reduce_min (amax / amin, ties included) and cumsum (and its exclusive, reverse
    form) with their gradients, against PyTorch in float64."""
    rng = np.random.default_rng(13)
    xv = rng.standard_normal((3, 5, 4)).astype(np.float32)
    xv[1, 0, :] = xv[1, 2, :] = xv[1].max(axis=0) + 1  # two maxima along axis 1: amax splits the gradient
    xv[2, 3, :] = xv[2, 4, :] = xv[2].min(axis=0) - 1  # and two minima
    r = {k: rng.standard_normal(sh).astype(np.float32) for k, sh in (("mx", (3, 4)), ("mn", (3, 1, 4)),
                                                                     ("cs", (3, 5, 4)), ("cx", (3, 5, 4)))}
    g = sgrt.Graph()
    x = g.parameter("x", xv)
    outs = {"mx": g.reduce_max(x, 1), "mn": g.reduce_min(x, axes=[1], keepdims=True), "cs": g.cumsum(x, 1),
            "cx": g.cumsum(x, -1, exclusive=True, reverse=True)}
    loss = None
    for k, y in outs.items():
        g.mark_output(y, k)
        term = g.reduce_sum(y * g.constant("r_" + k, r[k]))
        loss = term if loss is None else loss + term
    g.backward(loss)
    g.mark_output(g.grad(x))
    g.finalize()
    t = torch.tensor(xv, dtype=torch.float64, requires_grad=True)
    flipped = torch.flip(t, [-1])
    want = {"mx": t.amax(1), "mn": t.amin(1, keepdim=True), "cs": torch.cumsum(t, 1),
            "cx": torch.flip(torch.cumsum(flipped, -1) - flipped, [-1])}
    sum((want[k] * torch.from_numpy(r[k]).double()).sum() for k in want).backward()
    with sgrt.Session(g, threads=2) as sess:
        sess.step()
        for k in want:
            assert rel_err(sess.read(k), want[k].detach().numpy()) <= 1e-6, k
        assert rel_err(sess.read("x.grad"), t.grad.numpy()) <= 1e-6
    g.close()


def test_topk_matches_torch():
    """Graph.topk (largest and smallest, tie-free rows) against torch.topk in float64: values, indices and
    the gradient through the values; Graph.sin, cos and acos with their gradients; k past the last dim is
    refused."""
    rng = np.random.default_rng(14)
    xv = rng.permutation(6 * 9).reshape(6, 9).astype(np.float32) / 7.0 - 3.0  # distinct values
    r = {k: rng.standard_normal((6, 3)).astype(np.float32) for k in ("hi", "lo")}
    g = sgrt.Graph()
    x = g.parameter("x", xv)
    hi, hi_i = g.topk(x, 3)
    lo, lo_i = g.topk(x, 3, largest=False)
    for name, y in (("hi", hi), ("hi_i", hi_i), ("lo", lo), ("lo_i", lo_i)):
        g.mark_output(y, name)
    g.backward(g.reduce_sum(hi * g.constant("r_hi", r["hi"])) + g.reduce_sum(lo * g.constant("r_lo", r["lo"])))
    g.mark_output(g.grad(x))
    g.finalize()
    t = torch.tensor(xv, dtype=torch.float64, requires_grad=True)
    th, thi = torch.topk(t, 3)
    tl, tli = torch.topk(t, 3, largest=False)
    ((th * torch.from_numpy(r["hi"]).double()).sum() + (tl * torch.from_numpy(r["lo"]).double()).sum()).backward()
    with sgrt.Session(g, threads=2) as sess:
        sess.step()
        assert rel_err(sess.read("hi"), th.detach().numpy()) <= 1e-7
        assert rel_err(sess.read("lo"), tl.detach().numpy()) <= 1e-7
        assert (sess.read("hi_i") == thi.numpy()).all() and (sess.read("lo_i") == tli.numpy()).all()
        assert rel_err(sess.read("x.grad"), t.grad.numpy()) <= 1e-7
    g.close()
    g = sgrt.Graph()
    x = g.parameter("x", xv / 30.0)  # in (-1, 1) for acos
    y = g.sin(x) + g.cos(x) * 2.0 + g.acos(x) * 3.0
    g.mark_output(y, "y")
    g.backward(g.reduce_sum(y))
    g.mark_output(g.grad(x))
    g.finalize()
    t = torch.tensor(xv / 30.0, dtype=torch.float64, requires_grad=True)
    ty = torch.sin(t) + torch.cos(t) * 2 + torch.acos(t) * 3
    ty.sum().backward()
    with sgrt.Session(g, threads=2) as sess:
        sess.step()
        assert rel_err(sess.read("y"), ty.detach().numpy()) <= 1e-6
        assert rel_err(sess.read("x.grad"), t.grad.numpy()) <= 1e-6
    g.close()
    g = sgrt.Graph()
    with pytest.raises(sgrt.InvalidArgumentError, match="k 10 is more than the last dim") as e:
        g.topk(g.input("x", "f32", (2, 9)), 10)
    assert e.value.code == "SG_ERR_SHAPE"
    g.close()


def test_attention_dropout_matches_unfused():
    """Graph.attention(dropout_p=0.3, seed=5) against the same attention from matmul, softmax and
    dropout(0.3, seed 5) (the same masks): y and the gradients; dropout_p outside [0, 1) is refused."""
    rng = np.random.default_rng(12)
    shapes = {"q": (2, 2, 21, 8), "k": (2, 2, 21, 8), "v": (2, 2, 21, 8)}
    vals = {n: rng.standard_normal(sh).astype(np.float32) for n, sh in shapes.items()}
    r = rng.standard_normal((2, 2, 21, 8)).astype(np.float32)
    got = []
    for fused in (True, False):
        g = sgrt.Graph()
        p = {n: g.parameter(n, v) for n, v in vals.items()}
        if fused:
            y = g.attention(p["q"], p["k"], p["v"], dropout_p=0.3, seed=5)
        else:
            s = g.mul_scalar(g.matmul(p["q"], g.transpose(p["k"], [0, 1, 3, 2])), 1 / math.sqrt(8))
            y = g.matmul(g.dropout(g.softmax(s, -1), 0.3, seed=5), p["v"])
        g.mark_output(y, "y")
        g.backward(g.reduce_sum(y * g.constant("r", r)))
        for n in p:
            g.mark_output(g.grad(p[n]))
        g.finalize()
        with sgrt.Session(g, threads=2) as sess:
            sess.step()
            got.append({n: sess.read(n) for n in ["y", "q.grad", "k.grad", "v.grad"]})
        g.close()
    for n in got[0]:
        assert rel_err(got[0][n], got[1][n]) <= 1e-5, n
    g = sgrt.Graph()
    q = g.input("q", np.float32, (2, 4, 8))
    expect_error("SG_ERR_ATTRIBUTE", g.attention, q, q, q, 0.0, False, 1.5, match="dropout is 1.5; must be in [0, 1)")
    g.close()


# ---- errors -------------------------------------------------------------------


def expect_error(code, fn_, *args, match=None):
    with pytest.raises(sgrt.Error) as ei:
        fn_(*args)
    e = ei.value
    assert e.code == code, repr(e)
    assert e.status == sgrt.STATUS[code]
    assert e.message, "the error carries the C message"
    assert str(e).startswith(code + ": ")
    if match:
        assert match in e.message, e.message
    return e


def test_errors_carry_code_and_message(tmp_path):
    w = mlp_weights()
    g = build_mlp(w, "sgd", momentum=0.9)
    s = sgrt.Session(g, compile=False)
    # Step before compile.
    expect_error("SG_ERR_STATE", s.step, match="compile")
    s.compile()
    expect_error("SG_ERR_STATE", s.compile, match="already compiled")
    x, y = batch()
    # Wrong shape and dtype: the C message names both.
    e = expect_error("SG_ERR_SHAPE", s.set_input, "x", np.zeros((N + 1, F), np.float32))
    assert "'x'" in e.message and "[8,12]" in e.message and "[9,12]" in e.message
    expect_error("SG_ERR_DTYPE", s.set_input, "y", y.astype(np.int32), match="'y'")
    # float64 for an f32 input: converted, with a ConversionWarning (numpy's default dtype); an int32 array
    # for an i64 input stays an error (above).
    with pytest.warns(sgrt.ConversionWarning, match="float64"):
        s.set_input("x", x.astype(np.float64))
    # Unknown names, and a tensor that is not an input.
    expect_error("SG_ERR_NOT_FOUND", s.set_input, "nope", x, match="'nope'")
    expect_error("SG_ERR_NOT_FOUND", s.read, "nope", match="'nope'")
    expect_error("SG_ERR_NOT_FOUND", s.write, "nope", x)
    expect_error("SG_ERR_INVALID_ARG", s.set_input, "fc1.weight", w["fc1.weight"], match="not an input")
    # Inputs missing at step time.
    expect_error("SG_ERR_STATE", s.step, match="has not been set")
    # Writing: wrong shape, wrong dtype, an input.
    expect_error("SG_ERR_SHAPE", s.write, "fc1.weight", w["fc1.weight"].T)
    expect_error("SG_ERR_DTYPE", s.write, "fc1.weight", w["fc1.weight"].astype(np.float64))
    expect_error("SG_ERR_INVALID_ARG", s.write, "x", x)
    # A transient tensor is not kept.
    s.step({"x": x, "y": y, "lr": 0.1})
    expect_error("SG_ERR_STATE", s.read, "fc1.weight.grad", match="not kept")
    # A closed session.
    s.close()
    expect_error("SG_ERR_STATE", s.step, match="closed")
    s.close()  # twice is fine
    # Builder errors name the op and the shapes, and stick to the graph.
    g2 = sgrt.Graph()
    a = g2.input("a", "f32", (4, 3))
    b = g2.parameter("b", np.zeros((5, 4), np.float32))
    e = expect_error("SG_ERR_SHAPE", g2.linear, a, b)
    assert "[4,3]" in e.message and "[5,4]" in e.message
    expect_error("SG_ERR_SHAPE", g2.relu, a, match="earlier builder error")
    # finalize() reports the first builder call's own message, as the C API does.
    e = expect_error("SG_ERR_SHAPE", g2.finalize)
    assert "gemm" in e.message and "[4,3]" in e.message and "[5,4]" in e.message, e.message
    g2.close()
    # Duplicate names; builder calls on a finalized graph; unknown tensor names.
    g3 = sgrt.Graph()
    g3.input("a", "f32", (2,))
    expect_error("SG_ERR_DUPLICATE", g3.input, "a", "f32", (2,))
    g3.close()
    expect_error("SG_ERR_STATE", g.relu, "x", match="finalized")
    expect_error("SG_ERR_NOT_FOUND", g.tensor, "nope")
    expect_error("SG_ERR_NOT_FOUND", g.relu, "nope")
    expect_error("SG_ERR_DTYPE", g3.__class__().input, "q", np.float64, (2,))
    # Files.
    expect_error("SG_ERR_IO", sgrt.Graph.load, str(tmp_path / "missing.sgg"))
    bad = tmp_path / "bad.sgg"
    bad.write_bytes(b"not a graph at all" * 10)
    expect_error("SG_ERR_FORMAT", sgrt.Graph.load, str(bad))
    expect_error("SG_ERR_INVALID_ARG", sgrt.Graph.load, str(bad), 4)
    # Sessions need a finalized graph.
    g4 = sgrt.Graph()
    g4.input("a", "f32", (2,))
    expect_error("SG_ERR_STATE", sgrt.Session, g4, match="finalize")
    expect_error("SG_ERR_NOT_FOUND", sgrt.Session, g, 1, 0, "tpu", match="tpu")
    g4.close()
    g.close()
    expect_error("SG_ERR_STATE", g.finalize, match="closed")
    expect_error("SG_ERR_STATE", sgrt.Session, g, match="closed")


def test_errors_are_the_builtin_exceptions_too(tmp_path):
    """Each status is also the Python exception a caller expects (and pickles as itself)."""
    import pickle
    w = mlp_weights()
    g = build_mlp(w, "sgd", momentum=0.9)
    with sgrt.Session(g) as s:
        x, y = batch()
        with pytest.raises(ValueError) as ei:  # SG_ERR_SHAPE
            s.set_input("x", np.zeros((N + 1, F), np.float32))
        assert isinstance(ei.value, sgrt.InvalidArgumentError) and ei.value.code == "SG_ERR_SHAPE"
        with pytest.raises(TypeError) as ei:  # SG_ERR_DTYPE
            s.set_input("y", y.astype(np.int32))
        assert isinstance(ei.value, sgrt.DtypeError) and isinstance(ei.value, sgrt.Error)
        with pytest.raises(LookupError) as ei:  # SG_ERR_NOT_FOUND
            s.read("nope")
        assert isinstance(ei.value, sgrt.NotFoundError)
        e2 = pickle.loads(pickle.dumps(ei.value))
        assert type(e2) is sgrt.NotFoundError and (e2.status, e2.code, e2.message) == (
            ei.value.status, ei.value.code, ei.value.message)
    with pytest.raises(FileNotFoundError) as ei:  # SG_ERR_IO, no such file
        sgrt.Graph.load(str(tmp_path / "missing.sgg"))
    assert isinstance(ei.value, sgrt.MissingFileError) and isinstance(ei.value, sgrt.FileError)
    assert ei.value.code == "SG_ERR_IO"
    bad = tmp_path / "bad.sgg"
    bad.write_bytes(b"not a graph at all" * 10)
    with pytest.raises(ValueError) as ei:  # SG_ERR_FORMAT
        sgrt.Graph.load(str(bad))
    assert isinstance(ei.value, sgrt.FormatError)
    with pytest.raises(RuntimeError) as ei:  # SG_ERR_STATE
        sgrt.Session(g, compile=False).step()
    assert isinstance(ei.value, sgrt.RuntimeFailure) and ei.value.code == "SG_ERR_STATE"
    g.close()


def test_forward_and_step_return_the_outputs():
    """forward() and step() return {name: array} of the graph outputs, as ONNX Runtime's run() does."""
    w = mlp_weights()
    g = build_mlp(w, "sgd", momentum=0.9)
    x, y = batch()
    with sgrt.Session(g, threads=1) as s:
        out = s.forward({"x": x, "y": y, "lr": 0.0})
        assert set(out) == set(s.outputs()) and "logits" in out
        ref = numpy_mlp(w, x, y)
        assert rel_err(out["logits"], ref[0]) <= 1e-5
        after = s.step({"x": x, "y": y, "lr": 0.1})
        assert set(after) == set(out) and isinstance(after["loss"], np.ndarray)
        np.testing.assert_array_equal(after["loss"], s.read("loss"))


def test_session_trace(tmp_path):
    """Session(trace=True).write_trace(): Chrome trace JSON of every op of every step, as a rank's."""
    import json
    w = mlp_weights()
    g = build_mlp(w, "sgd", momentum=0.9)
    x, y = batch()
    with sgrt.Session(g, threads=1, trace=True) as s:
        s.step({"x": x, "y": y, "lr": 0.1})
        s.step({"x": x, "y": y, "lr": 0.1})
        s.write_trace(str(tmp_path / "t.json"))
    ev = json.load(open(tmp_path / "t.json"))["traceEvents"]
    cats = [e.get("cat") for e in ev if e.get("ph") == "X"]
    assert cats.count("step") == 2 and "forward" in cats and "backward" in cats and "update" in cats, cats
    assert [e["name"] for e in ev if e.get("cat") == "step"] == ["step 1", "step 2"]
    with sgrt.Session(g, threads=1) as s:
        expect_error("SG_ERR_STATE", s.write_trace, str(tmp_path / "u.json"), match="tracing is off")
    g.close()


def test_load_recognises_onnx_by_content(tmp_path):
    """A model not named .onnx is imported as ONNX when it is not .sgg, as the sgrt tool does."""
    if not sgrt.has_onnx():
        pytest.skip("no ONNX importer in this libsgrt")
    src = os.path.join(os.path.dirname(__file__), "..", "data", "onnx", "cnn_eval.onnx")
    dst = tmp_path / "model.bin"
    dst.write_bytes(open(src, "rb").read())
    a, b = sgrt.Graph.load(src), sgrt.Graph.load(str(dst))
    assert a.hash() == b.hash()


def test_onnx_constants():
    """constants= imports the named initializers (buffers that arithmetic reads) as constants, from a file
    and from bytes; a name that is no initializer is refused naming it (sg_onnx_params.constants)."""
    if not sgrt.has_onnx():
        pytest.skip("no ONNX importer in this libsgrt")
    src = os.path.join(os.path.dirname(__file__), "..", "data", "onnx", "buffer_pe.onnx")
    default = sgrt.Graph.load(src)
    assert default.tensor("pe").role == "parameter"
    for g in (sgrt.Graph.load(src, constants=["pe"]),
              sgrt.Graph.from_bytes(open(src, "rb").read(), format="onnx", constants=["pe"])):
        assert "pe" not in [t.name for t in g.tensors_with_role("parameter")]
        assert len(g.tensors_with_role("parameter")) == len(default.tensors_with_role("parameter")) - 1
        g.close()
    expect_error("SG_ERR_NOT_FOUND", lambda: sgrt.Graph.load(src, constants=["pe", "rope.cos"]),
                 match="'rope.cos' is no initializer")
    expect_error("SG_ERR_INVALID_ARG", lambda: sgrt.Graph.load(src, constants="pe"), match="list of initializer names")
    default.close()


def test_onnx_dims():
    """dims= sizes symbolic dims by name (sg_onnx_params.dims), as a dict or "NAME=SIZE" strings, from a
    file and from bytes, with batch= for the rest; the logits at [3,5] are PyTorch's
    (make_onnx_dynamo.py); bad entries are refused naming them."""
    if not sgrt.has_onnx():
        pytest.skip("no ONNX importer in this libsgrt")
    d = os.path.join(os.path.dirname(__file__), "..", "data", "onnx")
    src = os.path.join(d, "dyn_gpt_bs_ts.onnx")
    ids = np.fromfile(os.path.join(d, "dyn_gpt_bs_ids.i64"), dtype="<i8")[:15].reshape(3, 5)
    want = np.fromfile(os.path.join(d, "dyn_gpt_bs_logits.f32"), dtype="<f4").reshape(3, 5, 64)
    for g in (sgrt.Graph.load(src, dims={"batch": 3, "seq": 5}),
              sgrt.Graph.load(src, dims=["seq=5"], batch=3),
              sgrt.Graph.from_bytes(open(src, "rb").read(), format="onnx", dims=["batch=3", "seq=5"])):
        assert [(t.name, t.shape) for t in g.inputs] == [("idx", (3, 5))]
        with sgrt.Session(g, threads=1) as s:
            s.set_input("idx", ids)
            s.forward()
            got = s.read("logits")
        assert np.abs(got - want).max() <= 1e-5, np.abs(got - want).max()
        g.close()
    expect_error("SG_ERR_SHAPE", lambda: sgrt.Graph.load(src, dims={"batch": 3}), match="sgrt --dim seq=N")
    expect_error("SG_ERR_NOT_FOUND", lambda: sgrt.Graph.load(src, dims={"batch": 3, "sq": 5}),
                 match="names 'sq', which no graph input has")
    expect_error("SG_ERR_INVALID_ARG", lambda: sgrt.Graph.load(src, dims={"seq": 0}), match="'seq=0'")
    expect_error("SG_ERR_INVALID_ARG", lambda: sgrt.Graph.load(src, dims={"seq": "5"}), match="sizes")
    expect_error("SG_ERR_INVALID_ARG", lambda: sgrt.Graph.load(src, dims="seq=5"), match="NAME=SIZE")
    expect_error("SG_ERR_INVALID_ARG", lambda: sgrt.Graph.load(src, dims=["seq"]), match="NAME=SIZE")
    sgg = os.path.join(d, "..", "mlp.sgg")
    if os.path.exists(sgg):
        expect_error("SG_ERR_INVALID_ARG", lambda: sgrt.Graph.load(sgg, dims={"seq": 5}), match="ONNX models only")


def test_public_api_has_type_hints():
    """The public classes' methods carry type hints that resolve (typing.get_type_hints), and the main
    ones are annotated at all (so the hints cannot rot unnoticed)."""
    import inspect
    import typing
    annotated = 0
    for cls in (sgrt.Graph, sgrt.Session, sgrt.Dist):
        for name, f in inspect.getmembers(cls, inspect.isfunction):
            if name.startswith("_") and name != "__init__":
                continue
            hints = typing.get_type_hints(f)
            annotated += bool(hints)
    for f in (sgrt.aligned, sgrt.aligned_empty):
        assert typing.get_type_hints(f)
    for f in (sgrt.Graph.linear, sgrt.Graph.input, sgrt.Session.step, sgrt.Session.forward, sgrt.Session.read,
              sgrt.Dist.step, sgrt.Dist.model):
        assert "return" in typing.get_type_hints(f), f
    assert annotated >= 80, annotated


def test_error_is_exception_with_fields():
    e = sgrt.Error(-9, "SG_ERR_SHAPE", "x is wrong")
    assert isinstance(e, Exception) and e.status == -9 and e.code == "SG_ERR_SHAPE" and e.message == "x is wrong"
    import pickle
    e2 = pickle.loads(pickle.dumps(e))
    assert (e2.status, e2.code, e2.message) == (-9, "SG_ERR_SHAPE", "x is wrong")


# ---- checkpoints, files, hashes -----------------------------------------------


def test_checkpoint_round_trip(tmp_path):
    w = mlp_weights(2)
    g = build_mlp(w, "sgd", momentum=0.9)
    ck = str(tmp_path / "ck.sgg")
    with sgrt.Session(g, threads=1) as s:
        for i in range(2):
            x, y = batch(30 + i)
            s.step({"x": x, "y": y, "lr": 0.05})
        s.save_checkpoint(ck)
        saved = {t.name: s.read(t.name) for t in g.tensors if t.role in ("parameter", "optimizer_state")}
        assert any(np.abs(v).max() > 0 for k, v in saved.items() if k.endswith("momentum_buffer"))
        x, y = batch(40)
        s.step({"x": x, "y": y, "lr": 0.05})
        after_a = {k: s.read(k) for k in saved}
    # A fresh session of the same graph, restored from the checkpoint, takes the same step.
    with sgrt.Session(g, threads=1) as s2:
        s2.load_checkpoint(ck)
        assert s2.steps == 2
        for k, v in saved.items():
            np.testing.assert_array_equal(s2.read(k), v)
        s2.step({"x": x, "y": y, "lr": 0.05})
        for k, v in after_a.items():
            np.testing.assert_array_equal(s2.read(k), v)
    # The checkpoint is a graph file with the values as initializers.
    with sgrt.Graph.load(ck) as g2:
        # (Its hash differs: the optimizer state now has initializers.)
        # It also carries the step count (restored by load_checkpoint).
        assert [t.name for t in g2.tensors if t.name != "sgrt.session.steps"] == [t.name for t in g.tensors]
        assert g2.ops == g.ops
        for k, v in saved.items():
            np.testing.assert_array_equal(g2[k].value(), v)
    # A checkpoint of another graph does not fit, and changes nothing.
    other = build_mlp(mlp_weights(), "sgd")  # no momentum buffers
    ock = str(tmp_path / "other.sgg")
    with sgrt.Session(other) as so:
        so.save_checkpoint(ock)
    with sgrt.Session(g) as s3:
        before = s3.read("fc1.weight")
        expect_error("SG_ERR_NOT_FOUND", s3.load_checkpoint, ock, match="momentum_buffer")
        np.testing.assert_array_equal(s3.read("fc1.weight"), before)
    other.close()
    g.close()


def test_graph_files_hashes_and_listing(tmp_path, data_dir):
    w = mlp_weights()
    g = build_mlp(w, "sgd", momentum=0.9)
    p = tmp_path / "m.sgg"
    g.save(p)  # a pathlib path works too
    g2 = sgrt.Graph.load(str(p))
    assert g2.finalized and g2.hash() == g.hash() and g2.hash(weights=True) == g.hash(weights=True)
    assert g.hash() != g.hash(weights=True)
    g3 = sgrt.Graph.from_bytes(g.to_bytes())
    assert g3.hash(weights=True) == g.hash(weights=True)
    # Same structure, other weights: same structural hash, other weights hash.
    w2 = dict(w, **{"fc1.bias": w["fc1.bias"] + 1})
    g4 = build_mlp(w2, "sgd", momentum=0.9)
    assert g4.hash() == g.hash() and g4.hash(weights=True) != g.hash(weights=True)
    assert [(t.name, t.dtype_name, t.shape, t.role) for t in g2.inputs] == [
        ("x", "f32", (N, F), "input"), ("y", "i64", (N,), "input"), ("lr", "f32", (), "input")]
    assert [t.name for t in g2.outputs] == ["logits", "loss"]
    assert sorted(t.name for t in g2.parameters) == sorted(w)
    np.testing.assert_array_equal(g2["fc2.weight"].value(), w["fc2.weight"])
    assert g2["fc2.weight"].dtype == np.float32 and g2["x"].value() is None
    assert "fc1.weight.momentum_buffer" in g2 and "nope" not in g2
    assert g2.grad("fc1.weight").name == "fc1.weight.grad"
    kinds = [o.kind for o in g2.ops]
    assert kinds.count("sgd_update") == 4 and kinds[:2] == ["gemm", "relu"]
    # The committed sample graph.
    m = sgrt.Graph.load(os.path.join(data_dir, "mlp.sgg"))
    assert [t.name for t in m.inputs][:3] == ["x", "labels", "lr"]
    assert [(t.name, t.shape) for t in m.outputs] == [("loss", ()), ("logits", (8, 10))]
    # DOT output.
    g.write_dot(tmp_path / "m.dot")
    assert "digraph" in (tmp_path / "m.dot").read_text()
    for x in (g, g2, g3, g4, m):
        x.close()


def test_clone_loaded_model_and_train(tmp_path):
    """The path a training script takes on a loaded model: load, clone, add a
    loss, backward, optimizer, finalize; then one step matches torch."""
    w = mlp_weights(4)
    g = sgrt.Graph()
    x = g.input("x", "f32", (N, F))
    P = {k: g.parameter(k, v) for k, v in w.items()}
    h = g.relu(g.linear(x, P["fc1.weight"], P["fc1.bias"]))
    g.mark_output(g.linear(h, P["fc2.weight"], P["fc2.bias"]), "logits")
    g.finalize()
    g.save(tmp_path / "fwd.sgg")
    g.close()
    model = sgrt.Graph.load(tmp_path / "fwd.sgg")
    t = model.clone()
    assert not t.finalized
    labels = t.input("labels", "i64", (N,))
    loss = t.mark_output(t.cross_entropy(t.tensor("logits"), labels), "loss")
    t.backward(loss)
    lr = t.input("lr", "f32", ())
    t.add_sgd(lr, momentum=0.9, nesterov=True)
    t.finalize()
    model.close()  # the clone is independent
    tm = TorchMLP(w)
    topt = torch.optim.SGD(tm.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    with sgrt.Session(t) as s:
        xs, ys = batch(50)
        s.step({"x": xs, "labels": ys, "lr": 0.1})
        topt.zero_grad()
        torch.nn.functional.cross_entropy(tm(torch.from_numpy(xs)), torch.from_numpy(ys)).backward()
        topt.step()
        for name, p in tm.named_parameters():
            assert rel_err(s.read(name), p.detach().numpy()) <= 1e-5
    t.close()


# ---- zero copy and lifetimes --------------------------------------------------


def test_bind_input_is_zero_copy():
    w = mlp_weights()
    g = build_mlp(w)
    x, y = batch()
    with sgrt.Session(g) as s:
        xb = sgrt.aligned_empty((N, F), np.float32)
        assert xb.ctypes.data % 64 == 0 and xb.flags.c_contiguous
        xb[...] = x
        s.bind_input("x", xb)
        s.bind_input("y", sgrt.aligned(y))
        s.forward()
        np.testing.assert_allclose(s.read("logits"), numpy_mlp(w, x, y)[0], rtol=0, atol=1e-5)
        # The session reads the array's memory as it is at each pass: no copy was made.
        xb *= 2.0
        s.forward()
        np.testing.assert_allclose(s.read("logits"), numpy_mlp(w, 2 * x, y)[0], rtol=0, atol=1e-5)
        np.testing.assert_array_equal(s.read("x"), xb)
        # Misaligned, non-contiguous, wrong dtype or not an array: clear errors.
        raw = sgrt.aligned_empty(N * F + 1, np.float32)
        expect_error("SG_ERR_INVALID_ARG", s.bind_input, "x", raw[1:].reshape(N, F), match="64-byte aligned")
        big = sgrt.aligned_empty((N, 2 * F), np.float32)
        expect_error("SG_ERR_INVALID_ARG", s.bind_input, "x", big[:, ::2], match="C-contiguous")
        expect_error("SG_ERR_DTYPE", s.bind_input, "x", sgrt.aligned(x.astype(np.float16)))
        expect_error("SG_ERR_INVALID_ARG", s.bind_input, "x", x.tolist(), match="numpy array")
        # set_input replaces the binding with a copy.
        s.set_input("x", x)
        xb[...] = 0
        s.forward()
        np.testing.assert_allclose(s.read("logits"), numpy_mlp(w, x, y)[0], rtol=0, atol=1e-5)
    g.close()


def test_lifetimes_any_order():
    w = mlp_weights()
    x, y = batch()
    # Closing the graph first keeps the session working.
    g = build_mlp(w)
    s = sgrt.Session(g)
    g.close()
    s.forward({"x": x, "y": y})
    assert s.read("logits").shape == (N, C)
    s.close()
    # Dropping references in any order, with the collector running in between.
    for order in range(2):
        g = build_mlp(w)
        s = sgrt.Session(g)
        t = g["x"]
        if order == 0:
            del g
            gc.collect()
            s.forward({"x": x, "y": y})
            del s
        else:
            del s
            gc.collect()
            assert t.name == "x"
            del g
        del t
        gc.collect()
    # A cycle holding both.
    g = build_mlp(w)
    s = sgrt.Session(g)
    cycle = [g, s]
    cycle.append(cycle)
    del g, s, cycle
    gc.collect()


def test_misc_api():
    assert sgrt.version().count(".") == 2
    assert os.path.exists(sgrt.library_path) or sgrt.library_path.startswith("libsgrt")
    sgrt.set_log_level("warn")
    with pytest.raises(sgrt.Error):
        sgrt.set_log_level("loud")
    assert isinstance(sgrt.has_onnx(), bool)
    g = sgrt.Graph()
    a = g.input("a", "f32", (2, 3))
    outs = g.add_op("relu", [a])
    assert len(outs) == 1 and outs[0].shape == (2, 3)
    assert g.add_op("reduce_sum", [a], {"axes": [1], "keepdims": 0})[0].shape == (2,)
    assert g.add_op("mul_scalar", [a], {"value": 2.5})[0].shape == (2, 3)
    assert g.status == 0 and repr(a).startswith("<sgrt.Tensor 'a'")
    other = sgrt.Graph()
    b = other.input("b", "f32", (2, 3))
    expect_error("SG_ERR_INVALID_ARG", g.add, a, b, match="another graph")
    other.close()
    g.close()
    assert "closed" in repr(g)


def test_compile_cache(tmp_path, monkeypatch):
    """sgrt.cache_*: a fused session fills an empty cache with one entry, which
    the listing validates and describes; a bad key and an unknown one raise;
    clearing removes the entry and leaves other files alone."""
    d = tmp_path / "cache"
    monkeypatch.setenv("SG_CACHE_DIR", str(d))
    info = sgrt.cache_info()
    assert info["dir"] == str(d) and not info["exists"] and info["entries"] == 0, info
    g = sgrt.Graph()
    x = g.input("x", "f32", (4, 8))
    g.mark_output(g.relu(g.add(x, x)), "y")  # add + relu: one generated kernel
    g.finalize()
    xs = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
    with sgrt.Session(g, threads=1) as s:
        s.forward({"x": xs})
        np.testing.assert_array_equal(s.read("y"), np.maximum(xs + xs, 0))
    g.close()
    entries = sgrt.cache_list()
    assert len(entries) == 1, entries
    e = entries[0]
    assert e["valid"] and e["problem"] == "" and e["kernels"] == 1 and e["fused_ops"] == 2, e
    assert e["device"] == "cpu" and e["sgrt_version"] == sgrt.version() and len(e["key"]) == 32, e
    assert sgrt.cache_entry(e["key"].upper()) == e
    info = sgrt.cache_info()
    assert info["exists"] and info["entries"] == 1 and info["bytes"] == e["bytes"], info
    with pytest.raises(sgrt.Error) as bad:
        sgrt.cache_entry("not-a-key")
    assert bad.value.code == "SG_ERR_INVALID_ARG" and "not-a-key" in bad.value.message
    with pytest.raises(sgrt.Error) as missing:
        sgrt.cache_clear(key="0" * 32)
    assert missing.value.code == "SG_ERR_NOT_FOUND"
    (d / "notes.txt").write_text("not the cache's")
    assert sgrt.cache_clear() == 1
    assert sgrt.cache_list() == [] and (d / "notes.txt").exists()


# ---- matmul precision ---------------------------------------------------------


def bf16_round(a):
    """f32 -> nearest bfloat16 (ties to even), kept as f32: what a bf16 matmul does to each operand."""
    bits = np.ascontiguousarray(a, np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32)


def cpu_has_bf16_dot():
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read().split()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def test_matmul_precision(monkeypatch):
    """Session(matmul_precision=): "f32" gives the exact f32 products; "bf16" the f32 products of operands
    rounded to bfloat16 (gemm with its f32 bias, and matmul), far enough from the f32 ones to tell apart;
    "default" follows SG_MATMUL_PRECISION; anything else is a ValueError naming the value."""
    M, K, Nn = 24, 384, 40
    rng = np.random.default_rng(11)
    av = rng.standard_normal((M, K)).astype(np.float32)
    bv = rng.standard_normal((Nn, K)).astype(np.float32)  # gemm's B, transposed (trans_b)
    cv = rng.standard_normal(Nn).astype(np.float32)
    g = sgrt.Graph()
    a, b = g.input("a", "f32", (M, K)), g.input("b", "f32", (Nn, K))
    c = g.input("c", "f32", (Nn,))
    g.mark_output(g.gemm(a, b, c, trans_b=True), "gemm")
    g.mark_output(g.matmul(a, g.transpose(b, (1, 0))), "mm")
    g.finalize()
    feeds = {"a": av, "b": bv, "c": cv}
    f64 = np.float64
    exact = {"gemm": av.astype(f64) @ bv.T.astype(f64) + cv, "mm": av.astype(f64) @ bv.T.astype(f64)}
    ar, br = bf16_round(av).astype(f64), bf16_round(bv).astype(f64)
    rounded = {"gemm": ar @ br.T + cv, "mm": ar @ br.T}

    def run(precision):
        with sgrt.Session(g, threads=2, matmul_precision=precision) as s:
            return s.forward(feeds)

    monkeypatch.delenv("SG_MATMUL_PRECISION", raising=False)
    for precision in ("f32", "default"):
        out = run(precision)
        for k in exact:
            assert rel_err(out[k], exact[k]) <= 1e-5, (precision, k, rel_err(out[k], exact[k]))
    for bad in ("fp16", "BF16", 2, None):
        with pytest.raises(ValueError) as ei:
            sgrt.Session(g, matmul_precision=bad)
        assert repr(bad) in str(ei.value) and "'bf16'" in str(ei.value), str(ei.value)
    if not cpu_has_bf16_dot():
        g.close()
        pytest.skip("this CPU has no bf16 dot-product instructions (avx512_bf16, amx_bf16)")
    try:
        out = run("bf16")
    except sgrt.Error as e:
        if e.code != "SG_ERR_UNSUPPORTED":
            raise
        g.close()
        pytest.skip("bf16 matmuls unsupported here: %s" % e.message)
    for k in exact:
        assert rel_err(out[k], rounded[k]) <= 1e-5, (k, rel_err(out[k], rounded[k]))
        assert rel_err(out[k], exact[k]) > 1e-4, (k, rel_err(out[k], exact[k]))
    # The environment's default, and an explicit "f32" over it.
    monkeypatch.setenv("SG_MATMUL_PRECISION", "bf16")
    out = run("default")
    assert rel_err(out["mm"], rounded["mm"]) <= 1e-5, rel_err(out["mm"], rounded["mm"])
    out = run("f32")
    assert rel_err(out["mm"], exact["mm"]) <= 1e-5, rel_err(out["mm"], exact["mm"])
    g.close()
