"""sg_dtype, sg_role and sg_op_kind numbers and their numpy / text forms."""

import numpy as np

from . import _lib

F32, F16, BF16, I32, I64, U8, BOOL = 1, 2, 3, 4, 5, 6, 7

#: sgrt dtype code -> numpy dtype. bf16 has no numpy type: its values are
#: exchanged as raw 16-bit patterns (np.uint16).
NUMPY = {
    F32: np.dtype(np.float32),
    F16: np.dtype(np.float16),
    BF16: np.dtype(np.uint16),
    I32: np.dtype(np.int32),
    I64: np.dtype(np.int64),
    U8: np.dtype(np.uint8),
    BOOL: np.dtype(np.bool_),
}
NAMES = {F32: "f32", F16: "f16", BF16: "bf16", I32: "i32", I64: "i64", U8: "u8", BOOL: "bool"}
_BY_NAME = {v: k for k, v in NAMES.items()}
# numpy dtype -> sgrt code (uint16 is not mapped: it is bf16 only when asked for by name).
_BY_NUMPY = {np.dtype(np.float32): F32, np.dtype(np.float16): F16, np.dtype(np.int32): I32,
             np.dtype(np.int64): I64, np.dtype(np.uint8): U8, np.dtype(np.bool_): BOOL}

ROLE_INPUT, ROLE_PARAMETER, ROLE_CONSTANT, ROLE_ACTIVATION = 1, 2, 3, 4
ROLE_GRADIENT, ROLE_OPTIMIZER_STATE, ROLE_STATE = 5, 6, 7
ROLES = {
    ROLE_INPUT: "input",
    ROLE_PARAMETER: "parameter",
    ROLE_CONSTANT: "constant",
    ROLE_ACTIVATION: "activation",
    ROLE_GRADIENT: "gradient",
    ROLE_OPTIMIZER_STATE: "optimizer_state",
    ROLE_STATE: "state",
}
_ROLE_BY_NAME = {v: k for k, v in ROLES.items()}


def dtype_code(d):
    """sgrt dtype code of `d`: a code, a name ("f32", "i64", ...), or anything
    numpy.dtype() accepts (np.float32, "float32", ...)."""
    if isinstance(d, (int, np.integer)) and not isinstance(d, bool):
        if int(d) in NAMES:
            return int(d)
        raise _lib.error("SG_ERR_INVALID_ARG", "unknown sgrt dtype code %d" % d)
    if isinstance(d, str) and d in _BY_NAME:
        return _BY_NAME[d]
    try:
        nd = np.dtype(d)
    except TypeError:
        raise _lib.error("SG_ERR_INVALID_ARG", "%r is not a dtype" % (d,)) from None
    if nd.newbyteorder("=") in _BY_NUMPY and nd.byteorder in "=|<":
        return _BY_NUMPY[nd.newbyteorder("=")]
    raise _lib.error("SG_ERR_DTYPE", "numpy dtype %s has no sgrt equivalent (sgrt has f32, f16, bf16, i32, i64, u8, "
                                     "bool)" % nd)


def from_numpy(nd):
    """sgrt code of a numpy dtype, or None."""
    nd = np.dtype(nd)
    if nd.byteorder not in "=|<":
        return None
    return _BY_NUMPY.get(nd.newbyteorder("="))


def role_code(r):
    if isinstance(r, (int, np.integer)) and int(r) in ROLES:
        return int(r)
    if isinstance(r, str) and r in _ROLE_BY_NAME:
        return _ROLE_BY_NAME[r]
    raise _lib.error("SG_ERR_INVALID_ARG", "unknown role %r (one of %s)" % (r, ", ".join(ROLES.values())))


_OP_KINDS = None


def op_kinds():
    """{name: number} of every op kind the library knows."""
    global _OP_KINDS
    if _OP_KINDS is None:
        kinds = {}
        for k in range(1, 256):
            name = _lib.fn.sg_op_kind_name(k).decode()
            if name != "?":
                kinds[name] = k
        _OP_KINDS = kinds
    return _OP_KINDS


def op_kind_code(kind):
    if isinstance(kind, (int, np.integer)):
        return int(kind)
    kinds = op_kinds()
    if kind in kinds:
        return kinds[kind]
    raise _lib.error("SG_ERR_UNSUPPORTED", "unknown op kind %r" % (kind,))


def op_kind_name(k):
    return _lib.fn.sg_op_kind_name(k).decode()
