"""Learned policies: MaskablePPO models trained by ``hospital-marl train ppo``.

``ppo`` (flat track) and ``team_ppo`` (team track) load the checkpoints shipped in
``policies/checkpoints/`` (see its README for how they were trained);
:func:`load_path` loads any run directory, ``.zip`` or ``.onnx`` saved by the trainer.

**Two ways to run the same network.** A policy needs only the actor's logits of the
encoded observation (:class:`Logits`). The shipped checkpoints come as ``.zip``
(SB3, torch: resume training) and ``.onnx`` (the actor alone, exported from the zip by
``hospital-marl train export``); :class:`OnnxLogits` runs the latter with onnxruntime, a
core dependency, so ``policies.load("ppo")`` plays without torch and with the same
actions (tests compare the two on many observations of every scenario).
:class:`TorchLogits` runs an SB3 model (the ``train`` extra): what a run directory
without an ``.onnx`` loads, and what the trainers grade during training.

``ppo_nomask`` is the ``--no-mask`` ablation of ``ppo``, graded as it is. ``ppo_pruned``
was trained (100k steps) and acts with ``--prune``: the env's mask minus the dominated
actions of :mod:`policies.pruning`, a labelled policy-design choice.

**What the network sees.** The composed Dict observation holds raw values
(severities 1–5, waits and treatment ticks up to ~100, counts in the hundreds).
:class:`FeatureEncoder` turns it into one flat float32 vector laid out by
:data:`FEATURE_LAYOUT`: fixed scales, clipped to ``[0, FEATURE_CLIP]``, one
row per entity an action addresses. A fixed scale, unlike ``VecNormalize``,
has no statistics to ship or to drift between training and grading: the model
file is self-sufficient. The encoder is versioned (:data:`ENCODER_VERSION`) in
each checkpoint's metadata.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from hospital_marl.core.actions import BOARD_DISCHARGE_SLOTS, ROLE_ACTION_COUNTS, ROLES
from hospital_marl.core.constants import CONDITIONS, CRITICAL_SEVERITY, N_SEVERITIES
from hospital_marl.core.hospital import Hospital, SimulatorHandle
from hospital_marl.core.kernel import needs_ventilator
from hospital_marl.envs.observations import ObservationBuilder
from policies.base import BasePolicy
from policies.pruning import prune_dominated
from policies.sb3_models import SB3ModelPolicy, is_trainer_checkpoint, load_sb3_zip, zip_data

INSTALL_HINT = 'pip install -e ".[train]" -c constraints/cpu.txt (from a clone of the repository)'
ONNX_INPUT = "features"
ONNX_OUTPUT = "logits"
ONNX_HIDDEN_IN = "hidden"
ONNX_HIDDEN_OUT = "hidden_out"
"""A recurrent actor's state, in and out (:class:`OnnxRecurrentLogits`)."""
MODEL_FILES = ("best_model.zip", "model.zip", "best_model.onnx", "model.onnx")
"""What a ``train ppo`` run directory may hold, in the order they are looked for."""
CHECKPOINT_DIR = Path(__file__).resolve().parent / "checkpoints"
SHIPPED: dict[str, str] = {
    "ppo": "ppo_flat.zip",
    "team_ppo": "ppo_team.zip",
    "ppo_nomask": "ppo_flat_nomask.zip",  # the --no-mask ablation, graded as is
    "ppo_pruned": "ppo_flat_pruned.zip",  # --prune: the mask minus dominated actions, 100k steps
}
"""Registered name -> checkpoint file in :data:`CHECKPOINT_DIR`."""

