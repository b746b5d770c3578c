"""Tests of `sgrt run` (tools/cmd_run.c, tools/npy.c): outputs against numpy and
PyTorch forwards of the same weights, output file names, and a strict .npy
reader that rejects every malformed file with exit 1 and one stderr line.

The weights of tests/data/{mlp,cnn}.sgg are recomputed here from the generator
in tests/data/sample_graphs.c (xorshift64 seeded by FNV-1a of the tensor name),
so the reference does not read anything through sgrt. This file needs only
numpy (torch where noted) and the sgrt binary ($SGRT_CLI), not the Python shim,
so it also runs against sanitizer builds."""
import json
import os
import random
import struct
import subprocess

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(REPO, "tests", "data")
SGRT = os.environ.get("SGRT_CLI") or os.path.join(REPO, "build", "tools", "sgrt")

try:  # the shim, for the tests that build their own graphs
    import sgrt  # noqa: E402
except (ImportError, OSError):
    sgrt = None
needs_shim = pytest.mark.skipif(sgrt is None, reason="the sgrt Python shim cannot load libsgrt here")


def run_cli(*args, expect=None):
    p = subprocess.run([SGRT, *map(str, args)], capture_output=True, text=True, timeout=120)
    assert p.returncode >= 0, "sgrt died with signal %d: %s" % (-p.returncode, p.stderr)
    if expect is not None:
        assert p.returncode == expect, "exit %d, expected %d\nstdout: %s\nstderr: %s" % (
            p.returncode, expect, p.stdout, p.stderr)
    if p.returncode != 0:
        lines = p.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("sgrt: "), "one error line expected: %r" % p.stderr
    return p


# ---- the sample graphs' weights, recomputed ---------------------------------


