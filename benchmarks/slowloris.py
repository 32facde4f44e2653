"""Slow request heads against the server (issue 43): how many are still held, and what an
honest client waits meanwhile. Loopback only, bounded in connections and time.

    python -m benchmarks.slowloris --connections 400 --header-timeout 10

Starts ``python -m server.app`` on a free loopback port, opens ``--connections`` sockets that
each send an unfinished request head and then one more byte every ``--dribble`` seconds (what
a slowloris client does: each byte would reset an idle timer), and reports: how many the server
had closed at ``--header-timeout`` + 2 s, and the latency of an honest ``GET /health`` before and
during the attack. Before the header deadline (uvicorn's protocols never time out a head) all
400 were still held after 70 s.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

from benchmarks.server_load import free_loopback_port, stop_server, wait_healthy

HEAD = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "


def honest_latencies_ms(url: str, n: int) -> list[float]:
    """``n`` sequential ``GET /health`` round trips on fresh connections, in ms (inf: failed)."""
    out = []
    for _ in range(n):
        start = time.perf_counter()
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=10) as response:
                response.read()
            out.append((time.perf_counter() - start) * 1000)
        except OSError:
            out.append(float("inf"))
    return out


def closed(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return sock.recv(1024) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=400)
    parser.add_argument("--header-timeout", type=float, default=10.0)
    parser.add_argument("--dribble", type=float, default=2.0)
    args = parser.parse_args()
    if not 1 <= args.connections <= 900 or not 0 < args.header_timeout <= 60:
        parser.error("--connections in 1..900, --header-timeout in (0, 60]")
    port = free_loopback_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "server.app", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--log-level", "warning", "--no-access-log"]
    env = {**os.environ, "HOSPITAL_HEADER_TIMEOUT": str(args.header_timeout)}
    proc = subprocess.Popen(command, env=env)
    socks: list[socket.socket] = []
    try:
        wait_healthy(url, proc)
        before = honest_latencies_ms(url, 20)
        started = time.monotonic()
        for _ in range(args.connections):
            sock = socket.create_connection(("127.0.0.1", port))
            sock.sendall(HEAD)
            socks.append(sock)
        during = honest_latencies_ms(url, 20)
        end = started + args.header_timeout + 2.0
        while time.monotonic() < end:
            time.sleep(min(args.dribble, max(0.0, end - time.monotonic())))
            for sock in socks:
                if not closed(sock):
                    with contextlib.suppress(OSError):
                        sock.send(b"a")
        held = sum(not closed(sock) for sock in socks)
        print(f"server: python -m server.app, HOSPITAL_HEADER_TIMEOUT={args.header_timeout:g}")
        print(
            f"{args.connections} connections each sending an unfinished head, one byte every "
            f"{args.dribble:g} s: still held after {args.header_timeout + 2:g} s: {held}"
        )
        for name, values in (("before the attack", before), ("during the attack", during)):
            ok = [v for v in values if v != float("inf")]
            print(
                f"honest GET /health {name}: {len(ok)}/{len(values)} answered, median "
                f"{statistics.median(ok):.1f} ms, max {max(ok):.1f} ms"
                if ok
                else f"honest GET /health {name}: none answered"
            )
    finally:
        for sock in socks:
            sock.close()
        stop_server(proc)


if __name__ == "__main__":
    main()
