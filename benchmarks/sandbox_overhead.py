"""What the isolated grader's sandbox costs (SPEC §13): the same grade in-process and under
bubblewrap, in the same run, with the overhead per decision and per episode.

What is measured: ``grade(agent, episodes=N, seed=0)`` over the five built-in scenarios three
ways: in-process, ``isolate=True`` (bubblewrap, the default isolation) and
``isolate=True, isolation="process"`` (the same child without namespaces). Wall time includes
the policy process's start (bwrap, Python, imports, the numba cache copy); the start is also
timed on its own (``IsolatedPolicy(agent)`` then ``close()``), in wall and CPU seconds. CPU is
the grader's (``process_time``) and the policy process's (read in ``/proc`` with everything it
started: the sandbox's processes are visible from the grader's side). A decision is a graded
tick on the flat track. The reports must be equal (printed): the sandbox changes costs, not
scores. The steady state (the process started) is measured per decision both ways the isolated
grader asks: every episode of a scenario in lockstep (one request frame a step: the grader's
way) and one decision a frame (the web view's agents).

Target (printed as met or not, never asserted): the heuristic's isolated grade within 3x the
in-process wall time.

This is a script, not a test. Run from the repository root, on a quiet machine::

    python benchmarks/sandbox_overhead.py [--episodes 10] [--agent heuristic]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grading import sandbox
from grading.common import episode_seed
from grading.grader import SealedPolicy, flat_episode, grade, run_flat_episode
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


def tree_cpu(root: int) -> float:
    """CPU seconds used so far by process ``root`` and everything under it (``/proc``): the
    policy's process, seen from the grader's side of the sandbox."""
    parent, cpu = {}, {}
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(name)] = int(fields[1])
        cpu[int(name)] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid, used in cpu.items():
        up = pid
        while up not in (0, 1, root) and up in parent:
            up = parent[up]
        total += used if up == root else 0.0
    return total


def timed(agent: str, episodes: int, **options: object) -> tuple[dict, float, float]:
    """(report, wall, grader CPU) of one grade."""
    wall, cpu = time.perf_counter(), time.process_time()
    report = grade(agent, episodes=episodes, seed=0, **options)
    return report, time.perf_counter() - wall, time.process_time() - cpu


def steady(agent: str, isolation: str, lockstep: bool, seeds: list[int]) -> tuple[float, float, float]:
    """Per decision once the policy's process runs: (wall, grader CPU, policy process CPU)
    seconds over ``seeds`` surge episodes, in lockstep or one at a time."""
    scenario = resolve_scenario("surge")
    policy = IsolatedPolicy(agent, isolation=isolation)
    try:
        run_flat_episode(policy, scenario, seeds[0] - 1)
        assert policy._process is not None
        root = policy._process.pid
        child, wall, cpu = tree_cpu(root), time.perf_counter(), time.process_time()
        if lockstep:
            results = policy.play_many([flat_episode(scenario, seed) for seed in seeds])
        else:
            results = [run_flat_episode(policy, scenario, seed) for seed in seeds]
        wall, cpu, child = time.perf_counter() - wall, time.process_time() - cpu, tree_cpu(root) - child
    finally:
        policy.close()
    n = sum(r.counts["ticks"] for r in results)
    return wall / n, cpu / n, child / n


def start_cost(agent: str, isolation: str) -> tuple[float, float]:
    """(wall, policy process CPU) seconds of starting the policy's process and loading the policy."""
    wall = time.perf_counter()
    policy = IsolatedPolicy(agent, isolation=isolation)
    wall = time.perf_counter() - wall
    assert policy._process is not None
    cpu = tree_cpu(policy._process.pid)
    policy.close()
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--agent", default="heuristic")
    args = parser.parse_args()

    load_before = os.getloadavg()[0]
    grade(args.agent, episodes=1, seed=0, scenarios=["surge"])  # compile and load outside the timings
    starts = {isolation: start_cost(args.agent, isolation) for isolation in ("sandbox", "process")}
    starts = {isolation: start_cost(args.agent, isolation) for isolation in ("sandbox", "process")}  # warm

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
    for isolation, (wall, cpu) in starts.items():
        print(f"policy process start ({isolation}, load included): {wall:.2f} s wall, {cpu:.2f} s CPU")
    cached, sandbox.bytecode_cache = sandbox.bytecode_cache, lambda: None
    try:  # what the trusted bytecode cache saves: every import compiled from source instead
        wall, cpu = start_cost(args.agent, "sandbox")
    finally:
        sandbox.bytecode_cache = cached
    print(f"policy process start (sandbox, without the bytecode cache): {wall:.2f} s wall, {cpu:.2f} s CPU")
    print(
        f"reference: a pipe round trip between two processes {1e6 * pipe_round_trip():.1f} us; "
        f"python -c pass {1e3 * python_start():.0f} ms wall"
    )
    same = {k: v for k, v in there.items() if k not in ("isolated", "isolation")} == {
        k: v for k, v in here.items() if k not in ("isolated", "isolation")
    }
    print(f"isolated report equal to in-process: {same}")
    seeds = [episode_seed(1, "surge", i) for i in range(10)]
    print("steady state (the process started; 10 surge episodes), per decision:")
    sealed, scenario = SealedPolicy(as_policy(load(args.agent), "flat")), resolve_scenario("surge")
    wall, cpu, n = time.perf_counter(), time.process_time(), 0
    for seed in seeds:
        n += run_flat_episode(sealed, scenario, seed).counts["ticks"]
    base, base_cpu = (time.perf_counter() - wall) / n, (time.process_time() - cpu) / n
    print(
        f"  in-process                       wall {1e6 * base:8.1f} us   grader CPU {1e6 * base_cpu:7.1f} us"
    )
    for isolation in ("sandbox", "process"):
        for lockstep in (True, False):
            w, c, child = steady(args.agent, isolation, lockstep, seeds)
            label = f"isolated ({isolation}, {'lockstep' if lockstep else 'one at a time'})"
            print(
                f"  {label:<33}wall {1e6 * w:8.1f} us   grader CPU {1e6 * c:7.1f} us   "
                f"policy CPU {1e6 * child:7.1f} us   ({w / base:.1f}x)"
            )
    ratio = there_wall / here_wall
    verdict = "met" if ratio <= TARGET_RATIO else "NOT met"
    print(f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} CPUs")
    print(f"target: isolated within {TARGET_RATIO:g}x in-process wall time: {ratio:.2f}x ({verdict})")
    bound = starts["sandbox"][0] / here_wall
    print(f"  (the sandbox's start alone is {bound:.1f}x this grade's in-process wall time)")


def python_start(n: int = 5) -> float:
    """Seconds for ``python -c pass`` (no site): the floor of any process start here."""
    import subprocess

    wall = time.perf_counter()
    for _ in range(n):
        subprocess.run([sys.executable, "-S", "-c", "pass"], check=True)
    return (time.perf_counter() - wall) / n


if __name__ == "__main__":
    main()
