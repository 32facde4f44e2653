"""Train one masked PPO policy per role with Ray RLlib (new API stack) on the AEC env.

Run it as ``hospital-marl train rllib [--address auto] [--num-env-runners N] ...``
(every field of :class:`Args` is a flag) or ``training.rllib.train.train(Args(...), grading.grade)``.
Local by default: a private Ray instance in this process
(``ray.init(address="local")``, no dashboard); ``--address auto`` (or
``HOST:PORT``) joins a running cluster instead, and ``--num-env-runners`` spreads
sampling over it. A run directory gets:

- ``checkpoint/``: RLlib's algorithm checkpoint (``Algorithm.from_checkpoint``
  resumes it); the per-role modules are under ``checkpoint/learner_group/learner/rl_module/<role>/``;
- ``best/<role>/``: the modules of the best validation grading (RLModule checkpoints): what
  :func:`policies.rllib.load_rllib_policy` plays;
- ``rllib.json``: the run's metadata (arguments, module directories -- ``modules`` the best,
  ``final_modules`` the last --, the best and final validation gradings, the audit totals, the
  reproducing command) -- what :func:`policies.rllib.load_rllib_policy` reads;
- ``curve.json`` / ``curve.csv``: one row per iteration: env steps, episode return means, the
  masked-action audit, and on graded iterations the validation columns of ``train ppo``'s curve.

Checkpoint selection uses *validation* days only: every ``--eval-interval`` iterations (and
after the last) the team is graded with the evaluation function :func:`train` is given (the CLI
passes :func:`grading.grade`), ``--eval-episodes`` per scenario from base seed ``--eval-seed``
(1000), never the days the README reports (seed 0). Each grading first saves the algorithm
checkpoint (so a long run can be resumed from its last grading) and grades the modules as
loaded from it, the way the run will be graded.

``--resume RUN_DIR`` continues a run from that checkpoint (``Algorithm.from_checkpoint``: the
modules, optimizer states and counters) up to ``--iterations`` in all: the curve and the iteration
and env-step counts carry on, ``best/`` stays the best grading of the whole run, wall and CPU times
add up, and ``rllib.json`` lists each resuming command under ``resumed``. The run's recorded
arguments are kept; a flag that differs from both its default and the run's value is refused
(only :data:`RESUMABLE` may change). Curve rows after the checkpoint's iteration (a run stopped
between gradings) are dropped: those iterations are trained again. A resumed run is not
bit-identical to one trained straight through (the samplers' random streams restart).

Reads top to bottom: the arguments, the RLlib config, then :func:`train`. Ray and
torch are imported inside the functions, so the CLI lists this command without them.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar

from tqdm import tqdm

from hospital_marl.core.actions import ROLES
from hospital_marl.core.scenarios import get_scenario
from policies.marl import DEFAULT_ENCODING
from policies.rllib import CHECKPOINT_DIR, METADATA_FILE, module_dir, require_rllib
from training.args import TrainArgs, shared
from training.common import Clock, Evaluate, eval_row, require_evaluate, write_curve, write_json

CURVE_FILE = "curve.json"
BEST_DIR = "best"
"""The best validation grading's modules (one RLModule checkpoint per role) inside a run directory."""
FORMAT = "hospital_marl.rllib/1"
RESUMABLE = ("iterations", "progress", "address", "num_cpus")
"""What ``--resume`` may change: how far the run goes and where Ray runs; the rest is the run's."""


