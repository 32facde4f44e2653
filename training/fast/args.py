"""The fast trainers' arguments (no torch: ``hospital-marl --help`` builds its parser from these).

Each dataclass field's docstring is its ``--help`` (:class:`training.args.TrainArgs`). The loops
live in :mod:`training.fast.mappo` and :mod:`training.fast.ppo`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from hospital_marl.core.actions import ROLE_ACTION_COUNTS, ROLES
from hospital_marl.envs.observations import ROLE_INDEX, STATE_SIZE
from hospital_marl.envs.protocol import AEC, PROTOCOLS
from training.args import REWARDS, TrainArgs, shared
from training.common import reward_table

ALGORITHMS = ("mappo", "ippo")
ACTORS = ("mlp", "entity")
ROLE_DIMS = {role: len(np.arange(STATE_SIZE)[ROLE_INDEX[role]]) for role in ROLES}
MASK_COLUMNS = {
    role: slice(start, start + ROLE_ACTION_COUNTS[role])
    for role, start in zip(ROLES, np.cumsum([0] + [ROLE_ACTION_COUNTS[r] for r in ROLES]))
}
"""Each role's columns in the concatenated (B, 41) mask (roles in :data:`ROLES` order)."""
SEED_BASE = 10_000_000
"""Training days are seeded from here (far from the validation, 1000, and held-out, 20261201, days)."""


@dataclass
class MappoArgs(TrainArgs):
    """Every option of ``hospital-marl train fast-mappo``; its --help is generated from these docstrings."""

    COMMAND: ClassVar[str] = "hospital-marl train fast-mappo"
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {
        "algorithm": ALGORITHMS,
        "reward": REWARDS,
        "protocol": PROTOCOLS,
        "actor": ACTORS,
    }
    ALWAYS_SHOWN: ClassVar[tuple[str, ...]] = ("algorithm", "frames", "seed")
    RUN_PREFIX: ClassVar[str] = "fast"

    algorithm: str = "mappo"
    """mappo: one critic on the global state; ippo: one critic per role on its own observation."""
    frames: int = 20_000_000
    """Ticks of one department trained on (each is three role decisions)."""
    protocol: str = AEC
    """The team turn order trained on (hospital_marl.envs.protocol): aec, the graded one (each role
    reads the state the earlier roles of the tick left; recorded in the run, so the grader plays it
    so); simultaneous, the parallel env's (every role reads the start-of-tick state; graded as
    trained: planned on the start-of-tick state, a conflict played as the no-op)."""
    scenario: str = shared("scenario")
    all_scenarios: bool = shared("all_scenarios")
    seed: int = shared("seed")
    save: str | None = None
    """Run directory (default: runs/fast_<algorithm>_<scenario|all>_s<seed>)."""
    num_envs: int = 1000
    """Departments stepped together (split evenly over the scenarios)."""
    steps: int = 64
    """Ticks per department per rollout (a rollout is num_envs x steps frames)."""
    minibatch: int = 4096
    """Frames per minibatch of the update."""
    epochs: int = 2
    """Passes over each rollout (2, not CleanRL's 4: on a shared 2-core box wall time, not frames,
    is the budget, and the update is most of it)."""
    max_wall_s: float = 0.0
    """Stop after the first rollout that ends past this many wall seconds (0: no limit); the run
    records the frames it reached. The learning rate anneals over whichever budget runs out first."""
    learning_rate: float = shared("learning_rate")
    anneal_lr: bool = True
    """Decay the learning rate linearly to 0 over the run (CleanRL's default)."""
    gamma: float = shared("gamma")
    gae_lambda: float = shared("gae_lambda")
    clip: float = shared("clip")
    entropy: float = shared("entropy")
    value_loss: float = shared("value_loss")
    type_entropy: float = 0.0
    """Coefficient of a bonus on the entropy of each role's distribution over action *types* (no-op,
    general / ICU admission, transfer, early / ICU discharge, ventilate), beside --entropy's over
    actions: keeps rare valid types (ICU admissions, step-downs) from being driven to 0 (issue #40)."""
    max_grad_norm: float = 0.5
    """Clip the global gradient norm of each update step to this."""
    norm_adv: bool = True
    """Normalise advantages per minibatch."""
    hidden: tuple[int, ...] = (64, 64)
    """Hidden layers of every actor and critic MLP."""
    actor: str = "mlp"
    """mlp: each role's actor an MLP over its whole observation (a flat softmax over its actions);
    entity: one shared network per entity block (queue slots, board rows, ICU beds, ventilators),
    DeepSets mean/max context, one logit per action type per targeted entity
    (training.fast.entity). Not with --shared-actor or --recurrent."""
    entity_width: int = 32
    """Width of the entity actor's per-entity embeddings and context (32: its cost per decision is
    about 6x the 64x64 MLP actor's; 64 costs 18x)."""
    shared_actor: bool = False
    """One actor network for the three roles (padded observation + role one-hot) instead of one each."""
    obs_norm: bool = False
    """Normalise every network input (the encoded state the critic reads, so each role's view too) by
    its running mean and variance over all observations so far (clipped to +-10); the statistics are
    frozen into the exported ONNX actors."""
    norm_reward: bool = False
    """Divide each reward by the running standard deviation of the discounted return (SB3
    VecNormalize's reward normalisation; clipped to +-10)."""
    recurrent: bool = False
    """A GRU core (hidden size = the last hidden width) after the MLP of every actor and critic; the
    hidden state is carried over a day and zeroed at its start. The actors are exported to ONNX
    with their hidden state as an input and an output (policies.load takes the run). Not with
    --shared-actor."""
    reward: str = shared("reward")
    """env: the env's dense team reward; score: the graded composite's per-step change, the team's
    (hospital_marl.envs.wrappers.VectorScoreReward: a day's return is its score - 90)."""
    reward_scale: float = shared("reward_scale")
    reward_overrides: str = shared("reward_overrides")
    eval_interval: int = 2_000_000
    """Grade on validation days every this many frames (and at the end)."""
    eval_episodes: int = shared("eval_episodes", 8)
    eval_seed: int = shared("eval_seed")
    torch_threads: int = shared("torch_threads")
    device: str = "cpu"
    """torch device: cpu, cuda or cuda:N (the envs always step on the CPU)."""
    progress: bool = shared("progress")

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {self.algorithm!r}")
        self.require_at_least(
            1, "frames", "num_envs", "steps", "minibatch", "epochs", "eval_episodes", "entity_width"
        )
        self.require_at_least(0, "eval_interval", "max_wall_s", "type_entropy")
        if self.num_envs < len(self.scenarios):
            raise ValueError(f"num_envs ({self.num_envs}) must be at least the number of scenarios")
        self.hidden = tuple(int(w) for w in self.hidden)
        if self.actor not in ACTORS:
            raise ValueError(f"actor must be one of {ACTORS}, got {self.actor!r}")
        if self.actor == "entity" and (self.shared_actor or self.recurrent):
            raise ValueError("actor entity: a feed-forward actor per role; not with shared_actor, recurrent")
        if self.recurrent and self.shared_actor:
            raise ValueError("recurrent: a GRU per role actor only; not with shared_actor")
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {PROTOCOLS}, got {self.protocol!r}")
        if self.recurrent and not self.hidden:
            raise ValueError("recurrent: the GRU's width is the last hidden layer's; give hidden")
        self.require_reward()
        reward_table(self.reward_overrides)  # a bad override fails here, not after the envs are built

    @property
    def run_prefix(self) -> str:
        return f"fast_{self.algorithm}"


