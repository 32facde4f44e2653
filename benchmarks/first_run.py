"""The README's first command as a new user meets it: a fresh clone, a fresh venv, no pip cache.

Measures ``pip install -e .`` (wall time, and the venv's size on disk) and then
``hospital-marl compare`` (wall time, per-agent grading times from its JSON), the targets
being <= 1 GB installed and <= 3 minutes for both together on the 2-core machine. The
figures are written to ``docs/first_run.json`` with ``--write``; ``python tools/readme.py``
renders them into the README (its ``first-run`` section), and the suite checks the README
against that file. Needs network access to PyPI. Run from the repository root::

    python benchmarks/first_run.py [--branch BRANCH] [--write]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "docs" / "first_run.json"
TARGET_BYTES = 1_000_000_000
TARGET_S = 180.0


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def measure(branch: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PIP_CONSTRAINT", "PYTHONPATH", "VIRTUAL_ENV")}
    env["PIP_NO_CACHE_DIR"] = "1"
    with tempfile.TemporaryDirectory() as tmp:
        clone, venv = Path(tmp) / "clone", Path(tmp) / "venv"
        started = time.perf_counter()
        git = ["git", "clone", "-q", *(["-b", branch] if branch else []), str(ROOT), str(clone)]
        subprocess.run(git, check=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        _run([str(venv / "bin" / "pip"), "install", "-q", "-e", "."], clone, env)
        install_s = time.perf_counter() - started
        out = Path(tmp) / "compare.json"
        compare_s = _run([str(venv / "bin" / "hospital-marl"), "compare", "--output", str(out)], clone, env)
        reports = json.loads(out.read_text())["reports"]
        has_torch = (
            subprocess.run(
                [str(venv / "bin" / "python"), "-c", "import torch"], capture_output=True
            ).returncode
            == 0
        )
        size = _size(venv)
    return {
        "command": "pip install -e . && hospital-marl compare",
        "install_s": round(install_s, 1),
        "compare_s": round(compare_s, 1),
        "total_s": round(install_s + compare_s, 1),
        "venv_bytes": size,
        "torch_installed": has_torch,
        "agents_s": {r["agent"]: r["wall_time_s"] for r in reports},
        "machine": f"{os.cpu_count()} cores, {platform.system()} {platform.machine()}, "
        f"Python {platform.python_version()}",
        "measured": time.strftime("%Y-%m-%d"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--branch", help="the branch to clone (default: the checked-out one)")
    parser.add_argument("--write", action="store_true", help=f"write {RESULT.relative_to(ROOT)}")
    args = parser.parse_args()
    result = measure(args.branch)
    print(json.dumps(result, indent=2))
    size_met = "met" if result["venv_bytes"] <= TARGET_BYTES else "NOT met"
    time_met = "met" if result["total_s"] <= TARGET_S else "NOT met"
    print(
        f"installed {result['venv_bytes'] / 1e6:.0f} MB (target <= {TARGET_BYTES / 1e6:.0f}: {size_met}); "
        f"install + compare {result['total_s']:.0f} s (target <= {TARGET_S:.0f}: {time_met})"
    )
    if args.write:
        RESULT.parent.mkdir(exist_ok=True)
        RESULT.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
