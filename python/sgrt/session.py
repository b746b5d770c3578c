"""sgrt.Session: a graph compiled for one device, run step after step."""

from __future__ import annotations

import ctypes
import os
from typing import Any, Mapping, Optional
import warnings

import numpy as np

from . import _dtypes as D
from . import _lib
from ._closeable import Closeable
from ._lib import fn
from .graph import Graph, _tensor_info

ArrayLike = Any  # a numpy array, or what np.asarray takes
DTypeLike = Any  # a numpy dtype or what np.dtype takes

ALIGNMENT = 64  # what sg_session_bind_input needs (SG__SLOT_ALIGN)


# Session(matmul_precision=...): enum sg_matmul_precision.
_MATMUL_PRECISION = {"default": _lib.SG_MATMUL_DEFAULT, "f32": _lib.SG_MATMUL_F32, "bf16": _lib.SG_MATMUL_BF16}
_PRECISION_END = _lib.sg_session_params.matmul_precision.offset + ctypes.sizeof(ctypes.c_int)


class ConversionWarning(UserWarning):
    """An input was converted to the tensor's dtype (float64 given for an f32 input)."""


def aligned_empty(shape: tuple[int, ...], dtype: DTypeLike = np.float32, alignment: int = ALIGNMENT) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts on an `alignment`-byte
    boundary: memory that Session.bind_input accepts."""
    dt = np.dtype(dtype)
    shape = tuple(int(d) for d in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    raw = np.empty(n + alignment, dtype=np.uint8)
    off = (-raw.ctypes.data) % alignment
    return raw[off:off + n].view(dt).reshape(shape)


def aligned(array: np.ndarray, alignment: int = ALIGNMENT) -> np.ndarray:
    """`array` itself when it is C-contiguous and aligned, else an aligned copy."""
    a = np.asarray(array)
    if a.flags.c_contiguous and a.ctypes.data % alignment == 0:
        return a
    out = aligned_empty(a.shape, a.dtype, alignment)
    out[...] = a
    return out


class Session(Closeable):
    """A finalized Graph compiled for a device (sg_session).

    Session(graph, threads=0, seed=0, device="cpu") compiles at once unless
    compile=False (then call compile() before running). threads=0 uses every
    online CPU. fusion=False runs every op as its own kernel (the environment's
    SG_FUSION=0 does the same). matmul_precision: "f32", "bf16" (each gemm/matmul
    operand rounded to bfloat16, the products summed in f32; CPUs with AVX512_BF16
    or AMX only, else sgrt.UnsupportedError) or "default" (the environment's
    SG_MATMUL_PRECISION, else f32). The session keeps the C graph alive until it is
    closed, even if the Graph object is closed first. Use it from one thread at a time.
    """

    def __init__(self, graph: Graph, threads: int = 0, seed: int = 0, device: str = "cpu", compile: bool = True,
                 poison: bool = False, fusion: bool = True, trace: bool = False,
                 matmul_precision: str = "default") -> None:
        if not isinstance(graph, Graph):
            raise _lib.error("SG_ERR_INVALID_ARG", "Session needs a sgrt.Graph, not %s" % type(graph).__name__)
        precision = _MATMUL_PRECISION.get(matmul_precision) if isinstance(matmul_precision, str) else None
        if precision is None:
            raise _lib.error("SG_ERR_INVALID_ARG", "Session: matmul_precision %r is not one of %s"
                             % (matmul_precision, ", ".join(repr(k) for k in _MATMUL_PRECISION)))
        self._s = None
        self._bound = {}
        handle = graph._handle
        if handle is None:
            raise _lib.error("SG_ERR_STATE", "the graph is closed")
        self._g = handle.acquire()
        self.graph = graph
        try:
            prm = fn.sg_session_params_init()
            self._device = _lib.encode(device, "device")
            prm.device = self._device
            prm.threads = int(threads)
            prm.seed = int(seed)
            prm.poison = 1 if poison else 0
            prm.fusion = 1 if fusion else -1
            prm.trace = 1 if trace else 0
            if precision == _lib.SG_MATMUL_BF16 and prm.size < _PRECISION_END:
                # An older library reads only the first prm.size bytes: it would ignore the field and run f32
                # (which is all it has, so "f32" and "default" are right there).
                raise _lib.error("SG_ERR_UNSUPPORTED", "Session: matmul_precision=%r needs a libsgrt that knows it; "
                                 "%s is older than this shim" % (matmul_precision, _lib.path))
            prm.matmul_precision = precision
            out = ctypes.c_void_p()
            fn.sg_clear_error()
            _lib.check(fn.sg_session_create(self._g.ptr, ctypes.byref(prm), ctypes.byref(out)))
            self._s = out.value
            if compile:
                self.compile()
        except BaseException:
            self.close()
            raise

    # ---- lifecycle ---------------------------------------------------------

    def close(self) -> None:
        """Destroys the session (and lets go of the graph). Safe to call twice."""
        s, self._s = getattr(self, "_s", None), None
        if s is not None:
            fn.sg_session_destroy(s)
        self._bound = {}
        g, self._g = getattr(self, "_g", None), None
        if g is not None:
            g.release()

    @property
    def closed(self):
        return getattr(self, "_s", None) is None

    def _ptr(self):
        if getattr(self, "_s", None) is None:
            raise _lib.error("SG_ERR_STATE", "the session is closed")
        return self._s

    def compile(self) -> None:
        """Compiles the graph (DCE, folding, schedule, memory plan, kernels). Once."""
        s = self._ptr()
        fn.sg_clear_error()
        _lib.check(fn.sg_session_compile(s))
        return self

    def report(self):
        """What compile decided, as a dict (planned_peak_bytes, ops_scheduled, ...)."""
        s = self._ptr()
        rep = _lib.sg_compile_report()
        rep.size = ctypes.sizeof(rep)
        fn.sg_clear_error()
        _lib.check(fn.sg_session_compile_report(s, ctypes.byref(rep)))
        return {name: getattr(rep, name) for name, _ in rep._fields_ if name != "size"}

    @property
    def steps(self):
        """Number of training steps run so far."""
        return int(fn.sg_session_steps(self._ptr()))

    # ---- tensors -----------------------------------------------------------

    def _lookup(self, name):
        """Tensor info of `name`, or None when the graph has no such tensor."""
        out = _lib.sg_tensor(-1)
        if fn.sg_graph_find_tensor(self._g.ptr, _lib.encode(name), ctypes.byref(out)) != 0:
            return None
        return _tensor_info(self._g.ptr, out.id)

    @staticmethod
    def _describe(info):
        return "%s %s" % (D.NAMES.get(info.dtype, "?"), list(info.dims[i] for i in range(info.ndim)))

    def _input_array(self, what, name, value, convert=True):
        info = self._lookup(name)
        if isinstance(value, np.ndarray):
            arr = value
            # numpy's default float64 for an f32 input: converted, with a warning (it costs a copy and
            # rounds), rather than refused. bind_input cannot convert (it keeps the caller's memory).
            if convert and info is not None and info.dtype == D.F32 and arr.dtype == np.float64:
                warnings.warn("%s: input '%s' is f32; the float64 array given is converted (a copy, rounded to "
                              "float32; pass float32 to avoid it)" % (what, name), ConversionWarning, stacklevel=4)
                arr = arr.astype(np.float32)
        elif info is not None:
            arr = np.asarray(value, dtype=D.NUMPY[info.dtype])
        else:
            arr = np.asarray(value)
        code = D.from_numpy(arr.dtype)
        if code is None:
            want = (" is " + self._describe(info)) if info is not None else ""
            hint = (" (convert it, e.g. with .astype(np.%s))" % D.NUMPY[info.dtype].name) if info is not None else ""
            raise _lib.error("SG_ERR_DTYPE", "%s: input '%s'%s, given a numpy array of dtype %s, which sgrt has no "
                             "type for%s" % (what, name, want, arr.dtype, hint))
        return arr, code

    def set_input(self, name: str, value: ArrayLike) -> None:
        """Copies `value` into input `name`. A numpy array must have the input's
        dtype (float32 -> f32, int64 -> i64, int32 -> i32, ...) and shape exactly
        (sgrt.Error SG_ERR_DTYPE / SG_ERR_SHAPE otherwise); a Python scalar or list
        is converted to the input's dtype. Non-contiguous arrays are copied."""
        s = self._ptr()
        arr, code = self._input_array("sg_session_set_input", name, value)
        arr = np.require(arr, requirements="C")  # keeps 0-d arrays 0-d
        ndim, dims = _lib.dims_array(arr.shape)
        fn.sg_clear_error()
        _lib.check(fn.sg_session_set_input(s, _lib.encode(name), code, ndim, dims, arr.ctypes.data_as(ctypes.c_void_p)))
        self._bound.pop(name, None)

    def bind_input(self, name: str, array: np.ndarray) -> None:
        """Binds `array` as input `name` without copying: every step reads its
        memory as it is then. The array must be a numpy array of the input's
        dtype and shape, C-contiguous and 64-byte aligned (sgrt.aligned_empty()
        makes one); the session keeps a reference until the input is set or
        bound again, or the session is closed."""
        s = self._ptr()
        if not isinstance(array, np.ndarray):
            raise _lib.error("SG_ERR_INVALID_ARG", "sg_session_bind_input: input '%s': bind a numpy array, not %s"
                             % (name, type(array).__name__))
        arr, code = self._input_array("sg_session_bind_input", name, array, convert=False)
        if not arr.flags.c_contiguous:
            raise _lib.error("SG_ERR_INVALID_ARG", "sg_session_bind_input: input '%s': the array is not C-contiguous, "
                             "so it cannot be used without a copy (use set_input, or np.ascontiguousarray first)"
                             % name)
        if arr.ctypes.data % ALIGNMENT != 0:
            raise _lib.error("SG_ERR_INVALID_ARG", "sg_session_bind_input: input '%s': the array's data is not %d-byte "
                             "aligned (address 0x%x); allocate it with sgrt.aligned_empty() or copy it with "
                             "sgrt.aligned(), or use set_input" % (name, ALIGNMENT, arr.ctypes.data))
        ndim, dims = _lib.dims_array(arr.shape)
        fn.sg_clear_error()
        _lib.check(fn.sg_session_bind_input(s, _lib.encode(name), code, ndim, dims, arr.ctypes.data_as(ctypes.c_void_p)))
        self._bound[name] = arr

    def _set_inputs(self, inputs):
        if inputs:
            for k, v in inputs.items():
                self.set_input(k, v)

    def step(self, inputs: Optional[Mapping[str, ArrayLike]] = None) -> dict[str, np.ndarray]:
        """One training step (forward, backward, update). `inputs`: an optional
        {name: array} given to set_input first. Returns the graph's outputs
        after the step, {name: numpy array} (copies, as outputs() gives)."""
        self._set_inputs(inputs)
        s = self._ptr()
        fn.sg_clear_error()
        _lib.check(fn.sg_session_step(s))
        return self.outputs()

    def forward(self, inputs: Optional[Mapping[str, ArrayLike]] = None) -> dict[str, np.ndarray]:
        """An evaluation pass (batch norm on running statistics, no updates).
        Returns the graph's outputs, {name: numpy array}, as ONNX Runtime's
        run() returns its outputs."""
        self._set_inputs(inputs)
        s = self._ptr()
        fn.sg_clear_error()
        _lib.check(fn.sg_session_forward(s))
        return self.outputs()

    def read(self, name: str) -> np.ndarray:
        """A copy of a tensor's current value (parameter, state, optimizer state,
        input, constant or graph output) as a numpy array of its shape and dtype."""
        s = self._ptr()
        info = self._lookup(name)
        fn.sg_clear_error()
        if info is None:  # let the library say what is wrong, in its words
            _lib.check(fn.sg_session_read(s, _lib.encode(name), None, 0))
            raise _lib.error("SG_ERR_NOT_FOUND", "sg_session_read: the graph has no tensor named '%s'" % name)
        out = np.empty(tuple(info.dims[i] for i in range(info.ndim)), dtype=D.NUMPY[info.dtype])
        _lib.check(fn.sg_session_read(s, _lib.encode(name), out.ctypes.data_as(ctypes.c_void_p), out.nbytes))
        return out

    def write(self, name: str, value: ArrayLike) -> None:
        """Overwrites a parameter, state or optimizer-state tensor. A numpy array
        must have its dtype and shape; scalars and lists are converted."""
        s = self._ptr()
        info = self._lookup(name)
        fn.sg_clear_error()
        if info is None:
            _lib.check(fn.sg_session_write(s, _lib.encode(name), None, 0))
            raise _lib.error("SG_ERR_NOT_FOUND", "sg_session_write: the graph has no tensor named '%s'" % name)
        want = D.NUMPY[info.dtype]
        shape = tuple(info.dims[i] for i in range(info.ndim))
        if isinstance(value, np.ndarray):
            if value.dtype != want:
                raise _lib.error("SG_ERR_DTYPE", "sg_session_write: tensor '%s' is %s, given a numpy array of dtype %s"
                                 % (name, self._describe(info), value.dtype))
            arr = value
        else:
            arr = np.asarray(value, dtype=want)
        if arr.shape != shape:
            raise _lib.error("SG_ERR_SHAPE", "sg_session_write: tensor '%s' is %s, given shape %s"
                             % (name, self._describe(info), list(arr.shape)))
        arr = np.require(arr, requirements="C")
        _lib.check(fn.sg_session_write(s, _lib.encode(name), arr.ctypes.data_as(ctypes.c_void_p), arr.nbytes))

    def write_trace(self, path: os.PathLike[str] | str) -> None:
        """Writes the timeline of every op of every step and evaluation pass as Chrome trace JSON
        (Session(trace=True); the form a distributed job writes for each rank)."""
        if not _lib.has("sg_session_write_trace"):
            raise _lib.error("SG_ERR_UNSUPPORTED", "this libsgrt (%s) cannot write a session's trace" % _lib.path)
        fn.sg_clear_error()
        _lib.check(fn.sg_session_write_trace(self._ptr(), _lib.fspath(path)))

    def outputs(self) -> dict[str, np.ndarray]:
        """{name: array} of every graph output."""
        self._ptr()
        p = self._g.ptr
        names = [_tensor_info(p, fn.sg_graph_output(p, i).id).name.decode("utf-8")
                 for i in range(fn.sg_graph_num_outputs(p))]
        return {n: self.read(n) for n in names}

    # ---- checkpoints -------------------------------------------------------

    def save_checkpoint(self, path: os.PathLike[str] | str) -> None:
        """Writes the graph with the current parameters, state and optimizer state
        as a .sgg file (loadable with Graph.load too)."""
        s = self._ptr()
        fn.sg_clear_error()
        _lib.check(fn.sg_session_save_checkpoint(s, _lib.fspath(path)))

    def load_checkpoint(self, path: os.PathLike[str] | str) -> None:
        """Restores parameters, state and optimizer state from a checkpoint of a
        graph with the same tensors (nothing changes when it does not fit)."""
        s = self._ptr()
        fn.sg_clear_error()
        _lib.check(fn.sg_session_load_checkpoint(s, _lib.fspath(path)))

    def __repr__(self):
        if self.closed:
            return "<sgrt.Session (closed)>"
        return "<sgrt.Session steps=%d>" % self.steps