ENCODER_VERSION = 3
FEATURE_CLIP = 5.0
N_CONDITIONS = len(CONDITIONS)
NEEDS_VENTILATOR = np.array(
    [[needs_ventilator(sev, cond) for cond in range(N_CONDITIONS + 1)] for sev in range(N_SEVERITIES + 1)]
)
"""NEEDS_VENTILATOR[severity, condition id]: the kernel's rule as a table (0 = an empty slot), so
the encoders apply it to a whole queue at once without writing it again."""
SEVERITY_SCALE = 5.0
TICKS_SCALE = 20.0  # waiting and treatment ticks: 20 ticks (4.8 h) is a long time here
EARLY_DISCHARGE_SLOTS = BOARD_DISCHARGE_SLOTS

FEATURE_LAYOUT: dict[str, tuple[int, int]] = {
    "global": (1, 8),  # time / 100; [treated / 100, deaths / 40, waiting / 20];
    #                    [free general / 20, free ICU / 5, free ventilators / 3, queue length / 20]
    "vents": (3, 1),  # in use
    "board": (20, 3),  # general board, most severe first: [severity / 5, ticks left / 20, critical]
    "bottom": (5, 3),  # the early-discharge candidates, least severe first: same columns
    "icu": (5, 6),  # [severity / 5, ticks left / 20, needs vent, on vent, ready, needs vent and has none]
    "queue": (
        10,
        12,
    ),  # waiting slots: severity one-hot (5), condition one-hot (5), wait / 20, would need vent
}
"""THE feature table: segment -> (rows, columns), in vector order. One row per entity
an action addresses (queue slot, board position, ICU bed, ventilator), so the
network can score each entity with shared weights (:mod:`policies.ppo_net`)."""

FEATURE_SIZE = sum(r * c for r, c in FEATURE_LAYOUT.values())
GLOBAL_SCALES = np.array([100, 100, 40, 20, 20, 5, 3, 20], np.float32)


def feature_slices() -> dict[str, tuple[slice, tuple[int, int]]]:
    """Segment -> (slice of the feature vector, (rows, columns))."""
    out, start = {}, 0
    for name, (rows, cols) in FEATURE_LAYOUT.items():
        out[name] = (slice(start, start + rows * cols), (rows, cols))
        start += rows * cols
    return out


