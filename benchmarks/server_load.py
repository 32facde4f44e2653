"""Load on the OpenEnv server: N concurrent WebSocket sessions x M steps each.

Starts the server (``python -m server.app``) on a free 127.0.0.1 port, or uses
``--url`` (loopback only), and drives it with raw WebSocket clients speaking
OpenEnv's protocol: each session resets with its own seed, then steps with
masked-random valid actions, resetting when an episode ends. Every session
runs closed-loop (next step as soon as the last answered) unless ``--rate``
paces it. Prints steps/s and the p50 / p90 / p99 step round-trip latency, for
one session alone (the unloaded round trip) and for all N together, next to
the in-process environment's step rate measured in the same run.

The targets (issue 24): p50 <= 0.3 ms for one session, p99 <= 20 ms for 32 sessions each
pacing itself at ``--rate-many`` steps/s (an agent's pace; closed loop, 32 sessions queue on
one event loop and the latency is their count over the throughput), both measured beside a
web-view client whose agent is the ``planner`` and a client opening and closing standard MCP
sessions (``--no-background``: alone). The verdicts are printed. On a shared 2-CPU machine
the figures are noisy: read them against CartPole, measured in the same run.

The client's own cost is in every round trip (it runs on the same CPUs): the same client
against a trivial WebSocket server (the ``websockets`` library's, in a process of its own,
answering every message with one canned observation of the real size) gives the floor no
server can go below on this machine, printed beside the results (``echo floor``).

Bounded: at most 256 sessions x 100,000 steps, and the run stops by itself
after ``--max-seconds`` (default 60) whatever remains. Run from the
repository root::

    python -m benchmarks.server_load [--sessions 32] [--steps 300] [--rate 0] [--rate-many 20]
    python -m benchmarks.server_load --write   # also docs/server_load.json -> server/README.md

``--write`` keeps the figures in ``docs/server_load.json`` and regenerates the
``server-load`` block of ``server/README.md`` from it (``tools/readme.py``, whose
``--check`` in the test suite keeps the block equal to the committed figures).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import platform
import random
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from websockets.asyncio.client import connect

MAX_SESSIONS = 256
MAX_STEPS = 100_000
MAX_SECONDS = 600.0
P50_TARGET_MS = 0.3
"""One session's step round trip, median."""
P99_TARGET_MS = 20.0
"""32 paced sessions' step round trip, 99th percentile."""
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "docs" / "server_load.json"
"""The committed figures the ``server-load`` block of server/README.md is rendered from."""


@dataclass
class Result:
    """One load phase's figures (latencies in milliseconds)."""

    sessions: int
    steps: int
    resets: int
    wall_s: float
    steps_per_s: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    errors: int = 0
    latencies_ms: list[float] = field(default_factory=list, repr=False)


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(q / 100 * (len(sorted_values) - 1))))
    return sorted_values[index]


async def run_session(
    ws_url: str, seed: int, steps: int, deadline: float, rate: float, latencies: list[float]
) -> tuple[int, int, int]:
    """One session: reset, then ``steps`` masked-random steps. Returns (steps, resets, errors)."""
    rng = random.Random(seed)
    done_steps = resets = errors = 0
    period = 1.0 / rate if rate > 0 else 0.0
    async with connect(ws_url, max_size=2**22, open_timeout=30) as ws:
        await ws.send(json.dumps({"type": "reset", "data": {"seed": seed}}))
        reply = json.loads(await ws.recv())
        resets += 1
        next_at = time.perf_counter()
        while done_steps < steps and time.monotonic() < deadline:
            if reply.get("type") != "observation":
                errors += 1
                break
            data = reply["data"]
            if data["done"]:
                await ws.send(json.dumps({"type": "reset", "data": {}}))
                reply = json.loads(await ws.recv())
                resets += 1
                continue
            mask = data["observation"]["action_mask"]
            action = rng.choice([a for a, ok in enumerate(mask) if ok])
            if period:
                next_at += period
                delay = next_at - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
            message = json.dumps({"type": "step", "data": {"action": action}})
            start = time.perf_counter()
            await ws.send(message)
            raw = await ws.recv()
            latencies.append((time.perf_counter() - start) * 1e3)
            reply = json.loads(raw)
            done_steps += 1
        await ws.send(json.dumps({"type": "close"}))
    return done_steps, resets, errors


