"""ckpt_helper -- take part in ckpt checkpointing from a Python trainer.

Standard library only; copy this file next to your trainer. Everything works
the same with and without ckptrun: without it, requested() still answers
SIGUSR1 and saved() does nothing.

    import ckpt_helper as ckpt                  # first: handles signals early
    step = resume_newest(ckpt.checkpoint_dir())  # your own resume logic
    while step < steps:
        train_one_step(); step += 1
        if ckpt.requested() or step % every == 0:
            path = save_checkpoint(ckpt.checkpoint_dir(), step)  # temp+rename
            ckpt.saved(path, step)

How a request reaches requested(), in order of preference:
  1. Under ckptrun (CKPT_SOCKET set) the helper connects to ckptrun when it
     is imported and says `helper` (docs/CONTROL.md): ckptrun then sends
     its requests (periodic, stop, notice; with their reason and deadline)
     over that connection -- unless ckptrun was given `--signal`, which it
     then uses instead. A thread reads them.
  2. The LD_PRELOAD shim (`ckptrun --preload`, libckpt_preload.so) is in the
     process: its in-process API is found with ctypes (CDLL(None)), and
     ckpt_preload_take_request() reads and clears a request its signal
     handler caught (the shim makes the signal safe whatever the program
     does with it). With CKPT_HELPER_SOCKET=1 under ckptrun, the shim's
     libckpt context is opened instead of the helper's own connection: it
     says hello on the control socket, and ckptrun then waits for libckpt's
     own `committed` answer to a stop request, which a trainer that writes
     its own files never sends (kept for compatibility).
  3. No shim: a handler for the request signal (CKPT_SIGNAL, default
     SIGUSR1) is installed when this module is imported -- only if the
     program has none, and only from the main thread -- and records it.
A request is reported once: requested() returns True once per request.

Stops that reach the trainer directly (under ckptrun, main thread only, and
only for a signal the program has left at its default when this module is
imported; a handler the program installs later wins):
  - SIGTERM -- a scheduler, Kubernetes or `kill -TERM -PGID` signalling
    every process of the job: the first one becomes a checkpoint request
    (reported to ckptrun), so the trainer saves at its next safe point and
    the run ends 75 with a fresh final checkpoint;
  - SIGINT -- Ctrl-C: the first one is a user stop, reported to ckptrun;
    the trainer saves at its next safe point and ckptrun then lets the
    interrupt proceed (KeyboardInterrupt) once the checkpoint is committed.
A second one (at least half a second later: a launcher such as torchrun
forwards the signal it got to its workers at once), or the one that
follows ckptrun's `stopping` message, takes its default effect at once:
SIGTERM ends the process, SIGINT raises KeyboardInterrupt. In a process
forked from the one that imported the helper (a data-loader worker) the
signals take their default effect.

Thread safety: every function may be called from any thread.
"""

import ctypes
import json
import os
import select
import signal
import socket
import threading
import time

__all__ = ["requested", "restored_step", "checkpoint_dir", "saved"]

_lock = threading.Lock()
_lib = None              # the shim's functions; False once known absent
_ctx_opened = False
# Set by the signal handlers and the reader thread. Plain lists, not
# threading.Event: Python runs signal handlers on the main thread between
# bytecodes, possibly while that thread is inside Event.clear() holding the
# Event's lock, and Event.set() in the handler would then deadlock on it.
_pending = [False]
_handler_installed = False
_conn = None             # (socket, pid) of our connection to ckptrun