TRACKS = ("flat", "team")


@dataclass
class PpoArgs(TrainArgs):
    """Every option of ``hospital-marl train fast-ppo``; its --help is generated from these docstrings."""

    COMMAND: ClassVar[str] = "hospital-marl train fast-ppo"
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {"track": TRACKS}
    ALWAYS_SHOWN: ClassVar[tuple[str, ...]] = ("track", "frames", "seed")

    track: str = "flat"
    """flat: one of 39 actions per tick (Discrete(39)); team: the three role actions of a tick at once
    (MultiDiscrete([21, 16, 4])), one actor over the composed observation."""
    frames: int = 20_000_000
    """Ticks of one department trained on."""
    scenario: str = shared("scenario")
    all_scenarios: bool = shared("all_scenarios")
    seed: int = shared("seed")
    save: str | None = None
    """Run directory (default: runs/fast_ppo_<track>_<scenario|all>_s<seed>)."""
    num_envs: int = 1000
    """Departments stepped together (split evenly over the scenarios)."""
    steps: int = 64
    """Ticks per department per rollout (a rollout is num_envs x steps frames)."""
    minibatch: int = 4096
    """Frames per minibatch of the update."""
    epochs: int = 2
    """Passes over each rollout."""
    max_wall_s: float = 0.0
    """Stop after the first rollout that ends past this many wall seconds (0: no limit)."""
    learning_rate: float = shared("learning_rate")
    anneal_lr: bool = True
    """Decay the learning rate linearly to 0 over the run (CleanRL's default)."""
    gamma: float = shared("gamma")
    gae_lambda: float = shared("gae_lambda")
    clip: float = shared("clip")
    entropy: float = shared("entropy")
    value_loss: float = shared("value_loss")
    max_grad_norm: float = 0.5
    """Clip the global gradient norm of each update step to this."""
    hidden: tuple[int, ...] = (64, 64)
    """Hidden layers of the actor and critic MLPs (on policies.learned's feature vector)."""
    reward_scale: float = shared("reward_scale")
    reward_overrides: str = shared("reward_overrides")
    eval_interval: int = 2_000_000
    """Grade on validation days every this many frames (and at the end)."""
    eval_episodes: int = shared("eval_episodes", 8)
    eval_seed: int = shared("eval_seed")
    torch_threads: int = shared("torch_threads")
    device: str = "cpu"
    """torch device: cpu, cuda or cuda:N (the envs always step on the CPU)."""
    progress: bool = shared("progress")

    def __post_init__(self) -> None:
        if self.track not in TRACKS:
            raise ValueError(f"track must be one of {TRACKS}, got {self.track!r}")
        self.require_at_least(1, "frames", "num_envs", "steps", "minibatch", "epochs", "eval_episodes")
        self.require_at_least(0, "eval_interval", "max_wall_s")
        if self.num_envs < len(self.scenarios):
            raise ValueError(f"num_envs ({self.num_envs}) must be at least the number of scenarios")
        self.hidden = tuple(int(w) for w in self.hidden)
        reward_table(self.reward_overrides)

    @property
    def run_prefix(self) -> str:
        return f"fast_ppo_{self.track}"
