"""The state's mutable arrays share one buffer (one-copy snapshots); growing keeps every value."""

from __future__ import annotations

import numpy as np

from hospital_marl.core.types import (
    EMPTY,
    MUTABLE_FIELDS,
    State,
    copy_state,
    empty_state,
    grow_bounce,
    grow_patients,
    packed_buffer,
)


def filled_state() -> State:
    st = empty_state(3, 7, 5, 4)
    rng = np.random.default_rng(0)
    for name in MUTABLE_FIELDS:
        array = getattr(st, name)
        array[...] = rng.integers(-1, 50, array.shape)
    return st


def test_empty_state__is_empty_and_packed_in_one_buffer() -> None:
    st = empty_state(2, 5, 10)
    buffer = packed_buffer(st)
    assert buffer is not None
    assert all(np.shares_memory(getattr(st, name), buffer) for name in MUTABLE_FIELDS)
    assert (st.beds == EMPTY).all() and (st.bounce == -1).all()
    assert not st.pat.any() and not st.queue.any() and not st.scalars.any() and not st.floats.any()
    # the arrays do not overlap one another
    pairs = [(a, b) for a in MUTABLE_FIELDS for b in MUTABLE_FIELDS if a < b]
    assert not any(np.shares_memory(getattr(st, a), getattr(st, b)) for a, b in pairs)


def test_copy_state__copies_every_mutable_value_and_shares_nothing_mutable() -> None:
    st = filled_state()
    clone = copy_state(st)
    for name in MUTABLE_FIELDS:
        assert np.array_equal(getattr(clone, name), getattr(st, name))
        assert not np.shares_memory(getattr(clone, name), getattr(st, name))
    assert packed_buffer(clone) is not None


def test_grow__keeps_values_pads_empty_and_stays_packed() -> None:
    st = filled_state()
    wider = grow_patients(st, 9)
    assert wider.pat.shape == (3, 9, st.pat.shape[2]) and packed_buffer(wider) is not None
    assert np.array_equal(wider.pat[:, :7], st.pat) and not wider.pat[:, 7:].any()
    assert np.array_equal(wider.queue[:, :7], st.queue) and np.array_equal(wider.scalars, st.scalars)
    assert np.array_equal(wider.quantile[:, :, :7], st.quantile) and not wider.quantile[:, :, 7:].any()
    longer = grow_bounce(st, 6)
    assert longer.bounce.shape == (3, 2, 6) and packed_buffer(longer) is not None
    assert np.array_equal(longer.bounce[:, :, :4], st.bounce) and (longer.bounce[:, :, 4:] == -1).all()
    assert np.array_equal(longer.beds, st.beds) and np.array_equal(longer.floats, st.floats)
