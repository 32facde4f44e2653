"""``train ppo|marl|rllib|benchmarl|radiotherapy|export``, ``plot curve``: training.

Training needs the ``train`` (``rllib``, ``marl``) extra.

The flags of each ``train`` command are generated from its trainer's ``Args`` dataclass
(:class:`training.args.TrainArgs`: the field docstrings are the help). Building the parser
imports no torch or ray, so ``hospital-marl --help`` works without the extras; a command
whose extra is missing says what to install.

This layer hands each trainer its evaluation function (:func:`grading.grade`, or
:func:`grading.radiotherapy.grade_all` for the radiotherapy trainer): trainers never import the
grader (a contract in pyproject.toml), so the same ``train(args, evaluate)`` runs with any grader.
"""

from __future__ import annotations

import argparse
import importlib
import json
import time
from pathlib import Path
from typing import Any

from grading import grade
from grading.radiotherapy import grade_all
from hospital_marl_cli.common import CLIError
from training import ppo
from training import radiotherapy as rt
from training.args import TrainArgs
from training.benchmarl import train as benchmarl
from training.fast.args import MappoArgs, PpoArgs
from training.marl import trainer as marl
from training.rllib import train as rllib


def run_args(cls: type[TrainArgs] | type[rt.Args], args: argparse.Namespace) -> Any:
    """The namespace as the trainer's ``Args`` (its validation errors as one line)."""
    try:
        values = cls.from_namespace(args)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    if getattr(args, "quiet", False) and hasattr(values, "progress"):
        values.progress = False
    return values


def run(train: Any, *values: Any) -> Path:
    """``train(*values)``, a missing extra's ImportError as one line."""
    try:
        return train(*values)
    except ImportError as exc:  # the `train` / `rllib` extra (or tensorboard) is missing
        raise CLIError(str(exc)) from None


def report(summary: dict[str, Any], failure: str = "") -> int:
    """Print the run's JSON summary; then exit 1 with ``failure`` if the masked-action audit failed."""
    print(json.dumps(summary, indent=2))
    if failure:
        raise SystemExit(f"hospital-marl: masked-action audit FAILED: {failure}")
    return 0


def role_masks(summary: dict[str, Any]) -> str:
    """The role-mask audit's failure (empty when no action broke its role's mask)."""
    taken = summary["audit"]["masked_actions_taken"]
    return f"{taken} actions were taken that their role's mask forbade (must be 0)" if taken else ""


def trainer(module: str, command: str) -> Any:
    """``training.fast.<module>`` (torch: the ``train`` extra), or one line saying what to install."""
    try:
        return importlib.import_module(f"training.fast.{module}")
    except ImportError as exc:
        raise CLIError(f"{exc}: train {command} needs the `train` extra") from None


def last_evals(run_dir: Path) -> dict[str, Any]:
    curve_file = run_dir / "curve.json"
    curve = json.loads(curve_file.read_text()) if curve_file.exists() else []
    if not curve or "eval_score" not in curve[-1]:
        return {}
    keys = ("timesteps", "eval_score", "invalid_action_rate")
    best = max(curve, key=lambda row: row["eval_score"])
    return {"best_eval": {k: best[k] for k in keys}, "final_eval": {k: curve[-1][k] for k in keys}}


def cmd_train_ppo(args: argparse.Namespace) -> int:
    values = run_args(ppo.Args, args)
    started = time.perf_counter()
    run_dir = run(ppo.train, values, grade)
    summary = {
        "run_dir": str(run_dir),
        "timesteps": values.timesteps,
        "wall_time_s": round(time.perf_counter() - started, 1),
        "command": values.command_line(),
        **last_evals(run_dir),
    }
    return report(summary)


def cmd_train_marl(args: argparse.Namespace) -> int:
    values = run_args(marl.Args, args)
    run_dir = run(marl.train, values, grade)
    meta = json.loads((run_dir / marl.METADATA_FILE).read_text())
    summary = {k: meta[k] for k in ("method", "timesteps", "wall_time_s", "command")}
    summary["run_dir"] = str(run_dir)
    summary.update(last_evals(run_dir))
    return report(summary)


def cmd_train_rllib(args: argparse.Namespace) -> int:
    """Train (graded on validation days), then print a JSON summary; exit 1 if the masked-action
    audit is not 0."""
    values = run_args(rllib.Args, args)
    try:
        values = rllib.resume_args(values)  # --resume: the run's own arguments, or a clear error
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    run_dir = run(rllib.train, values, grade)
    summary = rllib.summary(run_dir)
    audit = summary["audit"]
    failed = audit["masked_actions_taken"] or audit["env_invalid_actions"]
    return report(
        summary,
        f"{audit['masked_actions_taken']} masked actions taken, {audit['env_invalid_actions']} invalid "
        "actions counted by the env (both must be 0)"
        if failed
        else "",
    )


