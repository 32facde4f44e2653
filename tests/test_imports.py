"""Imports at the top of a module, so that the import graph (and import-linter) sees every
dependency and no cycle hides behind a function-level import.

A function-level import is allowed for an optional dependency (anything the core install
does not bring, read from pyproject.toml), and otherwise only where :data:`ALLOWED` says why.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import grimp
import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("hospital_marl", "policies", "grading", "training")

ALLOWED: dict[tuple[str, str], str] = {
    ("hospital_marl/radiotherapy/core/plan.py", "hospital_marl.radiotherapy.core.calibration"): (
        "`python -m hospital_marl.radiotherapy.core.calibration` would warn that runpy found it imported"
    ),
    ("policies/__init__.py", "policies.learned"): "the registry lists names without loading model code",
    ("policies/__init__.py", "policies.planner"): "the registry lists names without compiling the planner",
    (
        "policies/__init__.py",
        "policies.benchmarl",
    ): "loads only for that kind of run directory",
    ("policies/__init__.py", "policies.fast"): "loads only for that kind of run directory",
    ("policies/__init__.py", "policies.marl"): "loads only for that kind of run directory",
    ("policies/__init__.py", "policies.rllib"): "loads only for that kind of run directory",
    ("policies/radiotherapy/__init__.py", "policies.radiotherapy.learned"): (
        "the RT registry lists names without loading model code"
    ),
    ("policies/rllib/__init__.py", "policies.rllib.policy"): "imports ray (the rllib extra)",
    ("grading/radiotherapy.py", "policies.radiotherapy"): "an agent spec is resolved only when given by name",
    ("training/benchmarl/env.py", "hospital_marl"): "BenchMARL's task factory, called in its worker",
    ("training/benchmarl/train.py", "training.benchmarl.callbacks"): "imports benchmarl (the marl extra)",
    ("training/benchmarl/train.py", "training.benchmarl.task"): "imports benchmarl (the marl extra)",
    ("training/benchmarl/warmstart.py", "training.benchmarl.env"): "imports torchrl (the marl extra)",
    ("training/export.py", "policies.marl"): "imports torch (the train extra), for that kind of run only",
    ("training/export.py", "policies.rllib"): "imports ray (the rllib extra), for that kind of run only",
    ("training/ppo.py", "policies.ppo_net"): "imports torch (the train extra)",
    ("training/marl/vec_env.py", "training.marl.masked_vec_env"): "imports SB3 (the train extra)",
    ("training/rllib/train.py", "policies.rllib.module"): "imports ray (the rllib extra)",
    ("training/rllib/train.py", "training.rllib.callbacks"): "imports ray (the rllib extra)",
    ("training/rllib/train.py", "training.rllib.env"): "imports ray (the rllib extra)",
    ("training/rllib/train.py", "training.rllib"): "imports ray (the rllib extra)",
    ("training/rllib/train.py", "policies.rllib"): "imports ray (the rllib extra)",
    ("hospital_marl/envs/labelled.py", "PIL"): "slow to import; only the labelled render draws with it",
    ("hospital_marl/radiotherapy/core/fmo.py", "scipy.optimize"): "slow to import; only the FMO reference",
    ("policies/radiotherapy/planner.py", "scipy.optimize"): "slow to import; only the planner's optimiser",
    ("policies/learned.py", "onnxruntime"): "slow to import; only a model played with it needs it",
    ("training/offline/ope.py", "scipy.stats"): "slow to import; only the rank correlation of a report",
    ("policies/llm.py", "policies._http"): "imports httpx (not a core dependency), when a model is reached",
    ("grading/__init__.py", "grading"): (
        "the package's names load lazily (PEP 562), so the sandbox's process sets numba's cache first"
    ),
    ("grading/isolated.py", "hospital_marl.radiotherapy.envs.planning"): (
        "the radiotherapy env, only when a radiotherapy policy is isolated"
    ),
    ("policies/__init__.py", "policies.radiotherapy"): (
        "only to say that an unknown name is a radiotherapy agent (the RT registry)"
    ),
    ("grading/sandbox_child.py", "grading.frames"): (
        "the sandbox's process sets NUMBA_CACHE_DIR and its limits before it imports the package"
    ),
    ("grading/sandbox_child.py", "grading.isolated"): (
        "the sandbox's process sets NUMBA_CACHE_DIR and its limits before it imports the package"
    ),
    ("grading/sandbox_child.py", "grading.radiotherapy"): (
        "the sandbox's process sets NUMBA_CACHE_DIR and its limits before it imports the package"
    ),
    ("grading/sandbox_child.py", "grading.sandbox"): (
        "the sandbox's process sets NUMBA_CACHE_DIR and its limits before it imports the package"
    ),
    ("grading/sandbox_child.py", "hospital_marl.core.hospital"): (
        "the sandbox's process sets NUMBA_CACHE_DIR and its limits before it imports the package"
    ),
    ("grading/sandbox_child.py", "hospital_marl.radiotherapy.core.sealed"): (
        "the sandbox's process sets NUMBA_CACHE_DIR and its limits before it imports the package"
    ),
    ("grading/sandbox_child.py", "numba.core.caching"): (
        "the sandbox's process sets NUMBA_CACHE_DIR and its limits before it imports the package"
    ),
    ("grading/sandbox_child.py", "pickle"): (
        "the sandbox's process sets NUMBA_CACHE_DIR and its limits before it imports the package"
    ),
    ("grading/sandbox_child.py", "policies"): (
        "the sandbox's process sets NUMBA_CACHE_DIR and its limits before it imports the package"
    ),
}
"""(file, imported module) -> why it is imported inside a function."""

# Import names of distributions whose PyPI name differs from the module they install.
_MODULE_OF = {"openenv-core": "openenv", "pillow": "PIL"}

FORMER_CYCLES = (
    ("training.clone", "training.ppo"),
    ("policies.radiotherapy.options", "policies.radiotherapy.ranker"),
    ("policies.radiotherapy.learned", "policies.radiotherapy.residual"),
    ("training.radiotherapy", "training.rt_clone"),
    ("training.radiotherapy", "training.rt_residual"),
)
"""Pairs that imported each other through function-level imports (issue 45)."""


def _core_modules() -> set[str]:
    """The top-level modules the core install brings (pyproject's [project] dependencies)."""
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[<>=!~\[ ;]", d, maxsplit=1)[0].lower() for d in dependencies}
    return {_MODULE_OF.get(n, n.replace("-", "_")) for n in names}


def _function_level_imports() -> list[tuple[str, str]]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                for inner in ast.walk(node):
                    if isinstance(inner, ast.Import):
                        modules = [alias.name for alias in inner.names]
                    elif isinstance(inner, ast.ImportFrom) and inner.level == 0 and inner.module:
                        modules = [inner.module]
                    else:
                        continue
                    found += [(path.relative_to(ROOT).as_posix(), module) for module in modules]
    return found


def test_function_level_imports__only_optional_dependencies_and_the_listed_ones() -> None:
    core = _core_modules() | set(sys.stdlib_module_names) | set(PACKAGES)
    unexplained = sorted(
        {
            (path, module)
            for path, module in _function_level_imports()
            if module.split(".")[0] in core and (path, module) not in ALLOWED
        }
    )
    assert not unexplained, (
        "import these at the top of the module (or, for an optional dependency's sake, add them "
        f"to ALLOWED with the reason): {unexplained}"
    )


def test_allowed_list__has_no_stale_entries() -> None:
    present = set(_function_level_imports())
    assert not sorted(set(ALLOWED) - present), "remove entries for imports that are gone"


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(*PACKAGES, exclude_type_checking_imports=True)


@pytest.mark.parametrize(("first", "second"), FORMER_CYCLES)
def test_former_cycles__stay_broken(graph: grimp.ImportGraph, first: str, second: str) -> None:
    """At most one direction of each pair may depend on the other (directly or not)."""
    there = graph.find_shortest_chain(importer=first, imported=second)
    back = graph.find_shortest_chain(importer=second, imported=first)
    assert there is None or back is None, f"cycle: {there} and {back}"
