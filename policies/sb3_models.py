"""Users' Stable-Baselines3 / sb3-contrib models, played on the observation they were trained on.

A model trained on ``gym.make("hospital_marl/HospitalED-v0", ...)`` saw one of the composed env's
observation formats: the default ``Dict``, ``observation_format="dict_1d"``, either with the
presence blocks (``observation_layout="masked"``), or one of those flattened by Gymnasium's
``FlattenObservation``. The grader hands every policy the composed ``Dict`` of its own episode;
:func:`observation_converter` turns that into what the model's saved ``observation_space`` says it
saw (matched by keys, shapes and dtype: bounds depend on the hospital), or refuses with one line.

A saved ``.zip`` is recognised from its ``data`` JSON (:func:`zip_data`) and loaded with the
library and algorithm that wrote it (:func:`algorithm_of`: the policy class, then the
hyperparameters only one algorithm saves), not taken for a ``hospital-marl train ppo``
checkpoint: those observe the trainer's feature vector (:func:`is_trainer_checkpoint`).
"""

from __future__ import annotations

import inspect
import json
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from gymnasium import spaces

from hospital_marl.core.actions import N_FLAT_ACTIONS
from hospital_marl.envs.observations import (
    BLOCKS,
    PRESENCE_BLOCKS,
    presence_of,
    presence_views,
)
from policies.base import BasePolicy

if TYPE_CHECKING:  # stable-baselines3 is optional (the train extra)
    from stable_baselines3.common.base_class import BaseAlgorithm

INSTALL_HINT = 'pip install -e ".[train]" -c constraints/cpu.txt (from a clone of the repository)'

_SCHEDULES = {
    "learning_rate": 0.0,
    "lr_schedule": lambda _: 0.0,
    "clip_range": lambda _: 0.0,
    "clip_range_vf": None,
    "exploration_schedule": lambda _: 0.0,
}
"""Saved schedules are pickled closures that inference never calls; replaced on load (they may not
unpickle across Python versions)."""


def zip_data(path: str | Path) -> dict[str, Any] | None:
    """The ``data`` JSON of an SB3 ``.zip`` (None when the file is no SB3 save)."""
    try:
        with zipfile.ZipFile(path) as archive:
            return json.loads(archive.read("data"))
    except (zipfile.BadZipFile, KeyError, ValueError, OSError):
        return None


def _shape(entry: Any) -> list[int] | None:
    try:
        shape = entry["_shape"]
        return [int(n) for n in (json.loads(shape) if isinstance(shape, str) else shape)]
    except (KeyError, TypeError, ValueError):
        return None


def is_trainer_checkpoint(data: Mapping[str, Any], feature_size: int) -> bool:
    """Whether a save observes the trainer's feature vector (``hospital-marl train ppo``): a ``Box``
    of ``feature_size`` floats. Read from the JSON alone (no SB3 import)."""
    space = data.get("observation_space", {})
    return "box.Box" in str(space.get(":type:", "")) and _shape(space) == [feature_size]


# ------------------------------------------------------------------ algorithm
def _algorithms() -> list[tuple[type, Callable[[Mapping[str, Any]], bool], type[BaseAlgorithm]]]:
    """(policy base class, test on the saved data, algorithm), most specific first."""
    import sb3_contrib
    import stable_baselines3 as sb3
    from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
    from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy
    from sb3_contrib.qrdqn.policies import QRDQNPolicy
    from stable_baselines3.common.policies import ActorCriticPolicy
    from stable_baselines3.dqn.policies import DQNPolicy

    def always(_: Mapping[str, Any]) -> bool:
        return True

    return [
        (MaskableActorCriticPolicy, always, sb3_contrib.MaskablePPO),
        (RecurrentActorCriticPolicy, always, sb3_contrib.RecurrentPPO),
        (QRDQNPolicy, always, sb3_contrib.QRDQN),
        (DQNPolicy, always, sb3.DQN),
        # PPO, A2C and TRPO share ActorCriticPolicy: each saves hyperparameters the others lack
        (ActorCriticPolicy, lambda d: "cg_max_steps" in d, sb3_contrib.TRPO),
        (ActorCriticPolicy, lambda d: "clip_range" in d, sb3.PPO),
        (ActorCriticPolicy, always, sb3.A2C),
    ]


