"""sgrt.Graph: a compute graph, loaded from a file or built op by op."""

from __future__ import annotations

import collections
import ctypes
import os
import threading
from typing import Optional, Union

import numpy as np

from . import _dtypes as D
from . import _lib
from ._closeable import Closeable
from ._lib import fn

_NO_TENSOR = _lib.sg_tensor(-1)


class _Handle:
    """Owns one sg_graph *. Graph objects and the sessions compiled from it each
    hold a reference; the C graph is destroyed when the last one lets go, so a
    session never outlives its graph whatever order Python finalizes them in."""

    __slots__ = ("ptr", "refs", "lock", "__weakref__")

    def __init__(self, ptr):
        self.ptr = ptr
        self.refs = 1
        self.lock = threading.Lock()

    def acquire(self):
        with self.lock:
            if self.ptr is None:
                raise _lib.error("SG_ERR_STATE", "the graph is closed")
            self.refs += 1
        return self

    def release(self):
        with self.lock:
            self.refs -= 1
            ptr = self.ptr if self.refs == 0 else None
            if ptr is not None:
                self.ptr = None
        if ptr is not None:
            fn.sg_graph_destroy(ptr)


def _tensor_info(ptr, tid):
    info = _lib.sg_tensor_info()
    _lib.check(fn.sg_graph_tensor_info(ptr, _lib.sg_tensor(tid), ctypes.byref(info)))
    return info


def _find(ptr, name):
    out = _lib.sg_tensor(-1)
    fn.sg_clear_error()
    _lib.check(fn.sg_graph_find_tensor(ptr, _lib.encode(name), ctypes.byref(out)))
    return out.id


class Tensor:
    """A tensor of a graph: a handle (graph, id) with the tensor's description.

    Builder methods of Graph take Tensor objects or tensor names. The arithmetic
    operators build ops too: `a + b`, `a * 2.0`, `a @ b`.
    """

    __slots__ = ("graph", "id")

    def __init__(self, graph, tid):
        self.graph = graph
        self.id = int(tid)

    def _info(self):
        return _tensor_info(self.graph._ptr(), self.id)

    @property
    def name(self):
        return self._info().name.decode("utf-8", "replace")

    @property
    def dtype(self):
        """numpy dtype (bf16: np.uint16, its raw bits)."""
        return D.NUMPY[self._info().dtype]

    @property
    def dtype_name(self):
        """sgrt dtype name: "f32", "i64", ..."""
        return D.NAMES.get(self._info().dtype, "?")

    @property
    def shape(self):
        info = self._info()
        return tuple(info.dims[i] for i in range(info.ndim))

    @property
    def ndim(self):
        return self._info().ndim

    @property
    def role(self):
        """"input", "parameter", "constant", "activation", "gradient", "optimizer_state" or "state"."""
        return D.ROLES.get(self._info().role, "?")

    @property
    def numel(self):
        return self._info().numel

    @property
    def nbytes(self):
        return self._info().nbytes

    @property
    def producer(self):
        """Index of the op that produces the tensor, or None for a source."""
        p = self._info().producer
        return None if p < 0 else p

    def value(self):
        """A copy of the tensor's initializer as a numpy array, or None when it has none."""
        info = self._info()
        if not info.data:
            return None
        nd = D.NUMPY[info.dtype]
        shape = tuple(info.dims[i] for i in range(info.ndim))
        buf = ctypes.string_at(info.data, info.nbytes)
        return np.frombuffer(buf, dtype=nd).reshape(shape).copy()

    def __repr__(self):
        try:
            return "<sgrt.Tensor %r %s %s %s>" % (self.name, self.dtype_name, list(self.shape), self.role)
        except Exception:
            return "<sgrt.Tensor #%d (graph closed)>" % self.id

    def __eq__(self, other):
        return isinstance(other, Tensor) and other.graph is self.graph and other.id == self.id

    def __hash__(self):
        return hash((id(self.graph), self.id))

    # Arithmetic builds ops on the tensor's graph.
    def _bin(self, other, op, op_scalar, reverse=False):
        if isinstance(other, (int, float, np.number)) and op_scalar is not None:
            return op_scalar(self, other)
        return op(other, self) if reverse else op(self, other)

    def __add__(self, o):
        return self._bin(o, self.graph.add, self.graph.add_scalar)

    __radd__ = __add__

    def __sub__(self, o):
        if isinstance(o, (int, float, np.number)):
            return self.graph.add_scalar(self, -float(o))
        return self.graph.sub(self, o)

    def __rsub__(self, o):
        return self.graph.sub(o, self)

    def __mul__(self, o):
        return self._bin(o, self.graph.mul, self.graph.mul_scalar)

    __rmul__ = __mul__

    def __truediv__(self, o):
        if isinstance(o, (int, float, np.number)):
            return self.graph.mul_scalar(self, 1.0 / float(o))
        return self.graph.div(self, o)

    def __neg__(self):
        return self.graph.mul_scalar(self, -1.0)

    def __pow__(self, s):
        return self.graph.pow_scalar(self, s)

    def __matmul__(self, o):
        return self.graph.matmul(self, o)


Op = collections.namedtuple("Op", "index kind name inputs outputs attrs")
Op.__doc__ = "An op of a graph: kind name, op name, input and output tensor names (None for an absent input), attrs."


