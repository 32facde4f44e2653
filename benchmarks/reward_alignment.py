"""Does the env's dense team reward rank team policies as the graded score does?

A diagnostic for docs/learning-at-scale.md's question "why does MAPPO from scratch stop below
``team_heuristic``?". If the learners' training signal (the env's team reward, SPEC §4) ranked a
worse-scoring policy higher, the learners would be optimising the wrong thing; if it ranks them as
the score does, a learner that stops below the heuristic has failed to optimise its own objective.
Each policy plays the same validation days (grader seed 1000, ``--episodes`` per scenario) on the
team track exactly as the grader plays it (sealed, AEC env); per policy the table gives the mean
undiscounted team return of a day, the mean discounted return from the day's start (γ = 0.97, the
learners' discount) and the mean graded score.

    python benchmarks/reward_alignment.py --episodes 8 --write \\
        team_heuristic policies/checkpoints/marl/fast/mappo_s1 mappo_dagger team_planner
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grading.common import episode_seed, policy_seed  # noqa: E402
from grading.grader import _result, sealed  # noqa: E402
from grading.tables import write_marked  # noqa: E402
from hospital_marl.core.hospital import Seal  # noqa: E402
from hospital_marl.core.scenarios import BUILTIN_SCENARIOS  # noqa: E402
from hospital_marl.envs.aec import HospitalAECEnv  # noqa: E402

VALIDATION_SEED = 1000
GAMMA = 0.97
PAGE = ROOT / "docs" / "learning-at-scale.md"
START, END = "<!-- BEGIN reward-alignment -->", "<!-- END reward-alignment -->"


def play(policy: Any, scenario: str, seed: int) -> tuple[float, float, float]:
    """(undiscounted team return, discounted return from the start, graded score) of one day."""
    agent = sealed(policy)
    env = HospitalAECEnv(scenario=scenario)
    env.reset(seed=seed)
    agent.start(policy_seed(seed), Seal(env.hospital))
    total = discounted = 0.0
    tick = 0
    for role in env.agent_iter():
        obs, reward, terminated, truncated, _ = env.last()
        if role == "triage":  # every role gets the team reward: count it once, at triage's turn
            total += reward
            discounted += GAMMA ** max(tick - 1, 0) * reward
            tick += 1
        done = terminated or truncated
        env.step(None if done else agent.act_role(role, obs["observation"], obs["action_mask"]))
    return total, discounted, _result(env.hospital, seed).score


def load(spec: str) -> Any:
    import policies
    from policies.fast import load_fast_policy

    return load_fast_policy(ROOT / spec, name=Path(spec).name) if "/" in spec else policies.load(spec)


def table(results: dict[str, dict[str, list[list[float]]]], episodes: int) -> str:
    lines = [
        f"Validation days (grader seed {VALIDATION_SEED}, {episodes} per scenario), team track, every "
        "policy on the same days: the env's team reward summed over a day, discounted "
        f"(γ = {GAMMA}) from the day's start, and the graded score (means over all days).",
        "",
        "| policy | team return | discounted return | score |",
        "|---|---:|---:|---:|",
    ]
    for name, rows in results.items():
        a = np.array([r for s in rows for r in rows[s]])
        lines.append(f"| `{name}` | {a[:, 0].mean():.1f} | {a[:, 1].mean():.1f} | {a[:, 2].mean():.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("policies", nargs="+", help="registered names or run directories")
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--write", action="store_true", help=f"write the block into {PAGE.name}")
    opts = parser.parse_args(argv)
    results = {}
    for spec in opts.policies:
        policy = load(spec)
        results[Path(spec).name] = {
            s: [list(play(policy, s, episode_seed(VALIDATION_SEED, s, k))) for k in range(opts.episodes)]
            for s in BUILTIN_SCENARIOS
        }
    block = table(results, opts.episodes)
    if opts.write:
        write_marked(PAGE, START, END, f"{START}\n{block}\n{END}")
        (ROOT / "docs" / "fast" / "reward_alignment.json").write_text(json.dumps(results) + "\n")
    print(block)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
