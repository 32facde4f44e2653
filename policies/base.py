"""The policy protocol every baseline, learned and planning policy satisfies.

Two tracks (SPEC §7): on the *flat* track a policy picks one ``Discrete(39)``
action per tick from the composed observation and mask; on the *team* track it
picks one action per role per tick, each from that role's AEC observation and
mask. A model-based policy may receive the simulator at ``reset``; it must
plan only on ``hospital.imagine(seed)`` copies, which redraw the unrevealed future: it is
given a read-only :class:`~hospital_marl.core.hospital.SimulatorHandle` (the present and
``imagine()``), never the episode's simulator or the day's future draws.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np

from hospital_marl.core.actions import N_FLAT_ACTIONS, ROLE_FLAT
from hospital_marl.core.hospital import Hospital, SimulatorHandle
from hospital_marl.envs.observations import BLOCK_BY_KEY, role_slices


def policy_seed(seed: int) -> int:
    """A stochastic policy's own seed for an episode: distinct from the episode's streams (the grader
    seeds every policy with it; a trainer replaying a policy on training days does the same)."""
    return int(np.random.SeedSequence([seed, 0x9011C7]).generate_state(1, np.uint64)[0] >> np.uint64(1))


TRACKS = ("flat", "team")


class PolicyUnavailableError(RuntimeError):
    """The policy cannot decide at all (e.g. its model endpoint is down after its retries):
    grading stops with this error instead of counting every decision as a fault, which would
    grade a day of no-ops as if the policy had played it."""


@runtime_checkable
class Policy(Protocol):
    """What the grader, the CLI and the server need of a policy."""

    name: str

    @property
    def tracks(self) -> tuple[str, ...]:
        """The tracks it plays (``"flat"``, ``"team"``); read-only here, so that a class that
        plays one track may say so with a shorter tuple."""
        ...

    def reset(self, seed: int | None = None, hospital: SimulatorHandle | None = None) -> None:
        """Start an episode; ``seed`` makes a stochastic policy reproducible. ``hospital`` is what
        the grader passes: the read-only handle of the episode's sealed present (or nothing)."""

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        """Flat track: one of the 39 actions."""

    def act_role(self, role: str, observation: np.ndarray, action_mask: np.ndarray) -> int:
        """Team track: the role's action from its AEC observation vector and mask."""


class SeededPolicy:
    """What every policy class shares, whatever its ``reset`` is given: a name, its tracks and an
    own RNG (reseeded per episode). The ED's :class:`BasePolicy` and the radiotherapy track's
    ``BaseRTPolicy`` (given a plan, not a simulator) extend it."""

    name = "base"
    tracks: tuple[str, ...] = ("flat",)

    def __init__(self) -> None:
        self.rng = np.random.default_rng()

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        raise NotImplementedError(f"{self.name} does not play the flat track")

    def act_role(self, role: str, observation: np.ndarray, action_mask: np.ndarray) -> int:
        raise NotImplementedError(f"{self.name} does not play the team track")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, tracks={self.tracks})"


class BasePolicy(SeededPolicy):
    """Default plumbing: an own RNG per episode, and a bound simulator when given."""

    def __init__(self) -> None:
        super().__init__()
        self.hospital: SimulatorHandle | None = None

    def reset(self, seed: int | None = None, hospital: Hospital | SimulatorHandle | None = None) -> None:
        """Seed the episode's RNG and bind the handle (a :class:`Hospital` given directly, as a
        tool replaying an env does, is read only through its :meth:`~Hospital.handle`)."""
        self.rng = np.random.default_rng(seed)
        self.hospital = hospital.handle() if isinstance(hospital, Hospital) else hospital


_ROLE_SLICES = role_slices()


def role_blocks(role: str, observation: np.ndarray) -> dict[str, np.ndarray]:
    """A role's flat AEC observation split back into its named blocks."""
    return {key: observation[sl].reshape(BLOCK_BY_KEY[key].shape) for key, sl in _ROLE_SLICES[role]}


def flat_mask_from_role(role: str, role_mask: np.ndarray) -> np.ndarray:
    """A 39-long mask with only this role's actions (and the no-op) possibly valid."""
    flat = np.zeros(N_FLAT_ACTIONS, dtype=bool)
    flat[list(ROLE_FLAT[role])] = np.asarray(role_mask, dtype=bool)
    return flat


def load_kwargs(spec: str) -> tuple[str, dict[str, Any]]:
    """``"planner:rollouts=8,depth=16"`` -> ("planner", {"rollouts": 8, "depth": 16})."""
    name, _, rest = spec.partition(":")
    kwargs: dict[str, Any] = {}
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        try:
            kwargs[key] = int(value)
        except ValueError:
            try:
                kwargs[key] = float(value)
            except ValueError:
                kwargs[key] = value
    return name, kwargs