# Stops (SIGTERM, SIGINT); see the module's docstring.
_REPEAT_S = 0.5          # a repeat within this is the same stop, forwarded
_owner = [0]             # pid that installed the stop handlers (0: none)
_stopping = [False]      # ckptrun said `stopping`
_stop_req = [False]      # ckptrun's stop request arrived
_stop_taken = [False]    # a stop signal asked for the final save already
_pending_stop = [False]  # the pending request is a stop's (ranks: one stop save)
_stop_saved = [False]    # the ranks agreed on a stop's save already
_first = {}              # signal -> time.monotonic() of the first one
_reports = []            # (signal name, monotonic s) not yet sent to ckptrun
_wake = [None, None]     # pipe: the handlers wake the reader thread


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
    """@return the preload shim's API (a ctypes library), or None. The
    signatures are those of ckpt_preload.h and ckpt.h."""
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
    flag check otherwise).

    In a distributed job (torch.distributed initialized, world size > 1)
    the ranks agree: a request seen on any rank makes requested() True on
    every rank at the same call, so every rank saves the same step. That
    costs one all-reduce of one integer on a gloo group the helper creates
    at the first call (so NCCL jobs work too). Every rank must therefore
    call requested() the same number of times, at the same points (once
    per step, on every rank): a rank that skips a call blocks the others."""
    stop = _pending_stop[0]
    got = _requested_local()
    if got:
        _pending_stop[0] = False
    group = _agreement_group()
    if group is None:
        return got
    return _agree(group, got, stop and got)


# ---------------------------------------------------------------- ranks

_group = [None, False]   # (the gloo group, created) for the agreement


def _agreement_group():
    """@return the gloo process group the ranks agree on, or None when
    torch.distributed is not imported, not initialized, or has one rank.
    Created once, at the first call, on every rank (new_group is itself
    collective: every rank reaches it at the same requested() call)."""
    if _group[1]:
        return _group[0]
    import sys
    dist = sys.modules.get("torch.distributed")
    if dist is None:
        return None  # the trainer has not imported it: one process
    try:
        if not dist.is_available() or not dist.is_initialized():
            return None  # not yet: ask again at the next call
        if dist.get_world_size() <= 1:
            _group[0], _group[1] = None, True
            return None
        # A group of its own: CPU tensors whatever the job's backend
        # (NCCL takes only GPU ones), apart from the trainer's collectives.
        grp = dist.new_group(backend="gloo")
    except (RuntimeError, ValueError):
        return None
    _group[0], _group[1] = grp, True
    return grp


def _agree(group, got, stop):
    """All-reduce (MAX) of this rank's request flag, and whether it is a
    stop's, on `group`: True on every rank when any rank had a request.
    A stop is saved once by the job: the same stop reaching other ranks
    later (another node's ckptrun learns of it through the store, a
    SIGTERM to every pod) is the save already made, and is not agreed on
    again. A request taken here but not agreed (the collective failed: a
    rank is gone) is still reported: the job is ending anyway, and this
    rank's save is better than none."""
    import torch
    import torch.distributed as dist
    flags = torch.tensor([1 if got else 0, 1 if stop else 0], dtype=torch.int64)
    try:
        dist.all_reduce(flags, op=dist.ReduceOp.MAX, group=group)
    except RuntimeError:
        return got
    any_req, any_stop = bool(flags[0].item()), bool(flags[1].item())
    if any_stop:
        if _stop_saved[0]:
            return False  # the job saved for this stop already
        _stop_saved[0] = True
    return any_req


def _requested_local():
    """This process's own request (requested() before the ranks agree)."""
    global _ctx_opened
    lib = _shim()
    got = False
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
        got = lib.ckpt_preload_take_request() != 0
    else:
        _install_handler()
    if _pending[0]:
        # A second request arriving between these two lines is served by
        # the same save, which has not started yet.
        _pending[0] = False
        got = True
    return got


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


# ---------------------------------------------------------------- ckptrun

def _key():
    # ckptrun accepts messages only from the job's processes or with the
    # run's key (a process started outside its tree, e.g. through srun).
    return os.environ.get("CKPT_SOCKET_KEY", "")


