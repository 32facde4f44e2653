"""Starting an untrusted policy's process (SPEC §13): under bubblewrap, or, only when asked by
name, as a plain child process.

``isolation="sandbox"`` (the default of every isolated mode) runs
``python -m grading.sandbox_child`` under ``bwrap`` (Debian package ``bubblewrap``): new user,
PID, IPC, network, UTS and cgroup namespaces; uid/gid 65534 with every capability dropped and no
further user namespaces; a read-only view of the Python installation, the directories on the
grader's ``sys.path`` and the policy's own file, a private tmpfs ``/tmp`` and its own ``/proc``
(the grader has no entry in it: no ``/proc/PPID``, no ``ptrace``, no signals); a new session (no
``TIOCSTI`` into the grader's terminal); killed with the grader. Its command line is fixed and
its environment is built from nothing (``PATH``, ``PYTHONPATH``, ``HOME=/tmp`` and a few thread
counts): no seed, no copy of the grader's ``sys.argv``, environment or ``__main__``. The child
sets its own resource limits (:class:`Limits`) before it loads the policy.

``isolation="process"`` starts the same child with the same command line and limits, without
namespaces, in the grader's environment (as any child process): it can read the grader's
``/proc`` entry (and memory, as the same user), signal it, read and write your files and use the
network. It protects against accidents (crashes, hangs, floods), not against a submission that
attacks the grader (the web view's agents use it: they are the server's own policies).

Both read a trusted bytecode cache (:func:`bytecode_cache`): checked-hash pycs the grader
compiles, outside the sandbox, from the interpreter's and the project's sources, bound
read-only (the sandbox cannot write bytecode, so without it every start compiled its imports
from source).

When ``bwrap`` is missing or cannot make namespaces here, :func:`check_sandbox` says in one line
what to install or enable; the sandbox is never silently replaced by the weaker mode.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import importlib
import importlib.metadata
import itertools
import json
import os
import pickle
import py_compile
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from grading.frames import Channel

ISOLATIONS = ("sandbox", "process")
"""``sandbox``: bubblewrap (the default); ``process``: a plain child process (weaker, by name only)."""
MAX_ANSWER = 64 << 10
"""Bytes an answer from the policy's process may have (checked before it is read)."""
MAX_REQUEST = 1 << 30
"""Bytes a request from the grader may have (the child's cap)."""
PIPE_SIZE = 1 << 20
"""Bytes the protocol's pipes hold (Linux's default unprivileged maximum; 64 KiB otherwise)."""
SANDBOX_UID = 65534
PACKAGES = ("grading", "hospital_marl", "policies")
"""Packages the child imports: their directories are visible in the sandbox (read-only)."""
ENV_PASSED = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMBA_NUM_THREADS",
    "PYTHONHASHSEED",
)
"""The grader's environment variables the child gets (thread counts, hashing: numbers, not secrets)."""


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot run here: the message says what to install or enable."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of the policy's process and everything it starts (``setrlimit``, soft and
    hard; the child cannot raise them). The per-decision time limit is the grader's, not here."""

    cpu_seconds: int = 3600
    address_space: int = 16 << 30
    processes: int = 256
    file_size: int = 64 << 20
    open_files: int = 256
    tmp_size: int = 256 << 20
    """The private ``/tmp`` tmpfs (sandbox only)."""


@functools.lru_cache(maxsize=1)
def _probe() -> str | None:
    """Why bubblewrap cannot run a sandbox here (None: it can)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return (
            "--isolated needs bubblewrap, which is not installed: `apt-get install bubblewrap` "
            "(Debian/Ubuntu; `dnf install bubblewrap` on Fedora), or choose the weaker --isolation=process"
        )
    probe = [bwrap, *_NAMESPACES, "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=30, env={"PATH": os.defpath})
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"--isolated: bubblewrap could not start ({error}); or choose the weaker --isolation=process"
    if done.returncode != 0:
        why = (done.stderr.decode(errors="replace").strip().splitlines() or ["no message"])[-1]
        return (
            f"--isolated: bubblewrap cannot create its namespaces here ({why}): enable unprivileged user "
            "namespaces (sysctl kernel.unprivileged_userns_clone=1 and user.max_user_namespaces > 0; in a "
            "container, a seccomp/AppArmor profile that allows them), "
            "or choose the weaker --isolation=process"
        )
    return None


def check_sandbox() -> None:
    """Raise :class:`SandboxUnavailable` (one line: what to install or enable) unless the
    bubblewrap sandbox works on this machine."""
    reason = _probe()
    if reason is not None:
        raise SandboxUnavailable(reason)


_NAMESPACES = (
    "--unshare-user",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-net",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--uid",
    str(SANDBOX_UID),
    "--gid",
    str(SANDBOX_UID),
    "--disable-userns",
    "--cap-drop",
    "ALL",
    "--die-with-parent",
    "--new-session",
)


def _module_root(name: str) -> str | None:
    """The directory that holds top-level package or module ``name`` (None: not found)."""
    top = name.partition(".")[0]
    module = sys.modules.get(top)
    if module is None:
        with contextlib.suppress(Exception):
            module = importlib.import_module(top)
    file = getattr(module, "__file__", None)
    if not file:
        return None
    path = Path(file).resolve()
    return str(path.parent.parent if path.name == "__init__.py" else path.parent)


def python_path(spec: Any) -> list[str]:
    """The child's ``sys.path``: the grader's (the current directory for ``''``), then the
    directories of the packages it imports and of the policy object's own module."""
    paths = [os.getcwd() if not p else os.path.abspath(p) for p in sys.path]
    names = list(PACKAGES)
    if not isinstance(spec, str):
        names.append(type(spec).__module__)
    paths += [root for root in map(_module_root, names) if root is not None]
    out: list[str] = []
    for path in paths:
        if path not in out and os.path.exists(path):
            out.append(path)
    return out


