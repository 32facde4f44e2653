"""Shared fixtures of the radiotherapy tests: hand-built phantoms with known geometry."""

from __future__ import annotations

import numpy as np
import pytest

from hospital_marl.radiotherapy.core.phantoms import GRID, Phantom, disc, make_phantom

CENTRE = ((GRID - 1) / 2, (GRID - 1) / 2)


def centred_phantom(body_radius: float = 28, tumour_radius: float = 6) -> Phantom:
    """A round body and tumour both centred on the slice, one OAR posterior to the tumour."""
    body = disc(CENTRE, body_radius)
    tumour = disc(CENTRE, tumour_radius)
    oar = disc((CENTRE[0] + tumour_radius + 5, CENTRE[1]), 3)
    return make_phantom(body, tumour, [oar])


@pytest.fixture
def phantom() -> Phantom:
    return centred_phantom()


def rollout(env, seed: int, rng: np.random.Generator, masked: bool = True):
    """One episode of (masked) random actions: (actions, observations, rewards, final info)."""
    obs, info = env.reset(seed=seed)
    actions, observations, rewards = [], [obs], []
    done = False
    while not done:
        valid = np.flatnonzero(info["action_mask"]) if masked else np.arange(env.action_space.n)
        action = int(valid[rng.integers(len(valid))])
        obs, reward, terminated, truncated, info = env.step(action)
        actions.append(action)
        observations.append(obs)
        rewards.append(reward)
        done = terminated or truncated
    return actions, observations, rewards, info
