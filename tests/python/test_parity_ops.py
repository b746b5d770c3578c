"""PyTorch parity of imported MLPs with GELU and LayerNorm (issue 17, SPEC G5).

Each model is exported by torch.onnx.export (torch 1.13) at test time:

- GELU MLP: Linear -> nn.GELU() -> Linear -> nn.GELU(approximate="tanh") -> Linear.
  PyTorch 1.13 writes GELU as x * 0.5 * (1 + Erf(x / 1.41421)) and the tanh form
  with Mul, Add and Tanh at every opset; opsets 13 and 17.
- LayerNorm MLP: Linear -> nn.LayerNorm -> nn.GELU() -> Linear -> LayerNorm over
  the last two dims of a reshaped activation -> Linear. Opset 17 writes
  LayerNormalization, opset 13 the decomposed ReduceMean, Sub, Pow, ReduceMean,
  Add, Sqrt, Div, Mul, Add.
- ONNX Gelu (opset 20, approximate "none" and "tanh"), written with onnx.helper
  (torch 1.13 cannot export it).

Checks: the forward output against PyTorch's (max|diff| / max|ref| <= 1e-5), and
training: the imported graph with a cross-entropy loss, sg_graph_backward and SGD
added in sgrt takes STEPS steps next to PyTorch taking the same steps; every
parameter after every step within 1e-4 relative (max|diff| / max|ref|), and the
losses too.
"""
import numpy as np
import pytest

import sgrt

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
from onnx import helper as oh  # noqa: E402
from onnx import numpy_helper  # noqa: E402

pytestmark = [pytest.mark.skipif(not sgrt.has_onnx(), reason="libsgrt has no ONNX importer"),
              pytest.mark.filterwarnings("ignore::UserWarning"), pytest.mark.filterwarnings("ignore::FutureWarning")]

BATCH, FEATURES, CLASSES, STEPS, LR = 8, 12, 5, 4, 0.1
THREADS = 2
torch.set_num_threads(THREADS)


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


class GeluMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(FEATURES, 16)
        self.fc2 = torch.nn.Linear(16, 16)
        self.fc3 = torch.nn.Linear(16, CLASSES)
        self.act1 = torch.nn.GELU()
        self.act2 = torch.nn.GELU(approximate="tanh")

    def forward(self, x):
        return self.fc3(self.act2(self.fc2(self.act1(self.fc1(x)))))


class LayerNormMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(FEATURES, 16)
        self.ln1 = torch.nn.LayerNorm(16)
        self.act = torch.nn.GELU()
        self.ln2 = torch.nn.LayerNorm((4, 4), eps=1e-3)
        self.fc2 = torch.nn.Linear(16, CLASSES)

    def forward(self, x):
        h = self.act(self.ln1(self.fc1(x)))
        h = self.ln2(h.reshape(-1, 4, 4)).reshape(-1, 16)
        return self.fc2(h)


def make_model(cls, seed):
    torch.manual_seed(seed)
    m = cls()
    # Non-trivial LayerNorm affine parameters.
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, torch.nn.LayerNorm):
                mod.weight.copy_(1 + 0.3 * torch.randn(mod.weight.shape))
                mod.bias.copy_(0.2 * torch.randn(mod.bias.shape))
    return m


def inputs(seed):
    return torch.from_numpy(np.random.default_rng(seed).standard_normal((BATCH, FEATURES)).astype(np.float32))


def export(model, path, opset):
    torch.onnx.export(model, (inputs(0),), path, input_names=["x"], output_names=["logits"], opset_version=opset,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    return [n.op_type for n in onnx.load(path).graph.node]


def check_forward(path, model):
    x = inputs(1)
    with torch.no_grad():
        ref = model(x).numpy()
    g = sgrt.Graph.load(path)
    with sgrt.Session(g, threads=THREADS) as s:
        s.forward({"x": x.numpy()})
        err = rel(s.read("logits"), ref)
    g.close()
    assert err <= 1e-5, err


def check_training(path, model):
    net = sgrt.Graph.load(path, training=True)
    g = net.clone()
    net.close()
    labels = g.input("labels", "i64", (BATCH,))
    g.mark_output(g.cross_entropy(g["logits"], labels, "mean"), "loss")
    g.backward(g["loss"])
    lr = g.input("lr", "f32", ())
    g.add_sgd(lr)
    g = g.finalize()
    params = [k for k, _ in model.named_parameters()]
    for k in params:
        assert g[k].role == "parameter", k
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    rng = np.random.default_rng(5)
    worst = 0.0
    with sgrt.Session(g, threads=THREADS) as s:
        for k, v in model.state_dict().items():
            np.testing.assert_array_equal(s.read(k), v.numpy())
        for step in range(STEPS):
            x = inputs(10 + step)
            y = torch.from_numpy(rng.integers(0, CLASSES, BATCH).astype(np.int64))
            s.step({"x": x.numpy(), "labels": y.numpy(), "lr": LR})
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            assert abs(float(s.read("loss")) - loss.item()) <= 1e-4 * abs(loss.item()), step
            sd = model.state_dict()
            for k in params:
                err = rel(s.read(k), sd[k].numpy())
                worst = max(worst, err)
                assert err <= 1e-4, (step, k, err)
    print("%s: %d SGD steps, worst parameter rel %.2e" % (path, STEPS, worst))
    g.close()


@pytest.mark.parametrize("opset", [13, 17])
def test_gelu_mlp(tmp_path, opset):
    model = make_model(GeluMLP, 1)
    path = str(tmp_path / ("gelu_%d.onnx" % opset))
    ops = export(model, path, opset)
    assert "Erf" in ops and "Tanh" in ops, ops
    check_forward(path, model)
    check_training(path, model)


@pytest.mark.parametrize("opset", [13, 17])
def test_layer_norm_mlp(tmp_path, opset):
    model = make_model(LayerNormMLP, 2)
    path = str(tmp_path / ("ln_%d.onnx" % opset))
    ops = export(model, path, opset)
    if opset >= 17:
        assert ops.count("LayerNormalization") == 2, ops
    else:
        assert "LayerNormalization" not in ops and "ReduceMean" in ops and "Sqrt" in ops, ops
    check_forward(path, model)
    check_training(path, model)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_onnx_gelu_opset20(tmp_path, approximate):
    """ONNX's own Gelu op (opset 20) between two Gemms, trained like the exports."""
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, 16), torch.nn.GELU(approximate=approximate),
                                torch.nn.Linear(16, CLASSES))
    inits = [numpy_helper.from_array(p.detach().numpy(), name) for name, p in model.named_parameters()]
    f32 = onnx.TensorProto.FLOAT
    nodes = [oh.make_node("Gemm", ["x", "0.weight", "0.bias"], ["h"], name="fc1", transB=1),
             oh.make_node("Gelu", ["h"], ["a"], name="gelu", approximate=approximate),
             oh.make_node("Gemm", ["a", "2.weight", "2.bias"], ["logits"], name="fc2", transB=1)]
    graph = oh.make_graph(nodes, "gelu20", [oh.make_tensor_value_info("x", f32, [BATCH, FEATURES])],
                          [oh.make_tensor_value_info("logits", f32, [BATCH, CLASSES])], inits)
    path = str(tmp_path / "gelu20.onnx")
    # The installed onnx may predate opset 20, so the model is written unchecked.
    with open(path, "wb") as f:
        f.write(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 20)]).SerializeToString())
    check_forward(path, model)
    check_training(path, model)
