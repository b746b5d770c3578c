"""Loading libsgrt and declaring the C functions the shim calls (ctypes only).

The library is looked up, in order:
  1. the path in the environment variable SGRT_LIBRARY (`sgrt launch` sets it to its own
     library for the ranks it starts, unless it is set);
  2. the path recorded at install time in _libpath.py (`cmake --install` writes it);
  3. the build tree of the repository this package sits in (build/src/libsgrt.so);
  4. beside the `sgrt` tool found on PATH: PREFIX/lib*/libsgrt.so.0 of an installed tool, or
     build/src/libsgrt.so of a build tree's build/tools/sgrt;
  5. the system loader (libsgrt.so.0, then libsgrt.so; LD_LIBRARY_PATH, ld.so.cache).

Every prototype is declared here with argtypes and restype, and the C structs
are mirrored with ctypes.Structure. Params structs are always initialised by
the library's own sg_X_params_init() so their `size` field is right.
"""

import ctypes
import os

from ._errors import Error, make as _make_error

c_int = ctypes.c_int
c_int32 = ctypes.c_int32
c_int64 = ctypes.c_int64
c_uint64 = ctypes.c_uint64
c_size_t = ctypes.c_size_t
c_double = ctypes.c_double
c_char_p = ctypes.c_char_p
c_void_p = ctypes.c_void_p
POINTER = ctypes.POINTER

SG_MAX_DIMS = 8


# ---- C structs (include/sgrt/*.h) --------------------------------------------


class sg_tensor(ctypes.Structure):
    _fields_ = [("id", c_int32)]


class sg_tensor_info(ctypes.Structure):
    _fields_ = [
        ("name", c_char_p),
        ("dtype", c_int),
        ("role", c_int),
        ("ndim", c_int),
        ("dims", c_int64 * SG_MAX_DIMS),
        ("numel", c_int64),
        ("nbytes", c_size_t),
        ("data", c_void_p),
        ("producer", c_int32),
    ]


class sg_op_info(ctypes.Structure):
    _fields_ = [
        ("kind", c_int),
        ("name", c_char_p),
        ("n_inputs", c_int),
        ("inputs", POINTER(c_int32)),
        ("n_outputs", c_int),
        ("outputs", POINTER(c_int32)),
        ("n_attrs", c_int),
    ]


class sg_attr(ctypes.Structure):
    _fields_ = [
        ("name", c_char_p),
        ("type", c_int),
        ("i", c_int64),
        ("f", c_double),
        ("count", c_int),
        ("ints", POINTER(c_int64)),
    ]


class sg_conv2d_params(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t),
        ("stride", c_int64 * 2),
        ("padding", c_int64 * 4),
        ("dilation", c_int64 * 2),
        ("groups", c_int64),
    ]


class sg_batch_norm_params(ctypes.Structure):
    _fields_ = [("size", c_size_t), ("eps", c_double), ("momentum", c_double), ("training", c_int)]


class sg_gemm_params(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t),
        ("trans_a", c_int),
        ("trans_b", c_int),
        ("alpha", c_double),
        ("beta", c_double),
    ]


class sg_pool2d_params(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t),
        ("kernel", c_int64 * 2),
        ("stride", c_int64 * 2),
        ("padding", c_int64 * 4),
        ("ceil_mode", c_int),
        ("count_include_pad", c_int),
    ]


class sg_sgd_params(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t),
        ("momentum", c_double),
        ("dampening", c_double),
        ("weight_decay", c_double),
        ("nesterov", c_int),
    ]


class sg_adamw_params(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t),
        ("beta1", c_double),
        ("beta2", c_double),
        ("eps", c_double),
        ("weight_decay", c_double),
        ("decay_min_ndim", c_int),
    ]


class sg_session_params(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t),
        ("device", c_char_p),
        ("threads", c_int),
        ("seed", c_uint64),
        ("poison", c_int),
        ("fusion", c_int),
        ("trace", c_int),
        ("trace_events", c_size_t),
        ("matmul_precision", c_int),
    ]


# enum sg_matmul_precision (include/sgrt/session.h)
SG_MATMUL_DEFAULT = 0
SG_MATMUL_F32 = 1
SG_MATMUL_BF16 = 2


