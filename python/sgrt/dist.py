"""sgrt.Dist: one rank of a distributed training job (include/sgrt/dist.h).

Start one process per rank (`sgrt launch -n 4 python3 train.py`, torchrun-style
variables, srun or mpirun: the library reads rank, world size and master from
the environment), build the same graph on every rank, then:

    with sgrt.Dist(graph, threads=1, feed=feed) as d:   # collective
        for step in range(steps):
            out = d.step()                               # collective
        print(d.stats["loss_mean"], d.params_hash())

`feed(dist, step, shard, n_shards)` sets the inputs of one shard of the global
batch with dist.set_input(); the library calls it for each shard this rank runs
(its own, its micro-batches, and after a failure a lost rank's), which is what
lets a job heal. Without it, set the inputs yourself before each step (no
healing). Pipeline and tensor parallelism (and both) go through Dist.model().
"""

from __future__ import annotations

import ctypes
import os
from typing import Any, Callable, Optional

import numpy as np

from . import _dtypes as D
from . import _lib
from ._closeable import Closeable
from ._lib import fn, c_int, c_int64, c_uint64, c_size_t, c_double, c_char_p, c_void_p, POINTER
from .graph import Graph, TensorLike

c_uint32 = ctypes.c_uint32
c_float = ctypes.c_float

FEED_FN = ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p, c_uint64, c_int, c_int)


class sg_dist_params(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t), ("comm", c_void_p), ("device", c_char_p), ("threads", c_int), ("seed", c_uint64),
        ("data", c_int), ("pipeline", c_int), ("tensor", c_int), ("micro_batches", c_int),
        ("bucket_bytes", c_size_t), ("heartbeat_ms", c_int), ("dead_ms", c_int), ("trace", c_int),
        ("trace_path", c_char_p), ("trace_events", c_size_t), ("feed", FEED_FN), ("feed_ctx", c_void_p),
        ("qos", c_int), ("offload", c_char_p), ("offload_path", c_char_p), ("zero", c_int), ("hang_ms", c_int),
        ("inject", c_char_p), ("inject_seed", c_uint64), ("repartition_p99_ms", c_double),
        ("repartition_cpu", c_double), ("heal", c_int), ("sync_batch_norm", c_int),
    ]


class sg_dist_stats(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t), ("steps", c_uint64), ("world_size", c_int), ("healthy_ranks", c_int),
        ("has_loss", c_int), ("loss_mean", c_float), ("buckets", c_uint32), ("gradient_bytes", c_size_t),
        ("step_ms", c_double), ("comm_ms", c_double), ("wait_ms", c_double), ("original_rank", c_int),
        ("epoch", c_int), ("recoveries", c_int), ("shards", c_int), ("excluded", c_int), ("detection_ms", c_double),
        ("recovery_ms", c_double), ("rto_ms", c_double), ("rpo_steps", c_uint64), ("redone_steps", c_uint64),
        ("snapshot_ms", c_double), ("snapshot_wait_ms", c_double), ("snapshot_restores", c_uint64),
        ("offload_bytes", c_size_t), ("optimizer_state_bytes", c_size_t), ("optimizer_state_total", c_size_t),
        ("reduce_scatter_ms", c_double), ("allgather_ms", c_double), ("replica_bytes", c_size_t),
        ("replication_ms", c_double), ("rejoins", c_int), ("degraded_ranks", c_int), ("dropped_shards", c_uint64),
        ("rereduced_steps", c_int), ("collective_retries", c_int), ("cpu_util", c_double), ("step_p99_ms", c_double),
        ("steps_per_s", c_double), ("repartition_due", c_int), ("repartitions", c_int), ("migrated_bytes", c_uint64),
        ("migrated_bytes_total", c_uint64), ("steps_per_s_before_repartition", c_double), ("rto_step_ms", c_double),
    ]