def _require_sb3() -> None:
    try:
        import sb3_contrib  # noqa: F401
        import stable_baselines3  # noqa: F401
        import torch  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            f"playing a Stable-Baselines3 model needs torch, stable-baselines3 and sb3-contrib "
            f"({exc.name} is missing): {INSTALL_HINT}"
        ) from exc


def algorithm_of(path: str | Path) -> type[BaseAlgorithm]:
    """The SB3 / sb3-contrib algorithm class that saved ``path`` (ValueError, one line, if none)."""
    _require_sb3()
    from stable_baselines3.common.save_util import load_from_zip_file

    data, _, _ = load_from_zip_file(path, device="cpu", custom_objects=_SCHEDULES, load_data=True)
    data = data or {}
    policy_class = data.get("policy_class")
    if not isinstance(policy_class, type):
        raise ValueError(
            f"{path}: cannot read the model's policy class (a class defined in a script's __main__ "
            "does not unpickle elsewhere): load the model yourself and pass the object to grade()"
        )
    for base, test, algorithm in _algorithms():
        if issubclass(policy_class, base) and test(data):
            return algorithm
    raise ValueError(
        f"{path}: a {policy_class.__name__} model, for none of the discrete-action algorithms of "
        "stable-baselines3 / sb3-contrib (PPO, A2C, DQN, MaskablePPO, RecurrentPPO, QRDQN, TRPO)"
    )


# ------------------------------------------------------------------ observation
def _blocks_of(space: spaces.Space) -> dict[str, tuple[int, ...]] | None:
    if not isinstance(space, spaces.Dict):
        return None
    return {k: tuple(s.shape or ()) for k, s in space.spaces.items()}


def _known_shapes() -> dict[str, set[tuple[int, ...]]]:
    shapes: dict[str, set[tuple[int, ...]]] = {}
    for block in (*BLOCKS, *PRESENCE_BLOCKS):
        shape = tuple(block.shape)
        shapes[block.key] = {shape, (int(np.prod(shape)),)}
    return shapes


def _flat_candidates() -> list[spaces.Dict]:
    """The composed Dict layouts a ``FlattenObservation`` may have flattened (keys in Gymnasium's order)."""
    out = []
    for presence in (False, True):
        blocks = [*BLOCKS, *(PRESENCE_BLOCKS if presence else ())]
        out.append(spaces.Dict({b.key: spaces.Box(0.0, 1.0, tuple(b.shape), np.float32) for b in blocks}))
    return out


def _flattened(
    layout: spaces.Dict, space: spaces.Box, presence_keys: set[str]
) -> Callable[[Mapping[str, np.ndarray], Any], np.ndarray]:
    """The converter for a model that saw ``layout`` through ``FlattenObservation``."""
    shapes = {k: tuple(s.shape or ()) for k, s in layout.spaces.items()}

    def convert(obs: Mapping[str, np.ndarray], hospital: Any) -> np.ndarray:
        flat = spaces.flatten(layout, _pick(obs, hospital, shapes, presence_keys))
        return np.asarray(flat).astype(space.dtype, copy=False)

    return convert


def observation_converter(space: spaces.Space, label: str) -> Callable[[Mapping[str, np.ndarray], Any], Any]:
    """``(composed observation, hospital handle) -> what a model observing ``space`` saw``.

    Raises ValueError (one line, naming the formats it could have been) for any other space."""
    known = _known_shapes()
    presence_keys = {b.key for b in PRESENCE_BLOCKS}
    wanted = _blocks_of(space)
    if wanted is not None and all(k in known and shape in known[k] for k, shape in wanted.items()):
        return lambda obs, hospital: _pick(obs, hospital, wanted, presence_keys)
    if isinstance(space, spaces.Box) and len(space.shape) == 1:
        for layout in _flat_candidates():
            if spaces.flatdim(layout) == space.shape[0]:
                return _flattened(layout, space, presence_keys)
    raise ValueError(
        f"{label} observes {space}, which is none of the composed env's observation formats "
        "(observation_format 'dict' or 'dict_1d', observation_layout 'fixed' or 'masked', or one of "
        "those through FlattenObservation): load the model yourself and pass grade() an object whose "
        "act(observation, action_mask) builds its input"
    )


