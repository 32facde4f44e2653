"""Ship the re-fitted radiotherapy learners: each learner's seed with the best validation figure.

    python tools/rt_ship.py --runs runs/rt_v3 [--learners ppo option_selector ranked_selector]

Reads only validation figures (never a test patient):

- ``option_selector``: each ``rt_option_selector_seedS.json``'s selected validation gain over
  ``anatomy_aware`` (``tools/rt_options.py select``); the largest worst-task gain ships;
- ``ranked_selector``: ``RUNS/edits_sweep.json`` (``tools/rt_edits.py sweep``), each seed's
  validation gain at the chosen per-site setting; the largest worst-task gain ships;
- ``ppo``: each ``RUNS/ppo_sS/best_model.json``'s selecting point (worst-task margin over the best
  scripted baseline, ``hospital-marl train radiotherapy``); its ``best_model.npz`` is copied to
  ``rt_ppo_seedS.npz`` and the largest margin ships (``hospital-marl train export``'s files).

Ties go to the next-worst task, then the lower seed. The shipped ``.json`` says which seed and why
(``"shipped"``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hospital_marl.radiotherapy.core.tasks import BUILTIN_TASKS  # noqa: E402
from policies.radiotherapy.learned import CHECKPOINT_DIR  # noqa: E402
from training.radiotherapy import export  # noqa: E402

SEEDS = (0, 1, 2, 3, 4)


def _best(figures: dict[int, dict[str, float]]) -> tuple[int, str]:
    """The seed whose worst task is best, and a sentence listing every seed's figures."""
    worst = {s: min(f.values()) for s, f in figures.items()}
    # the worst task first, ties broken by the next-worst task, then the lower seed
    seed = max(figures, key=lambda s: (sorted(round(v, 10) for v in figures[s].values()), -s))
    listed = "; ".join(
        f"seed {s}: " + " / ".join(f"{f[t]:+.4f}" for t in BUILTIN_TASKS) for s, f in figures.items()
    )
    return seed, (
        f"seed {seed}: the largest worst-task validation figure ({worst[seed]:+.4f}; ties broken by the "
        f"next-worst task; {listed})"
    )


def _ship(stem: str, seed: int, why: str, extra: dict[str, Any] | None = None) -> None:
    source = CHECKPOINT_DIR / f"{stem}_seed{seed}.npz"
    shutil.copyfile(source, CHECKPOINT_DIR / f"{stem}.npz")
    meta = json.loads(source.with_suffix(".json").read_text())
    meta["shipped"] = {"seed": seed, "why": why + "; chosen before any test patient was graded"}
    meta["score_version"] = 3
    meta |= extra or {}
    (CHECKPOINT_DIR / f"{stem}.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(stem, "shipped", why)


def option_selector() -> None:
    figures = {}
    for s in SEEDS:
        meta = json.loads((CHECKPOINT_DIR / f"rt_option_selector_seed{s}.json").read_text())
        figures[s] = meta["validation"]["selected"]["gain"]
    _ship("rt_option_selector", *_best(figures))


def ranked_selector(runs: Path) -> None:
    sweep = json.loads((runs / "edits_sweep.json").read_text())
    figures: dict[int, dict[str, float]] = {s: {} for s in sweep["seeds"]}
    for task, chosen in sweep["chosen"].items():
        key = "off" if chosen["ridge"] is None else f"{chosen['ridge']}/{chosen['tau']}"
        for s, gain in zip(sweep["seeds"], sweep["grid"][task][key]):
            figures[s][task] = gain
    _ship("rt_ranked_selector", *_best(dict(sorted(figures.items()))))


def ppo(runs: Path) -> None:
    figures = {}
    for s in SEEDS:
        run = runs / f"ppo_s{s}"
        meta = json.loads((run / "best_model.json").read_text())
        figures[s] = {t: meta["selected"]["margin"] for t in BUILTIN_TASKS}  # one worst-task margin
        shutil.copyfile(run / "best_model.npz", CHECKPOINT_DIR / f"rt_ppo_seed{s}.npz")
        shutil.copyfile(run / "best_model.json", CHECKPOINT_DIR / f"rt_ppo_seed{s}.json")
    seed, why = _best(figures)
    export(runs / f"ppo_s{seed}", CHECKPOINT_DIR / "rt_ppo.npz")
    meta = json.loads((CHECKPOINT_DIR / "rt_ppo.json").read_text())
    meta["shipped"] = {
        "seed": seed,
        "why": why.replace("figure", "worst-task margin") + "; chosen on validation",
    }
    meta["score_version"] = 3
    (CHECKPOINT_DIR / "rt_ppo.json").write_text(json.dumps(meta, indent=1) + "\n")
    print("rt_ppo shipped", why)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, required=True)
    parser.add_argument("--learners", nargs="+", default=["option_selector", "ranked_selector", "ppo"])
    args = parser.parse_args()
    for name in args.learners:
        {
            "option_selector": option_selector,
            "ranked_selector": lambda: ranked_selector(args.runs),
            "ppo": lambda: ppo(args.runs),
        }[name]()


if __name__ == "__main__":
    main()