class FeatureEncoder:
    """Composed Dict observation -> flat float32 feature vector (:data:`FEATURE_LAYOUT`).

    Raw values (severities 1–5, ticks up to ~100, counts in the hundreds) are
    divided by fixed scales and clipped to ``[0, FEATURE_CLIP]``; a few
    indicators spell out what the rules key on (critical, needs a ventilator),
    so a small network need not learn those thresholds first; condition ids
    are one-hot (a category, not a magnitude). Empty slots are all zero.

    Reads the composed observation's keys by name; other keys are ignored, so
    adding keys to the env does not break a trained model.
    """

    size = FEATURE_SIZE

    def __init__(self) -> None:
        self._eye_sev = np.eye(N_SEVERITIES + 1, dtype=np.float32)[:, 1:]  # row 0 (empty) -> zeros
        self._eye_cond = np.eye(N_CONDITIONS + 1, dtype=np.float32)[:, 1:]
        self._slices = feature_slices()

    def __call__(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        vector = np.zeros(FEATURE_SIZE, np.float32)
        seg = {name: vector[sl].reshape(shape) for name, (sl, shape) in self._slices.items()}
        glob = seg["global"][0]
        glob[0] = obs["time_step"][0]
        glob[1:4] = obs["stats"]
        glob[4:8] = obs["capacity"]
        glob /= GLOBAL_SCALES
        seg["vents"][:, 0] = obs["ventilator_status"]
        board, board_sev = seg["board"], obs["bed_occupancy"]
        board[:, 0] = board_sev
        board[:, 0] /= SEVERITY_SCALE
        board[:, 1] = obs["board_remaining"]
        board[:, 1] /= TICKS_SCALE
        board[:, 2] = board_sev >= CRITICAL_SEVERITY
        n_board = int(np.count_nonzero(board_sev))
        k = min(n_board, EARLY_DISCHARGE_SLOTS)
        if k:
            seg["bottom"][:k] = board[n_board - k : n_board][::-1]  # early-discharge index 0 = least severe
        icu, needs, on = seg["icu"], obs["icu_needs_vent"], obs["icu_on_vent"]
        icu[:, 0] = obs["icu_occupancy"]
        icu[:, 0] /= SEVERITY_SCALE
        icu[:, 1] = obs["icu_remaining"]
        icu[:, 1] /= TICKS_SCALE
        icu[:, 2] = needs
        icu[:, 3] = on
        icu[:, 4] = obs["icu_ready"]
        icu[:, 5] = (needs > 0) & (on == 0)
        queue, slots = obs["waiting_queue"], seg["queue"]
        sev = queue[:, 0].astype(np.int64).clip(0, N_SEVERITIES)
        cond = queue[:, 1].astype(np.int64).clip(0, N_CONDITIONS)
        slots[:, 0:5] = self._eye_sev[sev]
        slots[:, 5:10] = self._eye_cond[cond]
        slots[:, 10] = queue[:, 2]
        slots[:, 10] /= TICKS_SCALE
        slots[:, 11] = NEEDS_VENTILATOR[sev, cond]
        np.clip(vector, 0.0, FEATURE_CLIP, out=vector)
        return vector


def encode_batch(obs: Mapping[str, np.ndarray]) -> np.ndarray:
    """:class:`FeatureEncoder` over a batch: batched composed observations (every key with a leading
    ``B`` axis, as the vector envs return them) -> ``(B, FEATURE_SIZE)`` float32, row ``i`` equal to
    ``FeatureEncoder()(row i)`` (tests compare them). What the batched trainers encode with, so a model
    they train plays through the same encoder as any ``ppo`` checkpoint."""
    n = len(obs["time_step"])
    out = np.zeros((n, FEATURE_SIZE), np.float32)
    slices = feature_slices()
    seg = {name: out[:, sl].reshape(n, *shape) for name, (sl, shape) in slices.items()}
    glob = seg["global"][:, 0]
    glob[:, 0] = np.asarray(obs["time_step"]).reshape(n, -1)[:, 0]
    glob[:, 1:4] = obs["stats"]
    glob[:, 4:8] = obs["capacity"]
    glob /= GLOBAL_SCALES
    seg["vents"][:, :, 0] = obs["ventilator_status"]
    board, board_sev = seg["board"], np.asarray(obs["bed_occupancy"])
    board[:, :, 0] = board_sev / SEVERITY_SCALE
    board[:, :, 1] = np.asarray(obs["board_remaining"]) / TICKS_SCALE
    board[:, :, 2] = board_sev >= CRITICAL_SEVERITY
    n_board = np.count_nonzero(board_sev, axis=1)
    rows = np.arange(n)
    for j in range(EARLY_DISCHARGE_SLOTS):  # early-discharge index j = the board's (n_board - 1 - j)th row
        source = n_board - 1 - j
        seg["bottom"][:, j] = np.where((source >= 0)[:, None], board[rows, np.maximum(source, 0)], 0.0)
    icu, needs, on = seg["icu"], np.asarray(obs["icu_needs_vent"]), np.asarray(obs["icu_on_vent"])
    icu[:, :, 0] = np.asarray(obs["icu_occupancy"]) / SEVERITY_SCALE
    icu[:, :, 1] = np.asarray(obs["icu_remaining"]) / TICKS_SCALE
    icu[:, :, 2] = needs
    icu[:, :, 3] = on
    icu[:, :, 4] = obs["icu_ready"]
    icu[:, :, 5] = (needs > 0) & (on == 0)
    queue, slots = np.asarray(obs["waiting_queue"]), seg["queue"]
    sev = queue[:, :, 0].astype(np.int64).clip(0, N_SEVERITIES)
    cond = queue[:, :, 1].astype(np.int64).clip(0, N_CONDITIONS)
    slots[:, :, 0:5] = np.eye(N_SEVERITIES + 1, dtype=np.float32)[:, 1:][sev]
    slots[:, :, 5:10] = np.eye(N_CONDITIONS + 1, dtype=np.float32)[:, 1:][cond]
    slots[:, :, 10] = queue[:, :, 2] / TICKS_SCALE
    slots[:, :, 11] = NEEDS_VENTILATOR[sev, cond]
    np.clip(out, 0.0, FEATURE_CLIP, out=out)
    return out


def require_train_extra() -> None:
    """Raise a clear ImportError when torch / sb3-contrib (the ``train`` extra) are missing."""
    try:
        import sb3_contrib  # noqa: F401
        import torch  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            f"learned policies need torch and sb3-contrib ({exc.name} is missing): {INSTALL_HINT}"
        ) from exc