def numba_caches() -> list[tuple[str, str]]:
    """Where the grader's compiled numba code lives, as (source directory or ``""``, cache
    directory) pairs: the sandbox copies it into its own writable cache (its view of the
    package is read-only, and compiling the kernels again would take a minute per start)."""
    user = os.environ.get("NUMBA_CACHE_DIR")
    if user:
        return [("", os.path.abspath(user))] if os.path.isdir(user) else []
    pairs = []
    for name in ("hospital_marl", "policies"):
        root = _module_root(name)
        if root is None:
            continue
        for folder, _, files in os.walk(os.path.join(root, name)):
            if os.path.basename(folder) == "__pycache__" and any(f.endswith(".nbi") for f in files):
                pairs.append((os.path.dirname(folder), folder))
    return pairs


_COMPILED: set[str] = set()
"""Sources this process has already brought into the bytecode cache (checked once per process)."""
CHILD_PACKAGES: set[str] = {*PACKAGES, "numpy", "numba", "llvmlite", "scipy", "gymnasium", "pettingzoo"}
"""Top-level packages whose modules the bytecode cache holds (with the standard library's):
those the policy's process imports to play the built-in policies, and those the policy
processes started so far said they had imported (a grader that imported more, e.g. torch for
other work, does not compile it all for a sandbox that never imports it)."""


def _trusted_roots() -> tuple[str, ...]:
    """Directories whose Python sources the grader compiles for the sandbox: the interpreter's
    (standard library, site-packages) and the project's packages. Never a submission's file."""
    roots = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    for name in PACKAGES:
        root = _module_root(name)
        if root is not None:
            roots.add(os.path.realpath(os.path.join(root, name)))
    return tuple(sorted(root.rstrip(os.sep) + os.sep for root in roots))


@functools.lru_cache(maxsize=1)
def _version() -> str:
    """The installed package's version (read without importing the package: the policy's
    process imports this module before numba's cache is set)."""
    try:
        return importlib.metadata.version("hospital_marl")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def bytecode_cache() -> str | None:
    """The trusted bytecode tree the policy's Python reads (``PYTHONPYCACHEPREFIX``), or None
    where none can be made.

    Why: the sandbox shows the packages read-only and sets ``PYTHONDONTWRITEBYTECODE``, so
    without it every start compiled numba, gymnasium and this project from source (about 1 s of
    CPU). The grader (trusted) compiles here, outside the sandbox, the trusted sources it has
    itself imported (:func:`_trusted_roots`: the interpreter's and the project's, never a
    submission's), into a directory keyed by interpreter and package version; the sandbox binds
    it read-only, so no submission can write into it (or poison another's run). The files are
    checked-hash pycs: Python uses one only if it was compiled from the very source it imports."""
    ident = hashlib.sha256("\0".join([sys.executable, sys.version, sys.prefix]).encode()).hexdigest()[:12]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    root = os.path.join(
        base, "hospital_marl", "sandbox-bytecode", f"{sys.implementation.cache_tag}-{_version()}-{ident}"
    )
    try:
        os.makedirs(root, exist_ok=True)
    except OSError:
        return None
    trusted = _trusted_roots()
    stdlib = os.path.realpath(os.path.dirname(os.__file__)) + os.sep
    suffix = f".{sys.implementation.cache_tag}.pyc"
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if not isinstance(file, str) or not file.endswith(".py"):
            continue
        if name.partition(".")[0] not in CHILD_PACKAGES and not os.path.realpath(file).startswith(stdlib):
            continue
        for source in {os.path.abspath(file), os.path.realpath(file)}:
            if source in _COMPILED:
                continue
            _COMPILED.add(source)
            if not os.path.realpath(source).startswith(trusted):
                continue
            head, tail = os.path.split(source)
            target = os.path.join(root, head.lstrip(os.sep), tail[:-3] + suffix)
            with contextlib.suppress(OSError, py_compile.PyCompileError):
                if os.path.exists(target) and os.path.getmtime(target) >= os.path.getmtime(source):
                    continue
                py_compile.compile(
                    source,
                    cfile=target,
                    doraise=True,
                    invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH,
                )
    return root


