"""ckpt._lib -- libckpt.so through ctypes: finding it, the prototypes of the
ckpt.h functions the package calls, and the structs it passes.

Every declaration here mirrors include/ckpt.h (0.5.0); nothing else
of libckpt is used. The library is loaded at the first call that needs it,
never at import.
"""

import ctypes
import os
import threading

# ckpt.h values the package uses
OK = 0
E_NOMEM = 2
E_NOENT = 3
E_CORRUPT = 5
E_SIZE = 6
E_UNSUPPORTED = 13
E_MISMATCH = 20
E_INTERNAL = 21
E_WORLD = 24
STEP_LATEST = (1 << 64) - 1

ELEM_BYTES, ELEM_F16, ELEM_F32, ELEM_E2, ELEM_E4 = 0, 1, 2, 3, 4
REGION_REPLICATED, REGION_DEVICE = 1, 2
SIGNAL_DEFAULT, SIGNAL_STOP, SIGNAL_REPEAT = 0, 1, 2
REDUCE_MAX, REDUCE_MIN, REDUCE_SUM = 0, 1, 2
COLLECTIVE_VERSION = 1
NEED_VERSION = 500  # 0.5.0: ckpt_restore_alloc_any; 0.4.0: ckpt_protect_region, ...
ALLOC_VERSION = 1

c_u64 = ctypes.c_uint64
c_vp = ctypes.c_void_p


class _Slot(ctypes.Union):
    """One of ckpt_config's pointer-wide slots (ckpt.h "Configuration")."""
    _fields_ = [("u", ctypes.c_uint), ("i", ctypes.c_int), ("z", ctypes.c_size_t),
                ("p", c_vp)]


LOG_FN = ctypes.CFUNCTYPE(None, c_vp, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p)


class Config(ctypes.Structure):
    """struct ckpt_config."""
    _fields_ = [
        ("version", ctypes.c_uint),
        ("store", ctypes.c_char_p),
        ("run", ctypes.c_char_p),
        ("codec", ctypes.c_int),
        ("codec_level", ctypes.c_int),
        ("chunk_bytes", ctypes.c_size_t),
        ("workers", ctypes.c_uint),
        ("staging_max_bytes", ctypes.c_size_t),
        ("keep", ctypes.c_uint),
        ("on_busy", ctypes.c_int),
        ("interval_ms", c_u64),
        ("log_fn", c_vp),
        ("log_user", c_vp),
        ("log_level", ctypes.c_int),
        ("no_control", ctypes.c_int),
        ("epoch", c_u64),
        ("pinned_max_bytes", ctypes.c_size_t),
        # slots 0-7: pack_bytes, connections, restore_sync, retry_budget_ms,
        # world_size, rank, collective, rank_flags
        ("slots", _Slot * 8),
    ]


ALLREDUCE_FN = ctypes.CFUNCTYPE(ctypes.c_int, c_vp, ctypes.POINTER(c_u64), ctypes.c_size_t,
                                ctypes.c_int)
BARRIER_FN = ctypes.CFUNCTYPE(ctypes.c_int, c_vp)


class Collective(ctypes.Structure):
    """struct ckpt_collective."""
    _fields_ = [("version", ctypes.c_uint), ("rank", ctypes.c_uint), ("size", ctypes.c_uint),
                ("user", c_vp), ("allreduce_u64", ALLREDUCE_FN), ("barrier", BARRIER_FN),
                ("reserved", c_vp * 4)]


class ItemInfo(ctypes.Structure):
    """struct ckpt_item_info."""
    _fields_ = [("name", ctypes.c_char_p), ("size", c_u64), ("kind", ctypes.c_int),
                ("elem_size", ctypes.c_uint), ("replicated", ctypes.c_int),
                ("target", ctypes.c_char_p), ("step", c_u64), ("world_size", ctypes.c_uint),
                ("part", ctypes.c_uint), ("mode", ctypes.c_uint32), ("stored_bytes", c_u64),
                ("chunks", c_u64), ("reserved", c_u64 * 4)]


class AllocReq(ctypes.Structure):
    """struct ckpt_alloc_req (ckpt_restore_alloc)."""
    _fields_ = [("step", c_u64), ("world_size", ctypes.c_uint), ("round", ctypes.c_uint),
                ("n", ctypes.c_size_t), ("items", ctypes.POINTER(ItemInfo)),
                ("dest", ctypes.POINTER(c_vp)), ("msg", ctypes.c_char * 256),
                ("reserved", c_vp * 4)]


ALLOC_FN = ctypes.CFUNCTYPE(ctypes.c_int, c_vp, ctypes.POINTER(AllocReq))
RELEASE_FN = ctypes.CFUNCTYPE(None, c_vp, c_u64, ctypes.POINTER(c_vp), ctypes.c_size_t)


class Alloc(ctypes.Structure):
    """struct ckpt_alloc (ckpt_restore_alloc)."""
    _fields_ = [("version", ctypes.c_uint), ("user", c_vp),
                ("index", ctypes.POINTER(ctypes.c_char_p)), ("nindex", ctypes.c_size_t),
                ("alloc", ALLOC_FN), ("release", RELEASE_FN), ("reserved", c_vp * 4)]


class Info(ctypes.Structure):
    """struct ckpt_info (ckpt_list)."""
    _fields_ = [("step", c_u64), ("seq", c_u64), ("epoch", c_u64), ("time_ms", ctypes.c_int64),
                ("items", c_u64), ("raw_bytes", c_u64), ("stored_bytes", c_u64),
                ("new_bytes", c_u64), ("chunks", c_u64), ("manifest", ctypes.c_char_p),
                ("links", c_u64), ("world_size", ctypes.c_uint)]