class sg_dist_optimizer(ctypes.Structure):
    _fields_ = [("size", c_size_t), ("kind", c_int), ("lr_input", c_char_p),
                ("sgd", POINTER(_lib.sg_sgd_params)), ("adamw", POINTER(_lib.sg_adamw_params))]


_PROTOTYPES = {
    "sg_dist_params_init": (sg_dist_params, []),
    "sg_dist_optimizer_init": (sg_dist_optimizer, []),
    "sg_dist_create": (c_int, [c_void_p, POINTER(sg_dist_params), POINTER(c_void_p)]),
    "sg_dist_create_model": (c_int, [c_void_p, _lib.sg_tensor, POINTER(sg_dist_optimizer),
                                     POINTER(sg_dist_params), POINTER(c_void_p)]),
    "sg_dist_destroy": (c_int, [c_void_p]),
    "sg_dist_rank": (c_int, [c_void_p]),
    "sg_dist_size": (c_int, [c_void_p]),
    "sg_dist_set_input": (c_int, [c_void_p, c_char_p, c_int, c_int, POINTER(c_int64), c_void_p]),
    "sg_dist_step": (c_int, [c_void_p]),
    "sg_dist_read": (c_int, [c_void_p, c_char_p, c_void_p, c_size_t]),
    "sg_dist_params_hash": (c_int, [c_void_p, POINTER(c_uint64)]),
    "sg_dist_get_stats": (c_int, [c_void_p, POINTER(sg_dist_stats)]),
    "sg_dist_health": (c_void_p, [c_void_p]),
    "sg_dist_write_trace": (c_int, [c_void_p, c_char_p]),
    "sg_dist_save_checkpoint": (c_int, [c_void_p, c_char_p]),
    "sg_health_count": (c_int, [c_void_p, c_int]),
    "sg_health_world_size": (c_int, [c_void_p]),
    "sg_health_state_of": (c_int, [c_void_p, c_int, POINTER(c_int)]),
    "sg_qos_parse": (c_int, [c_char_p, POINTER(c_int)]),
}
for _name, (_restype, _argtypes) in _PROTOTYPES.items():
    _f = getattr(_lib.lib, _name)
    _f.restype, _f.argtypes = _restype, _argtypes
    setattr(fn, _name, _f)

_HEALTH_STATES = {0: "healthy", 1: "degraded", 2: "unreachable"}
_OPTIMIZERS = {"sgd": 1, "adamw": 2}  # SG_DIST_OPT_SGD, SG_DIST_OPT_ADAMW