async def load(ws_url: str, sessions: int, steps: int, max_seconds: float, rate: float, seed: int) -> Result:
    latencies: list[float] = []
    deadline = time.monotonic() + max_seconds
    start = time.perf_counter()
    outcomes = await asyncio.wait_for(
        asyncio.gather(
            *(run_session(ws_url, seed + i, steps, deadline, rate, latencies) for i in range(sessions)),
            return_exceptions=True,
        ),
        timeout=max_seconds + 30,
    )
    wall = time.perf_counter() - start
    total_steps = sum(o[0] for o in outcomes if isinstance(o, tuple))
    resets = sum(o[1] for o in outcomes if isinstance(o, tuple))
    errors = sum(o[2] for o in outcomes if isinstance(o, tuple)) + sum(
        1 for o in outcomes if isinstance(o, BaseException)
    )
    for o in outcomes:
        if isinstance(o, BaseException):
            print(f"  session failed: {type(o).__name__}: {o}", file=sys.stderr)
    ordered = sorted(latencies)
    return Result(
        sessions=sessions,
        steps=total_steps,
        resets=resets,
        wall_s=round(wall, 3),
        steps_per_s=round(total_steps / wall, 1) if wall else 0.0,
        p50_ms=round(percentile(ordered, 50), 3),
        p90_ms=round(percentile(ordered, 90), 3),
        p99_ms=round(percentile(ordered, 99), 3),
        max_ms=round(ordered[-1], 3) if ordered else float("nan"),
        errors=errors,
        latencies_ms=latencies,
    )


# ------------------------------------------------------------ background clients
def _gradio_event(http: Any, fn: int, data: list[Any], session_hash: str) -> dict[str, Any]:
    """One web-view event through Gradio's queue, as the browser sends it."""
    joined = http.post(
        "/web/gradio_api/queue/join",
        json={"data": data, "fn_index": fn, "session_hash": session_hash, "trigger_id": None},
    )
    joined.raise_for_status()
    event_id = joined.json()["event_id"]
    with http.stream("GET", "/web/gradio_api/queue/data", params={"session_hash": session_hash}) as events:
        for line in events.iter_lines():
            if line.startswith("data:"):
                message = json.loads(line[5:])
                if message.get("event_id") == event_id and message.get("msg") == "process_completed":
                    return message
    raise RuntimeError("web event never completed")


def web_planner_client(url: str, stop: Any, counts: Any) -> None:
    """A web-view tab whose agent is the planner: new day, the agent plays its shift, again."""
    import httpx

    with httpx.Client(base_url=url, timeout=120) as http:
        config = http.get("/web/config").json()
        ids = {c["id"]: c.get("props", {}).get("elem_id") for c in config["components"]}
        by_target = {ids.get(d["targets"][0][0]): d["id"] for d in config["dependencies"] if d.get("targets")}
        new_day, finish = by_target["new-day"], by_target["agent-finish"]
        session, seed = "bench-planner", 0
        while not stop.is_set():
            state = _gradio_event(http, new_day, [None, "normal_day", seed, "flat", "planner"], session)
            sid = state["output"]["data"][0]
            _gradio_event(http, finish, [sid], session)
            counts["web_days"] += 1
            seed += 1


def mcp_cycling_client(url: str, stop: Any, counts: Any, pause_s: float = 0.0) -> None:
    """A client opening a standard MCP session, starting a shift, and closing it, over and over
    (``pause_s`` between sessions: benchmarks/server_companions.py's paced case)."""
    import httpx

    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    init = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "b", "version": "0"},
        },
    }  # fmt: skip
    with httpx.Client(base_url=url, timeout=60) as http:
        while not stop.is_set():
            opened = http.post("/mcp", json=init, headers=headers)
            sid = opened.headers.get("mcp-session-id")
            if sid is None:
                counts["mcp_errors"] += 1
                time.sleep(0.1)
                continue
            session = headers | {"mcp-session-id": sid}
            http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
            call = {"name": "start_shift", "arguments": {"seed": counts["mcp_sessions"]}}
            http.post(
                "/mcp",
                json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call},
                headers=session,
            )
            http.delete("/mcp", headers=session)
            counts["mcp_sessions"] += 1
            if pause_s:
                time.sleep(pause_s)


def wait_under_way(counts: Any, web: bool, mcp: bool, limit_s: float = 180.0) -> None:
    """Until each companion has done its work once (a web day played, an MCP session cycled), and
    a second more: measuring starts beside companions at their pace, not their start-up (the
    web host's and the planner's processes start with the first day)."""
    deadline = time.monotonic() + limit_s
    while (web and counts["web_days"] < 1) or (mcp and counts["mcp_sessions"] < 1):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the companions did not get under way in {limit_s:g} s: {dict(counts)}")
        time.sleep(0.1)
    time.sleep(1.0)


