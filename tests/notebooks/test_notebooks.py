"""The notebooks/ walkthroughs: each one executes headlessly on the CI budget, and each one is
committed with the outputs of its current code (``python tools/notebooks.py --execute``), small.

Every ``notebooks/*.ipynb`` is picked up by the glob, so a new notebook is tested as soon
as it is added; a broken one fails the test named after it.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
BUDGET_VARIABLE = "HOSPITAL_NOTEBOOK_BUDGET"
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")  # colours in IPython tracebacks
CELL_TIMEOUT = 300  # seconds per cell; the whole notebook should take well under 2 minutes on "ci"

pytestmark = pytest.mark.notebooks


def _ids(path: Path) -> str:
    return path.name


def _kernel_env() -> dict[str, str]:
    """The kernel's environment: the tiny budget, a headless matplotlib, this checkout first on the path."""
    env = dict(os.environ)
    env[BUDGET_VARIABLE] = "ci"
    env["MPLBACKEND"] = "Agg"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def test_notebooks__the_glob_finds_the_walkthroughs() -> None:
    assert NOTEBOOKS, f"no notebooks found in {NOTEBOOK_DIR}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids)
def test_notebook__executes_on_the_ci_budget(path: Path) -> None:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError

    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK_DIR)}},  # the kernel's cwd
    )
    try:
        client.execute(env=_kernel_env())
    except (CellExecutionError, CellTimeoutError) as err:
        message = ANSI_ESCAPE.sub("", str(err))
        pytest.fail(f"notebook {path.name} failed on the ci budget:\n{message}", pytrace=False)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids)
def test_notebook__stored_outputs_come_from_its_current_code(path: Path) -> None:
    """Every code cell was run by tools/notebooks.py and not edited since (its source hash is
    stamped beside its outputs); an edit without a re-run fails here."""
    import sys

    sys.path.insert(0, str(ROOT / "tools"))
    import notebooks as notebook_tool

    problems = notebook_tool.stale_cells(path)
    assert not problems, f"{path.name}: " + "; ".join(problems) + " (python tools/notebooks.py --execute)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids)
def test_notebook__is_small_enough_to_keep_the_repository_light(path: Path) -> None:
    assert path.stat().st_size < 600_000, f"{path.name} is {path.stat().st_size / 1e3:.0f} kB"
    notebook = json.loads(path.read_text(encoding="utf-8"))
    assert not notebook["metadata"].get("widgets"), "widget state is not stored"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids)
def test_notebook__honours_the_budget_switch(path: Path) -> None:
    sources = "".join(
        "".join(cell["source"])
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]
        if cell["cell_type"] == "code"
    )
    assert BUDGET_VARIABLE in sources, (
        f"{path.name} must read {BUDGET_VARIABLE} ('ci' = tiny, default 'full') so CI stays fast"
    )
