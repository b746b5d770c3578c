"""PyTorch parity of the activations the ONNX importer builds from sgrt's own
ops (docs/onnx.md, "Activations"): LeakyReLU, PReLU, ELU, CELU, SELU,
Softplus, Softsign, Hardsigmoid, Hardswish and Mish (which torch 1.13 writes
as Softplus, Tanh and Mul), each between two Linear layers, exported by
torch.onnx.export at opsets 13 and 17 at test time. torch 1.13 writes Softsign
as Abs, Add and Div, so ONNX's Softsign (and the attributes' defaults of
LeakyRelu, Elu, Selu and HardSigmoid) are also written with onnx.helper and
compared with NumPy.

Checks, as test_parity_ops.py: the forward output against PyTorch's
(max|diff| / max|ref| <= 1e-5), and STEPS SGD steps of the imported graph
with a cross-entropy loss added in sgrt next to PyTorch's: the losses and
every parameter after every step within 1e-4 relative. The inputs are scaled
so that every branch of each activation is taken (x well below and above 0,
and beyond Hardsigmoid's and Softplus's knees).
"""
import numpy as np
import pytest

import sgrt

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")

from test_parity_ops import check_forward, check_training, export, make_model  # noqa: E402

pytestmark = [pytest.mark.skipif(not sgrt.has_onnx(), reason="libsgrt has no ONNX importer"),
              pytest.mark.filterwarnings("ignore::UserWarning"), pytest.mark.filterwarnings("ignore::FutureWarning")]

FEATURES, CLASSES = 12, 5

ACTIVATIONS = {
    "leaky_relu": (lambda: torch.nn.LeakyReLU(0.1), "LeakyRelu"),
    "prelu": (lambda: torch.nn.PReLU(16, init=0.2), "PRelu"),
    "elu": (lambda: torch.nn.ELU(0.7), "Elu"),
    "celu": (lambda: torch.nn.CELU(1.3), "Celu"),
    "selu": (lambda: torch.nn.SELU(), "Selu"),
    "softplus": (lambda: torch.nn.Softplus(), "Softplus"),
    "softsign": (lambda: torch.nn.Softsign(), None),  # torch writes x / (1 + |x|); ONNX Softsign: below
    "hardsigmoid": (lambda: torch.nn.Hardsigmoid(), "HardSigmoid"),
    "hardswish": (lambda: torch.nn.Hardswish(), None),  # HardSwish from opset 14, HardSigmoid and Mul before
    "mish": (lambda: torch.nn.Mish(), "Softplus"),
}


class ActMLP(torch.nn.Module):
    def __init__(self, act):
        super().__init__()
        self.fc1 = torch.nn.Linear(FEATURES, 16)
        self.act = act()
        self.fc2 = torch.nn.Linear(16, CLASSES)

    def forward(self, x):
        # x 4: pre-activations well past every knee (Hardsigmoid's at +-3, Softplus's large |x|).
        return self.fc2(self.act(4 * self.fc1(x)))


@pytest.mark.parametrize("opset", [13, 17])
@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation(tmp_path, name, opset):
    make, op_type = ACTIVATIONS[name]
    model = make_model(lambda: ActMLP(make), 3)
    path = str(tmp_path / ("%s_%d.onnx" % (name, opset)))
    ops = export(model, path, opset)
    if op_type is not None:
        assert op_type in ops, ops
    check_forward(path, model)
    check_training(path, model)


def numpy_act(op, x):
    if op == "Softsign":
        return x / (1 + np.abs(x))
    if op == "LeakyRelu":
        return np.where(x > 0, x, np.float32(0.01) * x)
    if op == "Elu":
        return np.where(x > 0, x, np.expm1(x))
    if op == "Selu":
        a, g = 1.67326319217681884765625, 1.05070102214813232421875
        return g * np.where(x > 0, x, a * np.expm1(x))
    if op == "HardSigmoid":
        return np.clip(0.2 * x + 0.5, 0, 1)
    raise ValueError(op)


@pytest.mark.parametrize("op", ["Softsign", "LeakyRelu", "Elu", "Selu", "HardSigmoid"])
def test_onnx_defaults(tmp_path, op):
    """The op alone, written with onnx.helper without attributes (ONNX's defaults)."""
    from onnx import helper as oh
    f32 = onnx.TensorProto.FLOAT
    graph = oh.make_graph([oh.make_node(op, ["x"], ["y"], name="act")], "act",
                          [oh.make_tensor_value_info("x", f32, [4, 64])], [oh.make_tensor_value_info("y", f32, [4, 64])])
    path = str(tmp_path / ("%s.onnx" % op))
    with open(path, "wb") as f:
        f.write(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)]).SerializeToString())
    x = np.random.default_rng(7).standard_normal((4, 64)).astype(np.float32) * 5
    x[0, :4] = [0.0, -0.0, 30.0, -30.0]
    want = numpy_act(op, x.astype(np.float64))
    g = sgrt.Graph.load(path)
    with sgrt.Session(g, threads=2) as s:
        s.forward({"x": x})
        got = s.read("y")
    g.close()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
