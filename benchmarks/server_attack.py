"""A well-behaved client beside the attack mix of issue 43 (loopback only, bounded in time).

    python -m benchmarks.server_attack --seconds 30 --steps 1000

Starts ``python -m server.app --web`` with its default limits (creation rates, eviction, header
deadline on) on a free loopback port and, for ``--seconds``, runs the attacks the issue's review
tried, each from its own thread, every one bounded:

- **rotate**: HTTP episodes (``POST /reset``) opened as fast as answered from 16 loopback
  addresses (127.0.N.2), and OpenEnv MCP sessions (``openenv/session/create``) likewise;
- **slowloris**: 200 connections each sending an unfinished request head, re-opened when closed;
- **bad input**: lone surrogates on ``/step``, ``/reset``, ``/mcp``; unknown Gradio API names and
  ``fn_index`` 9999 / -1;
- **planner tabs** (``--env radiotherapy``): ``--rt-tabs`` web tabs (3 by default) each planning a
  patient with the planner and finishing it, over and over, through the page's Gradio API (the
  issue measured a ``/ws`` client's step p99 4.9 -> 124 ms beside three such tabs).

Meanwhile the honest client (its own address) measures how long a WebSocket session takes to
get (connect + reset, ``--sessions`` times) and the step latency of one closed-loop ``/ws``
session (``--steps``). Gymnasium's CartPole in-process rate is measured in the same run (read
every figure against it), and the 5xx answers the attacks drew are counted. Targets (issue 43):
a session within 1 s, WebSocket step p99 <= 20 ms, no 5xx.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
from collections import Counter

import httpx
from websockets.asyncio.client import connect

from benchmarks.server_load import cartpole_rate, free_loopback_port, percentile, stop_server, wait_healthy

HONEST = "127.0.0.1"


def _http(address: str) -> httpx.Client:
    return httpx.Client(transport=httpx.HTTPTransport(local_address=address), timeout=10)


def rotate(url: str, stop: threading.Event, codes: Counter[int]) -> None:
    """HTTP episodes and OpenEnv MCP sessions from 16 addresses, as fast as answered."""
    clients = [_http(f"127.0.{n}.2") for n in range(1, 17)]
    create = {"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create", "params": {}}
    try:
        while not stop.is_set():
            for client in clients:
                if stop.is_set():
                    break
                client.cookies.clear()
                for method, path, body in (("POST", "/reset", {"seed": 1}), ("POST", "/mcp", create)):
                    try:
                        codes[client.request(method, url + path, json=body).status_code] += 1
                    except httpx.HTTPError:
                        codes[0] += 1
    finally:
        for client in clients:
            client.close()


def slowloris(port: int, stop: threading.Event, held: list[int], connections: int = 200) -> None:
    """``connections`` unfinished heads, each re-opened once the server closes it."""
    head = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
    socks: list[socket.socket] = []
    try:
        while not stop.is_set():
            alive = []
            for sock in socks:
                try:
                    sock.setblocking(False)
                    if sock.recv(1) == b"":
                        sock.close()
                        continue
                except BlockingIOError:
                    pass
                except OSError:
                    sock.close()
                    continue
                alive.append(sock)
            socks = alive
            while len(socks) < connections and not stop.is_set():
                try:
                    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
                    sock.sendall(head)
                    socks.append(sock)
                except OSError:
                    break
            held.append(len(socks))
            stop.wait(1.0)
    finally:
        for sock in socks:
            sock.close()


def bad_input(url: str, stop: threading.Event, codes: Counter[int]) -> None:
    """Lone surrogates and Gradio's unknown names and indices, over and over."""
    lone = '"\\ud800"'
    requests = [
        ("/reset", '{"seed": 1, "episode_id": LONE}'.replace("LONE", lone)),
        ("/step", '{"action": {"action": 0}, "session_id": LONE}'.replace("LONE", lone)),
        ("/mcp", '{"jsonrpc": "2.0", "id": LONE, "method": "tools/list"}'.replace("LONE", lone)),
        ("/web/gradio_api/call/nope", '{"data": []}'),
        ("/web/gradio_api/queue/join", '{"fn_index": 9999, "data": [], "session_hash": "x"}'),
        ("/web/gradio_api/queue/join", '{"fn_index": -1, "data": [], "session_hash": "x"}'),
    ]
    with _http("127.0.99.2") as client:
        while not stop.is_set():
            for path, body in requests:
                try:
                    response = client.post(
                        url + path, content=body, headers={"content-type": "application/json"}
                    )
                    codes[response.status_code] += 1
                except httpx.HTTPError:
                    codes[0] += 1
            stop.wait(0.05)


