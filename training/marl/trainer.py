"""Per-role learners on the shared team reward: iterated best response and parameter sharing.

Run it as ``hospital-marl train marl --method ibr|shared [--timesteps N] [--rounds R]
[--scenario S | --all-scenarios] [--seed S] [--save DIR]`` (every field of :class:`Args`
is a flag) or ``training.marl.train(Args(...), grading.grade)``. Two methods, both masked
(sb3-contrib MaskablePPO), both trained on the AEC/parallel env's *team* reward, both graded on
the team track by the evaluation function :func:`train` is given (the CLI gives
:func:`grading.grade`; called with ``track="team"``):

- ``ibr`` (independent learners, iterated best response): one MaskablePPO per role.
  :class:`~training.marl.role_env.RoleEnv` turns the AEC env into a single-agent Gymnasium env for one role:
  the other two roles act inside it by *frozen* policies -- the team heuristic's rules
  (:data:`policies.heuristic.ROLE_RULES`) in round 0, then the latest trained model of
  each role. Each round trains triage, then bed_manager, then ventilator_officer, each
  against the others' current versions.
- ``shared`` (parameter sharing): one MaskablePPO network for all three roles over the
  parallel env. :class:`~training.marl.vec_env.MaskedParallelVecEnv` pads each role's observation to
  the largest role vector and appends a role one-hot; the action space is padded to ``Discrete(21)``
  with the padded actions always masked.

A run directory gets ``model.json`` (``format: hospital_marl.marl/1``: method, model
files per role, timesteps, wall/CPU time, last evaluation, args, command), the models
(``<role>.zip`` for ibr, ``shared.zip`` for shared), and ``curve.json`` / ``curve.csv``
(one row per periodic team-track evaluation, the same columns as ``train ppo``'s, plus
``round``/``role`` for ibr). :func:`policies.marl.load_marl_policy` loads a run directory as a
team-track policy (:class:`~policies.marl.MarlTeamPolicy`, ``act_role``).

Timesteps count *role decisions* for both methods (one per role per tick the learner
acts in), so they compare with RLlib's env steps, and are three times the ticks of
``train ppo --track team``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from hospital_marl.core.actions import ROLES
from hospital_marl.core.scenarios import get_scenario
from policies.learned import require_train_extra
from policies.marl import FORMAT, METADATA_FILE, METHODS, MarlTeamPolicy, RoleAct, heuristic_role, model_role
from training.args import TrainArgs, shared
from training.common import Clock, Evaluate, eval_row, require_evaluate, write_curve, write_json
from training.marl.role_env import RoleEnv
from training.marl.vec_env import make_masked_parallel_vec_env


@dataclass
class Args(TrainArgs):
    """Every option of ``hospital-marl train marl``; its --help is generated from these docstrings."""

    COMMAND: ClassVar[str] = "hospital-marl train marl"
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {"method": METHODS}
    ALWAYS_SHOWN: ClassVar[tuple[str, ...]] = ("method", "seed")

    method: str = "ibr"
    """ibr: one MaskablePPO per role, others frozen, in rounds; shared: one network for all roles."""
    timesteps: int = 60_000
    """Total role decisions trained on (ibr: split evenly over rounds x 3 roles)."""
    rounds: int = 2
    """ibr: rounds of best response (each trains triage, bed_manager, ventilator_officer in turn)."""
    scenario: str = shared("scenario")
    all_scenarios: bool = shared("all_scenarios")
    seed: int = shared("seed")
    save: str | None = None
    """Run directory (default: runs/marl_<method>_<scenario|all>_s<seed>)."""
    n_envs: int = 4
    """Envs per vector (shared: parallel envs, each contributing 3 agent slots)."""
    n_steps: int = 128
    """Steps per vector slot per rollout."""
    batch_size: int = shared("minibatch")
    n_epochs: int = shared("epochs", 5)
    learning_rate: float = shared("learning_rate")
    gamma: float = shared("gamma")
    """Discount per tick (as in train ppo)."""
    gae_lambda: float = shared("gae_lambda")
    ent_coef: float = shared("entropy")
    net_arch: tuple[int, ...] = (64, 64)
    """Hidden layers of the policy and value MLPs."""
    reward_scale: float = shared("reward_scale")
    eval_freq: int = 10_000
    """shared: grade every this many timesteps (0: only at the end); ibr grades after every role phase."""
    eval_episodes: int = shared("eval_episodes", 2)
    eval_seed: int = shared("eval_seed")
    torch_threads: int = shared("torch_threads")
    verbose: int = 0
    """1: print each evaluation row to stderr."""

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        get_scenario(self.scenario)
        self.require_at_least(
            1, "timesteps", "rounds", "n_envs", "n_steps", "batch_size", "n_epochs", "eval_episodes"
        )
        self.require_at_least(0, "eval_freq")
        self.net_arch = tuple(int(w) for w in self.net_arch)

    @property
    def run_prefix(self) -> str:
        return f"marl_{self.method}"


# ------------------------------------------------------------------ training
def _evaluate(
    evaluate: Evaluate, policy: MarlTeamPolicy, args: Args, clock: Clock, timesteps: int
) -> dict[str, Any]:
    report = evaluate(
        policy, episodes=args.eval_episodes, seed=args.eval_seed, scenarios=args.scenarios, track="team"
    )
    row = eval_row(report, timesteps, clock)
    if args.verbose:
        print(json.dumps(row), file=sys.stderr)
    return row


class BestTracker:
    """Keeps a copy of the models behind the best periodic evaluation (``best_<file>``)."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.score = -np.inf
        self.models: dict[str, str] = {}
        self.row: dict[str, Any] | None = None

    def offer(self, row: dict[str, Any], models: Mapping[str, Any]) -> None:
        """``models``: key (a role, or "shared") -> the live SB3 model, saved if ``row`` is the best."""
        if row["eval_score"] <= self.score:
            return
        self.score, self.row, self.models = row["eval_score"], row, {}
        for key, model in models.items():
            self.models[key] = f"best_{key}.zip"
            model.save(str(self.run_dir / self.models[key]))

    def metadata(self) -> dict[str, Any] | None:
        return {"models": self.models, "eval": self.row} if self.row else None