def _bind_system() -> list[str]:
    args: list[str] = []
    for top in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for etc in (
        "/etc/ld.so.cache",
        "/etc/ld.so.conf",
        "/etc/ld.so.conf.d",
        "/etc/alternatives",
        "/etc/localtime",
    ):
        args += ["--ro-bind-try", etc, etc]
    return args


def bwrap_command(python: list[str], visible: list[str], limits: Limits, cwd: str) -> list[str]:
    """The ``bwrap`` command line: namespaces, the read-only view of ``visible`` (and the
    system's libraries), a private ``/tmp``, ``/proc`` and ``/dev``."""
    bwrap = shutil.which("bwrap") or "bwrap"
    args = [bwrap, *_NAMESPACES, "--hostname", "sandbox", *_bind_system()]
    # the private /tmp first: what is visible under the grader's /tmp is bound over it, not hidden
    args += ["--size", str(limits.tmp_size), "--tmpfs", "/tmp"]
    for path in sorted(set(visible), key=len):
        args += ["--ro-bind", path, path]
    args += ["--proc", "/proc", "--dev", "/dev"]
    args += ["--remount-ro", "/"]  # the root bwrap builds (mount points) read-only too: only /tmp is writable
    args += ["--chdir", cwd if cwd in visible else "/tmp"]
    return [*args, "--", *python]


_CGROUPS = itertools.count()


def pids_cgroup(limit: int) -> str | None:
    """A new cgroup (the ``pids`` controller) allowing ``limit`` tasks, or None where none can
    be made (best effort: it needs a writable cgroup filesystem, e.g. root). Why: the kernel
    exempts host uid 0 from ``RLIMIT_NPROC``, and a root grader's sandbox uid maps to it."""
    for root in ("/sys/fs/cgroup/pids", "/sys/fs/cgroup"):
        try:
            if root == "/sys/fs/cgroup" and "pids" not in Path(root, "cgroup.subtree_control").read_text():
                continue
            path = Path(root, f"hospital-marl-sandbox-{os.getpid()}-{next(_CGROUPS)}")
            path.mkdir()
        except OSError:
            continue
        try:
            (path / "pids.max").write_text(str(limit))
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            continue
        return str(path)
    return None


@dataclass
class Started:
    """A running policy process: ``process`` (``bwrap`` or the child itself), the channel, and
    (sandbox) the descriptor on which ``bwrap`` says which host pid its namespace's init has."""

    process: subprocess.Popen
    channel: Channel
    stderr: Any
    info_fd: int | None = None
    cgroup: str | None = None

    @property
    def pid(self) -> int:
        """The pid of what was started (``bwrap``, or the child itself)."""
        return self.process.pid

    def _init_pid(self) -> int | None:
        """The host pid of the sandbox's PID-namespace init (``bwrap --info-fd``)."""
        if self.info_fd is None:
            return None
        poller = select.poll()
        poller.register(self.info_fd, select.POLLIN)
        data = b""
        with contextlib.suppress(OSError):
            while poller.poll(1000) and len(data) < 4096:
                chunk = os.read(self.info_fd, 4096)
                if not chunk:
                    break
                data += chunk
                with contextlib.suppress(ValueError):
                    return int(json.loads(data)["child-pid"])
        return None

    def kill(self) -> None:
        """End it and everything it started, and return only when all of it is gone. Sandbox:
        SIGKILL to its namespace's init; the kernel then kills every process in the namespace,
        and the init (so ``bwrap``, which waits for it) ends only once they all have."""
        if self.process.poll() is None:
            init = self._init_pid()
            with contextlib.suppress(OSError):
                if init is not None and self.process.poll() is None:
                    os.kill(init, signal.SIGKILL)
                elif self.info_fd is None:  # process: its group (what left the group survives)
                    os.killpg(self.process.pid, signal.SIGKILL)
                else:
                    self.process.kill()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                self.process.kill()
            self.process.wait()
        for stream in (self.process.stdin, self.process.stdout, self.stderr):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()
        if self.info_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.info_fd)
            self.info_fd = None
        if self.cgroup is not None:
            for _ in range(50):  # empty once every task has been reaped
                try:
                    os.rmdir(self.cgroup)
                    break
                except OSError:
                    time.sleep(0.02)
            self.cgroup = None

    def last_words(self, limit: int = 2000) -> str:
        """The end of what the process wrote to stderr (for a message: it did not start)."""
        try:
            self.stderr.flush()
            self.stderr.seek(0, os.SEEK_END)
            size = self.stderr.tell()
            self.stderr.seek(max(0, size - limit))
            return self.stderr.read().decode(errors="replace")
        except (OSError, ValueError):
            return ""


