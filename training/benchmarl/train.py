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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from hospital_marl.core.actions import ROLE_ACTION_COUNTS, ROLES
from hospital_marl.core.scenarios import get_scenario
from policies.benchmarl import ALGORITHMS, FORMAT, METADATA_FILE, OFF_POLICY, load_benchmarl_policy
from policies.learned import ONNX_INPUT, ONNX_OUTPUT
from policies.marl import ROLE_SCALES
from training.args import REWARDS, TrainArgs, shared
from training.benchmarl.warmstart import WARM_STARTS, actor_logits
from training.common import Clock, Evaluate, require_evaluate, reward_table, write_json

VALIDATION_SEED = 1000
"""Grader base seed of the validation days (checkpoint selection), as in ``train ppo|marl``."""
HELDOUT_SEED = 20261201
"""Grader base seed of the held-out days: used only by the final evaluation, never in training."""
EPISODE_TICKS = 100
INSTALL_HINT = 'pip install -e ".[marl]" -c constraints/cpu.txt (from a clone of the repository)'


def require_marl_extra() -> None:
    """Raise a clear ImportError when BenchMARL / TorchRL (the ``marl`` extra) are missing."""
    try:
        import benchmarl  # noqa: F401
        import torchrl  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            f"train benchmarl needs BenchMARL and TorchRL ({exc.name} is missing): {INSTALL_HINT}"
        ) from exc


