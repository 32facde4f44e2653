"""Issue #40's behaviour table for team policies, graded as the grader plays them (AEC, held-out days).

For each policy: ICU admissions out of all triage admissions, ICU discharges (step-downs),
bed-manager transfers, the ticks it ventilated out of those where it could, and critical-patient
survival, on ``--episodes`` days of ``--scenario`` from the held-out grader seed. The counts come
from the actions the grader received (a wrapper counts each role's returned action by its kind, and
the ventilator officer's mask says whether ventilating was possible).

    python benchmarks/behaviour_table.py team_heuristic mappo runs/x [--scenario normal_day --episodes 10]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from typing import Any

import numpy as np

from grading import grade
from hospital_marl.core.actions import ROLE_KIND_INDEX, Kind
from policies import load
from policies.base import BasePolicy


class Counting(BasePolicy):
    """A team policy that counts the kinds of the actions it plays (and when ventilating was possible)."""

    tracks = ("team",)

    def __init__(self, inner: Any) -> None:
        super().__init__()
        self.inner, self.name, self.counts = inner, getattr(inner, "name", "policy"), Counter()

    def reset(self, seed: int | None = None, hospital: Any = None) -> None:
        super().reset(seed=seed, hospital=hospital)
        self.inner.reset(seed=seed, hospital=hospital)

    def act_role(self, role: str, observation: np.ndarray, action_mask: np.ndarray) -> int:
        action = int(self.inner.act_role(role, observation, action_mask))
        mask = np.asarray(action_mask, bool)
        kind = ROLE_KIND_INDEX[role][action][0] if 0 <= action < len(mask) else None
        self.counts[str(kind)] += 1
        if role == "ventilator_officer" and mask[1:].any():
            self.counts["ventilation_possible"] += 1
            self.counts["ventilated_when_possible"] += kind == Kind.VENTILATE
        return action


def table(policy: Any, scenario: str, episodes: int, seed: int) -> dict[str, Any]:
    counting = Counting(load(policy) if isinstance(policy, str) else policy)
    report = grade(counting, episodes=episodes, seed=seed, scenarios=[scenario], track="team")
    c = counting.counts
    return {
        "score": round(report["overall_score"], 2),
        "icu_admissions": c[str(Kind.ADMIT_ICU)],
        "admissions": c[str(Kind.ADMIT_ICU)] + c[str(Kind.ADMIT_GENERAL)],
        "step_downs": c[str(Kind.DISCHARGE_ICU)],
        "transfers": c[str(Kind.TRANSFER_ICU)],
        "ventilations": c["ventilated_when_possible"],
        "ventilation_possible": c["ventilation_possible"],
        "critical_survival": round(report["critical_patient_survival"], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("policies", nargs="+")
    parser.add_argument("--scenario", default="normal_day")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=20261201)
    a = parser.parse_args()
    rows = {name: table(name, a.scenario, a.episodes, a.seed) for name in a.policies}
    print(
        json.dumps({"scenario": a.scenario, "episodes": a.episodes, "seed": a.seed, "rows": rows}, indent=1)
    )
    header = "| behaviour | " + " | ".join(f"`{n}`" for n in rows) + " |"
    print(header + "\n" + "|---" * (len(rows) + 1) + "|")
    lines = [
        ("score", lambda t: f"{t['score']:.2f}"),
        ("ICU admissions (triage)", lambda t: f"{t['icu_admissions']} of {t['admissions']}"),
        ("ICU discharges (step-downs)", lambda t: str(t["step_downs"])),
        ("bed-manager transfers", lambda t: str(t["transfers"])),
        ("ventilates when it can", lambda t: f"{t['ventilations']} of {t['ventilation_possible']}"),
        ("critical-patient survival", lambda t: f"{t['critical_survival']:.2f}"),
    ]
    for label, cell in lines:
        print(f"| {label} | " + " | ".join(cell(t) for t in rows.values()) + " |")


if __name__ == "__main__":
    main()