def cmd_train_benchmarl(args: argparse.Namespace) -> int:
    """Train with BenchMARL (MAPPO, IPPO, QMIX, VDN), print a JSON summary; exit 1 on a masked action."""
    values = run_args(benchmarl.Args, args)
    run_dir = run(benchmarl.train, values, grade)
    summary = benchmarl.summary(run_dir)
    return report(summary, role_masks(summary))


def cmd_train_fast_mappo(args: argparse.Namespace) -> int:
    """Train MAPPO / IPPO with the fast trainer, print a JSON summary; exit 1 on a masked action."""
    values = run_args(MappoArgs, args)
    mappo = trainer("mappo", "fast-mappo")
    summary = mappo.summary(run(mappo.train, values, grade))
    return report(summary, role_masks(summary))


def cmd_train_fast_ppo(args: argparse.Namespace) -> int:
    """Train masked PPO (flat or team track) with the fast trainer; print a JSON summary."""
    values = run_args(PpoArgs, args)
    fast_ppo = trainer("ppo", "fast-ppo")
    summary = fast_ppo.summary(run(fast_ppo.train, values, grade))
    return report(summary, str(summary["audit"]) if summary["audit"]["masked_actions_taken"] else "")


def cmd_train_radiotherapy(args: argparse.Namespace) -> int:
    """Train the radiotherapy planner (:mod:`training.radiotherapy`); print the run directory."""
    print(run(rt.train, run_args(rt.Args, args), grade_all))
    return 0


def cmd_train_export(args: argparse.Namespace) -> int:
    from training.export import export_checkpoint, export_run

    run_dir, out = Path(args.run_dir), Path(args.output)
    if not run_dir.is_dir():
        raise CLIError(f"no run directory {run_dir}")
    try:
        if (run_dir / "best_model.npz").exists():  # a radiotherapy run
            if out.suffix != ".npz":
                raise CLIError(f"OUTPUT must end in .npz (a radiotherapy run's numpy weights), got {out}")
            rt.export(run_dir, out)
            print(out)
        elif (run_dir / "best_model.zip").exists():
            if out.suffix != ".zip":
                raise CLIError(
                    f"OUTPUT must end in .zip (the .onnx and .json are written beside it), got {out}"
                )
            print(export_checkpoint(run_dir, out))
        else:
            print(export_run(run_dir, out))
    except FileNotFoundError:
        raise CLIError(
            f"{run_dir} is not a run: looked for best_model.npz (train radiotherapy), best_model.zip "
            "(train ppo), model.json (train marl), rllib.json (train rllib)"
        ) from None
    except ImportError as exc:
        raise CLIError(f"{exc}: export needs the `train` extra") from None
    return 0


def cmd_plot_curve(args: argparse.Namespace) -> int:
    from training.plots import plot_curve

    try:
        out = plot_curve(args.run_dir, args.output, per_scenario=not args.overall_only)
    except (FileNotFoundError, ImportError) as exc:
        raise CLIError(str(exc)) from None
    print(out)
    return 0