# ------------------------------------------------------------------ logits
class Logits(Protocol):
    """The actor: an encoded observation (``FEATURE_SIZE`` float32) -> its action logits."""

    def __call__(self, features: np.ndarray) -> np.ndarray: ...


class TorchLogits:
    """An SB3 (MaskablePPO) model's actor logits, computed with torch (the ``train`` extra).

    The one place that reads an SB3 policy's logits: the PPO policies, the per-role
    (marl) policies and the ONNX export all go through the same three calls.
    """

    def __init__(self, model: Any) -> None:
        import torch

        self.model = model
        self._torch = torch

    def __call__(self, features: np.ndarray) -> np.ndarray:
        torch, policy = self._torch, self.model.policy
        with torch.no_grad():
            obs = torch.as_tensor(np.asarray(features), dtype=torch.float32).reshape(1, -1)
            latent = policy.mlp_extractor.forward_actor(
                policy.extract_features(obs, policy.pi_features_extractor)
            )
            return policy.action_net(latent)[0].numpy()


def onnx_session(path: str | Path) -> Any:
    """An onnxruntime session for one observation at a time (a clear error for a file that is no model)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1  # one observation at a time: threads only add overhead
    options.inter_op_num_threads = 1
    try:
        return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime's own exception types (InvalidProtobuf, Fail, ...)
        reason = str(exc).strip().splitlines()[-1]
        raise ValueError(f"{path} is not an ONNX model ({reason})") from None


class OnnxLogits:
    """An exported actor (``.onnx``, :mod:`training.export`) run by onnxruntime: no torch needed."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.session = onnx_session(path)
        self.n_actions = int(self.session.get_outputs()[0].shape[-1])

    def __call__(self, features: np.ndarray) -> np.ndarray:
        batch = np.asarray(features, dtype=np.float32).reshape(1, -1)
        return self.session.run([ONNX_OUTPUT], {ONNX_INPUT: batch})[0][0]


class OnnxRecurrentLogits:
    """An exported recurrent actor: (features, hidden state) -> (logits, next hidden state), the
    state carried by the caller (:class:`policies.fast.RecurrentTeamPolicy`); onnxruntime, no torch."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.session = onnx_session(path)
        names = {i.name: i for i in self.session.get_inputs()}
        if ONNX_HIDDEN_IN not in names:
            raise ValueError(f"{path} is not a recurrent actor (no {ONNX_HIDDEN_IN!r} input)")
        self.hidden_size = int(names[ONNX_HIDDEN_IN].shape[-1])

    def __call__(self, features: np.ndarray, hidden: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        logits, after = self.session.run(
            [ONNX_OUTPUT, ONNX_HIDDEN_OUT],
            {
                ONNX_INPUT: np.asarray(features, dtype=np.float32).reshape(1, -1),
                ONNX_HIDDEN_IN: np.asarray(hidden, dtype=np.float32).reshape(1, -1),
            },
        )
        return logits[0], after[0]


TIE_TOLERANCE = 1e-5
"""Logits this close count as tied, and a tie goes to the lowest action index. Entities with
identical features get identical logits from the shared heads; torch and onnxruntime round
such ties differently in the last bits, and the lowest index is what torch's argmax picked."""


