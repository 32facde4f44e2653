"""Every view is a thin view of one core (SPEC §2, §5): driven with the same seed and the
same decisions, the composed, AEC, team and parallel envs produce the same episode.

A flat action a is replayed in the AEC env as ``flat_to_joint(a)`` (the owning
role acts, the other two no-op), in the team env as that joint action, and in
the parallel env as the same dict. With one acting role per tick there can be
no conflict, so every tick must agree on: the global state (the composed Dict
flattened in ``COMPOSED_KEYS`` order = AEC/parallel ``state()``; each role's
observation = ``state()[ROLE_INDEX[role]]``), the role masks, the tick's team
reward (the composed/team step reward = what every AEC/parallel agent gets),
terminations/truncations, and every counter and metric *except* ``actions``
(and so ``invalid_action_rate``): the flat track counts one action per tick,
the AEC, team and parallel views one per role step (three per tick).
``invalid_actions`` is compared exactly.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

import hospital_marl
from hospital_marl import BUILTIN_SCENARIOS, ROLES
from hospital_marl.envs.observations import (
    BLOCK_OFFSETS,
    COMPOSED_KEYS,
    ROLE_BLOCKS,
    ROLE_INDEX,
    STATE_SIZE,
    ObservationBuilder,
)
from tests.helpers import (
    TINY,
    assert_same_trajectory,
    flat_action_script,
    record_aec,
    record_composed,
    record_parallel,
    record_team,
    scenario_id,
)

SCENARIOS = (*BUILTIN_SCENARIOS, TINY)
SEED = 17
RECORDERS = {"aec": record_aec, "team": record_team, "parallel": record_parallel}


@pytest.fixture(scope="module")
def composed_runs() -> dict:
    """Per scenario: the flat actions (random masked + some invalid) and the composed trajectory."""
    runs = {}
    for scenario in SCENARIOS:
        actions = flat_action_script(scenario, SEED, p_unmasked=0.2)
        runs[scenario_id(scenario)] = (actions, record_composed(scenario, SEED, actions))
    return runs


def test_script__exercises_invalid_and_every_role(composed_runs) -> None:
    for actions, trajectory in composed_runs.values():
        assert trajectory[-1]["counters"]["invalid_actions"] > 0
        roles = {hospital_marl.flat_to_role(a).role for a in actions}
        assert set(ROLES) <= roles


@pytest.mark.parametrize("view", RECORDERS)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=scenario_id)
def test_view__matches_composed_trajectory(composed_runs, view: str, scenario) -> None:
    actions, composed = composed_runs[scenario_id(scenario)]
    assert_same_trajectory(composed, RECORDERS[view](scenario, SEED, actions))


@pytest.mark.parametrize("scenario", SCENARIOS, ids=scenario_id)
def test_aec__counts_one_action_per_role_step_and_composed_one_per_tick(scenario) -> None:
    actions = flat_action_script(scenario, SEED)
    comp = record_composed(scenario, SEED, actions)
    env = hospital_marl.env(scenario=scenario)
    env.reset(seed=SEED)
    for action in actions:
        for role in ROLES:
            env.step(hospital_marl.flat_to_joint(action)[role])
    ticks = len(comp) - 1
    h = env.unwrapped.hospital
    assert h.counters.actions == 3 * ticks and h.counters.ticks == ticks
    assert h.counters.invalid_actions == comp[-1]["counters"]["invalid_actions"]


def test_global_state__is_the_composed_blocks_in_composed_keys_order() -> None:
    sizes = [int(np.prod(BLOCK_OFFSETS[key][2])) for key in COMPOSED_KEYS]
    assert sum(sizes) == STATE_SIZE
    starts = np.cumsum([0, *sizes[:-1]])
    assert [BLOCK_OFFSETS[key][0] for key in COMPOSED_KEYS] == list(starts)
    for role, keys in ROLE_BLOCKS.items():
        expected = np.concatenate([np.arange(BLOCK_OFFSETS[k][0], BLOCK_OFFSETS[k][1]) for k in keys])
        np.testing.assert_array_equal(ROLE_INDEX[role], expected)


@pytest.mark.parametrize("scenario", ("surge", TINY), ids=scenario_id)
def test_aec_state__matches_a_fresh_core_state_mid_tick(scenario) -> None:
    """Mid-tick (after a role acted) the AEC state and the next role's observation are current."""
    env = hospital_marl.env(scenario=scenario)
    env.reset(seed=4)
    h = env.unwrapped.hospital
    rng = np.random.default_rng(4)
    for _ in range(60 * len(ROLES)):
        role = env.agent_selection
        mask = env.observe(role)["action_mask"]
        env.step(int(rng.choice(np.flatnonzero(mask))))
        if any(env.terminations.values()) or any(env.truncations.values()):
            break
        fresh = ObservationBuilder(copy.deepcopy(h))  # no caches: built from the state itself
        np.testing.assert_array_equal(env.state(), fresh.state())
        nxt = env.agent_selection
        np.testing.assert_array_equal(env.observe(nxt)["observation"], fresh.state()[ROLE_INDEX[nxt]])
