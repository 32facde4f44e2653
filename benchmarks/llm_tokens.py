"""What an LLM step costs in prompt tokens, per scenario and track (the README's "LLM agents" figures).

Plays heuristic shifts (the state an LLM would face under a competent player) and measures every
request the agent script would send: system prompt + user message (what the role sees and its
numbered legal actions), estimated as characters / 4 (``hospital_marl.envs.text.estimate_tokens``).
A tick is one request on the flat track and three (one per role) on the team track.

    python benchmarks/llm_tokens.py [--seeds 3]
"""

from __future__ import annotations

import argparse

import numpy as np

from hospital_marl.core.actions import ROLE_FLAT, ROLES
from hospital_marl.core.scenarios import BUILTIN_SCENARIOS
from hospital_marl.envs.composed import HospitalEDEnv
from hospital_marl.envs.observations import ROLE_BLOCKS
from hospital_marl.envs.text import render_prompt
from policies import HeuristicPolicy
from policies.llm import request_tokens


def tokens_per_tick(scenario: str, seed: int) -> dict[str, list[int]]:
    env, policy = HospitalEDEnv(scenario=scenario), HeuristicPolicy()
    obs, info = env.reset(seed=seed)
    length = env.hospital.max_ticks
    out: dict[str, list[int]] = {"flat": [], "team": []}
    done = False
    while not done:
        mask = info["action_mask"]
        out["flat"].append(request_tokens(None, render_prompt(obs, mask, None, length)))
        out["team"].append(
            sum(
                request_tokens(
                    role,
                    render_prompt(
                        {k: obs[k] for k in ROLE_BLOCKS[role]},
                        [mask[f] for f in ROLE_FLAT[role]],
                        role,
                        length,
                    ),
                )
                for role in ROLES
            )
        )
        obs, _, terminated, truncated, info = env.step(policy.act(obs, mask))
        done = terminated or truncated
    return out


def table(seeds: int = 3) -> str:
    """The Markdown table the README shows."""
    rows = [
        "| scenario | flat: mean / max tokens per tick | team (3 requests): mean / max per tick |",
        "|---|---|---|",
    ]
    for scenario in BUILTIN_SCENARIOS:
        runs = [tokens_per_tick(scenario, seed) for seed in range(seeds)]
        cells = []
        for track in ("flat", "team"):
            values = np.concatenate([r[track] for r in runs])
            cells.append(f"{values.mean():.0f} / {values.max():.0f}")
        rows.append(f"| {scenario} | {cells[0]} | {cells[1]} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=3, help="heuristic shifts per scenario (seeds 0..n-1)")
    args = parser.parse_args()
    print(table(args.seeds))
    print(f"\n{args.seeds} heuristic shifts per scenario; tokens = characters / 4 of system + user message.")


if __name__ == "__main__":
    main()
