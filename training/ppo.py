"""Train sb3-contrib MaskablePPO on the composed env (flat track) or the team env (team track).

Run it as ``hospital-marl train ppo [--track flat|team] [--all-scenarios] ...``
(every field of :class:`Args` is a flag: ``--n-envs 8``, ``--no-mask``) or from Python,
``training.ppo.train(Args(...), grading.grade)``. A run directory gets:

- ``best_model.zip`` / ``best_model.json``: the model with the best periodic
  evaluation (``--select score``: overall score; ``--select margin``: worst-scenario
  margin over the heuristic on the same days), and its metadata (what
  :func:`policies.learned.load_path` reads);
- ``model.zip`` / ``model.json``: the final model;
- ``curve.csv`` / ``curve.json``: the learning curve, one row per evaluation
  (``hospital-marl plot curve RUN_DIR`` draws it);
- ``progress.csv``: SB3's training statistics (losses, entropy, KL) per rollout;
- TensorBoard logs in ``TENSORBOARD_DIR/<run name>`` if ``--tensorboard TENSORBOARD_DIR`` was given.

The periodic evaluation grades the current model with the evaluation function :func:`train`
is given (:class:`training.common.Evaluate`: the CLI gives the project's grader,
:func:`grading.grade`; deterministic actions, the same track it will be graded on) on a few
episodes from ``eval_seed``; keep that seed away from the seed you report scores on (0), or
choosing the best model would peek at the test days.

``--reward score`` trains on the graded composite instead of the env's dense reward
(:class:`hospital_marl.envs.wrappers.ScoreReward`); ``--early-discharge-points`` adds
a training-only price on early discharges, which the score charges only through
bounce-back deaths. ``--prune`` trains on the env's mask minus the dominated actions of
:mod:`policies.pruning` (and the saved model acts that way): a policy-design choice, labelled
``_pruned`` in the model's name. ``--warm-start heuristic|planner`` (``--dagger-rounds N``)
clones an expert into the network before PPO (:mod:`training.clone`). All four are measured in
policies/checkpoints/README.md.

Reads top to bottom like a CleanRL script: the arguments, the env pipeline, the
evaluation callback, then :func:`train`. torch and sb3-contrib (the ``train`` extra) are
imported in :func:`train` so that the CLI can list this command without them.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from hospital_marl.core.rewards import RewardTable
from hospital_marl.core.scenarios import get_scenario
from policies.learned import (
    ENCODER_VERSION,
    PPOPolicy,
    TeamPPOPolicy,
    TorchLogits,
    require_train_extra,
)
from training.args import REWARDS, TrainArgs, shared
from training.clone import warm_start
from training.common import (
    Clock,
    Evaluate,
    eval_row,
    require_evaluate,
    reward_table,
    write_curve,
)
from training.ppo_env import (  # noqa: F401 (the pipeline's pieces, importable from here as before)
    EarlyDischargeCost,
    EncodedObservation,
    PruneDominated,
    ScaleReward,
    ScenarioCycle,
    make_env,
    make_vec_env,
)

CHOICES: dict[str, tuple[str, ...]] = {
    "track": ("flat", "team"),
    "network": ("entity", "mlp"),
    "reward": REWARDS,
    "select": ("score", "margin"),
    "warm_start": ("none", "heuristic", "planner"),
}
"""The fields of :class:`Args` that take one of a few names."""


@dataclass
class Args(TrainArgs):
    """Every training option; ``hospital-marl train ppo --help`` is generated from these docstrings.

    The defaults are the shipped recipe (policies/checkpoints/README.md), which adds only
    ``--all-scenarios`` and, on the flat track, ``--reward-overrides critical_unattended_per_tick=-2``.
    """

    COMMAND: ClassVar[str] = "hospital-marl train ppo"
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = CHOICES

    track: str = "flat"
    """flat: the composed Discrete(39) env; team: the MultiDiscrete([21, 16, 4]) team env."""
    scenario: str = shared("scenario")
    all_scenarios: bool = shared("all_scenarios")
    """Train on the five built-in scenarios, switched every episode (each env cycles through them)."""
    timesteps: int = 200_000
    """Total environment steps (ticks) over all envs."""
    n_envs: int = 8
    """Parallel environments (DummyVecEnv: the env is cheap, processes would cost more than they save)."""
    seed: int = shared("seed")
    """Seeds torch, the policy's sampling and the training envs' days."""
    save: str | None = None
    """Run directory (default: runs/ppo_<track>_<scenario|all>_s<seed>)."""
    mask: bool = True
    """Mask invalid actions in training and when the model acts. Off: plain PPO over all 39 / 41
    actions, graded as is (its invalid actions count)."""
    prune: bool = False
    """Flat track: also mask dominated actions (policies.pruning), in training and when the model acts.
    A policy-design choice (domain knowledge), labelled as such wherever the model is reported."""
    tensorboard: str | None = None
    """Also write TensorBoard logs under this directory (needs the tensorboard package)."""
    eval_freq: int = 20_000
    """Grade the current model every this many timesteps (0: only at the end)."""
    eval_episodes: int = shared("eval_episodes")
    eval_seed: int = shared("eval_seed")
    select: str = "score"
    """Which evaluation ships as best_model: score (the highest overall eval score) or margin (the
    highest worst-scenario margin over the heuristic on the same eval days: "beats it everywhere")."""
    learning_rate: float = shared("learning_rate")
    """Adam step size, decayed linearly to lr_final_fraction of it by the end."""
    lr_final_fraction: float = 0.1
    """Where the linear learning-rate decay ends, as a fraction of learning_rate."""
    n_steps: int = 256
    """Steps per env per rollout (rollout size = n_steps * n_envs)."""
    batch_size: int = shared("minibatch")
    n_epochs: int = shared("epochs")
    gamma: float = shared("gamma")
    """Discount (a shift is 100 ticks; 0.97 looks ~30 ticks ahead, past most deaths a decision causes)."""
    gae_lambda: float = shared("gae_lambda")
    clip_range: float = shared("clip")
    ent_coef: float = shared("entropy")
    vf_coef: float = shared("value_loss")
    network: str = "entity"
    """entity: heads shared across queue slots, beds, ventilators (policies.ppo_net); mlp: SB3's MLP."""
    net_arch: tuple[int, ...] = (64, 64)
    """Hidden layers of the value network (and of the policy network with --network mlp)."""
    context_dim: int = 64
    """entity network: width of the context vector computed from the whole observation."""
    head_dim: int = 32
    """entity network: hidden width of each shared entity head."""
    reward_scale: float = shared("reward_scale")
    """Rewards are multiplied by this for learning, to keep value targets near 1 (a death is -15 on
    the env's reward, 1-6 points with --reward score, where 0.3 worked)."""
    reward: str = shared("reward")
    early_discharge_points: float = 0.0
    """--reward score: also charge this many score points per early discharge (training only)."""
    reward_overrides: str = shared("reward_overrides")
    torch_threads: int = shared("torch_threads")
    """torch CPU threads (1 is fastest for small MLPs on a small, shared machine)."""
    progress: bool = shared("progress")
    verbose: int = 0
    """SB3 verbosity (1 prints the training statistics table)."""
    warm_start: str = "none"
    """heuristic / planner: before PPO, clone that policy's play on training days (masked cross-entropy
    on its actions, the critic fitted to the discounted training returns; training/clone.py); the clone
    is graded at step 0."""
    warm_start_days: int = 400
    """Warm start: training days the heuristic plays for the demonstrations (their own seeds)."""
    warm_start_epochs: int = 30
    """Warm start: passes of the cloning fit over the demonstrations."""
    warm_start_lr: float = 1e-3
    """Warm start: Adam step size of the cloning fit."""
    dagger_rounds: int = 0
    """Warm start: DAgger rounds after the demonstrations (the clone plays fresh training days, the
    expert labels the states it reaches, the clone is refitted on every round's labels)."""
    dagger_days: int = 100
    """Warm start: training days per DAgger round."""

    def __post_init__(self) -> None:
        for name, valid in CHOICES.items():
            if getattr(self, name) not in valid:
                raise ValueError(f"{name} must be one of {valid}, got {getattr(self, name)!r}")
        get_scenario(self.scenario)  # raises on an unknown name, listing the valid ones
        _ = self.rewards  # validates reward_overrides
        self.require_reward()
        if self.prune and (self.track != "flat" or not self.mask):
            raise ValueError("prune narrows the flat track's mask: it needs --track flat and masking")
        if self.warm_start != "none" and self.track != "flat":
            raise ValueError("warm_start clones a flat policy: it needs --track flat")
        if self.reward != "score" and self.early_discharge_points:
            raise ValueError("early_discharge_points is charged on top of --reward score")
        self.require_at_least(1, "timesteps", "n_envs", "n_steps", "batch_size", "n_epochs", "eval_episodes")
        self.require_at_least(1, "warm_start_days", "warm_start_epochs", "dagger_days")
        self.require_at_least(0, "dagger_rounds")
        if self.dagger_rounds and self.warm_start == "none":
            raise ValueError("dagger_rounds refits a warm start: it needs --warm-start heuristic|planner")
        if not self.warm_start_lr > 0:
            raise ValueError("warm_start_lr must be > 0")
        self.require_at_least(0, "eval_freq")
        if not (self.reward_scale > 0 and self.learning_rate > 0):
            raise ValueError("reward_scale and learning_rate must be > 0")

    @property
    def rewards(self) -> RewardTable:
        """The reward table the training envs use (the grader scores episodes, never rewards)."""
        return reward_table(self.reward_overrides)

    @property
    def run_prefix(self) -> str:
        return f"ppo_{self.track}"