class sg_compile_report(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t),
        ("planned_peak_bytes", c_size_t),
        ("persistent_bytes", c_size_t),
        ("transient_bytes", c_size_t),
        ("sum_tensor_bytes", c_size_t),
        ("ops_scheduled", c_int32),
        ("ops_eval", c_int32),
        ("ops_eliminated", c_int32),
        ("ops_folded", c_int32),
        ("ops_inplace", c_int32),
        ("ops_fused", c_int32),
        ("fused_kernels", c_int32),
        ("compile_seconds", c_double),
        ("kernels_generated", c_int32),
        ("compiler_invocations", c_int32),
        ("cache_hits", c_int32),
        ("cache_misses", c_int32),
    ]


SG_CACHE_DIR_MAX = 4096


class sg_cache_info(ctypes.Structure):
    """include/sgrt/cache.h; `size` set by the caller."""

    _fields_ = [
        ("size", c_size_t),
        ("dir", ctypes.c_char * SG_CACHE_DIR_MAX),
        ("enabled", c_int),
        ("exists", c_int),
        ("entries", c_uint64),
        ("bytes", c_uint64),
        ("temporaries", c_uint64),
    ]


class sg_cache_entry(ctypes.Structure):
    """include/sgrt/cache.h; `size` set by the caller (sg_cache_get_entry)."""

    _fields_ = [
        ("size", c_size_t),
        ("key", ctypes.c_char * 33),
        ("valid", c_int),
        ("problem", ctypes.c_char * 256),
        ("bytes", c_uint64),
        ("created", c_int64),
        ("graph_ops", c_int64),
        ("graph_tensors", c_int64),
        ("graph_hash", ctypes.c_char * 17),
        ("kernels", c_int64),
        ("fused_ops", c_int64),
        ("device", ctypes.c_char * 64),
        ("compiler", ctypes.c_char * 256),
        ("sgrt_version", ctypes.c_char * 32),
    ]


#: int (*sg_cache_entry_fn)(const sg_cache_entry *entry, void *ctx)
sg_cache_entry_fn = ctypes.CFUNCTYPE(c_int, POINTER(sg_cache_entry), c_void_p)


class sg_onnx_params(ctypes.Structure):
    """include/sgrt/onnx.h; initialised by sg_onnx_params_init()."""

    _fields_ = [
        ("size", c_size_t),
        ("batch", c_int64),
        ("training", c_int),
        ("constants", POINTER(c_char_p)),
        ("dims", POINTER(c_char_p)),
    ]


# ---- locating and loading the library ----------------------------------------

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _beside_tool():
    """Where the library of the `sgrt` tool on PATH is: an install prefix's lib*/, or a build tree's src/."""
    import glob
    import shutil
    tool = shutil.which("sgrt")
    if tool is None:
        return []
    bindir = os.path.dirname(os.path.realpath(tool))
    up = os.path.dirname(bindir)
    return sorted(glob.glob(os.path.join(up, "lib*", "libsgrt.so.0")) + glob.glob(os.path.join(up, "lib", "*", "libsgrt.so.0"))) + [
        os.path.join(up, "src", "libsgrt.so")]


def _candidates():
    env = os.environ.get("SGRT_LIBRARY")
    if env:
        return [env], True
    names = []
    try:
        from . import _libpath  # written by cmake --install
        names.append(_libpath.LIBRARY)
    except ImportError:
        pass
    names.append(os.path.join(_REPO, "build", "src", "libsgrt.so"))
    names += _beside_tool()
    return names + ["libsgrt.so.0", "libsgrt.so"], False


def _load():
    names, from_env = _candidates()
    tried = []
    for name in names:
        if os.sep in name and not os.path.exists(name) and not from_env:
            continue
        try:
            return ctypes.CDLL(name), name
        except OSError as e:
            tried.append("%s (%s)" % (name, e))
    raise ImportError(
        "sgrt: cannot load libsgrt: tried " + "; ".join(tried or names) + ". Build it (cmake --build build) and "
        "install it (cmake --install build), put its sgrt tool on PATH, or set SGRT_LIBRARY to the path of "
        "libsgrt.so"
    )


