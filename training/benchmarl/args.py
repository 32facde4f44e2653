"""``hospital-marl train benchmarl``'s arguments and the seeds of its validation and held-out days.

No torch, TorchRL or BenchMARL here: the CLI builds its parser from :class:`Args`, and the trainer's
other modules (:mod:`~training.benchmarl.train`, :mod:`~training.benchmarl.callbacks`,
:mod:`~training.benchmarl.warmstart`) all import it from here, one way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from hospital_marl.core.scenarios import get_scenario
from policies.benchmarl import ALGORITHMS, OFF_POLICY
from training.args import REWARDS, TrainArgs, shared
from training.common import reward_table

WARM_STARTS = ("none", "team_heuristic", "team_planner")
"""What ``--warm-start`` accepts: no warm start, or cloning the team heuristic or the team planner."""

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
            1,
            "frames",
            "n_envs",
            "steps_per_batch",
            "minibatch_size",
            "epochs",
            "eval_episodes",
            "optimizer_steps",
            "replay_batch",
            "replay_size",
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
        self.require_reward()
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
