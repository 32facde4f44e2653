"""Per-role learners on the shared team reward: iterated best response and parameter sharing.

Run it as ``hospital-marl train marl --method ibr|shared [--timesteps N] [--rounds R]
[--scenario S | --all-scenarios] [--seed S] [--save DIR]`` (every field of :class:`Args`
is a flag) or ``python -m policies.marl ...``. Two methods, both masked (sb3-contrib
MaskablePPO), both trained on the AEC/parallel env's *team* reward, both graded on the
team track (:func:`grading.grade` with ``track="team"``):

- ``ibr`` (independent learners, iterated best response): one MaskablePPO per role.
  :class:`RoleEnv` turns the AEC env into a single-agent Gymnasium env for one role:
  the other two roles act inside it by *frozen* policies -- the team heuristic's rules
  (:data:`policies.heuristic.ROLE_RULES`) in round 0, then the latest trained model of
  each role. Each round trains triage, then bed_manager, then ventilator_officer, each
  against the others' current versions.
- ``shared`` (parameter sharing): one MaskablePPO network for all three roles over the
  parallel env. :class:`MaskedParallelVecEnv` pads each role's observation to the largest
  role vector and appends a role one-hot; the action space is padded to ``Discrete(21)``
  with the padded actions always masked.

A run directory gets ``model.json`` (``format: hospital_marl.marl/1``: method, model
files per role, timesteps, wall/CPU time, last evaluation, args, command), the models
(``<role>.zip`` for ibr, ``shared.zip`` for shared), and ``curve.json`` / ``curve.csv``
(one row per periodic team-track evaluation, the same columns as ``train ppo``'s, plus
``round``/``role`` for ibr). :func:`load_marl_policy` (or :func:`is_marl_run` + it) loads a
run directory as a team-track policy (:class:`MarlTeamPolicy`, ``act_role``).

Timesteps count *role decisions* for both methods (one per role per tick the learner
acts in), so they compare with RLlib's env steps, and are three times the ticks of
``train ppo --track team``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from hospital_marl.core.actions import ROLE_ACTION_COUNTS, ROLES
from hospital_marl.core.scenarios import BUILTIN_SCENARIOS, DEFAULT_SCENARIO, get_scenario
from hospital_marl.envs.aec import HospitalAECEnv
from hospital_marl.envs.observations import role_slices
from hospital_marl.envs.parallel import HospitalParallelEnv
from policies.base import BasePolicy
from policies.heuristic import HeuristicPolicy
from policies.train_ppo import Clock, field_docs, write_curve

FORMAT = "hospital_marl.marl/1"
METADATA_FILE = "model.json"
METHODS = ("ibr", "shared")
CHOICES: dict[str, tuple[str, ...]] = {"method": METHODS}
OBS_CLIP = 5.0
MAX_OBS = max(sl.stop for slices in role_slices().values() for _, sl in slices)  # 100 (bed_manager)
MAX_ACTIONS = max(ROLE_ACTION_COUNTS.values())  # 21 (triage)
SHARED_OBS = MAX_OBS + len(ROLES)  # padded observation + role one-hot


@dataclass
class Args:
    """Every option of ``hospital-marl train marl``; its --help is generated from these docstrings."""

    method: str = "ibr"
    """ibr: one MaskablePPO per role, others frozen, in rounds; shared: one network for all roles."""
    timesteps: int = 60_000
    """Total role decisions trained on (ibr: split evenly over rounds x 3 roles)."""
    rounds: int = 2
    """ibr: rounds of best response (each trains triage, bed_manager, ventilator_officer in turn)."""
    scenario: str = DEFAULT_SCENARIO
    """The scenario to train on (ignored with --all-scenarios)."""
    all_scenarios: bool = False
    """Train on the five built-in scenarios, switched every episode."""
    seed: int = 0
    """Seeds torch, sampling and the training envs' days."""
    save: str | None = None
    """Run directory (default: runs/marl_<method>_<scenario|all>_s<seed>)."""
    n_envs: int = 4
    """Envs per vector (shared: parallel envs, each contributing 3 agent slots)."""
    n_steps: int = 128
    """Steps per vector slot per rollout."""
    batch_size: int = 256
    """Minibatch size of the PPO update."""
    n_epochs: int = 5
    """Passes over each rollout."""
    learning_rate: float = 3e-4
    """Adam step size."""
    gamma: float = 0.97
    """Discount per tick (as in train ppo)."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    ent_coef: float = 0.003
    """Entropy bonus."""
    net_arch: tuple[int, ...] = (64, 64)
    """Hidden layers of the policy and value MLPs."""
    reward_scale: float = 0.02
    """Rewards are multiplied by this for learning (a death is -15)."""
    eval_freq: int = 10_000
    """shared: grade every this many timesteps (0: only at the end); ibr grades after every role phase."""
    eval_episodes: int = 2
    """Episodes per scenario in each periodic evaluation."""
    eval_seed: int = 1000
    """Base seed of the evaluation days (not 0: the reported grades use seed 0)."""
    torch_threads: int = 1
    """torch CPU threads."""
    verbose: int = 0
    """1: print each evaluation row to stderr."""

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        get_scenario(self.scenario)
        for name in ("timesteps", "rounds", "n_envs", "n_steps", "batch_size", "n_epochs", "eval_episodes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)!r}")
        if self.eval_freq < 0:
            raise ValueError(f"eval_freq must be >= 0, got {self.eval_freq!r}")
        self.net_arch = tuple(int(w) for w in self.net_arch)

    @property
    def scenarios(self) -> tuple[str, ...]:
        return tuple(BUILTIN_SCENARIOS) if self.all_scenarios else (self.scenario,)

    @property
    def run_dir(self) -> Path:
        where = "all" if self.all_scenarios else self.scenario
        return Path(self.save or f"runs/marl_{self.method}_{where}_s{self.seed}")


# ---------------------------------------------------------------- observations
def _role_scales() -> dict[str, np.ndarray]:
    """Per-entry divisors of each role's raw vector: severities /5, flags /1, ticks and counts /20."""
    per_key = {"waiting_queue": np.tile([5.0, 1.0, 20.0], 10)}
    scales = {}
    for role, slices in role_slices().items():
        out = np.full(slices[-1][1].stop, 20.0, np.float32)
        for key, sl in slices:
            width = sl.stop - sl.start
            if key in per_key and len(per_key[key]) == width:
                out[sl] = per_key[key]
            elif key in ("bed_occupancy", "icu_occupancy"):
                out[sl] = 5.0
            elif key in ("icu_needs_vent", "icu_on_vent", "icu_ready", "ventilator_status"):
                out[sl] = 1.0
            elif key == "time_step":
                out[sl] = 100.0
        scales[role] = out
    return scales


