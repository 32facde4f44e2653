"""MAPPO, IPPO, QMIX and VDN from BenchMARL on the batched ED: ``hospital-marl train benchmarl``.

Run it as ``hospital-marl train benchmarl --algorithm mappo|ippo|qmix|vdn [--frames N] [--scenario S |
--all-scenarios] [--seed S] [--save DIR]`` (every field of :class:`Args` is a flag) or
``training.benchmarl.train.train(Args(...), grading.grade)``. The algorithms are BenchMARL's own
(``MappoConfig`` / ``IppoConfig``, TorchRL's ``ClipPPOLoss`` with masked categorical actors),
run by BenchMARL's ``Experiment`` on :class:`~training.benchmarl.task.HospitalTaskClass`:
one group (one actor) per role; MAPPO's critics read the global state, IPPO's each role's
own observation. Nothing of PPO is written here. QMIX / VDN are BenchMARL's ``QmixConfig`` /
``VdnConfig`` (TorchRL's ``QMixerLoss`` over a masked ``QValueModule``, epsilon-greedy collection
that respects the masks) with off-policy collection of whole days (``n_envs`` x
``steps_per_batch`` frames per batch into a replay buffer). BenchMARL mixes the agents *within*
a group; with one role per group the mixer has a single input, so here both amount to
independent per-role deep Q-learning on the team reward (no mixing across roles).

Frames are BenchMARL's: env steps summed over the batch, one step = one tick = three role
decisions (``role_decisions = 3 * frames``, comparable with ``train marl`` and RLlib).

Checkpoint selection uses *validation* days only: every ``--eval-interval`` frames the
current actors are exported and graded on the team track by the evaluation function given
to :func:`train` (:class:`training.common.Evaluate`; the CLI gives the project's grader,
:func:`grading.grade`), ``--eval-episodes`` per scenario from base seed ``--eval-seed``
(1000). The best row's actors are kept (``best/``). Held-out days (grader seed :data:`HELDOUT_SEED`) are never
seen here: ``benchmarks/marl_stats.py`` grades the saved runs on them.

``--warm-start team_heuristic`` (MAPPO / IPPO) first clones the team heuristic into the actors and
fits the critics to its returns (:mod:`training.benchmarl.warmstart`); the cloned actors are
graded at frame 0 (a checkpoint candidate) and kept in ``clone/``.

A run directory gets ``benchmarl.json`` (what :func:`policies.benchmarl.load_benchmarl_policy`
reads), ``best/<role>.onnx`` and ``final/<role>.onnx`` (torch-free actors), ``curve.json`` /
``curve.csv`` (one row per validation grading, the columns of ``train ppo``), and BenchMARL's
own experiment folder (its CSV logs, its marl-eval JSON of training returns, its checkpoint).
"""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path
from typing import Any

from hospital_marl.core.actions import ROLES
from policies.benchmarl import FORMAT, METADATA_FILE, OFF_POLICY, load_benchmarl_policy
from training.benchmarl.actors import (
    export_actors,
)
from training.benchmarl.args import (
    HELDOUT_SEED,
    VALIDATION_SEED,
    Args,
    require_marl_extra,
)
from training.benchmarl.warmstart import warm_start
from training.common import Clock, Evaluate, require_evaluate, write_json


# ------------------------------------------------------------------ the run
def experiment_config(args: Args, run_dir: Path) -> Any:
    from benchmarl.experiment import ExperimentConfig

    config = ExperimentConfig.get_from_yaml()  # BenchMARL's defaults, then ours
    config.sampling_device = config.train_device = config.buffer_device = "cpu"
    config.share_policy_params = True
    config.prefer_continuous_actions = False
    config.gamma = args.gamma
    config.lr = args.lr
    config.max_n_iters = None
    config.max_n_frames = args.iterations * args.frames_per_batch
    config.on_policy_collected_frames_per_batch = args.frames_per_batch
    config.on_policy_n_envs_per_worker = args.n_envs
    config.on_policy_n_minibatch_iters = args.epochs
    config.on_policy_minibatch_size = min(args.minibatch_size, args.frames_per_batch)
    config.off_policy_collected_frames_per_batch = args.frames_per_batch
    config.off_policy_n_envs_per_worker = args.n_envs
    config.off_policy_n_optimizer_steps = args.optimizer_steps
    config.off_policy_train_batch_size = args.replay_batch
    config.off_policy_memory_size = min(args.replay_size, config.max_n_frames)
    # BenchMARL's own evaluation (training-return logs) runs when ours does.
    config.evaluation = True
    config.evaluation_interval = (args.eval_every or args.iterations) * args.frames_per_batch
    config.evaluation_episodes = len(args.scenarios)
    config.evaluation_deterministic_actions = True
    config.render = False
    config.loggers = ["csv"]
    config.create_json = True
    config.save_folder = str(run_dir.resolve())
    config.checkpoint_interval = 0
    config.checkpoint_at_end = True
    config.keep_checkpoints_num = 1
    return config