# ------------------------------------------------------------------ evaluation
def policy_of(model: Any, args: Args) -> PPOPolicy:
    """The model as a graded policy (the same class the shipped checkpoints load into)."""
    cls = TeamPPOPolicy if args.track == "team" else PPOPolicy
    return cls(TorchLogits(model), masked=args.mask, name=f"ppo_{args.track}", prune=args.prune)


def make_grade_callback(args: Args, run_dir: Path, clock: Clock, evaluate: Evaluate) -> Any:
    from stable_baselines3.common.callbacks import BaseCallback

    class GradeCallback(BaseCallback):
        """Every ``eval_freq`` timesteps (and at the end): grade, log the curve, keep the best model."""

        def __init__(self) -> None:
            super().__init__()
            self.rows: list[dict[str, Any]] = []
            self.best = -np.inf
            self.reference: dict[str, float] = {}
            if args.select == "margin":
                reference = "team_heuristic" if args.track == "team" else "heuristic"
                self.reference = self.grade_policy(reference)["scenario_scores"]
            self._last = 0

        def _on_training_start(self) -> None:
            if args.warm_start != "none":  # the clone itself is a candidate
                self.evaluate()

        def _on_step(self) -> bool:
            if args.eval_freq and self.num_timesteps - self._last >= args.eval_freq:
                self._last = self.num_timesteps
                self.evaluate()
            return True

        def _on_training_end(self) -> None:
            if not self.rows or self.rows[-1]["timesteps"] != self.num_timesteps:
                self.evaluate()

        def grade_policy(self, policy: Any) -> dict[str, Any]:
            return evaluate(
                policy,
                episodes=args.eval_episodes,
                seed=args.eval_seed,
                scenarios=args.scenarios,
                track=args.track,
            )

        def evaluate(self) -> None:
            report = self.grade_policy(policy_of(self.model, args))
            episodes = [e["r"] for e in self.model.ep_info_buffer]
            row = eval_row(report, self.num_timesteps, clock)
            row["train_episode_reward"] = round(float(np.mean(episodes)), 2) if episodes else None
            if self.reference:
                scores = report["scenario_scores"]
                row["worst_margin"] = round(min(scores[k] - v for k, v in self.reference.items()), 3)
            self.rows.append(row)
            for key in ("eval_score", "invalid_action_rate"):
                self.logger.record(f"eval/{key}", row[key])
            chosen = row["worst_margin"] if self.reference else row["eval_score"]
            if chosen > self.best:
                self.best = chosen
                save_model(self.model, run_dir / "best_model.zip", args, row, clock)
            write_curve(self.rows, run_dir)
            if args.verbose:
                print(json.dumps(row), file=sys.stderr)

    return GradeCallback()


