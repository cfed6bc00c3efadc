"""ckpt -- checkpoint a Python trainer with libckpt, in process.

    import ckpt

    state, start = ckpt.load(), 0      # newest committed checkpoint that verifies, else None
    if state:
        model.load_state_dict(state["model"]); opt.load_state_dict(state["optim"])
        torch.set_rng_state(state["rng"]); start = state["step"] + 1
    for step in range(start, steps):
        train_one_step()
        if ckpt.requested() or step % 500 == 0 or step == steps - 1:
            ckpt.save(step, {"model": model.state_dict(), "optim": opt.state_dict(),
                             "step": step, "rng": torch.get_rng_state()})
    ckpt.wait()                        # the last save is committed (raises if it failed)

save() returns once the tensors' bytes are copied into libckpt's staging
memory; compression, dedup, upload and the commit run in libckpt's threads.
Each tensor storage is its own item, named by its path in the state, so
tensors that did not change cost nothing in the next checkpoint. load()
returns new tensors: it never writes the ones passed to save().

The store and run come from ckpt.init(store=..., run=...), else from the
CKPT_* variables (ckptrun sets them), else libckpt's defaults. Importing
this module touches neither the network nor the store, and does not load
libckpt.so; the first call that needs them does.

The helper's way stays for trainers that write their own files:
requested(), saved(path, step), checkpoint_dir(), restored_step() -- on
the same connection to ckptrun as save().

The reference is docs/python.md; this package is a thin binding over
libckpt's C API (ckpt.h): the rules (names, commits, fallbacks, ranks,
signals) are libckpt's.

Threads: call ckpt from one thread (the training thread).
"""

import atexit
import ctypes
import os
import signal
import sys
import threading
import time
import warnings

from . import _dist
from . import _lib as L
from ._state import (Builder, Flattener, Misfit, Region, STATE_ITEM, STATE_REP_ITEM, decode,
                     encode)

__all__ = ["save", "load", "requested", "wait", "init", "close", "saved", "checkpoint_dir",
           "restored_step", "checkpoints", "loaded", "CkptError"]

__version__ = "0.5.0"


class CkptError(RuntimeError):
    """A libckpt call failed. `status`: the status's name ("CKPT_E_AUTH"),
    `code` its value, `detail` libckpt's detail (path, HTTP status, item;
    it says whether the store or the local disk failed)."""

    def __init__(self, message, code=0, status="", detail=""):
        super().__init__(message)
        self.code, self.status, self.detail = code, status, detail


_lock = threading.RLock()
_ctx = None           # the context (a pointer), or None
_pid = None           # the process that opened it
_coll = None          # _dist.TorchCollective of a multi-rank job
_opts = {}            # ckpt.init()'s
_protected = {}       # item name -> Region.key() as libckpt has it
_struct = {}          # structure item name -> its ctypes buffer
_last_step = [None]
_sig_pending = [False]  # the request signal came (alone: no ckptrun)
_sigint_installed = [False]
# SIGTERM when alone (no ckptrun): the process that installed the handler,
# whether the trainer asks (it called requested()), when the stop came
# (monotonic s) and whether its save began.
_term = {"pid": 0, "polled": False, "at": None, "saving": False}
# Ctrl-C alone: the same, and the step whose final save failed (said then)
_int = {"pid": 0, "at": None, "saving": False, "failed": None}


def _error(what, st, detail=""):
    lib = L.lib()
    name = L.text(lib.ckpt_status_name(st))
    msg = "%s: %s (%s)" % (what, L.text(lib.ckpt_strerror(st)), name)
    if detail:
        msg += ": " + detail
    return CkptError(msg, st, name, detail)


def _errmsg(ctx):
    return L.text(L.lib().ckpt_errmsg(ctx))


# ---------------------------------------------------------------- the context

def init(store=None, run=None, *, keep=None, workers=None, chunk_bytes=None,
         staging_max_bytes=None, timeout=None):
    """Open the context now, on `store` (a URL: file:///path, s3://bucket/prefix,
    az://container/prefix) and `run`. Optional: without it the first call
    opens one from the CKPT_* variables. `keep`: committed checkpoints
    retained; `workers`, `chunk_bytes`, `staging_max_bytes`: libckpt's
    (ckpt.h; 0 or None: its defaults; a staging cap bounds memory, and a
    save then stalls while the pool drains); `timeout`: a datetime.timedelta
    for ckpt's own gloo group in a multi-rank job (default:
    torch.distributed's). Raises CkptError when
    the store cannot be opened (CKPT_E_UNREACHABLE, CKPT_E_AUTH,
    CKPT_E_CONFIG), RuntimeError when a context is already open."""
    with _lock:
        if _ctx is not None and _pid == os.getpid():
            raise RuntimeError("ckpt.init: a context is open already: call init() before any "
                               "other ckpt call (or ckpt.close() first)")
        _opts.clear()
        _opts.update(store=store, run=run, keep=keep, workers=workers, chunk_bytes=chunk_bytes,
                     staging_max_bytes=staging_max_bytes, timeout=timeout)
        _context()