@dataclass
class Args(TrainArgs):
    """Every training option; ``hospital-marl train rllib --help`` is generated from these docstrings."""

    COMMAND: ClassVar[str] = "hospital-marl train rllib"
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {"reward_mode": ("team", "role")}
    ALWAYS_SHOWN: ClassVar[tuple[str, ...]] = ()
    INT_FIELDS: ClassVar[tuple[str, ...]] = ("num_cpus",)
    RUN_PREFIX: ClassVar[str] = "rllib"

    address: str | None = None
    """Ray cluster to join ("auto", or HEAD_IP:6379); default: a private local Ray instance."""
    num_env_runners: int = 0
    """Remote env runners (sampling actors, 1 CPU each); 0 samples in the driver process."""
    num_envs_per_runner: int = 1
    """Environments per env runner (stepped in one vector, batched module forward)."""
    num_learners: int = 0
    """Remote learners (0: learn in the driver process; >1: data-parallel over the cluster)."""
    num_cpus: int | None = None
    """CPUs of the local Ray instance (default max(2, num_env_runners + 1)); ignored with --address."""
    iterations: int = 50
    """Training iterations (one sample + one PPO update each)."""
    scenario: str = shared("scenario")
    all_scenarios: bool = shared("all_scenarios")
    seed: int = shared("seed")
    """Seeds RLlib (torch, sampling) and the training envs' days."""
    save: str | None = None
    """Run directory (default: runs/rllib_<scenario|all>_s<seed>)."""
    resume: str | None = None
    """Continue the run in this directory from its last checkpoint up to --iterations in all (its
    arguments are kept; a conflicting flag is an error)."""
    reward_mode: str = shared("reward_mode")
    train_batch_size: int = 4000
    """Env steps per iteration and learner (one step = one role's turn: a 100-tick shift is 300 steps)."""
    minibatch_size: int = shared("minibatch")
    num_epochs: int = shared("epochs")
    """Passes over each iteration's batch."""
    lr: float = shared("learning_rate")
    gamma: float = shared("gamma")
    """Discount per tick (each role's own trajectory has one step per tick; as in `train ppo`)."""
    gae_lambda: float = shared("gae_lambda")
    clip_param: float = shared("clip")
    entropy_coeff: float = shared("entropy")
    vf_loss_coeff: float = shared("value_loss")
    hidden: tuple[int, ...] = (64, 64)
    """Hidden layers of each role's actor and critic MLPs."""
    reward_scale: float = shared("reward_scale")
    """Rewards are multiplied by this for learning (a death is -15): keeps value targets near 1."""
    eval_interval: int = 5
    """Grade the team on validation days every this many iterations, and after the last (0: only then)."""
    eval_episodes: int = shared("eval_episodes", 4)
    eval_seed: int = shared("eval_seed")
    progress: bool = shared("progress")

    def __post_init__(self) -> None:
        get_scenario(self.scenario)  # raises on an unknown name, listing the valid ones
        if self.reward_mode not in ("team", "role"):
            raise ValueError(f"reward_mode must be 'team' or 'role', got {self.reward_mode!r}")
        self.require_at_least(
            1, "iterations", "num_envs_per_runner", "train_batch_size", "minibatch_size", "num_epochs",
            "eval_episodes",
        )  # fmt: skip
        self.require_at_least(0, "num_env_runners", "num_learners", "seed", "eval_interval")
        if self.num_cpus is not None and self.num_cpus < 1:
            raise ValueError(f"num_cpus must be >= 1, got {self.num_cpus!r}")
        if not self.hidden or min(self.hidden) < 1:
            raise ValueError(f"hidden must be positive layer widths, got {self.hidden!r}")
        if not (self.lr > 0 and self.reward_scale > 0):
            raise ValueError("lr and reward_scale must be > 0")
        self.hidden = tuple(int(w) for w in self.hidden)