# ------------------------------------------------------------------ artefacts
def make_logger(args: Args, run_dir: Path) -> Any:
    """SB3's training statistics to ``run_dir/progress.csv`` (+ TensorBoard, + stdout with --verbose 1).

    An explicit logger also keeps SB3 from creating an empty ``/tmp/SB3-<date>`` folder per run.
    """
    from stable_baselines3.common.logger import Logger, make_output_format

    formats = [make_output_format("csv", str(run_dir))]
    if args.verbose:
        formats.append(make_output_format("stdout", str(run_dir)))
    if args.tensorboard:
        formats.append(make_output_format("tensorboard", str(Path(args.tensorboard) / run_dir.name)))
    return Logger(str(run_dir), formats)


def save_model(model: Any, path: Path, args: Args, row: dict[str, Any] | None, clock: Clock) -> None:
    """``path`` (.zip) and its metadata ``path.json``: what :func:`policies.learned.load_path` reads."""
    model.save(str(path))
    meta = {
        "name": f"ppo_{args.track}" + ("" if args.mask else "_nomask") + ("_pruned" if args.prune else ""),
        "track": args.track,
        "masked": args.mask,
        "prune": args.prune,
        "encoder_version": ENCODER_VERSION,
        "timesteps": int(model.num_timesteps),
        "wall_time_s": clock.wall(),
        "cpu_time_s": clock.cpu(),
        "eval": row,
        "args": args.as_json(),
        "command": args.command_line(),
    }
    path.with_suffix(".json").write_text(json.dumps(meta, indent=2) + "\n")


