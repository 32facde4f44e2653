"""`hospital-marl plot curve RUN_DIR` draws any trainer's committed run (each counts its own x axis:
timesteps, frames or env steps); a BenchMARL run once failed with KeyError: 'timesteps'."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from hospital_marl_cli import main
from training.plots import plot_curve

ROOT = Path(__file__).resolve().parents[2]
CHECKPOINTS = ROOT / "policies" / "checkpoints"
RUNS = {
    "benchmarl (frames)": CHECKPOINTS / "marl" / "benchmarl" / "mappo_s1",
    "fast-mappo (timesteps)": CHECKPOINTS / "marl" / "fast" / "ippo_s0",
    "fast-ppo": CHECKPOINTS / "fast_ppo" / "ppo_flat_s0",
    "rllib (env steps, gradings between iterations)": CHECKPOINTS / "marl" / "rllib",
    "marl ibr": CHECKPOINTS / "marl" / "ibr",
}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("run", RUNS.values(), ids=RUNS.keys())
def test_plot_curve__draws_every_trainers_run(run: Path, tmp_path: Path) -> None:
    rows = json.loads((run / "curve.json").read_text())
    assert any(r.get("eval_score") is not None for r in rows)  # the committed run has gradings
    out = plot_curve(run, tmp_path / "curve.png")
    assert out.read_bytes().startswith(PNG_MAGIC)


def test_plot_curve__draws_a_radiotherapy_run(tmp_path: Path) -> None:
    """`train radiotherapy` grades the plan score (`aggregate`, per task `task_scores`), not the ED's
    `eval_score`: a curve as it writes one (training/radiotherapy.py) is drawn too."""
    tasks = {"prostate": 0.9, "head_neck": 0.7, "pediatric_brain": 0.8}
    rows = [
        {"timesteps": t, "aggregate": 0.8, "margin": -0.01, "task_scores": tasks, "wall_s": 1.0}
        for t in (0, 2048, 4096)
    ]
    (tmp_path / "curve.json").write_text(json.dumps(rows))
    assert plot_curve(tmp_path).read_bytes().startswith(PNG_MAGIC)


def test_plot_curve__a_directory_without_a_curve_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no curve\.json"):
        plot_curve(tmp_path)
    (tmp_path / "curve.json").write_text(json.dumps([{"iteration": 1, "eval_score": None}]))
    with pytest.raises(FileNotFoundError, match="no graded rows"):
        plot_curve(tmp_path)


def test_cli_plot_curve__on_a_benchmarl_run(tmp_path: Path) -> None:
    out = tmp_path / "c.png"
    assert main(["plot", "curve", str(RUNS["benchmarl (frames)"]), "-o", str(out)]) == 0
    assert out.read_bytes().startswith(PNG_MAGIC)