# ------------------------------------------------------------------ config
def build_config(args: Args) -> Any:
    """The PPO ``AlgorithmConfig``: one :class:`MaskedRoleModule` per role, agent id -> module id = role."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from policies.rllib.module import MaskedRoleModule
    from training.rllib.callbacks import MaskedActionAudit
    from training.rllib.env import register

    env_name = register()
    model_config = {"hidden": list(args.hidden), "encoding": DEFAULT_ENCODING}
    return (
        PPOConfig()
        .environment(
            env_name,
            env_config={
                "scenarios": list(args.scenarios),
                "reward_mode": args.reward_mode,
                "reward_scale": args.reward_scale,
                "encoding": DEFAULT_ENCODING,
            },
        )
        .env_runners(
            num_env_runners=args.num_env_runners,
            num_envs_per_env_runner=args.num_envs_per_runner,
            num_cpus_per_env_runner=1,
        )
        .learners(num_learners=args.num_learners)
        .multi_agent(policies=set(ROLES), policy_mapping_fn=role_of_agent, policies_to_train=list(ROLES))
        .rl_module(
            rl_module_spec=MultiRLModuleSpec(
                rl_module_specs={
                    role: RLModuleSpec(module_class=MaskedRoleModule, model_config=model_config)
                    for role in ROLES
                }
            )
        )
        .training(
            lr=args.lr,
            gamma=args.gamma,
            lambda_=args.gae_lambda,
            clip_param=args.clip_param,
            entropy_coeff=args.entropy_coeff,
            vf_loss_coeff=args.vf_loss_coeff,
            train_batch_size_per_learner=args.train_batch_size,
            minibatch_size=min(args.minibatch_size, args.train_batch_size),
            num_epochs=args.num_epochs,
        )
        .callbacks(MaskedActionAudit)
        .debugging(seed=args.seed, log_level="WARN")
    )


def role_of_agent(agent_id: str, episode: Any = None, **kwargs: Any) -> str:
    """The policy mapping: each role (agent id) has its own module, named after it."""
    return agent_id


# ---------------------------------------------------------------- resuming
def resume_args(args: Args) -> Args:
    """``args`` for continuing the run in ``args.resume``: that run's recorded arguments, with the
    :data:`RESUMABLE` ones taken from ``args``; ValueError on a missing run or a conflicting flag."""
    if not args.resume:
        return args
    run_dir = Path(args.resume)
    meta_file = run_dir / METADATA_FILE
    if not meta_file.exists() or not (run_dir / CHECKPOINT_DIR / "rllib_checkpoint.json").exists():
        raise ValueError(
            f"--resume {run_dir}: not a `train rllib` run with an algorithm checkpoint "
            f"(looked for {meta_file} and {run_dir / CHECKPOINT_DIR / 'rllib_checkpoint.json'})"
        )
    if args.save is not None and Path(args.save).resolve() != run_dir.resolve():
        raise ValueError(
            f"--resume continues the run in {run_dir}: drop --save {args.save} (or copy the run)"
        )
    meta = json.loads(meta_file.read_text())
    at = (meta.get("final_eval") or {}).get("iteration", 0)
    if args.iterations <= at:
        raise ValueError(
            f"--resume {run_dir}: the run is at iteration {at}; --iterations is the total to reach "
            f"(got {args.iterations})"
        )
    recorded = {k: v for k, v in meta["args"].items() if k not in ("save", "resume")}
    run = Args.from_json(recorded)
    values, conflicts = {}, []
    for f in fields(Args):
        given, was = getattr(args, f.name), getattr(run, f.name)
        if f.name in RESUMABLE:
            values[f.name] = given
        elif given != f.default and given != was and f.name not in ("save", "resume"):
            conflicts.append(f"--{f.name.replace('_', '-')} {given} (the run's: {was})")
        else:
            values[f.name] = was
    if conflicts:
        raise ValueError(
            f"--resume {run_dir} keeps the run's arguments; these flags conflict with them: "
            + ", ".join(conflicts)
            + " (drop them, or start a new run)"
        )
    return Args(**{**values, "save": str(run_dir), "resume": str(run_dir)})


def restore(args: Args, grading: ValidationGrading) -> tuple[Any, list[dict[str, Any]], dict[str, Any]]:
    """The algorithm restored from ``args.resume``'s checkpoint, the curve rows up to its iteration,
    and the run's metadata; ``grading`` takes up the run's best and last gradings."""
    from ray.rllib.algorithms.algorithm import Algorithm

    from training.rllib.env import register

    register()  # the checkpoint's config names the env: it must be registered in this Ray instance
    algo = Algorithm.from_checkpoint(str(grading.checkpoint))
    start = algo.iteration
    meta = json.loads((args.run_dir / METADATA_FILE).read_text())
    rows = [r for r in json.loads((args.run_dir / CURVE_FILE).read_text()) if r["iteration"] <= start]
    if not rows or rows[-1]["iteration"] != start or (meta.get("final_eval") or {}).get("iteration") != start:
        algo.stop()
        raise ValueError(
            f"--resume {args.run_dir}: its curve and rllib.json have no grading at the checkpoint's "
            f"iteration {start}"
        )
    grading.best, grading.last = meta["best"], meta["final_eval"]
    return algo, rows, meta


# ------------------------------------------------------------------- the run
def init_ray(args: Args) -> bool:
    """Start a private local Ray instance, or join ``args.address``; False if Ray was already up."""
    import ray

    if ray.is_initialized():
        return False
    if args.address:
        ray.init(address=args.address, logging_level=logging.WARNING)
    else:
        num_cpus = args.num_cpus or max(2, args.num_env_runners + 1)
        ray.init(address="local", include_dashboard=False, num_cpus=num_cpus, logging_level=logging.WARNING)
    return True


def curve_row(iteration: int, result: dict[str, Any], clock: Clock) -> dict[str, Any]:
    """One learning-curve row from an ``Algorithm.train()`` result."""
    from training.rllib import callbacks as audit

    runners = result.get("env_runners", {})

    def number(key: str, default: float | None = None) -> float | None:
        value = runners.get(key, default)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return None
        return float(value)

    finished = int(number(audit.FINISHED_EPISODES, 0) or 0)
    team_sum = number(audit.TEAM_RETURN_SUM)
    return {
        "iteration": iteration,
        "env_steps": int(number("num_env_steps_sampled_lifetime", 0) or 0),
        "episodes": finished,
        "team_return_mean": team_sum / finished if finished and team_sum is not None else None,
        "episode_return_mean": number("episode_return_mean"),
        "masked_actions_taken": int(number(audit.MASKED_ACTIONS_TAKEN, 0) or 0),
        "audited_actions": int(number(audit.AUDITED_ACTIONS, 0) or 0),
        "env_invalid_actions": int(number(audit.ENV_INVALID_ACTIONS, 0) or 0),
        "time_s": clock.wall(),
    }


class ValidationGrading:
    """Every ``eval_interval`` iterations: checkpoint, grade the saved modules on validation days,
    copy the best grading's modules to ``best/``."""

    def __init__(self, args: Args, evaluate: Evaluate, clock: Clock) -> None:
        self.args, self.evaluate, self.clock = args, evaluate, clock
        self.checkpoint = (args.run_dir / CHECKPOINT_DIR).resolve()
        self.best: dict[str, Any] | None = None
        self.last: dict[str, Any] | None = None

    def due(self, iteration: int) -> bool:
        every = self.args.eval_interval
        return iteration == self.args.iterations or (every > 0 and iteration % every == 0)

    def __call__(self, algo: Any, row: dict[str, Any]) -> dict[str, Any]:
        """Grade after ``row``'s iteration; the validation columns to add to the row."""
        from policies.rllib import load_rllib_policy

        args = self.args
        algo.save_to_path(str(self.checkpoint))
        report = self.evaluate(
            load_rllib_policy(self.checkpoint),
            episodes=args.eval_episodes,
            seed=args.eval_seed,
            scenarios=args.scenarios,
            track="team",
        )
        graded = eval_row(report, row["env_steps"], self.clock)
        graded["role_decisions"] = graded.pop("timesteps")
        self.last = {"iteration": row["iteration"], "env_steps": row["env_steps"], **graded}
        if self.best is None or graded["eval_score"] > self.best["eval_score"]:
            self.best = self.last
            best = args.run_dir / BEST_DIR
            shutil.rmtree(best, ignore_errors=True)
            for role in ROLES:
                shutil.copytree(module_dir(self.checkpoint, role), best / role)
        if args.progress:
            print(
                f"\n[rllib s{args.seed}] iteration {row['iteration']} ({row['env_steps']:,} role decisions): "
                f"validation score {graded['eval_score']:.2f} (best {self.best['eval_score']:.2f}), "
                f"{graded['wall_time_s']:.0f} s",
                file=sys.stderr,
            )
        return graded