lib, path = _load()

T = sg_tensor
PT = POINTER(sg_tensor)
G = c_void_p  # sg_graph *
S = c_void_p  # sg_session *
I64P = POINTER(c_int64)

# name: (restype, argtypes). Functions missing from an older library are left out
# (has() says whether one is there); every one the shim needs now is required.
_PROTOTYPES = {
    # status.h, core.h
    "sg_status_str": (c_char_p, [c_int]),
    "sg_last_error": (c_char_p, []),
    "sg_clear_error": (None, []),
    "sg_version": (c_char_p, []),
    "sg_log_set_level": (None, [c_int]),
    "sg_log_get_level": (c_int, []),
    # graph.h
    "sg_graph_create": (c_int, [POINTER(G)]),
    "sg_graph_clone": (c_int, [G, POINTER(G)]),
    "sg_graph_destroy": (None, [G]),
    "sg_graph_status": (c_int, [G]),
    "sg_graph_finalize": (c_int, [G]),
    "sg_graph_verify": (c_int, [G]),
    "sg_graph_is_finalized": (c_int, [G]),
    "sg_graph_add_tensor": (T, [G, c_char_p, c_int, c_int, c_int, I64P, c_void_p]),
    "sg_input": (T, [G, c_char_p, c_int, c_int, I64P]),
    "sg_parameter": (T, [G, c_char_p, c_int, c_int, I64P, c_void_p]),
    "sg_constant": (T, [G, c_char_p, c_int, c_int, I64P, c_void_p]),
    "sg_tensor_set_name": (c_int, [G, T, c_char_p]),
    "sg_graph_mark_output": (c_int, [G, T]),
    "sg_graph_num_tensors": (c_int32, [G]),
    "sg_graph_num_ops": (c_int32, [G]),
    "sg_graph_tensor_info": (c_int, [G, T, POINTER(sg_tensor_info)]),
    "sg_graph_op_info": (c_int, [G, c_int32, POINTER(sg_op_info)]),
    "sg_graph_find_tensor": (c_int, [G, c_char_p, PT]),
    "sg_graph_num_inputs": (c_int32, [G]),
    "sg_graph_num_outputs": (c_int32, [G]),
    "sg_graph_input": (T, [G, c_int32]),
    "sg_graph_output": (T, [G, c_int32]),
    "sg_graph_op_attr": (c_int, [G, c_int32, c_int, POINTER(sg_attr)]),
    "sg_op_kind_name": (c_char_p, [c_int]),
    "sg_dtype_name": (c_char_p, [c_int]),
    "sg_role_name": (c_char_p, [c_int]),
    "sg_dtype_size": (c_size_t, [c_int]),
    "sg_graph_hash": (c_int, [G, ctypes.c_uint, POINTER(c_uint64)]),
    "sg_graph_write_dot": (c_int, [G, c_char_p]),
    # sgg.h
    "sg_graph_save": (c_int, [G, c_char_p]),
    "sg_graph_save_to_memory": (c_int, [G, POINTER(c_void_p), POINTER(c_size_t)]),
    "sg_graph_load": (c_int, [c_char_p, POINTER(G)]),
    "sg_graph_load_from_memory": (c_int, [c_void_p, c_size_t, POINTER(G)]),
    "sg_free": (None, [c_void_p]),
    # ops.h
    "sg_graph_add_op": (c_int, [G, c_int, c_int, PT, c_int, POINTER(sg_attr), c_int, PT, POINTER(c_int)]),
    "sg_conv2d_params_init": (sg_conv2d_params, []),
    "sg_conv2d": (T, [G, T, T, T, POINTER(sg_conv2d_params)]),
    "sg_batch_norm_params_init": (sg_batch_norm_params, []),
    "sg_batch_norm": (T, [G, T, T, T, T, T, POINTER(sg_batch_norm_params)]),
    "sg_relu": (T, [G, T]),
    "sg_clip": (T, [G, T, c_double, c_double]),
    "sg_relu6": (T, [G, T]),
    "sg_gelu": (T, [G, T, c_int]),
    "sg_sigmoid": (T, [G, T]),
    "sg_tanh": (T, [G, T]),
    "sg_add": (T, [G, T, T]),
    "sg_sub": (T, [G, T, T]),
    "sg_mul": (T, [G, T, T]),
    "sg_div": (T, [G, T, T]),
    "sg_add_scalar": (T, [G, T, c_double]),
    "sg_mul_scalar": (T, [G, T, c_double]),
    "sg_pow_scalar": (T, [G, T, c_double]),
    "sg_exp": (T, [G, T]),
    "sg_log": (T, [G, T]),
    "sg_sqrt": (T, [G, T]),
    "sg_reciprocal": (T, [G, T]),
    "sg_erf": (T, [G, T]),
    "sg_neg": (T, [G, T]),
    "sg_abs": (T, [G, T]),
    "sg_sign": (T, [G, T]),
    "sg_max": (T, [G, T, T]),
    "sg_min": (T, [G, T, T]),
    "sg_where": (T, [G, T, T, T]),
    "sg_cast": (T, [G, T, c_int]),
    "sg_layer_norm": (T, [G, T, T, T, c_int, c_double]),
    "sg_embedding": (T, [G, T, T]),
    "sg_attention": (T, [G, T, T, T, c_double, c_int]),
    "sg_attention_dropout": (T, [G, T, T, T, c_double, c_int, c_double, c_uint64]),
    "sg_matmul": (T, [G, T, T]),
    "sg_gemm_params_init": (sg_gemm_params, []),
    "sg_gemm": (T, [G, T, T, T, POINTER(sg_gemm_params)]),
    "sg_linear": (T, [G, T, T, T]),
    "sg_pool2d_params_init": (sg_pool2d_params, []),
    "sg_max_pool2d": (T, [G, T, POINTER(sg_pool2d_params)]),
    "sg_avg_pool2d": (T, [G, T, POINTER(sg_pool2d_params)]),
    "sg_global_avg_pool": (T, [G, T]),
    "sg_flatten": (T, [G, T, c_int]),
    "sg_reshape": (T, [G, T, c_int, I64P]),
    "sg_transpose": (T, [G, T, c_int, I64P]),
    "sg_concat": (T, [G, c_int, PT, c_int]),
    "sg_slice": (T, [G, T, c_int, c_int64, c_int64]),
    "sg_softmax": (T, [G, T, c_int]),
    "sg_log_softmax": (T, [G, T, c_int]),
    "sg_cross_entropy": (T, [G, T, T, c_int]),
    "sg_reduce_mean": (T, [G, T, c_int, I64P, c_int]),
    "sg_reduce_sum": (T, [G, T, c_int, I64P, c_int]),
    "sg_reduce_max": (T, [G, T, c_int, I64P, c_int]),
    "sg_reduce_min": (T, [G, T, c_int, I64P, c_int]),
    "sg_cumsum": (T, [G, T, c_int, c_int, c_int]),
    "sg_topk": (T, [G, T, c_int64, c_int, PT]),
    "sg_sin": (T, [G, T]),
    "sg_cos": (T, [G, T]),
    "sg_acos": (T, [G, T]),
    "sg_dropout": (T, [G, T, c_double, c_uint64, c_int]),
    "sg_sgd_params_init": (sg_sgd_params, []),
    "sg_adamw_params_init": (sg_adamw_params, []),
    # train.h
    "sg_graph_backward": (c_int, [G, T]),
    "sg_graph_grad": (c_int, [G, T, PT]),
    "sg_graph_add_sgd": (c_int, [G, T, POINTER(sg_sgd_params)]),
    "sg_graph_add_adamw": (c_int, [G, T, POINTER(sg_adamw_params)]),
    # session.h
    "sg_session_params_init": (sg_session_params, []),
    "sg_session_create": (c_int, [G, POINTER(sg_session_params), POINTER(S)]),
    "sg_session_destroy": (None, [S]),
    "sg_session_compile": (c_int, [S]),
    "sg_session_compile_report": (c_int, [S, POINTER(sg_compile_report)]),
    "sg_session_set_input": (c_int, [S, c_char_p, c_int, c_int, I64P, c_void_p]),
    "sg_session_bind_input": (c_int, [S, c_char_p, c_int, c_int, I64P, c_void_p]),
    "sg_session_step": (c_int, [S]),
    "sg_session_forward": (c_int, [S]),
    "sg_session_steps": (c_uint64, [S]),
    "sg_session_read": (c_int, [S, c_char_p, c_void_p, c_size_t]),
    "sg_session_write": (c_int, [S, c_char_p, c_void_p, c_size_t]),
    "sg_session_save_checkpoint": (c_int, [S, c_char_p]),
    "sg_session_load_checkpoint": (c_int, [S, c_char_p]),
    # cache.h
    "sg_cache_get_info": (c_int, [c_char_p, POINTER(sg_cache_info)]),
    "sg_cache_list": (c_int, [c_char_p, sg_cache_entry_fn, c_void_p]),
    "sg_cache_get_entry": (c_int, [c_char_p, c_char_p, POINTER(sg_cache_entry)]),
    "sg_cache_clear": (c_int, [c_char_p, c_char_p, POINTER(c_size_t)]),
}

