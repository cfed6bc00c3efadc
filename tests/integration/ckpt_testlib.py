"""What the integration tests (tests/integration/test_*.py) share, once:

  where the build is    REPO, BUILD, BIN, CKPTRUN, C_TRAINER, PY, TOOLS
  an environment        clean_env(): this process's, less what would steer
                        ckptrun, libckpt or a launcher
  loopback ports        free_port()
  processes             Proc (a running program whose output is read line by
                        line as it comes: wait for a line instead of a
                        sleep), alive(), descendants(), wait_for(),
                        wait_for_exec(), wait_file(), tty_run() (on a
                        pseudo-terminal)
  peers                 Server (a tests/tools server that prints "PORT n":
                        mock_s3.py, metadata_mock.py, faultproxy.py; MockS3
                        and metadata_mock() for the first two), NpmPeer (the
                        npm store peers of tests/npm: s3rver, azurite),
                        Cluster (a one-node SLURM on loopback),
                        FakeControl (a stand-in for ckptrun's control
                        socket that records what it is sent)
  a test's machine      Case: a temporary directory with a file:// store and
                        a "machine" (HOME, CKPT_DIR, working directory) that
                        runs ckptrun on it

Every peer listens on a free loopback port and is stopped by stop() (a
Case stops what it started). Standard library only; the tests import it
from their own directory (`import ckpt_testlib as T`).
"""
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.environ.get("CKPT_SRC") or os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("CKPT_BUILD") or os.path.join(REPO, "build")
BIN = os.environ.get("CKPT_BIN") or os.path.join(BUILD, "bin")
CKPTRUN = os.path.join(BIN, "ckptrun")
C_TRAINER = os.path.join(BIN, "c_trainer")
PY = "/usr/bin/python3"  # Debian's, with torch and numpy
TOOLS = os.path.join(REPO, "tests", "tools")
MOCK = os.path.join(TOOLS, "metadata_mock.py")
HAVE_S3 = os.path.exists(os.path.join(REPO, "uploaders", "s3.c"))

# ---- the environment ----------------------------------------------------------

# What steers ckptrun, libckpt or a launcher when inherited: a test states
# what it wants instead.
STEERING = ("CKPT_", "SLURM_", "OMPI_", "PMIX_", "PMI_")
LAUNCHER = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LD_PRELOAD")


def clean_env(drop=(), **kw):
    """This process's environment without the STEERING and LAUNCHER
    variables (and those starting with a prefix in `drop`), plus kw."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(STEERING + tuple(drop)) and k not in LAUNCHER}
    env.update(kw)
    return env


# ---- ports and processes ------------------------------------------------------

def free_port():
    """A loopback port nobody listens on now."""
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        return so.getsockname()[1]


def alive(pid):
    """True while `pid` exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return False


def descendants(root):
    """PIDs below `root`, from /proc."""
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    out, pending = [], [root]
    while pending:
        for c in kids.get(pending.pop(), []):
            out.append(c)
            pending.append(c)
    return out


def comm(pid):
    """The program `pid` runs (/proc's comm), "" once it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
        return st[st.index("(") + 1:st.rindex(")")]
    except (OSError, ValueError):
        return ""


def wait_for_exec(ancestor, name, timeout=20):
    """Until a descendant of pid `ancestor` runs the program `name` (its
    comm), i.e. the child has exec'ed: a fork of ckptrun still has
    ckptrun's signal handlers. @return its pid."""
    return wait_for(lambda: next((p for p in descendants(ancestor) if comm(p) == name), None),
                    timeout, "a descendant of %d running %s" % (ancestor, name))


def wait_for(cond, timeout=20, what="condition"):
    """Until cond() is true; @return its value."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError("timed out waiting for " + what)


def read_text(path):
    """A file's text, "" while it does not exist."""
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def wait_file(path, pattern, count=1, timeout=90, what=None):
    """Until `count` matches of `pattern` (re.M) are in the file at `path`
    (a job's log a scheduler writes); @return the last match."""
    rx = re.compile(pattern, re.M)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = list(rx.finditer(read_text(path)))
        if len(found) >= count:
            return found[-1]
        time.sleep(0.1)
    raise AssertionError("%sno %r in %s:\n%s" % (what + ": " if what else "", pattern, path,
                                                read_text(path)))


