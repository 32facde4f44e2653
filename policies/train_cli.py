"""``hospital-marl train ppo|marl|export`` and ``plot curve``: subcommands the CLI discovers.

:func:`add_commands` is called by ``hospital_marl.cli``; importing this module
is cheap (no torch), so ``hospital-marl --help`` stays fast and works without
the ``train`` extra. The flags of ``train ppo`` are generated from
:class:`policies.train_ppo.Args` (one source of truth: its field docstrings are the help).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from policies.rllib.cli import add_rllib_parser


def add_dataclass_flags(
    parser: argparse.ArgumentParser,
    cls: type,
    docs: dict[str, str],
    choices: dict[str, Sequence[str]],
    exclusive: tuple[str, ...] = ("scenario", "all_scenarios"),
) -> None:
    """One flag per field of a trainer's Args dataclass; its field docstring is the help.

    Booleans defaulting to True become ``--no-<name>``; fields in ``exclusive``
    (``--scenario S`` | ``--all-scenarios``) are mutually exclusive.
    """
    group = parser.add_mutually_exclusive_group()
    for f in fields(cls):
        flag = "--" + f.name.replace("_", "-")
        default = f.default
        doc = docs.get(f.name, "").replace("%", "%%")
        target: Any = group if f.name in exclusive else parser
        if isinstance(default, bool):
            if default:
                target.add_argument(
                    "--no-" + f.name.replace("_", "-"), dest=f.name, action="store_false", help=doc
                )
            else:
                target.add_argument(flag, dest=f.name, action="store_true", help=doc)
        elif isinstance(default, tuple):
            target.add_argument(
                flag, dest=f.name, type=int, nargs="+", default=default, metavar="N", help=doc
            )
        elif f.name in choices:
            target.add_argument(flag, dest=f.name, choices=choices[f.name], default=default, help=doc)
        elif f.name in ("save", "tensorboard"):
            target.add_argument(flag, dest=f.name, default=default, metavar="PATH", help=doc)
        else:
            kind = type(default)
            target.add_argument(
                flag, dest=f.name, type=kind, default=default, help=f"{doc} (default {default})"
            )


def _trainer_values(args: argparse.Namespace, cls: type) -> dict[str, Any] | None:
    """The namespace as the trainer's Args fields, or None after printing why not (exit 2)."""
    from hospital_marl.core.scenarios import SCENARIOS

    if args.scenario not in SCENARIOS:
        print(
            f"hospital-marl: error: unknown scenario {args.scenario!r}; valid: {', '.join(SCENARIOS)}",
            file=sys.stderr,
        )
        return None
    values = {f.name: getattr(args, f.name) for f in fields(cls) if hasattr(args, f.name)}
    values["net_arch"] = tuple(values["net_arch"])
    return values