# Optional: present once the library has them (the ONNX importer).
_OPTIONAL = {
    "sg_onnx_params_init": (sg_onnx_params, []),
    "sg_onnx_import": (c_int, [c_char_p, POINTER(sg_onnx_params), POINTER(G)]),
    "sg_onnx_import_from_memory": (c_int, [c_void_p, c_size_t, POINTER(sg_onnx_params), POINTER(G)]),
    "sg_onnx_symbolic_dims": (c_int, [c_char_p, c_void_p, c_size_t, POINTER(c_size_t)]),
    "sg_session_write_trace": (c_int, [c_void_p, c_char_p]),
}


class _Functions:
    pass


fn = _Functions()


def _declare(table, required):
    for name, (restype, argtypes) in table.items():
        try:
            f = getattr(lib, name)
        except AttributeError:
            if required:
                raise ImportError("sgrt: %s (%s) lacks %s: it is older than this shim" % (path, "libsgrt", name))
            continue
        f.restype = restype
        f.argtypes = argtypes
        setattr(fn, name, f)


_declare(_PROTOTYPES, True)
_declare(_OPTIONAL, False)


def has(name):
    """Whether the loaded library exports `name`."""
    return hasattr(fn, name)


# ---- errors ------------------------------------------------------------------


def status_name(status):
    s = fn.sg_status_str(status)
    return s.decode("ascii", "replace") if s else "SG_ERR_%d" % status


