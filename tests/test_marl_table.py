"""benchmarks/marl_table.py's RLlib verdict and cost line, on made-up runs whose answers are known.

The results page's RLlib prose says whether the learning curve levelled off from
:func:`convergence` (last third of the validation gradings against the middle third, and the last
third's least-squares slope per 100k role decisions); a resumed run's cost line lists every
command that made it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.marl_table import convergence, run_cost


def _gradings(scores: list[float], every: int = 20_000) -> list[dict[str, float]]:
    return [{"env_steps": every * (i + 1), "eval_score": s} for i, s in enumerate(scores)]


def test_convergence__a_straight_rising_line_has_its_slope_and_a_gap_between_the_thirds() -> None:
    # 30 gradings 20k role decisions apart rising 0.5 points per 100k: thirds of 10 gradings whose
    # centres are 200k apart, so the last third sits 1.0 above the middle one; the fit is exact.
    c = convergence(_gradings([70 + 0.5 * 0.2 * (i + 1) for i in range(30)]))
    assert c["k"] == 10 and c["from_steps"] == 420_000
    assert c["slope"] == pytest.approx(0.5) and c["slope_se"] == pytest.approx(0, abs=1e-9)
    assert c["diff"] == pytest.approx(1.0)
    # each third's scores are 0.1 apart: variance 0.01 * var(1..10) = 0.01 * 55 / 6
    assert c["diff_se"] == pytest.approx((2 * 0.01 * 55 / 6 / 10) ** 0.5)


def test_convergence__a_flat_noisy_curve_shows_no_gap_and_no_slope() -> None:
    scores = [75 + (0.5 if i % 2 else -0.5) for i in range(30)]  # alternating around 75
    c = convergence(_gradings(scores))
    assert c["middle"] == pytest.approx(75) and c["last"] == pytest.approx(75)
    assert abs(c["diff"]) <= 2 * c["diff_se"] and abs(c["slope"]) <= 2 * c["slope_se"]


def test_convergence__needs_three_gradings_per_third() -> None:
    with pytest.raises(ValueError, match="8 validation gradings: too few"):
        convergence(_gradings([70.0] * 8))


def test_run_cost__a_resumed_rllib_run_lists_its_first_and_resuming_commands(tmp_path: Path) -> None:
    first = "hospital-marl train rllib --iterations 250 --all-scenarios --save runs/marl/rllib"
    again = "hospital-marl train rllib --iterations 700 --all-scenarios --resume runs/marl/rllib"
    meta = {
        "env_steps": 2_800_000,
        "wall_time_s": 9000.0,
        "command": first,
        "resumed": [{"from_iteration": 250, "command": again}],
    }
    (tmp_path / "rllib.json").write_text(json.dumps(meta))
    assert run_cost("rllib", tmp_path) == {
        "steps": 2_800_000,
        "wall": 9000.0,
        "command": f"{first} && {again}",
    }
    (tmp_path / "rllib.json").write_text(json.dumps({**meta, "resumed": []}))
    assert run_cost("rllib", tmp_path)["command"] == first
