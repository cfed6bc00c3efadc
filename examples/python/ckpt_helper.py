"""ckpt_helper -- take part in ckpt checkpointing from a Python trainer.

Standard library only; copy this file next to your trainer. Everything works
the same with and without ckptrun: without it, requested() still answers
SIGUSR1 and saved() does nothing.

    import ckpt_helper as ckpt                  # first: handles SIGUSR1 early
    step = resume_newest(ckpt.checkpoint_dir())  # your own resume logic
    while step < steps:
        train_one_step(); step += 1
        if ckpt.requested() or step % every == 0:
            path = save_checkpoint(ckpt.checkpoint_dir(), step)  # temp+rename
            ckpt.saved(path, step)

How a request reaches requested(), in order of preference:
  1. The LD_PRELOAD shim (`ckptrun --preload`, libckpt_preload.so) is in the
     process: its in-process API is found with ctypes (CDLL(None)), and
     ckpt_preload_take_request() reads and clears a request its signal
     handler caught (the shim makes the signal safe whatever the program
     does with it). With CKPT_HELPER_SOCKET=1 under ckptrun, the shim's
     libckpt context is opened too: it says hello on the control socket, so
     ckptrun sends requests (with their reason and deadline) over the socket
     instead of the signal, and they reach requested() through the
     context's ckpt_should_save(). This is opt-in because it makes the
     trainer a socket client (DESIGN.md way 3), and ckptrun then waits for
     libckpt's own `committed` answer to a stop request, which a trainer
     that writes its own files never sends.
  2. No shim: a handler for the request signal (CKPT_SIGNAL, default
     SIGUSR1) is installed when this module is imported -- only if the
     program has none, and only from the main thread -- and records it.
  3. Neither possible: requested() is always False.
A request is reported once: requested() returns True once per request.
Under ckptrun, requests come by signal only with `--signal SIGUSR1` (or
another signal): ckptrun's default is `none`.

Thread safety: every function may be called from any thread.
"""

import ctypes
import json
import os
import signal
import socket
import threading

__all__ = ["requested", "restored_step", "checkpoint_dir", "saved"]

_lock = threading.Lock()
_lib = None              # the shim's functions; False once known absent
_ctx_opened = False
# Set by the signal handler (no shim). A plain list, not a threading.Event:
# Python runs signal handlers on the main thread between bytecodes, possibly
# while that thread is inside Event.clear() holding the Event's lock, and
# Event.set() in the handler would then deadlock on it.
_pending = [False]
_handler_installed = False
_conn = None             # (socket, pid) of our connection to ckptrun


# ---------------------------------------------------------------- requests

def _request_signal():
    """@return the request signal number from CKPT_SIGNAL (default SIGUSR1),
    or None for `none` or a name this helper does not know."""
    name = os.environ.get("CKPT_SIGNAL", "").strip()
    if not name:
        return signal.SIGUSR1
    if name.lower() == "none":
        return None
    if name.isdigit():
        return int(name)
    name = name.upper()
    if not name.startswith("SIG"):
        name = "SIG" + name
    return getattr(signal, name, None)


def _shim():
    """@return the preload shim's API (a ctypes library), or None."""
    global _lib
    if _lib is None:
        try:
            lib = ctypes.CDLL(None)
            lib.ckpt_preload_take_request.restype = ctypes.c_int
            lib.ckpt_preload_take_request.argtypes = []
            lib.ckpt_preload_ctx.restype = ctypes.c_void_p
            lib.ckpt_preload_ctx.argtypes = []
            lib.ckpt_should_save.restype = ctypes.c_int
            lib.ckpt_should_save.argtypes = [ctypes.c_void_p]
            _lib = lib
        except (OSError, AttributeError):
            _lib = False
    return _lib or None


def _on_signal(signum, frame):
    # Only record: the save happens at the trainer's next safe point.
    _pending[0] = True


def _install_handler():
    """Install the recording handler if the program has none. Idempotent;
    does nothing when the shim is present (it already makes the signal
    safe) or off the main thread (Python only allows it there)."""
    global _handler_installed
    if _handler_installed or _shim() is not None:
        return
    sig = _request_signal()
    if sig is None:
        return
    try:
        if signal.getsignal(sig) in (signal.SIG_DFL, None):
            signal.signal(sig, _on_signal)
        _handler_installed = True
    except (ValueError, OSError):
        pass  # not the main thread, or an invalid signal: no handler


def requested():
    """@return True once per checkpoint request (signal or ckptrun), else
    False. Cheap enough to call every step (an atomic read in the shim, a
    flag check otherwise)."""
    global _ctx_opened
    lib = _shim()
    if lib is not None:
        if (not _ctx_opened and os.environ.get("CKPT_SOCKET")
                and os.environ.get("CKPT_HELPER_SOCKET") == "1"):
            with _lock:
                if not _ctx_opened:
                    # Opens libckpt's context: it connects to ckptrun, which
                    # then sends requests over the socket. NULL (store not
                    # usable) leaves the signal path working.
                    lib.ckpt_preload_ctx()
                    _ctx_opened = True
        return lib.ckpt_preload_take_request() != 0
    _install_handler()
    if _pending[0]:
        # A second request arriving between these two lines is served by
        # the same save, which has not started yet.
        _pending[0] = False
        return True
    return False


# ---------------------------------------------------------------- state

def restored_step():
    """@return the step ckptrun restored into checkpoint_dir() before this
    process started (CKPT_STEP when CKPT_RESUMED=1), else None. The trainer
    still loads the files itself; this tells it what to expect."""
    if os.environ.get("CKPT_RESUMED") != "1":
        return None
    try:
        return int(os.environ.get("CKPT_STEP", ""))
    except ValueError:
        return None


def checkpoint_dir():
    """@return the directory to write checkpoints into: CKPT_DIR (set by
    ckptrun, which watches it), else ./checkpoints."""
    return os.environ.get("CKPT_DIR") or "./checkpoints"


# ---------------------------------------------------------------- saved

def _send(line):
    """Send one line on our own connection to CKPT_SOCKET, reconnecting once
    if ckptrun restarted. @return True if sent. Caller holds _lock."""
    global _conn
    path = os.environ.get("CKPT_SOCKET")
    if not path:
        return False
    for _ in range(2):
        if _conn is not None and _conn[1] != os.getpid():
            # A forked child never shares its parent's stream: it drops its
            # copy (the parent's connection stays open) and opens its own.
            _conn[0].close()
            _conn = None
        if _conn is None:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.settimeout(2.0)
                s.connect(path)
            except OSError:
                s.close()
                return False
            _conn = (s, os.getpid())
        try:
            _conn[0].sendall(line)
            return True
        except OSError:
            try:
                _conn[0].close()
            except OSError:
                pass
            _conn = None
    return False


def saved(path, step):
    """Tell ckptrun that `path` (a file or directory in checkpoint_dir(),
    already renamed into place) is a complete checkpoint of `step`, so it
    commits it without waiting for its directory watch to settle.
    @return True if ckptrun was told, False without ckptrun or if it cannot
    be reached (never raises: training goes on; ckptrun still finds the
    entry by watching the directory)."""
    msg = {"type": "file", "path": os.path.abspath(os.fspath(path)),
           "event": "renamed", "step": int(step)}
    line = (json.dumps(msg, separators=(",", ":")) + "\n").encode()
    if len(line) > 4096:  # docs/CONTROL.md: a message is at most 4096 bytes
        return False
    with _lock:
        return _send(line)


# A request may come while the trainer is still importing torch: be ready
# from the moment this module is imported.
_install_handler()