def tty_run(cmd, env, cwd, timeout=120):
    """Run `cmd` (a list) on a pseudo-terminal (script(1)); @return (rc,
    frames), where frames is [(seconds since start, bytes written then)]."""
    d = tempfile.mkdtemp(prefix="ckpt-tty-")
    try:
        out, tim = os.path.join(d, "out"), os.path.join(d, "timing")
        shell = " ".join("'%s'" % a.replace("'", "'\\''") for a in cmd)
        rc = subprocess.run(["script", "-q", "-e", "-O", out, "-T", tim, "-c", shell],
                            env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, timeout=timeout).returncode
        with open(out, "rb") as f:
            data = f.read()
        data = data[data.index(b"\n") + 1:]  # "Script started on ..." header
        frames, t, pos = [], 0.0, 0
        with open(tim) as f:
            for line in f:
                delay, n = line.split()
                t += float(delay)
                frames.append((t, data[pos:pos + int(n)]))
                pos += int(n)
        return rc, frames
    finally:
        shutil.rmtree(d, ignore_errors=True)


class Proc:
    """A running program -- ckptrun with `args` unless `program` is given --
    whose stderr is read line by line as it comes (lines, text()). stdout
    is DEVNULL unless given: LINES reads it too, into out_lines; MERGE into
    lines with stderr (mpirun forwards the ranks' output there). Other
    keywords go to Popen (start_new_session, stdin...)."""

    LINES, MERGE = "lines", "merge"

    def __init__(self, args, env, cwd, program=CKPTRUN, stdout=subprocess.DEVNULL, **kw):
        kw.setdefault("stdin", subprocess.DEVNULL)
        read_out = stdout in (Proc.LINES, Proc.MERGE)
        self.p = subprocess.Popen(([program] if program else []) + list(args), env=env, cwd=cwd,
                                  stdout=subprocess.PIPE if read_out else stdout,
                                  stderr=subprocess.PIPE, text=True, **kw)
        self.lines, self.out_lines = [], []
        self.cv = threading.Condition()
        self.pumps = [threading.Thread(target=self._pump, args=(self.p.stderr, self.lines),
                                       daemon=True)]
        if read_out:
            into = self.lines if stdout == Proc.MERGE else self.out_lines
            self.pumps.append(threading.Thread(target=self._pump, args=(self.p.stdout, into),
                                               daemon=True))
        for t in self.pumps:
            t.start()

    def _pump(self, stream, into):
        for line in stream:
            with self.cv:
                into.append(line.rstrip("\n"))
                self.cv.notify_all()

    def _ended(self):
        return self.p.poll() is not None and not any(t.is_alive() for t in self.pumps)

    def wait_line(self, pattern, timeout=30):
        """Until a line of lines matches `pattern`; @return the match."""
        rx = re.compile(pattern)
        end = time.monotonic() + timeout
        with self.cv:
            while True:
                for line in self.lines:
                    m = rx.search(line)
                    if m:
                        return m
                left = end - time.monotonic()
                if left <= 0 or self._ended():
                    raise AssertionError("no line matching %r in:\n%s" % (pattern, self.text()))
                self.cv.wait(min(left, 0.1))

    def count(self, pattern):
        rx = re.compile(pattern)
        with self.cv:
            return sum(1 for line in self.lines if rx.search(line))

    def wait_count(self, pattern, n, timeout=20):
        """Until n lines match pattern (what shows that something happened n
        times, instead of a run long enough for it)."""
        rx = re.compile(pattern)
        end = time.monotonic() + timeout
        with self.cv:
            while sum(1 for line in self.lines if rx.search(line)) < n:
                left = end - time.monotonic()
                if left <= 0 or self._ended():
                    raise AssertionError("not %d lines matching %r in:\n%s"
                                         % (n, pattern, self.text()))
                self.cv.wait(min(left, 0.1))

    def wait(self, timeout=60):
        rc = self.p.wait(timeout)
        for t in self.pumps:
            t.join(5)
        # a leaked process may hold a pipe open: closed only once read out
        for t, stream in zip(self.pumps, (self.p.stderr, self.p.stdout)):
            if not t.is_alive():
                stream.close()
        return rc

    def kill(self):
        """SIGKILL to the process (its group too when it leads a session),
        then wait."""
        if self.p.poll() is None:
            try:
                if os.getpgid(self.p.pid) == self.p.pid:
                    os.killpg(self.p.pid, signal.SIGCONT)
                    os.killpg(self.p.pid, signal.SIGKILL)
                else:
                    self.p.kill()
            except ProcessLookupError:
                pass
        self.wait()

    def text(self):
        with self.cv:
            return "\n".join(self.lines)

    def out_text(self):
        with self.cv:
            return "\n".join(self.out_lines)


# ---- peers ------------------------------------------------------------------

def terminate(p, timeout=10):
    """SIGTERM to the Popen p, SIGKILL if it is still there after timeout;
    waited for."""
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


