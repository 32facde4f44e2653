"""One arguments base for every trainer: flags, ``--help`` from field docstrings, ``command_line``.

A trainer's options are a dataclass deriving from :class:`TrainArgs`; each field's
docstring (the string literal under it) is its ``--help``, so the options, their
help and the command a run records cannot drift apart. ``hospital-marl train ppo``,
``train marl``, ``train rllib`` and ``train benchmarl`` are all generated from their dataclasses here.

The hyperparameters several trainers share (learning rate, discount, GAE, clipping, entropy,
minibatch, epochs, evaluation days, reward scale, ...) are defined once, default and help, in
:class:`Hyperparameters`; a trainer declares one with :func:`shared`, under its own flag name
(each trainer keeps the name its library uses: ``--clip-range``, ``--clip-param``,
``--clip-epsilon``) and in its own place on the command line. A docstring under the trainer's
field narrows the help where the trainer means something more specific.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import itertools
from collections.abc import Mapping
from dataclasses import MISSING, Field, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

from hospital_marl.core.scenarios import BUILTIN_SCENARIOS, DEFAULT_SCENARIO, DISTRIBUTIONS, SCENARIOS

EXCLUSIVE = ("scenario", "all_scenarios")
"""``--scenario S`` and ``--all-scenarios`` exclude each other in every trainer."""
PATH_FIELDS = ("save", "tensorboard", "resume")


def field_docs(cls: type) -> dict[str, str]:
    """Each dataclass field's docstring (the string literal under it), whitespace folded."""
    docs: dict[str, str] = {}
    body = ast.parse(inspect.getsource(cls)).body[0].body  # type: ignore[attr-defined]
    for node, nxt in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