def _new_model(env: Any, args: Args, seed: int) -> Any:
    from sb3_contrib import MaskablePPO

    return MaskablePPO(
        "MlpPolicy",
        env,
        learning_rate=args.learning_rate,
        n_steps=args.n_steps,
        batch_size=args.batch_size,
        n_epochs=args.n_epochs,
        gamma=args.gamma,
        gae_lambda=args.gae_lambda,
        ent_coef=args.ent_coef,
        policy_kwargs={"net_arch": {"pi": list(args.net_arch), "vf": list(args.net_arch)}},
        seed=seed,
        device="cpu",
        verbose=0,
    )


def _quiet_logger(run_dir: Path) -> Any:
    from stable_baselines3.common.logger import Logger, make_output_format

    return Logger(str(run_dir), [make_output_format("csv", str(run_dir))])


TrainResult = tuple[dict[str, str], list[dict[str, Any]], int]
"""What a method's trainer returns: its final model files, the learning curve, role decisions."""


def train_ibr(args: Args, run_dir: Path, clock: Clock, best: BestTracker, evaluate: Evaluate) -> TrainResult:
    """Iterated best response: rounds x roles of MaskablePPO against the others' frozen policies."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    frozen: dict[str, RoleAct] = {role: heuristic_role(role) for role in ROLES}
    models: dict[str, Any] = {}
    files: dict[str, str] = {}
    rows: list[dict[str, Any]] = []
    per_phase = max(args.timesteps // (args.rounds * len(ROLES)), 1)
    total = 0
    for rnd in range(args.rounds):
        for k, role in enumerate(ROLES):
            others = {r: frozen[r] for r in ROLES if r != role}
            phase_seed = args.seed * 1_000 + rnd * 10 + k
            env = DummyVecEnv(
                [
                    lambda rank=rank, role=role, others=others: RoleEnv(
                        role, others, args.scenarios, args.reward_scale, rank
                    )
                    for rank in range(args.n_envs)
                ]
            )
            env.seed(phase_seed)
            if role in models:  # keep learning from the previous round's weights
                model = models[role]
                model.set_env(env)
            else:
                model = _new_model(env, args, phase_seed)
                model.set_logger(_quiet_logger(run_dir))
            before = model.num_timesteps
            model.learn(total_timesteps=per_phase, reset_num_timesteps=False, use_masking=True)
            total += model.num_timesteps - before
            env.close()
            models[role] = model
            frozen[role] = model_role(role, model)
            files[role] = f"{role}.zip"
            model.save(str(run_dir / files[role]))
            policy = MarlTeamPolicy(frozen, name="marl_ibr")
            row = {"round": rnd, "role": role, **_evaluate(evaluate, policy, args, clock, total)}
            rows.append(row)
            best.offer(row, models)
            write_curve(rows, run_dir)
    return files, rows, total


def train_shared(
    args: Args, run_dir: Path, clock: Clock, best: BestTracker, evaluate: Evaluate
) -> TrainResult:
    """Parameter sharing: one MaskablePPO over :class:`MaskedParallelVecEnv` (3 slots per env)."""
    from stable_baselines3.common.callbacks import BaseCallback

    env = make_masked_parallel_vec_env(args.n_envs, args.scenarios, args.reward_scale, args.seed)
    model = _new_model(env, args, args.seed)
    model.set_logger(_quiet_logger(run_dir))
    rows: list[dict[str, Any]] = []

    def grade_now() -> None:
        policy = MarlTeamPolicy({r: model_role(r, model, shared=True) for r in ROLES}, name="marl_shared")
        rows.append(_evaluate(evaluate, policy, args, clock, model.num_timesteps))
        best.offer(rows[-1], {"shared": model})
        write_curve(rows, run_dir)

    class Periodic(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self._last = 0

        def _on_step(self) -> bool:
            if args.eval_freq and self.num_timesteps - self._last >= args.eval_freq:
                self._last = self.num_timesteps
                grade_now()
            return True

    model.learn(total_timesteps=args.timesteps, callback=Periodic(), use_masking=True)
    if not rows or rows[-1]["timesteps"] != model.num_timesteps:
        grade_now()
    model.save(str(run_dir / "shared.zip"))
    env.close()
    return {"shared": "shared.zip"}, rows, int(model.num_timesteps)


def train(args: Args, evaluate: Evaluate) -> Path:
    """Train with ``args.method``, grade with ``evaluate`` (:func:`grading.grade`, passed by the
    layer above: ``train(Args(...), grade)``), save; returns the run directory."""
    require_evaluate(evaluate, "training.marl.train(args, grading.grade)")
    require_train_extra()
    import torch

    torch.set_num_threads(args.torch_threads)
    run_dir = args.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    clock = Clock()
    trainer = train_ibr if args.method == "ibr" else train_shared
    best = BestTracker(run_dir)
    files, rows, total = trainer(args, run_dir, clock, best, evaluate)
    meta = {
        "format": FORMAT,
        "name": f"marl_{args.method}",
        "method": args.method,
        "track": "team",
        "masked": True,
        "models": files,
        "timesteps": int(total),
        "timestep_unit": "role decisions",
        "wall_time_s": clock.wall(),
        "cpu_time_s": clock.cpu(),
        "eval": rows[-1] if rows else None,
        "best": best.metadata(),
        "args": args.as_json(),
        "command": args.command_line(),
    }
    write_json(run_dir / METADATA_FILE, meta)
    return run_dir