class Server:
    """A tests/tools server (run by PY with `args`) that prints "PORT n"
    once it listens."""

    def __init__(self, *args):
        self.p = subprocess.Popen([PY] + list(args), stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True)
        line = self.p.stdout.readline()
        m = re.match(r"PORT (\d+)", line)
        if not m:
            self.p.kill()
            self.p.wait()
            raise RuntimeError("%s did not start: %r" % (args, line))
        self.port = int(m.group(1))
        self.url = "http://127.0.0.1:%d" % self.port

    def stop(self):
        terminate(self.p)
        self.p.stdout.close()


class MockS3(Server):
    """tests/tools/mock_s3.py: one bucket, SigV4 with its default keys."""

    KEY, SECRET = "MOCKAK", "mock/secret+key"

    def __init__(self, *args, bucket="ckpt-test"):
        super().__init__(os.path.join(TOOLS, "mock_s3.py"), "--bucket", bucket, *args)

    def env(self, port=None):
        """What a client of the bucket needs (through `port`, a proxy in
        front, when given)."""
        return dict(AWS_ACCESS_KEY_ID=MockS3.KEY, AWS_SECRET_ACCESS_KEY=MockS3.SECRET,
                    AWS_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true",
                    AWS_ENDPOINT_URL="http://127.0.0.1:%d" % (port or self.port))


def metadata_mock(provider="aws"):
    """tests/tools/metadata_mock.py as `provider`'s metadata service:
    --metadata-url is its url; a notice is posted to
    url + "/_mock/notice?kind=terminate&in=SECONDS"."""
    return Server(MOCK, "--provider", provider)


# Azurite's well-known development account (public, local only).
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/"
               "KBHBeksoGMGw==")


class NpmPeer:
    """A store peer from tests/npm (node): "s3rver" (bucket ckpt-test, no
    conditional writes) or "azurite" (blob only), on a free port, its data
    under `tmp`. Raises unittest.SkipTest without node or the module."""

    ARGV = {
        "s3rver": ["--openssl-legacy-provider", "MOD/bin/s3rver.js", "-d", "DATA", "-a",
                   "127.0.0.1", "-p", "PORT", "--configure-bucket", "ckpt-test"],
        "azurite": ["MOD/dist/src/blob/main.js", "--blobHost", "127.0.0.1", "--blobPort", "PORT",
                    "-l", "DATA", "--skipApiVersionCheck", "--disableTelemetry", "--silent"],
    }

    def __init__(self, name, tmp, timeout=30):
        node = shutil.which("node")
        mod = os.path.join(REPO, "tests", "npm", "node_modules", name)
        if not node or not os.path.exists(mod):
            raise unittest.SkipTest("node or tests/npm/node_modules/%s missing "
                                    "(cd tests/npm && npm ci)" % name)
        self.name = name
        self.port = free_port()
        self.data = tempfile.mkdtemp(prefix=name + "-", dir=tmp)
        argv = [a.replace("MOD", mod).replace("PORT", str(self.port)).replace("DATA", self.data)
                for a in [node] + NpmPeer.ARGV[name]]
        self.p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        end = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), 1).close()
                return
            except OSError:
                if self.p.poll() is not None or time.monotonic() > end:
                    self.stop()
                    raise RuntimeError("%s did not start" % name)
                time.sleep(0.05)

    def env(self):
        """What a client needs (the store URL is the test's)."""
        if self.name == "azurite":
            return dict(CKPT_AZ_CREATE_CONTAINER="1", AZURE_STORAGE_CONNECTION_STRING=(
                "DefaultEndpointsProtocol=http;AccountName=%s;AccountKey=%s;"
                "BlobEndpoint=http://127.0.0.1:%d/%s;" % (AZURITE_ACCOUNT, AZURITE_KEY,
                                                          self.port, AZURITE_ACCOUNT)))
        return dict(AWS_ACCESS_KEY_ID="S3RVER", AWS_SECRET_ACCESS_KEY="S3RVER",
                    AWS_REGION="us-east-1", AWS_ENDPOINT_URL="http://127.0.0.1:%d" % self.port,
                    AWS_EC2_METADATA_DISABLED="true")

    def stop(self):
        terminate(self.p)