def _context():
    """The context, opened at the first call. Caller holds _lock."""
    global _ctx, _pid, _coll
    if _ctx is not None and _pid == os.getpid():
        return _ctx
    if _ctx is not None:
        # a forked child (a data-loader worker): the parent's context and its
        # threads are not ours; forget it without closing it
        _ctx = None
        _protected.clear()
        _struct.clear()
    lib = L.lib()
    cfg = L.Config()
    cfg.version = L.NEED_VERSION
    cfg.log_level = 1  # INFO, with CKPT_LOG (libckpt logs nothing otherwise)
    for field in ("store", "run"):
        if _opts.get(field):
            setattr(cfg, field, os.fsencode(_opts[field]))
    for field in ("keep", "workers", "chunk_bytes", "staging_max_bytes"):
        if _opts.get(field):
            setattr(cfg, field, int(_opts[field]))
    rank, size, initialised = _dist.world()
    env_size = os.environ.get("WORLD_SIZE", "1")
    coll = None
    if size > 1:
        coll = _dist.TorchCollective(_opts.get("timeout"))
        cfg.slots[4].u = size
        cfg.slots[5].u = rank
        cfg.slots[6].p = ctypes.addressof(coll.struct)
    elif env_size.isdigit() and int(env_size) > 1 and not initialised:
        raise RuntimeError(
            "ckpt: WORLD_SIZE=%s but torch.distributed is not initialised: call "
            "torch.distributed.init_process_group() before the first ckpt call, on every "
            "rank (ckpt agrees through it)" % env_size)
    out = ctypes.c_void_p()
    st = lib.ckpt_open(ctypes.byref(cfg), ctypes.byref(out))
    if st:
        raise _error("ckpt: cannot open the store", st, L.text(lib.ckpt_errmsg(None)))
    _ctx, _pid, _coll = out.value, os.getpid(), coll
    _install_sigint()
    _install_excepthook()
    _wrap_worker_signals()
    return _ctx


# ---------------------------------------------------------------- waiting
#
# A wait for a save (wait(), the end of the program, a save() whose previous
# one is still being sent, a stop's save) can take minutes on a slow link,
# with nothing on the screen. When it lasts over CKPT_PROGRESS_AFTER
# (default 3 s; "off": never), rank 0 says what it waits for and how far the
# upload is, every 10 s, and how it ended.

def _duration_env(name, default):
    """Seconds from the variable `name` in libckpt's forms (500ms, 20s, 2m,
    1h, a bare number of seconds); `default` when unset or malformed."""
    text = os.environ.get(name, "").strip().lower()
    units = (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0))
    try:
        for suffix, scale in units:
            if text.endswith(suffix):
                return max(float(text[:-len(suffix)]) * scale, 0.0)
        return max(float(text), 0.0) if text else default
    except ValueError:
        return default


def _progress_after():
    if os.environ.get("CKPT_PROGRESS_AFTER", "").strip().lower() in ("off", "none", "never"):
        return None
    return _duration_env("CKPT_PROGRESS_AFTER", 3.0)


def _mib(n):
    return "%.1f MiB" % (n / 1048576.0)


def _progress(lib, ctx):
    """(counters, time, bytes sent) of the save in flight, or None."""
    p = L.Progress()
    if lib.ckpt_progress(ctx, ctypes.byref(p)) or p.phase != L.PROGRESS_SAVE:
        return None
    return p, time.monotonic(), p.sent_bytes if p.flags & L.PROGRESS_SENT else p.stored_bytes