def write_metadata(
    args: Args,
    rows: list[dict[str, Any]],
    grading: ValidationGrading,
    clock: Clock,
    history: dict[str, Any],
) -> None:
    """``rllib.json``: written after every grading, so a run stopped between gradings is a complete
    run directory (its best modules, curve and metadata so far). ``history``: the first command
    and the resumed ones (``{"from_iteration", "command"}``)."""
    import ray
    import torch

    masked = sum(r["masked_actions_taken"] for r in rows)
    write_json(
        args.run_dir / METADATA_FILE,
        {
            "format": FORMAT,
            "name": "rllib",
            "track": "team",
            "algorithm": "PPO",
            "encoding": DEFAULT_ENCODING,
            "roles": list(ROLES),
            "checkpoint": CHECKPOINT_DIR,
            "modules": {role: f"{BEST_DIR}/{role}" for role in ROLES},
            "final_modules": {role: module_dir(Path(CHECKPOINT_DIR), role).as_posix() for role in ROLES},
            "best": grading.best,
            "final_eval": grading.last,
            "validation": {"seed": args.eval_seed, "episodes_per_scenario": args.eval_episodes},
            "audit": {
                "masked_actions_taken": masked,
                "audited_actions": sum(r["audited_actions"] for r in rows),
                "env_invalid_actions": sum(r["env_invalid_actions"] for r in rows),
                "episodes": sum(r["episodes"] for r in rows),
            },
            "iterations": rows[-1]["iteration"],
            "env_steps": rows[-1]["env_steps"],
            "wall_time_s": clock.wall(),
            "cpu_time_s": clock.cpu(),
            "args": args.as_json(),
            "ray_version": ray.__version__,
            "torch_version": torch.__version__,
            "command": history["command"],
            "resumed": history["resumed"],
        },
    )