# ------------------------------------------------------------------- training
def train(args: Args, evaluate: Evaluate) -> Path:
    """Train, grade periodically with ``evaluate`` (:func:`grading.grade`, passed by the layer
    above: ``train(Args(...), grade)``), save; returns the run directory."""
    require_evaluate(evaluate, "training.ppo.train(args, grading.grade)")
    require_train_extra()
    import torch
    from sb3_contrib import MaskablePPO

    if args.tensorboard:
        try:
            import tensorboard  # noqa: F401
        except ImportError:
            raise ImportError(
                "--tensorboard needs the tensorboard package: pip install tensorboard"
            ) from None
    torch.set_num_threads(args.torch_threads)
    run_dir = args.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    clock = Clock()

    env = make_vec_env(args)
    lr, final = args.learning_rate, args.lr_final_fraction
    if args.network == "entity":
        from policies.ppo_net import EntityPolicy

        policy: Any = EntityPolicy
        policy_kwargs = {
            "team": args.track == "team",
            "context_dim": args.context_dim,
            "head_dim": args.head_dim,
            "net_arch": {"pi": [], "vf": list(args.net_arch)},
        }
    else:
        policy = "MlpPolicy"
        policy_kwargs = {"net_arch": {"pi": list(args.net_arch), "vf": list(args.net_arch)}}
    model = MaskablePPO(
        policy,
        env,
        learning_rate=lambda progress: lr * (final + (1.0 - final) * progress),  # progress: 1 -> 0
        n_steps=args.n_steps,
        batch_size=args.batch_size,
        n_epochs=args.n_epochs,
        gamma=args.gamma,
        gae_lambda=args.gae_lambda,
        clip_range=args.clip_range,
        ent_coef=args.ent_coef,
        vf_coef=args.vf_coef,
        policy_kwargs=policy_kwargs,
        seed=args.seed,
        device="cpu",
        verbose=args.verbose,
    )
    model.set_logger(make_logger(args, run_dir))
    if args.warm_start != "none":
        clone = warm_start(model, args)
        (run_dir / "clone.json").write_text(json.dumps(clone, indent=2) + "\n")
    callback = make_grade_callback(args, run_dir, clock, evaluate)
    model.learn(
        total_timesteps=args.timesteps,
        callback=callback,
        use_masking=args.mask,
        progress_bar=args.progress,
    )
    save_model(model, run_dir / "model.zip", args, callback.rows[-1] if callback.rows else None, clock)
    env.close()
    return run_dir