def start(spec: Any, isolation: str, limits: Limits) -> Started:
    """Start ``python -m grading.sandbox_child`` (see the module docstring); the caller sends
    its first frame (the policy and the limits)."""
    if isolation not in ISOLATIONS:
        raise ValueError(f"isolation must be one of {ISOLATIONS}, got {isolation!r}")
    if isolation == "sandbox":
        check_sandbox()
    paths = python_path(spec)
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "PYTHONPATH": os.pathsep.join(paths)}
    env.update({k: os.environ[k] for k in ENV_PASSED if k in os.environ})
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    bytecode = bytecode_cache()
    if bytecode is not None:
        env["PYTHONPYCACHEPREFIX"] = bytecode
    python = [sys.executable, "-P", "-s", "-m", "grading.sandbox_child"]
    cwd = os.getcwd()
    if isolation == "sandbox":
        visible = [*paths, *{sys.prefix, sys.base_prefix, sys.exec_prefix}]
        visible += [p for _, p in numba_caches()]
        visible += [bytecode] if bytecode is not None else []
        if isinstance(spec, str) and os.path.exists(spec):
            visible.append(os.path.dirname(os.path.abspath(spec)) or cwd)
        command = bwrap_command(python, [os.path.realpath(p) for p in visible] + visible, limits, cwd)
        cwd = "/"
    else:  # the grader's environment, as a child process has it (the weaker mode says so)
        command = python
        env = {**os.environ, "PYTHONPATH": env["PYTHONPATH"], "PYTHONDONTWRITEBYTECODE": "1"}
        if bytecode is not None:
            env["PYTHONPYCACHEPREFIX"] = bytecode
    stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed by Started.kill)
    info_read, info_write = os.pipe() if isolation == "sandbox" else (None, None)
    if info_write is not None:
        command = [command[0], "--info-fd", str(info_write), *command[1:]]
    # bwrap and its init count too: the policy's process and what it starts get `processes`
    cgroup = pids_cgroup(limits.processes + 2) if isolation == "sandbox" else None

    def join_cgroup() -> None:  # in the forked child, before bwrap runs
        if cgroup is not None:
            Path(cgroup, "cgroup.procs").write_text("0")

    try:
        process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
            cwd=cwd,
            close_fds=True,
            pass_fds=(info_write,) if info_write is not None else (),
            start_new_session=True,
            preexec_fn=join_cgroup if cgroup is not None else None,
        )
    except BaseException:
        if cgroup is not None:
            with contextlib.suppress(OSError):
                os.rmdir(cgroup)
        raise
    finally:
        if info_write is not None:
            os.close(info_write)
    if process.stdout is None or process.stdin is None:  # Popen was given PIPE for both
        raise RuntimeError("the sandbox's process has no pipes")
    for fd in (process.stdin.fileno(), process.stdout.fileno()):
        with contextlib.suppress(OSError):  # a frame of many decisions in one write, not 16
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
    channel = Channel(process.stdout.fileno(), process.stdin.fileno(), MAX_ANSWER)
    return Started(process, channel, stderr, info_read, cgroup)


def hello(spec: Any, limits: Limits, track: str, env: str, isolation: str) -> bytes:
    """The first frame the child reads: what to load (pickled on its own: unpickling it may
    import the policy's code, which runs only once the limits are set), the limits, and (in the
    sandbox) where the grader's compiled numba code is."""
    config = {
        "spec": pickle.dumps(spec),
        "track": track,
        "env": env,
        "limits": asdict(limits),
        "sandbox": isolation == "sandbox",
        "numba": numba_caches() if isolation == "sandbox" else [],
    }
    return pickle.dumps(config)


__all__ = ["ISOLATIONS", "Limits", "SandboxUnavailable", "Started", "check_sandbox", "start"]
