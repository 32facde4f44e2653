"""The numpy actor's two pieces every learned RT agent shares (:mod:`policies.radiotherapy.learned`,
:mod:`policies.radiotherapy.residual`): the flattened observation and an SB3 MLP actor's logits.
A module of their own so that neither agent module imports the other's."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from gymnasium import spaces

from hospital_marl.radiotherapy.envs.planning import observation_space

_SPACE = observation_space()


def flatten_observation(observation: Mapping[str, np.ndarray]) -> np.ndarray:
    """The Dict observation as the flat float32 vector the network reads."""
    return np.array(spaces.flatten(_SPACE, dict(observation)), dtype=np.float32)


def mlp_logits(layers: list[tuple[np.ndarray, np.ndarray]], features: np.ndarray) -> np.ndarray:
    """An SB3 MLP actor's logits: tanh hidden layers, then the linear action layer."""
    x = features
    for weight, bias in layers[:-1]:
        x = np.tanh(weight @ x + bias)
    weight, bias = layers[-1]
    return weight @ x + bias