def add_commands(sub: Any) -> None:
    """Register ``train`` (ppo, marl, rllib, benchmarl, fast-mappo, radiotherapy, export) and ``plot``."""
    train = sub.add_parser("train", help="train a learned policy (needs the `train` extra)")
    train_sub = train.add_subparsers(dest="algorithm", required=True, metavar="ALGORITHM")

    p = train_sub.add_parser(
        "ppo",
        help="MaskablePPO on the composed env (flat) or the team env (team)",
        description="Train sb3-contrib MaskablePPO; saves the model, its metadata and a learning curve "
        "in a run directory (see training/ppo.py).",
    )
    ppo.Args.add_flags(p)
    p.add_argument("--quiet", "-q", action="store_true", default=argparse.SUPPRESS, help="no progress bar")
    p.set_defaults(func=cmd_train_ppo)

    p = train_sub.add_parser(
        "marl",
        help="per-role learners on the team reward: iterated best response (ibr) or parameter sharing",
        description="Train per-role masked PPO (training/marl/): --method ibr (one MaskablePPO per role, "
        "the others frozen, in rounds) or --method shared (one network over the parallel env). Saves the "
        "models, model.json and a team-track learning curve in a run directory.",
    )
    marl.Args.add_flags(p)
    p.set_defaults(func=cmd_train_marl)

    p = train_sub.add_parser(
        "rllib",
        help="one masked PPO policy per role with Ray RLlib on the AEC env (needs the `rllib` extra)",
        description="Train masked PPO with Ray RLlib, one module per role; saves an RLlib checkpoint, "
        "rllib.json and a learning curve with the masked-action audit in a run directory "
        "(see policies/rllib/README.md). Local by default; --address auto joins a Ray cluster.",
    )
    rllib.Args.add_flags(p)
    p.add_argument("--quiet", "-q", action="store_true", default=argparse.SUPPRESS, help="no progress bar")
    p.set_defaults(func=cmd_train_rllib)

    p = train_sub.add_parser(
        "benchmarl",
        help="MAPPO, IPPO, QMIX or VDN from BenchMARL (TorchRL) on the batched env, one actor per role "
        "(`marl` extra)",
        description="Train BenchMARL's MAPPO (critics on the global state), IPPO (critics on each role's "
        "observation), or QMIX / VDN (Q-learning per role) on a natively batched TorchRL env; grades on "
        "validation days periodically, keeps the "
        "best actors as ONNX, and writes benchmarl.json and a learning curve (see training/benchmarl/).",
    )
    benchmarl.Args.add_flags(p)
    p.add_argument("--quiet", "-q", action="store_true", default=argparse.SUPPRESS, help="no grading lines")
    p.set_defaults(func=cmd_train_benchmarl)

    p = train_sub.add_parser(
        "fast-mappo",
        help="MAPPO or IPPO from scratch at the box's speed: a single-file torch trainer on the natively "
        "batched env (`train` extra)",
        description="Train MAPPO (critic on the global state) or IPPO (critic per role) with the "
        "CleanRL-style trainer of training/fast/mappo.py on B departments stepped together; grades on "
        "validation days periodically, keeps the best actors as ONNX, writes fast.json and a learning curve.",
    )
    MappoArgs.add_flags(p)
    p.add_argument("--quiet", "-q", action="store_true", default=argparse.SUPPRESS, help="no grading lines")
    p.set_defaults(func=cmd_train_fast_mappo)

    p = train_sub.add_parser(
        "fast-ppo",
        help="masked PPO from scratch at the box's speed, flat or team track: a single-file torch "
        "trainer on the natively batched env (`train` extra)",
        description="Train masked PPO with the CleanRL-style trainer of training/fast/ppo.py on B "
        "departments stepped together, on the same features as the shipped ppo / team_ppo; grades on "
        "validation days periodically; writes best_model.onnx/.json (policies.load(RUN_DIR)) and a curve.",
    )
    PpoArgs.add_flags(p)
    p.add_argument("--quiet", "-q", action="store_true", default=argparse.SUPPRESS, help="no grading lines")
    p.set_defaults(func=cmd_train_fast_ppo)

    p = train_sub.add_parser(
        "radiotherapy",
        help="MaskablePPO on the radiotherapy planning env, all tasks, one model (`train` extra)",
        description="Train sb3-contrib MaskablePPO on the radiotherapy planning env; selects on validation "
        "patients and writes best_model.zip/.npz/.json and curve.json (see training/radiotherapy.py).",
    )
    rt.Args.add_flags(p)
    p.set_defaults(func=cmd_train_radiotherapy)

    p = train_sub.add_parser(
        "export",
        help="ship a run: a ppo run's best model as OUTPUT.zip + .onnx + .json; a marl / rllib run "
        "as the directory OUTPUT; a radiotherapy run as OUTPUT.npz + .json + .zip (optimizer state dropped)",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="a `train ppo|marl|rllib|radiotherapy` run directory")
    p.add_argument("output", metavar="OUTPUT", help="e.g. policies/checkpoints/ppo_flat.zip, or a directory")
    p.set_defaults(func=cmd_train_export)

    plot = sub.add_parser("plot", help="plots of training runs (needs matplotlib)")
    plot_sub = plot.add_subparsers(dest="plot", required=True, metavar="PLOT")
    p = plot_sub.add_parser("curve", help="the learning curve of a run directory, as a PNG")
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (with curve.json)")
    p.add_argument("--output", "-o", metavar="PNG", help="default: RUN_DIR/curve.png")
    p.add_argument("--overall-only", action="store_true", help="omit the per-scenario lines")
    p.set_defaults(func=cmd_plot_curve)
