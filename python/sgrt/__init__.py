"""sgrt: Python bindings (ctypes) for the sgrt static-graph training runtime.

    import numpy as np, sgrt

    g = sgrt.Graph()
    x = g.input("x", "f32", (32, 64))
    y = g.input("y", "i64", (32,))
    w = g.parameter("fc.weight", np.random.randn(10, 64).astype(np.float32) * 0.1)
    logits = g.mark_output(g.linear(x, w), "logits")
    loss = g.mark_output(g.cross_entropy(logits, y), "loss")
    g.backward(loss)
    g.add_sgd(0.1, momentum=0.9)
    g.finalize()
    with sgrt.Session(g, threads=2) as s:
        s.step({"x": xs, "y": ys})
        print(s.read("loss"))

Every failing call raises sgrt.Error (status, code, message). See docs/python.md.
The shared library is found through $SGRT_LIBRARY, the repository's build tree
(build/src/libsgrt.so) or the system loader.
"""

from ._errors import (Error, InvalidArgumentError, DtypeError, FormatError, NotFoundError, FileError,
                      MissingFileError, OutOfMemoryError, WaitTimeoutError, CommError, DeniedError, UnsupportedError,
                      RuntimeFailure)
from . import _lib
from ._dtypes import BF16, BOOL, F16, F32, I32, I64, U8
from .graph import Graph, Op, Tensor
from .session import ALIGNMENT, ConversionWarning, Session, aligned, aligned_empty
from .cache import cache_clear, cache_entry, cache_info, cache_list
from .dist import Dist

__all__ = [
    "Error", "InvalidArgumentError", "DtypeError", "FormatError", "NotFoundError", "FileError", "MissingFileError",
    "OutOfMemoryError", "WaitTimeoutError", "CommError", "DeniedError", "UnsupportedError", "RuntimeFailure", "Graph", "Tensor", "Op", "Session", "Dist", "ConversionWarning", "aligned", "aligned_empty", "ALIGNMENT", "version",
    "library_path", "has_onnx", "set_log_level", "cache_info", "cache_list", "cache_entry", "cache_clear",
    "F32", "F16", "BF16", "I32", "I64", "U8", "BOOL", "STATUS",
]

#: {"SG_OK": 0, "SG_ERR_INVALID_ARG": -1, ...}
STATUS = dict(_lib.STATUS)

#: Path of the libsgrt that was loaded.
library_path = _lib.path

_LOG_LEVELS = {"none": 0, "error": 1, "warn": 2, "info": 3, "debug": 4, "trace": 5}


def version():
    """Version string of the loaded library, e.g. "0.1.0"."""
    return _lib.fn.sg_version().decode()


def has_onnx():
    """Whether the loaded library has the ONNX importer (Graph.load of .onnx files)."""
    return _lib.has("sg_onnx_import")


def set_log_level(level):
    """Library log level: "none", "error", "warn", "info", "debug", "trace" or 0-5."""
    if isinstance(level, str):
        if level not in _LOG_LEVELS:
            raise _lib.error("SG_ERR_INVALID_ARG", "unknown log level %r" % level)
        level = _LOG_LEVELS[level]
    _lib.fn.sg_log_set_level(int(level))


__version__ = version()
