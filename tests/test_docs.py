"""The documentation site: it builds with `mkdocs build --strict`, and every environment has its card.

A strict build fails on a broken link, a missing page in the nav, an API reference to an object
that does not exist, or a notebook that cannot be converted: what a reader would hit first.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

ED_CARDS = ("aec", "parallel", "composed", "team", "vector")


def _nav_pages(node: object) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [page for item in node for page in _nav_pages(item)]
    if isinstance(node, dict):
        return [page for value in node.values() for page in _nav_pages(value)]
    return []


def _config() -> dict:
    # mkdocs.yml is plain YAML apart from no custom tags: safe_load reads it.
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text())


def test_mkdocs__builds_strictly(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert run.returncode == 0, run.stderr[-4000:]
    assert (tmp_path / "site" / "api" / "index.html").exists()
    # mkdocstrings rendered the documented objects, not an empty page
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    assert "render_labelled" in api and "grade" in api
    # the API reference is the docstrings: none may point to a spec file users do not have
    assert "SPEC" not in api, [line for line in api.splitlines() if "SPEC" in line][:3]
    # the notebooks became pages
    assert (tmp_path / "site" / "notebooks" / "01_quickstart" / "index.html").exists()
    # and their table-of-contents links land on headings (mkdocs-jupyter's TOC slugs a heading
    # without its inline code, nbconvert's ids with it: 7 links led nowhere, issue #44)
    for page in sorted((tmp_path / "site" / "notebooks").glob("*/index.html")):
        html = page.read_text()
        ids = set(re.findall(r'\bid="([^"]+)"', html))
        broken = sorted({h for h in re.findall(r'href="#([^"]+)"', html) if h not in ids})
        assert not broken, f"{page.parent.name}: links to missing anchors {broken}"


def test_every_environment__has_a_card_with_its_gif_in_the_nav() -> None:
    from hospital_marl.radiotherapy.core.tasks import BUILTIN_TASKS

    nav = _nav_pages(_config()["nav"])
    cards = [f"environments/{c}.md" for c in ED_CARDS]
    cards += [f"environments/rt-{t.replace('_', '-')}.md" for t in BUILTIN_TASKS]
    for card in cards:
        assert card in nav, f"{card} is not in mkdocs.yml's nav"
        text = (DOCS / card).read_text()
        gifs = re.findall(r"!\[[^\]]*\]\(\.\./images/([\w-]+\.gif)\)", text)
        assert gifs, f"{card} shows no GIF"
        gif = DOCS / "images" / gifs[0]
        assert gif.exists() and gif.stat().st_size < 300_000, f"{gif.name}: missing or too large"
        assert "```python" in text, f"{card} has no snippet"


def test_radiotherapy_cards__state_the_action_space_the_env_has() -> None:
    """The cards' action-space row and the environments index name the env's own space (they said
    Discrete(8) for a day after the apertures made it Discrete(10))."""
    import gymnasium as gym

    from hospital_marl.radiotherapy.core.tasks import BUILTIN_TASKS

    index = (DOCS / "environments" / "index.md").read_text()
    for task in BUILTIN_TASKS:
        slug = task.replace("_", "-")
        card = (DOCS / "environments" / f"rt-{slug}.md").read_text()
        env_id = re.search(r'gymnasium\.make\("(hospital_marl/Radiotherapy\w+-v0)"\)', card)
        assert env_id, f"rt-{slug}.md names no env id"
        space = str(gym.make(env_id.group(1)).action_space)
        row = next(line for line in card.splitlines() if line.startswith("| action space |"))
        assert f"`{space}`" in row, f"rt-{slug}.md says {row!r}, the env has {space}"
        assert re.findall(r"Discrete\(\d+\)", row) == [space]
    for spaces in re.findall(r"\| \[[^]]+\]\(rt-[\w-]+\.md\) \|.*", index):
        assert all(s == space for s in re.findall(r"Discrete\(\d+\)", spaces)), spaces


def test_every_markdown_table__has_as_many_delimiter_cells_as_header_cells() -> None:
    """A table whose delimiter row is short renders as a paragraph of pipes (the generated
    radiotherapy tasks table did, on two pages). Every page of the site and every README."""
    pages = [ROOT / "README.md", ROOT / "server" / "README.md", *sorted(DOCS.rglob("*.md"))]
    pages += sorted((ROOT / "policies").rglob("README.md"))
    delimiter = re.compile(r"^\s*\|(\s*:?-{3,}:?\s*\|)+\s*$")

    def count(line: str) -> int:
        return len(re.split(r"(?<!\\)\|", line.strip())) - 2  # \| is a pipe inside a cell

    broken = []
    for page in pages:
        lines, fenced = page.read_text().splitlines(), False
        for i, line in enumerate(lines):
            fenced ^= line.lstrip().startswith("```")
            header = lines[i - 1] if i else ""
            is_table = not fenced and delimiter.match(line) and header.lstrip().startswith("|")
            if is_table and count(header) != count(line):
                broken.append(f"{page.relative_to(ROOT)}:{i}: {header[:60]}")
    assert not broken, broken


def test_nav__lists_only_pages_that_exist() -> None:
    for page in _nav_pages(_config()["nav"]):
        assert (DOCS / page).exists(), page


def _python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(), re.S)


SNIPPET_PAGES = [
    *(f"environments/{c}.md" for c in ED_CARDS),
    "environments/rt-prostate.md",
    "getting-started.md",
    "grading.md",
]


@pytest.mark.parametrize("page", SNIPPET_PAGES)
def test_snippets__run_as_printed(page: str, tmp_path: Path) -> None:
    """What a reader copies runs: every python block of the cards, getting started and grading."""
    for i, code in enumerate(_python_blocks(DOCS / page)):
        if code.splitlines()[0].endswith(".py"):  # "# my_policy.py": a module's text, not a script
            continue
        run = subprocess.run(
            [sys.executable, "-c", code],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert run.returncode == 0, f"{page} block {i}:\n{run.stderr[-2000:]}"
        assert run.stdout.strip(), f"{page} block {i} prints nothing"