def best_action(logits: np.ndarray, mask: np.ndarray | None = None) -> int:
    """The most probable action the mask allows (all, without a mask); ties: the lowest index."""
    scores = np.asarray(logits, np.float64)
    if mask is not None:
        scores = np.where(np.asarray(mask, bool), scores, -np.inf)
    return int(np.flatnonzero(scores >= scores.max() - TIE_TOLERANCE)[0])


# ------------------------------------------------------------------ metadata
def metadata_path(model_path: Path) -> Path:
    """The JSON written beside a model: ``model.zip`` -> ``model.json``."""
    return model_path.with_suffix(".json")


def read_metadata(model_path: Path) -> dict[str, Any]:
    path = metadata_path(model_path)
    return json.loads(path.read_text()) if path.exists() else {}


# ------------------------------------------------------------------ policies
class PPOPolicy(BasePolicy):
    """A MaskablePPO model on the flat track: one Discrete(39) action per tick.

    Deterministic: the most probable action among those the mask allows (or
    among all 39 for a model trained with ``--no-mask``, which is graded as it
    is, invalid actions included). A model trained with ``--prune`` (``prune=True``,
    read from its metadata) acts on the mask minus :func:`~policies.pruning.prune_dominated`'s
    dominated actions, as it was trained.
    """

    name = "ppo"
    tracks: tuple[str, ...] = ("flat",)

    def __init__(
        self, logits: Logits, masked: bool = True, name: str | None = None, prune: bool = False
    ) -> None:
        super().__init__()
        self.logits = logits
        """The actor (:class:`TorchLogits` or :class:`OnnxLogits`): features -> the 39 logits
        (or the team's 21+16+4 concatenated)."""
        self.masked = masked
        self.prune = prune
        self.encoder = FeatureEncoder()
        self.metadata: dict[str, Any] = {}
        if name:
            self.name = name

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        logits = self.logits(self.encoder(observation))
        if self.prune:
            action_mask = prune_dominated(observation, action_mask)
        return best_action(logits, action_mask if self.masked else None)


