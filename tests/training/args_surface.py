"""Every trainer's command-line surface as plain data: what tests/training/test_args.py compares.

``python -m tests.training.args_surface > tests/training/args_surface.json`` recorded it from the
code *before* the trainers' ``Args`` were folded onto shared bases: the refactor must leave every
flag, default, help text and recorded command exactly as it was. Deliberate changes since:
``python -m training.radiotherapy run --help`` now shows each field's docstring (it showed no help);
its flags and defaults are as recorded; and that command moved to the CLI layer, as
``hospital-marl train radiotherapy`` (the same parser: training no longer holds a command line that
would import the grader). ``train benchmarl`` gained ``--reward env|score`` (the shared ``reward``
option of ``train ppo``, whose surface is unchanged), a narrower ``--reward-scale`` help,
``--algorithm qmix|vdn`` and the off-policy flags ``--optimizer-steps``, ``--replay-batch``,
``--replay-size`` (re-recorded; nothing else moved). ``train rllib`` gained ``--resume PATH``
(re-recorded; an addition only). ``train fast-mappo`` and ``train fast-ppo`` were added (issue 26;
re-recorded, nothing else moved). Every trainer's ``--scenario`` accepts the registered
scenario distributions and ``night_shift_lean`` too (issue 28; its choices and help re-recorded,
together with the ``--reward`` help that had already dropped its SPEC reference). ``train ppo`` gained
``--warm-start heuristic|planner``, ``--warm-start-days``, ``--warm-start-epochs``, ``--warm-start-lr``,
``--dagger-rounds``, ``--dagger-days`` (issue 23). ``train fast-mappo`` gained ``--reward env|score``
(issue 26's score-reward ablation; re-recorded, an addition only). ``train radiotherapy`` gained
``--warm-start planner|anatomy_aware``, ``--warm-start-episodes``, ``--warm-start-epochs``,
``--warm-start-lr``, ``--dagger-rounds``, ``--dagger-episodes`` (issue 25; re-recorded, an addition only).
``train fast-mappo`` gained ``--obs-norm``, ``--norm-reward``, ``--recurrent`` (issue 26's ablations;
re-recorded, an addition only).
``train radiotherapy`` gained ``--warm-start rollout``, ``--rollout-base``, ``--rollout-tolerance``
(issue 25's rollout expert; re-recorded: the two flags added and ``--warm-start``'s help names the
new choice). ``train radiotherapy`` gained ``--residual anatomy_aware``, ``--defer-logit``,
``--residual-rounds``, ``--residual-episodes``, ``--residual-label-fraction``,
``--residual-tolerance``, ``--residual-fit``, ``--defer-bonuses`` (issue 25's residual learner; re-recorded,
additions only). ``train fast-mappo --recurrent``'s help says the actors are exported to ONNX (they
have been since the recurrent export landed; its help still said "No ONNX export"; re-recorded, that
help text only). ``train fast-mappo`` gained ``--actor mlp|entity`` and ``--entity-width`` (issue 40's
entity actor; re-recorded, additions only).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import fields
from typing import Any

TRAINERS = ("ppo", "marl", "rllib", "benchmarl", "fast-mappo", "fast-ppo")


def _action(action: argparse.Action) -> dict[str, Any]:
    kind = action.type
    return {
        "flags": list(action.option_strings),
        "dest": action.dest,
        "default": list(action.default) if isinstance(action.default, tuple) else action.default,
        "help": action.help,
        "choices": list(action.choices) if action.choices else None,
        "nargs": action.nargs,
        "metavar": action.metavar,
        "type": getattr(kind, "__name__", None) if kind else None,
        "action": type(action).__name__,
    }


def parser_surface(parser: argparse.ArgumentParser) -> list[dict[str, Any]]:
    exclusive = [[a.dest for a in g._group_actions] for g in parser._mutually_exclusive_groups]
    rows = [_action(a) for a in parser._actions if a.dest != "help"]
    return [*rows, {"exclusive": exclusive}]


def args_classes() -> dict[str, Any]:
    from training import ppo
    from training import radiotherapy as rt
    from training.benchmarl import train as benchmarl
    from training.fast.args import MappoArgs, PpoArgs
    from training.marl import trainer as marl
    from training.rllib import train as rllib

    return {
        "ppo": ppo.Args,
        "marl": marl.Args,
        "rllib": rllib.Args,
        "benchmarl": benchmarl.Args,
        "radiotherapy": rt.Args,
        "fast-mappo": MappoArgs,
        "fast-ppo": PpoArgs,
    }


def surface() -> dict[str, Any]:
    from hospital_marl_cli.app import build_parser

    parser = build_parser()
    train = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["train"]
    train_sub = next(a for a in train._actions if isinstance(a, argparse._SubParsersAction))
    out: dict[str, Any] = {}
    for name, cls in args_classes().items():
        defaults = cls()
        entry: dict[str, Any] = {
            "fields": [
                [f.name, list(v) if isinstance(v := getattr(defaults, f.name), tuple) else v]
                for f in fields(cls)
            ],
        }
        if name in TRAINERS:
            entry["command_line"] = defaults.command_line()
            entry["as_json"] = defaults.as_json()
        entry["parser"] = parser_surface(train_sub.choices[name])
        out[name] = entry
    return out


if __name__ == "__main__":
    print(json.dumps(surface(), indent=1, sort_keys=True))
