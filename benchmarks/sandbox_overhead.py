"""What the isolated grader's sandbox costs (SPEC §13): the same grade in-process and under
bubblewrap, in the same run, with the overhead per decision and per episode.

What is measured: ``grade(agent, episodes=N, seed=0)`` over the five built-in scenarios three
ways: in-process, ``isolate=True`` (bubblewrap, the default isolation) and
``isolate=True, isolation="process"`` (the same child without namespaces). Wall time includes
the policy process's start (bwrap, Python, imports, the numba cache copy); the start is also
timed on its own (``IsolatedPolicy(agent)`` then ``close()``). A decision is a graded tick on the
flat track. The two reports must be equal (printed): the sandbox changes costs, not scores.

Target (printed as met or not, never asserted): the heuristic's isolated grade within 3x the
in-process wall time.

This is a script, not a test. Run from the repository root::

    python benchmarks/sandbox_overhead.py [--episodes 10] [--agent heuristic]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grading.grader import SealedPolicy, grade, run_flat_episode
from grading.isolated import IsolatedPolicy
from hospital_marl.core.scenarios import resolve_scenario
from policies import as_policy, load

TARGET_RATIO = 3.0


def pipe_round_trip(n: int = 2000) -> float:
    """Seconds for one byte to go to another process and back over pipes (the floor of a
    decision's cost across a process boundary on this machine, now)."""
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    pid = os.fork()
    if pid == 0:
        for _ in range(n):
            os.read(r1, 1)
            os.write(w2, b"x")
        os._exit(0)
    start = time.perf_counter()
    for _ in range(n):
        os.write(w1, b"x")
        os.read(r2, 1)
    elapsed = time.perf_counter() - start
    os.waitpid(pid, 0)
    for fd in (r1, w1, r2, w2):
        os.close(fd)
    return elapsed / n


def timed(agent: str, episodes: int, **options: object) -> tuple[dict, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    report = grade(agent, episodes=episodes, seed=0, **options)
    return report, time.perf_counter() - wall, time.process_time() - cpu


def steady(agent: str, isolation: str, seeds: range) -> tuple[float, float, float]:
    """Per decision once the policy's process runs: (wall, grader CPU, child CPU) seconds; the
    child's CPU is read from /proc (None-like 0.0 under the sandbox, whose child is not ours)."""
    scenario = resolve_scenario("surge")
    policy = IsolatedPolicy(agent, isolation=isolation)
    try:
        run_flat_episode(policy, scenario, seeds[0] - 1)
        pid = policy._process.pid if isolation == "process" else None
        child, wall, cpu, n = _cpu(pid), time.perf_counter(), time.process_time(), 0
        for seed in seeds:
            n += run_flat_episode(policy, scenario, seed).counts["ticks"]
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        return wall / n, cpu / n, (_cpu(pid) - child) / n
    finally:
        policy.close()


def _cpu(pid: int | None) -> float:
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--agent", default="heuristic")
    args = parser.parse_args()

    grade(args.agent, episodes=1, seed=0, scenarios=["surge"])  # compile and load outside the timings
    starts = []
    for isolation in ("sandbox", "process"):
        wall = time.perf_counter()
        IsolatedPolicy(args.agent, isolation=isolation).close()
        starts.append(time.perf_counter() - wall)

    here, here_wall, here_cpu = timed(args.agent, args.episodes)
    there, there_wall, there_cpu = timed(args.agent, args.episodes, isolate=True)
    _, plain_wall, plain_cpu = timed(args.agent, args.episodes, isolate=True, isolation="process")
    decisions = sum(s["counts"]["ticks"] for s in here["scenarios"].values())
    episodes = args.episodes * len(here["scenarios"])

    print(f"agent {args.agent}: {episodes} episodes, {decisions} decisions (flat track)")
    print(
        f"{'mode':<22}{'wall s':>9}{'grader CPU s':>14}{'x in-process':>14}"
        f"{'us/decision':>13}{'ms/episode':>12}"
    )
    for label, wall, cpu in (
        ("in-process", here_wall, here_cpu),
        ("isolated (sandbox)", there_wall, there_cpu),
        ("isolated (process)", plain_wall, plain_cpu),
    ):
        extra = wall - here_wall
        print(
            f"{label:<22}{wall:>9.2f}{cpu:>14.2f}{wall / here_wall:>14.2f}"
            f"{1e6 * extra / decisions:>13.1f}{1e3 * extra / episodes:>12.1f}"
        )
    print(f"policy process start (load included): sandbox {starts[0]:.2f} s, process {starts[1]:.2f} s")
    print(
        f"reference: a pipe round trip between two processes {1e6 * pipe_round_trip():.1f} us; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    same = {k: v for k, v in there.items() if k not in ("isolated", "isolation")} == {
        k: v for k, v in here.items() if k not in ("isolated", "isolation")
    }
    print(f"isolated report equal to in-process: {same}")
    seeds = range(2, 12)
    print("steady state (the process started; 10 surge episodes), per decision:")
    sealed, scenario = SealedPolicy(as_policy(load(args.agent), "flat")), resolve_scenario("surge")
    wall, cpu, n = time.perf_counter(), time.process_time(), 0
    for seed in seeds:
        n += run_flat_episode(sealed, scenario, seed).counts["ticks"]
    base, base_cpu = (time.perf_counter() - wall) / n, (time.process_time() - cpu) / n
    print(f"  in-process          wall {1e6 * base:8.1f} us   grader CPU {1e6 * base_cpu:7.1f} us")
    for isolation in ("sandbox", "process"):
        w, c, child = steady(args.agent, isolation, seeds)
        extra = f"   policy process CPU {1e6 * child:7.1f} us" if isolation == "process" else ""
        print(
            f"  isolated ({isolation:<8}) wall {1e6 * w:8.1f} us   grader CPU {1e6 * c:7.1f} us{extra}"
            f"   ({w / base:.1f}x)"
        )
    ratio = there_wall / here_wall
    verdict = "met" if ratio <= TARGET_RATIO else "NOT met"
    print(f"target: isolated within {TARGET_RATIO:g}x in-process wall time: {ratio:.2f}x ({verdict})")


if __name__ == "__main__":
    main()
