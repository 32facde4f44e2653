"""tests/ci_gaps.py: in CI an import skip is a failure; locally it is a skip; real skips stay skips."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODULE_SKIP = 'import pytest\npytest.importorskip("no_such_module_xyz")\n\ndef test_x():\n    pass\n'
TEST_SKIPS = (
    "import pytest\n\n"
    'def test_needs_it():\n    pytest.importorskip("no_such_module_xyz")\n\n'
    'def test_real_reason():\n    pytest.skip("needs a GPU")\n'
)


def _pytest(tmp_path: Path, source: str, ci: str | None) -> subprocess.CompletedProcess:
    (tmp_path / "test_gap.py").write_text(source)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.ci_gaps", "-ra", "-q", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path), str(tmp_path / "test_gap.py")],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize("ci", ["true", "1"])
def test_in_ci__a_module_that_cannot_import_fails(tmp_path: Path, ci: str) -> None:
    run = _pytest(tmp_path, MODULE_SKIP, ci)
    assert run.returncode == 2, run.stdout  # a collection error: pytest stops and the run fails
    assert "ERROR test_gap.py - CI: test_gap.py was skipped at import" in run.stdout
    assert "no_such_module_xyz" in run.stdout


def test_in_ci__a_test_that_cannot_import_fails_and_a_real_skip_is_listed(tmp_path: Path) -> None:
    run = _pytest(tmp_path, TEST_SKIPS, "true")
    assert run.returncode == 1, run.stdout
    assert "1 failed, 1 skipped" in run.stdout
    assert "SKIPPED [1]" in run.stdout and "needs a GPU" in run.stdout  # -ra prints the real reason


def test_locally__import_skips_stay_skips(tmp_path: Path) -> None:
    run = _pytest(tmp_path, TEST_SKIPS, None)
    assert run.returncode == 0, run.stdout
    assert "2 skipped" in run.stdout
