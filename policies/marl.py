"""Per-role models trained by ``hospital-marl train marl`` (:mod:`training.marl`) as a team-track policy.

A ``train marl`` run directory holds ``model.json`` (``format: hospital_marl.marl/1``: the
method, the model files per role, the best evaluation's files) and the SB3 models
(``<role>.zip`` for ibr, ``shared.zip`` for shared). :func:`load_marl_policy` (or
:func:`is_marl_run` + it) loads it as a :class:`MarlTeamPolicy` (``act_role``). This module
also holds the per-role observation encoding (:func:`encode_role`, :func:`encode_shared`,
:func:`pad_mask`, :data:`ROLE_ENCODINGS`) and the one way a role plays a model
(:func:`logits_role`: encode, logits, the best action the mask allows), shared by the
``train marl``, ``train benchmarl`` and ``train rllib`` trainers and their loaders, so they
cannot drift apart. Loading a ``train marl`` model needs torch (the ``train`` extra).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from hospital_marl.core.actions import ROLE_ACTION_COUNTS, ROLES
from hospital_marl.envs.observations import PRESENCE_SIZE, ROLE_INDEX, STATE_SIZE, role_slices
from policies.base import BasePolicy
from policies.heuristic import HeuristicPolicy
from policies.learned import Logits, TorchLogits, best_action, load_model

FORMAT = "hospital_marl.marl/1"
METADATA_FILE = "model.json"
METHODS = ("ibr", "shared")
OBS_CLIP = 5.0
MAX_OBS = max(sl.stop for slices in role_slices().values() for _, sl in slices)  # 100 (bed_manager)
MAX_ACTIONS = max(ROLE_ACTION_COUNTS.values())  # 21 (triage)
SHARED_OBS = MAX_OBS + len(ROLES)  # padded observation + role one-hot


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
    """A role's raw AEC vector -> a fixed-scale float32 vector in [0, OBS_CLIP]. In the ``"masked"``
    layout (presence blocks appended) the role's blocks are read and the presence blocks left out:
    these networks were shaped on the fixed layout."""
    vector = np.asarray(observation, np.float32)
    scales = ROLE_SCALES[role]
    if vector.shape[-1] == scales.shape[0] + PRESENCE_SIZE:
        vector = vector[..., : scales.shape[0]]
    scaled = vector / scales
    return np.clip(scaled, 0.0, OBS_CLIP).astype(np.float32)


def _state_scales() -> np.ndarray:
    """Divisors of the global state: each role's entries as :data:`ROLE_SCALES`, the rest (clock) /100."""
    scales = np.full(STATE_SIZE, 100.0, np.float32)
    for role in ROLES:
        scales[np.asarray(ROLE_INDEX[role])] = ROLE_SCALES[role]
    return scales


STATE_SCALES = _state_scales()


def encode_state(state: np.ndarray) -> np.ndarray:
    """Raw global state(s) (..., 106) -> what centralised critics read; ``[..., ROLE_INDEX[role]]`` of
    it is what ``role``'s actor reads (the same fixed scales as :func:`encode_role`), so a batched
    trainer encodes the state once per step instead of each role's view."""
    return np.clip(state / STATE_SCALES, 0.0, OBS_CLIP).astype(np.float32)


def encode_log1p(role: str, observation: np.ndarray) -> np.ndarray:
    """``log1p`` of a role's raw (non-negative) AEC vector: what RLlib runs saved before the
    trainers shared :func:`encode_role` were trained on (kept so that they load and play as before)."""
    return np.log1p(np.clip(np.asarray(observation, np.float32), 0.0, None))


RoleEncoding = Callable[[str, np.ndarray], np.ndarray]
ROLE_ENCODINGS: dict[str, RoleEncoding] = {"scaled": encode_role, "log1p": encode_log1p}
"""A role observation encoding by the name a checkpoint records (``"encoding"``)."""
DEFAULT_ENCODING = "scaled"
"""What every per-role trainer trains on today."""


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


RoleAct = Callable[[np.ndarray, np.ndarray], int]
"""A frozen role policy: (raw role observation, role mask) -> action."""


def heuristic_role(role: str) -> RoleAct:
    """The team heuristic's rule for one role."""
    policy = HeuristicPolicy()
    return lambda obs, mask: policy.act_role(role, obs, mask)


def logits_role(role: str, logits: Logits, encode: RoleEncoding = encode_role) -> RoleAct:
    """An actor (:class:`~policies.learned.Logits`) as a frozen role policy: the raw role observation
    encoded by ``encode``, then the most probable action the mask allows (deterministic)."""
    return lambda obs, mask: best_action(logits(encode(role, obs)), mask)


def model_role(role: str, model: Any, shared: bool = False) -> RoleAct:
    """A ``train marl`` SB3 model as a frozen role policy (see :func:`logits_role`)."""
    logits = TorchLogits(model)
    if shared:
        return lambda obs, mask: best_action(logits(encode_shared(role, obs)), pad_mask(mask))
    return logits_role(role, logits)


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


def has_run_format(path: str | Path, metadata_file: str, run_format: str) -> bool:
    """True when ``path/metadata_file`` is JSON naming ``run_format`` (cheap: reads only that file)."""
    meta = Path(path) / metadata_file
    if not meta.is_file():
        return False
    try:
        return json.loads(meta.read_text()).get("format") == run_format
    except (json.JSONDecodeError, OSError):
        return False


def is_marl_run(path: str | Path) -> bool:
    """True for a ``hospital-marl train marl`` run directory."""
    return has_run_format(path, METADATA_FILE, FORMAT)


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
        model = load_model(run_dir / files["shared"])
        roles = {role: model_role(role, model, shared=True) for role in ROLES}
    else:
        roles = {}
        for role in ROLES:  # a role not trained yet when the best evaluation ran: the heuristic
            file = files.get(role)
            roles[role] = model_role(role, load_model(run_dir / file)) if file else heuristic_role(role)
    policy = MarlTeamPolicy(roles, name=name or meta.get("name"))
    policy.metadata = meta
    return policy


__all__ = [
    "DEFAULT_ENCODING",
    "FORMAT",
    "METADATA_FILE",
    "ROLE_ENCODINGS",
    "MarlTeamPolicy",
    "encode_log1p",
    "encode_role",
    "encode_shared",
    "encode_state",
    "heuristic_role",
    "is_marl_run",
    "load_marl_policy",
    "logits_role",
    "model_role",
    "pad_mask",
]