class TeamPPOPolicy(PPOPolicy):
    """A MaskablePPO model of the team env (``MultiDiscrete([21, 16, 4])``) on the team track.

    The grader's team track drives the AEC env one role at a time, and each role
    sees only its own observation; the model was trained to choose all three
    role actions at once from the composed observation. So:

    1. When a tick's first role asks (the tick counter moved), the policy reads
       the composed observation of the bound simulator (``reset(hospital=...)``,
       read-only) and the team mask -- exactly what the team env showed the
       model -- and caches the model's logits.
    2. Each role gets its component of the joint argmax. Roles act in order and
       each action is carried out at once, so an earlier role can make a later
       component impossible (e.g. triage takes the last ICU bed the bed manager
       meant for a transfer). The team env would turn that into a free no-op
       (a conflict); the AEC env would charge -1. Instead the role plays its
       best action *valid now*: the argmax of the cached logits over the mask
       the AEC env gives it. Re-running the model on the changed state was
       rejected: the model never saw mid-tick states in training.
    """

    name = "team_ppo"
    tracks: tuple[str, ...] = ("team",)

    def __init__(
        self, logits: Logits, masked: bool = True, name: str | None = None, prune: bool = False
    ) -> None:
        if prune:
            raise ValueError("pruning is defined on the flat track only")
        super().__init__(logits, masked, name)
        starts = np.cumsum([0] + [ROLE_ACTION_COUNTS[r] for r in ROLES])
        self._segment = {role: slice(starts[i], starts[i + 1]) for i, role in enumerate(ROLES)}
        self._builder: ObservationBuilder | None = None
        self._cache_key: tuple[int, int] | None = None
        self._joint_logits = np.zeros(0, np.float32)  # (41,) the tick's logits
        self._joint_planned = np.zeros(len(ROLES), np.int64)  # (3,) the tick's joint action
        self.replanned = 0  # this episode's role actions made invalid by earlier roles, and replaced

    def reset(self, seed: int | None = None, hospital: Hospital | SimulatorHandle | None = None) -> None:
        super().reset(seed, hospital)
        # Built on the read-only handle (no future for policies), never the raw simulator.
        self._builder = ObservationBuilder(self.hospital) if self.hospital is not None else None
        self._cache_key = None
        self.replanned = 0

    def team_action(self, observation: Mapping[str, np.ndarray], team_mask: np.ndarray) -> np.ndarray:
        """The joint (triage, bed_manager, ventilator_officer) action, as the team env takes it."""
        logits = self.logits(self.encoder(observation))
        return self._joint_argmax(logits, np.asarray(team_mask, dtype=bool))

    def _joint_argmax(self, logits: np.ndarray, team_mask: np.ndarray | None) -> np.ndarray:
        mask = team_mask if self.masked and team_mask is not None else None
        return np.array(
            [
                best_action(logits[self._segment[r]], None if mask is None else mask[self._segment[r]])
                for r in ROLES
            ]
        )

    def act_role(self, role: str, observation: np.ndarray, action_mask: np.ndarray) -> int:
        h = self.hospital
        if h is None or self._builder is None:
            raise RuntimeError(
                "team_ppo needs the simulator: call reset(seed, hospital=env.hospital) (the grader does)"
            )
        key = (id(h), h.tick_count)
        if key != self._cache_key:
            flat = h.flat_mask()
            team_mask = np.array([m for r in ROLES for m in h.role_mask(r, flat)], dtype=bool)
            logits = self.logits(self.encoder(self._builder.composed()))
            self._joint_logits = logits
            self._joint_planned = self._joint_argmax(logits, team_mask)
            self._cache_key = key
        planned = int(self._joint_planned[ROLES.index(role)])
        mask = np.asarray(action_mask, dtype=bool)
        if not self.masked or mask[planned]:
            return planned
        self.replanned += 1
        return best_action(self._joint_logits[self._segment[role]], mask)

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        raise NotImplementedError("team_ppo plays the team track (grade with track='team')")


# ------------------------------------------------------------------- loading
def load_model(path: str | Path) -> Any:
    """A MaskablePPO model from a ``.zip`` (CPU; schedules replaced: only inference is needed)."""
    require_train_extra()
    from sb3_contrib import MaskablePPO

    # The saved lr/clip schedules are pickled closures; inference never calls them,
    # and replacing them avoids unpickling code across Python versions.
    custom = {"learning_rate": 0.0, "lr_schedule": lambda _: 0.0, "clip_range": lambda _: 0.0}
    return MaskablePPO.load(str(path), device="cpu", custom_objects=custom)


def model_file(path: Path) -> Path:
    """The model a path names: the file itself, or the first of :data:`MODEL_FILES` in a run directory.

    Raises FileNotFoundError saying what was looked for where.
    """
    if path.is_dir():
        for name in MODEL_FILES:
            if (path / name).is_file():
                return path / name
        raise FileNotFoundError(
            f"no model in directory {path}: looked for {', '.join(MODEL_FILES)} (train ppo), "
            "model.json (train marl) and rllib.json (train rllib)"
        )
    if not path.exists():
        raise FileNotFoundError(f"no file or directory {path}")
    if path.suffix not in (".zip", ".onnx"):
        raise ValueError(f"{path} is not a model: expected a run directory, a .zip (MaskablePPO) or a .onnx")
    return path


def _track_of(meta: dict[str, Any], n_actions: int) -> str:
    return meta.get("track", "team" if n_actions == sum(ROLE_ACTION_COUNTS.values()) else "flat")