@dataclass(frozen=True)
class Hyperparameters:
    """The options several trainers share, each defined once: its default and its ``--help`` (the
    docstring). Declared in a trainer's ``Args`` with :func:`shared`."""

    scenario: str = DEFAULT_SCENARIO
    """The scenario to train on (ignored with --all-scenarios)."""
    all_scenarios: bool = False
    """Train on the five built-in scenarios, switched every episode."""
    seed: int = 0
    """Seeds torch, sampling and the training envs' days."""
    learning_rate: float = 3e-4
    """Adam step size."""
    gamma: float = 0.97
    """Discount factor."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    clip: float = 0.2
    """PPO clipping."""
    entropy: float = 0.003
    """Entropy bonus."""
    reward: str = "env"
    """env: the env's dense reward; score: the graded composite, paid out per step
    (hospital_marl.envs.wrappers.ScoreReward: an episode's return is its score - 90)."""
    reward_overrides: str = ""
    """Training-only RewardTable changes, e.g. "critical_unattended_per_tick=-2" (comma-separated)."""
    value_loss: float = 0.5
    """Value loss weight."""
    minibatch: int = 256
    """Minibatch size of the PPO update."""
    epochs: int = 10
    """Passes over each rollout."""
    eval_episodes: int = 5
    """Episodes per scenario in each periodic evaluation."""
    eval_seed: int = 1000
    """Base seed of the evaluation days (not 0: the reported grades use seed 0)."""
    reward_scale: float = 0.02
    """Rewards are multiplied by this for learning (a death is -15)."""
    reward_mode: str = "team"
    """team: every role gets the team reward; role: action-caused rewards go to the acting role."""
    torch_threads: int = 1
    """torch CPU threads."""
    progress: bool = True
    """Show a progress bar on stderr while training."""


REWARDS = ("env", "score")
"""The values of the shared ``reward`` option: the env's dense reward, or the graded score."""
SHARED_DEFAULTS = Hyperparameters()
SHARED_KEY = "shared"
"""The field metadata key naming the :class:`Hyperparameters` field a trainer's field is."""


def shared(name: str, default: Any = MISSING) -> Any:
    """A trainer's field defined by :class:`Hyperparameters` ``name``: its default (unless the
    trainer's differs: ``default``) and its help (unless a docstring under the field narrows it)."""
    if name not in {f.name for f in fields(Hyperparameters)}:
        raise KeyError(f"no shared hyperparameter {name!r}")
    value = getattr(SHARED_DEFAULTS, name) if default is MISSING else default
    return field(default=value, metadata={SHARED_KEY: name})


def option_docs(cls: type) -> dict[str, str]:
    """Each field's help: its own docstring, else its shared hyperparameter's (:func:`shared`)."""
    own, common = field_docs(cls), field_docs(Hyperparameters)
    docs = {f.name: common[f.metadata[SHARED_KEY]] for f in fields(cls) if SHARED_KEY in f.metadata}
    return {**docs, **own}


def _default(f: Field) -> Any:
    return f.default if f.default is not MISSING else None


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


class TrainArgs:
    """Mixin of a trainer's ``@dataclass Args``: the flags, the namespace round trip, the command.

    Subclasses set :attr:`COMMAND` (``"hospital-marl train ppo"``), :attr:`CHOICES`
    (fields taking one of a few names), :attr:`ALWAYS_SHOWN` (fields the recorded
    command always spells out, e.g. the seed) and :attr:`INT_FIELDS` (fields
    defaulting to ``None`` whose values are ints). They must have ``scenario``,
    ``all_scenarios``, ``seed`` and ``save`` fields and a :attr:`RUN_PREFIX`.
    """

    COMMAND: ClassVar[str] = "hospital-marl train"
    CHOICES: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    ALWAYS_SHOWN: ClassVar[tuple[str, ...]] = ("seed",)
    INT_FIELDS: ClassVar[tuple[str, ...]] = ()
    RUN_PREFIX: ClassVar[str] = "run"

    @property
    def run_prefix(self) -> str:
        """The default run directory's prefix (``ppo`` adds the track, ``marl`` the method)."""
        return self.RUN_PREFIX

    # ------------------------------------------------------------- derived
    @property
    def scenarios(self) -> tuple[str, ...]:
        """The scenarios a run trains on (cycled per episode: :class:`training.common.ScenarioCycler`)."""
        return tuple(BUILTIN_SCENARIOS) if self.all_scenarios else (self.scenario,)  # type: ignore[attr-defined]

    @property
    def run_dir(self) -> Path:
        """``--save``, or ``runs/<RUN_PREFIX>_<scenario|all>_s<seed>``."""
        where = "all" if self.all_scenarios else self.scenario  # type: ignore[attr-defined]
        return Path(self.save or f"runs/{self.run_prefix}_{where}_s{self.seed}")  # type: ignore[attr-defined]

    def as_json(self) -> dict[str, Any]:
        """The fields, tuples as lists (what a run's metadata records)."""
        return {
            f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v) for f in fields(self)
        }  # type: ignore[arg-type]

    @classmethod
    def from_json(cls, recorded: Mapping[str, Any]) -> TrainArgs:
        """Back from :meth:`as_json` (lists to tuples)."""
        return cls(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in recorded.items()})

    def command_line(self) -> str:
        """The command reproducing these args: :attr:`ALWAYS_SHOWN` fields and the non-default ones."""
        parts = [self.COMMAND]
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if value == _default(f) and f.name not in self.ALWAYS_SHOWN:
                continue
            if isinstance(value, bool):
                parts.append(_flag(f.name) if value else "--no-" + f.name.replace("_", "-"))
            elif isinstance(value, tuple):
                parts.append(_flag(f.name) + " " + " ".join(map(str, value)))
            else:
                parts.append(f"{_flag(f.name)} {value}")
        return " ".join(parts)

    # ------------------------------------------------------------- the CLI
    @classmethod
    def add_flags(cls, parser: argparse.ArgumentParser) -> None:
        """One flag per field; its docstring is the help.

        Booleans defaulting to True become ``--no-<name>`` (the docstring says what the
        field does when on; the help says the flag turns it off); ``--scenario`` and
        ``--all-scenarios`` exclude each other.
        """
        docs = option_docs(cls)
        group = parser.add_mutually_exclusive_group()
        for f in fields(cls):  # type: ignore[arg-type]
            default = _default(f)
            doc = docs.get(f.name, "").replace("%", "%%")
            target: Any = group if f.name in EXCLUSIVE else parser
            if isinstance(default, bool):
                if default:
                    target.add_argument(
                        "--no-" + f.name.replace("_", "-"),
                        dest=f.name,
                        action="store_false",
                        help=f"turn off (on by default): {doc}",
                    )
                else:
                    target.add_argument(_flag(f.name), dest=f.name, action="store_true", help=doc)
            elif isinstance(default, tuple):
                target.add_argument(
                    _flag(f.name), dest=f.name, type=int, nargs="+", default=default, metavar="N", help=doc
                )
            elif f.name in cls.CHOICES:
                target.add_argument(
                    _flag(f.name), dest=f.name, choices=cls.CHOICES[f.name], default=default, help=doc
                )
            elif f.name == "scenario":
                target.add_argument(
                    _flag(f.name),
                    dest=f.name,
                    choices=(*SCENARIOS, *DISTRIBUTIONS),
                    default=default,
                    metavar="S",
                    help=f"{doc} (default {default}; one of {', '.join(SCENARIOS)}; "
                    f"or a distribution: {', '.join(DISTRIBUTIONS)})",
                )
            elif f.name in PATH_FIELDS:
                target.add_argument(_flag(f.name), dest=f.name, default=default, metavar="PATH", help=doc)
            else:
                kind = int if f.name in cls.INT_FIELDS else (str if default is None else type(default))
                target.add_argument(
                    _flag(f.name),
                    dest=f.name,
                    type=_typed(kind, _flag(f.name)),
                    default=default,
                    metavar=kind.__name__.upper(),
                    help=doc if default is None else f"{doc} (default {default})",
                )

    def require_reward(self) -> None:
        """Refuse an unknown ``reward`` and ``reward_overrides`` beside ``--reward score`` (the
        overrides change the env's reward, which the score reward replaces). For the trainers with
        the shared ``reward`` and ``reward_overrides`` options."""
        reward, overrides = self.reward, self.reward_overrides  # type: ignore[attr-defined]
        if reward not in REWARDS:
            raise ValueError(f"reward must be one of {REWARDS}, got {reward!r}")
        if reward == "score" and overrides:
            raise ValueError("reward_overrides change the env's reward, which --reward score replaces")

    def require_at_least(self, low: int, *names: str) -> None:
        """Raise ValueError naming the first of ``names`` whose value is below ``low``."""
        for name in names:
            if getattr(self, name) < low:
                raise ValueError(f"{name} must be >= {low}, got {getattr(self, name)!r}")

    @classmethod
    def from_namespace(cls, ns: argparse.Namespace) -> TrainArgs:
        """The parsed flags as ``cls`` (its ``__post_init__`` validates; ValueError names the field)."""
        values = {f.name: getattr(ns, f.name) for f in fields(cls) if hasattr(ns, f.name)}  # type: ignore[arg-type]
        values = {k: (tuple(v) if isinstance(v, list) else v) for k, v in values.items()}
        return cls(**values)


def _typed(kind: type, flag: str) -> Any:
    """An argparse ``type`` whose error names what was expected (``--timesteps: expected an int``)."""

    def convert(text: str) -> Any:
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected {'an' if kind is int else 'a'} {kind.__name__}, got {text!r}"
            ) from None

    convert.__name__ = kind.__name__
    return convert