ROLE_SCALES = _role_scales()


def encode_role(role: str, observation: np.ndarray) -> np.ndarray:
    """A role's raw AEC vector -> a fixed-scale float32 vector in [0, OBS_CLIP]."""
    scaled = np.asarray(observation, np.float32) / ROLE_SCALES[role]
    return np.clip(scaled, 0.0, OBS_CLIP).astype(np.float32)


def encode_shared(role: str, observation: np.ndarray) -> np.ndarray:
    """The shared network's input: the scaled vector zero-padded to MAX_OBS, then the role one-hot."""
    out = np.zeros(SHARED_OBS, np.float32)
    vec = encode_role(role, observation)
    out[: len(vec)] = vec
    out[MAX_OBS + ROLES.index(role)] = 1.0
    return out


def pad_mask(mask: np.ndarray) -> np.ndarray:
    """A role's mask padded to MAX_ACTIONS; the padded actions are always invalid."""
    out = np.zeros(MAX_ACTIONS, bool)
    out[: len(mask)] = np.asarray(mask, bool)
    return out


def _masked_argmax(model: Any, features: np.ndarray, mask: np.ndarray) -> int:
    import torch

    policy = model.policy
    with torch.no_grad():
        obs = torch.as_tensor(features, dtype=torch.float32).reshape(1, -1)
        latent = policy.mlp_extractor.forward_actor(
            policy.extract_features(obs, policy.pi_features_extractor)
        )
        logits = policy.action_net(latent)[0].numpy()
    return int(np.argmax(np.where(mask, logits, -np.inf)))


RoleAct = Callable[[np.ndarray, np.ndarray], int]
"""A frozen role policy: (raw role observation, role mask) -> action."""


def heuristic_role(role: str) -> RoleAct:
    """The team heuristic's rule for one role."""
    policy = HeuristicPolicy()
    return lambda obs, mask: policy.act_role(role, obs, mask)