def cmd_train_ppo(args: argparse.Namespace) -> int:
    from policies.train_ppo import Args, train

    values = _trainer_values(args, Args)
    if values is None:
        return 2
    if args.quiet:
        values["progress"] = False
    try:
        run_args = Args(**values)
    except ValueError as exc:
        print(f"hospital-marl: error: {exc}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    try:
        run_dir = train(run_args)
    except ImportError as exc:  # the `train` extra (or tensorboard) is missing
        print(f"hospital-marl: error: {exc}", file=sys.stderr)
        return 2
    summary = {
        "run_dir": str(run_dir),
        "timesteps": run_args.timesteps,
        "wall_time_s": round(time.perf_counter() - started, 1),
        "command": json.loads((run_dir / "model.json").read_text())["command"],
    }
    curve = json.loads((run_dir / "curve.json").read_text())
    if curve:
        best = max(curve, key=lambda row: row["eval_score"])
        summary["best_eval"] = {k: best[k] for k in ("timesteps", "eval_score", "invalid_action_rate")}
        summary["final_eval"] = {k: curve[-1][k] for k in ("timesteps", "eval_score", "invalid_action_rate")}
    print(json.dumps(summary, indent=2))
    return 0


def cmd_train_export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from policies.train_ppo import export_checkpoint

    run_dir, out = Path(args.run_dir), Path(args.output)
    if not (run_dir / "best_model.zip").exists():
        print(f"hospital-marl: error: no best_model.zip in {run_dir}", file=sys.stderr)
        return 2
    if out.suffix != ".zip":
        print(f"hospital-marl: error: OUTPUT must end in .zip, got {out}", file=sys.stderr)
        return 2
    print(export_checkpoint(run_dir, out))
    return 0


def cmd_plot_curve(args: argparse.Namespace) -> int:
    from policies.plots import plot_curve

    try:
        out = plot_curve(args.run_dir, args.output, per_scenario=not args.overall_only)
    except (FileNotFoundError, ImportError) as exc:
        print(f"hospital-marl: error: {exc}", file=sys.stderr)
        return 2
    print(out)
    return 0


def cmd_train_marl(args: argparse.Namespace) -> int:
    from policies.marl import METADATA_FILE, Args, train

    values = _trainer_values(args, Args)
    if values is None:
        return 2
    try:
        run_args = Args(**values)
    except ValueError as exc:
        print(f"hospital-marl: error: {exc}", file=sys.stderr)
        return 2
    try:
        run_dir = train(run_args)
    except ImportError as exc:
        print(f"hospital-marl: error: {exc}", file=sys.stderr)
        return 2
    meta = json.loads((run_dir / METADATA_FILE).read_text())
    summary = {k: meta[k] for k in ("method", "timesteps", "wall_time_s", "command")}
    summary["run_dir"] = str(run_dir)
    curve = json.loads((run_dir / "curve.json").read_text())
    if curve:
        summary["final_eval"] = {k: curve[-1][k] for k in ("timesteps", "eval_score", "invalid_action_rate")}
    print(json.dumps(summary, indent=2))
    return 0


def add_commands(sub: Any) -> None:
    """Register ``train`` and ``plot`` on the ``hospital-marl`` subparsers."""
    train = sub.add_parser("train", help="train a learned policy (needs the `train` extra)")
    train_sub = train.add_subparsers(dest="algorithm", required=True)
    ppo = train_sub.add_parser(
        "ppo",
        help="MaskablePPO on the composed env (flat) or the team env (team)",
        description="Train sb3-contrib MaskablePPO; saves the model, its metadata and a learning curve "
        "in a run directory (see policies/train_ppo.py).",
    )
    from policies import marl, train_ppo

    add_dataclass_flags(ppo, train_ppo.Args, train_ppo.field_docs(train_ppo.Args), train_ppo.CHOICES)
    ppo.add_argument("--quiet", "-q", action="store_true", default=argparse.SUPPRESS)
    ppo.set_defaults(func=cmd_train_ppo)
    add_rllib_parser(train_sub)
    marl_parser = train_sub.add_parser(
        "marl",
        help="per-role learners on the team reward: iterated best response (ibr) or parameter sharing",
        description="Train per-role masked PPO (policies/marl.py): --method ibr (one MaskablePPO per role, "
        "the others frozen, in rounds) or --method shared (one network over the parallel env). Saves the "
        "models, model.json and a team-track learning curve in a run directory.",
    )
    add_dataclass_flags(marl_parser, marl.Args, marl.field_docs(marl.Args), marl.CHOICES)
    marl_parser.set_defaults(func=cmd_train_marl)

    export = train_sub.add_parser(
        "export",
        help="ship a run's best model as OUTPUT.zip + OUTPUT.json (optimizer state dropped)",
    )
    export.add_argument("run_dir", metavar="RUN_DIR", help="a `train ppo` run directory")
    export.add_argument("output", metavar="OUTPUT", help="e.g. policies/checkpoints/ppo_flat.zip")
    export.set_defaults(func=cmd_train_export)

    plot = sub.add_parser("plot", help="plots of training runs (needs matplotlib)")
    plot_sub = plot.add_subparsers(dest="plot", required=True)
    curve = plot_sub.add_parser("curve", help="the learning curve of a run directory, as a PNG")
    curve.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (with curve.json)")
    curve.add_argument("--output", "-o", metavar="PNG", help="default: RUN_DIR/curve.png")
    curve.add_argument("--overall-only", action="store_true", help="omit the per-scenario lines")
    curve.set_defaults(func=cmd_plot_curve)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m policies.train_ppo ...`` lands here (as ``hospital-marl train ppo ...``)."""
    from hospital_marl.cli import main as cli_main

    return cli_main(argv)
