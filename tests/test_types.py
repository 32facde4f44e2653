"""The type gate: mypy over the library's layers (hospital_marl, policies, grading) with the
committed configuration ([tool.mypy] in pyproject.toml) reports no error."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
mypy_api = pytest.importorskip("mypy.api", reason="mypy not installed: pip install 'hospital-marl[dev]'")


def test_mypy__reports_no_error_on_the_checked_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the configuration's `files` are relative to the project root
    stdout, stderr, status = mypy_api.run(["--config-file", str(ROOT / "pyproject.toml")])
    errors = [line for line in stdout.splitlines() if ": error:" in line]
    assert status == 0 and not errors, f"{len(errors)} mypy errors:\n" + "\n".join(errors[:50]) + stderr