def _line(msg):
    return (json.dumps(msg, separators=(",", ":")) + "\n").encode()


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
    commits it at once, as the store's step `step` (what `ckptrun ls`,
    `restore --step`, CKPT_STEP and restored_step() then say), without
    waiting for its directory watch to settle. Once a trainer has called it,
    ckptrun commits what it reports; entries it never reports are committed
    only once unchanged for --settle.
    @return True if ckptrun was told, False without ckptrun or if it cannot
    be reached (never raises: training goes on; ckptrun still finds the
    entry by watching the directory)."""
    msg = {"type": "file", "path": os.path.abspath(os.fspath(path)),
           "event": "renamed", "step": int(step)}
    if _key():
        msg["key"] = _key()
    line = _line(msg)
    if len(line) > 4096:  # docs/CONTROL.md: a message is at most 4096 bytes
        return False
    with _lock:
        return _send(line)


def _flush_reports():
    """Send the stop signals taken so far (reader thread)."""
    while _reports:
        name, when = _reports.pop(0)
        with _lock:
            _send(_line({"type": "signal", "signal": name, "pid": os.getpid(),
                         "mono_ms": int(when * 1000)}))


def _handle(msg):
    t = msg.get("type")
    if t == "request":
        if msg.get("reason") == "stop":
            if _stop_taken[0]:
                return  # the stop's signal reached us too: one save answers both
            _stop_req[0] = True  # and a job-wide SIGTERM after it is the same stop
            _pending_stop[0] = True
        _pending[0] = True
    elif t == "stopping":
        # ckptrun ends us next: its signal must take its default effect.
        _stopping[0] = True
        with _lock:
            _send(_line({"type": "stopping", "pid": os.getpid()}))


def _reader(sock, pid):
    """Read ckptrun's messages on our connection; send signal reports."""
    buf = b""
    while _conn is not None and _conn[0] is sock and os.getpid() == pid:
        try:
            ready, _, _ = select.select([sock, _wake[0]], [], [])
        except (OSError, ValueError):
            return
        if _wake[0] in ready:
            try:
                os.read(_wake[0], 64)
            except OSError:
                pass
            _flush_reports()
        if sock not in ready:
            continue
        try:
            data = sock.recv(4096)
        except socket.timeout:
            continue
        except OSError:
            return
        if not data:
            return  # ckptrun went away
        buf += data
        while b"\n" in buf:
            raw, buf = buf.split(b"\n", 1)
            try:
                msg = json.loads(raw)
            except ValueError:
                continue
            if isinstance(msg, dict):
                _handle(msg)


def _default_action(signum, frame):
    """The signal's own effect, now."""
    if signum == signal.SIGINT:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.default_int_handler(signum, frame)  # raises KeyboardInterrupt
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _on_stop(signum, frame):
    now = time.monotonic()
    if os.getpid() != _owner[0] or _stopping[0]:
        return _default_action(signum, frame)
    first = _first.get(signum)
    if first is not None:
        if now - first < _REPEAT_S:
            return  # the same stop, forwarded by a launcher
        return _default_action(signum, frame)  # a second one: at once
    _first[signum] = now
    _stop_taken[0] = True
    if not _stop_req[0]:  # else ckptrun asked for this stop's save already
        _pending[0] = True
        _pending_stop[0] = True
    _reports.append(("SIGTERM" if signum == signal.SIGTERM else "SIGINT", now))
    try:
        os.write(_wake[1], b"s")
    except OSError:
        pass  # full: the reader is already woken


def _attach():
    """Under ckptrun: connect, take SIGTERM/SIGINT as stops, say `helper`,
    and start the reader thread. Nothing without CKPT_SOCKET, or when the
    shim's context is asked to be the client (CKPT_HELPER_SOCKET=1)."""
    if not os.environ.get("CKPT_SOCKET"):
        return
    if os.environ.get("CKPT_HELPER_SOCKET") == "1" and _shim() is not None:
        return
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers can only be set from the main thread
    with _lock:
        if not _send(b""):  # connects
            return
        sock = _conn[0]
        sock.settimeout(None)
    names = []
    try:
        r, w = os.pipe()
        os.set_blocking(r, False)
        os.set_blocking(w, False)
        _wake[0], _wake[1] = r, w
        _owner[0] = os.getpid()
        for sig, dflt in ((signal.SIGTERM, signal.SIG_DFL),
                          (signal.SIGINT, signal.default_int_handler)):
            if signal.getsignal(sig) is dflt:
                signal.signal(sig, _on_stop)
                names.append(sig.name)
    except (OSError, ValueError):
        pass
    msg = {"type": "helper", "proto": 1, "pid": os.getpid(), "signals": names}
    if _key():
        msg["key"] = _key()
    with _lock:
        ok = _send(_line(msg)) and _conn is not None and _conn[0] is sock
    if not ok:
        # Nobody would end a stop taken from a signal: leave them alone.
        for sig, dflt in ((signal.SIGTERM, signal.SIG_DFL),
                          (signal.SIGINT, signal.default_int_handler)):
            if signal.getsignal(sig) is _on_stop:
                signal.signal(sig, dflt)
        _owner[0] = 0
        return
    threading.Thread(target=_reader, args=(sock, os.getpid()), name="ckpt_helper",
                     daemon=True).start()


# A request may come while the trainer is still importing torch: be ready
# from the moment this module is imported.
_install_handler()
_attach()
