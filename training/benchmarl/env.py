"""The ED as TorchRL environments: a natively batched ``EnvBase`` and the PettingZoo-wrapper path.

:class:`HospitalTorchEnv` steps ``B`` emergency departments per call through the batched
multi-agent env (:class:`~hospital_marl.envs.vector.HospitalMARLVectorEnv`), the way VMAS
is integrated in TorchRL/BenchMARL: one TorchRL env with ``batch_size=(B,)``. The three
roles have different action spaces, so each is its own *group* of one agent:

- ``(role, "observation")`` ``(B, 1, d_role)`` float32 -- the role's AEC vector, encoded as the
  other learned team policies see it (:func:`policies.marl.encode_role`: fixed scales, clipped);
- ``(role, "action_mask")`` ``(B, 1, n_role)`` bool and ``(role, "action")`` ``(B, 1)`` ints;
- ``(role, "reward")`` ``(B, 1, 1)``: the team reward (or the role's own, ``reward_mode="role"``;
  or with ``reward="score"`` the graded score's per-step change, :class:`VectorScoreReward`)
  times ``reward_scale``;
- ``"state"`` ``(B, 106)``: the global state (every observation block), for centralised critics;
- ``"done"`` / ``"terminated"`` / ``"truncated"`` ``(B, 1)``: the day is over (shared by the roles).

With several scenarios the batch is split into one vector env per scenario (rows in
order, as equal as possible), so one learner sees the whole mix at every step.

The vector env resets a finished day in the same step (Gymnasium's ``SAME_STEP``); TorchRL
wants the finished day's last observation in ``"next"`` and the new day only after
``reset`` of that row. So a finished row's ``"next"`` carries the vector env's
``final_obs`` (its mask: the no-op only -- nothing is chosen there), and the partial
``reset`` returns the already-started next day. Seeding follows the vector env: ``seed=s``
seeds env ``i`` as the scalar env's ``reset(seed=s + i)``, so trajectories are reproducible
and equal to the scalar env's.

:func:`pettingzoo_env` is the other path: TorchRL's ``PettingZooWrapper`` over
:func:`hospital_marl.parallel_env` with the same group map, per env (no batch). The env's
infos are already TorchRL-ready (the same integer keys from reset on, ``outcome`` a code:
:mod:`hospital_marl.envs.infos`); :class:`NumericInfos` keeps exactly those four keys, so an
env built with ``end_info=True`` still fits the info spec. ``tests/marl`` checks both paths agree.

Finished days are logged in :attr:`HospitalTorchEnv.finished` (composite score, counters):
the trainer's progress display and the masked-action audit read it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from pettingzoo.utils.wrappers import BaseParallelWrapper
from tensordict import TensorDict, TensorDictBase
from torchrl.data import Binary, Categorical, Composite, Unbounded
from torchrl.envs import EnvBase

from hospital_marl.core.actions import ROLE_ACTION_COUNTS, ROLES
from hospital_marl.core.hospital import ROLE_MASK_COLUMNS as ROLE_COLUMNS
from hospital_marl.core.rewards import RewardTable
from hospital_marl.core.scenarios import get_scenario
from hospital_marl.envs.infos import NOOP as NOOP_OUTCOME
from hospital_marl.envs.infos import outcome_code
from hospital_marl.envs.observations import ROLE_INDEX, STATE_SIZE
from hospital_marl.envs.vector import HospitalMARLVectorEnv
from hospital_marl.envs.wrappers import VectorScoreReward
from policies.marl import ROLE_SCALES, encode_state

NOOP = 0
"""Every role's action 0 is its no-op, always valid (the mask given with a finished day's last obs)."""


class _FullFinalObs(HospitalMARLVectorEnv):
    """The batched MARL env keeping a finished day's whole state vector in ``final_obs``
    (the parent keeps the role views only; a centralised critic bootstraps from the state)."""

    def _single_obs(self, vector: np.ndarray, presence: np.ndarray) -> Any:
        # As :meth:`state` has it: the masked layout appends the presence blocks.
        return np.concatenate([vector, presence]) if self._masked else vector


def split_rows(num_envs: int, scenarios: Sequence[str]) -> list[int]:
    """Rows per scenario: ``num_envs`` split as evenly as possible, earlier scenarios first."""
    if num_envs < len(scenarios):
        raise ValueError(f"num_envs ({num_envs}) must be at least the number of scenarios ({len(scenarios)})")
    base, extra = divmod(num_envs, len(scenarios))
    return [base + (k < extra) for k in range(len(scenarios))]


class HospitalTorchEnv(EnvBase):
    """``B`` EDs as one TorchRL env, one group per role (see the module docstring).

    Args:
        num_envs: the batch size ``B`` (at least one per scenario).
        scenarios: a scenario name or several (the batch is split between them).
        seed: seeds the first reset (env ``i`` as the scalar env's ``reset(seed=seed + i)``).
        reward_mode: ``"team"`` (every role gets the team reward) or ``"role"``.
        reward_scale: rewards are multiplied by this (a death is -15; 0.02 keeps values near 1).
        rewards: the env's dense reward table (default: the env's own), e.g. training-only shaping.
        reward: ``"env"`` (the env's reward) or ``"score"``: what each step changes in the graded
            composite (:class:`~hospital_marl.envs.wrappers.VectorScoreReward`; a day's return is
            its score - 90), the team's, given to every role.
        encode: observations and state scaled as the learned policies see them; False: raw.
        device: torch device of the tensors (the simulation runs on the CPU).
    """

    batch_locked = True

    def __init__(
        self,
        num_envs: int = 8,
        scenarios: str | Sequence[str] = "normal_day",
        seed: int | None = None,
        reward_mode: str = "team",
        reward_scale: float = 1.0,
        rewards: RewardTable | None = None,
        reward: str = "env",
        encode: bool = True,
        device: Any = "cpu",
    ) -> None:
        names = (scenarios,) if isinstance(scenarios, str) else tuple(scenarios)
        if not names:
            raise ValueError("scenarios must name at least one scenario")
        for name in names:
            get_scenario(name)  # raises on an unknown name, listing the valid ones
        if reward not in ("env", "score"):
            raise ValueError(f"reward must be 'env' or 'score', got {reward!r}")
        if reward == "score" and reward_mode != "team":
            raise ValueError("reward='score' is the team's score: it needs reward_mode='team'")
        super().__init__(device=device, batch_size=torch.Size([num_envs]))
        self.scenarios = names
        self.rows = split_rows(num_envs, names)
        self.reward_scale = float(reward_scale)
        self.encode = encode
        self.vecs = [
            _FullFinalObs(n, scenario=name, reward_mode=reward_mode, rewards=rewards)
            for n, name in zip(self.rows, names)
        ]
        self.reward = reward
        self.steppers: list[Any] = [VectorScoreReward(vec) if reward == "score" else vec for vec in self.vecs]
        """What ``reset``/``step`` call: the vector envs, or their score-reward wrappers."""
        self._seed = seed
        self._started = False
        self.finished: list[dict[str, Any]] = []
        """One entry per finished day: scenario, composite score, counters (appended by ``step``)."""
        self._make_specs()

    # ------------------------------------------------------------------ specs
    def _make_specs(self) -> None:
        b = self.batch_size
        obs: dict[str, Any] = {}
        actions: dict[str, Any] = {}
        rewards: dict[str, Any] = {}
        for role in ROLES:
            d, n = len(ROLE_SCALES[role]), ROLE_ACTION_COUNTS[role]
            obs[role] = Composite(
                observation=Unbounded((*b, 1, d), dtype=torch.float32, device=self.device),
                action_mask=Binary(n=n, shape=(*b, 1, n), dtype=torch.bool, device=self.device),
                shape=(*b, 1),
                device=self.device,
            )
            actions[role] = Composite(
                action=Categorical(n=n, shape=(*b, 1), dtype=torch.int64, device=self.device),
                shape=(*b, 1),
                device=self.device,
            )
            rewards[role] = Composite(
                reward=Unbounded((*b, 1, 1), dtype=torch.float32, device=self.device),
                shape=(*b, 1),
                device=self.device,
            )
        self.observation_spec = Composite(
            **obs, state=Unbounded((*b, STATE_SIZE), dtype=torch.float32, device=self.device), shape=b
        )
        self.action_spec = Composite(**actions, shape=b)
        self.reward_spec = Composite(**rewards, shape=b)
        self.done_spec = Composite(
            done=Categorical(n=2, shape=(*b, 1), dtype=torch.bool, device=self.device),
            terminated=Categorical(n=2, shape=(*b, 1), dtype=torch.bool, device=self.device),
            truncated=Categorical(n=2, shape=(*b, 1), dtype=torch.bool, device=self.device),
            shape=b,
        )

    @property
    def group_map(self) -> dict[str, list[str]]:
        """Group name -> agent names: one group per role (the action spaces differ)."""
        return {role: [role] for role in ROLES}

    # ------------------------------------------------------------- internals
    def _encode_state(self, state: np.ndarray) -> np.ndarray:
        if not self.encode:
            return state.astype(np.float32, copy=False)
        return encode_state(state)

    def _observation_td(self, state: np.ndarray, masks: dict[str, np.ndarray]) -> dict[str, Any]:
        """Observation entries from the (B, 106) raw state and per-role (B, n) masks."""
        enc = self._encode_state(state)
        out: dict[str, Any] = {"state": torch.from_numpy(enc)}
        for role in ROLES:
            obs = enc[:, ROLE_INDEX[role]] if self.encode else state[:, ROLE_INDEX[role]]
            out[role] = {
                "observation": torch.from_numpy(np.ascontiguousarray(obs, np.float32)).unsqueeze(1),
                "action_mask": torch.from_numpy(masks[role].astype(bool)).unsqueeze(1),
            }
        return out

    def _live(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The current (B, 106) raw state and masks of every row (a finished row: its next day)."""
        state = np.concatenate([vec.state_vectors for vec in self.vecs])
        masks = {
            role: np.concatenate([vec.flat_masks()[:, ROLE_COLUMNS[role]] for vec in self.vecs])
            for role in ROLES
        }
        return state, masks

    def _to_td(self, entries: dict[str, Any]) -> TensorDictBase:
        groups = (*self.batch_size, 1)  # each role group holds one agent
        for role in ROLES:
            entries[role] = TensorDict(entries[role], batch_size=groups, device=self.device)
        return TensorDict(entries, batch_size=self.batch_size, device=self.device)

    # ------------------------------------------------------------------ API
    def _set_seed(self, seed: int | None) -> None:
        self._seed = seed
        self._started = False

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        partial = tensordict is not None and "_reset" in tensordict
        if partial:
            rows = tensordict.get("_reset").reshape(-1).cpu().numpy()
            if self._started and self._fresh[rows].all():
                # the finished rows already hold their next day (the vector env's autoreset)
                state, masks = self._live()
                done = torch.zeros((*self.batch_size, 1), dtype=torch.bool)
                return self._to_td({**self._observation_td(state, masks), **_dones(done, done, done)})
            if self._started and not rows.all():
                raise RuntimeError(
                    "HospitalTorchEnv resets only finished days (rows whose 'done' was set); "
                    "reset the whole batch to start over"
                )
        first = 0
        for stepper, n in zip(self.steppers, self.rows):
            stepper.reset(seed=None if self._seed is None or self._started else self._seed + first)
            first += n
        self._started = True
        self._fresh = np.ones(self.batch_size[0], bool)
        state, masks = self._live()
        done = torch.zeros((*self.batch_size, 1), dtype=torch.bool)
        return self._to_td({**self._observation_td(state, masks), **_dones(done, done, done)})

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        actions = {role: tensordict.get((role, "action")).reshape(-1).cpu().numpy() for role in ROLES}
        states, masks_out = [], {role: [] for role in ROLES}
        rewards = {role: [] for role in ROLES}
        terminated, truncated = [], []
        start = 0
        for vec, stepper, n, name in zip(self.vecs, self.steppers, self.rows, self.scenarios):
            _, rew, term, trunc, infos = stepper.step(
                {role: actions[role][start : start + n] for role in ROLES}
            )
            state = vec.state_vectors.copy()
            masks = {role: vec.flat_masks()[:, ROLE_COLUMNS[role]] for role in ROLES}
            ended = term[ROLES[0]] | trunc[ROLES[0]]
            if ended.any():
                final = infos["final_info"]
                for e in np.flatnonzero(ended).tolist():
                    state[e] = infos["final_obs"][e]
                    for role in ROLES:
                        masks[role][e] = False
                        masks[role][e, NOOP] = True
                    self.finished.append(
                        {
                            "scenario": name,
                            "score": float(final["score"][e]),
                            **{k: float(v[e]) for k, v in final["counters"].items() if not k.startswith("_")},
                        }
                    )
            states.append(state)
            for role in ROLES:
                rewards[role].append(rew[role])
                masks_out[role].append(masks[role])
            terminated.append(term[ROLES[0]])
            truncated.append(trunc[ROLES[0]])
            start += n
        state = np.concatenate(states)
        masks = {role: np.concatenate(masks_out[role]) for role in ROLES}
        term = torch.from_numpy(np.concatenate(terminated)).reshape(-1, 1)
        trunc = torch.from_numpy(np.concatenate(truncated)).reshape(-1, 1)
        self._fresh = (term | trunc).reshape(-1).numpy().copy()
        out = self._observation_td(state, masks)
        for role in ROLES:
            r = np.concatenate(rewards[role]).astype(np.float32) * self.reward_scale
            out[role]["reward"] = torch.from_numpy(r).reshape(-1, 1, 1)
        out.update(_dones(term | trunc, term, trunc))
        return self._to_td(out)


def _dones(done: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor) -> dict[str, torch.Tensor]:
    return {"done": done.clone(), "terminated": terminated.clone(), "truncated": truncated.clone()}


# ---------------------------------------------------------------- PettingZoo path
class NumericInfos(BaseParallelWrapper):
    """Per-agent infos TorchRL can turn into tensors: the outcome as the kernel's code
    (0 done, 1 no-op, 2 invalid, 3 conflict), the tick and the running invalid/conflict counts.
    The same keys at reset (outcome: no-op) so the info spec is fixed from the first reset."""

    KEYS = ("tick", "outcome", "invalid_actions", "conflicts")

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        obs, infos = self.env.reset(seed=seed, options=options)
        return obs, {a: self._numeric(info) for a, info in infos.items()}

    def step(self, actions: dict) -> tuple:
        obs, rewards, terms, truncs, infos = self.env.step(actions)
        return obs, rewards, terms, truncs, {a: self._numeric(info) for a, info in infos.items()}

    @staticmethod
    def _numeric(info: dict[str, Any]) -> dict[str, int]:
        code = outcome_code(info.get("outcome", NOOP_OUTCOME))  # a code since the envs' infos are numeric
        return {
            "tick": int(info.get("tick", 0)),
            "outcome": code,
            "invalid_actions": int(info.get("invalid_actions", 0)),
            "conflicts": int(info.get("conflicts", 0)),
        }

    def state(self) -> np.ndarray:
        return self.env.state()


def pettingzoo_env(scenario: str = "normal_day", seed: int | None = None, **kwargs: Any) -> EnvBase:
    """TorchRL's ``PettingZooWrapper`` over :func:`hospital_marl.parallel_env` (one env, raw
    observations, masks, the global state), with :class:`HospitalTorchEnv`'s group map."""
    from torchrl.envs.libs.pettingzoo import PettingZooWrapper

    import hospital_marl

    env = NumericInfos(hospital_marl.parallel_env(scenario=scenario, **kwargs))
    return PettingZooWrapper(
        env,
        group_map={role: [role] for role in ROLES},
        return_state=True,
        use_mask=True,
        categorical_actions=True,
        seed=seed,
    )
