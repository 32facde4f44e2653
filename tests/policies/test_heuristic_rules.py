"""The heuristic's rules on hand-built observations (what ``policies.heuristic`` documents:
most severe first, then longest waiting; critical patients to ICU, a general bed when no
ICU bed is free (the flat rule: only when no non-critical patient could take it); life
first: a needed ventilator beats an admission; early discharge only under pressure), their
Python face's input checks, and the compiled code's cache guard."""

from __future__ import annotations

import numpy as np
import pytest

from hospital_marl.core.actions import FLAT_OF, NOOP, Kind
from hospital_marl.envs.observations import BLOCKS
from policies import heuristic_kernel as hk
from policies.heuristic import ROLE_RULES, HeuristicPolicy, flat_heuristic_action


def _obs(**blocks: object) -> dict[str, np.ndarray]:
    obs = {b.key: np.zeros(b.shape, np.float32) for b in BLOCKS}
    for key, value in blocks.items():
        obs[key][...] = value
    return obs


def _queue(*patients: tuple[int, int, int]) -> np.ndarray:
    """Waiting-queue rows [severity, condition, wait], first come first served."""
    q = np.zeros((10, 3), np.float32)
    q[: len(patients)] = patients
    return q


def _mask(*valid: int) -> np.ndarray:
    mask = np.zeros(39, bool)
    mask[[NOOP, *valid]] = True
    return mask


def _admit(kind: Kind, slot: int) -> int:
    return FLAT_OF[(kind, slot)]


ALL_ADMISSIONS = [_admit(k, s) for k in (Kind.ADMIT_GENERAL, Kind.ADMIT_ICU) for s in range(10)]


def test_triage__admits_the_most_severe_then_the_longest_waiting() -> None:
    obs = _obs(waiting_queue=_queue((2, 1, 9), (3, 1, 1), (3, 1, 4), (1, 1, 20)), capacity=(5, 0, 0, 4))
    assert flat_heuristic_action(obs, _mask(*ALL_ADMISSIONS[:10])) == _admit(Kind.ADMIT_GENERAL, 2)


def test_triage__critical_patient_to_icu_or_else_to_a_general_bed() -> None:
    """The triage role's rule (the team track: it acts every tick)."""
    obs = _obs(waiting_queue=_queue((3, 1, 5), (5, 2, 0)))
    assert flat_heuristic_action(obs, _mask(*ALL_ADMISSIONS)) == _admit(Kind.ADMIT_ICU, 1)
    no_icu_bed = _mask(*ALL_ADMISSIONS[:10])
    assert ROLE_RULES["triage"](obs, no_icu_bed)[0] == _admit(Kind.ADMIT_GENERAL, 1)


def test_flat_heuristic__without_an_icu_bed_the_general_bed_goes_to_a_non_critical_patient() -> None:
    """One action a tick: a general bed is adequate care for the severity-3 patient and not for
    the critical one (docs/reference-policies.md), so the flat rule admits the former."""
    obs = _obs(waiting_queue=_queue((3, 1, 5), (5, 2, 0)))
    assert flat_heuristic_action(obs, _mask(*ALL_ADMISSIONS[:10])) == _admit(Kind.ADMIT_GENERAL, 0)


def test_nothing_valid__no_op() -> None:
    obs = _obs(waiting_queue=_queue((5, 2, 3)))
    assert flat_heuristic_action(obs, _mask()) == NOOP


def test_ventilator__a_needing_icu_patient_beats_a_critical_admission() -> None:
    obs = _obs(
        waiting_queue=_queue((5, 1, 2)),
        icu_occupancy=(4, 0, 0, 0, 0),
        icu_needs_vent=(1, 0, 0, 0, 0),
        icu_on_vent=(0, 0, 0, 0, 0),
    )
    ventilate = FLAT_OF[(Kind.VENTILATE, 0)]
    assert flat_heuristic_action(obs, _mask(ventilate, *ALL_ADMISSIONS)) == ventilate
    on_vent = {**obs, "icu_on_vent": np.array([1, 0, 0, 0, 0], np.float32)}  # nobody needs one now
    assert flat_heuristic_action(on_vent, _mask(ventilate, *ALL_ADMISSIONS)) == _admit(Kind.ADMIT_ICU, 0)


def test_bed_manager__early_discharge_only_when_the_ward_is_full_and_a_serious_patient_waits() -> None:
    board = np.zeros(20, np.float32)
    board[:3] = (3, 2, 1)  # the least severe occupied bed is board position 2 (from the bottom: 0)
    early = FLAT_OF[(Kind.EARLY_DISCHARGE, 0)]
    full = _obs(bed_occupancy=board, waiting_queue=_queue((3, 1, 2)), capacity=(0, 1, 0, 1))
    assert ROLE_RULES["bed_manager"](full, _mask(early))[0] == early
    room = {**full, "capacity": np.array([1, 1, 0, 1], np.float32)}
    assert ROLE_RULES["bed_manager"](room, _mask(early))[0] == NOOP
    mild_queue = {**full, "waiting_queue": _queue((2, 1, 2))}
    assert ROLE_RULES["bed_manager"](mild_queue, _mask(early))[0] == NOOP


def test_flat_heuristic_action__rejects_bad_shapes_with_a_clear_error() -> None:
    obs = _obs()
    with pytest.raises(ValueError, match="39"):
        flat_heuristic_action(obs, np.ones(38, bool))
    with pytest.raises(ValueError, match="shapes"):
        flat_heuristic_action({**obs, "waiting_queue": np.zeros((9, 3))}, _mask())
    with pytest.raises(ValueError, match="entries"):
        HeuristicPolicy().act_role("triage", np.zeros(5, np.float32), np.ones(21, np.int8))
    with pytest.raises(ValueError, match="unknown role"):
        HeuristicPolicy().act_role("porter", np.zeros(5, np.float32), np.ones(21, np.int8))


def test_check_cache__empties_the_compiled_cache_when_the_kernel_sources_change(monkeypatch) -> None:
    flushed: list[object] = []
    for dispatcher in hk._DISPATCHERS:
        cache = dispatcher._cache
        monkeypatch.setattr(cache, "flush", lambda c=cache: flushed.append(c))  # record, flush nothing
    assert hk.check_cache() is False  # compiled from these sources (checked at import)
    assert hk.check_cache("other sources") is True
    assert len(flushed) == len(hk._DISPATCHERS)
    assert hk.check_cache() is True  # back to these sources: compiled again
    assert hk.check_cache() is False