class Background:
    """The issue's companions of the measured WebSocket clients, each in its own process."""

    def __init__(self, url: str) -> None:
        self._manager = multiprocessing.Manager()
        self.stop = self._manager.Event()
        self.counts = self._manager.dict(web_days=0, mcp_sessions=0, mcp_errors=0)
        self._procs = [
            multiprocessing.Process(target=client, args=(url, self.stop, self.counts), daemon=True)
            for client in (web_planner_client, mcp_cycling_client)
        ]

    def __enter__(self) -> Background:
        for proc in self._procs:
            proc.start()
        wait_under_way(self.counts, web=True, mcp=True)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for proc in self._procs:
            proc.join(timeout=60)
            if proc.is_alive():
                proc.terminate()
        self.final = dict(self.counts)
        self._manager.shutdown()


# ------------------------------------------------------------------ echo floor
def _echo_server(port: int, reply: str, ready: Any) -> None:
    """A WebSocket server that answers every message with ``reply`` (the client's floor)."""
    from websockets.asyncio.server import serve
    from websockets.exceptions import ConnectionClosed

    async def answer(ws: Any) -> None:
        with contextlib.suppress(ConnectionClosed):  # the client's goodbye ("close", then closing)
            async for _ in ws:
                await ws.send(reply)

    async def run() -> None:
        async with serve(answer, "127.0.0.1", port, compression=None, max_size=2**22):
            ready.set()
            await asyncio.Future()

    asyncio.run(run())


