"""The on-disk compile cache of generated kernels (include/sgrt/cache.h,
docs/compiler.md "Managing the cache"): what `sgrt cache list|info|clear` shows
and does, as Python values.

    import sgrt
    print(sgrt.cache_info())             # {'dir': '/home/me/.cache/sgrt', 'entries': 3, ...}
    for e in sgrt.cache_list():          # newest first, each validated
        print(e["key"], e["bytes"], e["valid"])
    sgrt.cache_clear()                   # every entry; cache_clear(key=...) one

`dir=None` is the directory sessions use ($SG_CACHE_DIR, else $XDG_CACHE_HOME/sgrt,
else ~/.cache/sgrt). Nothing here creates it; a missing one is an empty cache.
Errors raise sgrt.Error (a cache of another user's or writable by others:
SG_ERR_DENIED; an unknown key: SG_ERR_NOT_FOUND; a malformed one: SG_ERR_INVALID_ARG).
"""

import ctypes

from . import _lib

_INFO_FIELDS = ("enabled", "exists", "entries", "bytes", "temporaries")
_ENTRY_TEXT = ("key", "problem", "graph_hash", "device", "compiler", "sgrt_version")
_ENTRY_NUMBERS = ("bytes", "created", "graph_ops", "graph_tensors", "kernels", "fused_ops")


def _dir(d):
    return None if d is None else str(d).encode()


def _entry(e):
    out = {k: getattr(e, k).decode(errors="replace") for k in _ENTRY_TEXT}
    out.update({k: int(getattr(e, k)) for k in _ENTRY_NUMBERS})
    out["valid"] = bool(e.valid)
    return out


def cache_info(dir=None):
    """The cache directory, whether sessions use it (SG_CACHE=0 turns it off),
    and the count and bytes of its entries and temporary directories."""
    info = _lib.sg_cache_info()
    info.size = ctypes.sizeof(info)
    _lib.check(_lib.fn.sg_cache_get_info(_dir(dir), ctypes.byref(info)))
    out = {"dir": info.dir.decode(errors="replace")}
    out.update({k: int(getattr(info, k)) for k in _INFO_FIELDS})
    out["enabled"], out["exists"] = bool(out["enabled"]), bool(out["exists"])
    return out


def cache_list(dir=None):
    """Every entry, newest first, each validated as a session validates it before
    loading: a list of dicts (key, valid, problem, bytes, created, graph_ops,
    graph_tensors, graph_hash, kernels, fused_ops, device, compiler, sgrt_version)."""
    entries = []

    def each(entry, ctx):
        entries.append(_entry(entry.contents))
        return 0

    callback = _lib.sg_cache_entry_fn(each)  # kept alive until the call returns
    _lib.check(_lib.fn.sg_cache_list(_dir(dir), callback, None))
    return entries


def cache_entry(key, dir=None):
    """One entry by its key (32 hex digits), validated; a dict as cache_list's."""
    e = _lib.sg_cache_entry()
    e.size = ctypes.sizeof(e)
    _lib.check(_lib.fn.sg_cache_get_entry(_dir(dir), str(key).encode(), ctypes.byref(e)))
    return _entry(e)


def cache_clear(dir=None, key=None):
    """Removes one entry (key) or every entry and temporary directory; returns the
    number of entries removed. Other files in the directory are left alone."""
    removed = ctypes.c_size_t(0)
    _lib.check(_lib.fn.sg_cache_clear(_dir(dir), None if key is None else str(key).encode(), ctypes.byref(removed)))
    return int(removed.value)