def load_path(path: str | Path, name: str | None = None, backend: str = "auto") -> PPOPolicy | SB3ModelPolicy:
    """A learned policy from a run directory, a model ``.zip`` or an exported ``.onnx``.

    A ``.zip`` that does not observe the trainer's features is a user's SB3 / sb3-contrib model:
    loaded by the algorithm that saved it and fed its own observation format
    (:func:`policies.sb3_models.load_sb3_zip`), or refused with one line.

    ``backend``: ``"onnx"`` (the ``.onnx`` beside or instead of the ``.zip``; no torch),
    ``"torch"`` (the ``.zip``; the ``train`` extra), or ``"auto"``: ONNX when the file exists,
    else torch. The track comes from the metadata (``.json`` beside the model) or the action count.
    A policy loaded by path is named by its path unless ``name`` or the caller says otherwise.
    """
    if backend not in ("auto", "onnx", "torch"):
        raise ValueError(f"backend must be 'auto', 'onnx' or 'torch', got {backend!r}")
    file = model_file(Path(path))
    data = zip_data(file) if file.suffix == ".zip" else None
    if data is not None and not is_trainer_checkpoint(data, FEATURE_SIZE):
        return load_sb3_zip(file, name=name or str(path))  # a user's model: its algorithm, its observation
    meta = read_metadata(file)
    version = meta.get("encoder_version", ENCODER_VERSION)
    if version != ENCODER_VERSION:
        raise ValueError(
            f"{file} was trained on feature encoder v{version}; this package has "
            f"v{ENCODER_VERSION}: retrain it (see policies/checkpoints/README.md)"
        )
    onnx_file = file.with_suffix(".onnx")
    logits: Logits
    if backend == "onnx" or (backend == "auto" and onnx_file.is_file()):
        if not onnx_file.is_file():
            raise FileNotFoundError(f"no exported actor {onnx_file} (hospital-marl train export writes it)")
        logits = OnnxLogits(onnx_file)
        n_actions = logits.n_actions
    else:
        if file.suffix != ".zip":
            raise FileNotFoundError(f"no SB3 model {file.with_suffix('.zip')} beside {file}")
        if data is None:  # SB3 itself would fail an assert deep inside ``load``
            raise ValueError(f"{file} is not a model: no Stable-Baselines3 save (no readable 'data' in it)")
        try:
            model = load_model(file)
        except (zipfile.BadZipFile, KeyError, ValueError) as exc:
            raise ValueError(f"{file} is not a MaskablePPO model ({exc})") from None
        logits = TorchLogits(model)
        n_actions = int(sum(getattr(model.action_space, "nvec", [getattr(model.action_space, "n", 0)])))
    track = _track_of(meta, n_actions)
    cls = TeamPPOPolicy if track == "team" else PPOPolicy
    masked = bool(meta.get("masked", True))
    policy = cls(logits, masked=masked, name=name or str(path), prune=bool(meta.get("prune", False)))
    policy.metadata = meta
    return policy


def load_shipped(name: str, backend: str = "auto") -> PPOPolicy:
    """A shipped checkpoint by registered name (:data:`SHIPPED`: ``ppo``, ``team_ppo``, ...)."""
    path = CHECKPOINT_DIR / SHIPPED[name]
    if not path.exists():
        raise FileNotFoundError(f"shipped checkpoint {path} is missing (reinstall hospital-marl)")
    policy = load_path(path, name=name, backend=backend)
    if not isinstance(policy, PPOPolicy):  # every shipped checkpoint is the project trainer's
        raise TypeError(f"shipped checkpoint {path} is not a PPO checkpoint of this package")
    return policy


def learned_factories() -> dict[str, Callable[..., PPOPolicy]]:
    """Registered names -> factories (cheap: nothing is loaded until a factory is called).

    ``policies.load("ppo:backend=torch")`` plays the ``.zip`` with torch instead of the ``.onnx``.
    """
    return {name: (lambda name=name, backend="auto": load_shipped(name, backend)) for name in SHIPPED}
