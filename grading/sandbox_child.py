"""The policy's process (SPEC §13): ``python -m grading.sandbox_child``, started by
:mod:`grading.sandbox` with a fixed command line and a clean environment.

It reads frames on its stdin and answers on its stdout (its ``print`` goes to stderr, so a
chatty policy cannot garble the protocol). The first frame says what to load, the limits to set
and where the grader's compiled numba code is; then requests follow, each answered with one
JSON frame: ``[0, "ready", [name, tracks]]`` once loaded (``[0, "error", why]`` if it could not
be), then for each request ``("batch", number, items)`` one frame ``[number, slot, status,
payload]`` per item, in order, as soon as it is known (``ok``, ``error``, ``garbage``).
Requests are pickles: they come from the grader, which this process trusts; the grader trusts
nothing it sends back, and reads it as JSON only.
"""

from __future__ import annotations

import copy
import json
import os
import resource
import shutil
import sys
import traceback
from typing import Any

import numpy as np

IDLE_LIMIT = 24 * 3600.0
"""Seconds the process waits for its next request before it ends (the grader is gone)."""
ANSWER_LIMIT = 60.0
"""Seconds the process waits to hand over an answer."""
MESSAGE = 2000
"""Characters of an error message sent back (the grader cuts it again)."""


def _protocol_fds() -> tuple[int, int]:
    """The protocol's descriptors moved away from 0 and 1: stdout becomes stderr."""
    read_fd, write_fd = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return read_fd, write_fd


def _copy_numba_caches(pairs: list[list[str]]) -> None:
    """The grader's compiled kernels, copied to a writable cache in the private /tmp (the view of
    the packages is read-only; numba would compile them again otherwise). Runs before anything
    imports numba (numba reads ``NUMBA_CACHE_DIR`` once, on import)."""
    if not pairs:
        return
    target = os.path.join(os.environ.get("HOME", "/tmp"), "numba-cache")
    os.environ["NUMBA_CACHE_DIR"] = target
    from numba.core.caching import _CacheLocator  # numba's own naming of cache folders

    for source, cache in pairs:
        dest = (
            target
            if not source
            else os.path.join(
                target, _CacheLocator.get_suitable_cache_subpath(os.path.join(source, "__init__.py"))
            )
        )
        try:
            shutil.copytree(
                cache,
                dest,
                dirs_exist_ok=True,
                ignore=lambda folder, names: [n for n in names if n.endswith((".pyc", ".lock"))],
            )
        except OSError:
            continue  # a cache that cannot be read is compiled again


def _set_limits(limits: dict[str, int], sandbox: bool) -> None:
    chosen = {
        resource.RLIMIT_CPU: limits["cpu_seconds"],
        resource.RLIMIT_AS: limits["address_space"],
        resource.RLIMIT_FSIZE: limits["file_size"],
        resource.RLIMIT_NOFILE: limits["open_files"],
    }
    if sandbox:  # (in the grader's own user's namespace it would count all of that user's processes)
        chosen[resource.RLIMIT_NPROC] = limits["processes"]
    for which, value in chosen.items():
        _, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (value, value))


def _reply(channel: Any, answer: list) -> None:
    channel.send(json.dumps(answer).encode(), ANSWER_LIMIT)


def _error() -> str:
    return traceback.format_exc(limit=8)[-MESSAGE:]


class _Spaces:
    """What an RT ``agent(obs, env)`` callable gets as ``env`` besides the plan view."""

    def __init__(self, action_space: Any, observation_space: Any) -> None:
        self.action_space, self.observation_space = action_space, observation_space


def main() -> None:
    import pickle

    from grading.frames import Channel, FrameError, unpack
    from grading.sandbox import MAX_REQUEST

    read_fd, write_fd = _protocol_fds()
    channel = Channel(read_fd, write_fd, MAX_REQUEST)
    try:
        config = pickle.loads(channel.receive(IDLE_LIMIT))
    except (FrameError, pickle.UnpicklingError, EOFError):
        return
    try:
        _copy_numba_caches(config["numba"])
        server = _Server(config)
        server.prepare()  # the packages (trusted code) ...
        _set_limits(config["limits"], config["sandbox"])
        server.load()  # ... then, limited, the policy's
    except BaseException:  # the policy could not even be loaded: say why, and stop
        _reply(channel, [0, "error", _error()])
        return
    imported = sorted({name.partition(".")[0] for name in sys.modules})[:2000]  # (for the bytecode cache)
    _reply(channel, [0, "ready", [server.name, list(server.tracks), imported]])
    while True:
        try:
            request = pickle.loads(channel.receive(IDLE_LIMIT))
        except (FrameError, pickle.UnpicklingError, EOFError):
            return
        if request[0] == "stop":
            return
        _, number, items = request
        for slot, kind, packed in items:  # one answer per item, as soon as it is known
            try:
                status, payload = server.handle(slot, kind, tuple(map(unpack, packed)))
            except BaseException:
                status, payload = "error", _error()
            try:
                _reply(channel, [number, slot, status, payload])
            except FrameError:
                return


