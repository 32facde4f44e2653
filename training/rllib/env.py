"""The AEC env as an RLlib ``MultiAgentEnv``, through RLlib's own ``PettingZooEnv`` wrapper.

Why the AEC env (``PettingZooEnv``) and not the parallel env (``ParallelPettingZooEnv``):

- **It is what the team track grades.** :func:`grading.grade` with ``track="team"``
  drives the AEC env: each role acts on the state the previous role left
  (triage's admission is visible to the bed manager in the same tick). A policy
  trained on the parallel env would only ever have seen start-of-tick states, and
  would meet mid-tick states for the first time when graded.
- **Masks are exact when a role acts.** In the parallel env all three roles choose
  from the same start-of-tick masks, and an action an earlier role made impossible
  becomes a *conflict*; here there are none, so "masked actions taken" is an exact,
  must-be-zero audit rather than a number polluted by conflicts.
- The AEC env is not parallelizable (``metadata["is_parallelizable"] = False``).

The price: one RLlib env step is one role's turn (three per tick), so
``train_batch_size`` counts role actions, not ticks (a 100-tick shift is 300 steps).

``PettingZooEnv`` hands the next role its observation together with its reward
since its last action (the AEC env's ``_cumulative_rewards``), which is exactly
the per-role credit PPO needs; at the end of the shift every role gets its last
reward and ``terminated``/``truncated``.

The subclass adds only what RLlib cannot pass through ``reset()``: a scenario
per episode (``--all-scenarios`` cycles through the list), a training-only
reward scale (value targets near 1 train better; the grader never sees it), and
the per-role observation encoding every per-role trainer shares
(:data:`policies.marl.ROLE_ENCODINGS`, ``env_config["encoding"]``): the module sees
what the loader will feed it, through the same function.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from ray.rllib.env.wrappers.pettingzoo_env import PettingZooEnv
from ray.tune.registry import register_env

import hospital_marl
from hospital_marl.core.hospital import Hospital
from hospital_marl.core.scenarios import DEFAULT_SCENARIO, get_scenario
from policies.marl import DEFAULT_ENCODING, ROLE_ENCODINGS
from training.common import ScenarioCycler

ENV_NAME = "hospital_marl_aec"
"""The name registered with ``ray.tune.registry.register_env``."""

DEFAULT_ENV_CONFIG: dict[str, Any] = {
    "scenarios": [DEFAULT_SCENARIO],
    "reward_mode": "team",
    "reward_scale": 1.0,
    "encoding": DEFAULT_ENCODING,
}
"""``env_config`` keys: ``scenarios`` (names, cycled per episode), ``reward_mode``
(``"team"`` or ``"role"``), ``reward_scale`` (training-only multiplier), ``encoding``
(the role observation encoding's name in :data:`policies.marl.ROLE_ENCODINGS`)."""


class HospitalPettingZooEnv(PettingZooEnv):
    """``PettingZooEnv(hospital_marl.env(...))`` with a scenario per episode and a reward scale.

    Observations (per role): ``{"observation": Box float32, "action_mask": Box int8}``, the
    vector encoded (``env_config["encoding"]``), the mask unchanged; actions: each role's
    ``Discrete``. Agent ids are the role names.

    Arguments (``env_config``): see :data:`DEFAULT_ENV_CONFIG`.
    """

    def __init__(self, env_config: dict[str, Any] | None = None) -> None:
        config = {**DEFAULT_ENV_CONFIG, **dict(env_config or {})}
        self.scenarios = [get_scenario(s).name for s in config["scenarios"]]
        if not self.scenarios:
            raise ValueError("env_config['scenarios'] must name at least one scenario")
        self.reward_scale = float(config["reward_scale"])
        # Start each sub-env at a different place in the scenario cycle, so that a short
        # run with several env runners sees every scenario early (7: any stride coprime
        # with the five built-ins spreads the runners' first scenarios).
        worker = int(getattr(env_config, "worker_index", 0))
        vector = int(getattr(env_config, "vector_index", 0))
        self.cycle = ScenarioCycler(self.scenarios, worker * 7 + vector)
        if config["encoding"] not in ROLE_ENCODINGS:
            raise ValueError(f"encoding must be one of {tuple(ROLE_ENCODINGS)}, got {config['encoding']!r}")
        self.encode = ROLE_ENCODINGS[config["encoding"]]
        # end_info: the last infos keep the episode's counters, which callbacks.MaskedActionAudit reads
        env = hospital_marl.env(scenario=self.scenarios[0], reward_mode=config["reward_mode"], end_info=True)
        super().__init__(env)
        for agent, space in self.observation_spaces.items():  # every encoding is >= 0
            vector = space["observation"]
            self.observation_spaces[agent] = gym.spaces.Dict(
                {
                    "observation": gym.spaces.Box(0.0, np.inf, vector.shape, np.float32),
                    "action_mask": space["action_mask"],
                }
            )
        self.observation_space = gym.spaces.Dict(self.observation_spaces)

    def _encoded(self, obs: dict[str, Any]) -> dict[str, Any]:
        return {agent: {**o, "observation": self.encode(agent, o["observation"])} for agent, o in obs.items()}

    @property
    def hospital(self) -> Hospital:
        """The simulator behind the PettingZoo wrappers (read it, never step it)."""
        return self.env.unwrapped.hospital

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        options = dict(options or {})
        scenario = self.cycle()
        if len(self.scenarios) > 1:
            options.setdefault("scenario", scenario)
        obs, infos = super().reset(seed=seed, options=options or None)
        return self._encoded(obs), infos

    def step(self, action: dict) -> tuple[dict, dict, dict, dict, dict]:
        obs, rewards, terminated, truncated, infos = super().step(action)
        if self.reward_scale != 1.0:
            rewards = {agent: r * self.reward_scale for agent, r in rewards.items()}
        return self._encoded(obs), rewards, terminated, truncated, infos


def make_rllib_env(env_config: dict[str, Any] | None = None) -> Any:
    """An RLlib ``MultiAgentEnv`` over the AEC env (the ``register_env`` creator)."""
    return HospitalPettingZooEnv(env_config)


def register() -> str:
    """Register :func:`make_rllib_env` as :data:`ENV_NAME` with Ray Tune's registry; returns the name.

    The registry travels with the algorithm config to remote env runners, which
    import this module by reference: install the package on every node.
    """
    register_env(ENV_NAME, make_rllib_env)
    return ENV_NAME