@dataclass
class Args(TrainArgs):
    """Every option of ``hospital-marl train benchmarl``; its --help is generated from these docstrings."""

    COMMAND: ClassVar[str] = "hospital-marl train benchmarl"
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {
        "algorithm": ALGORITHMS,
        "reward_mode": ("team", "role"),
        "reward": REWARDS,
        "warm_start": WARM_STARTS,
    }
    ALWAYS_SHOWN: ClassVar[tuple[str, ...]] = ("algorithm", "frames", "seed")

    algorithm: str = "mappo"
    """mappo: critics on the global state (centralised); ippo: each role's critic on its own observation;
    qmix / vdn: Q-learning per role (one role per group: nothing to mix across roles)."""
    frames: int = 256_000
    """Env steps to train on, summed over the batch (one step = one tick = three role decisions)."""
    scenario: str = shared("scenario")
    all_scenarios: bool = shared("all_scenarios")
    """Train on the five built-in scenarios at once (the batch split between them)."""
    seed: int = shared("seed")
    """Seeds torch (BenchMARL's seed_everything) and the training envs' days."""
    save: str | None = None
    """Run directory (default: runs/benchmarl_<algorithm>_<scenario|all>_s<seed>)."""
    n_envs: int = 64
    """Batched envs collecting in parallel (one TorchRL env, batch_size=(n_envs,))."""
    steps_per_batch: int = EPISODE_TICKS
    """Steps per env per PPO iteration (frames per iteration = n_envs x this)."""
    minibatch_size: int = 1600
    """Frames per PPO minibatch."""
    epochs: int = 4
    """Passes over each iteration's frames (BenchMARL's on_policy_n_minibatch_iters)."""
    optimizer_steps: int = 1000
    """QMIX / VDN: gradient steps per collected batch (BenchMARL's off_policy_n_optimizer_steps)."""
    replay_batch: int = 128
    """QMIX / VDN: frames sampled from the replay buffer per gradient step (BenchMARL's default)."""
    replay_size: int = 100_000
    """QMIX / VDN: frames the replay buffer keeps (capped at the run's frames)."""
    lr: float = shared("learning_rate")
    gamma: float = shared("gamma")
    """Discount per tick (as in train ppo|marl)."""
    lmbda: float = shared("gae_lambda")
    clip_epsilon: float = shared("clip")
    entropy_coef: float = shared("entropy")
    hidden: tuple[int, ...] = (128, 128)
    """Hidden layers of every actor and critic MLP (tanh)."""
    reward_mode: str = shared("reward_mode")
    reward: str = shared("reward")
    """env: the env's dense reward; score: the graded composite, paid out per step to every
    role (hospital_marl.envs.wrappers.VectorScoreReward: an episode's return is its score - 90)."""
    reward_scale: float = shared("reward_scale")
    """Rewards are multiplied by this for learning (a death is -15 on the env's reward, 1-6 points
    with --reward score, where 0.3 keeps returns near the dense reward's)."""
    reward_overrides: str = shared("reward_overrides")
    eval_interval: int = 32_000
    """Grade on validation days every this many frames (whole iterations; 0: only at the end)."""
    eval_episodes: int = 4
    """Validation episodes per scenario in each periodic evaluation."""
    eval_seed: int = VALIDATION_SEED
    """Grader base seed of the validation days (checkpoint selection; never the held-out seed)."""
    warm_start: str = "none"
    """team_heuristic / team_planner: before PPO, clone that policy's play on training days into the actors
    (masked cross-entropy) and fit the critics to its discounted returns (training/benchmarl/warmstart.py);
    mappo / ippo only. team_planner plays each day on the scalar AEC env (~0.4 s CPU a day; keep
    --warm-start-days a multiple of --n-envs for an even scenario mix) and needs --reward env."""
    warm_start_days: int = 256
    """Warm start: days of demonstrations, played n_envs at a time on the training seeds (each env keeps
    its whole days)."""
    warm_start_epochs: int = 10
    """Warm start: passes over the demonstrations when fitting actors and critics."""
    warm_start_lr: float = 1e-3
    """Warm start: Adam learning rate of the cloning (PPO then uses --lr)."""
    dagger_rounds: int = 0
    """--warm-start team_planner: DAgger rounds after the planner's demonstrations (each: the cloned actors
    play --dagger-days fresh training days, the planner labels every role turn, all labels re-fitted)."""
    dagger_days: int = 256
    """DAgger: training days the actors play per round (a multiple of --n-envs for an even scenario mix)."""
    dagger_beta: float = 0.0
    """DAgger: round i plays the planner's own choice with probability dagger_beta**i per turn (0: the actors
    alone after round 0, the planner's demonstrations)."""
    torch_threads: int = shared("torch_threads")
    progress: bool = True
    """Print one line per validation grading on stderr (BenchMARL's own progress bar always shows)."""

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {self.algorithm!r}")
        get_scenario(self.scenario)
        self.require_at_least(
            1, "frames", "n_envs", "steps_per_batch", "minibatch_size", "epochs", "eval_episodes",
            "optimizer_steps", "replay_batch", "replay_size",
        )
        if self.eval_interval < 0 or self.seed < 0:
            raise ValueError("eval_interval and seed must be >= 0")
        if self.eval_seed == HELDOUT_SEED:
            raise ValueError(f"eval_seed {HELDOUT_SEED} is the held-out seed: validation must use other days")
        if self.all_scenarios and self.n_envs < 5:
            raise ValueError("--all-scenarios needs n_envs >= 5 (one env per scenario at least)")
        if not self.hidden or min(self.hidden) < 1 or not (self.lr > 0 and self.reward_scale > 0):
            raise ValueError("hidden must be positive widths; lr and reward_scale must be > 0")
        self.hidden = tuple(int(w) for w in self.hidden)
        reward_table(self.reward_overrides)  # refuse a bad override before training starts
        if self.reward not in REWARDS:
            raise ValueError(f"reward must be one of {REWARDS}, got {self.reward!r}")
        if self.reward == "score" and self.reward_overrides:
            raise ValueError("reward_overrides change the env's reward, which --reward score replaces")
        if self.warm_start not in WARM_STARTS:
            raise ValueError(f"warm_start must be one of {WARM_STARTS}, got {self.warm_start!r}")
        if self.warm_start != "none" and self.algorithm in OFF_POLICY:
            raise ValueError("--warm-start fits an actor and a critic: it needs --algorithm mappo or ippo")
        if self.warm_start == "team_planner" and self.reward != "env":
            raise ValueError(
                "--warm-start team_planner fits the critics to the env's reward: it needs --reward env"
            )
        if self.warm_start_days < 1 or self.warm_start_epochs < 1 or not self.warm_start_lr > 0:
            raise ValueError("warm_start_days and warm_start_epochs must be >= 1, warm_start_lr > 0")
        if self.dagger_rounds < 0 or self.dagger_days < 1 or not 0.0 <= self.dagger_beta <= 1.0:
            raise ValueError("dagger_rounds must be >= 0, dagger_days >= 1, dagger_beta in [0, 1]")
        if self.dagger_rounds and self.warm_start != "team_planner":
            raise ValueError("--dagger-rounds relabels with the planner: it needs --warm-start team_planner")
        if self.reward == "score" and self.reward_mode != "team":
            raise ValueError("--reward score is the team's score: it needs --reward-mode team")

    @property
    def run_prefix(self) -> str:
        return f"benchmarl_{self.algorithm}"

    @property
    def frames_per_batch(self) -> int:
        return self.n_envs * self.steps_per_batch

    @property
    def iterations(self) -> int:
        """PPO iterations: ``frames`` rounded up to whole batches."""
        return -(-self.frames // self.frames_per_batch)

    @property
    def eval_every(self) -> int:
        """The evaluation interval in whole iterations (0: only at the end)."""
        return -(-self.eval_interval // self.frames_per_batch) if self.eval_interval else 0


# ------------------------------------------------------------------ actors
def actor_nets(experiment: Any) -> dict[str, Any]:
    """Each role's actor MLP (encoded observation -> logits, or action values for QMIX / VDN) as a
    plain torch module (a copy)."""
    from torchrl.modules import MultiAgentMLP

    nets = {}
    for role in ROLES:
        mlps = [m for m in experiment.group_policies[role].modules() if isinstance(m, MultiAgentMLP)]
        if len(mlps) != 1:
            raise RuntimeError(f"expected one MultiAgentMLP in the {role} actor, found {len(mlps)}")
        nets[role] = mlps[0].get_stateful_net(copy=True).eval()
    return nets


def export_actors(experiment: Any, out: Path) -> dict[str, str]:
    """Write ``out/<role>.onnx`` (input ``features`` (batch, d_role), output ``logits``); the ONNX
    must reproduce BenchMARL's own actor logits (checked on random inputs before it is kept)."""
    import warnings

    import torch

    from policies.learned import OnnxLogits

    out.mkdir(parents=True, exist_ok=True)
    files = {}
    for role, net in actor_nets(experiment).items():
        path = out / f"{role}.onnx"
        d = len(ROLE_SCALES[role])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            torch.onnx.export(
                net,
                (torch.zeros(1, d),),
                str(path),
                input_names=[ONNX_INPUT],
                output_names=[ONNX_OUTPUT],
                dynamic_axes={ONNX_INPUT: {0: "batch"}, ONNX_OUTPUT: {0: "batch"}},
                opset_version=17,
                dynamo=False,
            )
        probe = torch.rand(d) * 3
        with torch.no_grad():
            expected = benchmarl_logits(experiment, role, probe.numpy())
        got = OnnxLogits(path)(probe.numpy())
        if got.shape != (ROLE_ACTION_COUNTS[role],) or not np.allclose(got, expected, atol=1e-4):
            raise RuntimeError(f"the exported {role} actor does not reproduce BenchMARL's logits")
        files[role] = path.relative_to(out.parent).as_posix()
    return files


def benchmarl_logits(experiment: Any, role: str, features: np.ndarray) -> np.ndarray:
    """The logits (QMIX / VDN: action values) BenchMARL's own ``role`` actor computes for one encoded
    observation (:func:`~training.benchmarl.warmstart.actor_logits` on a batch of one)."""
    import torch

    with torch.no_grad():
        logits = actor_logits(experiment, role, torch.as_tensor(features, dtype=torch.float32).reshape(1, -1))
    return logits.reshape(-1).numpy()


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


def load_benchmarl_policy_dir(run_dir: Path, which: str, args: Args) -> Any:
    """The actors in ``run_dir/which`` as a team policy (before ``benchmarl.json`` exists)."""
    from policies.benchmarl import onnx_role
    from policies.marl import MarlTeamPolicy

    roles = {role: onnx_role(role, run_dir / which / f"{role}.onnx") for role in ROLES}
    return MarlTeamPolicy(roles, name=f"{args.algorithm}_{which}")


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
        from training.benchmarl.warmstart import warm_start

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


def masked_actions_taken(batch: Any) -> tuple[int, int]:
    """(actions the role's mask forbade, actions) in a TorchRL batch of this task's env."""
    import torch

    taken = total = 0
    for role in ROLES:
        action = batch.get((role, "action")).long()
        allowed = torch.gather(batch.get((role, "action_mask")), -1, action.unsqueeze(-1))
        taken += int((~allowed).sum())
        total += action.numel()
    return taken, total


def _version(package: str) -> str:
    from importlib.metadata import version

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