class FakeControl:
    """A stand-in for ckptrun's control socket, a Unix socket at `path`:
    records each line a connection sends -- (connection number, message)
    in lines, what is not JSON in bad -- and answers a `hello` with
    reply_to_hello (bytes) when given."""

    def __init__(self, path, reply_to_hello=None):
        self.reply_to_hello = reply_to_hello
        self.lines, self.bad = [], []
        self.conns = 0    # connections accepted
        self.reading = 0  # of those, not yet read to their end
        self.cv = threading.Condition()
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(path)
        self.srv.listen(64)
        self.srv.setblocking(False)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                select.select([self.srv], [], [])
            except (OSError, ValueError):
                return  # closed
            # accepted and counted at once, under the lock drain() holds
            with self.cv:
                try:
                    c, _ = self.srv.accept()
                except BlockingIOError:
                    continue
                except OSError:
                    return
                self.conns += 1
                self.reading += 1
                n = self.conns
            c.setblocking(True)
            threading.Thread(target=self._read, args=(c, n), daemon=True).start()

    def _read(self, c, n):
        buf = b""
        try:
            with c:
                while True:
                    try:
                        d = c.recv(65536)
                    except OSError:
                        return
                    if not d:
                        return
                    buf += d
                    while b"\n" in buf:
                        line, buf = buf.split(b"\n", 1)
                        try:
                            m = json.loads(line)
                        except ValueError:
                            m = None
                        with self.cv:
                            if m is None:
                                self.bad.append(line)
                            else:
                                self.lines.append((n, m))
                            self.cv.notify_all()
                        if (self.reply_to_hello and isinstance(m, dict)
                                and m.get("type") == "hello"):
                            c.sendall(self.reply_to_hello)
        finally:
            with self.cv:
                self.reading -= 1
                self.cv.notify_all()

    def messages(self):
        with self.cv:
            return [m for _, m in self.lines]

    def wait_for(self, count, timeout=5.0):
        """Until `count` messages came (or the timeout); @return them all."""
        end = time.monotonic() + timeout
        with self.cv:
            while len(self.lines) < count:
                left = end - time.monotonic()
                if left <= 0:
                    break
                self.cv.wait(left)
            return [m for _, m in self.lines]

    def drain(self, timeout=60):
        """Once every sender is gone: until each connection made was accepted
        and read to its end. @return False at the timeout."""
        end = time.monotonic() + timeout
        with self.cv:
            while self.reading or select.select([self.srv], [], [], 0)[0]:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self.cv.wait(min(left, 0.05))  # a connection not accepted yet
        return True

    def close(self):
        self.srv.close()


