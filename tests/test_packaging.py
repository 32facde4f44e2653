"""The package as the field ships it: one version everywhere, an sdist and a wheel that pass
`twine check`, every shipped checkpoint inside the wheel, and the installed wheel working from
another directory (nothing read from the repository)."""

from __future__ import annotations

import os
import site
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest
import tomllib
import yaml

import hospital_marl

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
VERSION = PYPROJECT["project"]["version"]
CHECKPOINT_DIRS = ("policies/checkpoints", "policies/radiotherapy/checkpoints")


def test_version__is_one_in_pyproject_the_package_the_changelog_and_the_citation() -> None:
    assert hospital_marl.__version__ == VERSION
    assert f"## [{VERSION}] - " in (ROOT / "CHANGELOG.md").read_text()
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert str(citation["version"]) == VERSION
    assert {"cff-version", "message", "title", "authors"} <= citation.keys()


def test_changelog__follows_keep_a_changelog() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    assert "Keep a Changelog" in text and "## [Unreleased]" in text
    releases = [line for line in text.splitlines() if line.startswith("## [") and "Unreleased" not in line]
    assert releases and all(line.split(" - ")[1][:4].isdigit() for line in releases)


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`python -m build` (isolated, as a maintainer runs it): the sdist and the wheel."""
    out = tmp_path_factory.mktemp("dist")
    run = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    (out / "build.log").write_text(run.stdout + run.stderr)
    return out


def test_build__no_package_would_be_ignored_warning(dist: Path) -> None:
    """The checkpoint folders are found as (namespace) packages, their files shipped as package
    data: setuptools warned 141 times "Package would be ignored" before (issue #44)."""
    log = (dist / "build.log").read_text()
    assert "Successfully built" in log and "would be ignored" not in log


def _tracked(paths: tuple[str, ...]) -> list[str]:
    out = subprocess.run(["git", "ls-files", *paths], cwd=ROOT, capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_build__sdist_and_wheel_pass_twine_check(dist: Path) -> None:
    sdist = dist / f"hospital_marl-{VERSION}.tar.gz"
    wheel = dist / f"hospital_marl-{VERSION}-py3-none-any.whl"
    assert sdist.exists() and wheel.exists()
    run = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(sdist), str(wheel)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_wheel__ships_every_checkpoint_in_the_repository(dist: Path) -> None:
    names = set(zipfile.ZipFile(dist / f"hospital_marl-{VERSION}-py3-none-any.whl").namelist())
    tracked = _tracked(CHECKPOINT_DIRS)
    assert any("/marl/" in t for t in tracked) and any("radiotherapy" in t for t in tracked)
    missing = [t for t in tracked if t not in names]
    assert not missing, f"not in the wheel: {missing[:10]}"


def venv_seeing_this_interpreter(env_dir: Path) -> Path:
    """A new venv whose ``sys.path`` ends with the running interpreter's site directories: the
    packages this test runs with, whether that is the machine's Python or a user's venv (a venv's
    ``system_site_packages`` would see the *base* interpreter's instead, without the user's
    dependencies). Its own site-packages comes first, so what is installed there wins. Without a pip
    of its own (ensurepip took ~20 s): install into it with ``pip --python`` (:func:`pip_into`)."""
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    dirs = [d for d in site.getsitepackages() if Path(d).is_dir()]
    lines = "".join(f"import site; site.addsitedir({d!r})\n" for d in dirs)
    (Path(purelib) / "zz_running_interpreter.pth").write_text(lines)
    return python


def pip_into(python: Path, *args: str) -> list[str]:
    """The running interpreter's pip acting on the venv of ``python`` (pip's ``--python``, pip >= 22.3):
    what it installs goes into that venv, scripts included, as the venv's own pip would put it."""
    return [sys.executable, "-m", "pip", "--python", str(python), *args]


@pytest.mark.slow
def test_wheel__installed_elsewhere_runs_compare(dist: Path, tmp_path: Path) -> None:
    """A venv that sees the running interpreter's packages (the dependencies) but gets hospital_marl
    from the wheel alone (--no-deps), run from a directory that is not the repository. Slow: the
    installed copy compiles the simulation kernel afresh (numba caches by source path), about a minute."""
    env_dir = tmp_path / "venv"
    python = venv_seeing_this_interpreter(env_dir)
    wheel = dist / f"hospital_marl-{VERSION}-py3-none-any.whl"
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PIP_CONSTRAINT")}
    install = pip_into(python, "install", "-q", "--no-deps", "--no-index", str(wheel))
    subprocess.run(install, check=True, env=clean)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    probe = "import hospital_marl, policies; print(hospital_marl.__file__, policies.__file__)"
    where = subprocess.run(
        [str(python), "-c", probe],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        check=True,
        env=clean,
    ).stdout
    assert str(ROOT) not in where and str(env_dir) in where, where
    run = subprocess.run(
        [
            str(env_dir / "bin" / "hospital-marl"),
            "-q",
            "compare",
            "--agents",
            "heuristic",
            "ppo",
            "--episodes",
            "1",
            "--scenarios",
            "night_shift",
            "--markdown",
        ],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        env=clean,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    rows = [line for line in run.stdout.splitlines() if line.startswith(("| heuristic", "| ppo"))]
    assert len(rows) >= 2, run.stdout