def sample_fill(name, shape, kind="r"):
    """tests/data/sample_graphs.c: add_f32()."""
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if kind == "0":
        return np.zeros(shape, np.float32)
    if kind == "1":
        return np.ones(shape, np.float32)
    h = 1469598103934665603
    for c in name.encode():
        h = ((h ^ c) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    s = h | 1
    fan_in = n // shape[0] if len(shape) > 1 else n
    scale = np.float32(1.0 / np.sqrt(float(fan_in)))
    top = np.empty(n, np.float32)
    m = 0xFFFFFFFFFFFFFFFF
    for i in range(n):
        s ^= (s << 13) & m
        s ^= s >> 7
        s ^= (s << 17) & m
        top[i] = np.float32(s >> 40)
    return ((top / np.float32(8388608.0) - np.float32(1.0)) * scale).astype(np.float32).reshape(shape)


def mlp_weights():
    return {"fc1.weight": sample_fill("fc1.weight", (32, 64)), "fc1.bias": sample_fill("fc1.bias", (32,)),
            "fc2.weight": sample_fill("fc2.weight", (10, 32)), "fc2.bias": sample_fill("fc2.bias", (10,))}


def ce(logits, y):
    z = logits - logits.max(axis=1, keepdims=True)
    return -(z[np.arange(len(y)), y] - np.log(np.exp(z).sum(axis=1))).mean()


@pytest.fixture
def mlp_inputs(tmp_path):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((8, 64)).astype(np.float32)
    y = np.array([3, 1, 4, 1, 5, 9, 2, 6], np.int64)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    return x, y


def test_run_mlp_matches_numpy(tmp_path, mlp_inputs):
    x, y = mlp_inputs
    out = tmp_path / "out"
    p = run_cli("run", os.path.join(DATA, "mlp.sgg"), "--input", "x=%s" % (tmp_path / "x.npy"),
                "-i", "labels=%s" % (tmp_path / "y.npy"), "-o", out, "--json", "--threads", "2", expect=0)
    j = json.loads(p.stdout.splitlines()[-1])
    assert [(o["name"], o["shape"]) for o in j["outputs"]] == [("loss", []), ("logits", [8, 10])]
    w = {k: v.astype(np.float64) for k, v in mlp_weights().items()}
    h = np.maximum(x @ w["fc1.weight"].T + w["fc1.bias"], 0)
    ref = h @ w["fc2.weight"].T + w["fc2.bias"]
    logits = np.load(out / "logits.npy")
    assert logits.dtype == np.float32 and logits.shape == (8, 10)
    assert np.abs(logits - ref).max() <= 1e-5 * max(1.0, np.abs(ref).max())
    loss = np.load(out / "loss.npy")
    assert loss.shape == () and abs(float(loss) - ce(ref, y)) <= 1e-5
    # The reference weights are the file's (checked through the shim when it loads).
    if sgrt is not None:
        with sgrt.Graph.load(os.path.join(DATA, "mlp.sgg")) as g:
            for k, v in mlp_weights().items():
                np.testing.assert_array_equal(g[k].value(), v)


def test_run_cnn_matches_torch(tmp_path):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(12)
    x = rng.standard_normal((2, 3, 16, 16)).astype(np.float32)
    y = np.array([7, 2], np.int64)
    np.save(tmp_path / "img.npy", x)
    np.save(tmp_path / "lab.npy", y)
    run_cli("run", os.path.join(DATA, "cnn.sgg"), "-i", "images=%s" % (tmp_path / "img.npy"),
            "-i", "labels=%s" % (tmp_path / "lab.npy"), "-o", tmp_path / "o", expect=0)
    # tests/data/sample_graphs.c sample_build_cnn; evaluation: batch norm on its running
    # statistics (mean 0, var 1, gamma 1, beta 0).
    t = lambda a: torch.from_numpy(a).double()  # noqa: E731
    h = F.conv2d(t(x), t(sample_fill("conv1.weight", (8, 3, 3, 3))), t(sample_fill("conv1.bias", (8,))), padding=1)
    h = F.batch_norm(h, torch.zeros(8, dtype=torch.double), torch.ones(8, dtype=torch.double),
                     torch.ones(8, dtype=torch.double), torch.zeros(8, dtype=torch.double), False, 0.1, 1e-5)
    h = F.max_pool2d(F.relu(h), 2)
    h = F.conv2d(h, t(sample_fill("conv2.weight", (16, 4, 3, 3))), stride=2, padding=1, groups=2)
    h = torch.flatten(F.adaptive_avg_pool2d(h, 1), 1)
    logits = F.linear(h, t(sample_fill("fc.weight", (10, 16))), t(sample_fill("fc.bias", (10,))))
    ref = F.cross_entropy(logits, torch.from_numpy(y)).item()
    got = float(np.load(tmp_path / "o" / "loss.npy"))
    assert abs(got - ref) <= 1e-5 * max(1.0, abs(ref)), (got, ref)


@needs_shim
def test_output_names_and_dtypes(tmp_path):
    g = sgrt.Graph()
    x = g.input("x", "f32", (2, 3))
    lab = g.input("lab", "i64", (2,))
    g.mark_output(g.relu(x), "a/b:c")
    g.mark_output(x * 2.0, "a_b_c")  # sanitises to the same file name as "a/b:c"
    g.mark_output(x + 1.0, "ünï cødé")
    long_name = "n" * 300
    g.mark_output(g.tanh(x), long_name)
    g.mark_output(lab)  # an input marked as output: written as it was given
    g.mark_output(g.reduce_sum(x), "..")
    g.finalize()
    g.save(tmp_path / "names.sgg")
    g.close()
    xv = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    np.save(tmp_path / "x.npy", xv)
    np.save(tmp_path / "lab.npy", np.array([4, -7], np.int64))
    p = run_cli("run", tmp_path / "names.sgg", "-i", "x=%s" % (tmp_path / "x.npy"), "-i",
                "lab=%s" % (tmp_path / "lab.npy"), "-o", tmp_path / "o", "--json", expect=0)
    j = json.loads(p.stdout.splitlines()[-1])
    files = [os.path.basename(o["file"]) for o in j["outputs"]]
    # Each byte outside [A-Za-z0-9._-] (UTF-8 bytes included) becomes '_'.
    assert files == ["a_b_c.npy", "a_b_c_2.npy", "__n___c__d__.npy", "n" * 200 + ".npy", "lab.npy", "...npy"]
    o = tmp_path / "o"
    np.testing.assert_array_equal(np.load(o / "a_b_c.npy"), np.maximum(xv, 0))
    np.testing.assert_array_equal(np.load(o / "a_b_c_2.npy"), xv * 2)
    np.testing.assert_allclose(np.load(o / ("n" * 200 + ".npy")), np.tanh(xv), rtol=1e-6)
    lab = np.load(o / "lab.npy")
    assert lab.dtype == np.int64 and list(lab) == [4, -7]
    assert np.load(o / "...npy").shape == () and float(np.load(o / "...npy")) == pytest.approx(float(xv.sum()))


# ---- the .npy reader --------------------------------------------------------


def npy_bytes(header, data=b"", version=(1, 0), pad=True, newline=True):
    h = header.encode("latin-1") if isinstance(header, str) else header
    pre = 10 if version[0] == 1 else 12
    if pad:
        total = pre + len(h) + (1 if newline else 0)
        h = h + b" " * ((-total) % 64)
    if newline:
        h += b"\n"
    if version[0] == 1:
        ln = struct.pack("<H", len(h))
    else:
        ln = struct.pack("<I", len(h))
    return b"\x93NUMPY" + bytes(version) + ln + h + data


GOOD_X = np.random.default_rng(5).standard_normal((8, 64)).astype(np.float32)
GOOD_HDR = "{'descr': '<f4', 'fortran_order': False, 'shape': (8, 64), }"


def run_with_x(tmp_path, raw, extra=()):
    f = tmp_path / "x.npy"
    f.write_bytes(raw)
    np.save(tmp_path / "y.npy", np.zeros(8, np.int64))
    return run_cli("run", os.path.join(DATA, "mlp.sgg"), "-i", "x=%s" % f, "-i", "labels=%s" % (tmp_path / "y.npy"),
                   *extra, "-o", tmp_path / "o")


@pytest.mark.parametrize("desc,raw", [
    ("v1", npy_bytes(GOOD_HDR, GOOD_X.tobytes())),
    ("v2", npy_bytes(GOOD_HDR, GOOD_X.tobytes(), version=(2, 0))),
    ("v3", npy_bytes(GOOD_HDR, GOOD_X.tobytes(), version=(3, 0))),
    ("keys reordered, double quotes, no trailing comma",
     npy_bytes('{"shape": (8,64), "fortran_order": False, "descr": "<f4"}', GOOD_X.tobytes())),
    ("unpadded header", npy_bytes(GOOD_HDR, GOOD_X.tobytes(), pad=False)),
])
def test_npy_variants_accepted(tmp_path, desc, raw):
    p = run_with_x(tmp_path, raw)
    assert p.returncode == 0, (desc, p.stderr)


def test_npy_zero_d_and_numpy_files(tmp_path):
    # np.save's own output, a 0-d array for the scalar input lr, and a non-contiguous array saved by numpy.
    np.save(tmp_path / "lr.npy", np.float32(0.5))
    np.save(tmp_path / "x.npy", np.asfortranarray(GOOD_X))  # numpy writes fortran_order True for this
    np.save(tmp_path / "y.npy", np.zeros(8, np.int64))
    p = run_cli("run", os.path.join(DATA, "mlp.sgg"), "-i", "x=%s" % (tmp_path / "x.npy"), "-i",
                "labels=%s" % (tmp_path / "y.npy"), "-o", tmp_path / "o", expect=1)
    assert "Fortran-order" in p.stderr
    np.save(tmp_path / "x.npy", GOOD_X[:, ::1])
    p = run_cli("run", os.path.join(DATA, "mlp.sgg"), "-i", "x=%s" % (tmp_path / "x.npy"), "-i",
                "labels=%s" % (tmp_path / "y.npy"), "-i", "lr=%s" % (tmp_path / "lr.npy"), "-o", tmp_path / "o",
                "--json", expect=0)
    assert "lr" not in json.loads(p.stdout.splitlines()[-1])["zero_filled_inputs"]


BAD = [
    ("empty", b"", "not a .npy file"),
    ("bad magic", b"\x93NUMPZ\x01\x00" + b"\x00" * 100, "not a .npy file"),
    ("version 4", npy_bytes(GOOD_HDR, GOOD_X.tobytes(), version=(4, 0)), "version 4.0"),
    ("version 1.1", npy_bytes(GOOD_HDR, GOOD_X.tobytes(), version=(1, 1)), "version 1.1"),
    ("only magic", b"\x93NUMPY\x01", "truncated"),
    ("no header length", b"\x93NUMPY\x01\x00\x10", "truncated"),
    ("header past the end", b"\x93NUMPY\x01\x00\xff\x00{'descr'", "truncated"),
    ("huge v2 header length", b"\x93NUMPY\x02\x00\xff\xff\xff\xff" + b" " * 64, "too large"),
    ("truncated data", npy_bytes(GOOD_HDR, GOOD_X.tobytes()[:-1]), "truncated"),
    ("trailing data", npy_bytes(GOOD_HDR, GOOD_X.tobytes() + b"\0"), "after the data"),
    ("f8", npy_bytes(GOOD_HDR.replace("<f4", "<f8"), GOOD_X.astype(np.float64).tobytes()), "'<f8' is not supported"),
    ("big endian", npy_bytes(GOOD_HDR.replace("<f4", ">f4"), GOOD_X.tobytes()), "big-endian"),
    ("structured", npy_bytes(GOOD_HDR.replace("'<f4'", "[('a', '<f4')]"), GOOD_X.tobytes()), "descr"),
    ("fortran", npy_bytes(GOOD_HDR.replace("False", "True"), GOOD_X.tobytes()), "Fortran-order"),
    ("fortran not bool", npy_bytes(GOOD_HDR.replace("False", "0"), GOOD_X.tobytes()), "True or False"),
    ("missing shape", npy_bytes("{'descr': '<f4', 'fortran_order': False}", GOOD_X.tobytes()), "missing key 'shape'"),
    ("extra key", npy_bytes(GOOD_HDR[:-1] + "'x': 1, }", GOOD_X.tobytes()), "unknown key"),
    ("duplicate key", npy_bytes(GOOD_HDR[:-1] + "'descr': '<f4'}", GOOD_X.tobytes()), "twice"),
    ("shape not a tuple", npy_bytes(GOOD_HDR.replace("(8, 64)", "[8, 64]"), GOOD_X.tobytes()), "tuple"),
    ("shape (512) is an int", npy_bytes(GOOD_HDR.replace("(8, 64)", "(512)"), GOOD_X.tobytes()), "not a tuple"),
    ("negative dim", npy_bytes(GOOD_HDR.replace("(8, 64)", "(-8, 64)"), GOOD_X.tobytes()), "non-negative"),
    ("float dim", npy_bytes(GOOD_HDR.replace("(8, 64)", "(8.0, 64)"), GOOD_X.tobytes()), "shape"),
    ("9 dims", npy_bytes(GOOD_HDR.replace("(8, 64)", "(1,1,1,1,1,1,1,8,64)"), GOOD_X.tobytes()), "more than 8"),
    ("overflowing dims", npy_bytes(GOOD_HDR.replace("(8, 64)", "(4294967296, 4294967296, 4294967296)")),
     "overflow"),
    ("huge dim", npy_bytes(GOOD_HDR.replace("(8, 64)", "(99999999999999999999999,)")), "too large"),
    ("shape mismatch for the input", npy_bytes(GOOD_HDR.replace("(8, 64)", "(64, 8)"), GOOD_X.tobytes()),
     "SG_ERR_SHAPE"),
    ("not a dict", npy_bytes("('descr', '<f4')", GOOD_X.tobytes()), "not a dict"),
    ("unterminated string", npy_bytes("{'descr: <f4, 'fortran_order': False, 'shape': (8, 64)}",
                                      GOOD_X.tobytes()), "header"),
    ("escape in string", npy_bytes(GOOD_HDR.replace("'<f4'", "'<f\\4'"), GOOD_X.tobytes()), "header"),
    ("text after dict", npy_bytes(GOOD_HDR + " x", GOOD_X.tobytes()), "after the dict"),
    ("non-ASCII header", npy_bytes(GOOD_HDR.replace("descr", "d\xe9scr"), GOOD_X.tobytes()), "not printable"),
    ("NUL in header", npy_bytes(GOOD_HDR.replace(" }", "\0}"), GOOD_X.tobytes()), "not printable"),
]


@pytest.mark.parametrize("desc,raw,msg", BAD, ids=[b[0] for b in BAD])
def test_npy_bad_files_rejected(tmp_path, desc, raw, msg):
    p = run_with_x(tmp_path, raw)
    assert p.returncode == 1, (desc, p.returncode, p.stderr)
    assert msg in p.stderr, (desc, p.stderr)
    assert not (tmp_path / "o").exists(), "nothing is written when an input is bad"


def test_npy_directory_and_fifo_rejected(tmp_path):
    d = tmp_path / "d.npy"
    d.mkdir()
    np.save(tmp_path / "y.npy", np.zeros(8, np.int64))
    p = run_cli("run", os.path.join(DATA, "mlp.sgg"), "-i", "x=%s" % d, "-o", tmp_path / "o", expect=1)
    assert "not a regular file" in p.stderr or "Is a directory" in p.stderr


def test_npy_mutations_never_crash(tmp_path):
    """Random byte flips, truncations and insertions in a good file: every run
    ends with exit 0 or 1 (one error line), never a signal or a hang."""
    good = bytearray(npy_bytes(GOOD_HDR, GOOD_X.tobytes()))
    rnd = random.Random(1234)
    outcomes = {0: 0, 1: 0}
    for i in range(120):
        b = bytearray(good)
        kind = i % 4
        if kind == 0:
            for _ in range(rnd.randint(1, 4)):
                b[rnd.randrange(0, 80)] = rnd.randrange(256)
        elif kind == 1:
            b = b[:rnd.randrange(0, 90)]
        elif kind == 2:
            pos = rnd.randrange(10, 80)
            b[pos:pos] = bytes(rnd.choice(b"(),:'\" 0123456789{}TrueFalse\n") for _ in range(rnd.randint(1, 6)))
        else:
            pos = rnd.randrange(10, 80)
            del b[pos:pos + rnd.randint(1, 8)]
        p = run_with_x(tmp_path, bytes(b))
        assert p.returncode in (0, 1), (i, p.returncode, p.stderr)
        outcomes[p.returncode] += 1
    assert outcomes[1] > 60  # most mutations are caught


def test_usage_errors(tmp_path):
    mlp = os.path.join(DATA, "mlp.sgg")
    assert "--output DIR is required" in run_cli("run", mlp, expect=2).stderr
    assert "NAME=FILE" in run_cli("run", mlp, "-i", "=x.npy", "-o", tmp_path, expect=2).stderr
    assert "NAME=FILE" in run_cli("run", mlp, "--input=x=", "-o", tmp_path, expect=2).stderr
    assert "needs a value" in run_cli("run", mlp, "-o", tmp_path, "--input", expect=2).stderr
    assert "missing argument" in run_cli("run", "-o", tmp_path, expect=2).stderr
    assert "--batch" in run_cli("run", mlp, "-o", tmp_path, "--batch", "0", expect=2).stderr
    # --output's value is never taken for an --input.
    np.save(tmp_path / "x.npy", GOOD_X)
    np.save(tmp_path / "y.npy", np.zeros(8, np.int64))
    odd = tmp_path / "--input"
    run_cli("run", mlp, "-i", "x=%s" % (tmp_path / "x.npy"), "-i", "labels=%s" % (tmp_path / "y.npy"),
            "--output", str(odd), expect=0)
    assert (odd / "logits.npy").exists()