def _gradio_call(
    client: httpx.Client, url: str, fn: int, data: list[object], session_hash: str
) -> dict[str, object]:
    """One event of the page through Gradio's queue: join, then read the tab's stream to its end
    (the event's ``process_completed`` message; empty if the stream ended without one)."""
    body = {
        "data": data,
        "fn_index": fn,
        "session_hash": session_hash,
        "event_data": None,
        "trigger_id": None,
    }
    event = client.post(url + "/web/gradio_api/queue/join", json=body, timeout=120).json().get("event_id")
    params = {"session_hash": session_hash}
    with client.stream("GET", url + "/web/gradio_api/queue/data", params=params, timeout=300) as stream:
        for line in stream.iter_lines():
            if line.startswith("data:"):
                message = json.loads(line[5:])
                if message.get("event_id") == event and message.get("msg") == "process_completed":
                    return message
    return {}


def planner_tabs(url: str, stop: threading.Event, tabs: int, done: Counter[str]) -> None:
    """``tabs`` radiotherapy tabs, each planning a patient with the planner and finishing the
    agent's plan, over and over (one thread per tab, its own session hash)."""
    config = httpx.get(url + "/web/config", timeout=60).json()
    elem = {c["id"]: c.get("props", {}).get("elem_id") for c in config["components"]}
    deps = config["dependencies"]
    plan = next(d["id"] for d in deps if d["targets"] and elem.get(d["targets"][0][0]) == "new-plan")
    finish = next(d["id"] for d in deps if d["targets"] and elem.get(d["targets"][0][0]) == "agent-finish")

    def tab(n: int) -> None:
        session_hash = f"plannertab{n}"
        with _http(f"127.0.{200 + n}.2") as client:
            seed, sid = 0, None
            while not stop.is_set():
                try:  # the tab's session id travels as the page's state does
                    planned = _gradio_call(
                        client, url, plan, [sid, "prostate", seed, "planner"], session_hash
                    )
                    sid = (planned.get("output") or {}).get("data", [None])[0]  # type: ignore[union-attr]
                    finished = _gradio_call(client, url, finish, [sid], session_hash)
                    done["plans" if finished.get("success") else "failed"] += 1
                except (httpx.HTTPError, ValueError):
                    done["errors"] += 1
                seed += 1

    threads = [threading.Thread(target=tab, args=(n,), daemon=True) for n in range(tabs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


async def honest(url: str, sessions: int, steps: int) -> tuple[list[float], list[float]]:
    """(seconds to get each session, ms per step of one closed-loop session)."""
    ws_url = url.replace("http", "ws") + "/ws"
    waits: list[float] = []
    for i in range(sessions):
        start = time.perf_counter()
        try:
            async with connect(ws_url, local_addr=(HONEST, 0), compression=None, open_timeout=60) as ws:
                await ws.send(json.dumps({"type": "reset", "data": {"seed": i}}))
                reply = json.loads(await ws.recv())
                ok = reply.get("type") == "observation"
                waits.append(time.perf_counter() - start if ok else float("inf"))
        except (TimeoutError, OSError):  # no session within 60 s: a miss, counted as such
            waits.append(float("inf"))
        await asyncio.sleep(0.2)
    latencies: list[float] = []
    rng = random.Random(0)
    async with connect(ws_url, local_addr=(HONEST, 0), compression=None, open_timeout=60) as ws:
        await ws.send(json.dumps({"type": "reset", "data": {"seed": 0}}))
        obs = json.loads(await ws.recv())["data"]["observation"]
        for _ in range(steps):
            mask = obs["action_mask"]
            action = rng.choice([a for a, ok in enumerate(mask) if ok])
            start = time.perf_counter()
            await ws.send(json.dumps({"type": "step", "data": {"action": action}}))
            data = json.loads(await ws.recv())["data"]
            latencies.append((time.perf_counter() - start) * 1000)
            obs = data["observation"]
            if data.get("done"):
                await ws.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
                obs = json.loads(await ws.recv())["data"]["observation"]
    return waits, latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--no-attack", action="store_true", help="the honest client alone (the reference)")
    parser.add_argument("--env", choices=("ed", "radiotherapy"), default="ed", help="the env served")
    parser.add_argument(
        "--rt-tabs", type=int, default=3, help="planner tabs in the mix (radiotherapy only; 0: none)"
    )
    args = parser.parse_args()
    if not 5 <= args.seconds <= 300 or not 10 <= args.steps <= 20000 or not 1 <= args.sessions <= 100:
        parser.error("--seconds in 5..300, --steps in 10..20000, --sessions in 1..100")
    port = free_loopback_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "server.app", "--host", "127.0.0.1", "--port", str(port), "--web"]
    command += ["--log-level", "error", "--no-access-log", "--env", args.env]
    proc = subprocess.Popen(command, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    stop = threading.Event()
    codes: Counter[int] = Counter()
    held: list[int] = []
    plans: Counter[str] = Counter()
    threads: list[threading.Thread] = []
    try:
        wait_healthy(url, proc, timeout_s=400)  # a loaded 2-core box: minutes
        if not args.no_attack:
            threads = [
                threading.Thread(target=rotate, args=(url, stop, codes), daemon=True),
                threading.Thread(target=slowloris, args=(port, stop, held), daemon=True),
                threading.Thread(target=bad_input, args=(url, stop, codes), daemon=True),
            ]
            if args.env == "radiotherapy" and args.rt_tabs:
                threads.append(
                    threading.Thread(target=planner_tabs, args=(url, stop, args.rt_tabs, plans), daemon=True)
                )
            for thread in threads:
                thread.start()
            time.sleep(3.0)  # the attacks under way
        started = time.monotonic()
        waits, latencies = asyncio.run(honest(url, args.sessions, args.steps))
        remaining = args.seconds - (time.monotonic() - started)
        if remaining > 0 and not args.no_attack:
            time.sleep(remaining)
    finally:
        stop.set()
        for thread in threads:
            thread.join(15)
        stop_server(proc)
    cartpole = cartpole_rate(20000, 0)
    ordered = sorted(latencies)
    errors_5xx = sum(n for code, n in codes.items() if code >= 500)
    mode = "off" if args.no_attack else "on"
    tabs = f", {args.rt_tabs} planner tabs" if args.env == "radiotherapy" and not args.no_attack else ""
    print(f"attack mix: {mode}{tabs}; server: python -m server.app --web --env {args.env} (default limits)")
    median = sorted(waits)[len(waits) // 2]
    print(
        f"session wait (connect + reset, {len(waits)} sessions): max {max(waits):.3f} s, "
        f"median {median:.3f} s (target <= 1 s)"
    )
    print(
        f"WS step latency ({len(ordered)} steps): p50 {percentile(ordered, 50):.2f} ms, p90 "
        f"{percentile(ordered, 90):.2f} ms, p99 {percentile(ordered, 99):.2f} ms (target p99 <= 20 ms)"
    )
    print(f"attack answers by status: {dict(sorted(codes.items()))}; 5xx: {errors_5xx}")
    if held:
        print(f"slowloris connections open at once: max {max(held)}, last {held[-1]}")
    if plans:
        print(
            f"planner tabs: {plans['plans']} plans finished, {plans['failed']} events failed, "
            f"{plans['errors']} HTTP errors"
        )
    print(f"Gymnasium CartPole in-process, same run: {cartpole:,.0f} steps/s")


if __name__ == "__main__":
    main()