class Dist(Closeable):
    """One rank of a data-parallel job over `graph` (a finalized training graph: forward, loss,
    backward and the optimizer update; the same on every rank). Collective: every rank creates it.

    Keyword arguments are sg_dist_params' fields: threads (0: all CPUs), seed, device ("cpu",
    "cuda", "cuda:N"), data (data-parallel degree, -1: the world), micro_batches, bucket_bytes,
    heartbeat_ms, dead_ms, qos ("strict", "best-effort", "graceful-degrade"), zero (ZeRO-1: 1),
    offload ("dram" | "pmem") and offload_path, trace_path, sync_batch_norm; feed (a Python
    function, see the module docstring) turns healing on.
    """

    def __init__(self, graph: Graph, feed: Optional[Callable[["Dist", int, int, int], None]] = None, threads: int = 0,
                 seed: int = 0, device: str = "cpu", _model=None, **params: Any) -> None:
        if not isinstance(graph, Graph):
            raise _lib.error("SG_ERR_INVALID_ARG", "sgrt.Dist: graph must be a sgrt.Graph, not %s"
                             % type(graph).__name__)
        self._d = None
        self._g = graph
        self._feed = feed
        self._feed_error = None
        self._keep = []  # what the C params point into, alive as long as the job
        p = fn.sg_dist_params_init()
        p.threads, p.seed = int(threads), int(seed)
        p.device = self._bytes(device)
        for k, v in params.items():
            if k == "qos":
                q = c_int()
                _lib.check(fn.sg_qos_parse(_lib.encode(v), ctypes.byref(q)))
                v = q.value
            if not hasattr(p, k) or k in ("size", "comm", "feed", "feed_ctx"):
                raise _lib.error("SG_ERR_INVALID_ARG", "sgrt.Dist: unknown parameter %r" % k)
            setattr(p, k, self._bytes(v) if isinstance(v, str) else v)
        if feed is not None:
            self._cfeed = FEED_FN(self._call_feed)
            p.feed = self._cfeed
        out = c_void_p()
        fn.sg_clear_error()
        if _model is None:
            _lib.check(fn.sg_dist_create(graph._ptr(), ctypes.byref(p), ctypes.byref(out)))
        else:
            loss, opt = _model
            _lib.check(fn.sg_dist_create_model(graph._ptr(), loss, ctypes.byref(opt), ctypes.byref(p),
                                               ctypes.byref(out)))
        self._d = out.value

    @classmethod
    def model(cls, forward: Graph, loss: TensorLike, optimizer: str = "sgd", lr_input: str = "lr", momentum: float = 0.9,
              weight_decay: float = 0.0, pipeline: int = 1, tensor: int = 1, heal: bool = False, **params: Any) -> Dist:
        """A job over a forward graph (not finalized with backward or updates: the library adds them
        per part) with its loss tensor: `pipeline` stages, each a tensor group of `tensor` ranks, the
        other ranks data-parallel copies; `optimizer` "sgd" (momentum, weight_decay) or "adamw"
        (weight_decay), the learning rate read from input `lr_input` every step; `heal` turns on the
        healing of pipelines and tensor groups (docs/resilience.md)."""
        if optimizer not in _OPTIMIZERS:
            raise _lib.error("SG_ERR_INVALID_ARG", "sgrt.Dist.model: optimizer must be 'sgd' or 'adamw', not %r"
                             % (optimizer,))
        opt = fn.sg_dist_optimizer_init()
        opt.kind = _OPTIMIZERS[optimizer]
        lr_b = _lib.encode(lr_input)
        opt.lr_input = lr_b
        keep = [lr_b]
        if optimizer == "sgd":
            sgd = fn.sg_sgd_params_init()
            sgd.momentum, sgd.weight_decay = float(momentum), float(weight_decay)
            opt.sgd = ctypes.pointer(sgd)
            keep.append(sgd)
        else:
            aw = fn.sg_adamw_params_init()
            aw.weight_decay = float(weight_decay)
            opt.adamw = ctypes.pointer(aw)
            keep.append(aw)
        t = forward._t(loss)
        d = cls(forward, _model=(t, opt), pipeline=int(pipeline), tensor=int(tensor), heal=1 if heal else 0,
                **params)
        d._keep += keep
        return d

    @staticmethod
    def _bytes(v):
        return None if v is None else _lib.encode(v) if isinstance(v, str) else v

    def _call_feed(self, ctx, d, step, shard, n_shards):
        try:
            self._feed(self, int(step), int(shard), int(n_shards))
            return 0
        except Exception as e:  # handed back to step(), which raises it
            self._feed_error = e
            return _lib.STATUS["SG_ERR_INVALID_ARG"]

    def close(self) -> None:
        """Leaves the job (collective unless it failed) and frees everything. Idempotent."""
        if self._d is not None:
            d, self._d = self._d, None
            fn.sg_clear_error()
            _lib.check(fn.sg_dist_destroy(d))

    @property
    def closed(self):
        return self._d is None

    def _ptr(self):
        if self._d is None:
            raise _lib.error("SG_ERR_STATE", "the sgrt.Dist is closed")
        return self._d

    @property
    def rank(self) -> int:
        """This rank now (a recovery renumbers the ranks)."""
        return fn.sg_dist_rank(self._ptr())

    @property
    def size(self) -> int:
        """The ranks in the job now."""
        return fn.sg_dist_size(self._ptr())

    def set_input(self, name: str, value: Any) -> None:
        """Copies `value` into input `name` for this rank's next step (or, in feed, this shard). A
        float64 array for an f32 input is converted (as Session.set_input)."""
        arr = np.asarray(value)
        t = self._g.tensor(name) if name in self._g else None
        if t is not None and arr.dtype == np.float64 and t.dtype_name == "f32":
            arr = arr.astype(np.float32)
        code = D.from_numpy(arr.dtype)
        if code is None:
            raise _lib.error("SG_ERR_DTYPE", "sg_dist_set_input: input '%s': numpy dtype %s has no sgrt type"
                             % (name, arr.dtype))
        arr = np.require(arr, requirements="C")
        ndim, dims = _lib.dims_array(arr.shape)
        fn.sg_clear_error()
        _lib.check(fn.sg_dist_set_input(self._ptr(), _lib.encode(name), code, ndim, dims,
                                        arr.ctypes.data_as(c_void_p)))

    def step(self) -> dict[str, Any]:
        """One training step of the whole job (collective). Returns the stats after it (a dict, as
        the `stats` property); a failure the job cannot heal raises sgrt.Error (SG_ERR_COMM ...)."""
        self._feed_error = None
        fn.sg_clear_error()
        st = fn.sg_dist_step(self._ptr())
        if self._feed_error is not None:
            e, self._feed_error = self._feed_error, None
            raise e
        _lib.check(st)
        return self.stats

    def read(self, name: str) -> np.ndarray:
        """A copy of a tensor on this rank (a parameter, the loss ...) as a numpy array."""
        t = self._g.tensor(name)
        out = np.empty(t.shape, dtype=t.dtype)
        fn.sg_clear_error()
        _lib.check(fn.sg_dist_read(self._ptr(), _lib.encode(name), out.ctypes.data_as(c_void_p), out.nbytes))
        return out

    def params_hash(self) -> str:
        """The job's parameters digest (collective), as the C examples' params_hash: 16 hex digits."""
        h = c_uint64()
        fn.sg_clear_error()
        _lib.check(fn.sg_dist_params_hash(self._ptr(), ctypes.byref(h)))
        return "%016x" % h.value

    @property
    def stats(self) -> dict[str, Any]:
        """sg_dist_stats as a dict (steps, loss_mean, step_ms, comm_ms, wait_ms, recoveries, rto_ms ...)."""
        s = sg_dist_stats()
        s.size = ctypes.sizeof(s)
        fn.sg_clear_error()
        _lib.check(fn.sg_dist_get_stats(self._ptr(), ctypes.byref(s)))
        return {k: getattr(s, k) for k, _ in sg_dist_stats._fields_ if k != "size"}

    @property
    def health(self) -> dict[int, str]:
        """{original rank: "healthy" | "degraded" | "unreachable"} from the job's health monitor
        (empty without healing)."""
        h = fn.sg_dist_health(self._ptr())
        if not h:
            return {}
        out = {}
        for r in range(fn.sg_health_world_size(h)):
            st = c_int()
            if fn.sg_health_state_of(h, r, ctypes.byref(st)) == 0:
                out[r] = _HEALTH_STATES.get(st.value, str(st.value))
        return out

    def write_trace(self, path: os.PathLike[str] | str) -> None:
        """Writes the job's Chrome trace (trace=1 at create; collective while the job is healthy)."""
        fn.sg_clear_error()
        _lib.check(fn.sg_dist_write_trace(self._ptr(), _lib.fspath(path)))

    def save_checkpoint(self, path: os.PathLike[str] | str) -> None:
        """Rank 0 writes the whole model as one process's checkpoint (sg_dist_save_checkpoint: collective,
        every rank calls it; an error on any rank is raised on every rank)."""
        fn.sg_clear_error()
        _lib.check(fn.sg_dist_save_checkpoint(self._ptr(), _lib.fspath(path)))

    def __repr__(self):
        if self._d is None:
            return "<sgrt.Dist closed>"
        return "<sgrt.Dist rank %d of %d>" % (self.rank, self.size)