def algorithm_config(args: Args) -> Any:
    from benchmarl.algorithms import IppoConfig, MappoConfig, QmixConfig, VdnConfig

    if args.algorithm in OFF_POLICY:  # BenchMARL's own YAML (target network, L2 TD(0) loss)
        return (QmixConfig if args.algorithm == "qmix" else VdnConfig).get_from_yaml()
    cls = MappoConfig if args.algorithm == "mappo" else IppoConfig
    config = cls.get_from_yaml()
    config.clip_epsilon = args.clip_epsilon
    config.entropy_coef = args.entropy_coef
    config.lmbda = args.lmbda
    return config


def model_config(args: Args) -> Any:
    import torch
    from benchmarl.models.mlp import MlpConfig

    return MlpConfig(num_cells=list(args.hidden), layer_class=torch.nn.Linear, activation_class=torch.nn.Tanh)


def train(args: Args, evaluate: Evaluate) -> Path:
    """Train with BenchMARL, grading periodically with ``evaluate`` (:func:`grading.grade`, passed by
    the layer above) on validation days; write the run directory (module docstring) and return it."""
    require_evaluate(evaluate, "training.benchmarl.train.train(args, grading.grade)")
    require_marl_extra()
    import torch
    import torchrl
    from benchmarl.experiment import Experiment

    from training.benchmarl.callbacks import ValidationGrading
    from training.benchmarl.task import ALL, make_task

    torch.set_num_threads(args.torch_threads)
    run_dir = args.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    clock = Clock()
    grading = ValidationGrading(args, run_dir, evaluate)
    scenario = ALL if args.all_scenarios else args.scenario
    task = make_task(scenario, args.reward_mode, args.reward_scale, args.reward_overrides, args.reward)
    experiment = Experiment(
        task=task,
        algorithm_config=algorithm_config(args),
        model_config=model_config(args),
        critic_model_config=model_config(args),
        seed=args.seed,
        config=experiment_config(args, run_dir),
        callbacks=[grading],
    )
    cloned = None
    if args.warm_start != "none":
        cloned = warm_start(experiment, args).as_json()
        export_actors(experiment, run_dir / "clone")
        grading.grade_now()  # frame 0: the cloned actors, a checkpoint candidate like any other
    experiment.run()
    grading.grade_now()  # the last iteration, if BenchMARL's interval skipped it
    audit = grading.audit
    meta = {
        "format": FORMAT,
        "name": f"benchmarl_{args.algorithm}",
        "track": "team",
        "algorithm": args.algorithm,
        "roles": list(ROLES),
        "actors": {
            "best": {role: f"best/{role}.onnx" for role in ROLES},
            "final": {role: f"final/{role}.onnx" for role in ROLES},
            **({"clone": {role: f"clone/{role}.onnx" for role in ROLES}} if cloned else {}),
        },
        "warm_start": cloned and {"from": args.warm_start, **cloned},
        "best": grading.best,
        "final_eval": grading.rows[-1],
        "frames": int(experiment.total_frames),
        "role_decisions": 3 * int(experiment.total_frames),
        "wall_time_s": clock.wall(),
        "cpu_time_s": clock.cpu(),
        "audit": audit,
        "validation": {"seed": args.eval_seed, "episodes_per_scenario": args.eval_episodes},
        "experiment_folder": Path(experiment.folder_name).resolve().relative_to(run_dir.resolve()).as_posix(),
        "args": args.as_json(),
        "versions": {
            "benchmarl": _version("benchmarl"),
            "torchrl": torchrl.__version__,
            "torch": torch.__version__,
        },
        "command": args.command_line(),
    }
    write_json(run_dir / METADATA_FILE, meta)
    load_benchmarl_policy(run_dir)  # the run must load as it will be graded
    return run_dir


def _version(package: str) -> str:
    return version(package)


def summary(run_dir: Path) -> dict[str, Any]:
    """What the CLI prints after a run."""
    meta = json.loads((run_dir / METADATA_FILE).read_text())
    keep = ("algorithm", "frames", "role_decisions", "wall_time_s", "audit", "command")
    out = {k: meta[k] for k in keep}
    out["run_dir"] = str(run_dir)
    out["best_eval"] = {k: meta["best"][k] for k in ("frames", "eval_score", "invalid_action_rate")}
    out["final_eval"] = {k: meta["final_eval"][k] for k in ("frames", "eval_score", "invalid_action_rate")}
    return out


__all__ = ["HELDOUT_SEED", "VALIDATION_SEED", "Args", "summary", "train"]
