"""A fast MAPPO run's behaviour diagnostic (``behaviour.jsonl``) as a markdown table over training.

Per window of ``--every`` frames (the mean over its updates): each action type's probability where
valid, and ``ΔA``, the mean GAE advantage of the samples that took the type minus that of the
samples that could have and did not (negative: the critic's estimate says the type is worse than
what the policy did instead, so the policy gradient pushes it down); the critic's RMSE and the
critical-patient survival of the training days that ended (stochastic play).

    python tools/fast_behaviour.py docs/fast/behaviour_mappo_aec_s0.jsonl --every 512000
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

TYPES = ("icu_triage", "icu_discharge", "transfer", "ventilate")


def _mean(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.mean(kept) if kept else None


def windows(path: str, every: int) -> list[dict]:
    """Each window's last frame count and the mean of every column over its updates."""
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    groups: dict[int, list[dict]] = {}
    for row in rows:
        groups.setdefault((row["frames"] - 1) // every, []).append(row)
    out = []
    for group in groups.values():
        cols: dict[str, float | None] = {}
        for t in TYPES:
            cols[f"p_{t}"] = _mean([r["types"][t]["p_where_valid"] for r in group])
            gaps = []
            for r in group:
                d = r["types"][t]
                if d["adv_taken"] is not None and d["adv_not_taken_where_valid"] is not None:
                    gaps.append(d["adv_taken"] - d["adv_not_taken_where_valid"])
            cols[f"gap_{t}"] = _mean(gaps)
        cols["rmse"] = _mean([r["value_rmse"]["all"] for r in group])
        cols["survival"] = _mean([r["table"]["critical_survival"] for r in group])
        out.append({"frames": group[-1]["frames"], **cols})
    return out


def markdown(sampled: list[dict]) -> str:
    def f(value: float | None, fmt: str) -> str:
        return "—" if value is None else format(value, fmt)

    head = "| frames (window end) | " + " | ".join(f"p({t}) | ΔA({t})" for t in TYPES)
    lines = [head + " | value RMSE | critical survival (train) |", "|---:" * (2 * len(TYPES) + 3) + "|"]
    for w in sampled:
        cells = [c for t in TYPES for c in (f(w[f"p_{t}"], ".3f"), f(w[f"gap_{t}"], "+.3f"))]
        cells += [f(w["rmse"], ".2f"), f(w["survival"], ".2f")]
        lines.append(f"| {w['frames']:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def severity_split(path: str, every: int) -> str:
    """Triage's admissions by the patient's severity, per window (runs with ``triage_by_severity``):
    the share of ICU admissions that were of critical patients, the probability of an ICU admission
    for a critical patient where one was valid, and two advantage gaps: a critical patient to the
    ICU minus to a general bed (the same patient, the other bed), and to the ICU a critical minus a
    non-critical patient (the same bed, the other patient)."""
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    groups: dict[int, list[dict]] = {}
    for row in rows:
        if "triage_by_severity" in row:
            groups.setdefault((row["frames"] - 1) // every, []).append(row["triage_by_severity"])
    lines = [
        "| frames (window end) | ICU admissions of critical patients | p(ICU for a critical) where valid "
        "| A(critical→ICU) − A(critical→general) | A(critical→ICU) − A(non-critical→ICU) |",
        "|---:|---:|---:|---:|---:|",
    ]
    frames = [r["frames"] for r in rows if "triage_by_severity" in r]
    ends = {}
    for f in frames:
        ends[(f - 1) // every] = f
    for key, group in groups.items():
        crit = sum(g["icu_critical"]["taken"] for g in group)
        total = crit + sum(g["icu_non_critical"]["taken"] for g in group)

        def gap(a: str, b: str, group: list[dict] = group) -> float | None:
            pairs = [(g[a]["adv_taken"], g[b]["adv_taken"]) for g in group]
            return _mean([x - y for x, y in pairs if x is not None and y is not None])

        p = _mean([g["p_icu_for_a_critical_where_valid"] for g in group])
        cells = [
            f"{crit:,} of {total:,}",
            "—" if p is None else f"{p:.3f}",
            *("—" if v is None else f"{v:+.3f}" for v in (gap("icu_critical", "general_critical"),
                                                        gap("icu_critical", "icu_non_critical"))),
        ]  # fmt: skip
        lines.append(f"| {ends[key]:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path")
    parser.add_argument("--every", type=int, default=512_000)
    parser.add_argument(
        "--severity", action="store_true", help="triage's admissions by the patient's severity"
    )
    a = parser.parse_args()
    print(severity_split(a.path, a.every) if a.severity else markdown(windows(a.path, a.every)))


if __name__ == "__main__":
    main()