def train(args: Args, evaluate: Evaluate) -> Path:
    """Train, grading with ``evaluate`` (:func:`grading.grade`, passed by the layer above) on
    validation days; write the run directory (module docstring) and return it."""
    require_evaluate(evaluate, "training.rllib.train.train(args, grading.grade)")
    require_rllib()
    import ray
    import torch

    args = resume_args(args)
    run_dir = args.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)  # tiny MLPs: more threads only contend with the env runners
    grading = ValidationGrading(args, evaluate, Clock())
    owns_ray = init_ray(args)
    algo = None
    rows: list[dict[str, Any]] = []
    history: dict[str, Any] = {"command": args.command_line(), "resumed": []}
    try:
        if args.resume:
            algo, rows, meta = restore(args, grading)
            grading.clock = Clock(wall=rows[-1]["wall_time_s"], cpu=rows[-1]["cpu_time_s"])
            history = {
                "command": meta["command"],
                "resumed": [
                    *meta.get("resumed", []),
                    {"from_iteration": algo.iteration, "command": args.command_line()},
                ],
            }
        else:
            algo = build_config(args).build_algo()
        clock, start = grading.clock, (rows[-1]["iteration"] if rows else 0)
        bar = tqdm(
            range(start + 1, args.iterations + 1),
            desc="rllib ppo",
            unit="it",
            initial=start,
            total=args.iterations,
            disable=not args.progress,
        )
        for iteration in bar:
            row = curve_row(iteration, algo.train(), clock)
            if grading.due(iteration):
                row.update(grading(algo, row))
            rows.append(row)
            write_curve(rows, run_dir)
            if "eval_score" in row:
                write_metadata(args, rows, grading, clock, history)
            bar.set_postfix(
                steps=row["env_steps"],
                team_return=_fmt(row["team_return_mean"]),
                best_val=_fmt(grading.best["eval_score"] if grading.best else None),
                masked=sum(r["masked_actions_taken"] for r in rows),
            )
    finally:
        if algo is not None:
            algo.stop()
        if owns_ray:
            ray.shutdown()
    return run_dir


def summary(run_dir: Path) -> dict[str, Any]:
    """What the CLI prints after a run."""
    meta = json.loads((run_dir / METADATA_FILE).read_text())
    out = {k: meta[k] for k in ("env_steps", "wall_time_s", "cpu_time_s", "audit", "command")}
    out["run_dir"] = str(run_dir)
    keys = ("iteration", "env_steps", "eval_score", "invalid_action_rate")
    out["best_eval"] = {k: meta["best"][k] for k in keys}
    out["final_eval"] = {k: meta["final_eval"][k] for k in keys}
    return out


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"
