"""Train sb3-contrib MaskablePPO on the radiotherapy planning env (all tasks, one model).

    hospital-marl train radiotherapy --seed 0 --timesteps 300000 --save runs/rt_ppo_s0
    hospital-marl train export runs/rt_ppo_s0 policies/radiotherapy/checkpoints/rt_ppo.npz

or from Python, ``training.radiotherapy.train(Args(...), grading.radiotherapy.grade_all)``: the
evaluation function is given by the layer above (:class:`training.common.EvaluateRT`), so that
training never imports the grader.

A run directory gets ``best_model.zip`` (sb3-contrib, to resume; ``last_model.zip``: the last
point, whether kept or not), ``best_model.npz`` (the
actor's weights for :class:`~policies.radiotherapy.learned.NumpyMLPPolicy`, torch-free),
``best_model.json`` (arguments, the selecting evaluation, timings) and ``curve.json``.

Training draws patients from the ``train`` split's anatomy; selection never sees the test
patients: every ``eval_freq`` steps the current actor is graded by the evaluation function
(deterministic, numpy form) on ``eval_episodes`` per task of the ``validation`` split (its own
anatomy band, between the training ranges and the out-of-distribution test's) from
``eval_seed``, and the kept model is the one with the best *worst-task margin* over the best
scripted baseline on those same validation patients (ties: aggregate score). Training is
deterministic for a seed.

``--warm-start planner|anatomy_aware|rollout [--dagger-rounds N]`` first clones an expert's play on
training patients into the network (:mod:`training.rt_clone`, as ``train ppo --warm-start`` does
for the ED); the clone is graded at step 0 and is a candidate for the kept model.

Reads top to bottom: the arguments, the env pipeline, the evaluation, :func:`train`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.wrappers import FlattenObservation

from hospital_marl.radiotherapy.core.tasks import BUILTIN_TASKS
from hospital_marl.radiotherapy.envs.planning import RadiotherapyPlanningEnv, observation_space
from policies.learned import require_train_extra
from policies.radiotherapy import SCRIPTED
from policies.radiotherapy.base import BaseRTPolicy
from policies.radiotherapy.learned import NumpyMLPPolicy, actor_layers, export_numpy, flatten_observation
from policies.radiotherapy.residual import BASES as RESIDUAL_BASES
from policies.radiotherapy.residual import (
    DEFER,
    FEATURE_SIZE,
    N_RESIDUAL_ACTIONS,
    DeferringBase,
    ResidualRTPolicy,
    env_action,
    residual_features,
    residual_mask,
)
from training.args import option_docs, shared
from training.common import EvaluateRT, require_evaluate
from training.export import strip_optimizer
from training.rt_clone import warm_start as clone_warm_start
from training.rt_residual import warm_start as residual_warm_start


@dataclass
class Args:
    """Every training option (each is a ``--flag``)."""

    seed: int = shared("seed")
    """Seeds torch, the envs' patients and the action sampling."""
    timesteps: int = 300_000
    """Environment steps in total (all tasks together)."""
    n_envs: int = 8
    """DummyVecEnv copies; env i starts on task i mod 3 and cycles through the tasks."""
    n_steps: int = 256
    """Rollout length per env (n_envs x n_steps steps per update)."""
    batch_size: int = shared("minibatch")
    n_epochs: int = shared("epochs")
    learning_rate: float = shared("learning_rate")
    gamma: float = shared("gamma", 0.99)
    """Discount per planning step."""
    gae_lambda: float = shared("gae_lambda")
    ent_coef: float = shared("entropy", 0.01)
    """Entropy bonus: keeps the turn/weight actions explored early on."""
    hidden: int = 64
    """Width of the two tanh hidden layers (actor and critic apart)."""
    eval_freq: int = 20_000
    """Grade the current actor on validation patients every this many steps (all envs together)."""
    eval_episodes: int = 10
    """Validation episodes per task at each evaluation."""
    eval_seed: int = shared("eval_seed")
    """Validation patients' base seed (never the reported 42)."""
    save: str = "runs/rt_ppo"
    """Run directory."""
    warm_start: str = "none"
    """planner / anatomy_aware / rollout: before PPO, clone that policy's play on training patients (masked
    cross-entropy on its actions, the critic fitted to the discounted returns; training/clone.py);
    the clone is graded on validation at step 0 and is a candidate for the kept model."""
    warm_start_episodes: int = 300
    """Warm start: the expert's demonstration episodes (training patients, tasks cycled)."""
    warm_start_epochs: int = 30
    """Warm start: passes over the demonstrations per fit."""
    warm_start_lr: float = 1e-3
    """Warm start: Adam learning rate of the fit."""
    dagger_rounds: int = 0
    """Warm start: DAgger rounds (the clone plays fresh training patients, the expert labels the
    states it reaches, the clone is refitted on every round's labels); planner only."""
    dagger_episodes: int = 60
    """Warm start: episodes per DAgger round."""
    rollout_base: str = "anatomy_aware"
    """Warm start ``rollout``: the base policies its rollouts finish with, comma-separated
    (``anatomy_aware``, re-entered from the state and fortified; or an RT agent name or path that is
    a pure function of the observation, e.g. a learned ``.npz``); training/rt_rollout.py."""

    rollout_tolerance: float = 0.0
    """Warm start ``rollout``: the expert leaves the base's own action only for a final-score gain
    above this (0: any gain)."""
    residual: str = "none"
    """anatomy_aware: learn a residual policy over that baseline (policies/radiotherapy/residual.py): the
    actions are the env's ten plus defer (play the baseline's proposal), the net also reads the proposal,
    and it starts deferring everywhere (so step 0 is the baseline itself)."""
    defer_logit: float = 4.0
    """Residual: the defer action's initial logit (the others start near 0): sets how often the
    stochastic training policy departs from the baseline at first."""
    residual_rounds: int = 0
    """Residual: before PPO, rounds of approximate policy iteration (training/rt_residual.py): the
    residual plays training patients, one-step lookahead labels its states, the actor is fitted to
    every round's labels (masked cross-entropy, --warm-start-epochs at --warm-start-lr); 0: PPO only."""
    residual_episodes: int = 60
    """Residual: training episodes played per round (tasks cycled)."""
    residual_label_fraction: float = 0.5
    """Residual: the probability that a state played is labelled (a label costs ~10 rollouts)."""
    residual_tolerance: float = 0.002
    """Residual: a label departs from the base only for a final-score gain above this."""
    residual_fit: str = "set"
    """Residual: what the actor is fitted to: ``set`` (the accepted actions of each label) or
    ``advantage`` (its logits regress each action's final-score gain over the proposal x 100)."""
    defer_bonuses: str = "0"
    """Residual: at each validation point the actor is graded with each of these added to its defer
    logit (comma-separated; a confidence threshold for departing); the best is kept, baked in."""

    COMMAND: ClassVar[str] = "hospital-marl train radiotherapy"
    WARM_STARTS: ClassVar[tuple[str, ...]] = ("none", "planner", "anatomy_aware", "rollout")
    LABELS_ANY_STATE: ClassVar[tuple[str, ...]] = ("planner", "rollout")

    def __post_init__(self) -> None:
        if self.warm_start not in self.WARM_STARTS:
            raise ValueError(f"warm_start must be one of {self.WARM_STARTS}, got {self.warm_start!r}")
        for name in ("warm_start_episodes", "warm_start_epochs", "dagger_episodes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.dagger_rounds < 0:
            raise ValueError("dagger_rounds must be >= 0")
        if self.dagger_rounds and self.warm_start not in self.LABELS_ANY_STATE:
            # anatomy_aware's next edit depends on its own history (what it tried and undid), so it
            # has no label for a state it did not reach; the planner and the rollout expert have one
            raise ValueError(
                "dagger_rounds needs --warm-start planner or rollout (the experts that label any state)"
            )
        if not [b for b in self.rollout_base.split(",") if b.strip()]:
            raise ValueError("rollout_base must name at least one base policy")
        if not self.warm_start_lr > 0:
            raise ValueError("warm_start_lr must be > 0")
        if self.residual not in ("none", *RESIDUAL_BASES):
            raise ValueError(f"residual must be none or one of {RESIDUAL_BASES}, got {self.residual!r}")
        if self.residual != "none" and self.warm_start != "none":
            raise ValueError("--residual starts at its base already: it takes no --warm-start")
        if self.residual_rounds < 0 or self.residual_episodes < 1:
            raise ValueError("residual_rounds must be >= 0 and residual_episodes >= 1")
        if self.residual_rounds and self.residual == "none":
            raise ValueError("residual_rounds needs --residual")
        if self.residual_fit not in ("set", "advantage"):
            raise ValueError(f"residual_fit must be set or advantage, got {self.residual_fit!r}")
        if not [b for b in self.defer_bonuses.split(",") if b.strip()]:
            raise ValueError("defer_bonuses must hold at least one number")
        [float(b) for b in self.defer_bonuses.split(",")]  # a bad number is a ValueError here
        if not 0 < self.residual_label_fraction <= 1 or self.residual_tolerance < 0:
            raise ValueError("residual_label_fraction must be in (0, 1] and residual_tolerance >= 0")

    @classmethod
    def add_flags(cls, parser: argparse.ArgumentParser) -> None:
        """One ``--flag`` per field, typed by its default; its docstring (and default) is the help."""
        docs = option_docs(cls)
        for f in fields(cls):
            doc = f"{docs.get(f.name, '')} (default {f.default})".strip().replace("%", "%%")
            flag = f"--{f.name.replace('_', '-')}"
            parser.add_argument(flag, type=type(f.default), default=f.default, help=doc)

    @classmethod
    def from_namespace(cls, ns: argparse.Namespace) -> Args:
        return cls(**{f.name: getattr(ns, f.name) for f in fields(cls)})

    def command_line(self) -> str:
        """The command reproducing these args (every flag spelled out)."""
        flags = (f"--{f.name.replace('_', '-')} {getattr(self, f.name)}" for f in fields(self))
        return " ".join((self.COMMAND, *flags))


class TaskCycle(gym.Env):
    """One env per task behind one interface: each reset moves to the next task."""

    def __init__(self, tasks: tuple[str, ...], start: int = 0) -> None:
        self.envs = [RadiotherapyPlanningEnv(t) for t in tasks]
        self.index = start - 1
        self.observation_space = observation_space()
        self.action_space = self.envs[0].action_space

    @property
    def current(self) -> RadiotherapyPlanningEnv:
        return self.envs[self.index]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.index = (self.index + 1) % len(self.envs)
        # each task env draws its patients from its own stream, derived from this env's generator
        return self.current.reset(seed=int(self.np_random.integers(2**31)))

    def step(self, action: int):
        return self.current.step(action)

    def action_masks(self) -> np.ndarray:
        return self.current.action_masks()


class ResidualEnv(gym.Env):
    """The residual learner's view of :class:`TaskCycle`: ``Discrete(11)`` (the env's actions, then
    :data:`~policies.radiotherapy.residual.DEFER`), the observation flattened with the base's proposal
    one-hot, the env's mask plus defer's. The base and the features are
    :class:`~policies.radiotherapy.residual.ResidualRTPolicy`'s own, so training plays the graded policy."""

    def __init__(self, env: gym.Env, base: str = "anatomy_aware") -> None:
        self.env = env
        self.base = DeferringBase(base)
        self.observation_space = spaces.Box(0.0, 1.0, (FEATURE_SIZE,), np.float32)
        self.action_space = spaces.Discrete(N_RESIDUAL_ACTIONS)
        self._mask = np.zeros(N_RESIDUAL_ACTIONS - 1, dtype=bool)
        self._proposal = 0

    def _observe(self, observation: dict[str, np.ndarray], done: bool = False) -> np.ndarray:
        self._mask = np.asarray(self.env.action_masks(), dtype=bool)
        self._proposal = self.base.propose(observation, self._mask)
        if not done and not self._mask[self._proposal]:
            raise RuntimeError(f"the base proposed a masked action {self._proposal}: defer would be invalid")
        return residual_features(flatten_observation(observation), self._proposal)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        observation, info = self.env.reset(seed=seed, options=options)
        self.base.reset()
        return self._observe(observation), info

    def step(self, action: int):
        played = env_action(int(action), self._proposal)
        self.base.taken(played)
        observation, reward, terminated, truncated, info = self.env.step(played)
        return self._observe(observation, terminated or truncated), reward, terminated, truncated, info

    def action_masks(self) -> np.ndarray:
        return residual_mask(self._mask, self._proposal)


def make_env(rank: int, seed: int, residual: str = "none") -> Any:
    from stable_baselines3.common.monitor import Monitor

    def thunk() -> gym.Env:
        cycle = TaskCycle(BUILTIN_TASKS, start=rank % len(BUILTIN_TASKS))
        env = Monitor(FlattenObservation(cycle) if residual == "none" else ResidualEnv(cycle, residual))
        env.reset(seed=seed * 1000 + rank)
        return env

    return thunk


def start_at_base(model: Any, defer_logit: float) -> None:
    """A residual model's actor defers everywhere: the logits' bias 0 but defer's ``defer_logit``
    (the weights keep SB3's 0.01-gain init, so the other logits start within ~0.1 of 0)."""
    import torch

    with torch.no_grad():
        model.policy.action_net.bias.zero_()
        model.policy.action_net.bias[DEFER] = defer_logit


@contextmanager
def defer_bonus(model: Any, bonus: float) -> Iterator[None]:
    """Within the block, a residual actor's defer logit is raised by ``bonus`` (a confidence
    threshold: it departs from the base only where another action leads by more)."""
    import torch

    if not bonus:  # also the non-residual models' case: they have no defer logit
        yield
        return
    with torch.no_grad():
        model.policy.action_net.bias[DEFER] += bonus
    try:
        yield
    finally:
        with torch.no_grad():
            model.policy.action_net.bias[DEFER] -= bonus


def train(args: Args, evaluate: EvaluateRT) -> Path:
    """Train, select on validation patients graded by ``evaluate`` (:func:`grading.radiotherapy.grade_all`,
    passed by the layer above), export the best actor as numpy weights; returns the run directory."""
    require_evaluate(evaluate, "training.radiotherapy.train(args, grading.radiotherapy.grade_all)")
    require_train_extra()
    import torch
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import DummyVecEnv

    torch.set_num_threads(1)
    run = Path(args.save)
    run.mkdir(parents=True, exist_ok=True)
    episodes, seed = args.eval_episodes, args.eval_seed
    baselines = {
        name: evaluate(name, n_episodes=episodes, seed=seed, split="validation") for name in SCRIPTED
    }
    best_scripted = {t: max(b["task_scores"][t] for b in baselines.values()) for t in BUILTIN_TASKS}
    vec = DummyVecEnv([make_env(i, args.seed, args.residual) for i in range(args.n_envs)])
    model = MaskablePPO(
        "MlpPolicy",
        vec,
        n_steps=args.n_steps,
        batch_size=args.batch_size,
        n_epochs=args.n_epochs,
        learning_rate=args.learning_rate,
        gamma=args.gamma,
        gae_lambda=args.gae_lambda,
        ent_coef=args.ent_coef,
        policy_kwargs={"net_arch": {"pi": [args.hidden] * 2, "vf": [args.hidden] * 2}},
        seed=args.seed,
        device="cpu",
        verbose=0,
    )
    residual = args.residual != "none"
    if residual:
        start_at_base(model, args.defer_logit)

    bonuses = [float(b) for b in args.defer_bonuses.split(",")] if residual else [0.0]

    def numpy_policy(model: Any) -> BaseRTPolicy:
        if residual:
            return ResidualRTPolicy(actor_layers(model), base=args.residual)
        return NumpyMLPPolicy(actor_layers(model), name="ppo")

    curve: list[dict[str, Any]] = []
    best: dict[str, Any] = {"key": (-np.inf, -np.inf)}
    started, cpu0 = time.perf_counter(), time.process_time()

    class Validate(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps % args.eval_freq < args.n_envs:
                self.evaluate()
            return True

        def evaluate(self, stage: str | None = None) -> None:
            for bonus in bonuses if stage != "base" else (0.0,):
                with defer_bonus(self.model, bonus):
                    self.grade(stage, bonus)

        def grade(self, stage: str | None, bonus: float) -> None:
            policy = numpy_policy(self.model)
            report = evaluate(policy, n_episodes=args.eval_episodes, seed=args.eval_seed, split="validation")
            margin = min(report["task_scores"][t] - best_scripted[t] for t in BUILTIN_TASKS)
            point = {
                "timesteps": self.num_timesteps,
                "aggregate": report["aggregate_score"],
                "margin": margin,
                "task_scores": report["task_scores"],
                "wall_s": round(time.perf_counter() - started, 1),
            }
            if stage:
                point["stage"] = stage
            if residual:
                point["defer_bonus"] = bonus
            curve.append(point)
            print(json.dumps(point), flush=True)
            key = (margin, report["aggregate_score"])
            if key > best["key"]:
                best.update(key=key, point=point)
                self.model.save(run / "best_model.zip")  # with the bonus in defer's bias

    clone: dict[str, Any] | None = None
    callback = Validate()
    if residual:  # the base itself (defer everywhere) is the first point of the curve
        callback.init_callback(model)
        callback.evaluate("base")
    if args.warm_start != "none" or args.residual_rounds:
        warm_start = residual_warm_start if residual else clone_warm_start
        clone = warm_start(model, args)
        (run / "clone.json").write_text(json.dumps(clone, indent=2) + "\n")
    if clone is not None:  # the clone itself is a candidate (graded at step 0)
        callback.init_callback(model)
        callback.evaluate("clone")
    model.learn(total_timesteps=args.timesteps, callback=callback)
    model.save(run / "last_model.zip")  # the last PPO point, to inspect or resume whether kept or not
    callback.evaluate()
    meta = {
        "name": "rt_residual" if residual else "ppo",
        "algorithm": "sb3-contrib MaskablePPO, MlpPolicy (tanh), flattened Dict observation"
        + (f", residual over {args.residual} (+ defer, + its proposal one-hot)" if residual else ""),
        "residual": {"base": args.residual, "defer_logit": args.defer_logit, "reentry": "keep"}
        if residual
        else None,
        "command": args.command_line(),
        "args": asdict(args),
        "selected": best["point"],
        "validation_baselines": {n: b["task_scores"] for n, b in baselines.items()},
        "warm_start": clone,
        "wall_s": round(time.perf_counter() - started, 1),
        "cpu_s": round(time.process_time() - cpu0, 1),
        "curve": curve,
    }
    (run / "curve.json").write_text(json.dumps(curve, indent=2) + "\n")
    best_model = MaskablePPO.load(run / "best_model.zip", device="cpu")
    export_numpy(best_model, run / "best_model.npz", meta)
    return run


def export(run: Path, dest: Path) -> None:
    """Ship a run's best model: ``dest`` (.npz, numpy weights), its ``.json`` and the sb3-contrib
    ``.zip`` beside them with the optimizer state emptied (to resume or inspect with torch)."""
    source = run / "best_model.npz"
    if not source.exists():
        raise SystemExit(f"{source} does not exist: train first")
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, dest)
    shutil.copyfile(source.with_suffix(".json"), dest.with_suffix(".json"))
    strip_optimizer(run / "best_model.zip", dest.with_suffix(".zip"))


if __name__ == "__main__":  # the former entry point: say where it went rather than exit silently
    raise SystemExit(
        "python -m training.radiotherapy run|export moved to the command line: "
        "hospital-marl train radiotherapy [flags] / hospital-marl train export RUN OUT.npz"
    )