def model_role(role: str, model: Any, shared: bool = False) -> RoleAct:
    """A trained model as a frozen role policy (deterministic: the best action the mask allows)."""
    if shared:
        return lambda obs, mask: _masked_argmax(model, encode_shared(role, obs), pad_mask(mask))
    return lambda obs, mask: _masked_argmax(model, encode_role(role, obs), np.asarray(mask, bool))


# ------------------------------------------------------------------ IBR env
class RoleEnv(gym.Env):
    """One role of the AEC env as a single-agent Gymnasium env; the other roles are frozen inside it.

    ``reset``/``step`` return the role's scaled observation (:func:`encode_role`);
    :meth:`action_masks` is its AEC mask (what sb3-contrib's MaskablePPO reads). A step plays
    the role's action, then the other roles' frozen policies until the role's next turn
    (the tick runs in between); the reward is the team reward the role received over that
    cycle (times ``reward_scale``). Scenarios switch every episode (env ``rank`` starts at
    scenario ``rank % n``).
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        role: str,
        others: Mapping[str, RoleAct],
        scenarios: tuple[str, ...] = (DEFAULT_SCENARIO,),
        reward_scale: float = 1.0,
        rank: int = 0,
    ) -> None:
        super().__init__()
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {role!r}")
        missing = set(ROLES) - {role} - set(others)
        if missing:
            raise ValueError(f"RoleEnv({role!r}) needs frozen policies for {sorted(missing)}")
        self.role, self.others = role, dict(others)
        self.scenarios, self.reward_scale = scenarios, reward_scale
        self._next = rank % len(scenarios)
        self.aec = HospitalAECEnv(scenario=scenarios[self._next])
        self.observation_space = spaces.Box(0.0, OBS_CLIP, (len(ROLE_SCALES[role]),), np.float32)
        self.action_space = spaces.Discrete(ROLE_ACTION_COUNTS[role])
        self._return = 0.0
        self._length = 0

    def action_masks(self) -> np.ndarray:
        return self.aec.action_mask(self.role).astype(bool)

    def _observe(self) -> np.ndarray:
        return encode_role(self.role, self.aec.observe(self.role)["observation"])

    def _done(self) -> tuple[bool, bool]:
        return self.aec.terminations[self.role], self.aec.truncations[self.role]

    def _play_others(self) -> float:
        """Frozen roles act until it is this role's turn again (or the episode ends); the reward accrued."""
        total = 0.0
        while self.aec.agent_selection != self.role and not any(self._done()):
            agent = self.aec.agent_selection
            obs = self.aec.observe(agent)
            self.aec.step(self.others[agent](obs["observation"], obs["action_mask"]))
            total += self.aec.rewards[self.role]
        return total

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        scenario = self.scenarios[self._next]
        self._next = (self._next + 1) % len(self.scenarios)
        self.aec.reset(seed=seed, options={**(options or {}), "scenario": scenario})
        self._return, self._length = 0.0, 0
        self._play_others()
        return self._observe(), {}

    def step(self, action: int):
        self.aec.step(int(action))
        reward = self.aec.rewards[self.role]
        if not any(self._done()):
            reward += self._play_others()
        terminated, truncated = self._done()
        self._return += reward
        self._length += 1
        info: dict[str, Any] = {}
        if terminated or truncated:
            info["episode"] = {"r": self._return, "l": self._length}
        return self._observe(), reward * self.reward_scale, terminated, truncated, info


# ------------------------------------------------------------ shared VecEnv
def _vec_env_base() -> type:
    from stable_baselines3.common.vec_env import VecEnv

    return VecEnv