class Cluster:
    """munged + slurmctld + slurmd (one node) in the directory `root`, on
    loopback: start() says why it cannot when it cannot."""

    CONF = """ClusterName=ckpttest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={p1}
SlurmdPort={p2}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={sock}
CredType=cred/munge
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd.pid
SlurmctldLogFile={r}/slurmctld.log
SlurmdLogFile={r}/slurmd.log
PlugStackConfig={r}/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
KillWait=10
MinJobAge=600
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName={host} NodeAddr=127.0.0.1 CPUs=8 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""

    def __init__(self, root):
        self.root = root
        self.procs = []
        self.munge_pid = None
        self.env = dict(os.environ, SLURM_CONF=os.path.join(root, "slurm.conf"))
        for k in list(self.env):
            if k.startswith("SLURM_") and k != "SLURM_CONF":
                del self.env[k]

    def start(self):
        """@return None when up, else why not."""
        for prog in ("munged", "slurmctld", "slurmd", "sbatch", "scontrol"):
            if not shutil.which(prog) and not os.path.exists("/usr/sbin/" + prog):
                return "%s is not installed" % prog
        if os.geteuid() != 0:
            return "slurmd needs root here (job processes run as the submitting user)"
        r = self.root
        mdir = os.path.join(r, "munge")
        os.makedirs(mdir, mode=0o700)
        with open(os.path.join(mdir, "key"), "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(os.path.join(mdir, "key"), 0o400)
        sock = os.path.join(mdir, "sock")
        m = subprocess.run(["munged", "--force", "--socket=" + sock,
                            "--key-file=" + os.path.join(mdir, "key"),
                            "--log-file=" + os.path.join(mdir, "log"),
                            "--pid-file=" + os.path.join(mdir, "pid"),
                            "--seed-file=" + os.path.join(mdir, "seed")],
                           capture_output=True, text=True)
        if m.returncode != 0:
            return "munged: " + (m.stderr or m.stdout).strip()
        try:
            with open(os.path.join(mdir, "pid")) as f:
                self.munge_pid = int(f.read().strip())
        except (OSError, ValueError):
            pass
        host = socket.gethostname()
        for d in ("state", "spool"):
            os.makedirs(os.path.join(r, d))
        open(os.path.join(r, "plugstack.conf"), "w").close()
        with open(self.env["SLURM_CONF"], "w") as f:
            f.write(Cluster.CONF.format(host=host, p1=free_port(), p2=free_port(), sock=sock,
                                        r=r))
        for args, log in ((["slurmctld", "-D", "-f", self.env["SLURM_CONF"]], "ctld.out"),
                          (["slurmd", "-D", "-f", self.env["SLURM_CONF"], "-N", host], "d.out")):
            with open(os.path.join(r, log), "w") as out:
                self.procs.append(subprocess.Popen(args, env=self.env, stdout=out,
                                                   stderr=subprocess.STDOUT,
                                                   start_new_session=True))
        end = time.monotonic() + 40
        while time.monotonic() < end:
            s = subprocess.run(["sinfo", "-h", "-o", "%t"], env=self.env, capture_output=True,
                               text=True)
            if s.returncode == 0 and s.stdout.strip() in ("idle", "mix", "alloc"):
                return None
            if any(p.poll() is not None for p in self.procs):
                break
            time.sleep(0.5)
        logs = ""
        for name in ("slurmctld.log", "slurmd.log", "ctld.out", "d.out"):
            logs += "".join(read_text(os.path.join(r, name)).splitlines(True)[-5:])
        return "the cluster did not come up:\n" + logs

    def stop(self):
        """The daemons end; munged is waited for too (it removes its socket
        and pid file as it exits)."""
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if self.munge_pid:
            try:
                os.kill(self.munge_pid, signal.SIGTERM)
            except OSError:
                pass
            else:
                wait_for(lambda: not alive(self.munge_pid), timeout=15, what="munged to exit")

    def run(self, *args, check=True):
        r = subprocess.run(list(args), env=self.env, capture_output=True, text=True, timeout=60)
        if check and r.returncode != 0:
            raise AssertionError("%s: %s" % (" ".join(args), r.stderr + r.stdout))
        return r

    def job(self, jid):
        r = self.run("scontrol", "show", "job", "-o", jid, check=False)
        return dict(re.findall(r"(\w+)=(\S*)", r.stdout))


# ---- a test's machine ---------------------------------------------------------

class Case(unittest.TestCase):
    """A test with its own temporary directory, a file:// store in it
    (store, store_dir) and a machine (fresh()) whose environment (env)
    runs ckptrun on that store, run `job`, without polling any cloud's
    metadata service. TRAINER is the Python trainer trainer() runs. What
    start() and server() started is stopped at the end."""

    TRAINER = None
    PREFIX = "ckpt-test-"

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix=self.PREFIX)
        self.store_dir = os.path.join(self.tmp, "store")
        self.store = "file://" + self.store_dir
        self.procs, self.servers = [], []
        self.fresh("a")

    def tearDown(self):
        for p in self.procs:
            p.kill()
        for s in self.servers:
            s.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def fresh(self, tag):
        """A new machine: fresh HOME, CKPT_DIR and working directory, same
        store. CKPT_NOTICE=none: tests never poll a cloud metadata service,
        whatever machine they run on (loopback only)."""
        self.work = os.path.join(self.tmp, "work-" + tag)
        os.makedirs(os.path.join(self.work, "home"))
        self.env = clean_env(HOME=os.path.join(self.work, "home"), CKPT_STORE=self.store,
                             CKPT_RUN="job", CKPT_DIR=os.path.join(self.work, "ck"),
                             CKPT_NOTICE="none")

    def ckptrun(self, *args, env=None, timeout=120):
        r = subprocess.run([CKPTRUN] + list(args), env=env or self.env, cwd=self.work,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=timeout)
        return r.returncode, r.stdout, r.stderr

    def start(self, args, **kw):
        """ckptrun with args on this machine, in the background (Proc)."""
        p = Proc(args, self.env, self.work, **kw)
        self.procs.append(p)
        return p

    def server(self, server):
        """Stop `server` (a Server, NpmPeer...) at the end; @return it."""
        self.servers.append(server)
        return server

    def trainer(self, *args):
        return [PY, self.TRAINER] + list(args)

    def reference_cmd(self, out, *args):
        """The command of reference(): the trainer, at full speed."""
        return self.trainer(*args, "--out", out, "--sleep-ms", "0")

    def reference(self, *args):
        """The --out of an uninterrupted run (reference_cmd), without
        ckptrun."""
        d = tempfile.mkdtemp(dir=self.tmp)
        env = dict(self.env, CKPT_DIR=os.path.join(d, "ck"))
        out = os.path.join(d, "out")
        subprocess.run(self.reference_cmd(out, *args), env=env, check=True, capture_output=True,
                       timeout=120)
        with open(out, "rb") as f:
            return f.read()

    def status(self):
        rc, out, err = self.ckptrun("status", "--json")
        self.assertEqual(rc, 0, err)
        return json.loads(out)
