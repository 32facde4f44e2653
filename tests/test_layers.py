"""The layers import one way: core <- envs <- policies <- grading <- training / server <- CLI.

The contracts live in pyproject.toml ([tool.importlinter]); import-linter reads every import
statement, those inside functions included, so a cycle cannot hide behind a lazy import.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from importlinter.cli import lint_imports

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts__are_kept() -> None:
    assert lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True) == 0


def _fresh_modules(code: str) -> set[str]:
    """The modules a fresh interpreter has loaded after running ``code``."""
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def _tops(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def test_import_grading__imports_no_trainer_no_cli_and_no_torch() -> None:
    tops = _tops(_fresh_modules("from grading import grade"))  # (the package loads its names lazily)
    assert "grading" in tops and "policies" in tops
    assert not tops & {"training", "hospital_marl_cli", "server", "torch", "sb3_contrib", "ray"}


@pytest.mark.parametrize(
    "module",
    [
        "training.ppo",
        "training.marl",
        "training.benchmarl.train",
        "training.radiotherapy",
        "training.rllib.train",
    ],
)
def test_import_a_trainer__imports_no_grading(module: str) -> None:
    """Trainers are handed their evaluation function (``train(args, evaluate)``): no grader loaded."""
    tops = _tops(_fresh_modules(f"import {module}"))
    assert "training" in tops and "policies" in tops
    assert "grading" not in tops


def test_shipped_ppo__plays_without_importing_torch() -> None:
    code = (
        "import policies\nfrom grading import grade\n"
        "grade(policies.load('ppo'), episodes=1, scenarios=['night_shift'])\n"
        "grade(policies.load('team_ppo'), episodes=1, scenarios=['night_shift'], track='team')"
    )
    tops = _tops(_fresh_modules(code))
    assert "onnxruntime" in tops
    assert not tops & {"torch", "sb3_contrib", "stable_baselines3", "training"}


def test_import_hospital_marl__imports_nothing_above_it() -> None:
    tops = _tops(_fresh_modules("import hospital_marl"))
    assert not tops & {"policies", "grading", "training", "server", "hospital_marl_cli"}
