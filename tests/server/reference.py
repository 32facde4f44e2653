"""The in-process trajectories the server must reproduce, and a shared action chooser."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import numpy as np

from hospital_marl.core.actions import ROLE_ACTION_COUNTS, ROLES
from hospital_marl.envs.composed import HospitalEDEnv, HospitalEDTeamEnv
from hospital_marl.envs.observations import COMPOSED_KEYS


def choose_flat(mask: list[bool], rng: random.Random) -> int:
    """Mostly a valid action; one in ten an in-space action the mask forbids (a counted -1)."""
    invalid = [a for a, ok in enumerate(mask) if not ok]
    if invalid and rng.random() < 0.1:
        return rng.choice(invalid)
    return rng.choice([a for a, ok in enumerate(mask) if ok])


def choose_team(rng: random.Random) -> dict[str, int]:
    """One uniform action per role (valid or not: the conflict/invalid rules must match too)."""
    return {role: rng.randrange(ROLE_ACTION_COUNTS[role]) for role in ROLES}


def wire(obs: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """An in-process observation as the server sends it (JSON lists)."""
    return {key: obs[key].tolist() for key in COMPOSED_KEYS}


def blocks_of(observation: Any) -> dict[str, Any]:
    """The observation blocks of a server answer (a dict from GenericEnvClient or a HospitalObservation)."""
    get = observation.get if isinstance(observation, Mapping) else lambda key: getattr(observation, key)
    return {key: get(key) for key in COMPOSED_KEYS}


def mask_of(observation: Any) -> list[bool]:
    return observation["action_mask"] if isinstance(observation, Mapping) else observation.action_mask


class Reference:
    """The composed (flat) or team env, stepped alongside the server."""

    def __init__(self, scenario: str, seed: int, track: str = "flat") -> None:
        self.env = (
            HospitalEDEnv(scenario=scenario) if track == "flat" else HospitalEDTeamEnv(scenario=scenario)
        )
        obs, _ = self.env.reset(seed=seed)
        self.obs = wire(obs)
        self.mask = self.env.unwrapped.hospital.flat_mask()
        self.reward: float | None = None
        self.done = False

    def step(self, action: int | Mapping[str, int]) -> None:
        if isinstance(action, Mapping):
            action = [action[role] for role in ROLES]
        obs, reward, terminated, truncated, _ = self.env.step(action)
        self.obs = wire(obs)
        self.mask = self.env.unwrapped.hospital.flat_mask()
        self.reward = float(reward)
        self.done = bool(terminated or truncated)

    def check(self, observation: Any, reward: float | None, done: bool) -> None:
        """The server's answer equals this env's last step, bit for bit."""
        assert blocks_of(observation) == self.obs
        assert mask_of(observation) == self.mask
        assert reward == self.reward
        assert done == self.done
