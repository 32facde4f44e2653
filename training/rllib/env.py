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
per episode (``--all-scenarios`` cycles through the list), and a training-only
reward scale (value targets near 1 train better; the grader never sees it).
"""

from __future__ import annotations

from typing import Any

from ray.rllib.env.wrappers.pettingzoo_env import PettingZooEnv
from ray.tune.registry import register_env

import hospital_marl
from hospital_marl.core.hospital import Hospital
from hospital_marl.core.scenarios import DEFAULT_SCENARIO, get_scenario
from training.common import ScenarioCycler

ENV_NAME = "hospital_marl_aec"
"""The name registered with ``ray.tune.registry.register_env``."""

DEFAULT_ENV_CONFIG: dict[str, Any] = {
    "scenarios": [DEFAULT_SCENARIO],
    "reward_mode": "team",
    "reward_scale": 1.0,
}
"""``env_config`` keys: ``scenarios`` (names, cycled per episode), ``reward_mode``
(``"team"`` or ``"role"``), ``reward_scale`` (training-only multiplier)."""


class HospitalPettingZooEnv(PettingZooEnv):
    """``PettingZooEnv(hospital_marl.env(...))`` with a scenario per episode and a reward scale.

    Observations (per role): ``{"observation": Box float32, "action_mask": Box int8}``,
    unchanged; actions: each role's ``Discrete``. Agent ids are the role names.

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
        super().__init__(hospital_marl.env(scenario=self.scenarios[0], reward_mode=config["reward_mode"]))

    @property
    def hospital(self) -> Hospital:
        """The simulator behind the PettingZoo wrappers (read it, never step it)."""
        return self.env.unwrapped.hospital

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        options = dict(options or {})
        scenario = self.cycle()
        if len(self.scenarios) > 1:
            options.setdefault("scenario", scenario)
        return super().reset(seed=seed, options=options or None)

    def step(self, action: dict) -> tuple[dict, dict, dict, dict, dict]:
        obs, rewards, terminated, truncated, infos = super().step(action)
        if self.reward_scale != 1.0:
            rewards = {agent: r * self.reward_scale for agent, r in rewards.items()}
        return obs, rewards, terminated, truncated, infos


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
