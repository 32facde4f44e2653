"""Execute the notebooks/ walkthroughs and store their outputs, small; or check the stored ones.

    python tools/notebooks.py --execute                 # every notebook, on the ci budget
    python tools/notebooks.py --execute 03 08 --budget full
    python tools/notebooks.py --check                   # exit 1 if a stored output is stale

The notebooks are committed **with** their outputs, so a reader on a code forge or on the docs
site sees every table and plot. Each executed code cell is stamped with a hash of its source
(``metadata.hospital_marl.source_sha256``): ``--check`` (and the test suite) fails when a cell
was edited after its outputs were stored, or was never run. Images are downscaled to at most
:data:`MAX_IMAGE_WIDTH` pixels wide and re-encoded, and volatile metadata (timings) is dropped,
so the repository stays light and a re-run changes only what the code changed.

The kernel runs with ``notebooks/`` as its working directory and this checkout first on
``PYTHONPATH``; ``--budget`` sets ``HOSPITAL_NOTEBOOK_BUDGET`` (``ci``: seconds to a minute per
notebook; ``full``: the meaningful numbers, minutes each).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = ROOT / "notebooks"
MAX_IMAGE_WIDTH = 720
CELL_TIMEOUT = 600
STAMP = "hospital_marl"


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def kernel_env(budget: str) -> dict[str, str]:
    env = dict(os.environ)
    env["HOSPITAL_NOTEBOOK_BUDGET"] = budget
    env["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"  # figures stored as PNG outputs
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def _shrink_png(data: str) -> str:
    from PIL import Image

    image = Image.open(io.BytesIO(base64.b64decode(data)))
    if image.width > MAX_IMAGE_WIDTH:
        height = round(image.height * MAX_IMAGE_WIDTH / image.width)
        image = image.resize((MAX_IMAGE_WIDTH, height), Image.Resampling.LANCZOS)
    if image.mode not in ("RGB", "RGBA", "P", "L"):
        image = image.convert("RGBA")
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    small = base64.b64encode(out.getvalue()).decode()
    return small if len(small) < len(data) else data


def tidy(notebook: Any, budget: str) -> None:
    """Stamp, shrink and strip what changes between identical runs."""
    notebook.metadata[STAMP] = {"budget": budget}
    notebook.metadata.pop("widgets", None)
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        cell.metadata.pop("execution", None)
        cell.metadata[STAMP] = {"source_sha256": source_hash(cell.source)}
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "image/png" in data:
                data["image/png"] = _shrink_png(data["image/png"])
            output.get("metadata", {}).pop("image/png", None)  # its size was the old image's
            if output.get("output_type") == "stream":
                output["text"] = output["text"].replace(f"{ROOT}{os.sep}", "")


def execute(path: Path, budget: str) -> None:
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK_DIR)}},
    )
    client.execute(env=kernel_env(budget))
    tidy(notebook, budget)
    nbformat.write(notebook, path)


def stale_cells(path: Path) -> list[str]:
    """Why the stored outputs of ``path`` are not those of its current code (empty: they are)."""
    import nbformat

    notebook = nbformat.read(path, as_version=4)
    problems = []
    if STAMP not in notebook.metadata:
        problems.append("never executed by tools/notebooks.py --execute")
    for i, cell in enumerate(notebook.cells):
        if cell.cell_type != "code" or not cell.source.strip():
            continue
        stamp = cell.metadata.get(STAMP, {}).get("source_sha256")
        if cell.get("execution_count") is None:
            problems.append(f"cell {i}: not executed")
        elif stamp != source_hash(cell.source):
            problems.append(f"cell {i}: edited after its outputs were stored")
    return problems


def _select(names: list[str]) -> list[Path]:
    paths = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
    if not names:
        return paths
    chosen = [p for p in paths if any(p.name.startswith(n) or p.stem == n for n in names)]
    unknown = [n for n in names if not any(p.name.startswith(n) or p.stem == n for p in paths)]
    if unknown:
        raise SystemExit(f"no notebook named {unknown}; notebooks: {[p.name for p in paths]}")
    return chosen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--execute", action="store_true", help="run the notebooks and store their outputs")
    mode.add_argument("--check", action="store_true", help="exit 1 if a stored output is stale")
    parser.add_argument("names", nargs="*", help="notebooks by number or name (default: all)")
    parser.add_argument("--budget", choices=("ci", "full"), default="ci", help="HOSPITAL_NOTEBOOK_BUDGET")
    args = parser.parse_args()
    paths = _select(args.names)
    if args.check:
        bad = {p.name: stale_cells(p) for p in paths}
        for name, problems in bad.items():
            for problem in problems:
                fix = "run `python tools/notebooks.py --execute`"
                print(f"notebooks/{name}: {problem}: {fix}", file=sys.stderr)
        return 1 if any(bad.values()) else 0
    from nbclient.exceptions import CellExecutionError, CellTimeoutError

    failed = []
    for path in paths:
        print(f"executing {path.name} (budget {args.budget}) ...", flush=True)
        try:
            execute(path, args.budget)
        except (CellExecutionError, CellTimeoutError) as exc:  # the others still run; the file is kept
            failed.append(path.name)
            print(f"  FAILED, left unchanged: {str(exc).splitlines()[-1][:300]}", flush=True)
            continue
        print(f"  stored, {path.stat().st_size / 1e3:.0f} kB", flush=True)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