def _pair(v, what):
    if isinstance(v, (int, np.integer)):
        return (int(v), int(v))
    v = tuple(int(x) for x in v)
    if len(v) != 2:
        raise _lib.error("SG_ERR_INVALID_ARG", "%s must be an int or (h, w), got %r" % (what, v))
    return v


def _padding4(v):
    """int, (h, w) or (top, left, bottom, right) -> 4-tuple in sgrt's order."""
    if isinstance(v, (int, np.integer)):
        return (int(v),) * 4
    v = tuple(int(x) for x in v)
    if len(v) == 2:
        return (v[0], v[1], v[0], v[1])
    if len(v) == 4:
        return v
    raise _lib.error("SG_ERR_INVALID_ARG", "padding must be an int, (h, w) or (top, left, bottom, right), got %r" % (v,))


_REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}



#: What the builder methods take for a tensor: a Tensor of the graph, or a tensor's name.
TensorLike = Union[Tensor, str]

class Graph(Closeable):
    """A compute graph (sg_graph).

    Create an empty one with Graph(), load one with Graph.load(path). Builder
    methods (input, parameter, linear, conv2d, ...) append to a graph that is
    not finalized; a failing one raises sgrt.Error at once, with the C message,
    and the graph keeps that error (later builder calls raise it again, as the
    C API's sticky errors). finalize() verifies and freezes the graph; a
    finalized graph is what a Session runs and what save() writes.

    Close it with close() or a `with` block; a Session made from the graph keeps
    the C graph alive until it is closed too.
    """

    def __init__(self):
        out = ctypes.c_void_p()
        fn.sg_clear_error()
        _lib.check(fn.sg_graph_create(ctypes.byref(out)))
        self._init(out.value)

    def _init(self, ptr):
        self._handle = _Handle(ptr)
        self._sticky = None

    @classmethod
    def _wrap(cls, ptr):
        g = cls.__new__(cls)
        g._init(ptr)
        return g

    # ---- lifecycle ---------------------------------------------------------

    @staticmethod
    def _onnx_strings(params, field, strings, what):
        """Sets params.<field> (a NULL-terminated char ** of sg_onnx_params) to `strings`, refused
        when the library's struct is too old to read the field (it would ignore it)."""
        end = getattr(_lib.sg_onnx_params, field).offset + ctypes.sizeof(ctypes.c_void_p)
        if strings and params.size < end:
            raise _lib.error("SG_ERR_UNSUPPORTED", "%s needs a libsgrt that knows sg_onnx_params.%s; %s is "
                             "older than this shim" % (what, field, _lib.path))
        arr = (ctypes.c_char_p * (len(strings) + 1))(*[n.encode() for n in strings], None)
        setattr(params, field, ctypes.cast(arr, ctypes.POINTER(ctypes.c_char_p)))
        setattr(params, "_" + field, arr)  # kept alive with the struct for the import

    @staticmethod
    def _dims_strings(dims):
        """dims= as "NAME=SIZE" strings: a mapping {name: size} or a sequence of such strings."""
        if isinstance(dims, dict):
            out = []
            for name, size in dims.items():
                if not isinstance(name, str) or isinstance(size, bool) or not isinstance(size, int):
                    raise _lib.error("SG_ERR_INVALID_ARG", "dims= maps symbolic dim names (str) to sizes "
                                     "(int); got %r: %r" % (name, size))
                out.append("%s=%d" % (name, size))
            return out
        if isinstance(dims, (str, bytes)) or not all(isinstance(d, str) for d in dims):
            raise _lib.error("SG_ERR_INVALID_ARG", "dims= is a dict {name: size} or a list of \"NAME=SIZE\" "
                             "strings, not %r" % (dims,))
        return list(dims)

    @staticmethod
    def _onnx_params(batch, training, constants=None, dims=None):
        if not _lib.has("sg_onnx_import"):
            raise _lib.error("SG_ERR_UNSUPPORTED", "this libsgrt (%s) has no ONNX importer" % _lib.path)
        params = fn.sg_onnx_params_init()
        if batch is not None:
            params.batch = int(batch)
        if training is not None:
            params.training = 1 if training else 0
        if constants is not None:
            if isinstance(constants, (str, bytes)) or not all(isinstance(n, str) for n in constants):
                raise _lib.error("SG_ERR_INVALID_ARG", "constants= is a list of initializer names (str), not %r"
                                 % (constants,))
            # An older library reads only the first params.size bytes: it would train the buffers.
            Graph._onnx_strings(params, "constants", list(constants), "constants=")
        if dims is not None:
            Graph._onnx_strings(params, "dims", Graph._dims_strings(dims), "dims=")
        return params

    @staticmethod
    def _onnx_by_content(p):
        """Whether a file not named .onnx is an ONNX model, as `sgrt` decides: one without the .sgg
        magic that parses as ONNX (a file that cannot be read goes to sg_graph_load, which says why)."""
        try:
            with open(p, "rb") as f:
                head = f.read(4)
        except OSError:
            return False
        if head == b"\x89SGG" or not _lib.has("sg_onnx_symbolic_dims"):  # the .sgg magic's first 4 bytes
            return False
        n = ctypes.c_size_t()
        ok = fn.sg_onnx_symbolic_dims(p, None, 0, ctypes.byref(n)) == 0
        fn.sg_clear_error()
        return ok

    @classmethod
    def load(cls, path: os.PathLike[str] | str, batch=None, training=None, constants=None, dims=None) -> Graph:
        """Loads a graph file.

        `.sgg` files go through sg_graph_load (validated, finalized, weights
        mapped from the file). ONNX models (named .onnx, or any file without the
        .sgg magic that parses as ONNX, as the sgrt tool decides) go through
        sg_onnx_import: `dims` sizes symbolic dims by name ({"batch": 4,
        "seq": 256}, or ["batch=4", "seq=256"]), `batch` every other symbolic
        dim (a dynamic batch alone); `training` True imports batch
        norm and dropout in training form (batch statistics, running statistics
        updated), False in inference form, None (default) as exported;
        `constants` names initializers to import as constants, not trainable
        parameters (buffers that arithmetic reads: rotary tables, positional
        encodings; docs/onnx.md).
        """
        p = _lib.fspath(path)
        out = ctypes.c_void_p()
        if p.lower().endswith(b".onnx") or cls._onnx_by_content(p):
            params = cls._onnx_params(batch, training, constants, dims)
            fn.sg_clear_error()
            _lib.check(fn.sg_onnx_import(p, ctypes.byref(params), ctypes.byref(out)))
        else:
            if batch is not None or training is not None or constants is not None or dims is not None:
                raise _lib.error("SG_ERR_INVALID_ARG", "batch=, training=, constants= and dims= apply to ONNX "
                                                       "models only; a .sgg graph has static shapes and roles")
            fn.sg_clear_error()
            _lib.check(fn.sg_graph_load(p, ctypes.byref(out)))
        return cls._wrap(out.value)

    @classmethod
    def from_bytes(cls, data, format="sgg", batch=None, training=None, constants=None, dims=None) -> Graph:
        """Loads a graph from the bytes of a .sgg file, or of an ONNX model with
        format="onnx" (batch=, training=, constants= and dims= as for load())."""
        data = bytes(data)
        out = ctypes.c_void_p()
        if format == "onnx":
            params = cls._onnx_params(batch, training, constants, dims)
            fn.sg_clear_error()
            _lib.check(fn.sg_onnx_import_from_memory(data, len(data), ctypes.byref(params), ctypes.byref(out)))
        elif format == "sgg":
            if batch is not None or training is not None or constants is not None or dims is not None:
                raise _lib.error("SG_ERR_INVALID_ARG", "batch=, training=, constants= and dims= apply to ONNX "
                                                       "models only")
            fn.sg_clear_error()
            _lib.check(fn.sg_graph_load_from_memory(data, len(data), ctypes.byref(out)))
        else:
            raise _lib.error("SG_ERR_INVALID_ARG", "format must be 'sgg' or 'onnx', not %r" % (format,))
        return cls._wrap(out.value)

    def to_bytes(self) -> bytes:
        """The graph (finalized) as the bytes of a .sgg file."""
        buf, size = ctypes.c_void_p(), ctypes.c_size_t()
        fn.sg_clear_error()
        _lib.check(fn.sg_graph_save_to_memory(self._ptr(), ctypes.byref(buf), ctypes.byref(size)))
        try:
            return ctypes.string_at(buf.value, size.value)
        finally:
            fn.sg_free(buf)

    def clone(self) -> Graph:
        """An editable (not finalized) copy, initializers included: how a loaded
        model gets a loss, backward() and an optimizer."""
        out = ctypes.c_void_p()
        fn.sg_clear_error()
        _lib.check(fn.sg_graph_clone(self._ptr(), ctypes.byref(out)))
        return Graph._wrap(out.value)

    def close(self) -> None:
        """Releases the graph. Sessions made from it keep working until they are
        closed. Safe to call twice."""
        h = getattr(self, "_handle", None)
        if h is not None:
            self._handle = None
            h.release()

    @property
    def closed(self):
        return getattr(self, "_handle", None) is None

    def _ptr(self):
        h = getattr(self, "_handle", None)
        if h is None or h.ptr is None:
            raise _lib.error("SG_ERR_STATE", "the graph is closed")
        return h.ptr

    # ---- whole-graph operations --------------------------------------------

    def finalize(self) -> None:
        """Verifies the graph and freezes it. Returns self."""
        fn.sg_clear_error()
        st = fn.sg_graph_finalize(self._ptr())
        if st != 0:
            self._raise_sticky(st)
        return self

    def verify(self) -> None:
        """Runs the verifier without freezing; raises on the first problem."""
        fn.sg_clear_error()
        _lib.check(fn.sg_graph_verify(self._ptr()))

    @property
    def finalized(self):
        return bool(fn.sg_graph_is_finalized(self._ptr()))

    @property
    def status(self):
        """The first builder error's status (0 if none)."""
        return fn.sg_graph_status(self._ptr())

    def save(self, path: os.PathLike[str] | str) -> None:
        """Writes the (finalized) graph as a .sgg file."""
        fn.sg_clear_error()
        _lib.check(fn.sg_graph_save(self._ptr(), _lib.fspath(path)))

    def hash(self, weights=False) -> str:
        """The graph's 64-bit content hash (int); with weights=True it also covers
        the initializer bytes."""
        out = ctypes.c_uint64()
        fn.sg_clear_error()
        _lib.check(fn.sg_graph_hash(self._ptr(), 1 if weights else 0, ctypes.byref(out)))
        return out.value

    def write_dot(self, path="-") -> None:
        """Writes the (finalized) graph as Graphviz DOT to `path` ("-": stdout)."""
        fn.sg_clear_error()
        _lib.check(fn.sg_graph_write_dot(self._ptr(), _lib.fspath(path)))

    # ---- queries -----------------------------------------------------------

    @property
    def num_tensors(self) -> int:
        return fn.sg_graph_num_tensors(self._ptr())

    @property
    def num_ops(self) -> int:
        return fn.sg_graph_num_ops(self._ptr())

    @property
    def tensors(self) -> list[Tensor]:
        """Every tensor, in id order."""
        return [Tensor(self, i) for i in range(self.num_tensors)]

    @property
    def inputs(self) -> list[Tensor]:
        """The graph inputs (role input), in creation order."""
        p = self._ptr()
        return [Tensor(self, fn.sg_graph_input(p, i).id) for i in range(fn.sg_graph_num_inputs(p))]

    @property
    def outputs(self) -> list[Tensor]:
        """The tensors marked as outputs."""
        p = self._ptr()
        return [Tensor(self, fn.sg_graph_output(p, i).id) for i in range(fn.sg_graph_num_outputs(p))]

    def tensors_with_role(self, role):
        code = D.role_code(role)
        return [t for t in self.tensors if t._info().role == code]

    @property
    def parameters(self) -> list[Tensor]:
        return self.tensors_with_role("parameter")

    def tensor(self, name: str) -> Tensor:
        """The tensor named `name` (sgrt.Error SG_ERR_NOT_FOUND if none)."""
        if isinstance(name, Tensor):
            return self._own(name)
        return Tensor(self, _find(self._ptr(), name))

    __getitem__ = tensor

    def __contains__(self, name: str):
        out = _lib.sg_tensor(-1)
        return fn.sg_graph_find_tensor(self._ptr(), _lib.encode(name), ctypes.byref(out)) == 0

    def op(self, index):
        """Op `index` as an Op tuple (kind, name, input and output names, attributes)."""
        p = self._ptr()
        info = _lib.sg_op_info()
        fn.sg_clear_error()
        _lib.check(fn.sg_graph_op_info(p, int(index), ctypes.byref(info)))

        def tname(tid):
            return None if tid < 0 else _tensor_info(p, tid).name.decode("utf-8", "replace")

        attrs = {}
        for a in range(info.n_attrs):
            at = _lib.sg_attr()
            _lib.check(fn.sg_graph_op_attr(p, int(index), a, ctypes.byref(at)))
            key = at.name.decode()
            if at.type == 1:
                attrs[key] = at.i
            elif at.type == 2:
                attrs[key] = at.f
            else:
                attrs[key] = [at.ints[j] for j in range(at.count)]
        return Op(int(index), D.op_kind_name(info.kind), (info.name or b"").decode("utf-8", "replace"),
                  [tname(info.inputs[i]) for i in range(info.n_inputs)],
                  [tname(info.outputs[i]) for i in range(info.n_outputs)], attrs)

    @property
    def ops(self):
        return [self.op(i) for i in range(self.num_ops)]

    def grad(self, param: TensorLike) -> Tensor:
        """The gradient tensor "<param>.grad" that backward() made."""
        out = _lib.sg_tensor(-1)
        fn.sg_clear_error()
        _lib.check(fn.sg_graph_grad(self._ptr(), self._t(param), ctypes.byref(out)))
        return Tensor(self, out.id)

    def __repr__(self):
        if self.closed:
            return "<sgrt.Graph (closed)>"
        return "<sgrt.Graph %d ops, %d tensors%s>" % (self.num_ops, self.num_tensors,
                                                    ", finalized" if self.finalized else "")

    # ---- building: helpers -------------------------------------------------

    def _own(self, t):
        if t.graph is not self:
            raise _lib.error("SG_ERR_INVALID_ARG", "tensor %r belongs to another graph" % (t,))
        return t

    def _t(self, x: TensorLike, optional=False):
        """sg_tensor of a Tensor or name (None: SG_NO_TENSOR when optional)."""
        if x is None:
            if optional:
                return _NO_TENSOR
            raise _lib.error("SG_ERR_INVALID_ARG", "a tensor is required, got None")
        if isinstance(x, Tensor):
            return _lib.sg_tensor(self._own(x).id)
        if isinstance(x, (str, bytes)):
            return _lib.sg_tensor(_find(self._ptr(), x))
        raise _lib.error("SG_ERR_INVALID_ARG", "expected a sgrt.Tensor or a tensor name, got %s" % type(x).__name__)

    def _raise_sticky(self, status):
        msg = _lib.last_error()
        if not msg and self._sticky is not None:
            msg = "the graph has an earlier builder error: " + self._sticky.message
        err = _lib._make_error(status, _lib.status_name(status), msg)
        if self._sticky is None and fn.sg_graph_status(self._ptr()) != 0:
            self._sticky = err
        raise err

    def _begin(self):
        p = self._ptr()
        if self._sticky is not None:
            e = self._sticky
            raise _lib._make_error(e.status, e.code, "the graph has an earlier builder error: " + e.message)
        fn.sg_clear_error()
        return p

    def _result(self, t):
        if t.id < 0:
            p = self._ptr()
            st = fn.sg_graph_status(p)
            if st == 0:  # not recorded on the graph: a call on a finalized graph
                st = _lib.STATUS["SG_ERR_STATE" if fn.sg_graph_is_finalized(p) else "SG_ERR_INTERNAL"]
            self._raise_sticky(st)
        return Tensor(self, t.id)

    def _status(self, st):
        if st != 0:
            self._raise_sticky(st)

    # ---- sources -----------------------------------------------------------

    def add_tensor(self, name: str, role, dtype=None, shape=None, data=None) -> Tensor:
        """A source tensor with any role except activation and gradient.
        `data` (array-like) gives its initializer and, if omitted, its dtype and
        shape; float64 data becomes f32 unless `dtype` says otherwise."""
        code = D.role_code(role)
        arr = None
        if data is not None:
            arr = np.asarray(data)
            if dtype is None:
                if arr.dtype == np.float64:
                    dtype = D.F32
                elif D.from_numpy(arr.dtype) is not None:
                    dtype = D.from_numpy(arr.dtype)
                else:
                    raise _lib.error("SG_ERR_DTYPE", "tensor '%s': data of numpy dtype %s has no sgrt dtype; pass dtype="
                                     % (name, arr.dtype))
            dcode = D.dtype_code(dtype)
            arr = np.require(arr, dtype=D.NUMPY[dcode], requirements="C")
            if shape is not None and tuple(shape) != arr.shape:
                raise _lib.error("SG_ERR_SHAPE", "tensor '%s': shape %s given, but data has shape %s"
                                 % (name, list(shape), list(arr.shape)))
            shape = arr.shape
        else:
            if dtype is None or shape is None:
                raise _lib.error("SG_ERR_INVALID_ARG", "tensor '%s': give dtype and shape, or data" % name)
            dcode = D.dtype_code(dtype)
        ndim, dims = _lib.dims_array(shape)
        p = self._begin()
        ptr = arr.ctypes.data_as(ctypes.c_void_p) if arr is not None else None
        return self._result(fn.sg_graph_add_tensor(p, _lib.encode(name), dcode, code, ndim, dims, ptr))

    def input(self, name: str, dtype, shape) -> Tensor:
        """A graph input, fed every step (Session.set_input)."""
        return self.add_tensor(name, D.ROLE_INPUT, dtype=dtype, shape=shape)

    def parameter(self, name: str, data, dtype=None) -> Tensor:
        """A trainable parameter initialised from `data` (copied)."""
        return self.add_tensor(name, D.ROLE_PARAMETER, dtype=dtype, data=data)

    def constant(self, name: str, data, dtype=None) -> Tensor:
        """A constant known at build time (copied)."""
        return self.add_tensor(name, D.ROLE_CONSTANT, dtype=dtype, data=data)

    def state(self, name: str, data, dtype=None) -> Tensor:
        """A non-trainable buffer updated by an op (batch-norm running statistics)."""
        return self.add_tensor(name, D.ROLE_STATE, dtype=dtype, data=data)

    def set_name(self, tensor: TensorLike, name: str) -> None:
        """Renames a tensor (e.g. an op's output to "loss"). Returns the tensor."""
        t = self._t(tensor)
        p = self._begin()
        self._status(fn.sg_tensor_set_name(p, t, _lib.encode(name)))
        return Tensor(self, t.id)

    def mark_output(self, tensor: TensorLike, name=None) -> Tensor:
        """Marks a tensor as a graph output (optionally renaming it first)."""
        if name is not None:
            self.set_name(tensor, name)
        t = self._t(tensor)
        p = self._begin()
        self._status(fn.sg_graph_mark_output(p, t))
        return Tensor(self, t.id)

    # ---- ops ---------------------------------------------------------------

    def add_op(self, kind, inputs, attrs=None, max_outputs=8):
        """Generic op constructor (sg_graph_add_op): `kind` is a name ("conv2d") or
        number, `inputs` Tensors/names/None, `attrs` {name: int | float | [ints]}.
        Returns the list of output tensors."""
        code = D.op_kind_code(kind)
        ins = (_lib.sg_tensor * max(len(inputs), 1))(*[self._t(x, optional=True) for x in inputs])
        attrs = attrs or {}
        keep = []
        arr = (_lib.sg_attr * max(len(attrs), 1))()
        for i, (k, v) in enumerate(attrs.items()):
            a = arr[i]
            kb = _lib.encode(k, "attribute name")
            keep.append(kb)
            a.name = kb
            if isinstance(v, (bool, int, np.integer)):
                a.type, a.i = 1, int(v)
            elif isinstance(v, (float, np.floating)):
                a.type, a.f = 2, float(v)
            else:
                vals = (ctypes.c_int64 * max(len(v), 1))(*[int(x) for x in v])
                keep.append(vals)
                a.type, a.count, a.ints = 3, len(v), vals
        outs = (_lib.sg_tensor * max_outputs)()
        n_out = ctypes.c_int()
        p = self._begin()
        st = fn.sg_graph_add_op(p, code, len(inputs), ins, len(attrs), arr, max_outputs, outs, ctypes.byref(n_out))
        self._status(st)
        return [Tensor(self, outs[i].id) for i in range(min(n_out.value, max_outputs))]

    def _unary(self, f, x: TensorLike, *args):
        t = self._t(x)
        p = self._begin()
        return self._result(f(p, t, *args))

    def _binary(self, f, a: TensorLike, b: TensorLike):
        ta, tb = self._t(a), self._t(b)
        p = self._begin()
        return self._result(f(p, ta, tb))

    def conv2d(self, x: TensorLike, weight: TensorLike, bias: Optional[TensorLike] = None, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
        """NCHW convolution, weight [C_out, C_in/groups, kH, kW]; padding is an int,
        (h, w) or (top, left, bottom, right)."""
        prm = fn.sg_conv2d_params_init()
        prm.stride[:] = _pair(stride, "stride")
        prm.padding[:] = _padding4(padding)
        prm.dilation[:] = _pair(dilation, "dilation")
        prm.groups = int(groups)
        tx, tw, tb = self._t(x), self._t(weight), self._t(bias, optional=True)
        p = self._begin()
        return self._result(fn.sg_conv2d(p, tx, tw, tb, ctypes.byref(prm)))

    def batch_norm(self, x: TensorLike, weight: TensorLike, bias: TensorLike, running_mean: TensorLike, running_var: TensorLike, eps=1e-5, momentum=0.1, training=True) -> Tensor:
        """Batch normalization over N (and H, W). In training form it uses batch
        statistics and updates the running statistics (role state) in place."""
        prm = fn.sg_batch_norm_params_init()
        prm.eps, prm.momentum, prm.training = float(eps), float(momentum), 1 if training else 0
        ts = [self._t(v) for v in (x, weight, bias, running_mean, running_var)]
        p = self._begin()
        return self._result(fn.sg_batch_norm(p, *ts, ctypes.byref(prm)))

    def relu(self, x: TensorLike) -> Tensor:
        return self._unary(fn.sg_relu, x)

    def relu6(self, x: TensorLike) -> Tensor:
        return self._unary(fn.sg_relu6, x)

    def clip(self, x: TensorLike, lo, hi) -> Tensor:
        return self._unary(fn.sg_clip, x, float(lo), float(hi))

    def gelu(self, x: TensorLike, approximate=False) -> Tensor:
        """GELU; approximate=True for the tanh form."""
        return self._unary(fn.sg_gelu, x, 1 if approximate else 0)

    def sigmoid(self, x: TensorLike) -> Tensor:
        return self._unary(fn.sg_sigmoid, x)

    def tanh(self, x: TensorLike) -> Tensor:
        return self._unary(fn.sg_tanh, x)

    def add(self, a: TensorLike, b: TensorLike) -> Tensor:
        return self._binary(fn.sg_add, a, b)

    def sub(self, a: TensorLike, b: TensorLike) -> Tensor:
        return self._binary(fn.sg_sub, a, b)

    def mul(self, a: TensorLike, b: TensorLike) -> Tensor:
        return self._binary(fn.sg_mul, a, b)

    def div(self, a: TensorLike, b: TensorLike) -> Tensor:
        return self._binary(fn.sg_div, a, b)

    def add_scalar(self, x: TensorLike, s) -> Tensor:
        return self._unary(fn.sg_add_scalar, x, float(s))

    def mul_scalar(self, x: TensorLike, s) -> Tensor:
        return self._unary(fn.sg_mul_scalar, x, float(s))

    def pow_scalar(self, x: TensorLike, s) -> Tensor:
        return self._unary(fn.sg_pow_scalar, x, float(s))

    def exp(self, x: TensorLike) -> Tensor:
        return self._unary(fn.sg_exp, x)

    def log(self, x: TensorLike) -> Tensor:
        return self._unary(fn.sg_log, x)

    def sqrt(self, x: TensorLike) -> Tensor:
        return self._unary(fn.sg_sqrt, x)

    def reciprocal(self, x: TensorLike) -> Tensor:
        return self._unary(fn.sg_reciprocal, x)

    def erf(self, x: TensorLike) -> Tensor:
        return self._unary(fn.sg_erf, x)

    def sin(self, x: TensorLike) -> Tensor:
        return self._unary(fn.sg_sin, x)

    def cos(self, x: TensorLike) -> Tensor:
        return self._unary(fn.sg_cos, x)

    def acos(self, x: TensorLike) -> Tensor:
        """NaN outside [-1, 1], as torch.acos."""
        return self._unary(fn.sg_acos, x)

    def neg(self, x: TensorLike) -> Tensor:
        return self._unary(fn.sg_neg, x)

    def abs(self, x: TensorLike) -> Tensor:
        return self._unary(fn.sg_abs, x)

    def sign(self, x: TensorLike) -> Tensor:
        return self._unary(fn.sg_sign, x)

    def maximum(self, a: TensorLike, b: TensorLike) -> Tensor:
        """Elementwise maximum with broadcasting (NaN propagates), as torch.maximum."""
        return self._binary(fn.sg_max, a, b)

    def minimum(self, a: TensorLike, b: TensorLike) -> Tensor:
        """Elementwise minimum with broadcasting (NaN propagates), as torch.minimum."""
        return self._binary(fn.sg_min, a, b)

    def where(self, cond: TensorLike, a: TensorLike, b: TensorLike) -> Tensor:
        """cond (bool) ? a : b, all three broadcast."""
        tc, ta, tb = self._t(cond), self._t(a), self._t(b)
        p = self._begin()
        return self._result(fn.sg_where(p, tc, ta, tb))

    def cast(self, x: TensorLike, dtype) -> Tensor:
        """x converted to dtype ("f32", "i32", "i64" or "bool")."""
        return self._unary(fn.sg_cast, x, D.dtype_code(dtype))

    def layer_norm(self, x: TensorLike, weight: Optional[TensorLike] = None, bias: Optional[TensorLike] = None, axis=-1, eps=1e-5) -> Tensor:
        """Layer normalization over the dims of x from `axis` on (torch.nn.LayerNorm)."""
        tx, tw, tb = self._t(x), self._t(weight, optional=True), self._t(bias, optional=True)
        p = self._begin()
        return self._result(fn.sg_layer_norm(p, tx, tw, tb, int(axis), float(eps)))

    def embedding(self, table: TensorLike, ids: TensorLike) -> Tensor:
        """Rows of table [V, C] (float) named by ids (i32 or i64): table[ids], of shape ids.shape + (C,),
        as torch.nn.Embedding. The table gets a gradient, the ids none; an id outside 0..V-1 fails
        the step (SG_ERR_RANGE)."""
        tt, ti = self._t(table), self._t(ids)
        p = self._begin()
        return self._result(fn.sg_embedding(p, tt, ti))

    def attention(self, q: TensorLike, k: TensorLike, v: TensorLike, scale=0.0, causal=False,
                  dropout_p=0.0, seed=0) -> Tensor:
        """Fused scaled-dot-product attention softmax(q k^T scale + mask) v over the last two dims
        (q [..., T_q, d], k [..., T_k, d], v [..., T_k, d_v], f32, the same leading dims), as
        torch.nn.functional.scaled_dot_product_attention: y [..., T_q, d_v]. scale 0 means
        1/sqrt(d); causal lets query i see keys 0..i (T_q == T_k). No [T_q, T_k] tensor is kept
        for the backward pass, which recomputes the probabilities. dropout_p in [0, 1) drops
        attention weights in training steps (the masks of dropout(softmax, dropout_p, seed),
        drawn again in backward; an evaluation pass drops nothing)."""
        tq, tk, tv = self._t(q), self._t(k), self._t(v)
        p = self._begin()
        if dropout_p:
            return self._result(fn.sg_attention_dropout(p, tq, tk, tv, float(scale), int(bool(causal)),
                                                        float(dropout_p), int(seed)))
        return self._result(fn.sg_attention(p, tq, tk, tv, float(scale), int(bool(causal))))

    def matmul(self, a: TensorLike, b: TensorLike) -> Tensor:
        return self._binary(fn.sg_matmul, a, b)

    def gemm(self, a: TensorLike, b: TensorLike, c: Optional[TensorLike] = None, trans_a=False, trans_b=False, alpha=1.0, beta=1.0) -> Tensor:
        prm = fn.sg_gemm_params_init()
        prm.trans_a, prm.trans_b = int(bool(trans_a)), int(bool(trans_b))
        prm.alpha, prm.beta = float(alpha), float(beta)
        ta, tb, tc = self._t(a), self._t(b), self._t(c, optional=True)
        p = self._begin()
        return self._result(fn.sg_gemm(p, ta, tb, tc, ctypes.byref(prm)))

    def linear(self, x: TensorLike, weight: TensorLike, bias: Optional[TensorLike] = None) -> Tensor:
        """x [N, in] @ weight[out, in]^T + bias[out]."""
        tx, tw, tb = self._t(x), self._t(weight), self._t(bias, optional=True)
        p = self._begin()
        return self._result(fn.sg_linear(p, tx, tw, tb))

    def _pool(self, f, x: TensorLike, kernel, stride, padding, ceil_mode, count_include_pad):
        prm = fn.sg_pool2d_params_init()
        prm.kernel[:] = _pair(kernel, "kernel")
        prm.stride[:] = (0, 0) if stride is None else _pair(stride, "stride")
        prm.padding[:] = _padding4(padding)
        prm.ceil_mode = 1 if ceil_mode else 0
        prm.count_include_pad = 1 if count_include_pad else 0
        t = self._t(x)
        p = self._begin()
        return self._result(f(p, t, ctypes.byref(prm)))

    def max_pool2d(self, x: TensorLike, kernel, stride=None, padding=0, ceil_mode=False) -> Tensor:
        """Max pooling; stride None means the kernel size (like PyTorch)."""
        return self._pool(fn.sg_max_pool2d, x, kernel, stride, padding, ceil_mode, True)

    def avg_pool2d(self, x: TensorLike, kernel, stride=None, padding=0, ceil_mode=False, count_include_pad=True) -> Tensor:
        return self._pool(fn.sg_avg_pool2d, x, kernel, stride, padding, ceil_mode, count_include_pad)

    def global_avg_pool(self, x: TensorLike) -> Tensor:
        """Mean over H and W: [N, C, H, W] -> [N, C, 1, 1]."""
        return self._unary(fn.sg_global_avg_pool, x)

    def flatten(self, x: TensorLike, axis=1) -> Tensor:
        return self._unary(fn.sg_flatten, x, int(axis))

    def reshape(self, x: TensorLike, shape) -> Tensor:
        """Reshape; one entry may be -1 and 0 copies the input's dim."""
        ndim, dims = _lib.dims_array(shape)
        return self._unary(fn.sg_reshape, x, ndim, dims)

    def transpose(self, x: TensorLike, perm) -> Tensor:
        ndim, dims = _lib.dims_array(perm)
        return self._unary(fn.sg_transpose, x, ndim, dims)

    def concat(self, xs, axis) -> Tensor:
        ts = [self._t(x) for x in xs]
        arr = (_lib.sg_tensor * max(len(ts), 1))(*ts)
        p = self._begin()
        return self._result(fn.sg_concat(p, len(ts), arr, int(axis)))

    def slice(self, x: TensorLike, axis: int, start: int, length: int) -> Tensor:
        """x[..., start:start+length, ...] along `axis` (a non-empty range inside the dim)."""
        return self._unary(fn.sg_slice, x, int(axis), int(start), int(length))

    def softmax(self, x: TensorLike, axis=-1) -> Tensor:
        return self._unary(fn.sg_softmax, x, int(axis))

    def log_softmax(self, x: TensorLike, axis=-1) -> Tensor:
        return self._unary(fn.sg_log_softmax, x, int(axis))

    def cross_entropy(self, logits: TensorLike, labels: TensorLike, reduction="mean") -> Tensor:
        """Cross entropy of logits [N, C] against class indices [N] (i32/i64),
        as torch.nn.functional.cross_entropy; reduction "mean", "sum" or "none"."""
        if isinstance(reduction, str):
            if reduction not in _REDUCTIONS:
                raise _lib.error("SG_ERR_INVALID_ARG", "reduction must be 'mean', 'sum' or 'none', not %r" % reduction)
            reduction = _REDUCTIONS[reduction]
        tl, ty = self._t(logits), self._t(labels)
        p = self._begin()
        return self._result(fn.sg_cross_entropy(p, tl, ty, int(reduction)))

    def _reduce(self, f, x: TensorLike, axes, keepdims):
        if axes is None:
            axes = ()
        elif isinstance(axes, (int, np.integer)):
            axes = (int(axes),)
        n, arr = _lib.dims_array(axes)
        return self._unary(f, x, n, arr, 1 if keepdims else 0)

    def reduce_mean(self, x: TensorLike, axes=None, keepdims=False) -> Tensor:
        """Mean over `axes` (all when None)."""
        return self._reduce(fn.sg_reduce_mean, x, axes, keepdims)

    def reduce_sum(self, x: TensorLike, axes=None, keepdims=False) -> Tensor:
        return self._reduce(fn.sg_reduce_sum, x, axes, keepdims)

    def reduce_max(self, x: TensorLike, axes=None, keepdims=False) -> Tensor:
        """torch.amax: NaN propagates; the gradient is split among ties."""
        return self._reduce(fn.sg_reduce_max, x, axes, keepdims)

    def reduce_min(self, x: TensorLike, axes=None, keepdims=False) -> Tensor:
        """torch.amin: NaN propagates; the gradient is split among ties."""
        return self._reduce(fn.sg_reduce_min, x, axes, keepdims)

    def topk(self, x: TensorLike, k: int, largest=True):
        """torch.topk along the last axis: (values, int64 indices) of the k largest (smallest) of each row,
        in order; of equal values the lower index first (ONNX's rule), NaN above every number."""
        t = self._t(x)
        p = self._begin()
        idx = _lib.sg_tensor()
        values = self._result(fn.sg_topk(p, t, int(k), 1 if largest else 0, ctypes.byref(idx)))
        return values, Tensor(self, idx.id)

    def cumsum(self, x: TensorLike, axis: int, exclusive=False, reverse=False) -> Tensor:
        """Running sum along `axis` (torch.cumsum; ONNX CumSum's exclusive and reverse)."""
        return self._unary(fn.sg_cumsum, x, int(axis), 1 if exclusive else 0, 1 if reverse else 0)

    def dropout(self, x: TensorLike, p, seed=0, training=True) -> Tensor:
        return self._unary(fn.sg_dropout, x, float(p), int(seed), 1 if training else 0)

    # ---- training ----------------------------------------------------------

    def backward(self, loss: TensorLike) -> None:
        """Appends the backward ops of `loss` (one element) for every parameter it
        depends on; the gradient of parameter "w" is the tensor "w.grad"."""
        t = self._t(loss)
        p = self._begin()
        self._status(fn.sg_graph_backward(p, t))

    def _lr(self, lr):
        if isinstance(lr, (int, float, np.floating, np.integer)):
            return self.constant("lr", np.float32(lr))
        return lr

    def add_sgd(self, lr, momentum=0.0, nesterov=False, weight_decay=0.0, dampening=0.0) -> None:
        """SGD updates (torch.optim.SGD semantics) of every parameter with a
        gradient. `lr`: a one-element f32 tensor (usually an input, so it can
        change every step), or a number, baked in as the constant tensor "lr".
        With momentum, each parameter gets "<param>.momentum_buffer"."""
        prm = fn.sg_sgd_params_init()
        prm.momentum, prm.dampening, prm.weight_decay = float(momentum), float(dampening), float(weight_decay)
        prm.nesterov = 1 if nesterov else 0
        t = self._t(self._lr(lr))
        p = self._begin()
        self._status(fn.sg_graph_add_sgd(p, t, ctypes.byref(prm)))

    def add_adamw(self, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, decay_min_ndim=0):
        """AdamW updates (torch.optim.AdamW semantics) of every parameter with a
        gradient; state "<param>.exp_avg", ".exp_avg_sq", ".step". Weight decay
        applies to parameters of at least `decay_min_ndim` dims only (2: GPT-2's
        groups, matrices and embeddings but not biases or LayerNorm)."""
        prm = fn.sg_adamw_params_init()
        prm.beta1, prm.beta2 = float(betas[0]), float(betas[1])
        prm.eps, prm.weight_decay = float(eps), float(weight_decay)
        prm.decay_min_ndim = int(decay_min_ndim)
        t = self._t(self._lr(lr))
        p = self._begin()
        self._status(fn.sg_graph_add_adamw(p, t, ctypes.byref(prm)))
