"""Which companion costs one WebSocket session's median step, and why (issue 24's p50 target).

``benchmarks/server_load.py`` measures one ``/ws`` session beside both of the issue's companions (a
web-view tab whose agent is the planner, a client cycling standard MCP sessions). This script takes
them apart, each case on a fresh server, the same client (``server_load.run_session``, 3000
closed-loop steps, median of each run):

- ``none``: no companion;
- ``web``: the planner tab alone; ``mcp``: the MCP-cycling client alone; ``web,mcp``: both;
- ``mcp-other`` / ``web-other``: the MCP-cycling client / the planner tab served by *another*
  server process (the same CPU load, none of its traffic through the measured server);
- ``spin``: a process spinning on a whole CPU instead of any companion;
- ``mcp-paced:S``: the MCP client pausing ``S`` seconds between sessions.

Run from the repository root, with nothing else busy on the machine::

    python -m benchmarks.server_companions [--runs 3] [--cases none web mcp mcp-other spin mcp-paced:0.05]

Prints one line per case: the medians of its runs and what the companions did meanwhile.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import subprocess
import sys
import time

from benchmarks import server_load as sl

STEPS = 3000
CASES = ("none", "web", "mcp", "web,mcp", "mcp-other", "web-other", "spin", "mcp-paced:0.05")


def medians(port: int, runs: int) -> list[float]:
    out = []
    for r in range(runs):
        latencies: list[float] = []
        ws = f"ws://127.0.0.1:{port}/ws"
        asyncio.run(sl.run_session(ws, r, STEPS, time.monotonic() + 120, 0.0, latencies))
        latencies.sort()
        out.append(sl.percentile(latencies, 50))
    return out


def run_case(case: str, runs: int) -> str:
    port = sl.free_loopback_port()
    server = sl.start_server(port, "normal_day", 64)
    url = f"http://127.0.0.1:{port}"
    others: list[subprocess.Popen] = []  # servers of the mcp-other case
    spinners: list[subprocess.Popen] = []
    manager = multiprocessing.Manager()
    stop, counts = manager.Event(), manager.dict(web_days=0, mcp_sessions=0, mcp_errors=0)
    try:
        sl.wait_healthy(url, server)
        procs: list[multiprocessing.Process] = []
        for part in case.split(","):
            if part == "web":
                procs.append(multiprocessing.Process(target=sl.web_planner_client, args=(url, stop, counts)))
            elif part == "mcp":
                procs.append(multiprocessing.Process(target=sl.mcp_cycling_client, args=(url, stop, counts)))
            elif part in ("mcp-other", "web-other"):
                other_port = sl.free_loopback_port()
                other = sl.start_server(other_port, "normal_day", 64)
                others.append(other)
                other_url = f"http://127.0.0.1:{other_port}"
                sl.wait_healthy(other_url, other)
                client = sl.mcp_cycling_client if part == "mcp-other" else sl.web_planner_client
                procs.append(multiprocessing.Process(target=client, args=(other_url, stop, counts)))
            elif part.startswith("mcp-paced:"):
                pause = float(part.split(":", 1)[1])
                procs.append(
                    multiprocessing.Process(target=sl.mcp_cycling_client, args=(url, stop, counts, pause))
                )
            elif part == "spin":
                spinners.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
            elif part != "none":
                raise SystemExit(f"unknown case {part!r}; cases: {', '.join(CASES)}")
        for proc in procs:
            proc.daemon = True
            proc.start()
        parts = case.split(",")
        sl.wait_under_way(  # the companions at their pace before the measured session
            counts,
            web=any(p in ("web", "web-other") for p in parts),
            mcp=any(p.startswith("mcp") for p in parts),
        )
        started, before, days_before = time.monotonic(), counts["mcp_sessions"], counts["web_days"]
        result = medians(port, runs)
        elapsed = time.monotonic() - started
        rate = (counts["mcp_sessions"] - before) / elapsed
        day_rate = (counts["web_days"] - days_before) / elapsed
        stop.set()
        for proc in procs:
            proc.join(30)
        cells = " ".join(f"{m:.3f}" for m in result)
        return f"{case:16s} p50 {cells} ms   (web days {day_rate:.1f}/s, MCP sessions {rate:.0f}/s)"
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
        for other in others:
            sl.stop_server(other)
        sl.stop_server(server)
        manager.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3, help="measured sessions per case (default 3)")
    parser.add_argument("--cases", nargs="+", default=list(CASES), help=f"default: {' '.join(CASES)}")
    args = parser.parse_args()
    if not 1 <= args.runs <= 20:
        raise SystemExit("--runs must be in 1..20")
    print(f"one /ws session, {STEPS} closed-loop steps a run, median per run (target {sl.P50_TARGET_MS} ms)")
    for case in args.cases:
        print(run_case(case, args.runs), flush=True)


if __name__ == "__main__":
    main()