LIST_FN = ctypes.CFUNCTYPE(ctypes.c_int, c_vp, ctypes.POINTER(Info))

PROGRESS_SAVE = 1
PROGRESS_SENT = 1


class Progress(ctypes.Structure):
    """struct ckpt_progress (ckpt_progress)."""
    _fields_ = [("phase", ctypes.c_int), ("step", c_u64), ("bytes_done", c_u64),
                ("bytes_total", c_u64), ("chunks_done", c_u64), ("chunks_total", c_u64),
                ("stored_bytes", c_u64), ("checkpoints_done", c_u64),
                ("started_ms", ctypes.c_int64), ("sent_bytes", c_u64), ("encoded_bytes", c_u64),
                ("flags", c_u64), ("reserved", c_u64 * 3)]


_PROTOS = {
    "ckpt_version_number": (ctypes.c_uint, []),
    "ckpt_version_string": (ctypes.c_char_p, []),
    "ckpt_strerror": (ctypes.c_char_p, [ctypes.c_int]),
    "ckpt_status_name": (ctypes.c_char_p, [ctypes.c_int]),
    "ckpt_errmsg": (ctypes.c_char_p, [c_vp]),
    "ckpt_open": (ctypes.c_int, [ctypes.POINTER(Config), ctypes.POINTER(c_vp)]),
    "ckpt_close": (None, [c_vp]),
    "ckpt_protect_region": (ctypes.c_int, [c_vp, ctypes.c_char_p, c_vp, ctypes.c_size_t,
                                           ctypes.c_int, ctypes.c_uint]),
    "ckpt_unprotect": (ctypes.c_int, [c_vp, ctypes.c_char_p]),
    "ckpt_save": (ctypes.c_int, [c_vp, c_u64]),
    "ckpt_wait": (ctypes.c_int, [c_vp]),
    "ckpt_should_save": (ctypes.c_int, [c_vp]),
    "ckpt_take_request": (ctypes.c_int, [c_vp]),
    "ckpt_request": (None, [c_vp, ctypes.c_int]),
    "ckpt_restore_alloc": (ctypes.c_int, [c_vp, c_u64, ctypes.POINTER(Alloc),
                                          ctypes.POINTER(c_u64)]),
    "ckpt_restore_alloc_any": (ctypes.c_int, [c_vp, c_u64, ctypes.c_uint, ctypes.POINTER(Alloc),
                                              ctypes.POINTER(c_u64)]),
    "ckpt_report_file": (ctypes.c_int, [c_vp, ctypes.c_char_p, c_u64]),
    "ckpt_list": (ctypes.c_int, [c_vp, LIST_FN, c_vp]),
    "ckpt_signal": (ctypes.c_int, [c_vp, ctypes.c_int]),
    "ckpt_child_signals": (ctypes.c_int, []),
    "ckpt_progress": (ctypes.c_int, [c_vp, ctypes.POINTER(Progress)]),
}

_lib = None
_lock = threading.Lock()


def _candidates():
    """Where libckpt.so may be, in order: CKPT_LIBCKPT (a path), the library
    of this package's own build tree or prefix (_build.py, written by CMake),
    then the dynamic loader's search path."""
    env = os.environ.get("CKPT_LIBCKPT")
    if env:
        yield env
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        from . import _build
        libdir = _build.LIBDIR if os.path.isabs(_build.LIBDIR) else \
            os.path.normpath(os.path.join(here, _build.LIBDIR))
        for name in ("libckpt.so.0", "libckpt.so"):
            yield os.path.join(libdir, name)
    except ImportError:
        pass  # the package straight from the source tree
    yield "libckpt.so.0"
    yield "libckpt.so"


class LibraryError(ImportError):
    """libckpt.so cannot be loaded, or is older than this package."""


def lib():
    """@return libckpt (a ctypes.CDLL with the prototypes set), loading it at
    the first call. Raises LibraryError."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        handle = None
        for path in _candidates():
            if os.path.isabs(path) and not os.path.exists(path):
                tried.append(path + " (missing)")
                continue
            try:
                handle = ctypes.CDLL(path)
                break
            except OSError as e:
                tried.append("%s (%s)" % (path, e))
        if handle is None:
            raise LibraryError("ckpt: cannot load libckpt.so; tried: " + "; ".join(tried) +
                               ". Set CKPT_LIBCKPT to its path.")
        for name, (res, args) in _PROTOS.items():
            try:
                fn = getattr(handle, name)
            except AttributeError:
                raise LibraryError("ckpt: %s has no %s: libckpt %s is older than this package "
                                   "(needs 0.5.0)" % (handle._name, name, _version(handle)))
            fn.restype = res
            fn.argtypes = args
        if handle.ckpt_version_number() < NEED_VERSION or \
                handle.ckpt_version_number() // 10000 != NEED_VERSION // 10000:
            raise LibraryError("ckpt: %s is libckpt %s; this package needs 0.5.x" %
                               (handle._name, handle.ckpt_version_string().decode()))
        _lib = handle
        return _lib


def _version(handle):
    try:
        handle.ckpt_version_string.restype = ctypes.c_char_p
        return handle.ckpt_version_string().decode()
    except AttributeError:
        return "?"


def text(b):
    """A C string from libckpt as str (None as "")."""
    return b.decode("utf-8", "replace") if b else ""
