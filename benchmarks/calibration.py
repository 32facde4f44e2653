"""Simulated statistics of the ``calibrated`` distribution, for docs/calibration.md: what the
days are (arrivals, triage mix, hourly profile: policy-independent) and what the department
does with them under the heuristic policy (waits, ICU and ventilator use, deaths).

    python -m benchmarks.calibration --write   # fills docs/calibration.md's block
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from grading.common import mean, stderr
from grading.grader import sealed
from hospital_marl.core.hospital import Seal
from hospital_marl.core.types import EMPTY
from hospital_marl.envs.composed import HospitalEDEnv
from policies.base import policy_seed

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "calibration.md"
MARKER = "calibration-stats"
COMMAND = "python -m benchmarks.calibration --write"
MINUTES_PER_TICK = 24 * 60 / 100


def day_statistics(days: int) -> dict[str, object]:
    """Policy-independent: the days' arrivals, triage mix and hourly profile."""
    env = HospitalEDEnv(scenario="calibrated")
    per_day, severities, ticks = [], [], []
    for seed in range(days):
        env.reset(seed=seed)
        day = env.hospital.day
        per_day.append(day.n_patients)
        severities += day.severity
        ticks += day.arrival_tick
    sev = np.asarray(severities)
    per_tick = np.bincount(np.asarray(ticks), minlength=100)[:100] / days
    hour = np.floor(np.arange(100) * 24 / 100).astype(int)
    profile = np.bincount(hour, weights=per_tick, minlength=24) / np.bincount(hour, minlength=24) * 100 / 24
    return {
        "arrivals": (mean(per_day), stderr(per_day)),
        "esi": [float(np.mean(sev == 6 - esi)) for esi in range(1, 6)],
        "peak_hour": int(np.argmax(profile)),
        "trough_hour": int(np.argmin(profile)),
        "peak_to_trough": float(profile.max() / profile.min()),
        # real departments are quietest at 04:00-06:00: how busy the model's are, over its quietest
        "early_to_trough": float(profile[4:6].mean() / profile.min()),
    }


def care_statistics(episodes: int, agent_name: str = "heuristic") -> dict[str, tuple[float, float]]:
    """Under a policy: per-episode waits, ICU and ventilator shares of arrivals, deaths."""
    from hospital_marl_cli.play import load_policy

    agent = sealed(load_policy(agent_name))
    rows: dict[str, list[float]] = {k: [] for k in ("wait", "icu", "vent", "deaths", "critical")}
    for seed in range(10_000, 10_000 + episodes):
        env = HospitalEDEnv(scenario="calibrated")
        obs, info = env.reset(seed=seed)
        h = env.hospital
        agent.start(policy_seed(seed), Seal(h))
        in_icu: set[int] = set()
        on_vent: set[int] = set()
        done = False
        while not done:
            obs, _, terminated, truncated, info = env.step(agent.act(obs, info["action_mask"]))
            in_icu.update(p for p in h.icu if p != EMPTY)
            on_vent.update(p for p in h.vents if p != EMPTY)
            done = terminated or truncated
        c = h.counters
        rows["wait"].append(c.wait_ticks / max(1, c.admissions) * MINUTES_PER_TICK)
        rows["icu"].append(len(in_icu) / c.arrivals)
        rows["vent"].append(len(on_vent) / c.arrivals)
        rows["deaths"].append(c.deaths / c.arrivals)
        rows["critical"].append(c.critical_total / c.arrivals)
    return {k: (mean(v), stderr(v)) for k, v in rows.items()}


def render(days: dict[str, object], care: dict[str, tuple[float, float]], n_days: int, n_eps: int) -> str:
    esi = " / ".join(f"{100 * p:.1f} %" for p in days["esi"])  # type: ignore[union-attr]
    arrivals = days["arrivals"]
    lines = [
        f"`{COMMAND}` ({n_days} days for the arrivals, {n_eps} heuristic episodes for the care rows)",
        "",
        "| statistic | simulated (`calibrated`) |",
        "|---|---|",
        f"| arrivals per day | {arrivals[0]:.1f} ± {arrivals[1]:.1f} |",  # type: ignore[index]
        f"| triage mix ESI 1 / 2 / 3 / 4 / 5 | {esi} |",
        f"| busiest hour / quietest hour (tick 0 = midnight) | {days['peak_hour']}:00 / "
        f"{days['trough_hour']}:00 |",
        f"| busiest / quietest hourly arrivals | {days['peak_to_trough']:.2f} |",
        f"| arrivals 04:00–06:00 / quietest hour | {days['early_to_trough']:.2f} |",
    ]
    for key, label, scale, unit in (
        ("wait", "time waiting per admission (heuristic)", 1, " min"),
        ("critical", "patients ever critical (severity ≥ 4), share of arrivals (heuristic)", 100, " %"),
        ("icu", "patients ever in an ICU bed, share of arrivals (heuristic)", 100, " %"),
        ("vent", "patients ever ventilated, share of arrivals (heuristic)", 100, " %"),
        ("deaths", "deaths, share of arrivals (heuristic)", 100, " %"),
    ):
        m, se = care[key]
        lines.append(f"| {label} | {scale * m:.1f} ± {scale * se:.1f}{unit} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=300)
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    body = render(day_statistics(args.days), care_statistics(args.episodes), args.days, args.episodes)
    print(body)
    if args.write:
        from grading.tables import write_marked

        start, end = f"<!-- BEGIN {MARKER} -->", f"<!-- END {MARKER} -->"
        write_marked(PAGE, start, end, f"{start}\n{body}\n{end}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