class EchoServer:
    """:func:`_echo_server` in a process of its own, on a free loopback port, for a ``with`` block."""

    def __init__(self, reply: str) -> None:
        self.port = free_loopback_port()
        self.url = f"ws://127.0.0.1:{self.port}/"
        context = multiprocessing.get_context("spawn")
        self._ready = context.Event()
        self._proc = context.Process(target=_echo_server, args=(self.port, reply, self._ready), daemon=True)

    def __enter__(self) -> EchoServer:
        self._proc.start()
        if not self._ready.wait(60):
            self._proc.terminate()
            raise RuntimeError("the echo server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self._proc.terminate()
        self._proc.join(timeout=10)


async def canned_reply(ws_url: str, seed: int) -> str:
    """One real step reply of the server (mid-episode), for the echo server to send back."""
    async with connect(ws_url, max_size=2**22, open_timeout=30) as ws:
        await ws.send(json.dumps({"type": "reset", "data": {"seed": seed}}))
        await ws.recv()
        reply = ""
        for _ in range(20):
            await ws.send(json.dumps({"type": "step", "data": {"action": 0}}))
            reply = str(await ws.recv())
        await ws.send(json.dumps({"type": "close"}))
    return reply


def in_process_rate(scenario: str, steps: int, seed: int) -> float:
    """Steps/s of the server's own environment object, no network (the reference)."""
    from server.environment import HospitalEnvironment

    env = HospitalEnvironment(scenario=scenario)
    rng = random.Random(seed)
    obs = env.reset(seed=seed)
    start = time.perf_counter()
    for _ in range(steps):
        if obs.done:
            obs = env.reset()
        obs = env.step(rng.choice([a for a, ok in enumerate(obs.action_mask) if ok]))
    return steps / (time.perf_counter() - start)


def cartpole_rate(steps: int, seed: int) -> float:
    """Steps/s of Gymnasium's CartPole-v1 in-process: the yardstick every figure is read against."""
    import gymnasium as gym

    env = gym.make("CartPole-v1")
    env.reset(seed=seed)
    env.action_space.seed(seed)
    start = time.perf_counter()
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    return steps / (time.perf_counter() - start)


def step_breakdown(scenario: str, seed: int, steps: int = 2000) -> dict[str, float]:
    """Microseconds per step of each server-side piece of a WebSocket step, in-process, in the
    order OpenEnv's session loop runs them: this server's message guard, OpenEnv's parse and
    action validation, the simulator's tick, the core's observation vector, this server's
    wire model, OpenEnv's serialisation of the reply."""
    from openenv.core.env_server.serialization import deserialize_action, serialize_observation
    from openenv.core.env_server.types import WSObservationResponse, WSStepMessage

    from server.environment import HospitalEnvironment
    from server.guards import check_json
    from server.models import HospitalAction

    env = HospitalEnvironment(scenario=scenario)
    env.reset(seed=seed)
    raw = json.dumps({"type": "step", "data": {"action": 0}})
    hospital = env._env.hospital
    pieces: dict[str, float] = dict.fromkeys(
        ("guard", "parse", "validate", "simulate", "state vector", "wire model", "serialise"), 0.0
    )
    clock = time.perf_counter
    for _ in range(steps):
        if hospital.done:
            env.reset(seed=seed)
            hospital = env._env.hospital
        t0 = clock()
        check_json(raw)  # the WebSocket guard's screening of a message (size and type aside)
        t1 = clock()
        message = WSStepMessage(**json.loads(raw))
        t2 = clock()
        action = deserialize_action(message.data, HospitalAction)
        t3 = clock()
        hospital.act_flat(action.action)
        result = hospital.tick()
        env._steps += 1
        t4 = clock()
        env._builder.vector()  # the core's observation vector (cached for _observation below)
        t4b = clock()
        obs = env._observation(float(result.reward), result.terminated, result.truncated, {"outcome": "noop"})
        t5 = clock()
        WSObservationResponse(data=serialize_observation(obs)).model_dump_json()
        t6 = clock()
        spans = ((t0, t1), (t1, t2), (t2, t3), (t3, t4), (t4, t4b), (t4b, t5), (t5, t6))
        for key, (a, b) in zip(pieces, spans):
            pieces[key] += (b - a) * 1e6 / steps
    return pieces


def server_rss_mb(proc: subprocess.Popen | None) -> float | None:
    """The server process's resident memory (Linux), or None when it is not ours to read."""
    if proc is None:
        return None
    try:
        with open(f"/proc/{proc.pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def server_idle(proc: subprocess.Popen | None, seconds: float = 3.0) -> dict[str, float] | None:
    """The server process's CPU share and wake-ups per second with no client (Linux; None when it
    is not ours to read): what it costs the box, and how often its event loop runs, doing nothing."""
    if proc is None:
        return None

    def read() -> tuple[float, int]:
        with open(f"/proc/{proc.pid}/stat") as fh:
            ticks = sum(int(v) for v in fh.read().rsplit(")", 1)[1].split()[11:13])
        with open(f"/proc/{proc.pid}/status") as fh:
            switches = sum(int(line.split()[1]) for line in fh if "ctxt_switches" in line)
        return ticks / os.sysconf("SC_CLK_TCK"), switches

    try:
        (cpu0, woke0), start = read(), time.monotonic()
        time.sleep(seconds)
        (cpu1, woke1), elapsed = read(), time.monotonic() - start
    except OSError:
        return None
    return {
        "cpu_percent": round(100 * (cpu1 - cpu0) / elapsed, 1),
        "wakeups_per_s": round((woke1 - woke0) / elapsed),
    }


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_healthy(url: str, proc: subprocess.Popen | None, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with status {proc.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"server at {url} not healthy after {timeout_s} s")


def start_server(port: int, scenario: str, max_sessions: int) -> subprocess.Popen:
    command = [sys.executable, "-m", "server.app", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--scenario", scenario, "--max-sessions", str(max_sessions)]
    # One load generator stands in for many clients: the per-client cap (16, half a pool) is off.
    command += ["--max-sessions-per-client", "0"]
    # ... and opens sessions (the MCP-cycling companion: ~100 a second) faster than the creation
    # rate limits allow one client: they are off too (benchmarks/server_attack.py measures them).
    command += ["--session-rate", "0", "--session-rate-per-client", "0"]
    command += ["--log-level", "warning", "--no-access-log", "--web"]
    return subprocess.Popen(command, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def stop_server(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def bounded(value: float, low: float, high: float, name: str) -> float:
    if not low <= value <= high:
        raise SystemExit(f"--{name} must be in {low:g}..{high:g}, got {value:g}")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=32, help=f"concurrent sessions (1..{MAX_SESSIONS})")
    parser.add_argument("--steps", type=int, default=300, help=f"steps per session (1..{MAX_STEPS})")
    parser.add_argument(
        "--rate", type=float, default=0.0, help="steps/s per session; 0 = closed loop (default)"
    )
    parser.add_argument(
        "--rate-many", type=float, default=20.0, help="steps/s per session of the many-session phases"
    )
    parser.add_argument(
        "--no-background", action="store_true", help="without the web planner and MCP-cycling clients"
    )
    parser.add_argument("--max-seconds", type=float, default=60.0, help="stop each phase after this long")
    parser.add_argument("--scenario", default="normal_day")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--url", help="use this running server (127.0.0.1 / localhost only)")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    parser.add_argument(
        "--write",
        action="store_true",
        help=f"write the figures to {RESULT.relative_to(ROOT)} and regenerate server/README.md's block",
    )
    args = parser.parse_args()
    bounded(args.sessions, 1, MAX_SESSIONS, "sessions")
    bounded(args.steps, 1, MAX_STEPS, "steps")
    bounded(args.max_seconds, 1, MAX_SECONDS, "max-seconds")
    bounded(args.rate, 0, 10_000, "rate")
    bounded(args.rate_many, 0, 10_000, "rate-many")

    proc = None
    if args.url:
        url = args.url.rstrip("/")
        if urlparse(url).hostname not in LOOPBACK:
            raise SystemExit(f"--url must be a loopback address (127.0.0.1 / localhost), got {url}")
    else:
        port = free_loopback_port()
        url = f"http://127.0.0.1:{port}"
        proc = start_server(port, args.scenario, args.sessions)
    ws_url = "ws://" + url.split("://", 1)[1] + "/ws"
    try:
        wait_healthy(url, proc, timeout_s=400)  # a loaded 2-core box: minutes
        in_process_rate(args.scenario, 200, args.seed)  # warm-up: the kernel's first use compiles it
        reference = in_process_rate(args.scenario, 2000, args.seed)  # after the server's start-up
        cartpole = cartpole_rate(20_000, args.seed)
        breakdown = step_breakdown(args.scenario, args.seed)
        asyncio.run(load(ws_url, 1, 20, 30, 0.0, args.seed))  # warm-up
        reply = asyncio.run(canned_reply(ws_url, args.seed))
        idle = server_idle(proc)
        background = contextlib.nullcontext() if args.no_background else Background(url)
        with background, EchoServer(reply) as echo:
            floor = asyncio.run(
                load(echo.url, 1, min(args.steps, 1000), args.max_seconds, args.rate, args.seed)
            )
            floor_many = asyncio.run(
                load(echo.url, args.sessions, args.steps, args.max_seconds, args.rate_many, args.seed)
            )
            single = asyncio.run(
                load(ws_url, 1, min(args.steps, 1000), args.max_seconds, args.rate, args.seed)
            )
            rss = [server_rss_mb(proc)]
            many = asyncio.run(
                load(ws_url, args.sessions, args.steps, args.max_seconds, args.rate_many, args.seed)
            )
            rss.append(server_rss_mb(proc))
            # The same load again: memory that grows between two equal rounds is a leak.
            again = asyncio.run(
                load(ws_url, args.sessions, args.steps, args.max_seconds, args.rate_many, args.seed)
            )
            rss.append(server_rss_mb(proc))
        companions = getattr(background, "final", None)
    finally:
        if proc is not None:
            stop_server(proc)

    pace = f"{args.rate:g} steps/s per session" if args.rate else "closed loop"
    pace_many = f"{args.rate_many:g} steps/s per session" if args.rate_many else "closed loop"
    cpus, load_1min = os.cpu_count(), os.getloadavg()[0]
    print(f"server_load: {url}, scenario {args.scenario}; 1 session {pace}, {args.sessions} {pace_many}")
    if companions is not None:
        print(
            f"beside: a web-view tab whose agent is the planner ({companions['web_days']} days played) and "
            f"a client cycling MCP sessions ({companions['mcp_sessions']} opened and closed, "
            f"{companions['mcp_errors']} refused)"
        )
    print(f"{cpus} CPUs shared by client and server; load average {load_1min:.1f} at the end")
    print(f"in-process HospitalEnvironment (reference): {reference:,.0f} steps/s ({1e3 / reference:.3f} ms)")
    print(f"in-process Gymnasium CartPole-v1 (yardstick): {cartpole:,.0f} steps/s")
    total = sum(breakdown.values())
    print(
        f"server-side cost of one WebSocket step, in-process: {total:.1f} us = "
        + ", ".join(f"{k} {v:.1f}" for k, v in breakdown.items())
    )
    columns = ("sessions", "steps", "steps/s", "p50 ms", "p90 ms", "p99 ms", "max ms", "errors")
    print(" ".join(f"{c:>8}" for c in columns))
    for r in (single, many, again):
        print(
            f"{r.sessions:8d} {r.steps:8d} {r.steps_per_s:8,.0f} {r.p50_ms:8.3f} {r.p90_ms:8.3f} "
            f"{r.p99_ms:8.3f} {r.max_ms:8.3f} {r.errors:8d}"
        )
    print(
        f"echo floor (the same client, 1 session, against a server that only echoes a canned reply): "
        f"p50 {floor.p50_ms:.3f} ms, p90 {floor.p90_ms:.3f} ms, p99 {floor.p99_ms:.3f} ms; "
        f"the server's share of the 1-session p50: {single.p50_ms - floor.p50_ms:.3f} ms"
    )
    print(
        f"echo floor, {floor_many.sessions} sessions ({pace_many}): p50 {floor_many.p50_ms:.3f} ms, "
        f"p90 {floor_many.p90_ms:.3f} ms, p99 {floor_many.p99_ms:.3f} ms (the client's own queueing)"
    )
    print(
        f"{many.sessions} sessions reach {many.steps_per_s / reference:.2f}x the in-process step rate, "
        f"{many.steps_per_s / cartpole:.3f}x CartPole's in-process rate; "
        f"1 session: {single.steps_per_s / cartpole:.3f}x CartPole"
    )
    verdicts = {
        "p50_1_session": single.p50_ms <= P50_TARGET_MS,
        f"p99_{many.sessions}_sessions": max(many.p99_ms, again.p99_ms) <= P99_TARGET_MS,
    }
    print(
        f"target: 1 session p50 <= {P50_TARGET_MS} ms: {single.p50_ms:.3f} ms, "
        f"{'met' if verdicts['p50_1_session'] else 'NOT met'}"
    )
    print(
        f"target: {many.sessions} sessions ({pace_many}) p99 <= {P99_TARGET_MS:g} ms: "
        f"{many.p99_ms:.2f} / {again.p99_ms:.2f} ms (two rounds), "
        f"{'met' if verdicts[f'p99_{many.sessions}_sessions'] else 'NOT met'}"
    )
    if rss[0] is not None:
        print(
            "server memory (RSS): "
            + f"{rss[0]:.1f} MB after 1 session, {rss[1]:.1f} MB after {many.sessions}, "
            + f"{rss[2]:.1f} MB after "
            + f"{again.sessions} again (growth between the equal rounds: {rss[2] - rss[1]:+.1f} MB)"
        )
    if idle is not None:
        print(
            f"server idle (no client, the web view mounted): {idle['cpu_percent']:.1f} % of a CPU, "
            f"{idle['wakeups_per_s']:,} wake-ups/s"
        )
    if args.json or args.write:
        argv = sys.argv[1:]
        figures = {
            "command": " ".join(["python -m benchmarks.server_load", *(a for a in argv if a != "--write")]),
            "machine": f"{cpus} CPUs, {platform.system()} {platform.machine()}, "
            f"Python {platform.python_version()}",
            "measured": time.strftime("%Y-%m-%d", time.gmtime()),
            "url": url,
            "scenario": args.scenario,
            "rate": args.rate,
            "rate_many": args.rate_many,
            "background": companions,
            "targets_ms": {"p50_1_session": P50_TARGET_MS, f"p99_{many.sessions}_sessions": P99_TARGET_MS},
            "verdicts": {k: "met" if v else "NOT met" for k, v in verdicts.items()},
            "cpus": cpus,
            "load_average_1min": round(load_1min, 2),
            "in_process_steps_per_s": round(reference, 1),
            "cartpole_steps_per_s": round(cartpole, 1),
            "server_step_us": {k: round(v, 2) for k, v in breakdown.items()},
            "server_rss_mb": [None if m is None else round(m, 1) for m in rss],
            "server_idle": idle,
            "phases": [
                {k: v for k, v in asdict(r).items() if k != "latencies_ms"} for r in (single, many, again)
            ],
            "echo_floor": {k: v for k, v in asdict(floor).items() if k != "latencies_ms"},
            "echo_floor_many": {k: v for k, v in asdict(floor_many).items() if k != "latencies_ms"},
        }
        for path in filter(None, (args.json, args.write and RESULT)):
            Path(path).write_text(json.dumps(figures, indent=2) + "\n")
        if args.write:
            subprocess.run([sys.executable, str(ROOT / "tools" / "readme.py")], check=True)
            print(f"wrote {RESULT.relative_to(ROOT)} and server/README.md's server-load block")
    if single.errors or many.errors or again.errors:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
