"""The parameter table of the batch loops (issue #28): a scenario distribution's envs each read
their own row of stacked :class:`Params`, so one compiled call steps them all. A row must be
exactly its scenario's parameters, and have their type (else every rule compiles twice)."""

from __future__ import annotations

import numpy as np
import pytest
from numba import typeof

from hospital_marl.core.clinical import DEFAULT_CLINICAL
from hospital_marl.core.rewards import DEFAULT_REWARDS
from hospital_marl.core.scenarios import Burst, Scenario
from hospital_marl.core.types import Params, make_params, params_row, set_params_row, stack_params

SHORT = Scenario(name="short_small", general_beds=8, icu_beds=2, ventilators=1, episode_length=60,
                 service_profile=(0.5, 1.0))  # fmt: skip
LONG = Scenario(name="long_burst", episode_length=100, burst=Burst(20, 30, 1.5, 2, (0.0, 0.1, 0.3, 0.4, 0.2)))


def _params(scenario: Scenario) -> Params:
    return make_params(scenario, DEFAULT_CLINICAL, DEFAULT_REWARDS, scenario.episode_length)


def _assert_row_is(row: Params, params: Params, length: int) -> None:
    for name, got, want in zip(Params._fields, row, params):
        if name in ("rates", "service"):  # one value per tick: padded with zeros past the day's end
            assert got.shape == (length,), name
            np.testing.assert_array_equal(got[: len(want)], want, err_msg=name)
            assert not got[len(want) :].any(), name
        else:
            np.testing.assert_array_equal(got, want, err_msg=name)


def test_params_row__is_each_stacked_scenario_with_per_tick_arrays_padded() -> None:
    short, long = _params(SHORT), _params(LONG)
    table = stack_params([short, long, short], 100)
    assert table.ints.shape[0] == 3 and table.rates.shape == (3, 100)
    _assert_row_is(params_row(table, 0), short, 100)
    _assert_row_is(params_row(table, 1), long, 100)
    _assert_row_is(params_row(table, 2), short, 100)


def test_params_row__has_the_compiled_type_of_make_params() -> None:
    """The batch loops hand the rules a row of the table; the scalar env hands them make_params'
    result. Same numba type = one compiled specialisation of every rule serves both."""
    table = stack_params([_params(SHORT), _params(LONG)], 100)
    assert typeof(params_row(table, 1)) == typeof(_params(LONG))
    assert not table.action_kind.flags.writeable and table.ints.flags.writeable


def test_set_params_row__rewrites_one_row_only_and_clears_the_old_ticks() -> None:
    short, long = _params(SHORT), _params(LONG)
    table = stack_params([long, long], 100)
    set_params_row(table, 1, short)
    _assert_row_is(params_row(table, 1), short, 100)  # the long day's ticks 60..99 are zero again
    _assert_row_is(params_row(table, 0), long, 100)
    set_params_row(table, 1, long)
    _assert_row_is(params_row(table, 1), long, 100)


def test_set_params_row__refuses_what_does_not_fit_the_table() -> None:
    table = stack_params([_params(SHORT)], 60)
    with pytest.raises(ValueError, match="100 ticks"):
        set_params_row(table, 0, _params(LONG))
    foreign = _params(SHORT)._replace(action_kind=_params(SHORT).action_kind.copy())
    with pytest.raises(ValueError, match="action table"):
        set_params_row(table, 0, foreign)
