"""Policies that attack the isolated grader (SPEC §13), for tests/grading/test_sandbox_attacks.py.

Each plays the masked "first legal action" rule and, at its first decision, tries one attack.
Inside the sandbox it cannot write a file the test could read, so it says what it found the
only way a policy can: its first answer is the string ``"found:<what>"`` (a counted ``garbage``
fault whose text the report keeps). A finding is judged by the test against what it knows (the
secret seed, a marker), never against what the grader tells the policy.

In their own module so that the policy's process can import them.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time
from typing import Any

import numpy as np


def first_legal(action_mask: np.ndarray) -> int:
    legal = np.flatnonzero(action_mask)
    return int(legal[1]) if len(legal) > 1 else 0


class Attack:
    """Plays first-legal; at the first decision of each episode, ``attack()`` -> a finding."""

    name = "attack"
    tracks = ("flat", "team")

    def __init__(self, secret: str = "", marker: str = "", port: int = 0) -> None:
        self.secret, self.marker, self.port = secret, marker, port
        self.seen = 0

    def reset(self, seed: int | None = None, hospital: Any = None) -> None:
        self.seen = 0

    def act(self, observation: Any, action_mask: np.ndarray) -> Any:
        self.seen += 1
        if self.seen == 1:
            return "found:" + self.attack()
        return first_legal(action_mask)

    def act_role(self, role: str, observation: Any, action_mask: np.ndarray) -> Any:
        return self.act(observation, action_mask)

    def attack(self) -> str:
        return ""


def _read(path: str, limit: int = 1 << 20) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(limit)
    except OSError:
        return b""


def _pids() -> list[int]:
    return sorted(int(p) for p in os.listdir("/proc") if p.isdigit())


class SeedThief(Attack):
    """Looks for the secret (the base seed on the grader's command line, or a token in its
    environment) in ``sys.argv``, ``__main__`` / ``__mp_main__``, its environment, and every
    ``/proc/<pid>/cmdline`` and ``environ`` it can read (its parent's first)."""

    name = "seed_thief"

    def attack(self) -> str:
        secret = self.secret.encode()
        where = []
        if any(self.secret in a for a in sys.argv):
            where.append("argv")
        for name in ("__main__", "__mp_main__"):
            module = sys.modules.get(name)
            if module is not None and secret in repr(sorted(vars(module).items(), key=str)).encode():
                where.append(name)
        if any(self.secret in v for v in os.environ.values()):
            where.append("environ")
        for pid in [os.getppid(), *_pids()]:
            for part in ("cmdline", "environ"):
                if secret in _read(f"/proc/{pid}/{part}"):
                    where.append(f"proc-{part}")
        return ",".join(sorted(set(where)))


class MemoryReader(Attack):
    """Reads every readable mapping of every process it can see (its parent's first) through
    ``/proc/<pid>/mem``, looking for the secret seed's digits."""

    name = "memory_reader"

    def attack(self) -> str:
        secret = self.secret.encode()
        read = 0
        for pid in [os.getppid(), *(p for p in _pids() if p != os.getpid())]:
            maps = _read(f"/proc/{pid}/maps").decode(errors="replace").splitlines()
            try:
                mem = open(f"/proc/{pid}/mem", "rb")  # noqa: SIM115
            except OSError:
                continue
            with mem:
                for line in maps:
                    fields = line.split()
                    if len(fields) < 2 or "r" not in fields[1]:
                        continue
                    start, end = (int(x, 16) for x in fields[0].split("-"))
                    if end - start > 256 << 20:
                        continue
                    try:
                        mem.seek(start)
                        chunk = mem.read(end - start)
                    except (OSError, OverflowError, ValueError):
                        continue
                    read += len(chunk)
                    if secret in chunk:
                        return f"mem-{pid}"
        return f"nothing (read {read} bytes)"


class ProcLister(Attack):
    """What of the machine it can see: the processes in its ``/proc`` and whether one is the
    grader (its command line names the grader's module or pytest)."""

    name = "proc_lister"

    def attack(self) -> str:
        cmdlines = [_read(f"/proc/{p}/cmdline").replace(b"\0", b" ") for p in _pids()]
        grader = any(b"pytest" in c or b"hospital_marl_cli" in c for c in cmdlines)
        return f"pids={len(cmdlines)} grader={grader} ppid={os.getppid()}"


class Killer(Attack):
    """Stops, then kills its parent and every process it may signal (``kill(-1)``), at every
    decision. Only ever run in the sandbox (as root outside it, ``kill(-1)`` is the machine)."""

    name = "killer"

    def act(self, observation: Any, action_mask: np.ndarray) -> Any:
        for target, sig in (
            (os.getppid(), signal.SIGSTOP),
            (os.getppid(), signal.SIGKILL),
            (-1, signal.SIGKILL),
        ):
            with contextlib.suppress(OSError):
                os.kill(target, sig)
        return first_legal(action_mask)


class Orphaner(Attack):
    """Starts grandchildren that outlive it (new sessions, double fork), carrying the marker on
    their command line so the test can look for them after grading."""

    name = "orphaner"

    def attack(self) -> str:
        started = 0
        for _ in range(3):
            with contextlib.suppress(OSError):
                subprocess.Popen(
                    [sys.executable, "-c", "import time; time.sleep(600)", self.marker],
                    start_new_session=True,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                started += 1
        return f"started={started}"


class Shouter(Attack):
    """Raises an exception whose message is 2 MiB, at every decision."""

    name = "shouter"

    def act(self, observation: Any, action_mask: np.ndarray) -> Any:
        raise RuntimeError("x" * (2 << 20))


def _protocol_fd() -> int | None:
    """The pipe its process answers on (a pipe open for writing that is not stderr)."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd <= 2:
            continue
        target = os.readlink(f"/proc/self/fd/{name}") if os.path.exists(f"/proc/self/fd/{name}") else ""
        with contextlib.suppress(OSError):
            if target.startswith("pipe:") and os.get_blocking(fd) is False:
                import fcntl

                if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY:
                    return fd
    return None


class Forger(Attack):
    """Writes straight into the protocol at its first decisions: ``how`` is ``oversized`` (a 2
    MiB frame), ``ready`` (a forged status frame), ``pickle`` (a pickle that would run code if
    unpickled), ``huge_int`` (an action of 2**70), ``truncated`` (a header promising more than
    follows, then silence), ``number`` (an answer to a request never made). It forges at the
    day's first decision only (a fresh process, reset later in the day, plays honestly: the
    test stays short)."""

    name = "forger"

    def __init__(self, how: str, marker: str = "") -> None:
        super().__init__(marker=marker)
        self.how = how
        self.hospital: Any = None

    def reset(self, seed: int | None = None, hospital: Any = None) -> None:
        self.seen, self.hospital = 0, hospital

    def act(self, observation: Any, action_mask: np.ndarray) -> Any:
        self.seen += 1
        if self.how == "huge_int":
            return 2**70 if self.seen <= 3 else first_legal(action_mask)
        fd = _protocol_fd()
        if fd is None or self.seen > 1 or self.hospital is None or self.hospital.tick_count > 0:
            return first_legal(action_mask)
        frames = {
            "oversized": b'[1, "ok", "' + b"x" * (2 << 20) + b'"]',
            "ready": b'[0, "ready", ["forged", ["flat"]]]',
            "pickle": b"cos\nsystem\n(S'touch " + self.marker.encode() + b"'\ntR.",
            "number": b'[999999, "ok", 0]',
        }
        os.set_blocking(fd, True)
        if self.how == "truncated":
            os.write(fd, struct.pack(">I", 100) + b"[1, ")
            time.sleep(3600)
        payload = frames[self.how]
        os.write(fd, struct.pack(">I", len(payload)) + payload)
        return first_legal(action_mask)


class Quitter(Attack):
    """Exits its process at every reset and every decision (a restart loop)."""

    name = "quitter"

    def reset(self, seed: int | None = None, hospital: Any = None) -> None:
        os._exit(3)

    def act(self, observation: Any, action_mask: np.ndarray) -> Any:
        os._exit(3)


class ForkBomb(Attack):
    """Forks until it cannot (at most ``most`` times: the test machine is shared); each child
    becomes a sleeper carrying the marker. Says how many it made."""

    name = "fork_bomb"

    def attack(self) -> str:
        made = 0
        for _ in range(self.port or 10_000):
            try:
                pid = os.fork()
            except OSError:
                break
            if pid == 0:
                try:
                    os.execv(
                        sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", self.marker]
                    )
                finally:
                    os._exit(0)
            made += 1
        return f"forked={made}"


class Inspector(Attack):
    """What its process is: uid, effective capabilities, its argv's length, its environment's names."""

    name = "inspector"

    def attack(self) -> str:
        status = _read("/proc/self/status").decode()
        caps = re.search(r"CapEff:\s*(\w+)", status)
        env = ",".join(sorted(os.environ))
        return f"uid={os.getuid()} caps={caps.group(1) if caps else '?'} argv={len(sys.argv)} env={env}"


class Writer(Attack):
    """Tries to create a file (named by the marker) in each of ``places``; says where it could."""

    name = "writer"

    def __init__(self, places: list[str], marker: str) -> None:
        super().__init__(marker=marker)
        self.places = places

    def attack(self) -> str:
        wrote = []
        for place in self.places:
            try:
                with open(os.path.join(place, self.marker), "w") as f:
                    f.write("pwned")
                wrote.append(place)
            except OSError:
                continue
        return "wrote=" + "|".join(wrote)


class Poisoner(Attack):
    """Tries to plant code for the next submission: overwrites pycs under the trusted bytecode
    cache its Python reads (``sys.pycache_prefix``) and the compiled numba kernels under the
    package it imports (the grader's caches), and creates a file (named by the marker) beside
    them. Says whether it had a cache, how many of its modules came from it, how many files it
    tried and how many it changed."""

    name = "poisoner"

    def attack(self) -> str:
        import hospital_marl

        prefix = sys.pycache_prefix or ""
        used = sum(
            1
            for module in list(sys.modules.values())
            if prefix
            and str(getattr(module, "__cached__", None) or "").startswith(prefix)
            and os.path.exists(module.__cached__)
        )
        folders = [prefix] if prefix else []
        folders.append(os.path.dirname(os.path.dirname(hospital_marl.__file__)))
        changed, tried = 0, 0
        for top in folders:
            for folder, _, files in os.walk(top):
                chosen = [f for f in files if f.endswith((".pyc", ".nbi", ".nbc"))][:2]
                for name in chosen:
                    tried += 1
                    try:
                        with open(os.path.join(folder, name), "r+b") as f:
                            f.write(b"poisoned")
                        changed += 1
                    except OSError:
                        continue
                if chosen:
                    with contextlib.suppress(OSError), open(os.path.join(folder, self.marker), "w") as f:
                        f.write("poisoned")
                        changed += 1
        return f"prefix={bool(prefix)} used={used} tried={tried} changed={changed}"


class Caller(Attack):
    """Opens TCP connections: to the test's listener on the grader's loopback, and out."""

    name = "caller"

    def attack(self) -> str:
        reached = []
        for host, port in (("127.0.0.1", self.port), ("1.1.1.1", 53)):
            try:
                with socket.create_connection((host, port), timeout=2):
                    reached.append(f"{host}:{port}")
            except OSError:
                continue
        return "reached=" + "|".join(reached)


def finding(report: dict[str, Any]) -> list[str]:
    """What the attacker said, one per episode (from the report's fault messages)."""
    return [
        m.group(1) for m in (re.search(r"'found:([^']*)'", s) for s in report["policy_fault_messages"]) if m
    ]