def last_error():
    m = fn.sg_last_error()
    return m.decode("utf-8", "replace") if m else ""


def raise_error(status, fallback=""):
    """Raises sgrt.Error for a failed call, with the C message of this thread."""
    msg = last_error() or fallback
    raise _make_error(status, status_name(status), msg)


def check(status, fallback=""):
    if status != 0:
        raise_error(status, fallback)


def error(code_name, message):
    """An Error raised by the shim itself (bad Python argument), with a status
    from the C enum so callers can treat it like one from the library."""
    return _make_error(STATUS[code_name], code_name, message)


# The status values of include/sgrt/status.h, read from the library itself so
# that codes appended in C are known here without editing this file.
STATUS = {}
for _code in range(0, -128, -1):
    _name = status_name(_code)
    if _name != "SG_ERR_UNKNOWN":
        STATUS[_name] = _code


def encode(s, what="name"):
    if isinstance(s, bytes):
        return s
    if not isinstance(s, str):
        raise error("SG_ERR_INVALID_ARG", "%s must be a str, not %s" % (what, type(s).__name__))
    if "\0" in s:
        raise error("SG_ERR_INVALID_ARG", "%s %r contains a NUL character" % (what, s))
    return s.encode("utf-8")


def fspath(p):
    b = os.fsencode(p)
    if b"\0" in b:
        raise error("SG_ERR_INVALID_ARG", "path %r contains a NUL character" % (p,))
    return b


def dims_array(shape):
    shape = tuple(int(d) for d in shape)
    if len(shape) > SG_MAX_DIMS:
        raise error("SG_ERR_INVALID_ARG", "shape %s has %d dims; sgrt allows at most %d" % (shape, len(shape), SG_MAX_DIMS))
    arr = (c_int64 * max(len(shape), 1))(*shape)
    return len(shape), arr