def make_masked_parallel_vec_env(
    n_envs: int, scenarios: tuple[str, ...] = (DEFAULT_SCENARIO,), reward_scale: float = 1.0, seed: int = 0
) -> Any:
    """A :class:`MaskedParallelVecEnv` (built here so that this module imports without SB3)."""
    VecEnv = _vec_env_base()

    class MaskedParallelVecEnv(VecEnv):
        """Mask-aware SB3 ``VecEnv`` over ``n_envs`` parallel envs, 3 agent slots each (parameter sharing).

        SuperSuit's stable-baselines3 path (``pettingzoo_env_to_vec_env_v1`` +
        ``concat_vec_envs_v1``) flattens the agents into vector slots but drops the action
        masks (and the Dict observations that carry them), so sb3-contrib's MaskablePPO
        cannot mask. This VecEnv does the same slot layout -- slot ``3 * i + k`` is role
        ``ROLES[k]`` of parallel env ``i`` -- and keeps the masks:

        - observations: each role's scaled vector zero-padded to the largest role vector
          (``MAX_OBS``) plus a role one-hot (:func:`encode_shared`);
        - actions: ``Discrete(21)`` for every slot; a role's actions beyond its own count
          are padding and always masked (:func:`pad_mask`);
        - ``env_method("action_masks")`` returns one bool mask per slot (the parallel env's
          mask for that agent, padded), so ``sb3_contrib.common.maskable.utils.get_action_masks``
          and ``is_masking_supported`` (``has_attr("action_masks")``) work.

        Rewards are the team reward (every slot of an env gets it) times ``reward_scale``;
        an env resets itself when its episode ends (``terminal_observation`` in the slot's
        info, SB3 convention; ``episode`` with the raw return on the triage slot, so the
        Monitor-style buffer counts each episode once). Padding is done here rather than with
        SuperSuit's ``pad_observations_v0``/``pad_action_space_v0``, which pad the raw (unscaled)
        Dict observation and would also need the masks padded separately.
        """

        def __init__(self) -> None:
            self.envs = [HospitalParallelEnv(scenario=scenarios[i % len(scenarios)]) for i in range(n_envs)]
            self.scenarios = scenarios
            self.reward_scale = reward_scale
            self._next = [i % len(scenarios) for i in range(n_envs)]
            self._base_seeds = [seed + 7919 * i for i in range(n_envs)]
            self._episode = [0] * n_envs
            self._masks = np.zeros((n_envs * len(ROLES), MAX_ACTIONS), bool)
            self._returns = np.zeros(n_envs)
            self._lengths = np.zeros(n_envs, int)
            self._actions: np.ndarray | None = None
            obs_space = spaces.Box(0.0, OBS_CLIP, (SHARED_OBS,), np.float32)
            super().__init__(n_envs * len(ROLES), obs_space, spaces.Discrete(MAX_ACTIONS))

        # -- helpers
        def _slots(self, i: int, observations: Mapping[str, Mapping[str, np.ndarray]]) -> np.ndarray:
            rows = []
            for k, role in enumerate(ROLES):
                rows.append(encode_shared(role, observations[role]["observation"]))
                self._masks[i * len(ROLES) + k] = pad_mask(observations[role]["action_mask"])
            return np.stack(rows)

        def _reset_env(self, i: int) -> np.ndarray:
            scenario = self.scenarios[self._next[i]]
            self._next[i] = (self._next[i] + 1) % len(self.scenarios)
            episode_seed = self._base_seeds[i] + 100_003 * self._episode[i]
            self._episode[i] += 1
            observations, _ = self.envs[i].reset(seed=episode_seed, options={"scenario": scenario})
            self._returns[i], self._lengths[i] = 0.0, 0
            return self._slots(i, observations)

        # -- VecEnv API
        def reset(self) -> np.ndarray:
            self.reset_infos = [{} for _ in range(self.num_envs)]
            return np.concatenate([self._reset_env(i) for i in range(len(self.envs))])

        def step_async(self, actions: np.ndarray) -> None:
            self._actions = np.asarray(actions).reshape(-1)

        def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
            assert self._actions is not None, "step_async first"
            n = len(ROLES)
            obs = np.zeros((self.num_envs, SHARED_OBS), np.float32)
            rewards = np.zeros(self.num_envs, np.float32)
            dones = np.zeros(self.num_envs, bool)
            infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
            for i, env in enumerate(self.envs):
                actions = {role: int(self._actions[i * n + k]) for k, role in enumerate(ROLES)}
                observations, rew, term, trunc, _ = env.step(actions)
                team = float(rew[ROLES[0]])
                self._returns[i] += team
                self._lengths[i] += 1
                rewards[i * n : (i + 1) * n] = team * self.reward_scale
                slots = self._slots(i, observations)
                if term[ROLES[0]] or trunc[ROLES[0]]:
                    dones[i * n : (i + 1) * n] = True
                    for k in range(n):
                        infos[i * n + k]["terminal_observation"] = slots[k]
                        infos[i * n + k]["TimeLimit.truncated"] = bool(trunc[ROLES[0]] and not term[ROLES[0]])
                    infos[i * n]["episode"] = {"r": float(self._returns[i]), "l": int(self._lengths[i])}
                    slots = self._reset_env(i)
                obs[i * n : (i + 1) * n] = slots
            return obs, rewards, dones, infos

        def action_masks(self) -> np.ndarray:
            """(num_envs, 21) bool: each slot's mask, padded actions False."""
            return self._masks.copy()

        def close(self) -> None:
            for env in self.envs:
                env.close()

        def _indices(self, indices: Any) -> list[int]:
            if indices is None:
                return list(range(self.num_envs))
            return [indices] if isinstance(indices, int) else list(indices)

        def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
            if attr_name == "action_masks":
                return [lambda j=j: self._masks[j].copy() for j in self._indices(indices)]
            if attr_name == "render_mode":
                return [None for _ in self._indices(indices)]
            return [getattr(self.envs[j // len(ROLES)], attr_name) for j in self._indices(indices)]

        def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
            for j in self._indices(indices):
                setattr(self.envs[j // len(ROLES)], attr_name, value)

        def env_method(self, method_name: str, *method_args: Any, indices: Any = None, **kwargs: Any) -> list:
            if method_name == "action_masks":
                return [self._masks[j].copy() for j in self._indices(indices)]
            return [
                getattr(self.envs[j // len(ROLES)], method_name)(*method_args, **kwargs)
                for j in self._indices(indices)
            ]

        def env_is_wrapped(self, wrapper_class: type, indices: Any = None) -> list[bool]:
            return [False for _ in self._indices(indices)]

        def has_attr(self, attr_name: str) -> bool:
            return attr_name == "action_masks" or hasattr(self.envs[0], attr_name)

        def seed(self, seed: int | None = None) -> list[None]:
            if seed is not None:
                self._base_seeds = [seed + 7919 * i for i in range(len(self.envs))]
                self._episode = [0] * len(self.envs)
            return [None for _ in range(self.num_envs)]

    return MaskedParallelVecEnv()


# ------------------------------------------------------------------ policy
class MarlTeamPolicy(BasePolicy):
    """Per-role trained models as a team-track policy: ``act_role`` plays the role's model,
    deterministically (the most probable action its mask allows; never an invalid one)."""

    name = "marl"
    tracks: tuple[str, ...] = ("team",)

    def __init__(self, roles: Mapping[str, RoleAct], name: str | None = None) -> None:
        super().__init__()
        self.roles = dict(roles)
        self.metadata: dict[str, Any] = {}
        if name:
            self.name = name

    def act_role(self, role: str, observation: np.ndarray, action_mask: np.ndarray) -> int:
        return int(self.roles[role](np.asarray(observation), np.asarray(action_mask)))


def _load_model(path: Path) -> Any:
    from policies.learned import load_model

    return load_model(path)


def is_marl_run(path: str | Path) -> bool:
    """True for a ``hospital-marl train marl`` run directory (cheap: reads only its JSON)."""
    meta = Path(path) / METADATA_FILE
    if not meta.is_file():
        return False
    try:
        return json.loads(meta.read_text()).get("format") == FORMAT
    except (json.JSONDecodeError, OSError):
        return False


def load_marl_policy(path: str | Path, name: str | None = None, final: bool = False) -> MarlTeamPolicy:
    """A ``train marl`` run directory as a team-track policy (:class:`MarlTeamPolicy`).

    Loads the run's best periodic evaluation (like ``train ppo``'s ``best_model.zip``), or the
    models as training left them with ``final=True`` (and for runs saved before best tracking).
    """
    run_dir = Path(path)
    if not is_marl_run(run_dir):
        raise FileNotFoundError(f"{run_dir} is not a `hospital-marl train marl` run (no {METADATA_FILE})")
    meta = json.loads((run_dir / METADATA_FILE).read_text())
    files = meta["models"] if final or "best" not in meta else meta["best"]["models"]
    if meta["method"] == "shared":
        model = _load_model(run_dir / files["shared"])
        roles = {role: model_role(role, model, shared=True) for role in ROLES}
    else:
        roles = {}
        for role in ROLES:  # a role not trained yet when the best evaluation ran: the heuristic
            file = files.get(role)
            roles[role] = model_role(role, _load_model(run_dir / file)) if file else heuristic_role(role)
    policy = MarlTeamPolicy(roles, name=name or meta.get("name"))
    policy.metadata = meta
    return policy


# ------------------------------------------------------------------ training
def _evaluate(policy: MarlTeamPolicy, args: Args, clock: Clock, timesteps: int) -> dict[str, Any]:
    from grading import grade

    report = grade(
        policy, episodes=args.eval_episodes, seed=args.eval_seed, scenarios=args.scenarios, track="team"
    )
    row = {
        "timesteps": int(timesteps),
        "wall_time_s": clock.wall(),
        "cpu_time_s": clock.cpu(),
        "eval_score": round(report["overall_score"], 3),
        "eval_stderr": round(float(np.mean([s["score_stderr"] for s in report["scenarios"].values()])), 3),
        "invalid_action_rate": round(report["invalid_action_rate"], 4),
        **{f"score_{k}": round(v, 3) for k, v in report["scenario_scores"].items()},
    }
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


def train_ibr(args: Args, run_dir: Path, clock: Clock, best: BestTracker) -> TrainResult:
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
            row = {"round": rnd, "role": role, **_evaluate(policy, args, clock, total)}
            rows.append(row)
            best.offer(row, models)
            write_curve(rows, run_dir)
    return files, rows, total


def train_shared(args: Args, run_dir: Path, clock: Clock, best: BestTracker) -> TrainResult:
    """Parameter sharing: one MaskablePPO over :class:`MaskedParallelVecEnv` (3 slots per env)."""
    from stable_baselines3.common.callbacks import BaseCallback

    env = make_masked_parallel_vec_env(args.n_envs, args.scenarios, args.reward_scale, args.seed)
    model = _new_model(env, args, args.seed)
    model.set_logger(_quiet_logger(run_dir))
    rows: list[dict[str, Any]] = []

    def evaluate() -> None:
        policy = MarlTeamPolicy({r: model_role(r, model, shared=True) for r in ROLES}, name="marl_shared")
        rows.append(_evaluate(policy, args, clock, model.num_timesteps))
        best.offer(rows[-1], {"shared": model})
        write_curve(rows, run_dir)

    class Periodic(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self._last = 0

        def _on_step(self) -> bool:
            if args.eval_freq and self.num_timesteps - self._last >= args.eval_freq:
                self._last = self.num_timesteps
                evaluate()
            return True

    model.learn(total_timesteps=args.timesteps, callback=Periodic(), use_masking=True)
    if not rows or rows[-1]["timesteps"] != model.num_timesteps:
        evaluate()
    model.save(str(run_dir / "shared.zip"))
    env.close()
    return {"shared": "shared.zip"}, rows, int(model.num_timesteps)


def command_line(args: Args) -> str:
    """The ``hospital-marl train marl`` command reproducing these args (method, seed, non-defaults)."""
    defaults = Args()
    parts = ["hospital-marl train marl"]
    for f in fields(Args):
        value = getattr(args, f.name)
        if value == getattr(defaults, f.name) and f.name not in ("seed", "method"):
            continue
        flag = "--" + f.name.replace("_", "-")
        if isinstance(value, bool):
            parts.append(flag if value else "")
        elif isinstance(value, tuple):
            parts.append(flag + " " + " ".join(map(str, value)))
        else:
            parts.append(f"{flag} {value}")
    return " ".join(p for p in parts if p)


def train(args: Args) -> Path:
    """Train with ``args.method``, evaluate, save; returns the run directory."""
    from policies.learned import require_train_extra

    require_train_extra()
    import torch

    torch.set_num_threads(args.torch_threads)
    run_dir = args.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    clock = Clock()
    trainer = train_ibr if args.method == "ibr" else train_shared
    best = BestTracker(run_dir)
    files, rows, total = trainer(args, run_dir, clock, best)
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
        "args": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(args).items()},
        "command": command_line(args),
    }
    (run_dir / METADATA_FILE).write_text(json.dumps(meta, indent=2) + "\n")
    return run_dir


__all__ = [
    "Args",
    "MarlTeamPolicy",
    "RoleEnv",
    "field_docs",
    "is_marl_run",
    "load_marl_policy",
    "make_masked_parallel_vec_env",
    "train",
]


if __name__ == "__main__":  # pragma: no cover
    from policies.train_cli import main

    sys.exit(main(["train", "marl", *sys.argv[1:]]))
