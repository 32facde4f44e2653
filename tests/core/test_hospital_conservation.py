"""Conservation (SPEC §2): arrivals = waiting + general + ICU + discharged + away + died, at every tick.

Checked from the census and from the counters (discharged = discharges,
died = deaths, away = early_discharges - bounce_backs), together with the
bed, ventilator, critical-patient and waiting-time bookkeeping
(:func:`tests.helpers.assert_conservation`).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hospital_marl import ROLES, Hospital
from hospital_marl.core.actions import N_FLAT_ACTIONS
from tests.helpers import (
    SCENARIOS_AND_TINY,
    admit_then_discharge_early,
    assert_conservation,
    masked_random_flat,
    masked_random_role,
    scenario_id,
)


@pytest.mark.parametrize("p_unmasked", [0.0, 0.3, 1.0], ids=["masked", "mostly_masked", "unmasked"])
@pytest.mark.parametrize("scenario", SCENARIOS_AND_TINY, ids=scenario_id)
def test_conservation__holds_after_every_tick_of_random_flat_play(scenario, p_unmasked: float) -> None:
    for seed in (0, 1):
        h = Hospital(scenario)
        h.reset(seed)
        rng = np.random.default_rng(seed)
        assert_conservation(h)
        while not h.done:
            h.act_flat(masked_random_flat(h.flat_mask(), rng, p_unmasked))
            assert_conservation(h)
            h.tick()
            assert_conservation(h)


@pytest.mark.parametrize("scenario", SCENARIOS_AND_TINY, ids=scenario_id)
def test_conservation__holds_after_every_role_action_of_aec_play(scenario) -> None:
    h = Hospital(scenario)
    h.reset(7)
    rng = np.random.default_rng(7)
    while not h.done:
        for role in ROLES:
            h.act(role, masked_random_role(h.role_mask(role), rng, p_unmasked=0.2))
            assert_conservation(h)
        h.tick()
        assert_conservation(h)


@pytest.mark.parametrize("scenario", SCENARIOS_AND_TINY, ids=scenario_id)
def test_conservation__holds_with_early_discharges_and_bounce_backs(scenario) -> None:
    """The early-discharge loop sends many patients away; some bounce back to the queue."""
    bounce_backs = 0
    for seed in range(3):
        h = Hospital(scenario)
        h.reset(seed)
        while not h.done:
            h.act_flat(admit_then_discharge_early(h))
            h.tick()
            assert_conservation(h)
        assert h.counters.early_discharges > 0
        bounce_backs += h.counters.bounce_backs
    assert bounce_backs > 0, "no bounce-back happened: the away -> waiting path went untested"


@st.composite
def per_tick_choices(draw):
    """Per tick: (masked?, k). Masked: the k-th valid action (mod count); else the raw int k."""
    return draw(
        st.lists(st.tuples(st.booleans(), st.integers(-3, N_FLAT_ACTIONS + 3)), min_size=1, max_size=100)
    )


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    scenario=st.sampled_from(SCENARIOS_AND_TINY),
    seed=st.integers(0, 2**32 - 1),
    choices=per_tick_choices(),
    actions_per_tick=st.integers(1, 3),
)
def test_conservation__holds_for_any_seed_and_action_sequence(
    scenario, seed, choices, actions_per_tick
) -> None:
    h = Hospital(scenario)
    h.reset(seed)
    for masked, k in choices:
        for _ in range(actions_per_tick):
            if masked:
                valid = [a for a, ok in enumerate(h.flat_mask()) if ok]
                h.act_flat(valid[k % len(valid)])
            else:
                h.act_flat(k)  # possibly out of range: counted invalid, never raised
            assert_conservation(h)
        h.tick()
        assert_conservation(h)
        if h.done:
            break
    assert h.counters.invalid_actions <= h.counters.actions


@pytest.mark.parametrize("scenario", SCENARIOS_AND_TINY, ids=scenario_id)
def test_episode__ends_at_the_shift_or_at_max_deaths(scenario) -> None:
    h = Hospital(scenario)
    h.reset(0)
    ticks = 0
    while not h.done:
        h.tick()  # nobody is ever admitted: deaths pile up
        ticks += 1
    if h.terminated:
        assert h.counters.deaths >= h.scenario.max_deaths and ticks <= h.scenario.episode_length
    else:
        assert h.truncated and ticks == h.scenario.episode_length
    assert h.terminated != h.truncated
    with pytest.raises(RuntimeError):
        h.tick()