def _progress_line(lib, ctx, why, t0, last):
    """One line on the save in flight; last: (time, sent) of the previous
    line, for the rate. @return (time, sent) now, or None when there is no
    save to tell of."""
    got = _progress(lib, ctx)
    if got is None:
        return None
    p, now, sent = got
    if p.bytes_total and p.bytes_done >= p.bytes_total:
        total = "%s" % _mib(p.encoded_bytes)
    elif p.bytes_done:
        total = "~%s" % _mib(p.encoded_bytes * p.bytes_total // p.bytes_done)
    else:
        total = "?"
    rate = ""
    if last is not None and now > last[0]:
        rate = ", %.1f MB/s" % ((sent - last[1]) / (now - last[0]) / 1e6)
    sys.stderr.write("ckpt: %s waits for step %d to be committed (%.1f s): %s of %s sent%s, "
                     "%d%% of the state encoded\n"
                     % (why, p.step, now - t0, _mib(sent), total, rate,
                        100 * p.bytes_done // p.bytes_total if p.bytes_total else 100))
    sys.stderr.flush()
    return (now, sent)


class _Display:
    """The thread that tells of long waits: one per process, started at the
    first wait. A wait only sets `job` and clears it (no wake-up: a save's
    cost stays that of its copy; the lock is contended only while a line is
    being told, so no line follows its wait's end); the thread looks every
    TICK seconds."""

    TICK = 0.25

    def __init__(self):
        self.job = None  # [lib, ctx, why, after, t0, lines said, (time, sent) last told]
        self.pid = None
        self.said = threading.Lock()  # a line is told only while its wait lasts

    def begin(self, lib, ctx, why, after):
        if self.pid != os.getpid():  # first use, or a forked child: no thread yet
            t = threading.Thread(target=self.run, name="ckpt-progress", daemon=True)
            t.start()  # RuntimeError at interpreter shutdown (3.12): the caller's
            self.pid = os.getpid()
        job = [lib, ctx, why, after, time.monotonic(), 0, None]
        self.job = job
        return job

    def end(self, job):
        with self.said:  # uncontended unless a line is being told
            self.job = None
        return job[5]

    def run(self):
        while True:
            job = self.job
            time.sleep(self.TICK if job is None else min(self.TICK, max(job[3], 0.01)))
            job = self.job
            if job is None:
                continue
            lib, ctx, why, after, t0, said, last = job
            now = time.monotonic()
            if last is None and said == 0:
                got = _progress(lib, ctx)  # the first line's rate
                job[6] = last = got[1:] if got else None
            due = t0 + after if said == 0 else last[0] + 10.0 if last else now
            if now < due:
                continue
            with self.said:
                if self.job is not job:
                    continue  # that wait ended meanwhile
                told = _progress_line(lib, ctx, why, t0, last)
                if told is not None:
                    job[5] += 1
                    job[6] = told


_display = _Display()


def _wait(lib, ctx, why):
    """lib.ckpt_wait(ctx), saying on stderr (rank 0) what `why` waits for
    when it takes over CKPT_PROGRESS_AFTER, then every 10 s, and how it
    ended. @return ckpt_wait's status."""
    after = _progress_after()
    if after is None or (_coll is not None and _dist.world()[0] != 0):
        return lib.ckpt_wait(ctx)
    t0 = time.monotonic()
    try:
        job = _display.begin(lib, ctx, why, after)
    except RuntimeError:  # no new threads at interpreter shutdown (3.12)
        return lib.ckpt_wait(ctx)
    try:
        st = lib.ckpt_wait(ctx)  # ctypes lets the display run meanwhile
    finally:
        said = _display.end(job)
    if said:
        sys.stderr.write("ckpt: %s: the wait ended after %.1f s: %s\n"
                         % (why, time.monotonic() - t0, "committed" if not st else
                            "the save failed (%s)" % L.text(lib.ckpt_status_name(st))))
        sys.stderr.flush()
    return st


def close():
    """Wait for the save in flight, then close the context (and its
    connection to ckptrun). Called at exit; a later call opens a new one.
    A failed last save is reported on stderr here (wait() raises it)."""
    global _ctx, _coll
    with _lock:
        if _ctx is None or _pid != os.getpid():
            _ctx = None
            return
        lib = L.lib()
        st = _wait(lib, _ctx, "the end of the program")
        if st:
            sys.stderr.write("ckpt: the save of step %s failed: %s (%s): %s\n" % (
                _last_step[0], L.text(lib.ckpt_strerror(st)), L.text(lib.ckpt_status_name(st)),
                _errmsg(_ctx)))
        ctx, _ctx = _ctx, None
        _uninstall_sigint()
        lib.ckpt_close(ctx)
        _protected.clear()
        _struct.clear()
        _coll = None
        _loaded[0] = None


atexit.register(close)


# ---------------------------------------------------------------- signals

def _request_signal():
    """The request signal from CKPT_SIGNAL (default SIGUSR1), or None."""
    name = os.environ.get("CKPT_SIGNAL", "").strip()
    if not name:
        return signal.SIGUSR1
    if name.lower() == "none":
        return None
    if name.isdigit():
        return int(name)
    name = name.upper()
    return getattr(signal, name if name.startswith("SIG") else "SIG" + name, None)


def _on_request(signum, frame):
    _sig_pending[0] = True  # only record: the trainer saves at its next safe point


_child_int = {"at": None}  # in a forked child: when the first SIGINT came


def _child_absorbs():
    """In a process forked from a trainer that takes Ctrl-C as a stop (a
    DataLoader worker, a multiprocessing pool's): whether this SIGINT is
    the stop's -- the first, or a repeat within 0.5 s (a forward) -- which
    the trainer answers and after which it ends its workers itself; dying
    of it would break the trainer's next batch before its save. A later
    one interrupts."""
    now = time.monotonic()
    if _child_int["at"] is None:
        _child_int["at"] = now
        return True
    return now - _child_int["at"] < 0.5


def _on_sigint(signum, frame):
    """Python's SIGINT, under ckptrun: libckpt decides (ckpt_signal) as its
    own handler does for SIGTERM: the first one is a stop (a save is
    requested, ckptrun told), a repeat forwarded by a launcher is absorbed,
    otherwise the interrupt proceeds. A forked child (a data-loader worker)
    leaves the stop to the trainer."""
    ctx = _ctx
    if ctx is not None and _pid == os.getpid():
        if L.lib().ckpt_signal(ctx, signum) != L.SIGNAL_DEFAULT:
            return
    elif ctx is not None and _child_absorbs():
        return
    if signal.getsignal(signal.SIGINT) is _on_sigint:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _sigint_installed[0] = False
    raise KeyboardInterrupt


def _install_sigint():
    if not os.environ.get("CKPT_SOCKET") or \
            threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, _on_sigint)
            _sigint_installed[0] = True
    except (ValueError, OSError):
        pass


def _uninstall_sigint():
    if not _sigint_installed[0]:
        return
    _sigint_installed[0] = False
    try:
        if signal.getsignal(signal.SIGINT) is _on_sigint:
            signal.signal(signal.SIGINT, signal.default_int_handler)
    except (ValueError, OSError):
        pass


def _install_request_handler():
    sig = _request_signal()
    if sig is None or threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(sig) in (signal.SIG_DFL, None):
            signal.signal(sig, _on_request)
    except (ValueError, OSError):
        pass


# ---------------------------------------------------------------- an abnormal end
#
# A trainer alone that ends with an uncaught exception (out of memory, a
# bug, Ctrl-C) says, after the traceback, what it can resume from: its
# last save is waited for first (atexit would wait anyway). Under ckptrun,
# ckptrun's last line says it; with several ranks nothing is said (waiting
# is collective, and the other ranks may be gone).

_prev_excepthook = [None]


def _excepthook(tp, val, tb):
    (_prev_excepthook[0] or sys.__excepthook__)(tp, val, tb)
    try:
        _say_resume(tp)
    except Exception:  # never hide the program's own error behind ours
        pass


def _say_resume(tp):
    if _ctx is None or _pid != os.getpid() or _coll is not None:
        return
    lib = L.lib()
    with _lock:
        st = _wait(lib, _ctx, "the end of the program") if _last_step[0] is not None else 0
        # ckpt_wait reports a failure once: said here, close() will not
        failed = ("the save of step %s failed: %s (%s): %s; " % (
            _last_step[0], L.text(lib.ckpt_strerror(st)), L.text(lib.ckpt_status_name(st)),
            _errmsg(_ctx))) if st else ""
        if not st and _int["failed"] is not None and _int["failed"] == _last_step[0]:
            st, failed = 1, "the save of step %s failed (above); " % _last_step[0]
    what = "interrupted" if issubclass(tp, KeyboardInterrupt) else "ended by an exception"
    if _last_step[0] is not None and not st:
        newest = _last_step[0]
    else:
        rows = [r for r in checkpoints() if r["time"] is not None]
        newest = rows[0]["step"] if rows else None
    if newest is None:
        sys.stderr.write("ckpt: the trainer %s; %sno checkpoint is committed yet\n"
                         % (what, failed))
    else:
        sys.stderr.write("ckpt: the trainer %s; %sstep %d is committed: run the same command "
                         "again to resume (ckpt.load() returns it)\n" % (what, failed, newest))


def _install_excepthook():
    if os.environ.get("CKPT_SOCKET") or sys.excepthook is _excepthook:
        return
    _prev_excepthook[0] = sys.excepthook
    sys.excepthook = _excepthook


# ---------------------------------------------------------------- SIGTERM alone
#
# Without ckptrun, a SIGTERM (a spot VM's shutdown, systemd, `kill`, a
# launcher's stop) is a stop once the trainer has shown that it asks
# (requested() was called): requested() answers True, the save it makes is
# waited for, and then the process dies of the SIGTERM it got, saying what
# was committed. A process that never asks, a forked one (a data-loader
# worker) and a second SIGTERM take the default effect at once; a repeat
# within 0.5 s (a launcher forwarding it) is absorbed; when no save begins
# within CKPT_STOP_GRACE (default 20 s) the process exits 143 saying so.
# Under ckptrun, libckpt's own handler does this (docs/CONTROL.md).

def _stop_grace():
    # a malformed value: libckpt refuses it at the context's opening, naming it
    return _duration_env("CKPT_STOP_GRACE", 20.0)


def _term_default():
    """The SIGTERM's own effect, now (main thread: the handler's)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)  # delivered on return from kill; never reached
    os._exit(128 + signal.SIGTERM)


def _term_exit():
    """Die of SIGTERM from any thread (signal.signal needs the main one)."""
    sys.stdout.flush()
    sys.stderr.flush()
    if threading.current_thread() is threading.main_thread():
        _term_default()
    os._exit(128 + signal.SIGTERM)


def _on_term(signum, frame):
    now = time.monotonic()
    if os.getpid() != _term["pid"] or not _term["polled"]:
        _term_default()  # a trainer that never asks, or a forked process
    if _term["at"] is not None:
        if now - _term["at"] < 0.5:
            return  # the same stop, forwarded by a launcher
        sys.stderr.write("ckpt: a second SIGTERM: exiting now\n")
        _term_exit()
    _term["at"] = now
    _sig_pending[0] = True
    grace = _stop_grace()
    if os.environ.get("RANK", "0") == "0":  # one line per job, not per rank
        sys.stderr.write("ckpt: SIGTERM: saving at the next ckpt.requested(), then exiting "
                         "(a second SIGTERM exits now)\n")
    t = threading.Timer(grace, _term_watchdog, (grace,))
    t.daemon = True
    t.start()


def _term_watchdog(grace):
    if _term["saving"]:
        return  # the stop's save began: save() ends the process after its commit
    sys.stderr.write("ckpt: SIGTERM: no ckpt.save() within %gs of it (CKPT_STOP_GRACE): "
                     "exiting without a final checkpoint; ckpt.load() resumes from the "
                     "newest one committed before it\n" % grace)
    _term_exit()


def _install_term_handler():
    if os.environ.get("CKPT_SOCKET") or _stop_grace() == 0 or \
            threading.current_thread() is not threading.main_thread():
        return  # under ckptrun, or CKPT_STOP_GRACE=0: SIGTERM keeps its default
    try:
        if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
            signal.signal(signal.SIGTERM, _on_term)
            _term["pid"] = os.getpid()
    except (ValueError, OSError):
        pass


# ---------------------------------------------------------------- Ctrl-C alone
#
# A trainer alone (no ckptrun) that asks (requested() was called) takes the
# first Ctrl-C as a stop, as ckptrun does: requested() answers True (on
# every rank under torchrun, which also forwards the terminal's SIGINT to
# its ranks), the save it makes is waited for, and then KeyboardInterrupt
# is raised from that save() -- the trainer's own handlers and the
# traceback come as from any Ctrl-C, and the exit is 130. A repeat within
# 0.5 s (torchrun's forward) is absorbed; a later Ctrl-C raises
# KeyboardInterrupt at once. A process forked from the trainer (a
# DataLoader worker: the terminal's Ctrl-C reaches it too) absorbs the
# stop's Ctrl-C, as under ckptrun, so that the trainer's next batch still
# comes; the trainer ends its workers itself. A trainer that never asks, a
# program with its own SIGINT handler, Jupyter's kernel and
# CKPT_STOP_GRACE=0 keep the default.

def _on_int_alone(signum, frame):
    now = time.monotonic()
    if os.getpid() != _int["pid"]:
        # a forked child (a data-loader worker, forked maybe before the
        # trainer first asked): its parent decides, and ends it either way
        if _child_absorbs():
            return
        raise KeyboardInterrupt
    if not _term["polled"]:
        raise KeyboardInterrupt  # a trainer that never asks
    if _int["at"] is not None:
        if now - _int["at"] < 0.5:
            return  # the same stop, forwarded by a launcher
        raise KeyboardInterrupt  # Ctrl-C again
    _int["at"] = now
    _sig_pending[0] = True
    if os.environ.get("RANK", "0") == "0":  # one line per job, not per rank
        sys.stderr.write("\nckpt: Ctrl-C: saving at the next ckpt.requested(), then stopping "
                         "(Ctrl-C again stops now)\n")
        sys.stderr.flush()


def _install_int_alone():
    if os.environ.get("CKPT_SOCKET") or _stop_grace() == 0 or \
            threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, _on_int_alone)
            _int["pid"] = os.getpid()
    except (ValueError, OSError):
        pass


def _int_save_done(step):
    """After the save a Ctrl-C asked for: wait for its commit, say so, and
    raise KeyboardInterrupt."""
    lib = L.lib()
    with _lock:
        st = _wait(lib, _ctx, "the stop's save") if _ctx is not None else 0
        detail = _errmsg(_ctx) if st else ""
    if st:
        _int["failed"] = step  # reported here: the excepthook must not call it committed
    if st and (_coll is None or _dist.world()[0] == 0):
        sys.stderr.write("ckpt: Ctrl-C: the final save (step %d) failed: %s (%s): %s\n"
                         % (step, L.text(lib.ckpt_strerror(st)), L.text(lib.ckpt_status_name(st)),
                            detail))
    elif _coll is None or _dist.world()[0] == 0:
        sys.stderr.write("ckpt: Ctrl-C: step %d is committed; stopping%s\n"
                         % (step, "" if _coll is None else ". Run the same command again to "
                            "resume: ckpt.load() returns step %d" % step))
    sys.stderr.flush()
    if signal.getsignal(signal.SIGINT) is _on_int_alone:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    raise KeyboardInterrupt


# ---------------------------------------------------------------- data-loader workers
#
# A SIGTERM to the whole job (systemd's KillMode=control-group at a spot
# VM's shutdown, `kill -TERM -PGID`, a scheduler) reaches PyTorch's
# DataLoader workers too, and their handler (torch's, set in each worker)
# dies of any SIGTERM that does not come from the trainer: the trainer's
# next batch then raises "DataLoader worker ... exited unexpectedly" before
# its stop's save. Where ckpt takes SIGTERM as a stop in the trainer (alone,
# or libckpt's handler under ckptrun), the workers forked from it leave the
# stop's SIGTERM (the first, and a repeat within 0.5 s) to the trainer
# (ckpt_child_signals: a SIGTERM from the trainer still ends a worker with
# status 0, as torch's handler does); the trainer saves, then ends and its
# DataLoader ends the workers. A later SIGTERM ends a worker at once.
# Workers of the spawn start method re-import torch and keep its handler.

def _takes_sigterm():
    """Whether SIGTERM is a stop in this process: our handler alone, or
    libckpt's under ckptrun (installed by ckpt_open where the program left
    SIGTERM at its default: Python's getsignal() still says SIG_DFL)."""
    try:
        h = signal.getsignal(signal.SIGTERM)
    except (ValueError, OSError):
        return False
    return (h is _on_term and _term["pid"] == os.getpid()) or \
        (h in (signal.SIG_DFL, None) and bool(os.environ.get("CKPT_SOCKET")))


def _wrap_worker_signals():
    """Have DataLoader workers forked from now on absorb the stop's SIGTERM
    (above), by wrapping torch's per-worker signal set-up, when torch is
    loaded and SIGTERM is a stop here. Idempotent."""
    mod = sys.modules.get("torch.utils.data._utils.signal_handling")
    orig = getattr(mod, "_set_worker_signal_handlers", None) if mod is not None else None
    if orig is None or getattr(orig, "_ckpt", False) or not _takes_sigterm():
        return

    lib = L.lib()  # loaded here, in the trainer: the worker inherits it

    def _set_worker_signal_handlers(*args, **kwargs):
        orig(*args, **kwargs)  # torch's SIGBUS/SIGSEGV/SIGFPE handlers stay
        lib.ckpt_child_signals()  # and its SIGTERM rule (the parent's: exit 0)
    _set_worker_signal_handlers._ckpt = True
    mod._set_worker_signal_handlers = _set_worker_signal_handlers


def _stop_save_done(step):
    """After the save a SIGTERM asked for: wait for its commit, say so, die
    of the SIGTERM."""
    lib = L.lib()
    with _lock:
        st = _wait(lib, _ctx, "the stop's save") if _ctx is not None else 0
        detail = _errmsg(_ctx) if st else ""
    if _coll is None or _dist.world()[0] == 0:
        if st:
            sys.stderr.write("ckpt: SIGTERM: the final save (step %d) failed: %s (%s): %s; "
                             "exiting; ckpt.load() resumes from the newest checkpoint "
                             "committed before it\n"
                             % (step, L.text(lib.ckpt_strerror(st)),
                                L.text(lib.ckpt_status_name(st)), detail))
        else:
            sys.stderr.write("ckpt: SIGTERM: step %d is committed; exiting. Run the same "
                             "command again to resume: ckpt.load() returns step %d\n"
                             % (step, step))
    _term_exit()


# ---------------------------------------------------------------- requests

def _needs_context():
    """Whether requested() must ask libckpt: under ckptrun, with several
    ranks, or with libckpt's own interval; else only the signal can ask."""
    size = os.environ.get("WORLD_SIZE", "1")
    return bool(os.environ.get("CKPT_SOCKET") or os.environ.get("CKPT_INTERVAL") or
                (size.isdigit() and int(size) > 1) or _dist.world()[1] > 1)


def requested():
    """@return True once per checkpoint request: ckptrun's (a stop, a
    preemption notice, --interval), a SIGTERM or Ctrl-C taken as a stop, or
    the request signal (CKPT_SIGNAL, SIGUSR1 by default) when alone. In a
    multi-rank job it is collective: every rank calls it at the same points
    and gets the same answer (any rank's request counts)."""
    _term["polled"] = True  # a SIGTERM is now a stop (alone)
    with _lock:
        if _ctx is None and not _needs_context():
            got, _sig_pending[0] = _sig_pending[0], False
            return got
        ctx = _context()
        lib = L.lib()
        if _sig_pending[0]:
            _sig_pending[0] = False
            lib.ckpt_request(ctx, 0)
        if _coll is not None:
            got = lib.ckpt_should_save(ctx) != 0  # the ranks agree here
            lib.ckpt_take_request(ctx)
            return got
        return lib.ckpt_take_request(ctx) != 0


def wait():
    """Block until the last save is committed. Raises CkptError if it
    failed (once: the failure is reported one time). In a multi-rank job it
    is collective: call it on every rank before destroy_process_group()."""
    with _lock:
        if _ctx is None or _pid != os.getpid():
            return
        lib = L.lib()
        st = _wait(lib, _ctx, "ckpt.wait()")
        if st:
            raise _error("ckpt: the save of step %s failed" % _last_step[0], st, _errmsg(_ctx))


# ---------------------------------------------------------------- save

def _step_arg(step):
    if isinstance(step, bool) or not isinstance(step, int):
        try:
            step = int(step)  # numpy integers, 0-d tensors
        except (TypeError, ValueError):
            raise TypeError("ckpt: step must be an int, not %s" % type(step).__name__)
    if step < 0 or step >= (1 << 64) - 2:
        raise ValueError("ckpt: step %d is out of range (0 .. 2**64-3)" % step)
    return step


def _protect(ctx, r):
    lib = L.lib()
    flags = (L.REGION_REPLICATED if r.replicated else 0) | \
        (L.REGION_DEVICE if r.device is not None else 0)
    st = lib.ckpt_protect_region(ctx, r.name.encode(), r.ptr, r.nbytes, r.elem, flags)
    if st == 1:  # CKPT_E_INVAL
        raise ValueError("ckpt: %r cannot be an item name (a '/'-separated UTF-8 path without "
                         "control characters, each part at most 255 bytes: docs/python.md)%s"
                         % (r.name, ": " + _errmsg(ctx) if _errmsg(ctx) else ""))
    if st:
        raise _error("ckpt: cannot protect %r" % r.name, st, _errmsg(ctx))


def _struct_region(name, data, replicated):
    """The structure item `name` holding `data`: its buffer is kept between
    saves and rewritten in place while its size stays (no new protect)."""
    buf = _struct.get(name)
    if buf is None or len(buf) != len(data):
        buf = (ctypes.c_char * max(len(data), 1))()
        _struct[name] = buf
    ctypes.memmove(buf, data, len(data))
    return Region(name, ctypes.addressof(buf), len(data), L.ELEM_BYTES, replicated, None,
                  "struct", None, buf)


def save(step, state, replicated=()):
    """Take a checkpoint of `state` at `step` and return once its bytes are
    copied: the tensors may change as soon as it returns. The checkpoint is
    compressed, deduplicated, written and committed in the background (and
    reported to ckptrun, whose stop waits for it).

    state: nested dicts, lists and tuples of torch tensors (CPU; CUDA where
    libckpt is built with it), numpy arrays, bytes and small values (ints,
    floats, strings, RNG states; other picklable values are pickled).
    replicated: top-level keys of a dict state (or True: all of it) that
    every rank holds identically (DDP): stored once, each rank writing about
    1/N of them.

    Raises ValueError/TypeError for a state it cannot save (a key that
    cannot be an item name, a sparse, meta or overlapping tensor, ...),
    CkptError when libckpt refuses, and CkptError for the previous save if
    it failed in the background -- after this one is taken."""
    step = _step_arg(step)
    rep = True if replicated is True else set(replicated or ())
    with _lock:
        ctx = _context()
        lib = L.lib()
        # what ckpt_save would wait for anyway: a trainer saving faster
        # than the store takes it stalls here, and hears why
        prev = _wait(lib, ctx, "ckpt.save(step %d)" % step)
        prev_detail = _errmsg(ctx) if prev else ""
        fl = Flattener(rep)
        own, rep_doc = fl.flatten(state)
        regions = list(fl.regions.values())
        if own is not None:
            regions.append(_struct_region(STATE_ITEM, encode(own), False))
        else:
            _struct.pop(STATE_ITEM, None)
        if rep_doc is not None:
            regions.append(_struct_region(STATE_REP_ITEM, encode(rep_doc), True))
        else:
            _struct.pop(STATE_REP_ITEM, None)
        wanted = {r.name: r for r in regions}
        for name, key in list(_protected.items()):
            if name not in wanted or wanted[name].key() != key:
                lib.ckpt_unprotect(ctx, name.encode())
                del _protected[name]
        for r in regions:
            if r.name not in _protected:
                _protect(ctx, r)
                _protected[r.name] = r.key()
        st = lib.ckpt_save(ctx, step)
        if st:
            raise _error("ckpt.save(step %d)" % step, st, _errmsg(ctx))
        prev_step, _last_step[0] = _last_step[0], step
        stop = _term["at"] is not None and not _term["saving"] and _term["pid"] == os.getpid()
        if stop:
            _term["saving"] = True
        intr = not stop and _int["at"] is not None and not _int["saving"] and \
            _int["pid"] == os.getpid()
        if intr:
            _int["saving"] = True
    if stop:
        _stop_save_done(step)
    if intr:
        _int_save_done(step)
    if prev:
        raise _error("ckpt: the save of step %s failed in the background (step %d was taken "
                     "and is being saved)" % (prev_step, step), prev, prev_detail)


# ---------------------------------------------------------------- load

class _Loader:
    """ckpt_restore_alloc's callbacks for load() (ckpt.h): libckpt asks for
    the structure items first (round 0), then for the regions, which the
    Builder allocates as the structure describes them (round 1), refusing a
    checkpoint whose items are not what its structure says (a Misfit:
    libckpt then tries the one before it). Which checkpoint, the fallback,
    the marking of damage and the ranks' agreement are libckpt's.

    The memory given to libckpt is held here (by address) until libckpt
    hands it back (a checkpoint given up) or the load ends."""

    def __init__(self, map_location, allow_pickle):
        self.map_location, self.allow_pickle = map_location, allow_pickle
        self.held = {}       # address -> the object owning that memory
        self.docs = {}       # structure item -> (buffer, size) of the step tried
        self.builder = None  # of the step tried last
        self.step = None
        self.world = None    # the ranks that wrote the step tried last
        self.part = None     # whose own entries it holds
        self.error = None    # an exception of ours: raised once libckpt returns
        self._names = (ctypes.c_char_p * 2)(STATE_ITEM.encode(), STATE_REP_ITEM.encode())
        self._alloc_fn = L.ALLOC_FN(self._alloc)
        self._release_fn = L.RELEASE_FN(self._release)
        self.ops = L.Alloc(version=L.ALLOC_VERSION, index=self._names, nindex=2,
                           alloc=self._alloc_fn, release=self._release_fn)

    def _hold(self, obj, ptr):
        self.held[ptr] = obj
        return ptr

    def _alloc(self, _user, reqp):
        req = reqp.contents
        try:
            items = [req.items[k] for k in range(req.n)]
            names = [i.name.decode("utf-8", "surrogateescape") for i in items]
            if req.round == 0:
                self.docs, self.builder, self.step = {}, None, req.step
                self.world = req.world_size or 1
                self.part = next((i.part for i in items if not i.replicated), 0)
                for k, i in enumerate(items):
                    buf = (ctypes.c_char * max(i.size, 1))()
                    self.docs[names[k]] = (buf, i.size)
                    req.dest[k] = self._hold(buf, ctypes.addressof(buf))
                return L.OK
            docs = {n: decode(buf.raw[:size], "structure %s" % n)
                    for n, (buf, size) in self.docs.items()}
            b = Builder(docs.get(STATE_ITEM), docs.get(STATE_REP_ITEM), self.map_location,
                        self.allow_pickle)
            got = b.allocate([(n, i.size, bool(i.replicated)) for n, i in zip(names, items)])
            for k, (obj, ptr) in enumerate(got):
                if ptr:
                    req.dest[k] = self._hold(obj, ptr)
            self.builder = b
            return L.OK
        except Misfit as e:
            req.msg = str(e).encode("utf-8", "replace")[:255]
            return getattr(L, e.status)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            req.msg = ("its structure is malformed (%s: %s)" % (type(e).__name__, e)) \
                .encode("utf-8", "replace")[:255]
            return L.E_CORRUPT
        except BaseException as e:  # MemoryError, KeyboardInterrupt: raised after the call
            self.error = e
            req.msg = ("ckpt.load: %s" % type(e).__name__).encode()
            return L.E_NOMEM if isinstance(e, MemoryError) else L.E_INTERNAL

    def _release(self, _user, _step, dest, n):
        for k in range(n):
            self.held.pop(dest[k], None)


_loaded = [None]  # what the last load() returned: loaded()


def load(step=None, map_location=None, allow_pickle=False, other_world=None):
    """@return the state of the newest committed checkpoint that save()
    wrote and that verifies (or of `step`), rebuilt with new tensors and
    arrays, or None when the run has none. The structure and every tensor
    come from one step; a damaged checkpoint is skipped for the one before
    it (with a warning) and, by a process under ckptrun, marked damaged in
    the run's HEAD, as libckpt's restore does; checkpoints save() did not
    write (ckptrun's file checkpoints) are skipped.

    map_location: as torch.load's -- None (the device each tensor was saved
    from), a device or its name, a dict {saved: target}, or a callable
    (tensor, saved device name) -> tensor.
    allow_pickle: unpickle values of any class (only for a store you trust:
    unpickling runs code); by default only plain classes are.

    In a multi-rank job it is collective: every rank gets its own part and
    the replicated items.
    other_world: for a checkpoint written by another number of ranks than
    this job has (a spot job back on fewer or more GPUs). None refuses it;
    an int k gives every rank the replicated entries and rank k's own ones
    (0: its step and counters); what was each old rank's own (its data
    shard's position, its RNG) is the trainer's to re-derive, knowing from
    loaded() that the world changed. A checkpoint of this job's world size
    is loaded as without it. Raises CkptError (a store error, a checkpoint
    of another world size naming both sizes, no checkpoint at `step`)."""
    if other_world is not None and (type(other_world) is not int or other_world < 0):
        raise ValueError("ckpt.load: other_world is a rank (an int >= 0) or None, not %r"
                         % (other_world,))
    with _lock:
        ctx = _context()
        lib = L.lib()
        want = L.STEP_LATEST if step is None else _step_arg(step)
        ld = _Loader(map_location, allow_pickle)
        got = ctypes.c_uint64(0)
        if other_world is None:
            st = lib.ckpt_restore_alloc(ctx, want, ctypes.byref(ld.ops), ctypes.byref(got))
        else:
            st = lib.ckpt_restore_alloc_any(ctx, want, other_world, ctypes.byref(ld.ops),
                                            ctypes.byref(got))
        if ld.error is not None:
            raise ld.error
        if st == L.E_NOENT and step is None:
            _loaded[0] = None
            return None
        if st:
            detail = _errmsg(ctx)
            cut = detail.find(": resume it with")
            if st == L.E_WORLD and other_world is None and cut > 0:
                # libckpt's advice is for C's protected items; this is Python's
                detail = (detail[:cut] + ": resume it with as many ranks, or load it with "
                          "ckpt.load(other_world=0): every rank then takes rank 0's own "
                          "entries with the replicated ones (docs/python.md, \"Another "
                          "number of ranks\")")
            raise _error("ckpt.load" + ("" if step is None else "(step=%d)" % step), st,
                         detail)
        note = _errmsg(ctx)  # after a fallback: which newer step, and why
        if note:
            warnings.warn("ckpt.load: " + note, stacklevel=2)
        if ld.builder is None or ld.step != got.value:
            raise CkptError("ckpt.load: libckpt restored step %d, the structure read was "
                            "step %s" % (got.value, ld.step), L.E_INTERNAL, "CKPT_E_INTERNAL")
        state = ld.builder.build()
        rank, size, _ = _dist.world()
        _loaded[0] = {"step": got.value, "world_size": ld.world, "part": ld.part}
        if ld.world != max(size, 1) and rank == 0:
            own = ld.builder.own_keys()
            warnings.warn("ckpt.load: step %d was written by %d rank%s, this job has %d: %s"
                          % (got.value, ld.world, "" if ld.world == 1 else "s", max(size, 1),
                             "every rank took rank %d's own entries (%s) with the replicated "
                             "ones" % (ld.part, ", ".join(own)) if own else "its entries are all "
                             "replicated"), stacklevel=2)
        return state


def loaded():
    """@return what the last load() returned, as a dict: step, world_size
    (the ranks that wrote it: another than this job's after
    load(other_world=k)) and part (the rank whose own entries it held: this
    rank's, or k); None before any load() or when it found none."""
    return None if _loaded[0] is None else dict(_loaded[0])


def checkpoints():
    """@return the run's committed checkpoints, newest step first (the
    order load() tries them in), each a dict: step, time (Unix seconds, None
    when its manifest cannot be read: listed, but load() would skip it),
    raw_bytes (the state's size), stored_bytes (after compression and
    deduplication), new_bytes (what this checkpoint added to the store),
    items and world_size (the ranks that wrote it). Checkpoints marked
    damaged are not listed. Also lists ckptrun's file checkpoints, which
    load() does not read. Raises CkptError (a store error)."""
    rows = []

    def one(_user, infop):
        i = infop.contents
        rows.append({"step": i.step,
                     "time": None if i.time_ms < 0 else i.time_ms / 1000.0,
                     "raw_bytes": i.raw_bytes, "stored_bytes": i.stored_bytes,
                     "new_bytes": i.new_bytes, "items": i.items,
                     "world_size": i.world_size or 1})
        return 0

    fn = L.LIST_FN(one)
    with _lock:
        ctx = _context()
        st = L.lib().ckpt_list(ctx, fn, None)
        if st:
            raise _error("ckpt.checkpoints", st, _errmsg(ctx))
    return rows


# ---------------------------------------------------------------- files

def saved(path, step):
    """Tell ckptrun that `path` (a file or directory in checkpoint_dir(),
    already renamed into place) is a complete checkpoint of `step`, so it
    commits it without waiting for its watch to settle, under that step.
    @return True if ckptrun was told; False without ckptrun or when it
    cannot be reached (never raises: ckptrun's watch still finds it)."""
    if not os.environ.get("CKPT_SOCKET"):
        return False
    try:
        step = _step_arg(step)
        with _lock:
            ctx = _context()
            return L.lib().ckpt_report_file(ctx, os.fsencode(os.fspath(path)), step) == L.OK
    except (CkptError, L.LibraryError, RuntimeError, ValueError, TypeError) as e:
        warnings.warn("ckpt.saved: ckptrun not told of %s: %s" % (path, e))
        return False


def checkpoint_dir():
    """@return the directory to write checkpoints into: CKPT_DIR (set by
    ckptrun, which watches it), else ./checkpoints."""
    return os.environ.get("CKPT_DIR") or "./checkpoints"


def restored_step():
    """@return the step ckptrun restored into checkpoint_dir() before this
    process started (CKPT_STEP when CKPT_RESUMED=1), else None."""
    if os.environ.get("CKPT_RESUMED") != "1":
        return None
    try:
        return int(os.environ.get("CKPT_STEP", ""))
    except ValueError:
        return None


_install_request_handler()
_install_term_handler()
_install_int_alone()
