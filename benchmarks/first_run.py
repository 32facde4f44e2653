"""The README's two commands as a new user meets them: a fresh clone, a fresh venv, no pip cache.

First command: measures ``pip install -e .`` (wall time, and the venv's size on disk) and then
``hospital-marl compare`` (wall time, per-agent grading times from its JSON), the targets
being <= 1 GB installed and <= 3 minutes for both together on the 2-core machine.

Second command (``--command test`` or ``both``): measures its install,
``pip install -e ".[dev]" -c constraints/cpu.txt``, in another fresh venv: wall time, the venv's
size, and which torch it brought (its version and CUDA build, if any), the targets being a
CPU torch, <= 3 GB and <= 5 minutes. The test run itself (``python -m pytest -q``) is not
timed here: CI runs it.

The figures are written to ``docs/first_run.json`` with ``--write`` (a command not measured
keeps its previous figures); ``python tools/readme.py`` renders them into the README and the
docs, and the suite checks those against that file. Needs network access to PyPI. Run from
the repository root::

    python benchmarks/first_run.py [--branch BRANCH] [--command first|test|both] [--write]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "docs" / "first_run.json"
TARGET_BYTES = 1_000_000_000
TARGET_S = 180.0
TEST_COMMAND = 'pip install --no-compile -e ".[dev]" -c constraints/cpu.txt'
TEST_TARGET_BYTES = 3_000_000_000
TEST_TARGET_S = 300.0


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def _size(path: Path) -> int:
    """Bytes on disk, as ``du`` counts them (blocks, not file lengths)."""
    out = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True).stdout
    return int(out.split()[0]) * 1024


def _user_env() -> dict[str, str]:
    """This shell's environment less what would make the run unlike a new user's."""
    env = {k: v for k, v in os.environ.items() if k not in ("PIP_CONSTRAINT", "PYTHONPATH", "VIRTUAL_ENV")}
    env["PIP_NO_CACHE_DIR"] = "1"
    return env


def _clone_and_venv(tmp: str, branch: str | None) -> tuple[Path, Path]:
    clone, venv = Path(tmp) / "clone", Path(tmp) / "venv"
    git = ["git", "clone", "-q", *(["-b", branch] if branch else []), str(ROOT), str(clone)]
    subprocess.run(git, check=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    return clone, venv


def measure_test_install(branch: str | None) -> dict:
    """The second command's install in a fresh venv: time, size, and the torch it chose."""
    env = _user_env()
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        clone, venv = _clone_and_venv(tmp, branch)
        _, subcommand, *options = shlex.split(TEST_COMMAND)  # "pip", "install", the README's options
        argv = [str(venv / "bin" / "pip"), subcommand, "-q", *options]
        _run(argv, clone, env)
        install_s = time.perf_counter() - started
        probe = "import torch; print(torch.__version__, torch.version.cuda or 'none')"
        out = subprocess.run([str(venv / "bin" / "python"), "-c", probe], capture_output=True, text=True)
        torch_version, cuda = out.stdout.split() if out.returncode == 0 else ("none", "none")
        listed = subprocess.run(
            [str(venv / "bin" / "pip"), "list", "--format=freeze"], capture_output=True, text=True, env=env
        ).stdout.splitlines()
        size = _size(venv)
    return {
        "command": TEST_COMMAND,
        "install_s": round(install_s, 1),
        "venv_bytes": size,
        "torch": torch_version,
        "torch_cuda": cuda,
        "nvidia_packages": sum(line.lower().startswith("nvidia") for line in listed),
        "packages": len(listed),
        "load_average": round(os.getloadavg()[0], 1),  # the machine is shared: read the time against it
        "machine": _machine(),
        "measured": time.strftime("%Y-%m-%d"),
    }


def _machine() -> str:
    system = f"{platform.system()} {platform.machine()}"
    return f"{os.cpu_count()} cores, {system}, Python {platform.python_version()}"


def measure(branch: str | None) -> dict:
    env = _user_env()
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        clone, venv = _clone_and_venv(tmp, branch)
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
        "machine": _machine(),
        "measured": time.strftime("%Y-%m-%d"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--branch", help="the branch to clone (default: the checked-out one)")
    parser.add_argument(
        "--command", choices=("first", "test", "both"), default="both", help="which command to measure"
    )
    parser.add_argument("--write", action="store_true", help=f"write {RESULT.relative_to(ROOT)}")
    args = parser.parse_args()
    result = json.loads(RESULT.read_text()) if RESULT.exists() else {}
    if args.command in ("first", "both"):
        first = measure(args.branch)
        result = {**first, "test": result.get("test")}
        size_met = "met" if first["venv_bytes"] <= TARGET_BYTES else "NOT met"
        time_met = "met" if first["total_s"] <= TARGET_S else "NOT met"
        print(
            f"first command: installed {first['venv_bytes'] / 1e6:.0f} MB (target <= "
            f"{TARGET_BYTES / 1e6:.0f}: {size_met}); install + compare {first['total_s']:.0f} s "
            f"(target <= {TARGET_S:.0f}: {time_met})"
        )
    if args.command in ("test", "both"):
        test = result["test"] = measure_test_install(args.branch)
        cpu = "a CPU torch" if test["torch_cuda"] == "none" else f"a CUDA {test['torch_cuda']} torch"
        size_met = "met" if test["venv_bytes"] <= TEST_TARGET_BYTES else "NOT met"
        time_met = "met" if test["install_s"] <= TEST_TARGET_S else "NOT met"
        ratio = ""
        if result.get("install_s"):
            ratio = f" ({test['install_s'] / result['install_s']:.1f}x the first command's install)"
        print(
            f"test command: {cpu} ({test['torch']}); installed {test['venv_bytes'] / 1e6:.0f} MB (target <= "
            f"{TEST_TARGET_BYTES / 1e6:.0f}: {size_met}); install {test['install_s']:.0f} s{ratio} "
            f"(target <= {TEST_TARGET_S:.0f}: {time_met})"
        )
    print(json.dumps(result, indent=2))
    if args.write:
        RESULT.parent.mkdir(exist_ok=True)
        RESULT.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