def _pick(
    obs: Mapping[str, np.ndarray],
    hospital: Any,
    shapes: Mapping[str, tuple[int, ...]],
    presence_keys: set[str],
) -> dict[str, np.ndarray]:
    """The keys a model saw, in its shapes; presence blocks computed when the episode has none."""
    missing = [k for k in shapes if k not in obs]
    extra: Mapping[str, np.ndarray] = {}
    if missing:
        if not set(missing) <= presence_keys or hospital is None:
            raise KeyError(f"the observation lacks {missing}")
        extra = presence_views(presence_of(hospital))
    return {
        k: np.asarray(obs[k] if k in obs else extra[k], np.float32).reshape(shape)
        for k, shape in shapes.items()
    }


# ------------------------------------------------------------------ policy
class SB3Actor:
    """An SB3 model as ``(observation, mask) -> action``: the observation converted to what it was
    trained on, deterministic, the mask given as ``action_masks`` when its ``predict`` takes one
    (sb3-contrib's maskable algorithms), and a recurrent model's state carried through the episode."""

    def __init__(self, model: Any, label: str) -> None:
        self.model = model
        self.convert = observation_converter(model.observation_space, label)
        params = inspect.signature(model.predict).parameters
        self.masked = "action_masks" in params
        self.hospital: Any = None
        self.reset()

    def reset(self, hospital: Any = None) -> None:
        self.hospital = hospital
        self._state: Any = None
        self._start = np.ones(1, bool)

    def __call__(self, observation: Mapping[str, np.ndarray], mask: np.ndarray) -> int:
        kwargs = {"action_masks": np.asarray(mask, bool)} if self.masked else {}
        action, self._state = self.model.predict(
            self.convert(observation, self.hospital),
            state=self._state,
            episode_start=self._start,
            deterministic=True,
            **kwargs,
        )
        self._start = np.zeros(1, bool)
        return int(np.asarray(action).reshape(-1)[0])


class SB3ModelPolicy(BasePolicy):
    """A user's saved SB3 / sb3-contrib model of the composed env, on the flat track."""

    tracks: tuple[str, ...] = ("flat",)

    def __init__(self, model: Any, name: str) -> None:
        super().__init__()
        self.name = name
        self.model = model
        self.actor = SB3Actor(model, name)

    def reset(self, seed: int | None = None, hospital: Any = None) -> None:
        super().reset(seed, hospital)
        self.actor.reset(hospital)

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        return self.actor(observation, action_mask)


def load_sb3_zip(path: str | Path, name: str | None = None) -> SB3ModelPolicy:
    """A user's ``.zip``, loaded by the algorithm that saved it (CPU), checked against the flat
    track's ``Discrete(39)`` and the composed observation formats before any episode runs."""
    label = str(path)
    algorithm = algorithm_of(path)
    model = algorithm.load(str(path), device="cpu", custom_objects=_SCHEDULES)
    action_space = model.action_space
    if not (isinstance(action_space, spaces.Discrete) and int(action_space.n) == N_FLAT_ACTIONS):
        raise ValueError(
            f"{label}: a {algorithm.__name__} model acting in {action_space}; grade() plays a path on "
            f"the flat track's Discrete({N_FLAT_ACTIONS}) (models of hospital_marl/HospitalED-v0): "
            "for another env's model, pass grade() an object adapting it"
        )
    return SB3ModelPolicy(model, name or label)


__all__ = [
    "SB3Actor",
    "SB3ModelPolicy",
    "algorithm_of",
    "is_trainer_checkpoint",
    "load_sb3_zip",
    "observation_converter",
    "zip_data",
]