class _Server:
    """The loaded policy, one instance of it per slot (an episode the grader plays at the same
    time as others), each with its view of its episode (an ED handle or an RT plan view)."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.prototype: Any = None
        self.spec: Any = None
        self.policies: dict[int, Any] = {}
        self.views: dict[int, Any] = {}
        self.buffers: dict[int, Any] = {}  # each ED slot's present, as bytes (patched each decision)
        self.name, self.tracks = "", tuple[str, ...]()

    def prepare(self) -> None:
        import policies  # noqa: F401

    def load(self) -> None:
        self.prototype = policy = self._load()
        if self.config["env"] == "radiotherapy":
            self.name, self.tracks = str(getattr(policy, "name", self.spec)), ("radiotherapy",)
        else:
            self.name, self.tracks = str(policy.name), tuple(str(t) for t in policy.tracks)

    def _load(self) -> Any:
        import pickle

        self.spec, track = pickle.loads(self.config["spec"]), self.config["track"]
        if self.config["env"] == "radiotherapy":
            from grading.radiotherapy import as_agent

            return as_agent(self.spec)
        from policies import as_policy, load

        return as_policy(load(self.spec) if isinstance(self.spec, str) else self.spec, track)

    def _policy(self, slot: int) -> Any:
        """Slot ``slot``'s instance: a copy of the loaded policy, untouched by the others (loaded
        again if it cannot be copied)."""
        policy = self.policies.get(slot)
        if policy is None:
            try:
                policy = copy.deepcopy(self.prototype)
            except Exception:
                policy = self._load()
            self.policies[slot] = policy
        return policy

    def handle(self, slot: int, kind: str, args: tuple) -> tuple[str, Any]:
        if self.config["env"] == "radiotherapy":
            return self._rt(slot, kind, args)
        from hospital_marl.core.hospital import mirror

        if kind == "reset":
            seed, present = args
            policy, self.views[slot] = self._policy(slot), mirror(present)
            self.buffers[slot] = _own(present["buffer"])
            policy.reset(seed=seed, hospital=self.views[slot])
            return "ok", None
        present = args[-1]
        if present.get("changed") is not None:  # the bytes that changed since the last present
            where, values = present.pop("changed")
            buffer = self.buffers[slot]
            buffer[np.frombuffer(where, np.uint32)] = np.frombuffer(values, np.uint8)
            present["buffer"] = buffer
        else:
            self.buffers[slot] = _own(present["buffer"])
        self.views[slot] = mirror(present, self.views[slot])
        policy = self.policies[slot]
        value = policy.act(*args[:2]) if kind == "act" else policy.act_role(*args[:3])
        return _action(value)

    def _rt(self, slot: int, kind: str, args: tuple) -> tuple[str, Any]:
        from grading.radiotherapy import reset_agent
        from hospital_marl.radiotherapy.core.sealed import PlanView

        if kind == "reset":
            seed, plan, spaces = args
            self.views[slot] = plan
            reset_agent(self._policy(slot), seed, _Spaces(*spaces), PlanView(plan))
            return "ok", None
        observation, mask, snapshot = args
        self.views[slot].restore(snapshot)
        return _action(self.policies[slot].act(observation, mask))


def _own(buffer: bytes | None) -> Any:
    """A writable copy of an exported present's bytes (None: the present was not packed)."""
    return None if buffer is None else np.frombuffer(buffer, np.uint8).copy()


def _action(value: Any) -> tuple[str, Any]:
    from grading.isolated import as_action

    action = as_action(value)
    if action is None:
        return "garbage", repr(value)[:200]
    return "ok", action


if __name__ == "__main__":
    main()
